//! The five priority behaviours of docs/DESIGN.md section 2, made through the SDK's
//! `Priority` against the real server, plus `Normal` and retries.

use std::time::Duration;

use futures::StreamExt;
use llama_swap_client::{
    CallOptions, ChatMessage, ChatRequest, ChatResponse, Error, FinishReason, Priority,
    RetryPolicy, StreamEvent,
};
use llama_swap_suite::harness::{LIMIT, Stack, Upstream, finish, models_of};
use tokio::task::JoinHandle;

use crate::{spawn_chat, spawn_chat_with};

type Call = JoinHandle<Result<ChatResponse, Error>>;

fn gated(ids: &[&str]) -> Vec<Upstream> {
    ids.iter().map(|id| Upstream::gated(id)).collect()
}

/// Holds `model` busy with one Normal call at its closed gate.
async fn occupy(stack: &Stack, model: &str) -> Call {
    let busy = spawn_chat(stack.client(), model, Priority::Normal);
    stack.wait_held(model, 1).await;
    busy
}

/// Lets a held call finish and checks it succeeded.
async fn release(stack: &Stack, model: &str, call: Call) {
    stack.open_gate(model).await;
    answered(model, call).await;
}

async fn answered(model: &str, call: Call) {
    let response = finish(&format!("the call for {model}"), call)
        .await
        .unwrap_or_else(|e| panic!("the call for {model} failed: {e}"));
    assert_eq!(response.text(), format!("[{model}] hi"));
}

/// Checks the queued calls start in `order`: each must be the next model to
/// hold a request, and finishes before the one after it starts.
async fn expect_start_order(stack: &Stack, mut order: Vec<(&str, Call)>) {
    while !order.is_empty() {
        let candidates: Vec<&str> = order.iter().map(|(m, _)| *m).collect();
        let started = stack.next_started(&candidates).await;
        assert_eq!(
            started, candidates[0],
            "expected {candidates:?} to start in that order"
        );
        let (model, call) = order.remove(0);
        release(stack, model, call).await;
    }
}

#[tokio::test]
async fn elevated_call_overtakes_queued_low_call_for_another_model() {
    let stack = Stack::start(&gated(&["a", "b", "c"]), "").await;
    let client = stack.client();
    let busy = occupy(&stack, "a").await;
    let low = spawn_chat(client, "b", Priority::Low);
    stack.wait_queue_len(1).await;
    let high = spawn_chat(client, "c", Priority::Elevated);

    let queue = stack.wait_queue_len(2).await;
    assert_eq!(models_of(&queue), ["c", "b"]);
    assert_eq!(
        (queue[0].requested_priority, queue[0].position),
        (10, 1),
        "{queue:?}"
    );
    assert_eq!(
        (queue[1].requested_priority, queue[1].position),
        (-10, 2),
        "{queue:?}"
    );

    release(&stack, "a", busy).await;
    expect_start_order(&stack, vec![("c", high), ("b", low)]).await;
    stack.shutdown().await;
}

#[tokio::test]
async fn equal_priority_calls_keep_arrival_order() {
    let stack = Stack::start(&gated(&["a", "b", "c", "d"]), "").await;
    let client = stack.client();
    let busy = occupy(&stack, "a").await;
    // Arrival order d, b, c: neither name order nor port order.
    let mut calls = Vec::new();
    for (n, model) in ["d", "b", "c"].into_iter().enumerate() {
        calls.push((model, spawn_chat(client, model, Priority::Elevated)));
        stack.wait_queue_len(n + 1).await;
    }
    let queue = stack.queue().await;
    assert_eq!(models_of(&queue), ["d", "b", "c"]);
    assert!(
        queue.iter().all(|w| w.effective_priority == 10),
        "{queue:?}"
    );

    release(&stack, "a", busy).await;
    expect_start_order(&stack, calls).await;
    stack.shutdown().await;
}

#[tokio::test]
async fn low_call_ranks_below_a_later_normal_call_on_a_model_without_a_floor() {
    // No configured floor: the header alone ranks, so Low (-10) waits behind a Normal
    // call that arrived after it.
    let stack = Stack::start(&gated(&["a", "b", "c"]), "").await;
    let client = stack.client();
    let busy = occupy(&stack, "a").await;
    let low = spawn_chat(client, "c", Priority::Low);
    stack.wait_queue_len(1).await;
    let normal = spawn_chat(client, "b", Priority::Normal);
    let queue = stack.wait_queue_len(2).await;
    assert_eq!(models_of(&queue), ["b", "c"]);
    let ranks: Vec<(i64, i64)> = queue
        .iter()
        .map(|w| (w.requested_priority, w.effective_priority))
        .collect();
    assert_eq!(ranks, [(0, 0), (-10, -10)]);

    release(&stack, "a", busy).await;
    expect_start_order(&stack, vec![("b", normal), ("c", low)]).await;
    stack.shutdown().await;
}

