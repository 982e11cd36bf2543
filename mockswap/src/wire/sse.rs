//! Streamed responses as SSE events, before stream shaping turns them into bytes.

use serde_json::{Value, json};

use super::{Api, CREATED, Ids, prompt_tokens, tokens, usage};

/// One SSE event of a stream before it is shaped into bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct SseEvent {
    /// The `event:` field, if any (Anthropic streams name their events).
    pub event: Option<&'static str>,
    /// The `data:` payload.
    pub data: String,
    /// Whether the event carries a generated token (paced by tokens per second).
    pub token: bool,
}

impl SseEvent {
    fn meta(data: Value) -> Self {
        Self {
            event: None,
            data: data.to_string(),
            token: false,
        }
    }

    fn token(data: Value) -> Self {
        Self {
            event: None,
            data: data.to_string(),
            token: true,
        }
    }

    fn named(mut self, event: &'static str) -> Self {
        self.event = Some(event);
        self
    }

    /// The `data: [DONE]` terminator.
    pub fn done() -> Self {
        Self {
            event: None,
            data: "[DONE]".to_owned(),
            token: false,
        }
    }

    /// A data event with an arbitrary payload (scripted frames, error frames).
    pub fn raw(data: String) -> Self {
        Self {
            event: None,
            data,
            token: true,
        }
    }
}

/// The events of a streamed response for `content`, without `[DONE]`. `usage` adds the
/// usage frame of the OpenAI family (Anthropic and llama.cpp always carry usage in their
/// final events).
pub fn stream_events(
    api: Api,
    ids: Ids<'_>,
    content: &str,
    body: Option<&Value>,
    usage_frame: bool,
) -> Vec<SseEvent> {
    let prompt = prompt_tokens(api, body);
    let toks = tokens(content);
    let completion = toks.len();
    let Ids { model, seq } = ids;
    let mut out = Vec::new();
    match api {
        Api::ChatCompletions => {
            let id = format!("chatcmpl-mockswap-{seq}");
            let chunk = |delta: Value, finish: Value| {
                json!({
                    "id": id, "object": "chat.completion.chunk", "created": CREATED, "model": model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                })
            };
            out.push(SseEvent::meta(chunk(
                json!({"role": "assistant", "content": ""}),
                Value::Null,
            )));
            out.extend(
                toks.iter()
                    .map(|t| SseEvent::token(chunk(json!({"content": t}), Value::Null))),
            );
            out.push(SseEvent::meta(chunk(json!({}), json!("stop"))));
            if usage_frame {
                out.push(SseEvent::meta(json!({
                    "id": id, "object": "chat.completion.chunk", "created": CREATED, "model": model,
                    "choices": [], "usage": usage(prompt, completion),
                })));
            }
        }
        Api::Completions => {
            let id = format!("cmpl-mockswap-{seq}");
            let chunk = |text: &str, finish: Value| {
                json!({
                    "id": id, "object": "text_completion", "created": CREATED, "model": model,
                    "choices": [{"index": 0, "text": text, "logprobs": null, "finish_reason": finish}],
                })
            };
            out.extend(toks.iter().map(|t| SseEvent::token(chunk(t, Value::Null))));
            out.push(SseEvent::meta(chunk("", json!("stop"))));
            if usage_frame {
                out.push(SseEvent::meta(json!({
                    "id": id, "object": "text_completion", "created": CREATED, "model": model,
                    "choices": [], "usage": usage(prompt, completion),
                })));
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
        Api::Messages => {
            let id = format!("msg_mockswap_{seq}");
            out.push(SseEvent::meta(json!({
                "type": "message_start",
                "message": {
                    "id": id, "type": "message", "role": "assistant", "model": model, "content": [],
                    "stop_reason": null, "stop_sequence": null,
                    "usage": {"input_tokens": prompt, "output_tokens": 0},
                },
            })).named("message_start"));
            out.push(SseEvent::meta(json!({
                "type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""},
            })).named("content_block_start"));
            out.extend(toks.iter().map(|t| {
                SseEvent::token(json!({
                    "type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t},
                }))
                .named("content_block_delta")
            }));
            out.push(
                SseEvent::meta(json!({"type": "content_block_stop", "index": 0}))
                    .named("content_block_stop"),
            );
            out.push(
                SseEvent::meta(json!({
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn", "stop_sequence": null},
                    "usage": {"output_tokens": completion},
                }))
                .named("message_delta"),
            );
            out.push(SseEvent::meta(json!({"type": "message_stop"})).named("message_stop"));
        }
        Api::Embeddings | Api::Rerank | Api::Other => {}
    }
    out
}

/// The frames llama-swap streams while it loads a model for a chat stream
/// (`sendLoadingState`): `reasoning_content` deltas with no `id`, `object` or `model`.
/// The mock sends them at once, as if the model finished loading instantly.
pub fn loading_events(model: &str) -> Vec<SseEvent> {
    let rule = "━━━━━";
    [
        format!("{rule}\n"),
        format!("llama-swap loading model: {model}\n"),
        "Done! (0.00s)\n".to_owned(),
        format!("{rule}\n"),
        " \n".to_owned(),
    ]
    .into_iter()
    .map(|text| SseEvent::meta(json!({"choices": [{"delta": {"reasoning_content": text}}]})))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loading_frames_have_no_id_and_name_the_model() {
        let events = loading_events("qwen");
        let texts: Vec<Value> = events
            .iter()
            .map(|e| serde_json::from_str::<Value>(&e.data).unwrap())
            .collect();
        assert!(
            texts
                .iter()
                .all(|v| v.get("id").is_none() && v.get("model").is_none())
        );
        assert_eq!(
            texts[1]["choices"][0]["delta"]["reasoning_content"],
            "llama-swap loading model: qwen\n"
        );
    }

    #[test]
    fn chat_stream_events_carry_one_token_each_and_a_usage_frame() {
        let ids = Ids { model: "m", seq: 3 };
        let events = stream_events(Api::ChatCompletions, ids, "a b", None, true);
        assert_eq!(events.iter().filter(|e| e.token).count(), 2);
        let last: Value = serde_json::from_str(&events[events.len() - 1].data).unwrap();
        assert_eq!(last["usage"]["completion_tokens"], 2);
        assert_eq!(last["id"], "chatcmpl-mockswap-3");
    }
}
