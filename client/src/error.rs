//! The SDK's error type.
//!
//! One enum, [`Error`], covers every way a call can fail. API errors keep the HTTP
//! status, the parsed `{"error": {...}}` envelope, `Retry-After`, the response
//! headers, the request id and the raw body, so callers branch on typed fields, never
//! on text. `Display` never shows a header value, so it cannot leak a secret; the
//! headers kept on an [`ApiError`] are the server's response headers, not the
//! request's.
//!
//! Every variant can be built outside the crate (the struct payloads have
//! constructors), so a fake or decorating [`ChatProvider`](crate::ChatProvider)
//! returns the same errors the real client does.

use std::fmt;
use std::time::{Duration, SystemTime};

use http::{HeaderMap, StatusCode};
use serde::Deserialize;

/// The boxed source of transport-level errors.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// The response header that carries the proxy's request id.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// Everything that can go wrong in a call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The proxy (or the model server behind it) answered with a non-success status.
    #[error("{0}")]
    Api(Box<ApiError>),
    /// A stream that had already started carried an `{"error": ...}` frame (the proxy
    /// answers 200 before a model loads, so later failures arrive in the stream).
    #[error("error reported inside the stream: {0}")]
    InStream(Box<StreamErrorFrame>),
    /// A deadline passed; `phase` says which one.
    #[error("timed out waiting for {phase} after {}", humanize(*after))]
    Timeout {
        /// The phase whose deadline passed.
        phase: TimeoutPhase,
        /// The limit that was exceeded.
        after: Duration,
    },
    /// The connection could not be made (refused, unreachable, DNS, TLS handshake).
    /// The source is usually a `reqwest::Error`.
    #[error("could not connect to the proxy")]
    Connect(#[source] BoxError),
    /// The connection failed after it was made (reset, closed mid-body). The source
    /// is usually a `reqwest::Error`.
    #[error("connection failed while talking to the proxy")]
    Transport(#[source] BoxError),
    /// A response body (or one stream frame) was not the JSON the endpoint promises.
    #[error("could not decode the {what} (first bytes: {})", preview(raw))]
    Decode {
        /// What was being decoded.
        what: DecodeTarget,
        /// The text that failed to decode, unchanged.
        raw: String,
        /// The JSON error.
        #[source]
        source: serde_json::Error,
    },
    /// A request body could not be serialised.
    #[error("could not encode the request body")]
    Encode(#[source] serde_json::Error),
    /// A stream ended without `[DONE]` and without any finish reason: the answer is
    /// probably cut short.
    #[error("the stream ended without [DONE] or a finish reason after {chunks} chunks")]
    Truncated {
        /// How many model chunks arrived before the end.
        chunks: usize,
    },
    /// One server-sent event grew past the configured limit (the SDK never buffers
    /// without bound).
    #[error("a server-sent event exceeded {limit} bytes")]
    EventTooLarge {
        /// The configured limit in bytes.
        limit: usize,
    },
    /// A response body grew past the configured limit.
    #[error("a response body exceeded {limit} bytes")]
    BodyTooLarge {
        /// The configured limit in bytes.
        limit: usize,
    },
    /// The model refused to answer (OpenAI's `refusal`), so there is no
    /// structured output to read.
    #[error("the model refused: {message}")]
    Refusal {
        /// The refusal text.
        message: String,
    },
    /// The provider does not implement this operation (a fake that only chats, for
    /// example).
    #[error("this provider does not support {operation}")]
    Unsupported {
        /// The operation, for example `embeddings`.
        operation: &'static str,
    },
    /// A [`Middleware`](crate::Middleware) failed the call for its own reason (an
    /// auth refresh that failed, for example).
    #[error("a middleware failed the call")]
    Middleware(#[source] BoxError),
    /// A setting or argument was rejected before anything was sent.
    #[error(transparent)]
    InvalidArgument(#[from] InvalidArgument),
    /// The underlying HTTP client could not be built.
    #[error("could not build the HTTP client")]
    HttpClient(#[source] BoxError),
    /// Any other failure, for providers and decorators outside this crate (a fake's
    /// scripted failure, a fallback that ran out of backends, a cache that could not
    /// be read). Built with [`Error::other`] or [`Error::with_source`].
    #[error("{message}")]
    Other {
        /// What went wrong, for people.
        message: String,
        /// The underlying error, if there is one.
        #[source]
        source: Option<BoxError>,
    },
}

impl Error {
    /// An [`Error::Other`] with a message and no source.
    pub fn other(message: impl Into<String>) -> Error {
        Error::Other {
            message: message.into(),
            source: None,
        }
    }

    /// An [`Error::Other`] with a message and the error that caused it.
    pub fn with_source(message: impl Into<String>, source: impl Into<BoxError>) -> Error {
        Error::Other {
            message: message.into(),
            source: Some(source.into()),
        }
    }

    /// The HTTP status of an [`Error::Api`], if this is one.
    pub fn status(&self) -> Option<StatusCode> {
        match self {
            Error::Api(api) => Some(api.status),
            _ => None,
        }
    }

    /// The server's `Retry-After`, if it sent one with an [`Error::Api`].
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Error::Api(api) => api.retry_after,
            _ => None,
        }
    }

    /// The API error details, if this is an [`Error::Api`].
    pub fn api(&self) -> Option<&ApiError> {
        match self {
            Error::Api(api) => Some(api),
            _ => None,
        }
    }

    /// The envelope's machine-readable `code`, from an API error or an in-stream error.
    pub fn code(&self) -> Option<&str> {
        match self {
            Error::Api(api) => api.envelope.as_ref()?.code.as_deref(),
            Error::InStream(frame) => frame.envelope.code.as_deref(),
            _ => None,
        }
    }

    /// The response headers of an [`Error::Api`].
    pub fn headers(&self) -> Option<&HeaderMap> {
        self.api().map(|api| &api.headers)
    }

    /// The proxy's request id (`X-Request-Id` of the response), from an API error
    /// or an in-stream error, for matching the proxy's logs.
    pub fn request_id(&self) -> Option<&str> {
        match self {
            Error::Api(api) => api.request_id.as_deref(),
            Error::InStream(frame) => frame.request_id.as_deref(),
            _ => None,
        }
    }

    /// True when sending the same request again could succeed without changing it:
    /// connection failures and connection drops, timeouts waiting for the
    /// connection or the first byte, truncated streams, and API errors with status
    /// 408, 429, 502, 503 or 504. A server's `x-should-retry: true`/`false` header
    /// overrides the status. Everything else (bad requests, auth, decode errors,
    /// invalid arguments, refusals, idle and total timeouts) is not.
    ///
    /// The SDK's own retries already happen before an error reaches the caller; this
    /// is for a caller (or a fallback provider) deciding what to do next.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Api(api) => api.is_retryable(),
            Error::Connect(_) | Error::Transport(_) | Error::Truncated { .. } => true,
            Error::Timeout { phase, .. } => {
                matches!(phase, TimeoutPhase::Connect | TimeoutPhase::FirstByte)
            }
            _ => false,
        }
    }

    /// True for every kind of timeout.
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::Timeout { .. })
    }

    /// The phase of a timeout, if this is one.
    pub fn timeout_phase(&self) -> Option<TimeoutPhase> {
        match self {
            Error::Timeout { phase, .. } => Some(*phase),
            _ => None,
        }
    }
}

