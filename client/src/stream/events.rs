//! Semantic events: what a runtime shows and acts on, assembled from raw chunks.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::{Stream, StreamExt};
use http::HeaderMap;
use serde_json::Value;

use super::assemble::Aggregate;
use super::proxy::ProxyEvent;
use super::{ChatStream, StreamEvent};
use crate::error::{DecodeTarget, Error};
use crate::types::{
    ChatChunk, ChatDelta, ChatResponse, FinishReason, FunctionCallDelta, Role, ToolCall,
    ToolCallDelta, Usage,
};

/// One semantic event of a chat stream.
///
/// `choice` is the choice index (0 unless the request asked for several answers);
/// `index` is the tool call's place within its choice.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ChatEvent {
    /// The first model chunk arrived (proxy events may come before it).
    Started {
        /// The completion id.
        id: String,
        /// The model that answers.
        model: String,
    },
    /// New answer text.
    TextDelta {
        /// The choice it belongs to.
        choice: u32,
        /// The new text.
        text: String,
    },
    /// New reasoning text (the model thinking, not the proxy).
    ReasoningDelta {
        /// The choice it belongs to.
        choice: u32,
        /// The new text.
        text: String,
    },
    /// A tool call began: its name has arrived.
    ToolCallStarted {
        /// The choice it belongs to.
        choice: u32,
        /// The call's place in the choice.
        index: u32,
        /// The call id (empty if the server sent none).
        id: String,
        /// The function called.
        name: String,
    },
    /// More of a tool call's JSON arguments.
    ToolCallArgumentsDelta {
        /// The choice it belongs to.
        choice: u32,
        /// The call's place in the choice.
        index: u32,
        /// The new argument text.
        delta: String,
    },
    /// A tool call is complete (its choice finished, or the stream ended).
    ToolCallFinished {
        /// The choice it belongs to.
        choice: u32,
        /// The call's place in the choice.
        index: u32,
        /// The whole call, arguments as received.
        call: ToolCall,
        /// The arguments parsed as JSON (empty arguments read as `{}`); `None` when
        /// they are not valid JSON (call
        /// [`FunctionCall::parse_arguments`](crate::FunctionCall::parse_arguments)
        /// for the error).
        arguments: Option<Value>,
    },
    /// Token accounting.
    Usage(Usage),
    /// The proxy's progress report.
    Proxy(ProxyEvent),
    /// The stream ended completely; the last event.
    Done {
        /// Why the first choice stopped.
        finish_reason: Option<FinishReason>,
    },
}

impl ChatEvent {
    /// A text delta for choice 0.
    pub fn text(text: impl Into<String>) -> ChatEvent {
        ChatEvent::TextDelta {
            choice: 0,
            text: text.into(),
        }
    }

    /// A reasoning delta for choice 0.
    pub fn reasoning(text: impl Into<String>) -> ChatEvent {
        ChatEvent::ReasoningDelta {
            choice: 0,
            text: text.into(),
        }
    }

    /// A whole tool call of choice 0 at `index`, with `arguments` as its JSON.
    pub fn tool_call(
        index: u32,
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: Value,
    ) -> ChatEvent {
        ChatEvent::ToolCallFinished {
            choice: 0,
            index,
            call: ToolCall::function(id, name, arguments.to_string()),
            arguments: Some(arguments),
        }
    }

    /// The end of the stream.
    pub fn done(finish_reason: FinishReason) -> ChatEvent {
        ChatEvent::Done {
            finish_reason: Some(finish_reason),
        }
    }
}

#[derive(Debug, Default, Clone)]
struct CallProgress {
    announced: bool,
    /// Argument text that arrived before the name.
    pending: String,
    finished: bool,
}

