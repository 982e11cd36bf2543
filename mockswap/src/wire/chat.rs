//! OpenAI chat completions: the whole response and its stream, with tool calls.

use serde_json::{Value, json};

use super::shape::{
    Answer, CREATED, Ids, SseEvent, UsagePlacement, argument_pieces, tokens, usage, usage_placement,
};

fn completion_tokens(answer: &Answer) -> usize {
    let pieces: usize = answer
        .tool_calls
        .iter()
        .map(|call| argument_pieces(&call.arguments_text()).len())
        .sum();
    tokens(&answer.text).len() + pieces
}

fn call_id(ids: Ids<'_>, index: usize, given: Option<&str>) -> String {
    given.map_or_else(
        || format!("call_mockswap_{}_{index}", ids.seq),
        str::to_owned,
    )
}

fn finish_reason(answer: &Answer) -> &'static str {
    if answer.tool_calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    }
}

/// The `chat.completion` object.
pub(super) fn complete(ids: Ids<'_>, answer: &Answer, prompt: usize) -> Value {
    let mut message = json!({"role": "assistant", "content": answer.text});
    if !answer.tool_calls.is_empty() {
        if answer.text.is_empty() {
            message["content"] = Value::Null;
        }
        let calls: Vec<Value> = answer
            .tool_calls
            .iter()
            .enumerate()
            .map(|(i, call)| {
                json!({
                    "id": call_id(ids, i, call.id.as_deref()),
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments_text()},
                })
            })
            .collect();
        message["tool_calls"] = Value::Array(calls);
    }
    json!({
        "id": format!("chatcmpl-mockswap-{}", ids.seq),
        "object": "chat.completion",
        "created": CREATED,
        "model": ids.model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason(answer)}],
        "usage": usage(prompt, completion_tokens(answer)),
    })
}

/// The `chat.completion.chunk` events: the role, one token per frame, then each tool
/// call (its id and name, then its arguments in several pieces), the finish chunk and
/// usage.
pub(super) fn stream(
    ids: Ids<'_>,
    answer: &Answer,
    prompt: usize,
    body: Option<&Value>,
    usage_frame: bool,
) -> Vec<SseEvent> {
    let id = format!("chatcmpl-mockswap-{}", ids.seq);
    let chunk = |delta: Value, finish: Value| {
        json!({
            "id": id, "object": "chat.completion.chunk", "created": CREATED, "model": ids.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        })
    };
    let mut out = Vec::new();
    let opening = if answer.text.is_empty() && !answer.tool_calls.is_empty() {
        json!({"role": "assistant", "content": null})
    } else {
        json!({"role": "assistant", "content": ""})
    };
    out.push(SseEvent::meta(chunk(opening, Value::Null)));
    out.extend(
        tokens(&answer.text)
            .iter()
            .map(|t| SseEvent::token(chunk(json!({"content": t}), Value::Null))),
    );
    for (index, call) in answer.tool_calls.iter().enumerate() {
        let head = json!({"tool_calls": [{
            "index": index,
            "id": call_id(ids, index, call.id.as_deref()),
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }]});
        out.push(SseEvent::meta(chunk(head, Value::Null)));
        for piece in argument_pieces(&call.arguments_text()) {
            let delta = json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]});
            out.push(SseEvent::token(chunk(delta, Value::Null)));
        }
    }
    let mut finish = chunk(json!({}), json!(finish_reason(answer)));
    let usage = usage(prompt, completion_tokens(answer));
    match usage_placement(body, usage_frame) {
        UsagePlacement::None => out.push(SseEvent::meta(finish)),
        UsagePlacement::OnFinish => {
            finish["usage"] = usage;
            out.push(SseEvent::meta(finish));
        }
        UsagePlacement::Separate => {
            out.push(SseEvent::meta(finish));
            out.push(SseEvent::meta(json!({
                "id": id, "object": "chat.completion.chunk", "created": CREATED, "model": ids.model,
                "choices": [], "usage": usage,
            })));
        }
    }
    out
}
