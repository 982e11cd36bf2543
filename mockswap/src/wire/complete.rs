//! Whole (non-streamed) responses: every API's JSON shape, embeddings, rerank scores
//! and the model list.

use serde_json::{Value, json};

use super::request::{Api, inputs, prompt_tokens};
use super::shape::{Answer, CREATED, Ids, tokens, usage};
use super::{anthropic, chat, media};

/// The non-streaming JSON response of a model request. Tool calls are rendered by chat
/// completions and messages; the other APIs answer with the text only.
pub(crate) fn complete(
    api: Api,
    ids: Ids<'_>,
    answer: &Answer,
    body: Option<&Value>,
    path: &str,
) -> Value {
    let prompt = prompt_tokens(api, body);
    let content = answer.text.as_str();
    let completion = tokens(content).len();
    let Ids { model, seq } = ids;
    match api {
        Api::ChatCompletions => chat::complete(ids, answer, prompt),
        Api::Messages => anthropic::complete(ids, answer, prompt),
        Api::Completions => json!({
            "id": format!("cmpl-mockswap-{seq}"),
            "object": "text_completion",
            "created": CREATED,
            "model": model,
            "choices": [{"index": 0, "text": content, "logprobs": null, "finish_reason": "stop"}],
            "usage": usage(prompt, completion),
        }),
        Api::Embeddings => {
            let data: Vec<Value> = inputs(body.unwrap_or(&Value::Null))
                .iter()
                .enumerate()
                .map(|(index, text)| {
                    json!({"object": "embedding", "index": index, "embedding": embedding(text)})
                })
                .collect();
            json!({
                "object": "list",
                "data": data,
                "model": model,
                "usage": {"prompt_tokens": prompt, "total_tokens": prompt},
            })
        }
        Api::LlamaCompletion | Api::Infill => json!({
            "content": content,
            "model": model,
            "stop": true,
            "stop_type": "eos",
            "tokens_predicted": completion,
            "tokens_evaluated": prompt,
        }),
        Api::Rerank => rerank(model, body.unwrap_or(&Value::Null), prompt),
        Api::Images => media::images(ids, content, body),
        Api::Voices => media::voices(model),
        Api::Transcription => media::transcription(content, None),
        // Speech is answered with audio (`media::speech`), not JSON.
        Api::Speech | Api::Other => json!({
            "object": "mockswap.echo",
            "model": model,
            "path": path,
            "content": content,
        }),
    }
}

/// A deterministic 8-dimensional unit-free vector derived from the text (FNV-1a).
pub(super) fn embedding(text: &str) -> Vec<f64> {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    (0..8)
        .map(|i| {
            let byte = (hash >> (i * 8)) & 0xff;
            // Map each byte to [-1, 1] with two decimals, so values print exactly.
            ((byte as f64) / 127.5 - 1.0).mul_add(100.0, 0.0).round() / 100.0
        })
        .collect()
}

fn rerank(model: &str, body: &Value, prompt: usize) -> Value {
    let query: Vec<String> = body
        .get("query")
        .and_then(Value::as_str)
        .unwrap_or("")
        .split_whitespace()
        .map(str::to_lowercase)
        .collect();
    let docs: Vec<String> = body
        .get("documents")
        .and_then(Value::as_array)
        .map(|d| {
            d.iter()
                .map(|x| {
                    x.as_str()
                        .map(str::to_owned)
                        .or_else(|| x.get("text").and_then(Value::as_str).map(str::to_owned))
                        .unwrap_or_default()
                })
                .collect()
        })
        .unwrap_or_default();
    let results: Vec<Value> = docs
        .iter()
        .enumerate()
        .map(|(index, doc)| {
            let lower = doc.to_lowercase();
            let hits = query.iter().filter(|w| lower.contains(w.as_str())).count();
            let score = if query.is_empty() {
                0.0
            } else {
                hits as f64 / query.len() as f64
            };
            json!({"index": index, "relevance_score": score, "document": {"text": doc}})
        })
        .collect();
    json!({
        "model": model,
        "object": "list",
        "usage": {"prompt_tokens": prompt, "total_tokens": prompt},
        "results": results,
    })
}

/// The `/v1/models` list: `(id, loaded)` pairs, in the order given, with the
/// server's `status.value` (`loaded` / `unloaded`).
pub(crate) fn model_list<'a>(models: impl IntoIterator<Item = (&'a str, bool)>) -> Value {
    let data: Vec<Value> = models
        .into_iter()
        .map(|(id, loaded)| {
            json!({
                "id": id,
                "object": "model",
                "created": CREATED,
                "owned_by": "mockswap",
                "status": {"value": if loaded { "loaded" } else { "unloaded" }},
            })
        })
        .collect();
    json!({"object": "list", "data": data})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::request::{echo_source, echo_text};
    use crate::wire::shape::tokens;

    #[test]
    fn tokens_concatenate_back_to_the_content() {
        let text = "[m]  héllo wörld\n again ";
        let toks = tokens(text);
        assert_eq!(toks.concat(), text);
        assert_eq!(toks[0], "[m]");
        assert_eq!(toks[1], "  héllo");
    }

    #[test]
    fn echo_reflects_the_last_user_message_in_string_or_parts_form() {
        let body = json!({"messages": [
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "ignored"},
            {"role": "user", "content": [{"type": "text", "text": "second"}]},
        ]});
        assert_eq!(echo_source(Api::ChatCompletions, Some(&body)), "second");
        assert_eq!(echo_text("qwen", "second"), "[qwen] second");
    }

    #[test]
    fn embeddings_are_deterministic_per_input() {
        assert_eq!(embedding("a"), embedding("a"));
        assert_ne!(embedding("a"), embedding("b"));
        assert_eq!(embedding("a").len(), 8);
    }
}
