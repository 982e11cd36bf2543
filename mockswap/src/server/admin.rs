//! The admin API under `/__mockswap/`, for tests that are not written in Rust.
//! Admin requests are not journaled.

use bytes::Bytes;
use http::{Method, Response, StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};

use super::extract::query_param;
use super::shared::Shared;
use crate::body::MockBody;
use crate::envelope::{ApiError, json_response};
use crate::report;
use crate::spec;
use crate::state::{Checked, Origin};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GateJson {
    open: bool,
}

/// Default bound of an admin wait when `timeout_ms` is not given.
const DEFAULT_WAIT_MS: u64 = 10_000;

/// Long-polling for tests without a client library: `GET requests?wait_for=N` waits
/// until the journal holds N requests, `GET gate?wait_held=N` until the gate holds N,
/// each bounded by `timeout_ms` (default 10 s). Errors are answered as responses.
pub(crate) async fn wait(shared: &Shared, parts: &http::request::Parts) -> Result<(), ApiError> {
    if parts.method != Method::GET {
        return Ok(());
    }
    let query = parts.uri.query().unwrap_or("");
    let number = |name: &str| -> Result<Option<u64>, ApiError> {
        query_param(query, name)
            .map(|v| {
                v.parse::<u64>().map_err(|_| ApiError::BadAdminRequest {
                    reason: format!("{name}={v:?} is not a number"),
                })
            })
            .transpose()
    };
    let timeout_ms = number("timeout_ms")?.unwrap_or(DEFAULT_WAIT_MS);
    let timeout = std::time::Duration::from_millis(timeout_ms);
    let route = parts
        .uri
        .path()
        .trim_start_matches("/__mockswap")
        .trim_end_matches('/');
    let as_count = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
    match route {
        "/requests" => {
            if let Some(n) = number("wait_for")?.map(as_count) {
                let waited =
                    tokio::time::timeout(timeout, shared.state.journal.wait_for_len(n)).await;
                if waited.is_err() {
                    return Err(ApiError::WaitTimeout {
                        what: "requests",
                        wanted: n,
                        got: shared.state.journal.len(),
                        timeout_ms,
                    });
                }
            }
        }
        "/gate" => {
            if let Some(n) = number("wait_held")?.map(as_count) {
                let waited = tokio::time::timeout(timeout, shared.state.gate.wait_held(n)).await;
                if waited.is_err() {
                    return Err(ApiError::WaitTimeout {
                        what: "held requests",
                        wanted: n,
                        got: shared.state.gate.state().held,
                        timeout_ms,
                    });
                }
            }
        }
        "/websockets" => {
            if let Some(n) = number("wait_open")?.map(as_count) {
                let mut rx = shared.sockets.subscribe();
                let waited = tokio::time::timeout(timeout, rx.wait_for(|c| c.open == n)).await;
                if waited.is_err() {
                    return Err(ApiError::WaitTimeout {
                        what: "open websockets",
                        wanted: n,
                        got: shared.sockets.counts().open,
                        timeout_ms,
                    });
                }
            }
        }
        _ => {}
    }
    Ok(())
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
                    .state
                    .journal
                    .requests()
                    .iter()
                    .filter(|r| r.seq > since)
                    .map(|r| r.to_json())
                    .collect();
                json_response(StatusCode::OK, &Value::Array(entries))
            }
            Method::DELETE => {
                shared.state.journal.clear();
                json_response(StatusCode::OK, &json!({"cleared": true}))
            }
            _ => not_allowed("GET, DELETE"),
        },
        "/dispatch-order" => match *method {
            Method::GET => json_response(
                StatusCode::OK,
                &json!(shared.state.journal.dispatch_order()),
            ),
            _ => not_allowed("GET"),
        },
        "/faults" => match *method {
            Method::POST => match spec::parse_fault_rules(body) {
                Ok(rules) => {
                    let installed = rules.len();
                    for rule in rules {
                        shared.state.faults.add(rule);
                    }
                    json_response(StatusCode::OK, &json!({"installed": installed}))
                }
                Err(err) => bad(err.to_string()),
            },
            Method::DELETE => {
                shared.state.faults.clear();
                json_response(StatusCode::OK, &json!({"cleared": true}))
            }
            _ => not_allowed("POST, DELETE"),
        },
        "/replies" => match *method {
            Method::POST => match spec::parse_reply_rules(body) {
                Ok(rules) => {
                    let installed = rules.len();
                    for rule in rules {
                        shared.state.replies.add(rule);
                    }
                    json_response(StatusCode::OK, &json!({"installed": installed}))
                }
                Err(err) => bad(err.to_string()),
            },
            Method::DELETE => {
                shared.state.replies.clear();
                json_response(StatusCode::OK, &json!({"cleared": true}))
            }
            _ => not_allowed("POST, DELETE"),
        },
        "/expectations" => match *method {
            Method::POST => match spec::parse_expectation(body) {
                Ok(expect) => {
                    let mounted = shared.state.mount(expect, Origin::Admin, None);
                    json_response(StatusCode::CREATED, &json!({"id": mounted.id}))
                }
                Err(err) => bad(err.to_string()),
            },
            Method::GET => {
                let requests = shared.state.journal.requests();
                let listed: Vec<Value> = shared
                    .state
                    .expectations
                    .all()
                    .iter()
                    .map(|m| report::listed(&Checked::new(m, &requests)))
                    .collect();
                json_response(StatusCode::OK, &Value::Array(listed))
            }
            Method::DELETE => {
                shared.state.expectations.clear();
                json_response(StatusCode::OK, &json!({"cleared": true}))
            }
            _ => not_allowed("GET, POST, DELETE"),
        },
        "/verify" => match *method {
            Method::GET => verify(shared),
            _ => not_allowed("GET"),
        },
        "/reset" => match *method {
            Method::POST => {
                shared.state.reset();
                json_response(StatusCode::OK, &json!({"reset": true}))
            }
            _ => not_allowed("POST"),
        },
        "/websockets" => match *method {
            Method::GET => {
                let counts = shared.sockets.counts();
                json_response(
                    StatusCode::OK,
                    &json!({"open": counts.open, "total": counts.total}),
                )
            }
            _ => not_allowed("GET"),
        },
        "/gate" => match *method {
            Method::GET => gate_state(shared),
            Method::POST => match serde_json::from_slice::<GateJson>(body) {
                Ok(gate) => {
                    shared.state.gate.set_open(gate.open);
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

/// `GET /__mockswap/verify`: 200 `{"ok": true}`, or 409 with every unmet expectation.
fn verify(shared: &Shared) -> Response<MockBody> {
    let requests = shared.state.journal.requests();
    let mounted = shared.state.expectations.all();
    let checked: Vec<Checked<'_>> = mounted.iter().map(|m| Checked::new(m, &requests)).collect();
    let failed: Vec<&Checked<'_>> = checked.iter().filter(|c| !c.met()).collect();
    if failed.is_empty() {
        return json_response(StatusCode::OK, &json!({"ok": true}));
    }
    let failures: Vec<Value> = failed.iter().map(|c| report::failure_json(c)).collect();
    json_response(
        StatusCode::CONFLICT,
        &json!({
            "ok": false,
            "failures": failures,
            "report": report::unmet(&failed, mounted.len(), &requests),
        }),
    )
}

fn gate_state(shared: &Shared) -> Response<MockBody> {
    let state = shared.state.gate.state();
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
