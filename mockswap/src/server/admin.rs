//! The admin API under `/__mockswap/`, for tests that are not written in Rust.
//! Admin requests are not journaled.

use bytes::Bytes;
use http::{Method, Response, StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};

use super::Shared;
use crate::body::MockBody;
use crate::envelope::{ApiError, json_response};
use crate::spec;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GateJson {
    open: bool,
}

pub(crate) fn handle(
    shared: &Shared,
    parts: &http::request::Parts,
    body: &Bytes,
) -> Response<MockBody> {
    let path = parts.uri.path();
    let method = &parts.method;
    let route = path.trim_start_matches("/__mockswap").trim_end_matches('/');
    let not_allowed = |allow: &'static str| {
        ApiError::MethodNotAllowed {
            method: method.clone(),
            path: path.to_owned(),
            allow,
        }
        .into_response()
    };
    let bad = |reason: String| ApiError::BadAdminRequest { reason }.into_response();
    match route {
        "/requests" => match *method {
            Method::GET => {
                let since = match since(parts.uri.query()) {
                    Ok(since) => since,
                    Err(reason) => return bad(reason),
                };
                let entries: Vec<Value> = shared
                    .journal
                    .requests()
                    .iter()
                    .filter(|r| r.seq > since)
                    .map(|r| r.to_json())
                    .collect();
                json_response(StatusCode::OK, &Value::Array(entries))
            }
            Method::DELETE => {
                shared.journal.clear();
                json_response(StatusCode::OK, &json!({"cleared": true}))
            }
            _ => not_allowed("GET, DELETE"),
        },
        "/dispatch-order" => match *method {
            Method::GET => json_response(StatusCode::OK, &json!(shared.journal.dispatch_order())),
            _ => not_allowed("GET"),
        },
        "/faults" => match *method {
            Method::POST => match spec::parse_fault_rules(body) {
                Ok(rules) => {
                    let installed = rules.len();
                    for rule in rules {
                        shared.faults.add(rule);
                    }
                    json_response(StatusCode::OK, &json!({"installed": installed}))
                }
                Err(err) => bad(err.to_string()),
            },
            Method::DELETE => {
                shared.faults.clear();
                json_response(StatusCode::OK, &json!({"cleared": true}))
            }
            _ => not_allowed("POST, DELETE"),
        },
        "/replies" => match *method {
            Method::POST => match spec::parse_reply_rules(body) {
                Ok(rules) => {
                    let installed = rules.len();
                    for rule in rules {
                        shared.replies.add(rule);
                    }
                    json_response(StatusCode::OK, &json!({"installed": installed}))
                }
                Err(err) => bad(err.to_string()),
            },
            Method::DELETE => {
                shared.replies.clear();
                json_response(StatusCode::OK, &json!({"cleared": true}))
            }
            _ => not_allowed("POST, DELETE"),
        },
        "/gate" => match *method {
            Method::GET => gate_state(shared),
            Method::POST => match serde_json::from_slice::<GateJson>(body) {
                Ok(gate) => {
                    shared.gate.set_open(gate.open);
                    json_response(StatusCode::OK, &json!({"open": gate.open}))
                }
                Err(err) => bad(format!("expected {{\"open\": true|false}}: {err}")),
            },
            _ => not_allowed("GET, POST"),
        },
        _ => ApiError::NotFound {
            path: path.to_owned(),
        }
        .into_response(),
    }
}

fn gate_state(shared: &Shared) -> Response<MockBody> {
    let state = shared.gate.state();
    json_response(
        StatusCode::OK,
        &json!({"open": state.open, "held": state.held}),
    )
}

/// `?since=<seq>`: only entries after that sequence number (0 when absent).
fn since(query: Option<&str>) -> Result<u64, String> {
    let Some(value) = query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .find_map(|pair| pair.strip_prefix("since="))
    else {
        return Ok(0);
    };
    value
        .parse()
        .map_err(|_| format!("since={value:?} is not a sequence number"))
}
