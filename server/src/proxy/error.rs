//! Why the proxy produced no response, or why a response stopped.

use bytes::Bytes;

/// A failure of the proxy, converted into the HTTP error by the API layer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProxyError {
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
    /// The model's `proxy` URL is not one the proxy can use (not `http://`).
    #[error("the proxy URL {base} of model {model} is not a usable http:// URL")]
    BadUpstreamUrl {
        /// The model ID.
        model: String,
        /// The configured URL.
        base: String,
    },
}

/// How a failure after the response has started is told to an SSE client: the
/// last frames of the stream (the HTTP layer's error envelope, then
/// `data: [DONE]`). The proxy does not know the envelope; its owner passes this in.
pub type StreamErrorFrames = fn(&ProxyError) -> Bytes;