/// The deadlines a call can run into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TimeoutPhase {
    /// Opening the TCP connection.
    Connect,
    /// From the start of the call to the response headers (covers a model swap).
    FirstByte,
    /// The gap between two pieces of a response body.
    Idle,
    /// The whole call, retries and body included.
    Total,
}

impl fmt::Display for TimeoutPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TimeoutPhase::Connect => "the connection",
            TimeoutPhase::FirstByte => "the first response byte",
            TimeoutPhase::Idle => "the next piece of the response (idle gap)",
            TimeoutPhase::Total => "the whole call (total deadline)",
        })
    }
}

/// What a [`Error::Decode`] was trying to decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DecodeTarget {
    /// A non-streaming response body.
    ResponseBody,
    /// One `data:` frame of a stream.
    StreamFrame,
    /// A tool call's JSON arguments.
    ToolArguments,
    /// A structured answer (see [`ChatResponse::parse`](crate::ChatResponse::parse)).
    StructuredOutput,
}

impl fmt::Display for DecodeTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DecodeTarget::ResponseBody => "response body",
            DecodeTarget::StreamFrame => "stream frame",
            DecodeTarget::ToolArguments => "tool-call arguments",
            DecodeTarget::StructuredOutput => "structured answer",
        })
    }
}

/// A non-success HTTP response.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// The parsed `{"error": {...}}` envelope, when the body held one.
    pub envelope: Option<ErrorEnvelope>,
    /// The server's `Retry-After` (seconds, HTTP date or `retry-after-ms`), if any.
    pub retry_after: Option<Duration>,
    /// The body as received (lossily decoded, cut at the SDK's error-body limit).
    pub raw_body: String,
    /// The response headers.
    pub headers: HeaderMap,
    /// The proxy's request id (`X-Request-Id`), if the response had one.
    pub request_id: Option<String>,
}

