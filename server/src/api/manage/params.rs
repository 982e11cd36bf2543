//! Path and query extractors whose rejections are the JSON error envelope, like
//! every other error (axum's own answer plain text).

use axum::extract::{FromRequestParts, Path, Query};
use http::request::Parts;
use serde::de::DeserializeOwned;

use crate::api::error::ApiError;

/// A path parameter (`{model}`, `{*model}`) as a string; percent-decoding to
/// invalid UTF-8 is 400 `invalid_path`.
#[derive(Debug)]
pub(crate) struct PathParam(pub(crate) String);

impl<S: Send + Sync> FromRequestParts<S> for PathParam {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Path::<String>::from_request_parts(parts, state)
            .await
            .map(|Path(value)| Self(value))
            .map_err(|rejection| ApiError::InvalidPath {
                reason: rejection.body_text(),
            })
    }
}

/// The query string decoded into `T`; a query that does not decode is 400
/// `invalid_query`.
#[derive(Debug)]
pub(crate) struct QueryParams<T>(pub(crate) T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for QueryParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(value)| Self(value))
            .map_err(|rejection| ApiError::InvalidQuery {
                reason: rejection.body_text(),
            })
    }
}
