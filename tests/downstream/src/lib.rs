//! An agent's model layer, written as a user of `llama-swap-client` writes it:
//!
//! - [`Agent`] runs a tool loop over an `Arc<dyn ChatProvider>`, every call of one
//!   run at the priority the run was given (Elevated while a person waits, Low for
//!   background work);
//! - [`Recorded`] is a decorator generic over `P: ChatProvider` that notes each
//!   call's priority, wrapping the shared `Arc<dyn ChatProvider>` as it is;
//! - [`Deadline`] is a decorator that gives up on a provider that takes too long;
//! - [`Scripted`] is an in-process fake that answers from a script, after an
//!   optional (tokio-time) delay.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures_util::stream;
use llama_swap_client::{
    CallOptions, ChatEvent, ChatMessage, ChatProvider, ChatRequest, ChatResponse, ChatStream,
    Error, FinishReason, Priority, Tool, async_trait,
};
use serde::Deserialize;
use serde_json::{Value, json};

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The one tool the agent offers: the time in a timezone.
pub fn clock_tool() -> Tool {
    Tool::function(
        "current_time",
        "The current time in a timezone",
        json!({
            "type": "object",
            "properties": {"timezone": {"type": "string"}},
            "required": ["timezone"]
        }),
    )
}

#[derive(Deserialize)]
struct ClockArgs {
    timezone: String,
}

/// What one run of the agent produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The model's final text.
    pub text: String,
    /// How many model calls the run made.
    pub model_calls: usize,
    /// The tools it ran, in order, with their arguments' timezone.
    pub tools_run: Vec<String>,
}

/// A tool loop over any provider.
pub struct Agent {
    provider: Arc<dyn ChatProvider>,
    model: String,
    max_calls: usize,
}

impl Agent {
    /// An agent asking `model` through `provider`, at most eight calls a run.
    pub fn new(provider: Arc<dyn ChatProvider>, model: impl Into<String>) -> Agent {
        Agent {
            provider,
            model: model.into(),
            max_calls: 8,
        }
    }

    /// Answers `question`: asks the model with the clock tool, runs each tool call
    /// it makes and asks again, until it answers in text. Every call of the run
    /// carries `priority`.
    ///
    /// # Errors
    ///
    /// The provider's errors; a tool call with arguments that do not parse
    /// (`Error::Decode`); `Error::Other` when the model still calls tools after
    /// the last allowed call.
    pub async fn answer(&self, question: &str, priority: Priority) -> Result<Answer, Error> {
        let options = CallOptions::with_priority(priority);
        let mut history = vec![ChatMessage::user(question)];
        let mut tools_run = Vec::new();
        for call in 1..=self.max_calls {
            let request = ChatRequest::new(self.model.as_str(), history.clone()).tool(clock_tool());
            let response = self.provider.chat(&request, &options).await?;
            if response.tool_calls().is_empty() {
                return Ok(Answer {
                    text: response.text(),
                    model_calls: call,
                    tools_run,
                });
            }
            history.push(ChatMessage::assistant_tool_calls(
                response.tool_calls().iter().cloned(),
            ));
            for tool_call in response.tool_calls() {
                let args: ClockArgs = tool_call.function.parse_arguments()?;
                tools_run.push(format!("{}({})", tool_call.function.name, args.timezone));
                history.push(ChatMessage::tool_json(
                    &tool_call.id,
                    &json!({"timezone": args.timezone, "time": "12:00"}),
                )?);
            }
        }
        Err(Error::other(format!(
            "the model still called tools after {} calls",
            self.max_calls
        )))
    }
}

/// A decorator that notes the priority of every call it passes on.
pub struct Recorded<P> {
    inner: P,
    seen: Mutex<Vec<(&'static str, Priority)>>,
}

impl<P: ChatProvider> Recorded<P> {
    /// Wraps `inner`.
    pub fn new(inner: P) -> Recorded<P> {
        Recorded {
            inner,
            seen: Mutex::new(Vec::new()),
        }
    }

    /// Each call's operation and priority (`Normal` when the call set none).
    pub fn seen(&self) -> Vec<(&'static str, Priority)> {
        lock(&self.seen).clone()
    }