impl ApiError {
    /// An error with `status`, no body and no headers.
    pub fn new(status: StatusCode) -> ApiError {
        ApiError {
            status,
            envelope: None,
            retry_after: None,
            raw_body: String::new(),
            headers: HeaderMap::new(),
            request_id: None,
        }
    }

    /// The error a response with these parts stands for, read the way the client
    /// reads a real one: the envelope from the body, `Retry-After` (relative to
    /// now) and the request id from the headers.
    pub fn from_parts(status: StatusCode, headers: HeaderMap, body: impl Into<String>) -> ApiError {
        let raw_body = body.into();
        ApiError {
            status,
            envelope: ErrorEnvelope::from_body(&raw_body),
            retry_after: crate::retry_after::retry_after(&headers, SystemTime::now()),
            request_id: request_id_of(&headers),
            raw_body,
            headers,
        }
    }

    /// Sets the envelope.
    #[must_use]
    pub fn with_envelope(mut self, envelope: ErrorEnvelope) -> ApiError {
        self.envelope = Some(envelope);
        self
    }

    /// Sets the server's requested delay.
    #[must_use]
    pub fn with_retry_after(mut self, delay: Duration) -> ApiError {
        self.retry_after = Some(delay);
        self
    }

    /// Sets the request id.
    #[must_use]
    pub fn with_request_id(mut self, id: impl Into<String>) -> ApiError {
        self.request_id = Some(id.into());
        self
    }

    /// See [`Error::is_retryable`].
    pub fn is_retryable(&self) -> bool {
        should_retry_header(&self.headers)
            .unwrap_or_else(|| matches!(self.status.as_u16(), 408 | 429 | 502 | 503 | 504))
    }
}

impl From<ApiError> for Error {
    fn from(api: ApiError) -> Error {
        Error::Api(Box::new(api))
    }
}

