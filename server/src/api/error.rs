//! The typed HTTP error of the server and its JSON envelope (docs/ERRORS.md).
//!
//! Every error a client can see is an [`ApiError`] variant with a fixed status
//! and `code`; its `type` follows from the status as in llama-swap
//! ([`error_type_for`]). The message says what happened and what to do; internal
//! details (socket errors, process output) are logged, never sent.

use std::time::Duration;

use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderValue, Method, StatusCode, header};

use crate::launcher::LaunchError;
use crate::proxy::ProxyError;
use crate::scheduler::RouteError;

/// An error answered to an HTTP client, rendered as llama-swap's OpenAI-style
/// envelope `{"src":"llama-swap","error":{"message","type","param","code"}}`
/// with an honest status.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum ApiError {
    /// The body of a model-dispatched request is not valid JSON.
    #[error(
        "the request body is not valid JSON ({source}); send a JSON object with a \"model\" field"
    )]
    InvalidJson {
        /// What the JSON parser said.
        #[source]
        source: serde_json::Error,
    },
    /// A request body names a field the proxy reads more than once.
    #[error(
        "the request body names `{field}` more than once; the proxy and the upstream could read different ones, so send it once"
    )]
    DuplicateField {
        /// The repeated field (`model` or `stream`).
        field: &'static str,
    },
    /// No model in the body, the form or `?model=`.
    #[error(
        "no model in the request; set \"model\" in the JSON body, the `model` form field or `?model=`"
    )]
    ModelMissing,
    /// The model's `filters` cannot be applied to this body.
    #[error("model '{model}' has request filters that cannot be applied to this body: {source}")]
    FilterFailed {
        /// The model ID.
        model: String,
        /// Why.
        #[source]
        source: crate::filters::FilterError,
    },
    /// A path parameter that does not decode (invalid UTF-8 after percent-decoding).
    #[error("the request path is not valid: {reason}")]
    InvalidPath {
        /// What the decoder said.
        reason: String,
    },
    /// A query string that does not decode into the endpoint's parameters.
    #[error("the query string is not valid: {reason}")]
    InvalidQuery {
        /// What the decoder said.
        reason: String,
    },
    /// A query parameter of a management endpoint is out of its range or
    /// does not parse (the message is llama-swap's where it has one).
    #[error("{message}")]
    BadParameter {
        /// The parameter.
        param: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// No capture of that request is kept.
    #[error("{}", if *off {
        format!("capture {id} not found: captures are off (captureBuffer: 0)")
    } else {
        format!("capture {id} not found: captures are kept in memory within captureBuffer, the oldest dropped first")
    })]
    CaptureNotFound {
        /// The activity row's id (as asked: llama-swap reads a negative
        /// one, which names no row).
        id: i64,
        /// Captures are off.
        off: bool,
    },
    /// `POST /api/inflight/{id}/cancel` named no request in flight.
    #[error(
        "inflight request not found: no request {id} is in flight (the `inflight` event of /api/events lists them)"
    )]
    InFlightNotFound {
        /// The id asked for.
        id: String,
    },
    /// An operator cancelled the request (`POST /api/inflight/{id}/cancel`).
    #[error("request {id} was cancelled by an operator (POST /api/inflight/{id}/cancel)")]
    Cancelled {
        /// Its in-flight id.
        id: u64,
    },
    /// Not even the host's memory could be read.
    #[error("hardware detection unavailable: the host's /proc/meminfo cannot be read")]
    HardwareUnavailable,
    /// The history database could not be read.
    #[error("the request history could not be read; the server log says why")]
    HistoryUnavailable,
    /// The model (or alias) is not configured.
    #[error("model '{model}' is not configured; GET /v1/models lists the models")]
    ModelNotFound {
        /// The name the client asked for.
        model: String,
    },
    /// A local-only operation (unload, load) named a peer model.
    #[error(
        "model '{model}' is served by a peer, not by this server; unload or load it on the peer"
    )]
    PeerModel {
        /// The name asked for.
        model: String,
    },
    /// The active profile disables the name the client asked for.
    #[error(
        "model '{model}' is disabled by the active profile '{profile}'; switch profiles with PUT /api/profiles/active"
    )]
    ModelDisabled {
        /// The name the client asked for.
        model: String,
        /// The active profile.
        profile: String,
    },
    /// A selector found no target it can send the request to.
    #[error("{source}; retry once a target has stopped")]
    SelectorUnavailable {
        /// The selector the client asked for.
        selector: String,
        /// Why.
        #[source]
        source: crate::selection::SelectError,
    },
    /// `PUT /api/profiles/active` with a body it cannot use.
    #[error("{what}")]
    BadProfileRequest {
        /// What is wrong with the body.
        what: &'static str,
    },
    /// `PUT /api/profiles/active` named no configured profile.
    #[error("profile '{name}' is not configured; GET /api/profiles lists the profiles")]
    ProfileNotFound {
        /// The name asked for.
        name: String,
    },
    /// `/logs/stream/<id>` with an id that is not `proxy`, `upstream` or a model.
    #[error("no log named '{id}'; use proxy, upstream or a model's ID")]
    UnknownLog {
        /// The id asked for.
        id: String,
    },
    /// No route for the path.
    #[error("no endpoint at {path}; see the README for the endpoint list")]
    NotFound {
        /// The request path.
        path: String,
    },
    /// The path exists but not for this method.
    #[error("method {method} is not allowed on {path}; use {}", allowed_list(.allow))]
    MethodNotAllowed {
        /// The method the client used.
        method: Method,
        /// The path.
        path: String,
        /// The methods the path accepts.
        allow: Vec<Method>,
    },
    /// A non-zero `X-Priority` while the `serial` scheduler is active.
    #[error(
        "X-Priority {priority} cannot be honoured: the serial scheduler serves requests strictly in arrival order; drop the header or switch routing.scheduler.use to fifo"
    )]
    PriorityNotSupported {
        /// The priority the request carried.
        priority: i32,
    },
    /// Missing or wrong API key.
    #[error(
        "invalid or missing API key; send it as `Authorization: Bearer <key>`, `x-api-key: <key>` or a Basic password"
    )]
    Unauthorized,
    /// Several `Authorization`/`x-api-key` lines, or both with different values.
    #[error(
        "the request carries more than one credential; send exactly one `Authorization` or `x-api-key` header"
    )]
    MultipleCredentials,
    /// The request already passed through this server: a model's upstream or
    /// a peer (directly or through other servers) leads back to it.
    #[error(
        "the request came back to this server (its `{}` header names this server): a model's \
         proxy address or a peer leads back here; give the model another port, or remove the \
         peer that lists this server",
        crate::proxy::VIA_HEADER
    )]
    ProxyLoop,
    /// The request passed through more servers than allowed: peers or
    /// proxies forward it in a circle this server's own mark does not show.
    #[error(
        "the request passed through {hops} servers (its `{}` header), more than the {} allowed: \
         peers or proxies forward it in a loop",
        crate::proxy::VIA_HEADER,
        crate::proxy::MAX_HOPS
    )]
    TooManyHops {
        /// Servers it passed through.
        hops: usize,
    },
    /// The client address made too many failed API-key attempts.
    #[error(
        "too many failed API-key attempts from this address; retry after {} s",
        retry_after_secs(*.retry_after)
    )]
    TooManyAuthFailures {
        /// When an attempt is allowed again.
        retry_after: Duration,
    },
    /// The request body is larger than the server accepts.
    #[error("the request body is larger than the {limit}-byte limit; send a smaller body")]
    BodyTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// The request body did not arrive within `requestBodyTimeout`.
    #[error(
        "the request body did not arrive within {} s (requestBodyTimeout); send it faster or raise the limit",
        timeout.as_secs()
    )]
    BodyTimeout {
        /// The deadline.
        timeout: Duration,
    },
    /// The client aborted its body (or sent a malformed one).
    #[error("the request body was not received completely")]
    BodyIncomplete,
    /// The bodies being read from all clients already hold the server's budget.
    #[error(
        "the server is already receiving {limit} bytes of request bodies from other clients; retry in a moment"
    )]
    BodiesOverCapacity {
        /// The budget in bytes.
        limit: usize,
    },
    /// The model already has as many admitted requests as its `concurrencyLimit`.
    #[error(
        "model '{model}' already has as many requests as its concurrencyLimit allows; retry after {} s",
        retry_after_secs(*.retry_after)
    )]
    ConcurrencyLimit {
        /// The model ID.
        model: String,
        /// When to retry.
        retry_after: Duration,
    },
    /// The peer already has its `concurrencyLimit` of requests in flight
    /// from this server.
    #[error(
        "peer '{peer}' already has {limit} requests in flight from this server, the most its \
         concurrencyLimit allows; retry after 1 s"
    )]
    PeerBusy {
        /// The peer's ID.
        peer: String,
        /// Its `concurrencyLimit`.
        limit: usize,
    },
    /// The model already has as many waiting requests as `priority.maxQueued` allows.
    #[error(
        "model '{model}' already has {waiting} requests waiting, the most priority.maxQueued allows; retry after {} s",
        retry_after_secs(*.retry_after)
    )]
    QueueFull {
        /// The model ID.
        model: String,
        /// Requests waiting for it.
        waiting: usize,
        /// When to retry, estimated from measured serve times.
        retry_after: Duration,
    },
    /// The API key already has as many requests admitted as its `maxConcurrent`.
    #[error(
        "API key '{name}' already has {limit} requests in progress, the most its maxConcurrent allows; retry after 1 s"
    )]
    KeyBusy {
        /// The key's name (never the key).
        name: String,
        /// Its `maxConcurrent`.
        limit: usize,
    },
    /// An endpoint only admin keys may use (with `admin: true` on some key).
    #[error(
        "this endpoint needs an API key with admin: true; this key may use the model endpoints, /v1/models and /metrics"
    )]
    AdminKeyRequired,
    /// The request's `X-Queue-Timeout` header is not one number of seconds.
    #[error(
        "X-Queue-Timeout must be one number of seconds between 0 and 31536000 (fractions allowed), not {value:?}"
    )]
    InvalidQueueTimeout {
        /// The value as sent.
        value: String,
    },
    /// The request waited for its turn as long as its `X-Queue-Timeout` or
    /// the model's `maxQueueWait` allows, and left the queue.
    #[error(
        "request for model '{model}' waited {:.1} s for its turn, its limit (X-Queue-Timeout, capped by maxQueueWait), and left the queue; retry after {} s or allow a longer wait",
        waited.as_secs_f64(),
        retry_after_secs(*.retry_after)
    )]
    QueueTimeout {
        /// The model ID.
        model: String,
        /// How long it waited.
        waited: Duration,
        /// When to retry.
        retry_after: Duration,
        /// The bound came from the request's own `X-Queue-Timeout`: the
        /// answer says `x-should-retry: false`, so a client library does not
        /// wait again on its own behalf.
        asked: bool,
    },
    /// The upstream refused the connection, reset it or sent garbage.
    #[error(
        "the upstream server of model '{model}' could not be reached or failed mid-response; retry, and check GET /logs/stream/{model} if it persists"
    )]
    UpstreamUnreachable {
        /// The model ID.
        model: String,
    },
    /// A peer refused the connection, reset it or failed before answering.
    #[error(
        "peer '{peer}' could not be reached for model '{model}'; it may be down or restarting, and the next request tries it again"
    )]
    PeerUnreachable {
        /// The peer's ID.
        peer: String,
        /// The model as requested (`peer/model` or a bare name).
        model: String,
    },
    /// A peer's event stream broke after it had started.
    #[error("peer '{peer}' failed mid-response; send the request again")]
    PeerBroke {
        /// The peer's ID.
        peer: String,
    },
    /// A transport timeout of the peer's `timeouts` ran out.
    #[error("peer '{peer}' (model '{model}') {}", peer_timeout_message(*.phase, *.after))]
    PeerTimeout {
        /// The peer's ID.
        peer: String,
        /// The model as requested.
        model: String,
        /// Which timeout.
        phase: crate::proxy::TimeoutPhase,
        /// Its configured length.
        after: Duration,
    },
    /// The request may not start its model, and the model is not ready.
    #[error("model {model} is not loaded; {}", .why.text())]
    NotLoaded {
        /// The model ID.
        model: String,
        /// Why this request may not start it.
        why: NotLoadedReason,
    },
    /// A transport timeout of the model's `timeouts` ran out.
    #[error("the upstream server of model '{model}' {}", timeout_message(*.phase, *.after))]
    UpstreamTimeout {
        /// The model ID.
        model: String,
        /// Which timeout.
        phase: crate::proxy::TimeoutPhase,
        /// Its configured length.
        after: Duration,
    },
    /// The model could not be made ready.
    #[error("model '{model}' could not be started: {}", launch_message(.source))]
    StartFailed {
        /// The model ID.
        model: String,
        /// Why, as the supervisor reported it.
        #[source]
        source: LaunchError,
    },
    /// The model was unloaded while the request waited for it.
    #[error(
        "model '{model}' was unloaded while this request waited for it; send the request again"
    )]
    ModelUnloaded {
        /// The model ID.
        model: String,
    },
    /// A reload removed the model while the request waited for it.
    #[error(
        "model '{model}' was removed from the configuration by a reload while this request waited for it; GET /v1/models lists the models"
    )]
    ModelRemoved {
        /// The model ID.
        model: String,
    },
    /// The server is shutting down.
    #[error("the server is shutting down and accepts no more work; retry against a running server")]
    ShuttingDown,
    /// A fault of the server itself.
    #[error("internal server error: {what}; see the server log")]
    Internal {
        /// A short, non-secret description of what failed.
        what: &'static str,
    },
}