#[tokio::test]
async fn running_low_stream_is_not_interrupted_by_arriving_elevated_call() {
    // The stream is paced so that it is still running while the test queues the
    // other calls; the assertions below fail (never pass wrongly) if it is not.
    let slow = Upstream::new("a").args("--tokens-per-second 5");
    let stack = Stack::start(&[slow, Upstream::gated("b"), Upstream::gated("c")], "").await;
    let client = stack.client();
    let words: Vec<String> = (1..=30).map(|n| format!("w{n}")).collect();
    let prompt = words.join(" ");
    let request = ChatRequest::new("a", vec![ChatMessage::user(prompt.as_str())]);
    let mut stream = client
        .chat_stream(&request, &CallOptions::with_priority(Priority::Low))
        .await
        .unwrap();
    let mut text = String::new();
    let mut chunks = 0;
    while chunks == 0 {
        if let StreamEvent::Chunk(chunk) = stream.next().await.unwrap().unwrap() {
            text.push_str(chunk.content().unwrap_or_default());
            chunks += 1;
        }
    }

    let normal = spawn_chat(client, "c", Priority::Normal);
    stack.wait_queue_len(1).await;
    let elevated = spawn_chat(client, "b", Priority::Elevated);
    let queue = stack.wait_queue_len(2).await;
    assert_eq!(models_of(&queue), ["b", "c"]);
    // Both wait while a still serves the low stream.
    assert_eq!(stack.running().await, ["a"]);

    let mut finish_reason = None;
    while let Some(event) = stream.next().await {
        if let StreamEvent::Chunk(chunk) = event.unwrap() {
            chunks += 1;
            text.push_str(chunk.content().unwrap_or_default());
            if let Some(reason) = chunk.finish_reason() {
                finish_reason = Some(reason.clone());
            }
        }
    }
    assert_eq!(text, format!("[a] {prompt}"), "the low stream was cut");
    assert_eq!(finish_reason, Some(FinishReason::Stop));
    assert!(chunks > 2, "the stream arrived in {chunks} chunk(s)");

    expect_start_order(&stack, vec![("b", elevated), ("c", normal)]).await;
    stack.shutdown().await;
}

#[tokio::test]
async fn config_model_priority_ranks_call_without_header() {
    let floors = "routing:\n  scheduler:\n    use: fifo\n    settings:\n      fifo:\n        priority:\n          c: 5\n";
    let stack = Stack::start(&gated(&["a", "b", "c"]), floors).await;
    let client = stack.client();
    let busy = occupy(&stack, "a").await;
    let plain = spawn_chat(client, "b", Priority::Normal);
    stack.wait_queue_len(1).await;
    let floored = spawn_chat(client, "c", Priority::Normal);

    let queue = stack.wait_queue_len(2).await;
    assert_eq!(models_of(&queue), ["c", "b"]);
    assert_eq!(
        (queue[0].requested_priority, queue[0].effective_priority),
        (0, 5)
    );
    assert_eq!(
        (queue[1].requested_priority, queue[1].effective_priority),
        (0, 0)
    );

    release(&stack, "a", busy).await;
    expect_start_order(&stack, vec![("c", floored), ("b", plain)]).await;
    stack.shutdown().await;
}

#[tokio::test]
async fn low_call_on_model_configured_plus_five_ranks_plus_five() {
    // b's floor is 5 and c's is 4: b's Low call (-10) ranks max(5, -10) = 5,
    // above c's Normal call (4) that arrived first, below an Elevated call (10).
    let floors = "routing:\n  scheduler:\n    settings:\n      fifo:\n        priority:\n          b: 5\n          c: 4\n";
    let stack = Stack::start(&gated(&["a", "b", "c", "d"]), floors).await;
    let client = stack.client();
    let busy = occupy(&stack, "a").await;
    let normal = spawn_chat(client, "c", Priority::Normal);
    stack.wait_queue_len(1).await;
    let low = spawn_chat(client, "b", Priority::Low);
    stack.wait_queue_len(2).await;
    let elevated = spawn_chat(client, "d", Priority::Elevated);

    let queue = stack.wait_queue_len(3).await;
    assert_eq!(models_of(&queue), ["d", "b", "c"]);
    let ranks: Vec<(i64, i64)> = queue
        .iter()
        .map(|w| (w.requested_priority, w.effective_priority))
        .collect();
    assert_eq!(ranks, [(10, 10), (-10, 5), (0, 4)]);

    release(&stack, "a", busy).await;
    expect_start_order(&stack, vec![("d", elevated), ("b", low), ("c", normal)]).await;
    stack.shutdown().await;
}