/// Turns stream events into [`ChatEvent`]s while assembling the whole response.
///
/// [`ChatStream::events`] uses it; a runtime that reads chunks itself (to log them,
/// say) feeds it the same way and still gets live text and whole tool calls.
///
/// A tool call is announced when its name first arrives, its argument pieces follow
/// as they come, and it is finished when its choice reports a finish reason (or at
/// [`EventAssembler::finish`]), since servers may interleave calls.
///
/// ```
/// use llama_swap_client::{ChatChunk, ChatDelta, ChatEvent, EventAssembler, FinishReason, ToolCallDelta};
///
/// let mut assembler = EventAssembler::new();
/// let mut events = Vec::new();
/// events.extend(assembler.push_chunk(ChatChunk::delta("m", ChatDelta::tool_call(ToolCallDelta::start(0, "c1", "now")))));
/// events.extend(assembler.push_chunk(ChatChunk::delta("m", ChatDelta::tool_call(ToolCallDelta::arguments(0, "{}")))));
/// events.extend(assembler.push_chunk(ChatChunk::finish("m", FinishReason::ToolCalls)));
/// events.extend(assembler.finish());
/// assert!(matches!(&events[3], ChatEvent::ToolCallFinished { call, .. } if call.function.name == "now"));
/// assert_eq!(assembler.response().tool_calls().len(), 1);
/// ```
#[derive(Debug, Default, Clone)]
pub struct EventAssembler {
    aggregate: Aggregate,
    started: bool,
    calls: BTreeMap<(u32, u32), CallProgress>,
    finished: bool,
}

impl EventAssembler {
    /// An assembler that has seen nothing.
    pub fn new() -> EventAssembler {
        EventAssembler::default()
    }

    /// The events one stream item stands for.
    pub fn push(&mut self, event: StreamEvent) -> Vec<ChatEvent> {
        match event {
            StreamEvent::Chunk(chunk) => self.push_chunk(chunk),
            StreamEvent::Proxy(proxy) => vec![ChatEvent::Proxy(proxy)],
        }
    }

    /// The events one chunk stands for.
    pub fn push_chunk(&mut self, chunk: ChatChunk) -> Vec<ChatEvent> {
        let mut out = Vec::new();
        if !self.started {
            self.started = true;
            out.push(ChatEvent::Started {
                id: chunk.id.clone(),
                model: chunk.model.clone(),
            });
        }
        let usage = chunk.usage.clone();
        let parts: Vec<ChoiceParts> = chunk.choices.iter().map(ChoiceParts::of).collect();
        self.aggregate.add(chunk);
        for part in parts {
            let choice = part.choice;
            if let Some(text) = part.reasoning {
                out.push(ChatEvent::ReasoningDelta { choice, text });
            }
            if let Some(text) = part.text {
                out.push(ChatEvent::TextDelta { choice, text });
            }
            for (index, arguments) in part.tool_pieces {
                self.tool_piece(choice, index, arguments, &mut out);
            }
            if part.finished {
                self.finish_calls(Some(choice), &mut out);
            }
        }
        if let Some(usage) = usage {
            out.push(ChatEvent::Usage(usage));
        }
        out
    }

    /// The events of the end of the stream: every unfinished tool call, then
    /// [`ChatEvent::Done`]. Later calls return nothing.
    pub fn finish(&mut self) -> Vec<ChatEvent> {
        if self.finished {
            return Vec::new();
        }
        self.finished = true;
        let mut out = Vec::new();
        self.finish_calls(None, &mut out);
        out.push(ChatEvent::Done {
            finish_reason: self.aggregate.first_finish_reason(),
        });
        out
    }

    /// The response assembled so far.
    pub fn response(&self) -> ChatResponse {
        self.aggregate.response()
    }

    fn tool_piece(
        &mut self,
        choice: u32,
        index: u32,
        arguments: Option<String>,
        out: &mut Vec<ChatEvent>,
    ) {
        let call = self.aggregate.tool_call(choice, index).unwrap_or_default();
        let progress = self.calls.entry((choice, index)).or_default();
        if progress.finished {
            return;
        }
        if let Some(text) = arguments {
            progress.pending.push_str(&text);
        }
        if !progress.announced && !call.function.name.is_empty() {
            progress.announced = true;
            out.push(ChatEvent::ToolCallStarted {
                choice,
                index,
                id: call.id,
                name: call.function.name,
            });
        }
        if progress.announced && !progress.pending.is_empty() {
            out.push(ChatEvent::ToolCallArgumentsDelta {
                choice,
                index,
                delta: std::mem::take(&mut progress.pending),
            });
        }
    }

