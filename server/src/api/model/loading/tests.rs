use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::body::Body;
use http::StatusCode;
use http_body_util::BodyExt;
use tokio::sync::oneshot;

use super::*;

fn describe(status: &Option<Progress>) -> Option<Progress> {
    *status
}

/// The next data frame that is not a keep-alive dot.
async fn next_text(body: &mut Body) -> Option<String> {
    loop {
        let frame = body.frame().await?.unwrap();
        let text = String::from_utf8(frame.into_data().unwrap().to_vec()).unwrap();
        if !text.contains(r#""reasoning_content":".""#) {
            return Some(text);
        }
    }
}

/// The next data frame, whatever it holds.
async fn data(body: &mut Body) -> String {
    let frame = body.frame().await.unwrap().unwrap().into_data().unwrap();
    String::from_utf8(frame.to_vec()).unwrap()
}

/// The JSON of every `data:` frame in `text` (not `[DONE]`).
fn frames(text: &str) -> Vec<serde_json::Value> {
    text.split("\n\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<serde_json::Value>(d).ok())
        .collect()
}

/// The `llamaswap` marker objects of the frames in `text`.
fn markers(text: &str) -> Vec<serde_json::Value> {
    frames(text)
        .into_iter()
        .filter_map(|v| v.get("llamaswap").cloned())
        .collect()
}

fn target() -> LoadingTarget {
    LoadingTarget {
        model: "m".into(),
        request_id: "r1".into(),
    }
}

fn sse_response(text: &'static str) -> Response {
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from(text))
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn queued_positions_loading_then_the_upstream_stream() {
    let (status_tx, status_rx) = watch::channel(Some(Progress::Queued(2)));
    let (work_tx, work_rx) = oneshot::channel::<Result<Response, ApiError>>();
    let response = loading_response(target(), status_rx, describe, async move {
        work_rx.await.unwrap()
    });
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()[header::CONTENT_TYPE],
        "text/event-stream"
    );
    let mut body = response.into_body();

    let first = next_text(&mut body).await.unwrap();
    assert!(first.contains("llama-swap loading model: m"), "{first}");
    assert_eq!(
        markers(&first),
        vec![
            serde_json::json!({"status":"queued","position":2,"model":"m"}),
            serde_json::json!({"status":"queued","position":2,"model":"m"}),
        ]
    );
    assert!(first.contains("Queue position: #2"), "{first}");

    // Positions can go up when higher-priority work arrives.
    status_tx.send(Some(Progress::Queued(5))).unwrap();
    let text = next_text(&mut body).await.unwrap();
    assert_eq!(markers(&text)[0]["position"], 5);
    assert!(text.contains("Queue position: #5"), "{text}");

    status_tx.send(Some(Progress::Loading)).unwrap();
    let text = data(&mut body).await;
    assert_eq!(
        markers(&text),
        vec![serde_json::json!({"status":"loading","model":"m"})]
    );

    work_tx
        .send(Ok(sse_response("data: {\"x\":1}\n\ndata: [DONE]\n\n")))
        .unwrap();
    let done = next_text(&mut body).await.unwrap();
    assert!(done.contains("Done! ("), "{done}");
    let ready = &markers(&done)[0];
    assert_eq!(ready["status"], "ready");
    assert!(ready["waited_ms"].is_u64(), "{ready}");
    let relayed = next_text(&mut body).await.unwrap();
    assert_eq!(relayed, "data: {\"x\":1}\n\ndata: [DONE]\n\n");
    assert!(body.frame().await.is_none());
}

#[tokio::test(start_paused = true)]
async fn an_error_after_the_stream_began_is_a_final_envelope_frame() {
    let (_status_tx, status_rx) = watch::channel(Some(Progress::Loading));
    let response = loading_response(target(), status_rx, describe, async {
        Err(ApiError::ShuttingDown)
    });
    assert_eq!(response.status(), StatusCode::OK);
    let text = response.into_body().collect().await.unwrap().to_bytes();
    let text = std::str::from_utf8(&text).unwrap();
    assert!(text.contains("\"code\":\"shutting_down\""), "{text}");
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
}

