//! Providers written outside `llama-swap-client`, against its public API only, to
//! prove a downstream crate can fake and decorate [`ChatProvider`]:
//!
//! | type | what it is |
//! |---|---|
//! | [`FakeProvider`] | an in-process provider that plays scripted replies (semantic events or any `futures::Stream` of stream events) and records every call with its priority |
//! | [`LoggingProvider`] | a decorator that logs each call (operation, model, priority, outcome, stream events) |
//! | [`FallbackProvider`] | a decorator that sends a call to a second provider when the first fails with a retryable error |

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::BoxStream;
use llama_swap_client::{
    CallOptions, ChatEvent, ChatProvider, ChatRequest, ChatResponse, ChatStream, EmbeddingInput,
    EmbeddingsRequest, EmbeddingsResponse, Error, ModelList, Priority, StreamEvent,
};

/// Locks `mutex`, reading through a poisoned lock (a panicking test thread must
/// not hide what the fake recorded).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One scripted answer of a [`FakeProvider`].
pub enum FakeReply {
    /// Semantic events: a streaming call receives them as a stream, a plain call
    /// gets the response they assemble into.
    Events(Vec<Result<ChatEvent, Error>>),
    /// Any stream of stream events (raw chunks, proxy frames), played as it
    /// produces them.
    Stream(BoxStream<'static, Result<StreamEvent, Error>>),
    /// The call fails before anything streams.
    Fail(Error),
}

impl std::fmt::Debug for FakeReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FakeReply::Events(events) => f.debug_tuple("Events").field(&events.len()).finish(),
            FakeReply::Stream(_) => f.write_str("Stream(..)"),
            FakeReply::Fail(err) => f.debug_tuple("Fail").field(err).finish(),
        }
    }
}

/// A call a [`FakeProvider`] received.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedCall {
    /// `chat`, `chat_stream`, `embeddings` or `models`.
    pub operation: &'static str,
    /// The chat request (`None` for embeddings and models).
    pub request: Option<ChatRequest>,
    /// The model the call named (empty for models).
    pub model: String,
    /// The priority set on the call's options.
    pub priority: Option<Priority>,
}

/// An in-process provider that plays scripted replies in order.
#[derive(Debug, Default, Clone)]
pub struct FakeProvider {
    replies: Arc<Mutex<VecDeque<FakeReply>>>,
    calls: Arc<Mutex<Vec<RecordedCall>>>,
    models: Vec<String>,
}

impl FakeProvider {
    /// A fake that serves these models and has no replies yet.
    pub fn new(models: impl IntoIterator<Item = impl Into<String>>) -> FakeProvider {
        FakeProvider {
            models: models.into_iter().map(Into::into).collect(),
            ..FakeProvider::default()
        }
    }

    /// Queues the next chat reply.
    pub fn push(&self, reply: FakeReply) -> &FakeProvider {
        lock(&self.replies).push_back(reply);
        self
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<RecordedCall> {
        lock(&self.calls).clone()
    }

    fn record(
        &self,
        operation: &'static str,
        request: Option<&ChatRequest>,
        model: &str,
        options: &CallOptions,
    ) {
        lock(&self.calls).push(RecordedCall {
            operation,
            request: request.cloned(),
            model: model.to_owned(),
            priority: options.priority_override(),
        });
    }

    fn next_reply(&self, operation: &'static str) -> Result<FakeReply, Error> {
        lock(&self.replies)
            .pop_front()
            .ok_or(Error::Unsupported { operation })
    }

    fn stream_of(reply: FakeReply) -> Result<ChatStream, Error> {
        match reply {
            FakeReply::Events(events) => Ok(ChatStream::from_events(futures::stream::iter(events))),
            FakeReply::Stream(stream) => Ok(ChatStream::from_stream(stream)),
            FakeReply::Fail(err) => Err(err),
        }
    }
}

#[async_trait]
impl ChatProvider for FakeProvider {
    async fn chat(
        &self,
        request: &ChatRequest,
        options: &CallOptions,
    ) -> Result<ChatResponse, Error> {
        self.record("chat", Some(request), &request.model, options);
        let reply = self.next_reply("chat without a scripted reply")?;
        FakeProvider::stream_of(reply)?.collect().await
    }

    async fn chat_stream(
        &self,
        request: &ChatRequest,
        options: &CallOptions,
    ) -> Result<ChatStream, Error> {
        self.record("chat_stream", Some(request), &request.model, options);
        FakeProvider::stream_of(self.next_reply("chat_stream without a scripted reply")?)
    }

    /// One vector per input: its length in bytes and its word count.
    async fn embeddings(
        &self,
        request: &EmbeddingsRequest,
        options: &CallOptions,
    ) -> Result<EmbeddingsResponse, Error> {
        self.record("embeddings", None, &request.model, options);
        let texts: Vec<&str> = match &request.input {
            EmbeddingInput::Text(text) => vec![text.as_str()],
            EmbeddingInput::Batch(texts) => texts.iter().map(String::as_str).collect(),
        };
        let vectors = texts.iter().map(|t| {
            let words = t.split_whitespace().count();
            vec![t.len() as f32, words as f32]
        });
        Ok(EmbeddingsResponse::new(request.model.as_str(), vectors))
    }

    async fn models(&self, options: &CallOptions) -> Result<ModelList, Error> {
        self.record("models", None, "", options);
        Ok(ModelList::new(self.models.iter().cloned()))
    }
}

/// One line of a [`LoggingProvider`]'s log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// `chat`, `chat_stream`, `embeddings` or `models`.
    pub operation: &'static str,
    /// The model the call named (empty for models).
    pub model: String,
    /// The call's priority (the one it sets, else `Normal`).
    pub priority: Priority,
    /// `ok`, `error: <text>`, or for a stream `stream ended after N events` /
    /// `stream failed after N events: <text>`.
    pub outcome: String,
}

