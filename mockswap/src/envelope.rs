//! The HTTP error envelope shared with the real server (docs/ERRORS.md in the repository):
//! `{"error": {"message", "type", "code"}}` with a fixed status per situation.

use http::{HeaderValue, Method, StatusCode, header};
use serde_json::json;

use crate::body::MockBody;

/// A situation the mock answers with an error envelope. Status, `type` and `code` are
/// fixed per variant, as in docs/ERRORS.md.
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

    /// The envelope's `type`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::InvalidJson { .. }
            | Self::ModelMissing
            | Self::MethodNotAllowed { .. }
            | Self::BodyTooLarge { .. }
            | Self::BadAdminRequest { .. }
            | Self::BodyRead { .. }
            | Self::BadWebsocket => "invalid_request_error",
            Self::ModelNotFound { .. } | Self::NotFound { .. } => "not_found_error",
            Self::ShuttingDown | Self::Loading | Self::Sleeping => "server_error",
            Self::WaitTimeout { .. } => "timeout_error",
        }
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

    /// The envelope as JSON.
    pub fn envelope(&self) -> serde_json::Value {
        envelope(&self.to_string(), self.kind(), self.code())
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

/// An error envelope `{"error": {"message", "type", "code"}}`.
pub(crate) fn envelope(message: &str, kind: &str, code: &str) -> serde_json::Value {
    json!({"error": {"message": message, "type": kind, "code": code}})
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
                "not_found_error",
                "model_not_found",
            ),
            (
                ApiError::NotFound { path: "/x".into() },
                404,
                "not_found_error",
                "not_found",
            ),
            (
                ApiError::BodyTooLarge { limit: 1 },
                413,
                "invalid_request_error",
                "body_too_large",
            ),
            (ApiError::ShuttingDown, 503, "server_error", "shutting_down"),
        ];
        for (err, status, kind, code) in cases {
            assert_eq!(err.status().as_u16(), status, "{err:?}");
            assert_eq!(err.kind(), kind, "{err:?}");
            assert_eq!(err.code(), code, "{err:?}");
            assert_eq!(err.envelope()["error"]["code"], code);
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
