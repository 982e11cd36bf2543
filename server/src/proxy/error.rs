//! Why the proxy produced no response, or why a response stopped.

use bytes::Bytes;

/// Errors a proxied body can yield.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A failure of the proxy, converted into the HTTP error by the API layer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum ProxyError {
    /// The upstream refused the connection, reset it, or failed before or
    /// while answering.
    #[error("the upstream of {model} could not be reached or failed mid-response")]
    Unreachable {
        /// The model ID.
        model: String,
    },
    /// A streamed request body passed its limit.
    #[error("the request body passed its {limit}-byte limit")]
    BodyTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// A streamed request body did not arrive within its deadline.
    #[error("the request body did not arrive within {timeout:?}")]
    BodyTimeout {
        /// The deadline.
        timeout: std::time::Duration,
    },
    /// The client aborted a streamed request body.
    #[error("the client aborted the request body")]
    BodyAborted,
    /// A transport timeout of the model's `timeouts` ran out.
    #[error("{phase} ({} s) ran out for the upstream of {model}", after.as_secs())]
    Timeout {
        /// The model ID.
        model: String,
        /// Which timeout.
        phase: TimeoutPhase,
        /// Its configured length.
        after: std::time::Duration,
    },
    /// An `https://` upstream while no TLS client is set up.
    #[error("the upstream of {model} is https:// but no TLS client is set up")]
    NoTls {
        /// The model ID.
        model: String,
    },
    /// The model's `proxy` URL is not one the proxy can use (not `http://`
    /// or `https://`).
    #[error("the proxy URL {base} of model {model} is not a usable http:// or https:// URL")]
    BadUpstreamUrl {
        /// The model ID.
        model: String,
        /// The configured URL.
        base: String,
    },
}

/// Why a streamed request body was cut; the body's owner produces it, the proxy
/// finds it in the failed request's error chain and reports it as such.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum RequestBodyError {
    /// Past its size limit.
    #[error("the request body passed its {limit}-byte limit")]
    TooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// Past its deadline.
    #[error("the request body did not arrive within {timeout:?}")]
    TimedOut {
        /// The deadline.
        timeout: std::time::Duration,
    },
    /// The client went away or sent a malformed body.
    #[error("the client aborted the request body")]
    Aborted,
}

/// How a failure after the response has started is told to an SSE client: the
/// last frames of the stream (the HTTP layer's error envelope, then
/// `data: [DONE]`). The proxy does not know the envelope; its owner passes this in.
pub(crate) type StreamErrorFrames = fn(&ProxyError) -> Bytes;

/// Which timeout ran out while reaching an upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum TimeoutPhase {
    /// `timeouts.connect`: the TCP connection.
    #[error("timeouts.connect")]
    Connect,
    /// `timeouts.tlsHandshake`: the TLS handshake.
    #[error("timeouts.tlsHandshake")]
    TlsHandshake,
    /// `timeouts.responseHeader`: the response headers.
    #[error("timeouts.responseHeader")]
    ResponseHeader,
    /// `timeouts.bodyIdle`: the next bytes of a response body already started.
    #[error("timeouts.bodyIdle")]
    BodyIdle,
}
