//! Websocket echo on non-admin paths (contract C2), read with a real websocket client.

use futures_util::{SinkExt, StreamExt};
use mockswap::{MockSwap, PriorityHeader};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::{BOUND, client};

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn connect(mock: &MockSwap, path: &str, priority: Option<&str>) -> Socket {
    let url = format!("ws://{}{path}", mock.address());
    let mut request = url.into_client_request().unwrap();
    if let Some(p) = priority {
        request
            .headers_mut()
            .insert("x-priority", p.parse().unwrap());
    }
    let (socket, response) = tokio::time::timeout(BOUND, tokio_tungstenite::connect_async(request))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(response.status(), 101);
    socket
}

async fn next(socket: &mut Socket) -> Message {
    tokio::time::timeout(BOUND, socket.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap()
}

#[tokio::test]
async fn websocket_echoes_text_binary_and_pings_and_is_journaled() {
    let mock = MockSwap::start().await;
    let mut socket = connect(&mock, "/ws", Some("10")).await;
    assert_eq!(mock.websockets_open(), 1);
    socket.send(Message::text("héllo")).await.unwrap();
    assert_eq!(next(&mut socket).await, Message::text("héllo"));
    socket
        .send(Message::binary(vec![0u8, 159, 255]))
        .await
        .unwrap();
    assert_eq!(
        next(&mut socket).await,
        Message::binary(vec![0u8, 159, 255])
    );
    socket
        .send(Message::Ping(b"are you there".to_vec().into()))
        .await
        .unwrap();
    assert_eq!(
        next(&mut socket).await,
        Message::Pong(b"are you there".to_vec().into())
    );
    let requests = mock.requests();
    assert_eq!(requests.len(), 1);
    let entry = &requests[0];
    assert!(entry.websocket);
    assert_eq!(entry.method, "GET");
    assert_eq!(entry.path, "/ws");
    assert_eq!(entry.priority, PriorityHeader::Value(10));
    assert_eq!(entry.to_json()["websocket"], true);
    socket.close(None).await.unwrap();
    mock.wait_for_websockets_open(0, BOUND).await.unwrap();
    assert_eq!(mock.websockets_total(), 1);
}

#[tokio::test]
async fn websocket_under_upstream_is_journaled_with_its_model() {
    let mock = MockSwap::start().await;
    let mut socket = connect(&mock, "/upstream/qwen/v1/realtime", None).await;
    socket.send(Message::text("x")).await.unwrap();
    assert_eq!(next(&mut socket).await, Message::text("x"));
    let entry = &mock.requests()[0];
    assert_eq!(entry.model.as_deref(), Some("qwen"));
    assert_eq!(entry.priority, PriorityHeader::Absent);
}

#[tokio::test]
async fn plain_requests_are_journaled_as_not_websocket() {
    let mock = MockSwap::start().await;
    client()
        .get(format!("{}/v1/models", mock.uri()))
        .send()
        .await
        .unwrap();
    let entry = &mock.requests()[0];
    assert!(!entry.websocket);
    assert_eq!(entry.to_json()["websocket"], false);
}

#[tokio::test]
async fn two_websockets_count_as_two_open_until_each_closes() {
    let mock = MockSwap::start().await;
    let mut a = connect(&mock, "/a", None).await;
    let b = connect(&mock, "/b", None).await;
    assert_eq!(mock.websockets_open(), 2);
    a.close(None).await.unwrap();
    mock.wait_for_websockets_open(1, BOUND).await.unwrap();
    drop(b);
    mock.wait_for_websockets_open(0, BOUND).await.unwrap();
    assert_eq!(mock.websockets_total(), 2);
}

#[tokio::test]
async fn shutdown_closes_open_websockets_with_a_close_frame() {
    let mock = MockSwap::start().await;
    let mut socket = connect(&mock, "/ws", None).await;
    let stopping = mock.shutdown();
    let read_to_end = async {
        let mut seen = Vec::new();
        // Reading on after the close frame sends the client's reply, which completes
        // the closing handshake and lets the shutdown finish.
        while let Some(message) = tokio::time::timeout(BOUND, socket.next()).await.unwrap() {
            seen.push(message.unwrap());
        }
        seen
    };
    let ((), seen) = tokio::join!(stopping, read_to_end);
    assert!(matches!(seen.as_slice(), [Message::Close(_)]), "{seen:?}");
    assert_eq!(mock.websockets_open(), 0);
}

#[tokio::test]
async fn upgrade_without_a_key_is_refused_and_still_journaled() {
    let mock = MockSwap::start().await;
    let response = client()
        .get(format!("{}/ws", mock.uri()))
        .header("connection", "Upgrade")
        .header("upgrade", "websocket")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "invalid_websocket_upgrade");
    assert!(mock.requests()[0].websocket);
    assert_eq!(mock.websockets_open(), 0);
}
