//! Scripted replies: what a model request is answered with instead of the echo.
//!
//! A [`ReplyRule`] pairs a [`Reply`] (or a closure that sees the recorded request) with a
//! match and a schedule. Rules are tried in the order they were added; the first that
//! matches and still has uses answers. Without a matching rule the mock echoes.

use std::sync::{Arc, Mutex, PoisonError};

use http::StatusCode;
use serde_json::Value;

use crate::fault::RequestMatch;
use crate::journal::RecordedRequest;

/// What a model request is answered with.
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub struct Reply {
    pub(crate) status: StatusCode,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) kind: ReplyKind,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ReplyKind {
    Echo,
    Text(String),
    Json(Value),
    Frames(Vec<String>),
}

impl Reply {
    /// The default: content echoing the model and the last user message.
    pub fn echo() -> Self {
        Self::of(ReplyKind::Echo)
    }

    /// A response in the endpoint's own shape (chat completion, completion, message,
    /// llama.cpp completion), streamed when the request asks for it, with this content.
    pub fn text(content: impl Into<String>) -> Self {
        Self::of(ReplyKind::Text(content.into()))
    }

    /// This exact JSON body, not streamed.
    pub fn json(body: Value) -> Self {
        Self::of(ReplyKind::Json(body))
    }

    /// An SSE stream of these `data:` payloads (shaped like every stream; `[DONE]`
    /// follows when the stream shape says so).
    pub fn frames<I, S>(frames: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::of(ReplyKind::Frames(
            frames.into_iter().map(Into::into).collect(),
        ))
    }

    fn of(kind: ReplyKind) -> Self {
        Self {
            status: StatusCode::OK,
            headers: Vec::new(),
            kind,
        }
    }

    /// The status. Default: 200.
    pub fn status(mut self, status: StatusCode) -> Self {
        self.status = status;
        self
    }

    /// Adds a response header.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
}

type ReplyFn = Arc<dyn Fn(&RecordedRequest) -> Reply + Send + Sync>;

/// A reply (fixed, or computed from the recorded request), the requests it answers,
/// and how many times.
#[derive(Clone)]
#[must_use]
pub struct ReplyRule {
    pub(crate) responder: ReplyFn,
    pub(crate) matcher: RequestMatch,
    pub(crate) remaining: Option<u64>,
}

impl std::fmt::Debug for ReplyRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplyRule")
            .field("matcher", &self.matcher)
            .field("remaining", &self.remaining)
            .finish_non_exhaustive()
    }
}

impl ReplyRule {
    /// Answers every matching request with `reply`.
    pub fn new(reply: Reply) -> Self {
        Self::from_fn(move |_| reply.clone())
    }

    /// Answers every matching request with what `responder` returns for it.
    pub fn from_fn(responder: impl Fn(&RecordedRequest) -> Reply + Send + Sync + 'static) -> Self {
        Self {
            responder: Arc::new(responder),
            matcher: RequestMatch::default(),
            remaining: None,
        }
    }

    /// Only requests naming this model. Default: any model.
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.matcher.model = Some(model.into());
        self
    }

    /// Only requests to this endpoint path (after any `/upstream/<model>` prefix).
    /// Default: any path.
    pub fn path(mut self, path: impl Into<String>) -> Self {
        self.matcher.path = Some(path.into());
        self
    }

    /// Only streaming (`true`) or non-streaming (`false`) requests. Default: both.
    pub fn stream(mut self, stream: bool) -> Self {
        self.matcher.stream = Some(stream);
        self
    }

    /// Replaces the whole match.
    pub fn matching(mut self, matcher: RequestMatch) -> Self {
        self.matcher = matcher;
        self
    }

    /// Answers only the next `n` matching requests, then steps aside (so rules added
    /// in sequence script "first this, then that"). Default: unlimited.
    pub fn times(mut self, n: u64) -> Self {
        self.remaining = Some(n);
        self
    }
}

/// The installed rules.
#[derive(Debug, Default)]
pub(crate) struct Replies {
    rules: Mutex<Vec<ReplyRule>>,
}

impl Replies {
    pub(crate) fn add(&self, rule: ReplyRule) {
        self.rules
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(rule);
    }

    pub(crate) fn clear(&self) {
        self.rules
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// The reply for `request` (endpoint path `path`), spending one use of the rule.
    pub(crate) fn reply_for(&self, request: &RecordedRequest, path: &str) -> Reply {
        let responder = {
            let mut rules = self.rules.lock().unwrap_or_else(PoisonError::into_inner);
            let found = rules.iter_mut().find(|r| {
                r.remaining != Some(0)
                    && r.matcher
                        .matches(request.model.as_deref(), path, request.stream)
            });
            let responder = found.map(|rule| {
                if let Some(n) = rule.remaining.as_mut() {
                    *n -= 1;
                }
                Arc::clone(&rule.responder)
            });
            rules.retain(|r| r.remaining != Some(0));
            responder
        };
        // The closure runs outside the lock: user code may be slow or touch the mock.
        responder.map_or_else(Reply::echo, |f| f(request))
    }
}