/// Why a request may not start its model ([`ApiError::NotLoaded`]); the
/// texts are llama-swap's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) enum NotLoadedReason {
    /// An `/upstream/<model>/<path>` whose path matches `upstream.ignorePaths`.
    IgnoredPath,
    /// A websocket upgrade to a model with `compat.ignoreWebsockets`.
    IgnoredWebsocket,
    /// A `/comfyui/<path>` other than `/comfyui/` itself.
    ComfyUiPath,
}

impl NotLoadedReason {
    fn text(self) -> &'static str {
        match self {
            Self::IgnoredPath => "path matches upstream.ignorePaths",
            Self::IgnoredWebsocket => "ignored websocket requests cannot start it",
            Self::ComfyUiPath => "only /comfyui/ can start it",
        }
    }
}

/// The `(status, type, code)` triple of an error, fixed per situation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ErrorKind {
    /// The HTTP status.
    pub status: StatusCode,
    /// The envelope's `type`.
    pub error_type: &'static str,
    /// The envelope's `code`.
    pub code: &'static str,
}

/// llama-swap's `type` for an HTTP status (its `swaputil/httperror.go`
/// `errorTypeForStatus`): a client written for llama-swap (or for OpenAI's
/// API) branches on it, so it is derived from the status, never chosen per
/// error; the `code` says which situation it is.
pub(crate) fn error_type_for(status: StatusCode) -> &'static str {
    match status.as_u16() {
        401 | 403 => "authentication_error",
        429 => "rate_limit_error",
        400..=499 => "invalid_request_error",
        _ => "server_error",
    }
}