    fn finish_calls(&mut self, only: Option<u32>, out: &mut Vec<ChatEvent>) {
        for (&(choice, index), progress) in &mut self.calls {
            if progress.finished || only.is_some_and(|c| c != choice) {
                continue;
            }
            progress.finished = true;
            let call = self.aggregate.tool_call(choice, index).unwrap_or_default();
            if !progress.announced {
                progress.announced = true;
                out.push(ChatEvent::ToolCallStarted {
                    choice,
                    index,
                    id: call.id.clone(),
                    name: call.function.name.clone(),
                });
            }
            if !progress.pending.is_empty() {
                out.push(ChatEvent::ToolCallArgumentsDelta {
                    choice,
                    index,
                    delta: std::mem::take(&mut progress.pending),
                });
            }
            let arguments = call.function.parse_arguments::<Value>().ok();
            out.push(ChatEvent::ToolCallFinished {
                choice,
                index,
                call,
                arguments,
            });
        }
    }
}

/// What one choice of a chunk brings, read before the chunk is merged.
struct ChoiceParts {
    choice: u32,
    reasoning: Option<String>,
    text: Option<String>,
    tool_pieces: Vec<(u32, Option<String>)>,
    finished: bool,
}

impl ChoiceParts {
    fn of(choice: &crate::types::ChunkChoice) -> ChoiceParts {
        let non_empty = |t: &Option<String>| t.clone().filter(|t| !t.is_empty());
        ChoiceParts {
            choice: choice.index,
            reasoning: non_empty(&choice.delta.reasoning_content),
            text: non_empty(&choice.delta.content),
            tool_pieces: choice
                .delta
                .tool_calls
                .iter()
                .map(|p| {
                    let args = p.function.as_ref().and_then(|f| non_empty(&f.arguments));
                    (p.index, args)
                })
                .collect(),
            finished: choice.finish_reason.is_some(),
        }
    }
}

/// The semantic events of a [`ChatStream`]: `Stream<Item = Result<ChatEvent, Error>>`.
///
/// Errors pass through as the stream yields them. [`ChatEvent::Done`] comes last,
/// only when the stream ended completely (not after a fatal error). The response
/// assembled from the same chunks is available at any point.
///
/// ```no_run
/// use futures_util::StreamExt;
/// use llama_swap_client::{CallOptions, ChatEvent, ChatMessage, ChatRequest, Client, Priority};
///
/// # async fn run(client: Client) -> Result<(), llama_swap_client::Error> {
/// let req = ChatRequest::new("qwen", vec![ChatMessage::user("What time is it?")]);
/// let mut events = client.chat_stream(&req, &CallOptions::with_priority(Priority::Elevated)).await?.events();
/// while let Some(event) = events.next().await {
///     match event? {
///         ChatEvent::TextDelta { text, .. } => print!("{text}"),
///         ChatEvent::ToolCallFinished { call, arguments, .. } => println!("call {} with {arguments:?}", call.function.name),
///         ChatEvent::Proxy(proxy) => eprintln!("proxy: {:?}", proxy.status),
///         _ => {}
///     }
/// }
/// let whole = events.response();
/// # let _ = whole;
/// # Ok(())
/// # }
/// ```
#[must_use = "a stream does nothing unless polled; dropping it cancels the request"]
#[derive(Debug)]
pub struct ChatEvents {
    inner: ChatStream,
    assembler: EventAssembler,
    queue: VecDeque<ChatEvent>,
    ended: bool,
    failed: bool,
}

impl ChatEvents {
    pub(super) fn new(inner: ChatStream) -> ChatEvents {
        ChatEvents {
            inner,
            assembler: EventAssembler::new(),
            queue: VecDeque::new(),
            ended: false,
            failed: false,
        }
    }

    /// The response assembled from the chunks read so far.
    pub fn response(&self) -> ChatResponse {
        self.assembler.response()
    }

    /// The response headers of the underlying stream.
    pub fn headers(&self) -> &HeaderMap {
        self.inner.headers()
    }
}

impl Stream for ChatEvents {
    type Item = Result<ChatEvent, Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(event) = this.queue.pop_front() {
                return Poll::Ready(Some(Ok(event)));
            }
            if this.ended {
                return Poll::Ready(None);
            }
            match this.inner.poll_next_unpin(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(item))) => this.queue.extend(this.assembler.push(item)),
                Poll::Ready(Some(Err(err))) => {
                    // A frame that did not decode is skipped; anything else ends
                    // the answer, so no Done follows.
                    let recoverable = matches!(
                        err,
                        Error::Decode {
                            what: DecodeTarget::StreamFrame,
                            ..
                        }
                    );
                    this.failed |= !recoverable;
                    return Poll::Ready(Some(Err(err)));
                }
                Poll::Ready(None) => {
                    this.ended = true;
                    if !this.failed {
                        this.queue.extend(this.assembler.finish());
                    }
                }
            }
        }
    }
}

