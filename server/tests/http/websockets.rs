//! Websockets through model routes (proxied both ways, holding their model
//! like a request), `compat.ignoreWebsockets`, and `/comfyui/...`; the
//! upstreams are mockswap processes, which echo every websocket message.

use futures_util::{SinkExt as _, StreamExt as _};
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream, connect_async};

use crate::support::{Harness, LIMIT, ModelSpec, model};

pub(crate) type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// A model that ignores websockets.
fn ignoring(id: &'static str) -> ModelSpec {
    ModelSpec {
        id,
        args: "",
        yaml: "compat: {ignoreWebsockets: true}",
    }
}

fn ws_url(h: &Harness, path: &str) -> String {
    format!("{}{path}", h.base.replacen("http://", "ws://", 1))
}

/// Opens a websocket through the server, sending `headers` with the handshake.
pub(crate) async fn open(h: &Harness, path: &str, headers: &[(&'static str, &'static str)]) -> Ws {
    match try_open(h, path, headers).await {
        Ok(ws) => ws,
        Err(error) => panic!("websocket to {path} refused: {error:?}"),
    }
}

async fn try_open(
    h: &Harness,
    path: &str,
    headers: &[(&'static str, &'static str)],
) -> Result<Ws, WsError> {
    let mut request = ws_url(h, path).into_client_request().unwrap();
    for (name, value) in headers {
        request.headers_mut().insert(*name, value.parse().unwrap());
    }
    let (ws, response) = tokio::time::timeout(LIMIT, connect_async(request))
        .await
        .expect("the handshake did not finish")?;
    assert_eq!(response.status(), 101);
    Ok(ws)
}

/// The status and JSON body of a refused handshake.
async fn refused(h: &Harness, path: &str) -> (u16, Value) {
    match try_open(h, path, &[]).await {
        Err(WsError::Http(response)) => {
            let body = response.body().clone().unwrap_or_default();
            let json = serde_json::from_slice(&body).unwrap_or(Value::Null);
            (response.status().as_u16(), json)
        }
        Ok(_) => panic!("the websocket to {path} was accepted"),
        Err(other) => panic!("the websocket to {path} failed otherwise: {other:?}"),
    }
}

async fn next(ws: &mut Ws) -> Option<Result<Message, WsError>> {
    tokio::time::timeout(LIMIT, ws.next())
        .await
        .expect("no websocket message in time")
}

/// Sends `message` and expects it back unchanged.
pub(crate) async fn echo(ws: &mut Ws, message: Message) {
    ws.send(message.clone()).await.unwrap();
    let reply = next(ws).await.expect("socket closed").unwrap();
    assert_eq!(reply, message);
}

/// Closes from the client side and reads until the server's side is closed too.
pub(crate) async fn close(mut ws: Ws) {
    ws.close(None).await.unwrap();
    while let Some(Ok(_)) = next(&mut ws).await {}
}

/// Expects the socket to end next (a close frame, EOF or a reset).
pub(crate) async fn wait_closed(ws: &mut Ws) {
    match next(ws).await {
        None | Some(Err(_) | Ok(Message::Close(_))) => {}
        Some(Ok(other)) => panic!("unexpected message {other:?}"),
    }
}