impl ApiError {
    /// The status, `type` and `code` of this error (docs/ERRORS.md).
    pub(crate) fn kind(&self) -> ErrorKind {
        let (status, code) = match self {
            Self::InvalidJson { .. } => (StatusCode::BAD_REQUEST, "invalid_json"),
            Self::ModelMissing => (StatusCode::BAD_REQUEST, "model_missing"),
            Self::InvalidPath { .. } => (StatusCode::BAD_REQUEST, "invalid_path"),
            Self::InvalidQuery { .. } => (StatusCode::BAD_REQUEST, "invalid_query"),
            Self::BadParameter { .. } => (StatusCode::BAD_REQUEST, "invalid_parameter"),
            Self::CaptureNotFound { .. } => (StatusCode::NOT_FOUND, "capture_not_found"),
            Self::InFlightNotFound { .. } => (StatusCode::NOT_FOUND, "inflight_not_found"),
            Self::Cancelled { .. } => (StatusCode::SERVICE_UNAVAILABLE, "cancelled"),
            Self::HardwareUnavailable => (StatusCode::SERVICE_UNAVAILABLE, "hardware_unavailable"),
            Self::HistoryUnavailable => (StatusCode::INTERNAL_SERVER_ERROR, "history_unavailable"),
            Self::DuplicateField { .. } => (StatusCode::BAD_REQUEST, "duplicate_field"),
            Self::FilterFailed { .. } => (StatusCode::BAD_REQUEST, "filter_failed"),
            Self::ModelNotFound { .. } => (StatusCode::NOT_FOUND, "model_not_found"),
            Self::PeerModel { .. } => (StatusCode::NOT_FOUND, "model_not_found"),
            Self::ModelDisabled { .. } => (StatusCode::NOT_FOUND, "model_not_found"),
            Self::SelectorUnavailable { .. } => {
                (StatusCode::SERVICE_UNAVAILABLE, "selector_unavailable")
            }
            Self::BadProfileRequest { .. } => (StatusCode::BAD_REQUEST, "invalid_profile_request"),
            Self::ProfileNotFound { .. } => (StatusCode::NOT_FOUND, "profile_not_found"),
            Self::UnknownLog { .. } => (StatusCode::BAD_REQUEST, "unknown_log"),
            Self::NotFound { .. } => (StatusCode::NOT_FOUND, "not_found"),
            Self::MethodNotAllowed { .. } => (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed"),
            Self::PriorityNotSupported { .. } => {
                (StatusCode::BAD_REQUEST, "priority_not_supported")
            }
            Self::Unauthorized => (StatusCode::UNAUTHORIZED, "invalid_api_key"),
            Self::MultipleCredentials => (StatusCode::BAD_REQUEST, "multiple_credentials"),
            Self::ProxyLoop | Self::TooManyHops { .. } => (StatusCode::LOOP_DETECTED, "proxy_loop"),
            Self::TooManyAuthFailures { .. } => {
                (StatusCode::TOO_MANY_REQUESTS, "too_many_auth_failures")
            }
            Self::BodyTooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "body_too_large"),
            Self::BodyTimeout { .. } => (StatusCode::REQUEST_TIMEOUT, "request_timeout"),
            Self::BodyIncomplete => (StatusCode::BAD_REQUEST, "body_incomplete"),
            Self::BodiesOverCapacity { .. } => {
                (StatusCode::SERVICE_UNAVAILABLE, "server_overloaded")
            }
            Self::ConcurrencyLimit { .. } | Self::PeerBusy { .. } => {
                (StatusCode::TOO_MANY_REQUESTS, "concurrency_limit")
            }
            Self::QueueFull { .. } => (StatusCode::TOO_MANY_REQUESTS, "queue_full"),
            Self::KeyBusy { .. } => (StatusCode::TOO_MANY_REQUESTS, "key_busy"),
            Self::AdminKeyRequired => (StatusCode::FORBIDDEN, "admin_key_required"),
            Self::InvalidQueueTimeout { .. } => (StatusCode::BAD_REQUEST, "invalid_queue_timeout"),
            Self::QueueTimeout { .. } => (StatusCode::SERVICE_UNAVAILABLE, "queue_timeout"),
            Self::UpstreamUnreachable { .. } => (StatusCode::BAD_GATEWAY, "upstream_unreachable"),
            Self::PeerUnreachable { .. } | Self::PeerBroke { .. } => {
                (StatusCode::BAD_GATEWAY, "peer_unreachable")
            }
            Self::PeerTimeout { .. } => (StatusCode::GATEWAY_TIMEOUT, "peer_timeout"),
            Self::NotLoaded { .. } => (StatusCode::CONFLICT, "model_not_loaded"),
            Self::UpstreamTimeout { .. } => (StatusCode::GATEWAY_TIMEOUT, "upstream_timeout"),
            Self::StartFailed { source, .. } => launch_kind(source),
            Self::ModelUnloaded { .. } => (StatusCode::SERVICE_UNAVAILABLE, "model_unloaded"),
            Self::ModelRemoved { .. } => (StatusCode::NOT_FOUND, "model_removed"),
            Self::ShuttingDown => (StatusCode::SERVICE_UNAVAILABLE, "shutting_down"),
            Self::Internal { .. } => (StatusCode::INTERNAL_SERVER_ERROR, "internal_error"),
        };
        ErrorKind {
            status,
            error_type: error_type_for(status),
            code,
        }
    }

