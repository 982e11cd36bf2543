//! The HTTP surface: model extraction, authentication, error envelopes and the
//! endpoint handlers in front of the router.
//!
//! Three folders, in the order a request meets them:
//!
//! - `front`: the one layer every request passes (request id, access log,
//!   CORS preflight, loop check, API keys and their failure limit);
//! - `model`: the model request path (extract, rename, prepare, call; the
//!   body limits, the loading stream, peers, websockets, ComfyUI, `/upstream`);
//! - `manage`: the management surface (info, profiles, logs, events,
//!   activity, metrics, the web UI).
//!
//! Beside them: `routes` (the endpoint table and the direct call of the model
//! endpoints), `paths` (the model endpoints' paths, which `routes` and the key
//! rules share), `state` (what the handlers share) and `error` (the envelopes).
//!
//! Handlers hold no scheduling state: they parse the request, submit it to the
//! [`RouterHandle`](crate::router::RouterHandle), wait for the grant and hand
//! the request to the [`proxy`](crate::proxy) with the lease moved into the
//! response body.
//!
//! # Endpoints
//!
//! | endpoint | what it does |
//! |---|---|
//! | `POST /v1/chat/completions`, `/v1/completions`, `/v1/responses`, `/v1/embeddings`, `/v1/messages[/count_tokens]`, `/v1/rerank`, `/v1/reranking`, `/rerank`, `/reranking`, `/infill`, `/completion`, `/v1/audio/speech`, `/v1/audio/transcriptions`, `/v1/images/generations`, `/v1/images/edits`, `/sdapi/v1/txt2img`, `/sdapi/v1/img2img`, `/audioapi/v1/tasks/run`, `/v/...` | model from the JSON body, the multipart or url-encoded form, or `?model=`; scheduled, then proxied (`/v` and `/audioapi` prefixes are stripped) |
//! | `GET /props`, `/sdapi/v1/loras`, `GET/POST /v1/audio/voices` | model from `?model=` (or the body) |
//! | any method `/upstream/<model>/<path>` | the longest model ID or alias prefix of the path; body streamed unread; `/upstream/<model>` redirects to `/upstream/<model>/` |
//! | any method `/comfyui`, `/comfyui/`, `/comfyui/<path>` | the model `comfyui_auto` (404 when not configured), prefix stripped; only `/comfyui/` may start it (409 `model_not_loaded` for other paths while it is not ready); `/comfyui` redirects to `/comfyui/` |
//! | `GET /v1/models`, `/models` | listed models (and aliases with `includeAliasesInList`) with `status.value` `loaded`/`unloaded` (and `status.failed: true` for a failed model) and `meta.llamaswap` (metadata, `type`, `aliases`), then selectors (`type: selector`, `strategy`, `targets`) and the active profile's pins (`type: profile`); echoes `Origin` |
//! | `GET /api/profiles`, `PUT /api/profiles/active` | the profiles and the active one; `{"name": "<profile>"}` or `{"name": null}` switches (400 malformed, 404 unknown) |
//! | `GET /running` | `{"running":[{"model","state","cmd","proxy","ttl","name","description"}]}`: models not stopped, and failed ones (`state: "failed"` with `failure`: `reason`, `last_output`, `failures`, `window_s`, `failed_at_ms`, `retry_at_ms`) |
//! | `GET /api/queue` | `{"queue":[{"model","api_key","requested_priority","capped_priority","effective_priority","aged","position","reason","waited_ms"}]}` in position order; `api_key` is the name of the request's key (never the key) or `null`; `reason` is `"slots full"` (its model's `parallel` slots are taken) or `"swap"` |
//! | `POST /api/models/unload[/<model>]`, `GET /unload` | stop all models (or one); answers once stopped |
//! | `GET /logs`, `/logs/stream[/<model>]` | upstream output as `[model] line` text; streams end when the client leaves or the server drains; `?no-history` skips the backlog |
//! | `GET /metrics` | OpenMetrics text of `metrics`: requests by outcome and band, queue depth and wait by model and band, swaps, fence holds, bad `X-Priority` headers, model states |
//! | `GET /api/events` | Server-Sent Events: model states, queue, requests in flight, finished requests, log lines (`manage/events/`) |
//! | `GET /api/activity[?limit=N&model=M]` | the most recent finished requests, newest first (`activity::Finished`) |
//! | `GET /api/metrics/activity` | llama-swap's paged request history (`model`, `start`/`end`, `min_id`/`max_id`, `limit`, `page`, `sort`, `order`; ours: `band`, `key`): `{"data","page","limit","total","total_pages"}`; a bad parameter is a 400 naming it |
//! | `GET /api/metrics/stats[?model=ID]` | totals and prompt/generation speed histograms of the kept history, of one model or of all |
//! | `GET /api/captures/<id>` | the request and response of activity row `id` (llama-swap's shape: headers by canonical name, bodies in base64); 400 for an id that is not a number, 404 when no capture of it is kept |
//! | `POST /api/inflight/<id>/cancel` | stops the request in flight `id` (the `inflight` event's `id`): a waiting one leaves the queue and answers 503 `cancelled`, a running one is cut (`model/cancel.rs`); `{"msg":"ok"}`, 404 when no such request is in flight |
//! | `GET /api/version` | `{"version","commit","build_date"}` of this build (llama-swap's shape) |
//! | `GET /api/hardware` | the host's CPU, memory and GPUs (llama-swap's schema-1 snapshot); 503 when the host cannot be read |
//! | `GET /api/performance[?after=<RFC 3339>]` | the host and GPU samples of the last hour, taken every `performance.every` (llama-swap's `{"enabled","sys_stats","gpu_stats"}`); 503 `{"enabled":false}` with `performance.disabled`; 400 naming `after` when it is not RFC 3339 |
//! | `GET /api/models/config/<model>` | one model's configuration as resolved (macros expanded, defaults filled in); `env` shows the names only |
//! | `POST /api/models/load/<model>` | makes a model ready like a request would (queued at its `X-Priority`); answers once ready |
//! | `POST /api/loadtest` | the web UI's load test, run by the server: `{"requests":[{"model","priority"}],"prompt","max_tokens","session"}`; the requests are made at once in that order (with the caller's key), their progress streamed as Server-Sent Events (`manage/loadtest.rs`); 400 naming a bad field |
//! | `GET /ui`, `/ui/...`, `/favicon.ico` | the web UI, embedded; deep links like `/ui/queue` load the page; without authentication |
//! | `GET /health`, `/wol-health` | `OK`, without authentication |
//! | `GET /`, `GET /upstream` | `302` to `/ui` and `/ui/models` (llama-swap's redirects to its web UI) |
//! | `OPTIONS *` | CORS preflight, without authentication |
//!
//! Before the model is looked up, the name goes through the active profile's
//! pins and then selectors (`names`); on `/upstream` only the pins
//! apply, by longest prefix.
//!
//! `X-Priority` is read on both request paths (`priority`) and never
//! forwarded. With `apiKeys` configured every endpoint except `/health`,
//! `/wol-health`, `/`, the UI's static files (`/ui...`, `/favicon.ico`) and
//! preflights needs a key, which is removed before forwarding; a request carries
//! one credential at most (400 `multiple_credentials`), and an address that
//! keeps presenting wrong keys is answered 429 `too_many_auth_failures` for a
//! while ([`auth_limit`]). Every response
//! carries an `X-Request-Id` (`front/request_id.rs`). Errors are
//! [`ApiError`] envelopes (docs/ERRORS.md), or text or an HTML page for a
//! client whose `Accept` asks for one, as llama-swap's (`front/accept.rs`).
//!
//! # Websockets
//!
//! A websocket handshake on a model route (`/upstream/...`, `/comfyui/...`,
//! `GET /props?model=...`) is proxied both ways and holds its model like a
//! request until the socket closes, unless the model sets
//! `compat.ignoreWebsockets` (`model/websockets.rs`).
//!
//! # Loading state
//!
//! With `sendLoadingState`, a streaming chat request that has to wait is
//! answered at once with `200 text/event-stream` whose frames are chat-completion
//! chunks marked with a top-level `llamaswap` object (`model/loading/`; docs/DESIGN.md).

mod error;
mod front;
mod manage;
mod model;
mod paths;
mod routes;
mod state;

// For the proxy's tests, which need a body's error frames and the envelope of an error.
#[cfg(test)]
pub(crate) use error::{ApiError, stream_error_frames};
pub(crate) use front::auth_limit;
pub(crate) use routes::App;
pub use state::HttpOptions;
pub(crate) use state::{AppState, AppStateBuilder};
