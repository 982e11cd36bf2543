//! The building blocks every response shape uses: what a reply says ([`Answer`]), the
//! identity of a response ([`Ids`]), tokens, usage, and SSE events before stream
//! shaping turns them into bytes.

use serde_json::{Value, json};

use crate::reply::ToolCall;

/// What a reply says: its text and the tool calls it makes.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Answer {
    /// The text content (may be empty when the reply only calls tools).
    pub text: String,
    /// The tool calls, in order.
    pub tool_calls: Vec<ToolCall>,
}

impl Answer {
    /// Text only.
    pub(crate) fn text(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            tool_calls: Vec::new(),
        }
    }
}

/// The pieces a tool call's arguments are streamed in: up to three of equal size (at
/// most 16 characters each, so long arguments take more), cut at character boundaries,
/// so a client must join several deltas to read them. Empty arguments are one empty
/// piece.
pub(super) fn argument_pieces(arguments: &str) -> Vec<String> {
    let chars: Vec<char> = arguments.chars().collect();
    if chars.is_empty() {
        return vec![String::new()];
    }
    let size = chars.len().div_ceil(3).clamp(1, 16);
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

/// The `created` timestamp of every response (fixed, so responses are reproducible).
pub(super) const CREATED: u64 = 1_700_000_000;

/// Splits content into tokens: each word with the whitespace before it, so the tokens
/// concatenate back to the content exactly.
pub(super) fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut in_word = false;
    for c in text.chars() {
        if c.is_whitespace() {
            if in_word {
                out.push(std::mem::take(&mut current));
                in_word = false;
            }
        } else {
            in_word = true;
        }
        current.push(c);
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// Identity of one response: model and journal sequence number.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ids<'a> {
    /// The model named by the request.
    pub model: &'a str,
    /// The journal sequence number of the request.
    pub seq: u64,
}

pub(crate) fn usage(prompt: usize, completion: usize) -> Value {
    json!({
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    })
}

/// One SSE event of a stream before it is shaped into bytes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SseEvent {
    /// The `event:` field, if any (Anthropic streams name their events).
    pub event: Option<&'static str>,
    /// The `data:` payload.
    pub data: String,
    /// Whether the event carries a generated token (paced by tokens per second).
    pub token: bool,
}

impl SseEvent {
    pub(crate) fn meta(data: Value) -> Self {
        Self {
            event: None,
            data: data.to_string(),
            token: false,
        }
    }

    pub(crate) fn token(data: Value) -> Self {
        Self {
            event: None,
            data: data.to_string(),
            token: true,
        }
    }

    pub(crate) fn named(mut self, event: &'static str) -> Self {
        self.event = Some(event);
        self
    }

    /// The `data: [DONE]` terminator.
    pub(crate) fn done() -> Self {
        Self {
            event: None,
            data: "[DONE]".to_owned(),
            token: false,
        }
    }

    /// A data event with an arbitrary payload (scripted frames, error frames).
    pub(crate) fn raw(data: String) -> Self {
        Self {
            event: None,
            data,
            token: true,
        }
    }
}

/// Where an OpenAI-family stream reports usage.
pub(crate) enum UsagePlacement {
    None,
    /// On the finish chunk, as llama.cpp's server does.
    OnFinish,
    /// In a last chunk with an empty `choices`, as OpenAI does when the request asks
    /// with `stream_options.include_usage`.
    Separate,
}

pub(crate) fn usage_placement(body: Option<&Value>, usage_frame: bool) -> UsagePlacement {
    let asked = body
        .and_then(|b| b.pointer("/stream_options/include_usage"))
        .and_then(Value::as_bool)
        == Some(true);
    match (usage_frame, asked) {
        (false, _) => UsagePlacement::None,
        (true, false) => UsagePlacement::OnFinish,
        (true, true) => UsagePlacement::Separate,
    }
}