    /// The HTTP status of this error.
    pub(crate) fn status(&self) -> StatusCode {
        self.kind().status
    }

    /// The query parameter at fault, for the envelope's `param`.
    pub(crate) fn param(&self) -> Option<&'static str> {
        match self {
            Self::BadParameter { param, .. } => Some(param),
            _ => None,
        }
    }

    /// The JSON envelope, serialised: llama-swap's
    /// `{"src":"llama-swap","error":{"message","type","param","code"}}`.
    pub(crate) fn envelope(&self) -> Bytes {
        let kind = self.kind();
        let body = serde_json::json!({
            "src": "llama-swap",
            "error": {
                "message": self.to_string(),
                "type": kind.error_type,
                "param": self.param(),
                "code": kind.code,
            }
        });
        Bytes::from(body.to_string())
    }

    /// The error as the last frames of an SSE stream that already answered 200:
    /// one `data:` frame holding the envelope, then `data: [DONE]`.
    pub(crate) fn sse_frames(&self) -> Bytes {
        let envelope = self.envelope();
        let mut out = Vec::with_capacity(envelope.len() + 32);
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(&envelope);
        out.extend_from_slice(b"\n\ndata: [DONE]\n\n");
        Bytes::from(out)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let kind = self.kind();
        let mut response = (kind.status, self.envelope()).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        match &self {
            Self::Unauthorized => {
                headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                // llama-swap's challenge: a browser asks for the key (as
                // the Basic password) instead of showing the error.
                headers.append(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Basic realm=\"llama-swap\""),
                );
            }
            Self::ConcurrencyLimit { retry_after, .. }
            | Self::QueueFull { retry_after, .. }
            | Self::TooManyAuthFailures { retry_after } => {
                headers.insert(
                    header::RETRY_AFTER,
                    HeaderValue::from(retry_after_secs(*retry_after)),
                );
            }
            Self::QueueTimeout {
                retry_after, asked, ..
            } => {
                headers.insert(
                    header::RETRY_AFTER,
                    HeaderValue::from(retry_after_secs(*retry_after)),
                );
                if *asked {
                    headers.insert(
                        http::HeaderName::from_static("x-should-retry"),
                        HeaderValue::from_static("false"),
                    );
                }
            }
            Self::BodyTimeout { .. } => {
                // The rest of the body may still be on its way: do not read it.
                headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            Self::BodiesOverCapacity { .. } | Self::PeerBusy { .. } | Self::KeyBusy { .. } => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from(1u32));
            }
            Self::MethodNotAllowed { allow, .. } => {
                if let Ok(value) = HeaderValue::from_str(&allowed_list(allow)) {
                    headers.insert(header::ALLOW, value);
                }
            }
            _ => {}
        }
        // llama-swap writes its concurrency limit's JSON whatever the client
        // accepts; every other error may be text or HTML (see `front::accept`).
        if !matches!(self, Self::ConcurrencyLimit { .. }) {
            response
                .extensions_mut()
                .insert(super::front::accept::ErrorText(self.to_string()));
        }
        response
    }
}

