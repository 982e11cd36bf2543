use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::routing::{get, post};
use bytes::Bytes;
use futures_util::StreamExt;
use http::{HeaderMap, HeaderValue, Method, StatusCode};
use http_body_util::BodyExt;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::*;

const LIMIT: Duration = Duration::from_secs(10);

/// An in-process upstream whose streaming endpoint sends what the test pushes.
struct Upstream {
    base: String,
    chunks: mpsc::Sender<Result<Bytes, std::io::Error>>,
    /// Resolves when the upstream's response stream was dropped (connection gone).
    stream_dropped: Option<oneshot::Receiver<()>>,
    seen: Arc<Mutex<Vec<(HeaderMap, Bytes, String)>>>,
    _task: AbortOnDrop,
}

struct AbortOnDrop(JoinHandle<()>);
impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[derive(Clone)]
struct UpState {
    stream: Arc<
        Mutex<
            Option<(
                mpsc::Receiver<Result<Bytes, std::io::Error>>,
                oneshot::Sender<()>,
            )>,
        >,
    >,
    seen: Arc<Mutex<Vec<(HeaderMap, Bytes, String)>>>,
}

struct DropSignal(Option<oneshot::Sender<()>>);
impl Drop for DropSignal {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

async fn stream_handler(State(state): State<UpState>) -> axum::response::Response {
    let (rx, dropped) = state.stream.lock().unwrap().take().unwrap();
    let guard = DropSignal(Some(dropped));
    let stream = futures_util::stream::unfold((rx, guard), |(mut rx, guard)| async move {
        rx.recv().await.map(|item| (item, (rx, guard)))
    });
    axum::response::Response::builder()
        .header("content-type", "text/event-stream")
        .header("connection", "x-secret")
        .header("x-secret", "hop")
        .body(Body::from_stream(stream))
        .unwrap()
}

async fn echo_handler(
    State(state): State<UpState>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> &'static str {
    state
        .seen
        .lock()
        .unwrap()
        .push((headers, body, uri.to_string()));
    "ok"
}

async fn start_upstream() -> Upstream {
    let (tx, rx) = mpsc::channel(4);
    let (dropped_tx, dropped_rx) = oneshot::channel();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let state = UpState {
        stream: Arc::new(Mutex::new(Some((rx, dropped_tx)))),
        seen: seen.clone(),
    };
    let app = Router::new()
        .route("/prefix/stream", get(stream_handler))
        .route("/prefix/echo", post(echo_handler))
        .with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/prefix/", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    Upstream {
        base,
        chunks: tx,
        stream_dropped: Some(dropped_rx),
        seen,
        _task: AbortOnDrop(task),
    }
}

struct Lease(Option<oneshot::Sender<()>>);
impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

fn outbound(method: Method, path: &str, headers: HeaderMap, body: OutboundBody) -> Outbound {
    Outbound {
        method,
        path_and_query: path.to_owned(),
        headers,
        body,
        client_ip: Some("10.0.0.7".parse().unwrap()),
        body_limit: 1024,
        websocket: false,
        set_headers: HeaderMap::new(),
    }
}