#[tokio::test]
async fn normal_call_sends_no_priority_and_server_reports_requested_zero() {
    let stack = Stack::start(&gated(&["a", "b", "c"]), "").await;
    // A client whose calls default to Elevated; one call overrides it with Normal.
    let interactive = stack.client().with_priority(Priority::Elevated);
    let busy = occupy(&stack, "a").await;
    let normal = spawn_chat_with(
        &interactive,
        "b",
        CallOptions::with_priority(Priority::Normal),
    );
    stack.wait_queue_len(1).await;
    let defaulted = spawn_chat_with(&interactive, "c", CallOptions::new());

    let queue = stack.wait_queue_len(2).await;
    // The defaulted call (10) overtakes the Normal one (0) that arrived first.
    assert_eq!(models_of(&queue), ["c", "b"]);
    assert_eq!(
        (queue[0].requested_priority, queue[0].effective_priority),
        (10, 10)
    );
    assert_eq!(
        (queue[1].requested_priority, queue[1].effective_priority),
        (0, 0)
    );

    release(&stack, "a", busy).await;
    expect_start_order(&stack, vec![("c", defaulted), ("b", normal)]).await;
    stack.shutdown().await;
}

#[tokio::test]
async fn retry_after_503_keeps_the_priority() {
    let stack = Stack::start(&gated(&["a", "b"]), "").await;
    let client = stack.client();
    let busy = occupy(&stack, "a").await;
    // One retry, at least 3 s later (jitter scales the backoff by 0.5..1),
    // so the test sees the first attempt leave the queue before the retry
    // joins it, even on a loaded machine.
    let retry = RetryPolicy::default()
        .with_max_retries(1)
        .with_backoff(Duration::from_secs(6), Duration::from_secs(6));
    let call = spawn_chat_with(
        client,
        "b",
        CallOptions::with_priority(Priority::Elevated).retry(retry),
    );
    let first = stack.wait_queue_len(1).await;
    assert_eq!(
        (first[0].model.as_str(), first[0].requested_priority),
        ("b", 10)
    );

    // Unloading b fails its waiter with 503 model_unloaded; the SDK retries it.
    client.unload_model("b", &CallOptions::new()).await.unwrap();
    assert_eq!(stack.queue().await, [], "the first attempt is still queued");
    let retried = stack.wait_queue_len(1).await;
    assert_eq!(
        (retried[0].model.as_str(), retried[0].requested_priority),
        ("b", 10),
        "the retry lost its priority"
    );
    assert!(!call.is_finished());

    release(&stack, "a", busy).await;
    assert_eq!(stack.next_started(&["b"]).await, "b");
    release(&stack, "b", call).await;
    // Only the retry reached the upstream: the first attempt never loaded b.
    let journal = tokio::time::timeout(LIMIT, stack.journal("b"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(journal.len(), 1, "{journal:?}");
    stack.shutdown().await;
}

#[tokio::test]
async fn a_call_with_a_queue_timeout_gives_up_at_it_and_is_not_retried() {
    let stack = Stack::start(&gated(&["a", "b"]), "").await;
    let client = stack.client();
    let busy = occupy(&stack, "a").await;
    // Elevated does not preempt a's call: it waits, and leaves at its bound
    // with queue_timeout; the server says not to retry a bound the caller
    // chose, and the SDK's default policy (which retries 503) does not.
    let bounded =
        CallOptions::with_priority(Priority::Elevated).queue_timeout(Duration::from_secs(4));
    let call = spawn_chat_with(client, "b", bounded);
    let waiting = stack.wait_queue_len(1).await;
    assert_eq!(
        (waiting[0].model.as_str(), waiting[0].requested_priority),
        ("b", 10)
    );
    let error = finish("the bounded call", call)
        .await
        .expect_err("it had to wait longer than its bound");
    assert_eq!(error.status().map(|s| s.as_u16()), Some(503), "{error}");
    assert_eq!(error.code(), Some("queue_timeout"), "{error}");
    assert!(!error.is_retryable(), "{error}");
    assert_eq!(stack.queue().await, [], "no retry joined the queue");
    assert!(stack.journal("b").await.is_none(), "b was never started");
    release(&stack, "a", busy).await;
    stack.shutdown().await;
}