impl From<RouteError> for ApiError {
    /// The HTTP face of a scheduling outcome (docs/ERRORS.md).
    fn from(error: RouteError) -> Self {
        match error {
            RouteError::UnknownModel { model } => Self::ModelNotFound { model },
            RouteError::ConcurrencyLimit { model, retry_after } => {
                Self::ConcurrencyLimit { model, retry_after }
            }
            RouteError::PriorityNotSupported { priority } => {
                Self::PriorityNotSupported { priority }
            }
            RouteError::QueueFull {
                model,
                waiting,
                retry_after,
            } => Self::QueueFull {
                model,
                waiting,
                retry_after,
            },
            RouteError::StartFailed(source) => Self::StartFailed {
                model: source.model().unwrap_or_default().to_owned(),
                source,
            },
            RouteError::Unloaded { model } => Self::ModelUnloaded { model },
            RouteError::Removed { model } => Self::ModelRemoved { model },
            RouteError::UpstreamRefused { model } => Self::UpstreamUnreachable { model },
            RouteError::ShuttingDown => Self::ShuttingDown,
        }
    }
}

impl From<ProxyError> for ApiError {
    fn from(error: ProxyError) -> Self {
        match error {
            ProxyError::Unreachable { model } => Self::UpstreamUnreachable { model },
            ProxyError::BodyTooLarge { limit } => Self::BodyTooLarge { limit },
            ProxyError::BodyTimeout { timeout } => Self::BodyTimeout { timeout },
            ProxyError::BodyAborted => Self::BodyIncomplete,
            ProxyError::Timeout {
                model,
                phase,
                after,
            } => Self::UpstreamTimeout {
                model,
                phase,
                after,
            },
            ProxyError::NoTls { .. } => Self::Internal {
                what: "the model's proxy URL is https:// but no TLS client was set up",
            },
            ProxyError::BadUpstreamUrl { .. } => Self::Internal {
                what: "the model's proxy URL is not a usable http:// or https:// URL",
            },
        }
    }
}