fn message(body: &Value) -> &str {
    body["error"]["message"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn a_websocket_through_upstream_starts_its_model_and_echoes_both_ways() {
    let h = Harness::start(&[model("a", "")], "").await;
    let mut ws = open(
        &h,
        "/upstream/a/ws?client=1",
        &[("x-trace", "t1"), ("x-priority", "10")],
    )
    .await;
    echo(&mut ws, Message::text("hello through the proxy")).await;
    echo(&mut ws, Message::binary(vec![0_u8, 1, 2, 255])).await;
    echo(&mut ws, Message::text("é".repeat(40_000))).await;
    assert_eq!(h.running().await, ["a"]);

    let journal = h.journal("a").await.unwrap();
    let upgrade = journal
        .iter()
        .find(|e| e["websocket"] == true)
        .expect("no websocket in the upstream's journal");
    assert_eq!(upgrade["path"], "/ws");
    assert_eq!(upgrade["query"], "client=1");
    let header = |name: &str| {
        upgrade["headers"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|pair| pair["name"] == name)
            .map(|pair| pair["value"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    // The client checked Sec-WebSocket-Accept against its key: both crossed.
    assert_eq!(header("x-trace"), ["t1"]);
    assert_eq!(header("sec-websocket-version"), ["13"]);
    assert_eq!(header("sec-websocket-key").len(), 1);
    assert_eq!(header("upgrade"), ["websocket"]);
    assert!(header("x-priority").is_empty(), "X-Priority was forwarded");
    close(ws).await;
    h.shutdown().await;
}

#[tokio::test]
async fn a_websocket_on_a_query_model_route_is_proxied() {
    let h = Harness::start(&[model("a", "")], "").await;
    let mut ws = open(&h, "/props?model=a", &[]).await;
    echo(&mut ws, Message::text("props over a socket")).await;
    let journal = h.journal("a").await.unwrap();
    assert!(
        journal
            .iter()
            .any(|e| e["websocket"] == true && e["path"] == "/props"),
        "{journal:?}"
    );
    close(ws).await;
    h.shutdown().await;
}

#[tokio::test]
async fn an_open_websocket_keeps_its_model_until_it_closes_and_an_elevated_waiter_waits() {
    let h = Harness::start(&[model("a", ""), model("b", "")], "").await;
    let mut ws = open(&h, "/upstream/a/ws", &[]).await;
    echo(&mut ws, Message::text("before")).await;

    // b needs a stopped; the socket holds a like a request in flight.
    let waiting = h.spawn(h.chat("b", Some("10"), false));
    let queue = h.wait_queue_len(1).await;
    assert_eq!(queue[0]["model"], "b");
    assert_eq!(queue[0]["effective_priority"], 10);
    echo(&mut ws, Message::text("still served while b waits")).await;
    assert_eq!(
        h.running().await,
        ["a"],
        "a was evicted under its websocket"
    );
    assert!(
        !waiting.is_finished(),
        "b was served while a's websocket was open"
    );

    close(ws).await;
    let (status, body) = tokio::time::timeout(LIMIT, waiting).await.unwrap().unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(h.running().await, ["b"]);

    // The socket's record spans its life and ended before b was granted.
    let activity: Value = h
        .http
        .get(h.url("/api/activity"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let rows = activity["activity"].as_array().unwrap();
    let socket = rows
        .iter()
        .find(|r| r["req_path"] == "/ws")
        .expect("no row for the socket");
    assert_eq!(socket["resp_status_code"], 101);
    assert_eq!(socket["model"], "a");
    assert!(socket["error"].is_null(), "{socket}");
    let chat = rows
        .iter()
        .find(|r| r["model"] == "b")
        .expect("no row for b");
    assert!(
        socket["id"].as_u64() < chat["id"].as_u64(),
        "the socket finished after b: {rows:?}"
    );
    h.shutdown().await;
}

#[tokio::test]
async fn an_ignored_websocket_to_a_model_not_ready_is_409_and_starts_nothing() {
    let h = Harness::start(&[ignoring("a")], "").await;
    for path in ["/upstream/a/ws", "/props?model=a"] {
        let (status, body) = refused(&h, path).await;
        assert_eq!(status, 409, "{path}: {body}");
        assert_eq!(body["error"]["code"], "model_not_loaded");
        assert_eq!(
            message(&body),
            "model a is not loaded; ignored websocket requests cannot start it"
        );
    }
    assert!(
        h.running().await.is_empty(),
        "an ignored websocket started a"
    );
    assert!(h.journal("a").await.is_none(), "the upstream was started");

    // Plain requests still start the model; then its websockets are proxied.
    assert_eq!(h.chat("a", None, false).send().await.unwrap().status(), 200);
    let mut ws = open(&h, "/upstream/a/ws", &[]).await;
    echo(&mut ws, Message::text("now it is ready")).await;
    close(ws).await;
    h.shutdown().await;
}

#[tokio::test]
async fn a_swap_stops_the_model_under_an_ignored_websocket() {
    let h = Harness::start(&[ignoring("a"), model("b", "")], "").await;
    assert_eq!(h.chat("a", None, false).send().await.unwrap().status(), 200);
    let mut ws = open(&h, "/upstream/a/ws", &[]).await;
    echo(&mut ws, Message::text("open")).await;

    // Nothing holds a: b is served at once, though the socket is still open.
    let (status, body) = tokio::time::timeout(LIMIT, h.spawn(h.chat("b", None, false)))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(h.running().await, ["b"]);
    // a's process is gone, and the socket with it.
    wait_closed(&mut ws).await;
    h.shutdown().await;
}

fn comfyui() -> ModelSpec {
    model("comfyui_auto", "")
}

fn no_redirects() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

#[tokio::test]
async fn comfyui_redirects_to_its_root_keeping_the_query() {
    let h = Harness::start(&[comfyui()], "").await;
    let http = no_redirects();
    let get = http.get(h.url("/comfyui?tab=queue")).send().await.unwrap();
    assert_eq!(get.status(), 301);
    assert_eq!(get.headers()["location"], "/comfyui/?tab=queue");
    let post = http.post(h.url("/comfyui")).body("x").send().await.unwrap();
    assert_eq!(post.status(), 308);
    assert_eq!(post.headers()["location"], "/comfyui/");
    assert!(h.running().await.is_empty());
    h.shutdown().await;
}

#[tokio::test]
async fn comfyui_paths_other_than_the_root_are_409_until_the_root_starts_it() {
    let h = Harness::start(&[comfyui()], "").await;
    let response = h
        .http
        .get(h.url("/comfyui/api/queue"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 409);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "model_not_loaded");
    assert_eq!(
        message(&body),
        "model comfyui_auto is not loaded; only /comfyui/ can start it"
    );
    let (status, body) = refused(&h, "/comfyui/ws?clientId=1").await;
    assert_eq!(status, 409, "{body}");
    // The root's websocket may not start it either: comfyui_auto ignores websockets.
    let (status, body) = refused(&h, "/comfyui/").await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(
        message(&body),
        "model comfyui_auto is not loaded; ignored websocket requests cannot start it"
    );
    assert!(
        h.running().await.is_empty(),
        "a non-root path started comfyui_auto"
    );
    assert!(h.journal("comfyui_auto").await.is_none());

    // The root starts it; then every path is forwarded with the prefix stripped
    // and its escapes kept.
    h.http.get(h.url("/comfyui/")).send().await.unwrap();
    assert_eq!(h.running().await, ["comfyui_auto"]);
    let response = h
        .http
        .get(h.url("/comfyui/view/a%2Fb.png?type=output"))
        .send()
        .await
        .unwrap();
    assert_ne!(response.status(), 409);
    let mut ws = open(&h, "/comfyui/ws?clientId=1", &[]).await;
    echo(&mut ws, Message::text("{\"type\":\"status\"}")).await;
    let journal = h.journal("comfyui_auto").await.unwrap();
    let paths: Vec<(&str, &str, bool)> = journal
        .iter()
        .map(|e| {
            (
                e["path"].as_str().unwrap(),
                e["query"].as_str().unwrap_or_default(),
                e["websocket"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        paths,
        [
            ("/", "", false),
            ("/view/a%2Fb.png", "type=output", false),
            ("/ws", "clientId=1", true),
        ]
    );
    close(ws).await;
    h.shutdown().await;
}

#[tokio::test]
async fn comfyui_without_a_comfyui_auto_model_is_404() {
    let h = Harness::start(&[model("a", "")], "").await;
    let response = h.http.get(h.url("/comfyui/")).send().await.unwrap();
    assert_eq!(response.status(), 404);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "model_not_found");
    assert!(message(&body).contains("comfyui_auto"), "{body}");
    h.shutdown().await;
}

#[tokio::test]
async fn a_shutdown_with_an_open_websocket_returns_closes_it_and_leaves_no_process() {
    let h = Harness::start(&[model("a", "")], "").await;
    let mut ws = open(&h, "/upstream/a/ws", &[]).await;
    echo(&mut ws, Message::text("open")).await;
    h.shutdown().await;
    wait_closed(&mut ws).await;
}

#[tokio::test]
async fn a_reload_keeps_an_open_websocket_of_a_kept_model() {
    let mut h = Harness::start(&[model("a", "")], "").await;
    let mut ws = open(&h, "/upstream/a/ws", &[]).await;
    echo(&mut ws, Message::text("before the reload")).await;
    // a is kept (same process): its socket and its lease stay. Returns once
    // the new configuration (with b) is served.
    h.reload(&[model("a", ""), model("b", "")], "").await;
    echo(&mut ws, Message::text("after the reload")).await;
    close(ws).await;
    h.shutdown().await;
}

#[tokio::test]
async fn a_reload_that_changes_a_model_closes_its_open_websocket_after_unload_timeout() {
    let before = ModelSpec {
        id: "a",
        args: "",
        yaml: "unloadTimeout: 1",
    };
    let mut h = Harness::start(&[before], "").await;
    let mut ws = open(&h, "/upstream/a/ws", &[]).await;
    echo(&mut ws, Message::text("before the reload")).await;
    // A new command: the running process (held by the socket) must stop
    // before the new definition starts.
    let after = ModelSpec {
        id: "a",
        args: "--load-time 1ms",
        yaml: "unloadTimeout: 1",
    };
    h.reload(&[after], "").await;
    let call = h.spawn(h.chat("a", None, false));
    wait_closed(&mut ws).await;
    let (status, body) = tokio::time::timeout(LIMIT, call)
        .await
        .expect("a request for the changed model waited on the old socket")
        .unwrap();
    assert_eq!(status, 200, "{body}");
    h.shutdown().await;
}
