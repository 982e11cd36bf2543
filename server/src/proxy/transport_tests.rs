//! The transport timeouts against raw TCP upstreams that misbehave on purpose.

use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use http_body_util::BodyExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use super::*;

const LIMIT: Duration = Duration::from_secs(20);

fn outbound(method: Method, headers: HeaderMap, body: OutboundBody) -> Outbound {
    Outbound {
        method,
        path_and_query: "/v1/chat/completions".to_owned(),
        headers,
        body,
        client_ip: None,
        body_limit: 1 << 20,
        websocket: false,
        set_headers: HeaderMap::new(),
    }
}

/// Accepts connections and hands each to `serve`.
async fn raw_upstream<F, Fut>(serve: F) -> (String, JoinHandle<()>)
where
    F: Fn(TcpStream) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(tokio::spawn(serve(stream)));
        }
    });
    (base, task)
}

/// Reads until the end of the request head; returns the head and any bytes after it.
async fn read_head(stream: &mut TcpStream) -> (String, Vec<u8>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = stream.read(&mut chunk).await.unwrap();
        assert!(n > 0, "connection closed before the head ended");
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            return (String::from_utf8_lossy(&buf).into_owned(), rest);
        }
    }
}

/// Reads the head, then never answers (the connection stays open).
async fn hang(mut stream: TcpStream) {
    let _ = read_head(&mut stream).await;
    std::future::pending::<()>().await;
}

fn with_timeouts(timeouts: Timeouts) -> Proxy {
    Proxy::with_options(
        crate::api::stream_error_frames,
        ProxyOptions::default().timeouts(timeouts),
    )
}

#[tokio::test]
async fn a_hung_upstream_hits_the_response_header_timeout_with_a_buffered_body() {
    let (base, server) = raw_upstream(hang).await;
    let proxy = with_timeouts(Timeouts::default().response_header(Some(Duration::from_secs(1))));
    let body = OutboundBody::Buffered(Bytes::from_static(b"{\"model\":\"m\"}"));
    let result = tokio::time::timeout(
        LIMIT,
        proxy.forward(
            "m",
            &base,
            outbound(Method::POST, HeaderMap::new(), body),
            (),
        ),
    )
    .await
    .expect("the request hung past its responseHeader timeout");
    match result {
        Err(ProxyError::Timeout { phase, after, .. }) => {
            assert_eq!(phase, TimeoutPhase::ResponseHeader);
            assert_eq!(after, Duration::from_secs(1));
        }
        other => panic!("expected a responseHeader timeout, got {other:?}"),
    }
    server.abort();
}

#[tokio::test(start_paused = true)]
async fn without_a_response_header_setting_a_hung_upstream_is_cut_at_the_generous_default() {
    let (base, server) = raw_upstream(hang).await;
    // Only the response-header timer runs (the paused clock would otherwise
    // also expire the connect timer while the loopback connect is pending).
    let proxy = with_timeouts(Timeouts::default().connect(None));
    let body = OutboundBody::Buffered(Bytes::from_static(b"{\"model\":\"m\"}"));
    let result = proxy
        .forward(
            "m",
            &base,
            outbound(Method::POST, HeaderMap::new(), body),
            (),
        )
        .await;
    match result {
        Err(ProxyError::Timeout { phase, after, .. }) => {
            assert_eq!(phase, TimeoutPhase::ResponseHeader);
            assert_eq!(after, crate::proxy::DEFAULT_RESPONSE_HEADER);
        }
        other => panic!("expected the default responseHeader timeout, got {other:?}"),
    }
    server.abort();
}

#[tokio::test]
async fn a_hung_upstream_hits_the_response_header_timeout_with_an_empty_streamed_body() {
    let (base, server) = raw_upstream(hang).await;
    let proxy = with_timeouts(Timeouts::default().response_header(Some(Duration::from_secs(1))));
    let body = OutboundBody::Streaming(Body::empty());
    let result = tokio::time::timeout(
        LIMIT,
        proxy.forward(
            "m",
            &base,
            outbound(Method::GET, HeaderMap::new(), body),
            (),
        ),
    )
    .await
    .expect("the request hung past its responseHeader timeout");
    assert!(
        matches!(
            result,
            Err(ProxyError::Timeout {
                phase: TimeoutPhase::ResponseHeader,
                ..
            })
        ),
        "{result:?}"
    );
    server.abort();
}

