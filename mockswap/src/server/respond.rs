//! Small answers several routes share: health, the model list, plain text.

use http::{HeaderValue, Response, StatusCode, header};
use serde_json::json;

use super::shared::Shared;
use crate::body::MockBody;
use crate::envelope::json_response;
use crate::wire;

pub(crate) fn health(shared: &Shared) -> Response<MockBody> {
    if shared.healthy() && !shared.sleep.awake_or_count() {
        return json_response(
            StatusCode::SERVICE_UNAVAILABLE,
            &json!({"status": "sleeping"}),
        );
    }
    if shared.healthy() {
        json_response(StatusCode::OK, &json!({"status": "ok"}))
    } else {
        json_response(
            StatusCode::SERVICE_UNAVAILABLE,
            &json!({"status": "loading"}),
        )
    }
}

pub(crate) fn models(shared: &Shared) -> Response<MockBody> {
    let loaded = shared.state.loaded().clone();
    let mut listed: Vec<String> = match &shared.settings.models {
        Some(models) => models.clone(),
        None => loaded.iter().cloned().collect(),
    };
    listed.sort();
    listed.dedup();
    let rows = listed.iter().map(|m| (m.as_str(), loaded.contains(m)));
    json_response(StatusCode::OK, &wire::model_list(rows))
}

pub(crate) fn text(status: StatusCode, body: &'static str) -> Response<MockBody> {
    let mut response = Response::new(MockBody::full(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
