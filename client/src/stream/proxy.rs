//! The proxy's own frames: where a call stands while it waits for its model.
//!
//! The proxy (llama-swap-server, mockswap) injects frames into a stream before the
//! model's own output. Each is a valid `chat.completion.chunk` whose delta holds
//! llama-swap's human text in `reasoning_content`, with a top-level `llamaswap`
//! object saying what it means:
//!
//! ```text
//! {"id":"llamaswap-<id>","object":"chat.completion.chunk",...,
//!  "choices":[{"index":0,"delta":{"reasoning_content":"Queue position: #2"},"finish_reason":null}],
//!  "llamaswap":{"status":"queued","position":2,"model":"qwen"}}
//! ```
//!
//! That object is the only thing that marks a proxy frame: a reasoning-only frame
//! without it (real llama-swap's untyped loading text, or a model thinking) is
//! model content.

use std::time::Duration;

use serde_json::{Map, Value};

/// One frame the proxy injected into a stream.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ProxyEvent {
    /// What the frame reports.
    pub status: ProxyStatus,
    /// The model the call waits for, when the frame names it.
    pub model: Option<String>,
    /// The frame's human text (llama-swap's rule lines, `Queue position: #N`, dots,
    /// `Done! (1.23s)`); frames type it a few characters at a time.
    pub text: String,
    /// Any other keys of the `llamaswap` object, kept as received.
    pub extra: Map<String, Value>,
}

/// What a [`ProxyEvent`] reports. Several frames in a row may carry the same
/// status (one per piece of text); compare with the previous one to see changes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProxyStatus {
    /// Admitted; nothing to report yet.
    Waiting,
    /// Waiting in the queue. Positions can go up as well as down: higher-priority
    /// work that arrives later moves ahead.
    Queued {
        /// 1-based place in the queue.
        position: u32,
    },
    /// The model is being started for this call.
    Loading,
    /// The model is ready; the model's own stream follows.
    Ready {
        /// How long the call waited, when the frame says.
        waited: Option<Duration>,
    },
    /// A status this SDK does not know (or `queued` without a position).
    Other(String),
}

impl ProxyEvent {
    /// An event with `status` and nothing else.
    pub fn new(status: ProxyStatus) -> ProxyEvent {
        ProxyEvent {
            status,
            model: None,
            text: String::new(),
            extra: Map::new(),
        }
    }

    /// Sets the model.
    #[must_use]
    pub fn with_model(mut self, model: impl Into<String>) -> ProxyEvent {
        self.model = Some(model.into());
        self
    }

    /// Sets the human text.
    #[must_use]
    pub fn with_text(mut self, text: impl Into<String>) -> ProxyEvent {
        self.text = text.into();
        self
    }

    /// The queue position, for a `Queued` event.
    pub fn queue_position(&self) -> Option<u32> {
        match self.status {
            ProxyStatus::Queued { position } => Some(position),
            _ => None,
        }
    }

    /// Reads a frame's JSON; `None` when it has no `llamaswap` marker object.
    pub fn from_frame(value: &Value) -> Option<ProxyEvent> {
        let marker = value.get("llamaswap")?.as_object()?;
        let number = |key: &str| marker.get(key).and_then(Value::as_u64);
        let status_text = marker
            .get("status")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let status = match status_text {
            "waiting" => ProxyStatus::Waiting,
            "queued" => match number("position").and_then(|p| u32::try_from(p).ok()) {
                Some(position) => ProxyStatus::Queued { position },
                None => ProxyStatus::Other(status_text.to_owned()),
            },
            "loading" => ProxyStatus::Loading,
            "ready" => ProxyStatus::Ready {
                waited: number("waited_ms").map(Duration::from_millis),
            },
            other => ProxyStatus::Other(other.to_owned()),
        };
        let model = marker
            .get("model")
            .or_else(|| value.get("model"))
            .and_then(Value::as_str)
            .filter(|m| !m.is_empty())
            .map(str::to_owned);
        let text = value
            .get("choices")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|choice| {
                let delta = choice.get("delta")?;
                delta
                    .get("reasoning_content")
                    .or_else(|| delta.get("content"))?
                    .as_str()
            })
            .collect();
        let extra = marker
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), "status" | "model" | "position" | "waited_ms"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Some(ProxyEvent {
            status,
            model,
            text,
            extra,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn frame(marker: Value, text: &str) -> Value {
        json!({"id": "llamaswap-r1", "object": "chat.completion.chunk", "created": 1, "model": "qwen",
            "choices": [{"index": 0, "delta": {"reasoning_content": text}, "finish_reason": null}],
            "llamaswap": marker})
    }

    #[test]
    fn every_contract_status_is_read_with_its_fields() {
        let cases = [
            (
                json!({"status": "waiting", "model": "qwen"}),
                ProxyStatus::Waiting,
            ),
            (
                json!({"status": "queued", "position": 3, "model": "qwen"}),
                ProxyStatus::Queued { position: 3 },
            ),
            (
                json!({"status": "loading", "model": "qwen"}),
                ProxyStatus::Loading,
            ),
            (
                json!({"status": "ready", "waited_ms": 1234, "model": "qwen"}),
                ProxyStatus::Ready {
                    waited: Some(Duration::from_millis(1234)),
                },
            ),
            (
                json!({"status": "evicting", "model": "qwen"}),
                ProxyStatus::Other("evicting".into()),
            ),
            (
                json!({"status": "queued", "model": "qwen"}),
                ProxyStatus::Other("queued".into()),
            ),
        ];
        for (marker, status) in cases {
            let event = ProxyEvent::from_frame(&frame(marker, "Queue position: #3")).unwrap();
            assert_eq!(event.status, status);
            assert_eq!(event.model.as_deref(), Some("qwen"));
            assert_eq!(event.text, "Queue position: #3");
        }
    }

    #[test]
    fn unknown_marker_keys_are_kept_and_the_top_level_model_is_a_fallback() {
        let event =
            ProxyEvent::from_frame(&frame(json!({"status": "loading", "eta_ms": 900}), "."))
                .unwrap();
        assert_eq!(event.model.as_deref(), Some("qwen"));
        assert_eq!(event.extra["eta_ms"], 900);
    }

    #[test]
    fn frames_without_the_marker_are_not_proxy_frames() {
        let untyped = json!({"choices": [{"delta": {"reasoning_content": "llama-swap loading model: qwen"}}]});
        assert_eq!(ProxyEvent::from_frame(&untyped), None);
        assert_eq!(
            ProxyEvent::from_frame(&json!({"llamaswap": "loading"})),
            None
        );
    }
}