/// The frames that end an event stream the proxy could not finish: the
/// envelope of the error, then `data: [DONE]` (given to [`crate::proxy::Proxy`]).
pub(crate) fn stream_error_frames(error: &ProxyError) -> Bytes {
    ApiError::from(error.clone()).sse_frames()
}

fn launch_kind(error: &LaunchError) -> (StatusCode, &'static str) {
    match error {
        LaunchError::ExitedDuringStart { .. } => (StatusCode::BAD_GATEWAY, "model_start_failed"),
        LaunchError::HealthCheckTimeout { .. } => {
            (StatusCode::GATEWAY_TIMEOUT, "model_start_timeout")
        }
        LaunchError::Aborted { .. } => (StatusCode::SERVICE_UNAVAILABLE, "model_unloaded"),
        LaunchError::Failed { .. } => (StatusCode::SERVICE_UNAVAILABLE, "model_failed"),
        LaunchError::ShuttingDown => (StatusCode::SERVICE_UNAVAILABLE, "shutting_down"),
        LaunchError::UnknownModel { .. } => (StatusCode::INTERNAL_SERVER_ERROR, "internal_error"),
        LaunchError::SpawnFailed { .. } | LaunchError::PortInUse { .. } => {
            (StatusCode::SERVICE_UNAVAILABLE, "model_start_failed")
        }
    }
}

/// A client-facing description of a launch failure. Process output stays in the
/// logs (it may hold paths or secrets); the message points there instead.
fn launch_message(error: &LaunchError) -> String {
    match error {
        LaunchError::SpawnFailed { model, .. } => format!(
            "its command could not be run; fix `cmd` in the config (details in the server log for {model})"
        ),
        LaunchError::PortInUse { port, .. } => format!(
            "port {port}, where it listens, is already taken by another process (one the server does not manage); free the port or give the model another one"
        ),
        LaunchError::ExitedDuringStart { model, status, .. } => format!(
            "the upstream process exited while starting ({status}); its output is at GET /logs/stream/{model}"
        ),
        LaunchError::HealthCheckTimeout { timeout, .. } => format!(
            "the upstream did not pass its health check within {} s; raise healthCheckTimeout or check the model's output",
            timeout.as_secs()
        ),
        LaunchError::Failed {
            model,
            failures,
            window,
            last_output,
        } => format!(
            "it failed {failures} times within {} s (restartWindow) and is not started again until that long after its last failure, or POST /api/models/load/{model}; its last output (the rest at GET /logs/stream/{model}):\n{last_output}",
            window.as_secs()
        ),
        LaunchError::Aborted { .. } => {
            "the start was aborted because the model was stopped meanwhile; send the request again"
                .to_owned()
        }
        LaunchError::ShuttingDown => "the server is shutting down".to_owned(),
        LaunchError::UnknownModel { .. } => {
            "the supervisor has no process for it (a server bug); see the server log".to_owned()
        }
    }
}