/// State for turning semantic events back into stream events.
#[derive(Default)]
struct Unassemble {
    id: String,
    model: String,
    announced: BTreeSet<(u32, u32)>,
    /// Usage is held back until the finish reason, which is where servers send it
    /// and where an assembler expects it.
    usage: Option<Usage>,
    done: bool,
}

impl Unassemble {
    fn chunk(&self, choice: u32, delta: ChatDelta) -> StreamEvent {
        let mut chunk = ChatChunk::delta(self.model.as_str(), delta).with_id(self.id.as_str());
        chunk.choices[0].index = choice;
        StreamEvent::Chunk(chunk)
    }

    fn convert(&mut self, event: ChatEvent) -> Vec<StreamEvent> {
        match event {
            ChatEvent::Started { id, model } => {
                self.id = id;
                self.model = model;
                vec![self.chunk(0, ChatDelta::default().with_role(Role::Assistant))]
            }
            ChatEvent::TextDelta { choice, text } => {
                vec![self.chunk(choice, ChatDelta::text(text))]
            }
            ChatEvent::ReasoningDelta { choice, text } => {
                vec![self.chunk(choice, ChatDelta::reasoning(text))]
            }
            ChatEvent::ToolCallStarted {
                choice,
                index,
                id,
                name,
            } => {
                self.announced.insert((choice, index));
                let piece = ToolCallDelta::start(index, id, name);
                vec![self.chunk(choice, ChatDelta::tool_call(piece))]
            }
            ChatEvent::ToolCallArgumentsDelta {
                choice,
                index,
                delta,
            } => vec![self.chunk(
                choice,
                ChatDelta::tool_call(ToolCallDelta::arguments(index, delta)),
            )],
            ChatEvent::ToolCallFinished {
                choice,
                index,
                call,
                ..
            } => {
                if self.announced.contains(&(choice, index)) {
                    return Vec::new();
                }
                let piece = ToolCallDelta {
                    index,
                    id: Some(call.id),
                    kind: Some(call.kind),
                    function: Some(FunctionCallDelta {
                        name: Some(call.function.name),
                        arguments: Some(call.function.arguments),
                    }),
                };
                vec![self.chunk(choice, ChatDelta::tool_call(piece))]
            }
            ChatEvent::Usage(usage) => {
                self.usage = Some(usage);
                Vec::new()
            }
            ChatEvent::Proxy(proxy) => vec![StreamEvent::Proxy(proxy)],
            ChatEvent::Done { finish_reason } => {
                self.done = true;
                let finish = finish_reason.map(|reason| {
                    StreamEvent::Chunk(
                        ChatChunk::finish(self.model.as_str(), reason).with_id(self.id.as_str()),
                    )
                });
                finish.into_iter().chain(self.flush()).collect()
            }
        }
    }

    /// The held-back usage, if any.
    fn flush(&mut self) -> Option<StreamEvent> {
        let usage = self.usage.take()?;
        Some(StreamEvent::Chunk(
            ChatChunk::usage_only(self.model.as_str(), usage).with_id(self.id.as_str()),
        ))
    }
}

/// The stream events that carry `events`; ends after [`ChatEvent::Done`].
pub(super) fn to_stream_events<S>(
    events: S,
) -> impl Stream<Item = Result<StreamEvent, Error>> + Send
where
    S: Stream<Item = Result<ChatEvent, Error>> + Send + 'static,
{
    let state = (Box::pin(events), Unassemble::default(), VecDeque::new());
    futures_util::stream::unfold(state, |(mut events, mut state, mut queue)| async move {
        loop {
            if let Some(item) = queue.pop_front() {
                return Some((item, (events, state, queue)));
            }
            if state.done {
                return None;
            }
            match events.next().await {
                Some(Ok(event)) => queue.extend(state.convert(event).into_iter().map(Ok)),
                Some(Err(err)) => queue.push_back(Err(err)),
                None => {
                    state.done = true;
                    queue.extend(state.flush().map(Ok));
                }
            }
        }
    })
}
