//! Streaming messages: Anthropic's named SSE events.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::{Stream, StreamExt};
use http::HeaderMap;
use serde_json::Value;

use super::types::{BlockDelta, ContentBlock, MessageDelta, MessagesResponse, Usage};
use crate::error::{DecodeTarget, Error};
use crate::stream::ProxyEvent;
use crate::stream::reader::{self, BoxItems, Kind};
use crate::transport::Deadlines;

/// One event of a messages stream.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
// A message start is rare and the rest are small; boxing would cost more than it saves.
#[allow(clippy::large_enum_variant)]
pub enum MessagesEvent {
    /// `message_start`: the message, usually with empty content.
    MessageStart {
        /// The message so far.
        message: MessagesResponse,
    },
    /// `content_block_start`.
    ContentBlockStart {
        /// The block's place in the content.
        index: u32,
        /// The block, usually empty (a tool use's input arrives as deltas).
        block: ContentBlock,
    },
    /// `content_block_delta`.
    ContentBlockDelta {
        /// The block it extends.
        index: u32,
        /// The new piece.
        delta: BlockDelta,
    },
    /// `content_block_stop`.
    ContentBlockStop {
        /// The block that is complete.
        index: u32,
    },
    /// `message_delta`: the stop reason and the final usage.
    MessageDelta {
        /// The stop reason and sequence.
        delta: MessageDelta,
        /// Usage so far (output tokens, usually).
        usage: Option<Usage>,
    },
    /// `message_stop`: the last event.
    MessageStop,
    /// The proxy's own progress report. Never model content.
    Proxy(ProxyEvent),
    /// An event type this SDK does not know, kept as received.
    Other(Value),
}

/// A streaming message: `Stream<Item = Result<MessagesEvent, Error>>`. It ends
/// after `message_stop`; `error` events yield [`Error::InStream`]; a body that ends
/// before `message_stop` yields [`Error::Truncated`]. `ping` events are skipped.
#[must_use = "a stream does nothing unless polled; dropping it cancels the request"]
pub struct MessagesStream {
    inner: BoxItems<MessagesEvent>,
    headers: HeaderMap,
}

impl std::fmt::Debug for MessagesStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MessagesStream").finish_non_exhaustive()
    }
}

impl Stream for MessagesStream {
    type Item = Result<MessagesEvent, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

struct MessagesKind;

impl Kind for MessagesKind {
    type Item = MessagesEvent;

    fn proxy(event: ProxyEvent) -> MessagesEvent {
        MessagesEvent::Proxy(event)
    }

    fn frame(
        value: Value,
        event: Option<&str>,
    ) -> Result<(MessagesEvent, bool), serde_json::Error> {
        let kind = value
            .get("type")
            .and_then(Value::as_str)
            .or(event)
            .unwrap_or_default()
            .to_owned();
        let index = || {
            value
                .get("index")
                .and_then(Value::as_u64)
                .and_then(|i| u32::try_from(i).ok())
                .unwrap_or(0)
        };
        let field = |key: &str| value.get(key).cloned().unwrap_or(Value::Null);
        let item = match kind.as_str() {
            "message_start" => MessagesEvent::MessageStart {
                message: serde_json::from_value(field("message"))?,
            },
            "content_block_start" => MessagesEvent::ContentBlockStart {
                index: index(),
                block: serde_json::from_value(field("content_block"))?,
            },
            "content_block_delta" => MessagesEvent::ContentBlockDelta {
                index: index(),
                delta: BlockDelta::from_value(field("delta")),
            },
            "content_block_stop" => MessagesEvent::ContentBlockStop { index: index() },
            "message_delta" => MessagesEvent::MessageDelta {
                delta: serde_json::from_value(field("delta"))?,
                usage: serde_json::from_value(field("usage"))?,
            },
            "message_stop" => MessagesEvent::MessageStop,
            _ => MessagesEvent::Other(value),
        };
        let complete = matches!(item, MessagesEvent::MessageStop);
        Ok((item, complete))
    }

    fn whole_body(value: Value) -> Result<Vec<MessagesEvent>, serde_json::Error> {
        Ok(vec![
            MessagesEvent::MessageStart {
                message: serde_json::from_value(value)?,
            },
            MessagesEvent::MessageStop,
        ])
    }
}

/// A block being assembled.
struct BlockAggregate {
    block: ContentBlock,
    input_json: String,
}

impl MessagesStream {
    pub(crate) fn new(
        response: reqwest::Response,
        deadlines: Deadlines,
        limit: usize,
    ) -> MessagesStream {
        let (headers, inner) = reader::response_items::<MessagesKind>(response, deadlines, limit);
        MessagesStream { inner, headers }
    }