/// What an upstream or peer failed to do before `phase` ran out.
fn timed_out_doing(phase: crate::proxy::TimeoutPhase) -> &'static str {
    use crate::proxy::TimeoutPhase;
    match phase {
        TimeoutPhase::Connect => "did not accept a connection",
        TimeoutPhase::TlsHandshake => "did not complete the TLS handshake",
        TimeoutPhase::ResponseHeader => "sent no response headers",
        TimeoutPhase::BodyIdle => "sent nothing more of its response",
    }
}

fn timeout_message(phase: crate::proxy::TimeoutPhase, after: Duration) -> String {
    let what = timed_out_doing(phase);
    format!(
        "{what} within {} s ({phase}); raise that timeout in the model's config if it is too short, or check GET /logs/stream",
        after.as_secs()
    )
}

fn peer_timeout_message(phase: crate::proxy::TimeoutPhase, after: Duration) -> String {
    let what = timed_out_doing(phase);
    format!(
        "{what} within {} s ({phase}); raise peers.<id>.timeouts if it is too short, or check the peer",
        after.as_secs()
    )
}

impl ApiError {
    /// The client-facing error of a request to `peer` that failed in the proxy.
    pub(crate) fn from_peer(error: ProxyError, peer: &str, model: &str) -> Self {
        match error {
            ProxyError::Unreachable { .. } => Self::PeerUnreachable {
                peer: peer.to_owned(),
                model: model.to_owned(),
            },
            ProxyError::Timeout { phase, after, .. } => Self::PeerTimeout {
                peer: peer.to_owned(),
                model: model.to_owned(),
                phase,
                after,
            },
            ProxyError::NoTls { .. } => Self::Internal {
                what: "the peer's proxy URL is https:// but no TLS client was set up",
            },
            ProxyError::BadUpstreamUrl { .. } => Self::Internal {
                what: "the peer's proxy URL is not a usable http:// or https:// URL",
            },
            other => Self::from(other),
        }
    }
}

/// The frames that end an event stream from a peer that failed mid-response
/// (peer requests give the proxy the peer's ID where a model's would go).
pub(crate) fn peer_stream_error_frames(error: &ProxyError) -> Bytes {
    let failed = match error {
        ProxyError::Unreachable { model } | ProxyError::Timeout { model, .. } => {
            ApiError::PeerBroke {
                peer: model.clone(),
            }
        }
        other => ApiError::from(other.clone()),
    };
    failed.sse_frames()
}

fn retry_after_secs(retry_after: Duration) -> u64 {
    // Retry-After has one-second resolution; never tell a client to retry at once.
    retry_after.as_secs_f64().ceil().max(1.0) as u64
}