#[tokio::test]
async fn sse_chunks_reach_the_client_one_by_one_and_lease_ends_with_body() {
    let upstream = start_upstream().await;
    let (lease_tx, mut lease_rx) = oneshot::channel();
    let response = Proxy::new(crate::api::stream_error_frames)
        .forward(
            "m",
            &upstream.base,
            outbound(
                Method::GET,
                "/stream",
                HeaderMap::new(),
                OutboundBody::Buffered(Bytes::new()),
            ),
            Lease(Some(lease_tx)),
        )
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["x-accel-buffering"], "no");
    assert!(!response.headers().contains_key("x-secret"));
    let mut body = response.into_body().into_data_stream();

    // Each chunk arrives before the next is even produced: nothing is buffered.
    for i in 0..3 {
        let chunk = format!("data: {i}\n\n");
        upstream
            .chunks
            .send(Ok(Bytes::from(chunk.clone())))
            .await
            .unwrap();
        let got = tokio::time::timeout(LIMIT, body.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(got, chunk);
        assert!(lease_rx.try_recv().is_err(), "lease released mid-stream");
    }
    // Closing the upstream stream ends the body and releases the lease.
    let Upstream { chunks, _task, .. } = upstream;
    drop(chunks);
    assert!(
        tokio::time::timeout(LIMIT, body.next())
            .await
            .unwrap()
            .is_none()
    );
    tokio::time::timeout(LIMIT, lease_rx)
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn dropping_the_response_mid_stream_releases_the_lease_and_the_upstream() {
    let mut upstream = start_upstream().await;
    let (lease_tx, lease_rx) = oneshot::channel();
    let response = Proxy::new(crate::api::stream_error_frames)
        .forward(
            "m",
            &upstream.base,
            outbound(
                Method::GET,
                "/stream",
                HeaderMap::new(),
                OutboundBody::Buffered(Bytes::new()),
            ),
            Lease(Some(lease_tx)),
        )
        .await
        .unwrap();
    let mut body = response.into_body().into_data_stream();
    upstream
        .chunks
        .send(Ok(Bytes::from_static(b"data: 0\n\n")))
        .await
        .unwrap();
    tokio::time::timeout(LIMIT, body.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();

    drop(body);
    tokio::time::timeout(LIMIT, lease_rx)
        .await
        .unwrap()
        .unwrap();
    // The upstream connection closes, so the upstream stops generating.
    let dropped = upstream.stream_dropped.take().unwrap();
    tokio::time::timeout(LIMIT, dropped).await.unwrap().unwrap();
}

#[tokio::test]
async fn request_headers_and_body_are_forwarded_without_priority_and_hop_headers() {
    let upstream = start_upstream().await;
    let mut headers = HeaderMap::new();
    headers.insert("x-priority", HeaderValue::from_static("10"));
    headers.insert("connection", HeaderValue::from_static("keep-alive"));
    headers.insert("content-type", HeaderValue::from_static("application/json"));
    headers.insert("content-length", HeaderValue::from_static("999"));
    headers.insert("x-custom", HeaderValue::from_static("kept"));
    let response = Proxy::new(crate::api::stream_error_frames)
        .forward(
            "m",
            &upstream.base,
            outbound(
                Method::POST,
                "/echo?x=1",
                headers,
                OutboundBody::Buffered(Bytes::from_static(b"{\"model\":\"real\"}")),
            ),
            (),
        )
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    response.into_body().collect().await.unwrap();
    let seen = upstream.seen.lock().unwrap().clone();
    let (headers, body, uri) = &seen[0];
    assert_eq!(uri, "/prefix/echo?x=1");
    assert_eq!(body, &Bytes::from_static(b"{\"model\":\"real\"}"));
    assert!(!headers.contains_key("x-priority"));
    assert_eq!(headers["content-length"], "16");
    assert_eq!(headers["x-custom"], "kept");
    assert_eq!(headers["x-forwarded-for"], "10.0.0.7");
}

#[tokio::test]
async fn set_headers_replace_the_clients_after_cleaning_and_may_carry_the_priority() {
    let upstream = start_upstream().await;
    let mut headers = HeaderMap::new();
    headers.insert("x-priority", HeaderValue::from_static("99"));
    headers.insert("authorization", HeaderValue::from_static("Bearer caller"));
    headers.append("x-api-key", HeaderValue::from_static("caller-1"));
    headers.append("x-api-key", HeaderValue::from_static("caller-2"));
    let mut request = outbound(
        Method::POST,
        "/echo",
        headers,
        OutboundBody::Buffered(Bytes::from_static(b"{}")),
    );
    request
        .set_headers
        .insert("x-priority", HeaderValue::from_static("-10"));
    request
        .set_headers
        .insert("authorization", HeaderValue::from_static("Bearer peer"));
    request
        .set_headers
        .insert("x-api-key", HeaderValue::from_static("peer"));
    let response = Proxy::new(crate::api::stream_error_frames)
        .forward("m", &upstream.base, request, ())
        .await
        .unwrap();
    response.into_body().collect().await.unwrap();
    let seen = upstream.seen.lock().unwrap().clone();
    let (headers, _, _) = &seen[0];
    let all = |name: &str| -> Vec<&str> {
        headers
            .get_all(name)
            .iter()
            .map(|v| v.to_str().unwrap())
            .collect()
    };
    assert_eq!(all("x-priority"), ["-10"]);
    assert_eq!(all("authorization"), ["Bearer peer"]);
    assert_eq!(all("x-api-key"), ["peer"]);
}

#[tokio::test]
async fn streaming_request_body_is_forwarded() {
    let upstream = start_upstream().await;
    let parts: Vec<Result<Bytes, std::io::Error>> =
        vec![Ok(Bytes::from_static(b"ab")), Ok(Bytes::from_static(b"cd"))];
    let body = Body::from_stream(futures_util::stream::iter(parts));
    let response = Proxy::new(crate::api::stream_error_frames)
        .forward(
            "m",
            &upstream.base,
            outbound(
                Method::POST,
                "/echo",
                HeaderMap::new(),
                OutboundBody::Streaming(body),
            ),
            (),
        )
        .await
        .unwrap();
    response.into_body().collect().await.unwrap();
    assert_eq!(
        upstream.seen.lock().unwrap()[0].1,
        Bytes::from_static(b"abcd")
    );
}

#[tokio::test]
async fn refused_connection_is_upstream_unreachable_and_releases_the_lease() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let (lease_tx, lease_rx) = oneshot::channel();
    let error = Proxy::new(crate::api::stream_error_frames)
        .forward(
            "m",
            &base,
            outbound(
                Method::GET,
                "/health",
                HeaderMap::new(),
                OutboundBody::Buffered(Bytes::new()),
            ),
            Lease(Some(lease_tx)),
        )
        .await
        .unwrap_err();
    let error = crate::api::ApiError::from(error);
    assert_eq!(error.status(), StatusCode::BAD_GATEWAY);
    assert_eq!(error.kind().code, "upstream_unreachable");
    lease_rx.await.unwrap();
}

#[tokio::test]
async fn upstream_failure_mid_sse_becomes_an_error_frame() {
    let upstream = start_upstream().await;
    let response = Proxy::new(crate::api::stream_error_frames)
        .forward(
            "m",
            &upstream.base,
            outbound(
                Method::GET,
                "/stream",
                HeaderMap::new(),
                OutboundBody::Buffered(Bytes::new()),
            ),
            (),
        )
        .await
        .unwrap();
    let mut body = response.into_body();
    upstream
        .chunks
        .send(Ok(Bytes::from_static(b"data: 0\n\n")))
        .await
        .unwrap();
    let first = tokio::time::timeout(LIMIT, body.frame())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(first.into_data().unwrap(), "data: 0\n\n");
    upstream
        .chunks
        .send(Err(std::io::Error::other("crash")))
        .await
        .unwrap();
    let text = tokio::time::timeout(LIMIT, body.collect())
        .await
        .unwrap()
        .unwrap()
        .to_bytes();
    let text = std::str::from_utf8(&text).unwrap();
    assert!(text.starts_with("data: {\"error\""), "{text}");
    assert!(text.contains("\"code\":\"upstream_unreachable\""), "{text}");
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
}

#[test]
fn the_client_address_is_appended_to_an_existing_forwarded_for_list() {
    let mut headers = HeaderMap::new();
    append_forwarded_for(&mut headers, "10.0.0.7".parse().unwrap());
    assert_eq!(headers["x-forwarded-for"], "10.0.0.7");
    headers.insert("x-forwarded-for", HeaderValue::from_static("192.0.2.1"));
    append_forwarded_for(&mut headers, "2001:db8::1".parse().unwrap());
    assert_eq!(headers["x-forwarded-for"], "192.0.2.1, 2001:db8::1");
    assert_eq!(headers.get_all("x-forwarded-for").iter().count(), 1);
}

#[test]
fn upstream_uri_joins_prefix_and_path() {
    assert_eq!(
        upstream_uri("http://127.0.0.1:5800", "/v1/models").unwrap(),
        "http://127.0.0.1:5800/v1/models"
    );
    assert_eq!(
        upstream_uri("http://h:1/base/", "/x?y=1").unwrap(),
        "http://h:1/base/x?y=1"
    );
    assert_eq!(upstream_uri("http://h:1", "").unwrap(), "http://h:1/");
    assert_eq!(
        upstream_uri("https://h:1/p", "/x").unwrap(),
        "https://h:1/p/x"
    );
    assert!(upstream_uri("ftp://h:1", "/").is_none());
    assert_eq!(
        upstream_uri("HTTP://h:1/base?ignored#too", "/x").unwrap(),
        "http://h:1/base/x"
    );
    assert!(upstream_uri("http:///x", "/").is_none());
    assert!(upstream_uri("http://bad host", "/").is_none());
    assert!(upstream_uri("not a url", "/").is_none());
}

#[tokio::test]
async fn streamed_body_over_the_limit_is_body_too_large() {
    let upstream = start_upstream().await;
    let parts: Vec<Result<Bytes, std::io::Error>> =
        (0..4).map(|_| Ok(Bytes::from(vec![b'x'; 512]))).collect();
    let body = Body::new(http_body_util::Limited::new(
        Body::from_stream(futures_util::stream::iter(parts)),
        1024,
    ));
    let error = Proxy::new(crate::api::stream_error_frames)
        .forward(
            "m",
            &upstream.base,
            outbound(
                Method::POST,
                "/echo",
                HeaderMap::new(),
                OutboundBody::Streaming(body),
            ),
            (),
        )
        .await
        .unwrap_err();
    assert_eq!(
        crate::api::ApiError::from(error).kind().code,
        "body_too_large"
    );
}

#[tokio::test]
async fn refused_buffered_request_is_handed_back_for_replay() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let failed = Proxy::new(crate::api::stream_error_frames)
        .send(
            "m",
            &base,
            outbound(
                Method::POST,
                "/v1/completions",
                HeaderMap::new(),
                OutboundBody::Buffered(Bytes::from_static(b"{}")),
            ),
            7_u8,
        )
        .await
        .unwrap_err();
    assert_eq!(failed.error, ProxyError::Unreachable { model: "m".into() });
    let (replay, lease) = failed
        .unsent
        .expect("a refused buffered request can be replayed");
    assert_eq!(lease, 7);
    assert_eq!(replay.path_and_query, "/v1/completions");
    assert!(matches!(replay.body, OutboundBody::Buffered(ref b) if b == "{}"));

    let streaming = Body::from_stream(futures_util::stream::iter(vec![Ok::<_, std::io::Error>(
        Bytes::from_static(b"{}"),
    )]));
    let failed = Proxy::new(crate::api::stream_error_frames)
        .send(
            "m",
            &base,
            outbound(
                Method::POST,
                "/",
                HeaderMap::new(),
                OutboundBody::Streaming(streaming),
            ),
            (),
        )
        .await
        .unwrap_err();
    assert!(
        failed.unsent.is_none(),
        "a streamed body cannot be replayed"
    );
}