/// The `X-Request-Id` of a response.
pub(crate) fn request_id_of(headers: &HeaderMap) -> Option<String> {
    headers
        .get(REQUEST_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// The server's `x-should-retry: true|false`, which overrides the status.
pub(crate) fn should_retry_header(headers: &HeaderMap) -> Option<bool> {
    match headers.get("x-should-retry")?.to_str().ok()?.trim() {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the proxy answered {}", self.status)?;
        match &self.envelope {
            Some(env) => {
                write!(f, ": {}", env.message)?;
                if let Some(code) = &env.code {
                    write!(f, " (code {code})")?;
                }
                Ok(())
            }
            None if self.raw_body.trim().is_empty() => Ok(()),
            None => write!(f, ": {}", preview(&self.raw_body)),
        }
    }
}

/// An `{"error": ...}` frame that arrived inside a stream.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct StreamErrorFrame {
    /// The parsed envelope.
    pub envelope: ErrorEnvelope,
    /// The frame's data as received.
    pub raw: String,
    /// The request id of the stream's response, if it had one.
    pub request_id: Option<String>,
}

impl StreamErrorFrame {
    /// A frame with `envelope` (its raw text is the envelope's message).
    pub fn new(envelope: ErrorEnvelope) -> StreamErrorFrame {
        StreamErrorFrame {
            raw: envelope.message.clone(),
            envelope,
            request_id: None,
        }
    }

    /// Sets the raw frame text.
    #[must_use]
    pub fn with_raw(mut self, raw: impl Into<String>) -> StreamErrorFrame {
        self.raw = raw.into();
        self
    }

    /// Sets the request id.
    #[must_use]
    pub fn with_request_id(mut self, id: impl Into<String>) -> StreamErrorFrame {
        self.request_id = Some(id.into());
        self
    }
}

impl From<StreamErrorFrame> for Error {
    fn from(frame: StreamErrorFrame) -> Error {
        Error::InStream(Box::new(frame))
    }
}

impl fmt::Display for StreamErrorFrame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.envelope.message)?;
        if let Some(code) = &self.envelope.code {
            write!(f, " (code {code})")?;
        }
        Ok(())
    }
}

/// The OpenAI-style error envelope's inner object.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ErrorEnvelope {
    /// Human-readable text.
    pub message: String,
    /// The envelope's `type` (for example `rate_limit_error`).
    pub kind: Option<String>,
    /// The envelope's `code` (for example `concurrency_limit`); numbers become text.
    pub code: Option<String>,
}

impl ErrorEnvelope {
    /// An envelope with `message` and no type or code.
    pub fn new(message: impl Into<String>) -> ErrorEnvelope {
        ErrorEnvelope {
            message: message.into(),
            ..ErrorEnvelope::default()
        }
    }

    /// Sets the `type`.
    #[must_use]
    pub fn with_kind(mut self, kind: impl Into<String>) -> ErrorEnvelope {
        self.kind = Some(kind.into());
        self
    }

    /// Sets the `code`.
    #[must_use]
    pub fn with_code(mut self, code: impl Into<String>) -> ErrorEnvelope {
        self.code = Some(code.into());
        self
    }

    /// Parses `{"error": {"message", "type", "code"}}` or `{"error": "text"}`;
    /// `None` when the value has no `error` key.
    pub fn from_json(value: &serde_json::Value) -> Option<ErrorEnvelope> {
        let error = value.as_object()?.get("error")?;
        if let Some(text) = error.as_str() {
            return Some(ErrorEnvelope {
                message: text.to_owned(),
                ..ErrorEnvelope::default()
            });
        }
        let wire = WireEnvelope::deserialize(error).ok()?;
        Some(ErrorEnvelope {
            message: wire.message.unwrap_or_default(),
            kind: wire.kind,
            code: wire.code.and_then(|c| match c {
                serde_json::Value::String(s) => Some(s),
                serde_json::Value::Null => None,
                other => Some(other.to_string()),
            }),
        })
    }

    /// Parses a body; `None` when it is not JSON or holds no `error` key.
    pub fn from_body(body: &str) -> Option<ErrorEnvelope> {
        let value: serde_json::Value = serde_json::from_str(body).ok()?;
        ErrorEnvelope::from_json(&value)
    }
}

#[derive(Deserialize)]
struct WireEnvelope {
    #[serde(default)]
    message: Option<String>,
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    code: Option<serde_json::Value>,
}