fn allowed_list(allow: &[Method]) -> String {
    allow
        .iter()
        .map(Method::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    async fn render(error: ApiError) -> (StatusCode, http::HeaderMap, serde_json::Value) {
        let response = error.into_response();
        let status = response.status();
        let headers = response.headers().clone();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, headers, serde_json::from_slice(&body).unwrap())
    }

    #[tokio::test]
    async fn unknown_model_renders_the_documented_envelope() {
        let (status, headers, body) = render(ApiError::ModelNotFound {
            model: "qwen".into(),
        })
        .await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_eq!(headers[header::CONTENT_TYPE], "application/json");
        assert_eq!(
            body,
            serde_json::json!({"src": "llama-swap", "error": {
                "message": "model 'qwen' is not configured; GET /v1/models lists the models",
                "type": "invalid_request_error",
                "param": null,
                "code": "model_not_found",
            }})
        );
    }

    #[test]
    fn the_type_follows_the_status_as_llama_swap_derives_it() {
        // llama-swap's swaputil/httperror.go errorTypeForStatus, status by status.
        let table = [
            (400, "invalid_request_error"),
            (401, "authentication_error"),
            (403, "authentication_error"),
            (404, "invalid_request_error"),
            (405, "invalid_request_error"),
            (408, "invalid_request_error"),
            (409, "invalid_request_error"),
            (413, "invalid_request_error"),
            (429, "rate_limit_error"),
            (500, "server_error"),
            (502, "server_error"),
            (503, "server_error"),
            (504, "server_error"),
            (508, "server_error"),
        ];
        for (status, error_type) in table {
            let status = StatusCode::from_u16(status).unwrap();
            assert_eq!(error_type_for(status), error_type, "{status}");
        }
        let upstream = ApiError::UpstreamUnreachable { model: "m".into() }.kind();
        assert_eq!(
            (upstream.status.as_u16(), upstream.error_type, upstream.code),
            (502, "server_error", "upstream_unreachable")
        );
        let timeout = ApiError::UpstreamTimeout {
            model: "m".into(),
            phase: crate::proxy::TimeoutPhase::ResponseHeader,
            after: Duration::from_secs(1),
        }
        .kind();
        assert_eq!(
            (timeout.status.as_u16(), timeout.error_type, timeout.code),
            (504, "server_error", "upstream_timeout")
        );
        let admin = ApiError::AdminKeyRequired.kind();
        assert_eq!(
            (admin.status.as_u16(), admin.error_type, admin.code),
            (403, "authentication_error", "admin_key_required")
        );
    }

    #[tokio::test]
    async fn unauthorized_carries_www_authenticate_bearer() {
        let (status, headers, body) = render(ApiError::Unauthorized).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert_eq!(headers[header::WWW_AUTHENTICATE], "Bearer");
        assert_eq!(body["error"]["code"], "invalid_api_key");
        assert_eq!(body["error"]["type"], "authentication_error");
    }

    #[tokio::test]
    async fn concurrency_limit_rounds_retry_after_up_to_whole_seconds() {
        let (status, headers, body) = render(ApiError::ConcurrencyLimit {
            model: "a".into(),
            retry_after: Duration::from_millis(1500),
        })
        .await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(headers[header::RETRY_AFTER], "2");
        assert_eq!(body["error"]["code"], "concurrency_limit");

        let (_, headers, _) = render(ApiError::ConcurrencyLimit {
            model: "a".into(),
            retry_after: Duration::ZERO,
        })
        .await;
        assert_eq!(headers[header::RETRY_AFTER], "1");
    }

    #[tokio::test]
    async fn method_not_allowed_lists_allowed_methods() {
        let (status, headers, body) = render(ApiError::MethodNotAllowed {
            method: Method::GET,
            path: "/v1/chat/completions".into(),
            allow: vec![Method::POST],
        })
        .await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(headers[header::ALLOW], "POST");
        assert_eq!(body["error"]["code"], "method_not_allowed");
    }

    #[test]
    fn launch_errors_map_to_the_documented_statuses() {
        let cases = [
            (
                LaunchError::SpawnFailed {
                    model: "m".into(),
                    reason: "no such file /secret/path".into(),
                },
                503,
                "server_error",
                "model_start_failed",
            ),
            (
                LaunchError::ExitedDuringStart {
                    model: "m".into(),
                    status: "exit status: 1".into(),
                    last_output: "token=hunter2".into(),
                },
                502,
                "server_error",
                "model_start_failed",
            ),
            (
                LaunchError::HealthCheckTimeout {
                    model: "m".into(),
                    timeout: Duration::from_secs(15),
                },
                504,
                "server_error",
                "model_start_timeout",
            ),
            (
                LaunchError::Aborted { model: "m".into() },
                503,
                "server_error",
                "model_unloaded",
            ),
            (
                LaunchError::Failed {
                    model: "m".into(),
                    failures: 5,
                    window: Duration::from_secs(300),
                    last_output: String::new(),
                },
                503,
                "server_error",
                "model_failed",
            ),
            (
                LaunchError::ShuttingDown,
                503,
                "server_error",
                "shutting_down",
            ),
        ];
        for (source, status, error_type, code) in cases {
            let error = ApiError::StartFailed {
                model: "m".into(),
                source,
            };
            let kind = error.kind();
            assert_eq!(kind.status.as_u16(), status, "{error}");
            assert_eq!(kind.error_type, error_type, "{error}");
            assert_eq!(kind.code, code, "{error}");
            let message = error.to_string();
            assert!(!message.contains("hunter2"), "{message}");
            assert!(!message.contains("/secret/path"), "{message}");
        }
    }

    #[test]
    fn a_failed_model_is_answered_with_its_last_output_and_how_to_start_it_again() {
        let error = ApiError::StartFailed {
            model: "m".into(),
            source: LaunchError::Failed {
                model: "m".into(),
                failures: 5,
                window: Duration::from_secs(300),
                last_output: "error: the model file is corrupt".into(),
            },
        };
        let message = error.to_string();
        assert!(message.contains("the model file is corrupt"), "{message}");
        assert!(message.contains("/api/models/load/m"), "{message}");
        assert!(message.contains("300 s"), "{message}");
    }

    #[test]
    fn sse_frames_hold_the_envelope_then_done() {
        let frames = ApiError::ShuttingDown.sse_frames();
        let text = std::str::from_utf8(&frames).unwrap();
        let mut events = text.split("\n\n").filter(|e| !e.is_empty());
        let first = events.next().unwrap().strip_prefix("data: ").unwrap();
        let envelope: serde_json::Value = serde_json::from_str(first).unwrap();
        assert_eq!(envelope["error"]["code"], "shutting_down");
        assert_eq!(events.next(), Some("data: [DONE]"));
        assert_eq!(events.next(), None);
    }
}
