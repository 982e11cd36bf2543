//! Streaming through the server: `sendLoadingState` frames as the SDK's proxy
//! events, and a dropped stream giving its model back.

use futures::StreamExt;
use llama_swap_client::{
    CallOptions, ChatMessage, ChatRequest, ChatStream, Priority, ProxyStatus, StreamEvent,
};
use llama_swap_suite::harness::{LIMIT, Stack, Upstream, finish};

use crate::{chat, spawn_chat};

/// Reads proxy events until their status changes (every injected frame carries
/// the current status; several frames in a row repeat it) and returns the new one,
/// skipping `waiting`.
async fn next_status(stream: &mut ChatStream, last: &mut Option<ProxyStatus>) -> ProxyStatus {
    loop {
        let event = tokio::time::timeout(LIMIT, stream.next())
            .await
            .expect("no stream event within the limit")
            .expect("the stream ended while waiting")
            .expect("the stream failed while waiting");
        match event {
            StreamEvent::Proxy(proxy) => {
                assert_eq!(proxy.model.as_deref(), Some("b"), "{proxy:?}");
                if proxy.status == ProxyStatus::Waiting || last.as_ref() == Some(&proxy.status) {
                    continue;
                }
                *last = Some(proxy.status.clone());
                return proxy.status;
            }
            other => panic!("model output before the model was granted: {other:?}"),
        }
    }
}

fn queued_at(status: &ProxyStatus) -> Option<u32> {
    match status {
        ProxyStatus::Queued { position } => Some(*position),
        _ => None,
    }
}

#[tokio::test]
async fn loading_state_frames_surface_as_queue_positions_then_loading() {
    let upstreams = [
        Upstream::gated("a"),
        Upstream::new("b"),
        Upstream::gated("c"),
    ];
    let stack = Stack::start(&upstreams, "sendLoadingState: true\n").await;
    let client = stack.client();
    let busy = spawn_chat(client, "a", Priority::Normal);
    stack.wait_held("a", 1).await;

    // The server answers 200 at once and reports progress inside the stream.
    let mut stream = client
        .chat_stream(&chat("b"), &CallOptions::with_priority(Priority::Low))
        .await
        .unwrap();
    let mut last = None;
    assert_eq!(
        queued_at(&next_status(&mut stream, &mut last).await),
        Some(1)
    );

    // Elevated work that arrives later moves ahead: the position goes up.
    let elevated = spawn_chat(client, "c", Priority::Elevated);
    assert_eq!(
        queued_at(&next_status(&mut stream, &mut last).await),
        Some(2)
    );

    // a finishes, c is picked (and held by its gate): b is first again.
    stack.open_gate("a").await;
    finish("the busy call", busy).await.unwrap();
    assert_eq!(
        queued_at(&next_status(&mut stream, &mut last).await),
        Some(1)
    );
    assert_eq!(stack.next_started(&["c"]).await, "c");
    stack.open_gate("c").await;
    finish("the elevated call", elevated).await.unwrap();

    assert_eq!(
        next_status(&mut stream, &mut last).await,
        ProxyStatus::Loading
    );
    assert!(matches!(
        next_status(&mut stream, &mut last).await,
        ProxyStatus::Ready { waited: Some(_) }
    ));
    // After ready, the rest is the model's answer and no more proxy frames.
    let mut text = String::new();
    while let Some(event) = tokio::time::timeout(LIMIT, stream.next()).await.unwrap() {
        match event.unwrap() {
            StreamEvent::Chunk(chunk) => text.push_str(chunk.content().unwrap_or_default()),
            other => panic!("unexpected event after ready: {other:?}"),
        }
    }
    assert_eq!(text, "[b] hi");
    stack.shutdown().await;
}

#[tokio::test]
async fn dropping_a_stream_midway_releases_its_model_for_the_next_swap() {
    // At one token per second a's answer takes 80 s, far beyond LIMIT: the next
    // call can only finish in time if dropping the stream released a's lease.
    let slow = Upstream::new("a").args("--tokens-per-second 1");
    let stack = Stack::start(&[slow, Upstream::new("b")], "").await;
    let client = stack.client();
    let prompt: Vec<String> = (1..=80).map(|n| format!("w{n}")).collect();
    let request = ChatRequest::new("a", vec![ChatMessage::user(prompt.join(" "))]);
    let mut stream = client
        .chat_stream(&request, &CallOptions::with_priority(Priority::Low))
        .await
        .unwrap();
    let first = tokio::time::timeout(LIMIT, stream.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(matches!(first, StreamEvent::Chunk(_)), "{first:?}");
    assert_eq!(stack.running().await, ["a"]);
    drop(stream);

    // b evicts a, which must no longer be serving anyone.
    let answer = tokio::time::timeout(LIMIT, client.chat(&chat("b"), &CallOptions::new()))
        .await
        .expect("the call for b stayed blocked behind the dropped stream")
        .unwrap();
    assert_eq!(answer.text(), "[b] hi");
    assert_eq!(stack.running().await, ["b"]);
    stack.shutdown().await;
}