    fn note(&self, operation: &'static str, options: &CallOptions) {
        lock(&self.seen).push((operation, options.priority_override().unwrap_or_default()));
    }
}

#[async_trait]
impl<P: ChatProvider> ChatProvider for Recorded<P> {
    async fn chat(
        &self,
        request: &ChatRequest,
        options: &CallOptions,
    ) -> Result<ChatResponse, Error> {
        self.note("chat", options);
        self.inner.chat(request, options).await
    }

    async fn chat_stream(
        &self,
        request: &ChatRequest,
        options: &CallOptions,
    ) -> Result<ChatStream, Error> {
        self.note("chat_stream", options);
        self.inner.chat_stream(request, options).await
    }
}

/// A decorator that fails a call the provider has not answered within `limit`.
pub struct Deadline<P> {
    inner: P,
    limit: Duration,
}

impl<P: ChatProvider> Deadline<P> {
    /// Wraps `inner`.
    pub fn new(inner: P, limit: Duration) -> Deadline<P> {
        Deadline { inner, limit }
    }
}

#[async_trait]
impl<P: ChatProvider> ChatProvider for Deadline<P> {
    async fn chat(
        &self,
        request: &ChatRequest,
        options: &CallOptions,
    ) -> Result<ChatResponse, Error> {
        match tokio::time::timeout(self.limit, self.inner.chat(request, options)).await {
            Ok(result) => result,
            Err(elapsed) => Err(Error::with_source(
                format!("{} gave no answer within {:?}", request.model, self.limit),
                elapsed,
            )),
        }
    }

    async fn chat_stream(
        &self,
        request: &ChatRequest,
        options: &CallOptions,
    ) -> Result<ChatStream, Error> {
        match tokio::time::timeout(self.limit, self.inner.chat_stream(request, options)).await {
            Ok(result) => result,
            Err(elapsed) => Err(Error::with_source(
                format!(
                    "{} did not start streaming within {:?}",
                    request.model, self.limit
                ),
                elapsed,
            )),
        }
    }
}

/// One scripted answer of [`Scripted`].
#[derive(Debug, Clone)]
pub enum Step {
    /// Answer with this text.
    Text(String),
    /// Call a tool with these arguments.
    ToolCall(String, Value),
}

/// An in-process fake: plays its steps in order, each after `delay` (tokio time).
pub struct Scripted {
    steps: Mutex<VecDeque<Step>>,
    delay: Duration,
    priorities: Mutex<Vec<Priority>>,
}

impl Scripted {
    /// A fake that plays `steps` at once.
    pub fn new(steps: impl IntoIterator<Item = Step>) -> Scripted {
        Scripted {
            steps: Mutex::new(steps.into_iter().collect()),
            delay: Duration::ZERO,
            priorities: Mutex::new(Vec::new()),
        }
    }

    /// Waits `delay` before each answer.
    #[must_use]
    pub fn with_delay(mut self, delay: Duration) -> Scripted {
        self.delay = delay;
        self
    }

    /// The priority of each call it received.
    pub fn priorities(&self) -> Vec<Priority> {
        lock(&self.priorities).clone()
    }

    async fn next(&self, options: &CallOptions) -> Result<ChatStream, Error> {
        lock(&self.priorities).push(options.priority_override().unwrap_or_default());
        tokio::time::sleep(self.delay).await;
        let step = lock(&self.steps)
            .pop_front()
            .ok_or_else(|| Error::other("the script has no step left"))?;
        let events = match step {
            Step::Text(text) => vec![
                Ok(ChatEvent::text(text)),
                Ok(ChatEvent::done(FinishReason::Stop)),
            ],
            Step::ToolCall(name, arguments) => vec![
                Ok(ChatEvent::tool_call(0, "call_1", name, arguments)),
                Ok(ChatEvent::done(FinishReason::ToolCalls)),
            ],
        };
        Ok(ChatStream::from_events(stream::iter(events)))
    }
}

#[async_trait]
impl ChatProvider for Scripted {
    async fn chat(&self, _: &ChatRequest, options: &CallOptions) -> Result<ChatResponse, Error> {
        self.next(options).await?.collect().await
    }

    async fn chat_stream(
        &self,
        _: &ChatRequest,
        options: &CallOptions,
    ) -> Result<ChatStream, Error> {
        self.next(options).await
    }
}
