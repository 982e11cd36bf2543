//! A model request up to the gate: journaled, validated, then either answered with the
//! loading-state stream or held at the gate until `served` answers it.

use std::sync::Arc;

use bytes::Bytes;
use http::Response;

use super::extract::{extract, recorded};
use super::loading;
use super::respond::{health, models};
use super::served::Served;
use super::shared::{ConnControl, Shared};
use crate::body::MockBody;
use crate::envelope::ApiError;
use crate::wire::Api;

/// Serves a model request. `upstream` is `(model, endpoint path)` for
/// `/upstream/<model>/...`, where the model comes from the path and the body is passed
/// through unchecked (as the proxy does).
pub(crate) async fn handle(
    shared: &Arc<Shared>,
    conn: &ConnControl,
    parts: http::request::Parts,
    body: Bytes,
    upstream: Option<(String, String)>,
) -> Response<MockBody> {
    let endpoint = upstream
        .as_ref()
        .map_or_else(|| parts.uri.path().to_owned(), |(_, rest)| rest.clone());
    let api = Api::of_path(&endpoint);
    let extracted = extract(&parts, &body);
    // Behind `/upstream/<model>/` the path names the model and the body is the
    // upstream's business (the proxy does not parse it).
    let model = match &upstream {
        Some((model, _)) => Some(model.clone()),
        None => extracted.model.clone(),
    };
    let json = extracted.json.clone();
    let stream = extracted.stream;
    let received = shared.started.elapsed();
    let mut request = recorded(received, &parts, &body, json.clone(), model.clone(), stream);
    let seq = shared.state.journal.record(request.clone());
    request.seq = seq;

    if upstream.is_none()
        && let Some(reason) = extracted.json_error
    {
        return ApiError::InvalidJson { reason }.into_response();
    }
    let Some(model) = model else {
        return ApiError::ModelMissing.into_response();
    };
    if let Some(models) = &shared.settings.models
        && !models.contains(&model)
    {
        return ApiError::ModelNotFound { model }.into_response();
    }
    if upstream.is_some() {
        match endpoint.as_str() {
            "/health" => return health(shared),
            "/v1/models" | "/models" => return models(shared),
            _ => {}
        }
    }
    if !shared.healthy() {
        return ApiError::Loading.into_response();
    }
    if !shared.sleep.awake_or_count() {
        return ApiError::Sleeping.into_response();
    }

    let priority = request.priority.effective();
    let served = Served {
        shared: Arc::clone(shared),
        conn: conn.clone(),
        request,
        model,
        endpoint,
        api,
        json,
        stream,
    };
    if stream && api == Api::ChatCompletions && shared.settings.shape.loading_state {
        // The proxy answers 200 at once and reports the wait in the stream.
        return loading::respond(served, priority);
    }
    let Some(permit) = shared.state.gate.pass(seq, priority).await else {
        return ApiError::ShuttingDown.into_response();
    };
    served.after_gate(permit).await
}