async fn send_with_a_mark(proxy: Proxy, base: &str) {
    let mut headers = HeaderMap::new();
    headers.insert(crate::proxy::VIA_HEADER, HeaderValue::from_static("other"));
    let request = outbound(
        Method::POST,
        "/echo",
        headers,
        OutboundBody::Buffered(Bytes::from_static(b"{}")),
    );
    let response = proxy.forward("m", base, request, ()).await.unwrap();
    response.into_body().collect().await.unwrap();
}

#[tokio::test]
async fn a_client_adds_its_own_mark_to_those_it_got_or_none_without_one() {
    let upstream = start_upstream().await;
    let options = crate::proxy::ProxyOptions::default();
    let frames = crate::api::stream_error_frames;
    let mark = crate::proxy::HopMark::new();
    send_with_a_mark(Proxy::with_options(frames, options.clone()), &upstream.base).await;
    send_with_a_mark(
        Proxy::with_options(frames, options.clone().hop_mark(Some(mark.clone()))),
        &upstream.base,
    )
    .await;
    send_with_a_mark(
        Proxy::with_options(frames, options.hop_mark(None)),
        &upstream.base,
    )
    .await;
    let seen = upstream.seen.lock().unwrap().clone();
    let marks = |i: usize| seen[i].0.get_all(crate::proxy::VIA_HEADER).iter().count();
    assert_eq!(marks(0), 2, "the default client adds the process's mark");
    assert!(crate::proxy::came_through_here(&seen[0].0));
    assert_eq!(marks(1), 2, "a server's client adds its instance's mark");
    assert!(mark.is_on(&seen[1].0));
    assert!(!crate::proxy::came_through_here(&seen[1].0));
    assert_eq!(marks(2), 1, "without a mark the ones it got pass on");
}