/// A decorator that logs every call of the provider it wraps.
#[derive(Debug, Clone)]
pub struct LoggingProvider<P> {
    inner: P,
    log: Arc<Mutex<Vec<LogLine>>>,
}

impl<P: ChatProvider> LoggingProvider<P> {
    /// Wraps `inner`.
    pub fn new(inner: P) -> LoggingProvider<P> {
        LoggingProvider {
            inner,
            log: Arc::default(),
        }
    }

    /// The log so far.
    pub fn log(&self) -> Vec<LogLine> {
        lock(&self.log).clone()
    }
}

fn write_line(
    log: &Mutex<Vec<LogLine>>,
    operation: &'static str,
    model: &str,
    options: &CallOptions,
    outcome: String,
) {
    lock(log).push(LogLine {
        operation,
        model: model.to_owned(),
        priority: options.priority_override().unwrap_or_default(),
        outcome,
    });
}

fn outcome<T>(result: &Result<T, Error>) -> String {
    match result {
        Ok(_) => "ok".to_owned(),
        Err(err) => format!("error: {err}"),
    }
}

#[async_trait]
impl<P: ChatProvider> ChatProvider for LoggingProvider<P> {
    async fn chat(
        &self,
        request: &ChatRequest,
        options: &CallOptions,
    ) -> Result<ChatResponse, Error> {
        let result = self.inner.chat(request, options).await;
        write_line(&self.log, "chat", &request.model, options, outcome(&result));
        result
    }

    async fn chat_stream(
        &self,
        request: &ChatRequest,
        options: &CallOptions,
    ) -> Result<ChatStream, Error> {
        let stream = match self.inner.chat_stream(request, options).await {
            Ok(stream) => stream,
            Err(err) => {
                write_line(
                    &self.log,
                    "chat_stream",
                    &request.model,
                    options,
                    format!("error: {err}"),
                );
                return Err(err);
            }
        };
        // The line is written when the stream ends, so it can say how it ended.
        let log = Arc::clone(&self.log);
        let model = request.model.clone();
        let options = options.clone();
        let mut seen = 0usize;
        let mut written = false;
        let logged = stream
            .map(Some)
            .chain(futures::stream::once(async { None }))
            .filter_map(move |item| {
                let out = match item {
                    Some(Ok(event)) => {
                        seen += 1;
                        Some(Ok(event))
                    }
                    Some(Err(err)) => {
                        if !written {
                            written = true;
                            let line = format!("stream failed after {seen} events: {err}");
                            write_line(&log, "chat_stream", &model, &options, line);
                        }
                        Some(Err(err))
                    }
                    None => {
                        if !written {
                            written = true;
                            let line = format!("stream ended after {seen} events");
                            write_line(&log, "chat_stream", &model, &options, line);
                        }
                        None
                    }
                };
                futures::future::ready(out)
            });
        Ok(ChatStream::from_stream(logged))
    }

    async fn embeddings(
        &self,
        request: &EmbeddingsRequest,
        options: &CallOptions,
    ) -> Result<EmbeddingsResponse, Error> {
        let result = self.inner.embeddings(request, options).await;
        write_line(
            &self.log,
            "embeddings",
            &request.model,
            options,
            outcome(&result),
        );
        result
    }

    async fn models(&self, options: &CallOptions) -> Result<ModelList, Error> {
        let result = self.inner.models(options).await;
        write_line(&self.log, "models", "", options, outcome(&result));
        result
    }
}

/// A decorator that sends a call to `secondary` when `primary` fails with an error
/// for which [`Error::is_retryable`] holds (the proxy is down, overloaded or
/// timing out). A stream falls back only before it starts; once events flow, an
/// error is the caller's to handle (re-sending would run the generation twice).
#[derive(Debug, Clone)]
pub struct FallbackProvider<A, B> {
    primary: A,
    secondary: B,
}

impl<A: ChatProvider, B: ChatProvider> FallbackProvider<A, B> {
    /// Tries `primary` first, then `secondary`.
    pub fn new(primary: A, secondary: B) -> FallbackProvider<A, B> {
        FallbackProvider { primary, secondary }
    }
}

#[async_trait]
impl<A: ChatProvider, B: ChatProvider> ChatProvider for FallbackProvider<A, B> {
    async fn chat(
        &self,
        request: &ChatRequest,
        options: &CallOptions,
    ) -> Result<ChatResponse, Error> {
        match self.primary.chat(request, options).await {
            Err(err) if err.is_retryable() => self.secondary.chat(request, options).await,
            other => other,
        }
    }

    async fn chat_stream(
        &self,
        request: &ChatRequest,
        options: &CallOptions,
    ) -> Result<ChatStream, Error> {
        match self.primary.chat_stream(request, options).await {
            Err(err) if err.is_retryable() => self.secondary.chat_stream(request, options).await,
            other => other,
        }
    }

    async fn embeddings(
        &self,
        request: &EmbeddingsRequest,
        options: &CallOptions,
    ) -> Result<EmbeddingsResponse, Error> {
        match self.primary.embeddings(request, options).await {
            Err(err) if err.is_retryable() => self.secondary.embeddings(request, options).await,
            other => other,
        }
    }

    async fn models(&self, options: &CallOptions) -> Result<ModelList, Error> {
        match self.primary.models(options).await {
            Err(err) if err.is_retryable() => self.secondary.models(options).await,
            other => other,
        }
    }
}
