//! llama-swap-server: a priority-aware model-swapping proxy.
//!
//! It reads llama-swap's `config.yaml`, starts the upstream model server a request
//! names, stops the ones in the way, and ranks the requests that must wait by
//! priority: the `X-Priority` header, capped by the operator's trust rules and
//! floored by the model's configured priority. What it promises is in
//! `docs/DESIGN.md`; how a request travels through these modules is in
//! `docs/ARCHITECTURE.md`.
//!
//! # Serving a configuration
//!
//! ```
//! use llama_swap_server::config::Config;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // llama-swap's YAML; `Config::loader().file("config.yaml")` reads it from a file.
//! let yaml = "models:\n  qwen:\n    cmd: llama-server --port ${PORT} -m qwen.gguf\n";
//! let loaded = Config::loader().yaml("config.yaml", yaml).load()?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! let addr = listener.local_addr()?;
//! let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
//! let server = tokio::spawn(llama_swap_server::serve(listener, loaded.config, async {
//!     let _ = stopped.await;
//! }));
//!
//! // Nothing is started until a request names a model.
//! let health = reqwest::get(format!("http://{addr}/health")).await?.text().await?;
//! assert_eq!(health, "OK");
//!
//! // Shutdown drains the requests in flight and stops every upstream.
//! let _ = stop.send(());
//! server.await??;
//! # Ok(())
//! # }
//! ```
//!
//! # Map of the crate
//!
//! From the request's side down: each module imports only modules below it
//! (unit tests aside), so the pure parts at the bottom know nothing of the
//! HTTP layer, processes or the actor.
//!
//! The library's surface is [`serve`] and its variants with their options, the
//! [`config`] loader, the request [`History`], [`logging`] and [`version`]; the
//! modules below are the crate's own (the `#[doc(hidden)]` `testing` module opens
//! what the integration tests and benchmarks drive directly).
//!
//! | module | owns |
//! |---|---|
//! | `serve` | the entry point: serve a config on a listener, reload, drain, stop |
//! | `api` | the HTTP surface: routes, auth, model extraction, error envelopes, the loading stream, the UI and its event stream, handlers |
//! | `selection` | the run-time half of renaming: the active profile, the selectors' picks and spillover reservations |
//! | `peers` | other servers whose models requests are forwarded to: clients, pool choice, in-flight counts |
//! | [`logging`] | the proxy's own log: history for `/logs`, stdout per `logToStdout`, `logLevel`, `logTimeFormat` |
//! | `router` | the actor that owns the scheduler and turns its decisions into effects; tickets and leases |
//! | `activity` | requests in flight and the ring of finished ones, with usage read from responses |
//! | `capture` | request/response captures: a bounded, compressed buffer (`captureBuffer`) |
//! | `store` | the history: `store.path`'s SQLite database, activity queries and stats |
//! | `metrics` | Prometheus metrics with bounded labels (bands, configured models) |
//! | [`config`] | llama-swap YAML: parsing, macros, validation, the resolved configuration |
//! | `scheduler` | the pure state machine: queue, reservations, slots, swaps, the decision tree |
//! | `upstream` | one supervisor per model: spawn, health check, stop, logs |
//! | `proxy` | the streaming reverse proxy: transport timeouts, TLS, the body that owns the lease |
//! | `launcher` | the contract between the router and whatever runs upstream processes |
//! | `policy` | eviction policies (groups, matrix): which models must stop for another to run |
//! | `filters` | request body filters: `stripParams`, `setParams`, `setParamsByID` |
//! | `priority` | a request's priority: `X-Priority` parsing, trust caps, the effective value, metric bands |
//! | `names` | where a requested name leads (profile pin, selector, local model, peer model): the one resolution, used by the config's checks and the request path; pure |

mod activity;
mod api;
mod capture;
pub mod config;
mod errors;
mod filters;
mod hardware;
mod launcher;
pub mod logging;
mod metrics;
mod names;
mod peers;
mod policy;
mod priority;
mod proxy;
mod router;
mod scheduler;
mod selection;
mod serve;
mod store;
mod upstream;
pub mod version;

pub use api::HttpOptions;
pub use errors::error_chain;
pub use serve::{
    ConfigSources, ConfigWatcher, ListenAddr, ListenError, ServeError, ServeOptions, TlsError,
    TlsFiles, serve, serve_reloading, serve_watching, serve_with,
};
pub use store::{History, Retention, StoreError, StoreSettings};
pub use upstream::{MemoryHint, memory_hints};

#[doc(hidden)]
pub mod testing;