/// Problems with settings or arguments, reported before any request is sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidArgument {
    /// `build()` was called without a base URL.
    #[error("no base URL was set")]
    MissingBaseUrl,
    /// The base URL could not be parsed.
    #[error("the base URL {url:?} is not a valid URL")]
    UnparseableBaseUrl {
        /// The URL as given.
        url: String,
    },
    /// The base URL's scheme is not `http` or `https`.
    #[error("the base URL must use http or https, not {scheme:?}")]
    UnsupportedScheme {
        /// The scheme that was given.
        scheme: String,
    },
    /// An `https://` base URL with the crate built without its `tls` feature.
    #[error("the base URL uses https, but llama-swap-client was built without its `tls` feature")]
    TlsDisabled,
    /// A root certificate given to the builder is not PEM holding a certificate.
    #[error("root certificate number {index} is not PEM holding a certificate")]
    InvalidRootCertificate {
        /// Its position among the certificates given (0-based).
        index: usize,
    },
    /// The base URL embeds a user name or password (they would end up in error text).
    #[error("the base URL must not contain credentials; use the api_key setting")]
    CredentialsInBaseUrl,
    /// The base URL has a query string or fragment, which paths cannot be appended to.
    #[error("the base URL must not have a query or fragment")]
    QueryInBaseUrl,
    /// The API key contains characters a header cannot carry (the key is not shown).
    #[error("the API key is not a valid header value")]
    InvalidApiKey,
    /// A header name is not valid HTTP.
    #[error("{name:?} is not a valid header name")]
    InvalidHeaderName {
        /// The rejected name.
        name: String,
    },
    /// A header value is not valid HTTP (the value is not shown: it may be a secret).
    #[error("the value of header {name:?} is not a valid header value")]
    InvalidHeaderValue {
        /// The header whose value was rejected.
        name: String,
    },
    /// A header map names `X-Priority` with a value the proxy would not read as a
    /// priority (not a signed 32-bit integer), or twice with different values.
    #[error(
        "X-Priority {value:?} in a header map is not one integer the proxy ranks; set a Priority instead"
    )]
    PriorityHeaderValue {
        /// The value as found.
        value: String,
    },
    /// A timeout of zero was configured.
    #[error("the {phase} timeout must be greater than zero")]
    ZeroTimeout {
        /// Which timeout.
        phase: TimeoutPhase,
    },
    /// The retry backoff base is larger than its maximum.
    #[error("the retry backoff base ({base:?}) exceeds its maximum ({max:?})")]
    BackoffRange {
        /// The configured base.
        base: Duration,
        /// The configured maximum.
        max: Duration,
    },
    /// A model name was empty where a model is required.
    #[error("the model name must not be empty")]
    EmptyModel,
    /// A `/upstream` path or management path was not valid.
    #[error("the path {path:?} is not a valid request path")]
    InvalidPath {
        /// The rejected path.
        path: String,
    },
}