    /// A stream of these events, for in-process fakes.
    pub fn from_stream<S>(items: S) -> MessagesStream
    where
        S: Stream<Item = Result<MessagesEvent, Error>> + Send + 'static,
    {
        MessagesStream {
            inner: Box::pin(items),
            headers: HeaderMap::new(),
        }
    }

    /// The response headers (empty for a stream that did not come from HTTP).
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// Reads the stream to its end and assembles the message a non-streaming call
    /// returns: text and thinking joined per block, tool inputs parsed from their
    /// JSON pieces, the stop reason and usage. Proxy events are skipped.
    ///
    /// # Errors
    ///
    /// The first error the stream yields, or [`Error::Decode`] with
    /// [`DecodeTarget::ToolArguments`] when a tool use's input is not JSON.
    pub async fn collect(mut self) -> Result<MessagesResponse, Error> {
        let mut message = MessagesResponse::default();
        let mut blocks: BTreeMap<u32, BlockAggregate> = BTreeMap::new();
        while let Some(item) = self.next().await {
            match item? {
                MessagesEvent::MessageStart { message: start } => message = start,
                MessagesEvent::ContentBlockStart { index, block } => {
                    blocks.insert(
                        index,
                        BlockAggregate {
                            block,
                            input_json: String::new(),
                        },
                    );
                }
                MessagesEvent::ContentBlockDelta { index, delta } => {
                    let acc = blocks.entry(index).or_insert_with(|| BlockAggregate {
                        block: ContentBlock::text(""),
                        input_json: String::new(),
                    });
                    apply_delta(acc, delta);
                }
                MessagesEvent::MessageDelta { delta, usage } => {
                    if delta.stop_reason.is_some() {
                        message.stop_reason = delta.stop_reason;
                    }
                    if delta.stop_sequence.is_some() {
                        message.stop_sequence = delta.stop_sequence;
                    }
                    if let Some(usage) = usage {
                        merge_usage(&mut message.usage, usage);
                    }
                }
                MessagesEvent::ContentBlockStop { .. }
                | MessagesEvent::MessageStop
                | MessagesEvent::Proxy(_)
                | MessagesEvent::Other(_) => {}
            }
        }
        for acc in blocks.into_values() {
            message.content.push(finish_block(acc)?);
        }
        Ok(message)
    }
}

fn apply_delta(acc: &mut BlockAggregate, delta: BlockDelta) {
    match (&mut acc.block, delta) {
        (ContentBlock::Text { text }, BlockDelta::Text(piece)) => text.push_str(&piece),
        (ContentBlock::Thinking { thinking, .. }, BlockDelta::Thinking(piece)) => {
            thinking.push_str(&piece);
        }
        (ContentBlock::Thinking { signature, .. }, BlockDelta::Signature(sig)) => {
            *signature = Some(sig);
        }
        (_, BlockDelta::InputJson(piece)) => acc.input_json.push_str(&piece),
        // A delta that does not fit its block (or an unknown one) has nowhere to go.
        _ => {}
    }
}

fn finish_block(acc: BlockAggregate) -> Result<ContentBlock, Error> {
    match acc.block {
        ContentBlock::ToolUse { id, name, input } if !acc.input_json.trim().is_empty() => {
            let _ = input;
            let input = serde_json::from_str(&acc.input_json).map_err(|source| Error::Decode {
                what: DecodeTarget::ToolArguments,
                raw: acc.input_json.clone(),
                source,
            })?;
            Ok(ContentBlock::ToolUse { id, name, input })
        }
        block => Ok(block),
    }
}

fn merge_usage(total: &mut Usage, delta: Usage) {
    if delta.input_tokens > 0 {
        total.input_tokens = delta.input_tokens;
    }
    if delta.output_tokens > 0 {
        total.output_tokens = delta.output_tokens;
    }
    if delta.cache_creation_input_tokens.is_some() {
        total.cache_creation_input_tokens = delta.cache_creation_input_tokens;
    }
    if delta.cache_read_input_tokens.is_some() {
        total.cache_read_input_tokens = delta.cache_read_input_tokens;
    }
    total.extra.extend(delta.extra);
}
