//! Anthropic `/v1/messages`: the whole message and its named SSE events, with
//! `tool_use` blocks.

use serde_json::{Value, json};

use super::shape::{Answer, Ids, SseEvent, argument_pieces, tokens};

fn output_tokens(answer: &Answer) -> usize {
    let pieces: usize = answer
        .tool_calls
        .iter()
        .map(|call| argument_pieces(&call.input().to_string()).len())
        .sum();
    tokens(&answer.text).len() + pieces
}

fn tool_id(ids: Ids<'_>, index: usize, given: Option<&str>) -> String {
    given.map_or_else(
        || format!("toolu_mockswap_{}_{index}", ids.seq),
        str::to_owned,
    )
}

fn stop_reason(answer: &Answer) -> &'static str {
    if answer.tool_calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    }
}

/// Whether the message opens with a text block (always, unless it only uses tools).
fn has_text_block(answer: &Answer) -> bool {
    !answer.text.is_empty() || answer.tool_calls.is_empty()
}

/// The `message` object.
pub(super) fn complete(ids: Ids<'_>, answer: &Answer, prompt: usize) -> Value {
    let mut content = Vec::new();
    if has_text_block(answer) {
        content.push(json!({"type": "text", "text": answer.text}));
    }
    for (i, call) in answer.tool_calls.iter().enumerate() {
        content.push(json!({
            "type": "tool_use",
            "id": tool_id(ids, i, call.id.as_deref()),
            "name": call.name,
            "input": call.input(),
        }));
    }
    json!({
        "id": format!("msg_mockswap_{}", ids.seq),
        "type": "message",
        "role": "assistant",
        "model": ids.model,
        "content": content,
        "stop_reason": stop_reason(answer),
        "stop_sequence": null,
        "usage": {"input_tokens": prompt, "output_tokens": output_tokens(answer)},
    })
}

/// The named events: `message_start`, one block per text and tool use
/// (`content_block_start`, deltas, `content_block_stop`), `message_delta`,
/// `message_stop`. Tool input arrives as `input_json_delta` pieces.
pub(super) fn stream(ids: Ids<'_>, answer: &Answer, prompt: usize) -> Vec<SseEvent> {
    let mut out = vec![
        SseEvent::meta(json!({
            "type": "message_start",
            "message": {
                "id": format!("msg_mockswap_{}", ids.seq), "type": "message", "role": "assistant",
                "model": ids.model, "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": prompt, "output_tokens": 0},
            },
        }))
        .named("message_start"),
    ];
    let mut index = 0;
    let block_stop = |index: usize| {
        SseEvent::meta(json!({"type": "content_block_stop", "index": index}))
            .named("content_block_stop")
    };
    if has_text_block(answer) {
        out.push(
            SseEvent::meta(json!({
                "type": "content_block_start", "index": index,
                "content_block": {"type": "text", "text": ""},
            }))
            .named("content_block_start"),
        );
        out.extend(tokens(&answer.text).iter().map(|t| {
            SseEvent::token(json!({
                "type": "content_block_delta", "index": index,
                "delta": {"type": "text_delta", "text": t},
            }))
            .named("content_block_delta")
        }));
        out.push(block_stop(index));
        index += 1;
    }
    for (i, call) in answer.tool_calls.iter().enumerate() {
        out.push(
            SseEvent::meta(json!({
                "type": "content_block_start", "index": index,
                "content_block": {
                    "type": "tool_use", "id": tool_id(ids, i, call.id.as_deref()),
                    "name": call.name, "input": {},
                },
            }))
            .named("content_block_start"),
        );
        for piece in argument_pieces(&call.input().to_string()) {
            out.push(
                SseEvent::token(json!({
                    "type": "content_block_delta", "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": piece},
                }))
                .named("content_block_delta"),
            );
        }
        out.push(block_stop(index));
        index += 1;
    }
    out.push(
        SseEvent::meta(json!({
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason(answer), "stop_sequence": null},
            "usage": {"output_tokens": output_tokens(answer)},
        }))
        .named("message_delta"),
    );
    out.push(SseEvent::meta(json!({"type": "message_stop"})).named("message_stop"));
    out
}

/// Anthropic's error body: `{"type": "error", "error": {"type", "message"}}`.
pub(crate) fn error_body(status: http::StatusCode, message: &str) -> Value {
    let kind = match status.as_u16() {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        s if s >= 500 => "api_error",
        _ => "invalid_request_error",
    };
    json!({"type": "error", "error": {"type": kind, "message": message}})
}
