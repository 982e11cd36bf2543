//! Websocket upgrades through the proxy.
//!
//! `Connection` and `Upgrade` are hop-by-hop, so the proxy removes them like
//! any other; for a websocket handshake it then asks the upstream for the same
//! upgrade itself (the `Sec-WebSocket-*` headers are end-to-end and pass as
//! they are). When the upstream answers `101 Switching Protocols`, the client
//! gets that answer and [`splice`] joins the two upgraded connections into one
//! byte pipe on an owned task. The pipe holds the response body the proxy
//! built, and with it the request's lease: a websocket keeps its model busy
//! until either side closes it, as a long response would.

use axum::body::Body;
use axum::response::Response;
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use http_body_util::BodyExt as _;
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// True for a websocket handshake: `GET` with `Connection: upgrade` and
/// `Upgrade: websocket` (tokens compared case-insensitively, in any list).
pub(crate) fn is_websocket_upgrade(method: &Method, headers: &HeaderMap) -> bool {
    method == Method::GET
        && has_token(headers, &header::CONNECTION, "upgrade")
        && has_token(headers, &header::UPGRADE, "websocket")
}

fn has_token(headers: &HeaderMap, name: &header::HeaderName, token: &str) -> bool {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

/// Puts back the two headers that ask for a websocket, after the hop-by-hop
/// headers of the client's connection were removed.
pub(super) fn ask_for_websocket(headers: &mut HeaderMap) {
    headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
}

/// True when the upstream's `101` switches to the websocket protocol asked
/// for (and not to something else).
pub(super) fn switched_to_websocket(status: StatusCode, headers: &HeaderMap) -> bool {
    status == StatusCode::SWITCHING_PROTOCOLS && has_token(headers, &header::UPGRADE, "websocket")
}

/// Resolves when an operator cancelled the request a websocket belongs to
/// (`POST /api/inflight/{id}/cancel`): its pipe then closes.
pub(crate) type Cancelled = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Turns the upstream's `101` into the client's: the client gets the status
/// and headers with an empty body, and a task on `tasks` pipes bytes between
/// the client's connection (`client`, taken from its request) and the
/// upstream's until either side closes, `cancel` fires (the server drains),
/// `cancelled` resolves (an operator cancelled the request), or `retire`'s
/// token fires and its grace passes (the model's process was changed by a
/// reload: requests for its new definition wait for this socket). The
/// response's body, with everything it holds (the lease, the activity
/// record), is kept by that task and ended when the pipe ends.
///
/// A response that is not a `101` is returned unchanged.
pub(crate) fn splice(
    response: Response,
    client: OnUpgrade,
    tasks: &TaskTracker,
    cancel: CancellationToken,
    cancelled: Option<Cancelled>,
    retire: Option<(CancellationToken, Duration)>,
    model: &str,
) -> Response {
    if response.status() != StatusCode::SWITCHING_PROTOCOLS {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Some(upstream) = parts.extensions.remove::<OnUpgrade>() else {
        // Only a response from the proxy's client carries the upstream's side.
        tracing::error!(%model, "a 101 response without the upstream's connection");
        let mut failed = Response::new(Body::empty());
        *failed.status_mut() = StatusCode::BAD_GATEWAY;
        return failed;
    };
    let model = model.to_owned();
    tasks.spawn(async move {
        let retired = async {
            let Some((token, grace)) = retire else {
                return std::future::pending().await;
            };
            token.cancelled().await;
            tracing::warn!(%model, ?grace, "a reload changed the model under an open websocket; it is closed after the model's unloadTimeout, so requests for the new definition do not wait on it");
            tokio::time::sleep(grace).await;
        };
        let cancelled_by_operator = async {
            match cancelled {
                Some(cancelled) => cancelled.await,
                None => std::future::pending().await,
            }
        };
        let piped = tokio::select! {
            biased;
            () = cancel.cancelled() => {
                tracing::debug!(%model, "websocket closed: the server is draining");
                true
            }
            () = cancelled_by_operator => {
                tracing::info!(%model, "websocket closed: an operator cancelled its request");
                true
            }
            () = retired => {
                tracing::info!(%model, "websocket closed: its model was changed by a reload");
                true
            }
            piped = pipe(client, upstream) => match piped {
                Ok((sent, received)) => {
                    tracing::debug!(%model, sent, received, "websocket closed");
                    true
                }
                Err(error) => {
                    tracing::debug!(%model, %error, "websocket ended with an error");
                    // Upgraded: the socket was served, however it ended.
                    !matches!(error, PipeError::Upgrade(_))
                }
            },
        };
        if piped {
            // The upstream's 101 has no body: this ends the record and
            // releases the lease as a completed response would.
            drop(body.collect().await);
        }
    });
    Response::from_parts(parts, Body::empty())
}

#[derive(Debug, thiserror::Error)]
enum PipeError {
    #[error("the connection was not upgraded: {0}")]
    Upgrade(#[source] hyper::Error),
    #[error("copying failed: {0}")]
    Io(#[source] std::io::Error),
}

/// Waits for both connections to be handed over, then copies both ways until
/// each side has closed its half; returns the bytes sent to the upstream and
/// received from it.
async fn pipe(client: OnUpgrade, upstream: OnUpgrade) -> Result<(u64, u64), PipeError> {
    let (client, upstream) = tokio::try_join!(client, upstream).map_err(PipeError::Upgrade)?;
    let mut client = TokioIo::new(client);
    let mut upstream = TokioIo::new(upstream);
    tokio::io::copy_bidirectional(&mut client, &mut upstream)
        .await
        .map_err(PipeError::Io)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn a_websocket_handshake_is_recognised_in_any_token_list_and_case() {
        let h = headers(&[
            ("connection", "keep-alive, Upgrade"),
            ("upgrade", "WebSocket"),
        ]);
        assert!(is_websocket_upgrade(&Method::GET, &h));
        let split = headers(&[
            ("connection", "keep-alive"),
            ("connection", "upgrade"),
            ("upgrade", "websocket"),
        ]);
        assert!(is_websocket_upgrade(&Method::GET, &split));
    }

    #[test]
    fn other_upgrades_and_other_methods_are_not_websockets() {
        let h2c = headers(&[("connection", "upgrade"), ("upgrade", "h2c")]);
        assert!(!is_websocket_upgrade(&Method::GET, &h2c));
        let no_connection = headers(&[("upgrade", "websocket")]);
        assert!(!is_websocket_upgrade(&Method::GET, &no_connection));
        let ws = headers(&[("connection", "upgrade"), ("upgrade", "websocket")]);
        assert!(!is_websocket_upgrade(&Method::POST, &ws));
    }

    #[test]
    fn only_a_101_to_websocket_counts_as_switched() {
        let ws = headers(&[("upgrade", "websocket")]);
        assert!(switched_to_websocket(StatusCode::SWITCHING_PROTOCOLS, &ws));
        let other = headers(&[("upgrade", "h2c")]);
        assert!(!switched_to_websocket(
            StatusCode::SWITCHING_PROTOCOLS,
            &other
        ));
        assert!(!switched_to_websocket(StatusCode::OK, &ws));
    }

    #[tokio::test]
    async fn a_response_other_than_101_is_returned_as_it_is() {
        let mut request = http::Request::new(Body::empty());
        let client = hyper::upgrade::on(&mut request);
        let tasks = TaskTracker::new();
        let mut response = Response::new(Body::from("nope"));
        *response.status_mut() = StatusCode::NOT_FOUND;
        let out = splice(
            response,
            client,
            &tasks,
            CancellationToken::new(),
            None,
            None,
            "m",
        );
        assert_eq!(out.status(), StatusCode::NOT_FOUND);
        assert!(tasks.is_empty());
        let body = out.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], b"nope");
    }
}
