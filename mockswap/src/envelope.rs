//! The HTTP error envelope shared with the real server (docs/ERRORS.md in the repository):
//! `{"src": "llama-swap", "error": {"message", "type", "param", "code"}}` with a fixed
//! status and `code` per situation, and the `type` llama-swap gives that status.

use http::{HeaderValue, Method, StatusCode, header};
use serde_json::json;

use crate::body::MockBody;

/// A situation the mock answers with an error envelope. Status and `code` are fixed
/// per variant, as in docs/ERRORS.md; `type` follows from the status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ApiError {
    /// The body of a model-dispatched POST is not valid JSON.
    #[error("request body is not valid JSON: {reason}; send a JSON object with a \"model\" field")]
    InvalidJson {
        /// What the JSON parser reported.
        reason: String,
    },
    /// No model in the body, the form or `?model=`.
    #[error("no model in the request; set \"model\" in the JSON body or ?model= in the query")]
    ModelMissing,
    /// The model is not one the mock serves.
    #[error("model '{model}' is not configured; GET /v1/models lists the models")]
    ModelNotFound {
        /// The model the request named.
        model: String,
    },
    /// No such path.
    #[error("no route for {path}; see the mockswap README for the endpoints")]
    NotFound {
        /// The path of the request.
        path: String,
    },
    /// A known path asked with the wrong method.
    #[error("method {method} is not allowed on {path}; use {allow}")]
    MethodNotAllowed {
        /// The method sent.
        method: Method,
        /// The path of the request.
        path: String,
        /// The methods the path accepts, comma-separated (also sent as `Allow`).
        allow: &'static str,
    },
    /// The body is larger than the mock accepts.
    #[error("request body is larger than {limit} bytes")]
    BodyTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// The body could not be read from the connection.
    #[error("could not read the request body: {reason}")]
    BodyRead {
        /// What the transport reported.
        reason: String,
    },
    /// A websocket upgrade without `Sec-WebSocket-Key`, or not version 13.
    #[error("websocket upgrade needs Sec-WebSocket-Key and Sec-WebSocket-Version: 13")]
    BadWebsocket,
    /// The mock is stopping.
    #[error("mockswap is shutting down; retry against another instance")]
    ShuttingDown,
    /// The fake model sleeps (`POST /sleep`): it answers again once woken.
    #[error("model is sleeping; POST /wake_up first")]
    Sleeping,
    /// The fake model is still loading (`--load-time`), like llama.cpp answers.
    #[error("model is loading; retry when GET /health answers 200")]
    Loading,
    /// An admin API wait (`wait_for`, `wait_held`) ran out of time.
    #[error("waited {timeout_ms} ms for {wanted} {what}, found {got}")]
    WaitTimeout {
        /// What was waited for (`requests`, `held requests`).
        what: &'static str,
        /// How many were wanted.
        wanted: usize,
        /// How many there were at the end.
        got: usize,
        /// How long was waited.
        timeout_ms: u64,
    },
    /// An admin API request was malformed.
    #[error("bad admin request: {reason}")]
    BadAdminRequest {
        /// What is wrong with it.
        reason: String,
    },
}

impl ApiError {
    /// The HTTP status of this error.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::InvalidJson { .. }
            | Self::ModelMissing
            | Self::BadAdminRequest { .. }
            | Self::BodyRead { .. }
            | Self::BadWebsocket => StatusCode::BAD_REQUEST,
            Self::ModelNotFound { .. } | Self::NotFound { .. } => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            Self::BodyTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::ShuttingDown | Self::Loading | Self::Sleeping => StatusCode::SERVICE_UNAVAILABLE,
            Self::WaitTimeout { .. } => StatusCode::REQUEST_TIMEOUT,
        }
    }

    /// The envelope's `type`: llama-swap's for the status (401 and 403
    /// `authentication_error`, 429 `rate_limit_error`, other 4xx `invalid_request_error`,
    /// others `server_error`).
    pub fn kind(&self) -> &'static str {
        error_type_for(self.status())
    }

    /// The envelope's `code`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidJson { .. } => "invalid_json",
            Self::ModelMissing => "model_missing",
            Self::ModelNotFound { .. } => "model_not_found",
            Self::NotFound { .. } => "not_found",
            Self::MethodNotAllowed { .. } => "method_not_allowed",
            Self::BodyTooLarge { .. } => "body_too_large",
            Self::BodyRead { .. } => "invalid_request",
            Self::BadWebsocket => "invalid_websocket_upgrade",
            Self::ShuttingDown => "shutting_down",
            Self::Loading => "model_loading",
            Self::Sleeping => "model_sleeping",
            Self::BadAdminRequest { .. } => "invalid_admin_request",
            Self::WaitTimeout { .. } => "wait_timeout",
        }
    }

    /// The envelope as JSON, as the server sends its own errors:
    /// `{"src": "llama-swap", "error": {"message", "type", "param": null, "code"}}`.
    pub fn envelope(&self) -> serde_json::Value {
        proxy_envelope(&self.to_string(), self.kind(), self.code())
    }

    /// The complete HTTP response.
    pub(crate) fn into_response(self) -> http::Response<MockBody> {
        let mut response = json_response(self.status(), &self.envelope());
        if let Self::MethodNotAllowed { allow, .. } = &self {
            response
                .headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static(allow));
        }
        response
    }
}

