//! Websocket echo on every path outside `/__mockswap/` (the proxy's websocket tests
//! need an upstream that speaks it): the upgrade is journaled like a request (with
//! `websocket: true`), then every text and binary message is sent back unchanged,
//! pings are answered, and the socket closes when the client closes it.

use std::sync::Arc;

use futures_util::{SinkExt as _, StreamExt as _};
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::Role;

use super::extract::{query_param, recorded, upstream_target};
use super::shared::Shared;
use crate::body::MockBody;
use crate::envelope::ApiError;

/// How long a graceful stop waits for a client to answer the closing handshake.
const CLOSE_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

fn has_token(request: &Request<Incoming>, name: header::HeaderName, token: &str) -> bool {
    request.headers().get_all(name).iter().any(|value| {
        value
            .to_str()
            .is_ok_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
    })
}

/// Whether the request asks for a websocket upgrade.
pub(crate) fn is_upgrade(request: &Request<Incoming>) -> bool {
    request.method() == Method::GET
        && has_token(request, header::CONNECTION, "upgrade")
        && has_token(request, header::UPGRADE, "websocket")
}

/// Journals the upgrade, answers 101 and echoes on the upgraded connection (a task on
/// the mock's tracker, stopped with the mock).
pub(crate) fn handle(shared: &Arc<Shared>, mut request: Request<Incoming>) -> Response<MockBody> {
    let key = request.headers().get(header::SEC_WEBSOCKET_KEY).cloned();
    let version_ok = request
        .headers()
        .get(header::SEC_WEBSOCKET_VERSION)
        .is_some_and(|v| v.as_bytes() == b"13");
    let on_upgrade = hyper::upgrade::on(&mut request);
    let (parts, _body) = request.into_parts();
    let model = upstream_target(parts.uri.path())
        .map(|(model, _)| model)
        .or_else(|| parts.uri.query().and_then(|q| query_param(q, "model")));
    let received = shared.started.elapsed();
    let mut entry = recorded(received, &parts, &bytes::Bytes::new(), None, model, false);
    entry.websocket = true;
    shared.state.journal.record(entry);
    let (Some(key), true) = (key, version_ok) else {
        return ApiError::BadWebsocket.into_response();
    };
    let open = shared.sockets.opened();
    let kill = shared.life.kill.clone();
    let shutdown = shared.life.shutdown.clone();
    shared.tracker.spawn(async move {
        let _open = open;
        let upgraded = tokio::select! {
            upgraded = on_upgrade => upgraded,
            () = kill.cancelled() => return,
        };
        let Ok(upgraded) = upgraded else {
            return;
        };
        let socket =
            WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, None).await;
        tokio::select! {
            () = echo(socket, shutdown) => {}
            () = kill.cancelled() => {}
        }
    });
    let mut response = Response::new(MockBody::empty());
    *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let headers = response.headers_mut();
    headers.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    if let Ok(accept) = HeaderValue::from_str(&derive_accept_key(key.as_bytes())) {
        headers.insert(header::SEC_WEBSOCKET_ACCEPT, accept);
    }
    response
}

/// Sends every data message back until the client closes (tungstenite answers pings
/// and the closing handshake itself); on a graceful stop, closes from this side.
async fn echo<S>(mut socket: WebSocketStream<S>, shutdown: tokio_util::sync::CancellationToken)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    loop {
        let message = tokio::select! {
            message = socket.next() => message,
            () = shutdown.cancelled() => {
                let _ = socket.close(None).await;
                // Read until the client's close reply (or the end) so the handshake
                // completes; a client that never answers does not hold the stop up.
                let drain = async { while let Some(Ok(_)) = socket.next().await {} };
                let _ = tokio::time::timeout(CLOSE_GRACE, drain).await;
                return;
            }
        };
        match message {
            Some(Ok(message @ (Message::Text(_) | Message::Binary(_)))) => {
                if socket.send(message).await.is_err() {
                    return;
                }
            }
            Some(Ok(_)) => {}
            Some(Err(_)) | None => return,
        }
    }
}
