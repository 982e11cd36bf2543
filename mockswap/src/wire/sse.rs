//! Streamed responses as SSE events (before stream shaping turns them into bytes), and
//! the proxy's loading-state frames.

use serde_json::{Value, json};

use super::request::{Api, prompt_tokens};
use super::shape::{
    Answer, CREATED, Ids, SseEvent, UsagePlacement, tokens, usage, usage_placement,
};
use super::{anthropic, chat};

/// The events of a streamed response for `answer`, without `[DONE]`. With
/// `usage_frame`, the OpenAI family reports usage on the finish chunk, or in a separate
/// chunk with empty `choices` when the request sets `stream_options.include_usage`
/// (Anthropic and llama.cpp always carry usage in their final events). Tool calls are
/// streamed by chat completions and messages; the other APIs stream the text only.
pub(crate) fn stream_events(
    api: Api,
    ids: Ids<'_>,
    answer: &Answer,
    body: Option<&Value>,
    usage_frame: bool,
) -> Vec<SseEvent> {
    let prompt = prompt_tokens(api, body);
    let toks = tokens(&answer.text);
    let completion = toks.len();
    let Ids { model, seq } = ids;
    let mut out = Vec::new();
    match api {
        Api::ChatCompletions => return chat::stream(ids, answer, prompt, body, usage_frame),
        Api::Messages => return anthropic::stream(ids, answer, prompt),
        Api::Completions => {
            let id = format!("cmpl-mockswap-{seq}");
            let chunk = |text: &str, finish: Value| {
                json!({
                    "id": id, "object": "text_completion", "created": CREATED, "model": model,
                    "choices": [{"index": 0, "text": text, "logprobs": null, "finish_reason": finish}],
                })
            };
            out.extend(toks.iter().map(|t| SseEvent::token(chunk(t, Value::Null))));
            let mut finish = chunk("", json!("stop"));
            let usage = usage(prompt, completion);
            match usage_placement(body, usage_frame) {
                UsagePlacement::None => out.push(SseEvent::meta(finish)),
                UsagePlacement::OnFinish => {
                    finish["usage"] = usage;
                    out.push(SseEvent::meta(finish));
                }
                UsagePlacement::Separate => {
                    out.push(SseEvent::meta(finish));
                    out.push(SseEvent::meta(json!({
                        "id": id, "object": "text_completion", "created": CREATED, "model": model,
                        "choices": [], "usage": usage,
                    })));
                }
            }
        }
        Api::LlamaCompletion | Api::Infill => {
            out.extend(
                toks.iter()
                    .map(|t| SseEvent::token(json!({"content": t, "stop": false, "index": 0}))),
            );
            out.push(SseEvent::meta(json!({
                "content": "", "stop": true, "index": 0, "model": model, "stop_type": "eos",
                "tokens_predicted": completion, "tokens_evaluated": prompt,
            })));
        }
        // These never stream (`Api::streams`).
        Api::Embeddings
        | Api::Rerank
        | Api::Images
        | Api::Speech
        | Api::Transcription
        | Api::Voices
        | Api::Other => {}
    }
    out
}

/// What a proxy frame reports, as its `llamaswap.status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) enum LoadingStatus {
    /// Admitted, nothing to report yet (the first frame).
    Waiting,
    /// Held in the queue at this 1-based position.
    Queued(usize),
    /// The model is starting for this request.
    Loading,
    /// The last proxy frame, just before the model's own stream.
    Ready {
        /// How long the request waited in the mock before its stream began.
        waited_ms: u64,
    },
}

/// One frame the proxy injects before a chat stream when `sendLoadingState` is on: a
/// `chat.completion.chunk` whose delta carries llama-swap's human text in
/// `reasoning_content`, marked by a top-level `llamaswap` object.
pub(crate) fn loading_frame(model: &str, seq: u64, status: LoadingStatus) -> SseEvent {
    let rule = "━━━━━";
    let (text, marker) = match status {
        LoadingStatus::Waiting => (
            format!("{rule}\nllama-swap loading model: {model}\n"),
            json!({"status": "waiting", "model": model}),
        ),
        LoadingStatus::Queued(position) => (
            format!("\nQueue position: #{position} "),
            json!({"status": "queued", "model": model, "position": position}),
        ),
        LoadingStatus::Loading => (
            "\nLoading... ".to_owned(),
            json!({"status": "loading", "model": model}),
        ),
        LoadingStatus::Ready { waited_ms } => (
            format!("\nDone! ({:.2}s)\n{rule}\n \n", waited_ms as f64 / 1000.0),
            json!({"status": "ready", "model": model, "waited_ms": waited_ms}),
        ),
    };
    SseEvent::meta(json!({
        "id": format!("llamaswap-{seq}"),
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": model,
        "choices": [{"index": 0, "delta": {"reasoning_content": text}, "finish_reason": null}],
        "llamaswap": marker,
    }))
}

/// The proxy frames of a request that did not have to queue: `waiting`, `loading`,
/// then `ready` (the mock's model loads instantly).
#[cfg(test)]
fn loading_events(model: &str, seq: u64, waited_ms: u64) -> Vec<SseEvent> {
    [
        LoadingStatus::Waiting,
        LoadingStatus::Loading,
        LoadingStatus::Ready { waited_ms },
    ]
    .into_iter()
    .map(|status| loading_frame(model, seq, status))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loading_frames_are_chat_chunks_marked_waiting_loading_then_ready() {
        let frames: Vec<Value> = loading_events("qwen", 7, 1250)
            .iter()
            .map(|e| serde_json::from_str::<Value>(&e.data).unwrap())
            .collect();
        let statuses: Vec<&str> = frames
            .iter()
            .map(|f| f["llamaswap"]["status"].as_str().unwrap())
            .collect();
        assert_eq!(statuses, ["waiting", "loading", "ready"]);
        for f in &frames {
            assert_eq!(f["object"], "chat.completion.chunk");
            assert_eq!(f["id"], "llamaswap-7");
            assert_eq!(f["model"], "qwen");
            assert_eq!(f["llamaswap"]["model"], "qwen");
            assert!(f["choices"][0]["delta"]["reasoning_content"].is_string());
        }
        assert_eq!(
            frames[0]["choices"][0]["delta"]["reasoning_content"],
            "━━━━━\nllama-swap loading model: qwen\n"
        );
        assert_eq!(frames[2]["llamaswap"]["waited_ms"], 1250);
        let done = frames[2]["choices"][0]["delta"]["reasoning_content"]
            .as_str()
            .unwrap();
        assert!(done.contains("Done! (1.25s)"), "{done}");
    }

    #[test]
    fn chat_stream_events_carry_one_token_each_and_usage_on_the_finish_chunk() {
        let ids = Ids { model: "m", seq: 3 };
        let answer = Answer::text("a b");
        let events = stream_events(Api::ChatCompletions, ids, &answer, None, true);
        assert_eq!(events.iter().filter(|e| e.token).count(), 2);
        let last: Value = serde_json::from_str(&events[events.len() - 1].data).unwrap();
        assert_eq!(last["usage"]["completion_tokens"], 2);
        assert_eq!(last["id"], "chatcmpl-mockswap-3");
    }
}
