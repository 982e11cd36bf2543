//! The SDK's error type.
//!
//! One enum, [`Error`], covers every way a call can fail. API errors keep the HTTP
//! status, the parsed `{"error": {...}}` envelope, `Retry-After` and the raw body, so
//! callers branch on typed fields, never on text. No variant holds the API key or a
//! header value, so neither `Debug` nor `Display` can leak a secret.

use std::fmt;
use std::time::Duration;

use http::StatusCode;
use serde::Deserialize;

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
    /// The TCP connection could not be made (refused, unreachable, DNS).
    #[error("could not connect to the proxy")]
    Connect(#[source] reqwest::Error),
    /// The connection failed after it was made (reset, closed mid-body).
    #[error("connection failed while talking to the proxy")]
    Transport(#[source] reqwest::Error),
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
    /// A setting or argument was rejected before anything was sent.
    #[error(transparent)]
    InvalidArgument(#[from] InvalidArgument),
    /// The underlying HTTP client could not be built.
    #[error("could not build the HTTP client")]
    HttpClient(#[source] reqwest::Error),
}

impl Error {
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
}

impl fmt::Display for DecodeTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DecodeTarget::ResponseBody => "response body",
            DecodeTarget::StreamFrame => "stream frame",
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
    /// A header map names `X-Priority` with a value that is not one of the SDK's tiers.
    #[error("X-Priority {value:?} in a header map is not 10, 0 or -10; set a Priority instead")]
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
        let err = Error::Api(Box::new(ApiError {
            status: StatusCode::TOO_MANY_REQUESTS,
            envelope: ErrorEnvelope::from_body(
                r#"{"error":{"message":"busy","type":"rate_limit_error","code":"concurrency_limit"}}"#,
            ),
            retry_after: Some(Duration::from_secs(1)),
            raw_body: String::new(),
        }));
        let text = err.to_string();
        assert!(text.contains("429"), "{text}");
        assert!(text.contains("busy"), "{text}");
        assert!(text.contains("concurrency_limit"), "{text}");
        assert_eq!(err.code(), Some("concurrency_limit"));
        assert_eq!(err.retry_after(), Some(Duration::from_secs(1)));
    }

    #[test]
    fn preview_cuts_long_bodies_on_a_char_boundary() {
        let long = "é".repeat(500);
        let p = preview(&long);
        assert_eq!(p.chars().count(), 201);
    }
}
