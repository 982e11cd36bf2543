//! The admin API under `/__mockswap/`, tested against the spawned binary.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../support/mod.rs"]
mod support;

mod basics;
mod expectations;
mod replies;

use serde_json::Value;

/// Calls `/__mockswap/<path>` and returns the status and the JSON body.
pub async fn admin(
    client: &reqwest::Client,
    method: reqwest::Method,
    uri: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = client.request(method, format!("{uri}/__mockswap/{path}"));
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

/// POSTs a chat body to the mock and returns status and JSON.
pub async fn chat_call(
    client: &reqwest::Client,
    uri: &str,
    body: &Value,
    headers: &[(&str, &str)],
) -> (u16, Value) {
    let mut request = client.post(format!("{uri}/v1/chat/completions")).json(body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}