#[tokio::test]
async fn a_server_that_never_speaks_tls_hits_the_handshake_timeout_and_is_not_replayed() {
    let (base, server) = raw_upstream(|stream| async move {
        let _held = stream;
        std::future::pending::<()>().await;
    })
    .await;
    let base = base.replace("http://127.0.0.1", "https://localhost");
    let tls = UpstreamTls::only(&[]).unwrap();
    let proxy = Proxy::with_options(
        crate::api::stream_error_frames,
        ProxyOptions::default()
            .timeouts(Timeouts::default().tls_handshake(Some(Duration::from_secs(1))))
            .tls(Some(tls)),
    );
    let body = OutboundBody::Buffered(Bytes::new());
    let failed = tokio::time::timeout(
        LIMIT,
        proxy.send(
            "m",
            &base,
            outbound(Method::GET, HeaderMap::new(), body),
            (),
        ),
    )
    .await
    .expect("the handshake hung past its timeout")
    .unwrap_err();
    assert!(
        matches!(
            failed.error,
            ProxyError::Timeout {
                phase: TimeoutPhase::TlsHandshake,
                ..
            }
        ),
        "{:?}",
        failed.error
    );
    assert!(
        failed.unsent.is_none(),
        "a timed-out handshake was handed back for a replay"
    );
    server.abort();
}

#[tokio::test]
async fn an_https_url_without_a_tls_client_is_refused_not_sent_in_plain_text() {
    let proxy = Proxy::new(crate::api::stream_error_frames);
    let body = OutboundBody::Buffered(Bytes::new());
    let result = proxy
        .forward(
            "m",
            "https://localhost:1",
            outbound(Method::GET, HeaderMap::new(), body),
            (),
        )
        .await;
    assert!(
        matches!(result, Err(ProxyError::NoTls { .. })),
        "{result:?}"
    );
}

#[tokio::test]
async fn an_expect_continue_body_waits_for_the_upstreams_100_continue() {
    // Answers 200 with what it read; fails the exchange (500) if body bytes
    // arrived before it sent 100 Continue.
    let (base, server) = raw_upstream(|mut stream| async move {
        let (head, early) = read_head(&mut stream).await;
        assert!(
            head.to_ascii_lowercase().contains("expect: 100-continue"),
            "{head}"
        );
        if !early.is_empty() {
            let _ = stream
                .write_all(b"HTTP/1.1 500 Early\r\ncontent-length: 5\r\n\r\nearly")
                .await;
            return;
        }
        stream
            .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
            .await
            .unwrap();
        let mut body = [0u8; 5];
        stream.read_exact(&mut body).await.unwrap();
        let reply = format!(
            "HTTP/1.1 200 OK\r\ncontent-length: 5\r\nconnection: close\r\n\r\n{}",
            String::from_utf8_lossy(&body)
        );
        stream.write_all(reply.as_bytes()).await.unwrap();
    })
    .await;
    // Long enough that only the 100 Continue can release the body in time.
    let proxy = with_timeouts(Timeouts::default().expect_continue(Some(Duration::from_secs(600))));
    let mut headers = HeaderMap::new();
    headers.insert(header::EXPECT, HeaderValue::from_static("100-continue"));
    let body = OutboundBody::Buffered(Bytes::from_static(b"hello"));
    let response = tokio::time::timeout(
        LIMIT,
        proxy.forward("m", &base, outbound(Method::POST, headers, body), ()),
    )
    .await
    .expect("the body was never sent after 100 Continue")
    .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let text = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(&text[..], b"hello");
    server.abort();
}

/// An `https://localhost` upstream with a self-signed certificate, answering
/// every request 200 `ok`; returns its base URL and the certificate (DER).
async fn tls_upstream() -> (String, Vec<u8>, JoinHandle<()>) {
    use std::sync::Arc;

    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let der = cert.der().to_vec();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.der().clone()], key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!(
        "https://localhost:{}",
        listener.local_addr().unwrap().port()
    );
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            held.push(tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper::service::service_fn(|_request| async {
                    Ok::<_, std::convert::Infallible>(http::Response::new(
                        http_body_util::Full::new(Bytes::from_static(b"ok")),
                    ))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                    .await;
            }));
        }
    });
    (base, der, task)
}