/// The `type` llama-swap (and the server) give an error of `status`:
/// `authentication_error` for 401 and 403, `rate_limit_error` for 429,
/// `invalid_request_error` for any other 4xx, `server_error` otherwise.
pub(crate) fn error_type_for(status: StatusCode) -> &'static str {
    match status.as_u16() {
        401 | 403 => "authentication_error",
        429 => "rate_limit_error",
        400..=499 => "invalid_request_error",
        _ => "server_error",
    }
}

/// An error envelope `{"error": {"message", "type", "code"}}`, as a model
/// server sends one.
pub(crate) fn envelope(message: &str, kind: &str, code: &str) -> serde_json::Value {
    json!({"error": {"message": message, "type": kind, "code": code}})
}

/// The proxy's error envelope (llama-swap's and the server's):
/// `{"src": "llama-swap", "error": {"message", "type", "param": null, "code"}}`.
pub(crate) fn proxy_envelope(message: &str, kind: &str, code: &str) -> serde_json::Value {
    json!({
        "src": "llama-swap",
        "error": {"message": message, "type": kind, "param": null, "code": code},
    })
}

/// A JSON response with `Content-Type: application/json` and a known length.
pub(crate) fn json_response(
    status: StatusCode,
    value: &serde_json::Value,
) -> http::Response<MockBody> {
    let mut response = http::Response::new(MockBody::full(value.to_string()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_contract_statuses_and_codes_match_the_table() {
        let cases = [
            (
                ApiError::InvalidJson { reason: "x".into() },
                400,
                "invalid_request_error",
                "invalid_json",
            ),
            (
                ApiError::ModelMissing,
                400,
                "invalid_request_error",
                "model_missing",
            ),
            (
                ApiError::ModelNotFound { model: "q".into() },
                404,
                "invalid_request_error",
                "model_not_found",
            ),
            (
                ApiError::NotFound { path: "/x".into() },
                404,
                "invalid_request_error",
                "not_found",
            ),
            (
                ApiError::BodyTooLarge { limit: 1 },
                413,
                "invalid_request_error",
                "body_too_large",
            ),
            (ApiError::ShuttingDown, 503, "server_error", "shutting_down"),
            (
                ApiError::WaitTimeout {
                    what: "requests",
                    wanted: 1,
                    got: 0,
                    timeout_ms: 10,
                },
                408,
                "invalid_request_error",
                "wait_timeout",
            ),
        ];
        for (err, status, kind, code) in cases {
            assert_eq!(err.status().as_u16(), status, "{err:?}");
            assert_eq!(err.kind(), kind, "{err:?}");
            assert_eq!(err.code(), code, "{err:?}");
            let envelope = err.envelope();
            assert_eq!(envelope["src"], "llama-swap");
            assert_eq!(envelope["error"]["type"], kind);
            assert_eq!(envelope["error"]["code"], code);
            assert!(envelope["error"]["param"].is_null());
        }
    }

    #[test]
    fn the_type_follows_the_status_as_the_server_derives_it() {
        let table = [
            (400, "invalid_request_error"),
            (401, "authentication_error"),
            (403, "authentication_error"),
            (404, "invalid_request_error"),
            (408, "invalid_request_error"),
            (429, "rate_limit_error"),
            (500, "server_error"),
            (502, "server_error"),
            (503, "server_error"),
            (504, "server_error"),
        ];
        for (status, kind) in table {
            let status = StatusCode::from_u16(status).unwrap();
            assert_eq!(error_type_for(status), kind, "{status}");
        }
    }

    #[test]
    fn method_not_allowed_sends_allow_header() {
        let response = ApiError::MethodNotAllowed {
            method: Method::GET,
            path: "/v1/chat/completions".into(),
            allow: "POST",
        }
        .into_response();
        assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(response.headers()[header::ALLOW], "POST");
    }
}
