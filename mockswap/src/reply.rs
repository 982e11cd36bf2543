//! Scripted replies: what a model request is answered with instead of the echo.
//!
//! A [`ReplyRule`] pairs a [`Reply`] (or a closure that sees the recorded request) with a
//! [`RequestMatch`] and a number of uses. Rules are tried in the order they were added;
//! the first that matches and still has uses answers. Without a matching rule the mock
//! echoes. A reply is text, tool calls (with optional text), an error envelope, an exact
//! JSON body, raw SSE frames, or a sequence of replies (first call a tool call, then
//! text), so an agent loop can be scripted end to end.

use std::sync::{Arc, Mutex, PoisonError};

use http::StatusCode;
use serde_json::Value;

use crate::journal::RecordedRequest;
use crate::matcher::{RequestMatch, match_methods};

/// One tool call of a [`Reply`]: a function name and its JSON arguments.
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub struct ToolCall {
    pub(crate) id: Option<String>,
    pub(crate) name: String,
    pub(crate) arguments: Value,
}

impl ToolCall {
    /// A call of `name` with `arguments` (usually an object). A JSON string is sent as
    /// that exact argument text, so malformed arguments can be scripted too.
    pub fn new(name: impl Into<String>, arguments: Value) -> Self {
        Self {
            id: None,
            name: name.into(),
            arguments,
        }
    }

    /// The call id. Default: `call_mockswap_<seq>_<index>` (chat completions) or
    /// `toolu_mockswap_<seq>_<index>` (Anthropic messages).
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// The function name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The arguments as sent in `function.arguments` (compact JSON, or the string as
    /// given).
    pub fn arguments_text(&self) -> String {
        match &self.arguments {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        }
    }

    /// The arguments as an Anthropic `input` object (a string is parsed; anything that
    /// is not an object becomes `{}`).
    pub fn input(&self) -> Value {
        let value = match &self.arguments {
            Value::String(text) => serde_json::from_str(text).unwrap_or(Value::Null),
            other => other.clone(),
        };
        if value.is_object() {
            value
        } else {
            Value::Object(serde_json::Map::new())
        }
    }
}

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
    ToolCalls {
        content: String,
        calls: Vec<ToolCall>,
    },
    Json(Value),
    Frames(Vec<String>),
    Error {
        message: String,
        kind: Option<String>,
        code: Option<String>,
    },
    Sequence(Vec<Reply>),
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

    /// An assistant turn that calls one tool: `finish_reason: "tool_calls"` with
    /// `message.tool_calls` (chat completions) or a `tool_use` block (Anthropic
    /// messages). Streamed, the arguments arrive split across several deltas.
    pub fn tool_call(name: impl Into<String>, arguments: Value) -> Self {
        Self::tool_calls([ToolCall::new(name, arguments)])
    }

    /// An assistant turn that calls these tools, in order (parallel tool calls).
    pub fn tool_calls(calls: impl IntoIterator<Item = ToolCall>) -> Self {
        Self::of(ReplyKind::ToolCalls {
            content: String::new(),
            calls: calls.into_iter().collect(),
        })
    }

    /// Text sent along with the tool calls of a [`Reply::tool_calls`] reply (ignored by
    /// other kinds).
    pub fn with_content(mut self, text: impl Into<String>) -> Self {
        if let ReplyKind::ToolCalls { content, .. } = &mut self.kind {
            *content = text.into();
        }
        self
    }

    /// An error envelope with this status: `{"error": {"message", "type", "code"}}`
    /// (Anthropic's `{"type": "error", "error": {"type", "message"}}` on
    /// `/v1/messages`). `type` defaults from the status as the server's does
    /// (`authentication_error` for 401 and 403, `rate_limit_error` for 429,
    /// `invalid_request_error` for other 4xx, `server_error` for 5xx), `code` to
    /// `scripted_error`.
    pub fn error(status: StatusCode, message: impl Into<String>) -> Self {
        let mut reply = Self::of(ReplyKind::Error {
            message: message.into(),
            kind: None,
            code: None,
        });
        reply.status = status;
        reply
    }

    /// The envelope's `code` of a [`Reply::error`] (ignored by other kinds).
    pub fn error_code(mut self, value: impl Into<String>) -> Self {
        if let ReplyKind::Error { code, .. } = &mut self.kind {
            *code = Some(value.into());
        }
        self
    }

    /// The envelope's `type` of a [`Reply::error`] (ignored by other kinds).
    pub fn error_type(mut self, value: impl Into<String>) -> Self {
        if let ReplyKind::Error { kind, .. } = &mut self.kind {
            *kind = Some(value.into());
        }
        self
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

    /// The replies in turn: a rule with a sequence answers its first matching request
    /// with the first reply, the second with the second, and so on; after the last it
    /// steps aside (unless [`ReplyRule::times`] allows more uses: then the last reply
    /// repeats). An empty sequence is the echo.
    pub fn sequence(replies: impl IntoIterator<Item = Reply>) -> Self {
        Self::of(ReplyKind::Sequence(replies.into_iter().collect()))
    }

    fn of(kind: ReplyKind) -> Self {
        Self {
            status: StatusCode::OK,
            headers: Vec::new(),
            kind,
        }
    }

    /// The status. Default: 200 (for [`Reply::error`], the status given).
    pub fn status(mut self, status: StatusCode) -> Self {
        self.status = status;
        self
    }

    /// Adds a response header.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// How many uses a rule holding this reply gets by default.
    fn default_uses(&self) -> Option<u64> {
        match &self.kind {
            ReplyKind::Sequence(items) if !items.is_empty() => {
                Some(u64::try_from(items.len()).unwrap_or(u64::MAX))
            }
            _ => None,
        }
    }

    /// The reply for the `index`-th use (0-based): a sequence gives its element (the
    /// last one once past the end), anything else itself.
    pub(crate) fn resolve(self, index: u64) -> Reply {
        match self.kind {
            ReplyKind::Sequence(mut items) => {
                if items.is_empty() {
                    return Reply::echo();
                }
                let last = items.len() - 1;
                let at = usize::try_from(index).map_or(last, |i| i.min(last));
                items.swap_remove(at).resolve(0)
            }
            _ => self,
        }
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
    pub(crate) used: u64,
}

impl std::fmt::Debug for ReplyRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplyRule")
            .field("matcher", &self.matcher)
            .field("remaining", &self.remaining)
            .finish_non_exhaustive()
    }
}