fn tls_proxy(trusted: &[Vec<u8>]) -> Proxy {
    Proxy::with_options(
        crate::api::stream_error_frames,
        ProxyOptions::default().tls(Some(UpstreamTls::only(trusted).unwrap())),
    )
}

#[tokio::test]
async fn an_https_upstream_is_reached_when_its_certificate_is_trusted() {
    let (base, der, server) = tls_upstream().await;
    let body = OutboundBody::Buffered(Bytes::new());
    let response = tokio::time::timeout(
        LIMIT,
        tls_proxy(&[der]).forward(
            "m",
            &base,
            outbound(Method::GET, HeaderMap::new(), body),
            (),
        ),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let text = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(&text[..], b"ok");
    server.abort();
}

#[tokio::test]
async fn an_https_upstream_whose_certificate_is_not_trusted_is_unreachable_and_not_replayed() {
    let (base, _der, server) = tls_upstream().await;
    let body = OutboundBody::Buffered(Bytes::new());
    let failed = tokio::time::timeout(
        LIMIT,
        tls_proxy(&[]).send(
            "m",
            &base,
            outbound(Method::GET, HeaderMap::new(), body),
            (),
        ),
    )
    .await
    .unwrap()
    .unwrap_err();
    assert_eq!(failed.error, ProxyError::Unreachable { model: "m".into() });
    // The upstream is there: waiting for it to exit and start again would
    // only delay the same failure.
    assert!(
        failed.unsent.is_none(),
        "a failed TLS handshake was handed back for a replay"
    );
    server.abort();
}

/// An upstream that reports each request head on `heads` and answers `reply`.
async fn answering(
    reply: &'static str,
) -> (
    String,
    tokio::sync::mpsc::UnboundedReceiver<String>,
    JoinHandle<()>,
) {
    let (tx, heads) = tokio::sync::mpsc::unbounded_channel();
    let (base, server) = raw_upstream(move |mut stream| {
        let tx = tx.clone();
        async move {
            let (head, _) = read_head(&mut stream).await;
            let _ = tx.send(head.to_ascii_lowercase());
            stream.write_all(reply.as_bytes()).await.unwrap();
            // Stays open, as an upgraded connection would.
            let mut rest = Vec::new();
            let _ = stream.read_to_end(&mut rest).await;
        }
    })
    .await;
    (base, heads, server)
}

fn handshake_headers() -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONNECTION,
        HeaderValue::from_static("keep-alive, Upgrade"),
    );
    headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    headers.insert(
        "sec-websocket-key",
        HeaderValue::from_static("dGhlIHNhbXBsZQ=="),
    );
    headers.insert("sec-websocket-version", HeaderValue::from_static("13"));
    headers.insert("x-priority", HeaderValue::from_static("10"));
    headers
}

const SWITCHED: &str = "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n";

#[tokio::test]
async fn a_websocket_handshake_asks_the_upstream_for_the_upgrade_without_a_body() {
    let (base, mut heads, server) = answering(SWITCHED).await;
    let mut outbound = outbound(
        Method::GET,
        handshake_headers(),
        OutboundBody::Buffered(Bytes::from_static(b"not for a handshake")),
    );
    outbound.websocket = true;
    let response = tokio::time::timeout(
        LIMIT,
        Proxy::new(crate::api::stream_error_frames).send("m", &base, outbound, ()),
    )
    .await
    .unwrap()
    .unwrap();
    let head = heads.recv().await.unwrap();
    assert!(head.contains("\r\nconnection: upgrade\r\n"), "{head}");
    assert!(head.contains("\r\nupgrade: websocket\r\n"), "{head}");
    assert!(
        head.contains("\r\nsec-websocket-key: dghlihnhbxbszq==\r\n"),
        "{head}"
    );
    assert!(head.contains("\r\nsec-websocket-version: 13\r\n"), "{head}");
    assert!(!head.contains("content-length"), "{head}");
    assert!(!head.contains("keep-alive"), "{head}");
    assert!(!head.contains("x-priority"), "{head}");

    assert_eq!(response.status(), StatusCode::SWITCHING_PROTOCOLS);
    let headers = response.headers();
    assert_eq!(headers[header::UPGRADE], "websocket");
    assert_eq!(headers[header::CONNECTION], "upgrade");
    assert_eq!(
        headers["sec-websocket-accept"],
        "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
    );
    assert!(
        response
            .extensions()
            .get::<hyper::upgrade::OnUpgrade>()
            .is_some(),
        "the upstream's upgraded connection is not in the response"
    );
    server.abort();
}

