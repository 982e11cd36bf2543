//! The loading-state stream while requests wait at the gate: `waiting`, `queued` with
//! the place in the release order as it changes, then `loading`, `ready` and the
//! model's stream; errors after the 200 as an error frame.

use futures_util::StreamExt;
use mockswap::{Fault, FaultRule, MockSwap, StreamShape};
use serde_json::Value;

use crate::{BOUND, chat, post};

/// Reads SSE `data:` payloads from a response as they arrive.
struct Frames {
    body: futures_util::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buffer: String,
}

impl Frames {
    fn new(response: reqwest::Response) -> Self {
        assert_eq!(response.status(), 200);
        Self {
            body: response.bytes_stream().boxed(),
            buffer: String::new(),
        }
    }

    /// The next payload (`[DONE]` as the string), `None` at the end of the body.
    async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let frame: String = self.buffer.drain(..end + 2).collect();
                let data = frame.lines().find_map(|l| l.strip_prefix("data: "))?;
                return Some(serde_json::from_str(data).unwrap_or(Value::String(data.to_owned())));
            }
            let chunk = tokio::time::timeout(BOUND, self.body.next())
                .await
                .unwrap()?;
            self.buffer
                .push_str(std::str::from_utf8(&chunk.unwrap()).unwrap());
        }
    }

    /// Reads until a frame with this `llamaswap.status` (and position, for `queued`).
    async fn until(&mut self, status: &str, position: Option<u64>) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let frame = self
                .next()
                .await
                .unwrap_or_else(|| panic!("ended before {status}: {seen:?}"));
            let marker = frame["llamaswap"].clone();
            seen.push(frame);
            if marker["status"] == status
                && (position.is_none() || marker["position"].as_u64() == position)
            {
                return seen;
            }
        }
    }

    async fn rest(&mut self) -> Vec<Value> {
        let mut seen = Vec::new();
        while let Some(frame) = self.next().await {
            seen.push(frame);
        }
        seen
    }
}

fn statuses(frames: &[Value]) -> Vec<String> {
    frames
        .iter()
        .filter_map(|f| f["llamaswap"]["status"].as_str())
        .map(str::to_owned)
        .collect()
}

fn content(frames: &[Value]) -> String {
    frames
        .iter()
        .filter_map(|f| f["choices"][0]["delta"]["content"].as_str())
        .collect()
}

async fn loading_mock() -> MockSwap {
    MockSwap::builder()
        .stream_shape(StreamShape::new().loading_state(true))
        .gate_closed()
        .start()
        .await
        .unwrap()
}

#[tokio::test]
async fn held_stream_reports_its_queue_position_as_it_changes_then_loads() {
    let mock = loading_mock().await;
    let mut low = Frames::new(
        post(
            &mock,
            "/v1/chat/completions",
            &chat("m", "low", true),
            &["-10"],
        )
        .await,
    );
    let first = low.until("queued", Some(1)).await;
    assert_eq!(statuses(&first), ["waiting", "queued"]);
    assert!(
        first[1]["choices"][0]["delta"]["reasoning_content"]
            .as_str()
            .unwrap()
            .contains("Queue position: #1")
    );
    let mut high = Frames::new(
        post(
            &mock,
            "/v1/chat/completions",
            &chat("m", "high", true),
            &["10"],
        )
        .await,
    );
    // The Elevated request goes ahead: the Low one moves back to #2.
    low.until("queued", Some(2)).await;
    high.until("queued", Some(1)).await;
    mock.open_gate();
    let high_rest = high.rest().await;
    assert_eq!(statuses(&high_rest), ["loading", "ready"]);
    assert_eq!(content(&high_rest), "[m] high");
    assert_eq!(high_rest.last().unwrap(), "[DONE]");
    let low_rest = low.rest().await;
    let low_statuses = statuses(&low_rest);
    assert_eq!(low_statuses[low_statuses.len() - 2..], ["loading", "ready"]);
    assert!(
        low_statuses[..low_statuses.len() - 2]
            .iter()
            .all(|s| s == "queued"),
        "{low_statuses:?}"
    );
    assert_eq!(content(&low_rest), "[m] low");
    assert_eq!(mock.dispatch_order(), [2, 1]);
}

#[tokio::test]
async fn held_stream_gets_an_error_frame_when_the_mock_stops() {
    let mock = loading_mock().await;
    let mut held =
        Frames::new(post(&mock, "/v1/chat/completions", &chat("m", "x", true), &[]).await);
    held.until("queued", Some(1)).await;
    let (_, rest) = tokio::join!(mock.shutdown(), held.rest());
    assert_eq!(rest[0]["error"]["code"], "shutting_down", "{rest:?}");
    assert_eq!(rest[1], "[DONE]");
}

#[tokio::test]
async fn fault_status_after_the_200_arrives_as_an_error_frame() {
    let mock = loading_mock().await;
    mock.add_fault(FaultRule::new(Fault::too_many_requests(0)));
    mock.open_gate();
    let mut frames =
        Frames::new(post(&mock, "/v1/chat/completions", &chat("m", "x", true), &[]).await);
    let seen = frames.rest().await;
    assert_eq!(statuses(&seen), ["waiting"]);
    assert_eq!(seen[1]["error"]["code"], "concurrency_limit", "{seen:?}");
    assert_eq!(seen[2], "[DONE]");
}