match_methods!(ReplyRule);

impl ReplyRule {
    /// Answers every matching request with `reply` (a [`Reply::sequence`] answers as
    /// many requests as it has replies).
    pub fn new(reply: Reply) -> Self {
        let remaining = reply.default_uses();
        let mut rule = Self::from_fn(move |_| reply.clone());
        rule.remaining = remaining;
        rule
    }

    /// Answers every matching request with what `responder` returns for it (a returned
    /// sequence gives the element for this rule's use count).
    pub fn from_fn(responder: impl Fn(&RecordedRequest) -> Reply + Send + Sync + 'static) -> Self {
        Self {
            responder: Arc::new(responder),
            matcher: RequestMatch::default(),
            remaining: None,
            used: 0,
        }
    }

    /// Answers only the next `n` matching requests, then steps aside (so rules added
    /// in sequence script "first this, then that"). Default: unlimited (a sequence:
    /// its length).
    pub fn times(mut self, n: u64) -> Self {
        self.remaining = Some(n);
        self
    }
}

/// The installed rules, each with an id that stays valid while it is installed.
#[derive(Debug, Default)]
pub(crate) struct Replies {
    rules: Mutex<Installed>,
}

#[derive(Debug, Default)]
struct Installed {
    next_id: u64,
    rules: Vec<(u64, ReplyRule)>,
}

impl Replies {
    fn lock(&self) -> std::sync::MutexGuard<'_, Installed> {
        self.rules.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn add(&self, rule: ReplyRule) {
        let mut installed = self.lock();
        installed.next_id += 1;
        let id = installed.next_id;
        installed.rules.push((id, rule));
    }

    pub(crate) fn clear(&self) {
        self.lock().rules.clear();
    }

    /// The reply for `request`, spending one use of the rule that answers it.
    pub(crate) fn reply_for(&self, request: &RecordedRequest) -> Reply {
        // Matching runs outside the lock: a closure condition is user code and may be
        // slow or touch the mock. Matchers are cheap to clone (closures are shared).
        let candidates: Vec<(u64, RequestMatch)> = self
            .lock()
            .rules
            .iter()
            .filter(|(_, r)| r.remaining != Some(0))
            .map(|(id, r)| (*id, r.matcher.clone()))
            .collect();
        let matching: Vec<u64> = candidates
            .into_iter()
            .filter(|(_, m)| m.matches(request))
            .map(|(id, _)| id)
            .collect();
        let chosen = {
            let mut installed = self.lock();
            // A rule may have been spent or removed by a concurrent request since; take
            // the first matching one that is still there with a use left.
            let found = matching.iter().find_map(|id| {
                let (_, rule) = installed.rules.iter_mut().find(|(i, _)| i == id)?;
                if rule.remaining == Some(0) {
                    return None;
                }
                if let Some(n) = rule.remaining.as_mut() {
                    *n -= 1;
                }
                let index = rule.used;
                rule.used += 1;
                Some((Arc::clone(&rule.responder), index))
            });
            installed.rules.retain(|(_, r)| r.remaining != Some(0));
            found
        };
        chosen.map_or_else(Reply::echo, |(f, index)| f(request).resolve(index))
    }
}