#[tokio::test]
async fn a_switch_of_protocols_not_asked_for_or_not_to_websocket_is_a_bad_gateway() {
    let (base, _heads, server) = answering(SWITCHED).await;
    let plain = outbound(
        Method::GET,
        handshake_headers(),
        OutboundBody::Buffered(Bytes::new()),
    );
    let failed = Proxy::new(crate::api::stream_error_frames)
        .send("m", &base, plain, ())
        .await
        .unwrap_err();
    assert_eq!(failed.error, ProxyError::Unreachable { model: "m".into() });
    server.abort();

    let (base, _heads, server) = answering(
        "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n",
    )
    .await;
    let mut asked = outbound(
        Method::GET,
        handshake_headers(),
        OutboundBody::Buffered(Bytes::new()),
    );
    asked.websocket = true;
    let failed = Proxy::new(crate::api::stream_error_frames)
        .send("m", &base, asked, ())
        .await
        .unwrap_err();
    assert_eq!(failed.error, ProxyError::Unreachable { model: "m".into() });
    server.abort();
}

/// Answers with `head` (status line and headers) and `body`, then sends
/// nothing more and keeps the connection open.
fn stalls_after(
    head: &'static str,
    body: &'static str,
) -> impl Fn(TcpStream) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
    move |mut stream| {
        Box::pin(async move {
            let _ = read_head(&mut stream).await;
            stream.write_all(head.as_bytes()).await.unwrap();
            stream.write_all(body.as_bytes()).await.unwrap();
            std::future::pending::<()>().await;
        })
    }
}

/// A lease whose drop says so.
struct Lease(Option<tokio::sync::oneshot::Sender<()>>);
impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

#[tokio::test]
async fn a_body_shorter_than_its_content_length_is_cut_at_body_idle_and_releases_the_lease() {
    let (base, server) = raw_upstream(stalls_after(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n",
        "{\"choices\":",
    ))
    .await;
    let proxy = with_timeouts(Timeouts::default().body_idle(Some(Duration::from_secs(1))));
    let (tx, released) = tokio::sync::oneshot::channel();
    let body = OutboundBody::Buffered(Bytes::from_static(b"{\"model\":\"m\"}"));
    let response = proxy
        .forward(
            "m",
            &base,
            outbound(Method::POST, HeaderMap::new(), body),
            Lease(Some(tx)),
        )
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let read = tokio::time::timeout(LIMIT, response.into_body().collect())
        .await
        .expect("the body was never cut");
    let error = read.expect_err("a cut body must fail, not end as if complete");
    assert!(error.to_string().contains("timeouts.bodyIdle"), "{error}");
    tokio::time::timeout(LIMIT, released)
        .await
        .expect("lease kept")
        .unwrap();
    server.abort();
}

#[tokio::test]
async fn an_event_stream_stalled_mid_way_ends_with_a_timeout_frame_at_body_idle() {
    let (base, server) = raw_upstream(stalls_after(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
        "f\r\ndata: {\"a\":1}\n\n\r\n",
    ))
    .await;
    let proxy = with_timeouts(Timeouts::default().body_idle(Some(Duration::from_secs(1))));
    let (tx, released) = tokio::sync::oneshot::channel();
    let body = OutboundBody::Buffered(Bytes::from_static(b"{\"model\":\"m\",\"stream\":true}"));
    let response = proxy
        .forward(
            "m",
            &base,
            outbound(Method::POST, HeaderMap::new(), body),
            Lease(Some(tx)),
        )
        .await
        .unwrap();
    let text = tokio::time::timeout(LIMIT, response.into_body().collect())
        .await
        .expect("the stream was never ended")
        .unwrap()
        .to_bytes();
    let text = std::str::from_utf8(&text).unwrap();
    assert!(
        text.starts_with("data: {\"a\":1}\n\ndata: {\"error\""),
        "{text}"
    );
    assert!(text.contains("upstream_timeout"), "{text}");
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    tokio::time::timeout(LIMIT, released)
        .await
        .expect("lease kept")
        .unwrap();
    server.abort();
}