#[tokio::test(start_paused = true)]
async fn an_upstream_error_status_is_relayed_as_an_error_frame() {
    let (_status_tx, status_rx) = watch::channel(None);
    let response = loading_response(target(), status_rx, describe, async {
        Ok(Response::builder()
            .status(StatusCode::BAD_REQUEST)
            .body(Body::from(
                r#"{"error":{"message":"context too long","type":"x","code":400}}"#,
            ))
            .unwrap())
    });
    let text = response.into_body().collect().await.unwrap().to_bytes();
    let text = std::str::from_utf8(&text).unwrap();
    assert!(
        text.contains(r#"data: {"error":{"code":400,"message":"context too long","type":"x"}}"#),
        "{text}"
    );
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
}

#[tokio::test(start_paused = true)]
async fn an_upstream_error_without_an_envelope_gets_the_type_of_its_status() {
    for (status, error_type) in [
        (StatusCode::BAD_REQUEST, "invalid_request_error"),
        (StatusCode::TOO_MANY_REQUESTS, "rate_limit_error"),
        (StatusCode::SERVICE_UNAVAILABLE, "server_error"),
    ] {
        let (_status_tx, status_rx) = watch::channel(None);
        let response = loading_response(target(), status_rx, describe, async move {
            Ok(Response::builder()
                .status(status)
                .body(Body::from("model is busy"))
                .unwrap())
        });
        let text = response.into_body().collect().await.unwrap().to_bytes();
        let text = std::str::from_utf8(&text).unwrap();
        let error = frames(text)
            .into_iter()
            .find_map(|f| f.get("error").cloned())
            .unwrap_or_else(|| panic!("no error frame in {text}"));
        assert_eq!(error["type"], error_type, "{text}");
        assert_eq!(error["code"], "upstream_error", "{text}");
        let message = error["message"].as_str().unwrap();
        assert!(message.contains("model is busy"), "{message}");
        assert!(message.contains(status.as_str()), "{message}");
        assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    }
}

#[tokio::test(start_paused = true)]
async fn dropping_the_stream_while_waiting_drops_the_work() {
    struct Guard(Arc<AtomicBool>);
    impl Drop for Guard {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let dropped = Arc::new(AtomicBool::new(false));
    let guard = Guard(dropped.clone());
    let (_status_tx, status_rx) = watch::channel(Some(Progress::Queued(1)));
    let response = loading_response(target(), status_rx, describe, async move {
        let _guard = guard;
        std::future::pending::<Result<Response, ApiError>>().await
    });
    let mut body = response.into_body();
    next_text(&mut body).await.unwrap();
    assert!(!dropped.load(Ordering::SeqCst));
    drop(body);
    assert!(
        dropped.load(Ordering::SeqCst),
        "the wait outlived the client"
    );
}

#[tokio::test(start_paused = true)]
async fn keepalive_dots_flow_while_nothing_changes() {
    let (_status_tx, status_rx) = watch::channel(Some(Progress::Queued(1)));
    let response = loading_response(target(), status_rx, describe, std::future::pending());
    let mut body = response.into_body();
    body.frame().await.unwrap().unwrap();
    let dot = body.frame().await.unwrap().unwrap().into_data().unwrap();
    assert!(
        std::str::from_utf8(&dot)
            .unwrap()
            .contains(r#""reasoning_content":".""#),
        "{dot:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn every_injected_frame_is_a_chat_completion_chunk_with_the_marker() {
    let (status_tx, status_rx) = watch::channel(None);
    let (work_tx, work_rx) = oneshot::channel::<Result<Response, ApiError>>();
    let response = loading_response(target(), status_rx, describe, async move {
        work_rx.await.unwrap()
    });
    let mut body = response.into_body();
    let mut text = String::new();
    // The opening frame while merely admitted, a keep-alive dot, a queue
    // position, loading, then ready.
    for next in [
        None,
        None,
        Some(Progress::Queued(1)),
        Some(Progress::Loading),
    ] {
        if next.is_some() {
            status_tx.send(next).unwrap();
        }
        text.push_str(&data(&mut body).await);
    }
    work_tx
        .send(Ok(sse_response("data: {\"x\":1}\n\ndata: [DONE]\n\n")))
        .unwrap();
    text.push_str(&data(&mut body).await);

    let frames = frames(&text);
    let statuses: Vec<&str> = frames
        .iter()
        .map(|f| f["llamaswap"]["status"].as_str().unwrap())
        .collect();
    assert_eq!(
        statuses,
        ["waiting", "waiting", "queued", "loading", "ready"]
    );
    for frame in &frames {
        assert_eq!(frame["object"], "chat.completion.chunk", "{frame}");
        assert_eq!(frame["id"], "llamaswap-r1", "{frame}");
        assert_eq!(frame["model"], "m", "{frame}");
        assert!(frame["created"].is_u64(), "{frame}");
        let choice = &frame["choices"][0];
        assert_eq!(choice["index"], 0, "{frame}");
        assert!(choice["finish_reason"].is_null(), "{frame}");
        assert!(choice["delta"]["reasoning_content"].is_string(), "{frame}");
        assert_eq!(frame["llamaswap"]["model"], "m", "{frame}");
    }
    assert_eq!(frames[1]["choices"][0]["delta"]["reasoning_content"], ".");
}
