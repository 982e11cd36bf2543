//! Streaming over real sockets: pacing, idle timeouts, cancellation on drop.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{SSE_HEAD, http_chunk, raw_server};
use futures_util::StreamExt;
use llama_swap_client::{
    CallOptions, ChatMessage, ChatRequest, Client, Error, Priority, ProxyEvent, ProxyStatus,
    StreamEvent, TimeoutPhase,
};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const LIMIT: Duration = Duration::from_secs(20);

fn chat_request() -> ChatRequest {
    ChatRequest::new("demo", vec![ChatMessage::user("hi")])
}

#[tokio::test]
async fn frames_split_across_http_chunks_inside_utf8_characters_decode_intact() {
    let frame = "data: {\"id\":\"c\",\"choices\":[{\"delta\":{\"content\":\"Grüß 🦙\"},\"finish_reason\":\"stop\"}]}\r\n\r\ndata: [DONE]\r\n\r\n";
    let bytes = frame.as_bytes();
    let llama = frame.find('🦙').unwrap();
    // Cut inside "ü" and inside the llama, and between \r and \n.
    let cuts = [
        frame.find('ü').unwrap() + 1,
        llama + 2,
        frame.find("\r\n").unwrap() + 1,
    ];
    let mut parts = Vec::new();
    let mut start = 0;
    for cut in cuts {
        parts.push(chunk_bytes(&bytes[start..cut]));
        start = cut;
    }
    parts.push(chunk_bytes(&bytes[start..]));
    parts.push(b"0\r\n\r\n".to_vec());
    let server = raw_server(SSE_HEAD, parts).await;
    let client = Client::new(&server.base_url).unwrap();
    let resp = tokio::time::timeout(LIMIT, async {
        client
            .chat_stream(&chat_request(), &CallOptions::new())
            .await
            .unwrap()
            .collect()
            .await
    })
    .await
    .unwrap()
    .unwrap();
    assert_eq!(resp.text(), "Grüß 🦙");
}

fn chunk_bytes(piece: &[u8]) -> Vec<u8> {
    let mut out = format!("{:x}\r\n", piece.len()).into_bytes();
    out.extend_from_slice(piece);
    out.extend_from_slice(b"\r\n");
    out
}

#[tokio::test]
async fn silence_between_frames_times_out_in_the_idle_phase() {
    let server = raw_server(
        SSE_HEAD,
        vec![http_chunk(
            "data: {\"id\":\"c\",\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n",
        )],
    )
    .await;
    let client = Client::new(&server.base_url).unwrap();
    let opts = CallOptions::new().idle_timeout(Duration::from_millis(100));
    let mut stream = client.chat_stream(&chat_request(), &opts).await.unwrap();
    let first = tokio::time::timeout(LIMIT, stream.next()).await.unwrap();
    assert!(matches!(first, Some(Ok(StreamEvent::Chunk(_)))));
    let second = tokio::time::timeout(LIMIT, stream.next()).await.unwrap();
    match second {
        Some(Err(Error::Timeout { phase, .. })) => assert_eq!(phase, TimeoutPhase::Idle),
        other => panic!("expected an idle timeout, got {other:?}"),
    }
    assert!(
        stream.next().await.is_none(),
        "the stream ends after a timeout"
    );
}

#[tokio::test]
async fn dropping_the_stream_closes_the_connection() {
    let server = raw_server(
        SSE_HEAD,
        vec![http_chunk(
            "data: {\"id\":\"c\",\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n",
        )],
    )
    .await;
    let client = Client::new(&server.base_url).unwrap();
    let mut stream = client
        .chat_stream(&chat_request(), &CallOptions::with_priority(Priority::Low))
        .await
        .unwrap();
    let first = tokio::time::timeout(LIMIT, stream.next()).await.unwrap();
    assert!(matches!(first, Some(Ok(StreamEvent::Chunk(_)))));
    drop(stream);
    tokio::time::timeout(LIMIT, server.closed)
        .await
        .expect("the connection stayed open after the stream was dropped")
        .unwrap();
}

/// A cold start over HTTP as contract C1 shapes it: marked proxy frames, then a
/// reasoning frame of llama-swap's old untyped kind (no marker, no id), which is
/// model content, then the answer.
#[tokio::test]
async fn cold_start_stream_reports_marked_proxy_frames_and_keeps_unmarked_reasoning() {
    let body = concat!(
        "data: {\"id\":\"llamaswap-r9\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"demo\",\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"Queue position: #1\"},\"finish_reason\":null}],\"llamaswap\":{\"status\":\"queued\",\"position\":1,\"model\":\"demo\"}}\n\n",
        "data: {\"id\":\"llamaswap-r9\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"demo\",\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"llama-swap loading model: demo\"},\"finish_reason\":null}],\"llamaswap\":{\"status\":\"loading\",\"model\":\"demo\"}}\n\n",
        "data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"thinking\"}}]}\n\n",
        "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":\"stop\"}]}\n\n",
        "data: [DONE]\n\n",
    );
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_raw(body, "text/event-stream")
                .insert_header("x-request-id", "r9"),
        )
        .mount(&server)
        .await;
    let client = Client::new(server.uri()).unwrap();
    let stream = client
        .chat_stream(&chat_request(), &CallOptions::new())
        .await
        .unwrap();
    assert_eq!(stream.request_id(), Some("r9"));
    let events: Vec<StreamEvent> = StreamExt::collect::<Vec<_>>(stream)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        events[0],
        StreamEvent::Proxy(
            ProxyEvent::new(ProxyStatus::Queued { position: 1 })
                .with_model("demo")
                .with_text("Queue position: #1")
        )
    );
    assert!(matches!(&events[1], StreamEvent::Proxy(p) if p.status == ProxyStatus::Loading));
    assert!(matches!(&events[2], StreamEvent::Chunk(c) if c.reasoning() == Some("thinking")));
    assert!(matches!(&events[3], StreamEvent::Chunk(c) if c.content() == Some("Hi")));
    assert_eq!(events.len(), 4);
}

#[tokio::test]
async fn server_that_ignores_stream_true_still_delivers_its_whole_answer() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(common::chat_json()))
        .mount(&server)
        .await;
    let client = Client::new(server.uri()).unwrap();
    let resp = client
        .chat_stream(&chat_request(), &CallOptions::new())
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert_eq!(resp.text(), "Hello");
    assert_eq!(resp.id, "c1");
    assert_eq!(resp.usage.as_ref().unwrap().total_tokens, 2);
}

#[tokio::test]
async fn json_error_answer_to_a_stream_request_is_an_in_stream_error() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!(
            {"error": {"message": "model unloaded", "type": "server_error", "code": "model_unloaded"}}
        )))
        .mount(&server)
        .await;
    let client = Client::new(server.uri()).unwrap();
    let err = client
        .chat_stream(&chat_request(), &CallOptions::new())
        .await
        .unwrap()
        .collect()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InStream(_)), "{err:?}");
    assert_eq!(err.code(), Some("model_unloaded"));
}