fn humanize(d: Duration) -> String {
    if d.as_secs() >= 1 && d.subsec_nanos() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// At most 200 characters of a body, for error messages.
fn preview(raw: &str) -> String {
    const MAX: usize = 200;
    match raw.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &raw[..cut]),
        None => raw.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_parses_openai_and_llama_swap_shapes() {
        let env = ErrorEnvelope::from_body(
            r#"{"src":"llama-swap","error":{"message":"Too many requests","type":"rate_limit_error","param":null,"code":"concurrency_limit"}}"#,
        )
        .unwrap();
        assert_eq!(env.message, "Too many requests");
        assert_eq!(env.kind.as_deref(), Some("rate_limit_error"));
        assert_eq!(env.code.as_deref(), Some("concurrency_limit"));
    }

    #[test]
    fn envelope_accepts_string_errors_and_numeric_codes() {
        let env = ErrorEnvelope::from_body(r#"{"error":"model unloaded"}"#).unwrap();
        assert_eq!(env.message, "model unloaded");
        assert_eq!(env.code, None);
        let env = ErrorEnvelope::from_body(r#"{"error":{"message":"x","code":500}}"#).unwrap();
        assert_eq!(env.code.as_deref(), Some("500"));
        assert!(ErrorEnvelope::from_body("not json").is_none());
        assert!(ErrorEnvelope::from_body(r#"{"ok":true}"#).is_none());
    }

    #[test]
    fn api_error_display_names_status_message_and_code() {
        let err = Error::from(
            ApiError::new(StatusCode::TOO_MANY_REQUESTS)
                .with_envelope(
                    ErrorEnvelope::new("busy")
                        .with_kind("rate_limit_error")
                        .with_code("concurrency_limit"),
                )
                .with_retry_after(Duration::from_secs(1)),
        );
        let text = err.to_string();
        assert!(text.contains("429"), "{text}");
        assert!(text.contains("busy"), "{text}");
        assert!(text.contains("concurrency_limit"), "{text}");
        assert_eq!(err.code(), Some("concurrency_limit"));
        assert_eq!(err.retry_after(), Some(Duration::from_secs(1)));
    }

    #[test]
    fn api_error_from_parts_reads_envelope_retry_after_and_request_id() {
        let mut headers = HeaderMap::new();
        headers.insert("retry-after", http::HeaderValue::from_static("2"));
        headers.insert("x-request-id", http::HeaderValue::from_static("req-7"));
        let api = ApiError::from_parts(
            StatusCode::SERVICE_UNAVAILABLE,
            headers,
            r#"{"error":{"message":"loading","code":"model_loading"}}"#,
        );
        assert_eq!(api.retry_after, Some(Duration::from_secs(2)));
        assert_eq!(api.request_id.as_deref(), Some("req-7"));
        assert_eq!(
            api.envelope.as_ref().unwrap().code.as_deref(),
            Some("model_loading")
        );
        let err = Error::from(api);
        assert_eq!(err.request_id(), Some("req-7"));
        assert_eq!(err.headers().unwrap()["retry-after"], "2");
    }

    #[test]
    fn retryable_follows_status_and_x_should_retry() {
        for (status, retryable) in [
            (429, true),
            (503, true),
            (408, true),
            (500, false),
            (400, false),
            (401, false),
        ] {
            let err = Error::from(ApiError::new(StatusCode::from_u16(status).unwrap()));
            assert_eq!(err.is_retryable(), retryable, "{status}");
        }
        let mut no = HeaderMap::new();
        no.insert("x-should-retry", http::HeaderValue::from_static("false"));
        assert!(
            !Error::from(ApiError::from_parts(StatusCode::TOO_MANY_REQUESTS, no, ""))
                .is_retryable()
        );
        let mut yes = HeaderMap::new();
        yes.insert("x-should-retry", http::HeaderValue::from_static("true"));
        assert!(
            Error::from(ApiError::from_parts(
                StatusCode::INTERNAL_SERVER_ERROR,
                yes,
                ""
            ))
            .is_retryable()
        );
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        assert!(Error::Connect(Box::new(io)).is_retryable());
        assert!(Error::Truncated { chunks: 3 }.is_retryable());
        let timeout = |phase| Error::Timeout {
            phase,
            after: Duration::from_secs(1),
        };
        assert!(timeout(TimeoutPhase::FirstByte).is_retryable());
        assert!(!timeout(TimeoutPhase::Idle).is_retryable());
        assert!(
            !Error::Refusal {
                message: "no".into()
            }
            .is_retryable()
        );
        assert!(!Error::from(InvalidArgument::EmptyModel).is_retryable());
    }

    #[test]
    fn preview_cuts_long_bodies_on_a_char_boundary() {
        let long = "é".repeat(500);
        let p = preview(&long);
        assert_eq!(p.chars().count(), 201);
    }
}
