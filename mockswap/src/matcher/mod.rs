//! Which requests an expectation, a scripted reply or a fault applies to.
//!
//! A [`RequestMatch`] is a list of conditions that must all hold: method, path, model,
//! stream flag, `X-Priority` (a value, absent, invalid, duplicated), headers (with a
//! value, present, absent), query parameters, the JSON body (exact, or a subset), the
//! last message's role, whether tools were offered, and closures. An empty match
//! applies to every request. Each condition can say why a request failed it, which is
//! what an unmet expectation's report prints.

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use crate::journal::RecordedRequest;
use crate::priority::PriorityHeader;

/// What an `X-Priority` condition accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PriorityMatch {
    /// Exactly one well-formed header line with this value.
    Value(i32),
    /// No `X-Priority` header at all.
    Absent,
    /// One value that is not a signed 32-bit decimal.
    Invalid,
    /// More than one value (two lines, or a comma-separated list).
    Duplicated,
}

impl PriorityMatch {
    fn accepts(self, header: &PriorityHeader) -> bool {
        match (self, header) {
            (Self::Value(want), PriorityHeader::Value(got)) => want == *got,
            (Self::Absent, PriorityHeader::Absent)
            | (Self::Invalid, PriorityHeader::Invalid(_))
            | (Self::Duplicated, PriorityHeader::Duplicated(_)) => true,
            _ => false,
        }
    }
}

impl From<i32> for PriorityMatch {
    /// Exactly one well-formed `X-Priority: <value>`.
    fn from(value: i32) -> Self {
        Self::Value(value)
    }
}

/// What llama-swap-client sends for a priority: its integer, or no header for
/// `Normal`.
#[cfg(feature = "client")]
impl From<llama_swap_client::Priority> for PriorityMatch {
    fn from(priority: llama_swap_client::Priority) -> Self {
        priority.header_int().map_or(Self::Absent, Self::Value)
    }
}

impl fmt::Display for PriorityMatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Value(v) => write!(f, "X-Priority {v}"),
            Self::Absent => f.write_str("no X-Priority"),
            Self::Invalid => f.write_str("an invalid X-Priority"),
            Self::Duplicated => f.write_str("a duplicated X-Priority"),
        }
    }
}

type Predicate = Arc<dyn Fn(&RecordedRequest) -> bool + Send + Sync>;

#[derive(Clone)]
enum Condition {
    Method(String),
    Path(String),
    Model(String),
    Stream(bool),
    Priority(PriorityMatch),
    /// `None`: no `X-Queue-Timeout` header.
    QueueTimeout(Option<std::time::Duration>),
    /// `value: None` means the header must be absent.
    Header {
        name: String,
        value: Option<String>,
    },
    HeaderExists(String),
    Query {
        name: String,
        value: String,
    },
    BodyJson(Value),
    BodyContains(Value),
    BodyText(String),
    LastMessageRole(String),
    HasTools(bool),
    Custom {
        label: String,
        predicate: Predicate,
    },
}

impl fmt::Debug for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

/// Requests a rule applies to: every condition added must hold. `Default` (or
/// [`RequestMatch::any`]) matches every request.
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct RequestMatch {
    conditions: Vec<Condition>,
}

/// A JSON value in a report, cut to `limit` characters.
pub(crate) fn truncated(text: &str, limit: usize) -> String {
    if text.chars().count() <= limit {
        return text.to_owned();
    }
    let cut: String = text.chars().take(limit).collect();
    format!("{cut}... ({} bytes)", text.len())
}

/// Whether `actual` contains `expected`: objects key by key (extra keys allowed),
/// arrays as an ordered subsequence (each expected element matches a later actual
/// element than the previous one), anything else by equality.
pub(crate) fn json_contains(actual: &Value, expected: &Value) -> bool {
    match (actual, expected) {
        (Value::Object(actual), Value::Object(expected)) => expected
            .iter()
            .all(|(key, want)| actual.get(key).is_some_and(|got| json_contains(got, want))),
        (Value::Array(actual), Value::Array(expected)) => {
            let mut rest = actual.iter();
            expected
                .iter()
                .all(|want| rest.any(|got| json_contains(got, want)))
        }
        _ => actual == expected,
    }
}

/// The role of the last element of the body's `messages`.
pub(crate) fn last_message_role(request: &RecordedRequest) -> Option<&str> {
    request
        .json
        .as_ref()?
        .get("messages")?
        .as_array()?
        .last()?
        .get("role")?
        .as_str()
}

/// Whether the body offers tools (a non-empty `tools`, or legacy `functions`).
pub(crate) fn offers_tools(request: &RecordedRequest) -> bool {
    let Some(body) = request.json.as_ref() else {
        return false;
    };
    ["tools", "functions"].iter().any(|key| {
        body.get(*key)
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty())
    })
}

fn shown(value: Option<&str>) -> String {
    value.map_or_else(|| "none".to_owned(), |v| format!("{v:?}"))
}

impl Condition {
    fn describe(&self) -> String {
        match self {
            Self::Method(m) => m.clone(),
            Self::Path(p) => p.clone(),
            Self::Model(m) => format!("model {m:?}"),
            Self::Stream(true) => "streaming".to_owned(),
            Self::Stream(false) => "not streaming".to_owned(),
            Self::Priority(p) => p.to_string(),
            Self::QueueTimeout(Some(d)) => format!("X-Queue-Timeout {}s", d.as_secs_f64()),
            Self::QueueTimeout(None) => "no X-Queue-Timeout".to_owned(),
            Self::Header {
                name,
                value: Some(v),
            } => format!("header {name}: {v}"),
            Self::Header { name, value: None } => format!("no header {name}"),
            Self::HeaderExists(name) => format!("header {name} present"),
            Self::Query { name, value } => format!("query {name}={value}"),
            Self::BodyJson(v) => format!("body = {}", truncated(&v.to_string(), 120)),
            Self::BodyContains(v) => format!("body contains {}", truncated(&v.to_string(), 120)),
            Self::BodyText(t) => format!("body text contains {t:?}"),
            Self::LastMessageRole(r) => format!("last message role {r:?}"),
            Self::HasTools(true) => "tools offered".to_owned(),
            Self::HasTools(false) => "no tools offered".to_owned(),
            Self::Custom { label, .. } => label.clone(),
        }
    }

    /// `None` when the request satisfies the condition, else why not.
    fn mismatch(&self, r: &RecordedRequest) -> Option<String> {
        let fail = |why: String| Some(why);
        match self {
            Self::Method(m) => {
                (r.method.as_str() != m).then(|| format!("method: wanted {m}, got {}", r.method))
            }
            Self::Path(p) => (r.path != *p && r.endpoint_path() != p)
                .then(|| format!("path: wanted {p}, got {}", r.path)),
            Self::Model(m) => (r.model.as_deref() != Some(m.as_str()))
                .then(|| format!("model: wanted {m:?}, got {}", shown(r.model.as_deref()))),
            Self::Stream(s) => {
                (r.stream != *s).then(|| format!("stream: wanted {s}, got {}", r.stream))
            }
            Self::Priority(p) => (!p.accepts(&r.priority)).then(|| {
                let got = match &r.priority {
                    PriorityHeader::Absent => "absent".to_owned(),
                    other => other.to_string(),
                };
                format!("X-Priority: wanted {}, got {got}", priority_word(*p))
            }),
            Self::QueueTimeout(wanted) => {
                let same = match wanted {
                    Some(d) => r.queue_timeout.value() == Some(*d),
                    None => r.queue_timeout == crate::QueueTimeoutHeader::Absent,
                };
                (!same).then(|| {
                    let wanted = wanted
                        .map_or_else(|| "absent".to_owned(), |d| format!("{}s", d.as_secs_f64()));
                    format!("X-Queue-Timeout: wanted {wanted}, got {}", r.queue_timeout)
                })
            }
            Self::Header { name, value } => {
                let got = r.header_values(name);
                match value {
                    Some(v) if !got.iter().any(|g| g == v) => fail(if got.is_empty() {
                        format!("header {name}: wanted {v:?}, got none")
                    } else {
                        format!("header {name}: wanted {v:?}, got {got:?}")
                    }),
                    None if !got.is_empty() => {
                        fail(format!("header {name}: wanted none, got {got:?}"))
                    }
                    _ => None,
                }
            }
            Self::HeaderExists(name) => r
                .headers
                .get(name.as_str())
                .is_none()
                .then(|| format!("header {name}: wanted present, got none")),
            Self::Query { name, value } => {
                let got = r.query.as_deref().and_then(|q| {
                    form_urlencoded::parse(q.as_bytes())
                        .find(|(k, _)| k == name)
                        .map(|(_, v)| v.into_owned())
                });
                (got.as_deref() != Some(value.as_str())).then(|| {
                    format!(
                        "query {name}: wanted {value:?}, got {}",
                        shown(got.as_deref())
                    )
                })
            }
            Self::BodyJson(want) => (r.json.as_ref() != Some(want))
                .then(|| format!("body: wanted exactly {}", truncated(&want.to_string(), 120))),
            Self::BodyContains(want) => (!r.json.as_ref().is_some_and(|j| json_contains(j, want)))
                .then(|| {
                    if r.json.is_none() {
                        format!(
                            "body: wanted JSON containing {}, got no JSON",
                            truncated(&want.to_string(), 120)
                        )
                    } else {
                        format!(
                            "body: does not contain {}",
                            truncated(&want.to_string(), 120)
                        )
                    }
                }),
            Self::BodyText(t) => (!r.body_text().contains(t.as_str()))
                .then(|| format!("body: does not contain the text {t:?}")),
            Self::LastMessageRole(role) => {
                let got = last_message_role(r);
                (got != Some(role.as_str()))
                    .then(|| format!("last message role: wanted {role:?}, got {}", shown(got)))
            }
            Self::HasTools(want) => {
                let got = offers_tools(r);
                (got != *want).then(|| {
                    if *want {
                        "tools: wanted some offered, got none".to_owned()
                    } else {
                        "tools: wanted none offered, got some".to_owned()
                    }
                })
            }
            Self::Custom { label, predicate } => {
                (!predicate(r)).then(|| format!("{label}: returned false"))
            }
        }
    }
}

fn priority_word(p: PriorityMatch) -> String {
    match p {
        PriorityMatch::Value(v) => v.to_string(),
        PriorityMatch::Absent => "absent".to_owned(),
        PriorityMatch::Invalid => "invalid".to_owned(),
        PriorityMatch::Duplicated => "duplicated".to_owned(),
    }
}

impl RequestMatch {
    /// Matches every request.
    pub fn any() -> Self {
        Self::default()
    }

    fn with(mut self, condition: Condition) -> Self {
        self.conditions.push(condition);
        self
    }

    /// Only this HTTP method (case-insensitive, e.g. `"POST"`).
    pub fn method(self, method: impl AsRef<str>) -> Self {
        self.with(Condition::Method(method.as_ref().to_ascii_uppercase()))
    }

    /// Only this path: the path as sent, or for `/upstream/<model>/<rest>` requests
    /// also `/<rest>` (so `"/v1/chat/completions"` matches both forms).
    pub fn path(self, path: impl Into<String>) -> Self {
        self.with(Condition::Path(path.into()))
    }

    /// Only requests naming this model (body `model`, form field, `?model=`, or the
    /// `/upstream/<model>/` segment).
    pub fn model(self, model: impl Into<String>) -> Self {
        self.with(Condition::Model(model.into()))
    }

    /// Only streaming (`true`) or non-streaming (`false`) requests.
    pub fn stream(self, stream: bool) -> Self {
        self.with(Condition::Stream(stream))
    }

    /// Only requests with this priority: an integer is exactly one well-formed
    /// `X-Priority: <value>`; with the `client` feature, llama-swap-client's `Priority`
    /// is the header it sends (`Elevated` is `10`, `Low` is `-10`, `Normal` is no
    /// header at all); any [`PriorityMatch`] as is.
    pub fn priority(self, priority: impl Into<PriorityMatch>) -> Self {
        self.priority_is(priority.into())
    }

    /// Only requests without an `X-Priority` header (an explicit `0` does not match).
    pub fn priority_absent(self) -> Self {
        self.priority_is(PriorityMatch::Absent)
    }

    /// Only requests whose one `X-Priority` value is not a signed 32-bit decimal.
    pub fn priority_invalid(self) -> Self {
        self.priority_is(PriorityMatch::Invalid)
    }

    /// Only requests with more than one `X-Priority` value.
    pub fn priority_duplicated(self) -> Self {
        self.priority_is(PriorityMatch::Duplicated)
    }

    /// Only requests whose `X-Priority` is in this state.
    pub fn priority_is(self, priority: PriorityMatch) -> Self {
        self.with(Condition::Priority(priority))
    }

    /// Only requests whose one `X-Queue-Timeout` is this long (what
    /// llama-swap-client's `CallOptions::queue_timeout` sends).
    pub fn queue_timeout(self, timeout: std::time::Duration) -> Self {
        self.with(Condition::QueueTimeout(Some(timeout)))
    }

    /// Only requests without an `X-Queue-Timeout` header.
    pub fn queue_timeout_absent(self) -> Self {
        self.with(Condition::QueueTimeout(None))
    }

    /// Only requests with a line of this header (name case-insensitive) whose value is
    /// exactly `value`.
    pub fn header(self, name: impl AsRef<str>, value: impl Into<String>) -> Self {
        self.with(Condition::Header {
            name: name.as_ref().to_ascii_lowercase(),
            value: Some(value.into()),
        })
    }

    /// Only requests that carry this header, with any value.
    pub fn header_exists(self, name: impl AsRef<str>) -> Self {
        self.with(Condition::HeaderExists(name.as_ref().to_ascii_lowercase()))
    }

    /// Only requests without this header.
    pub fn header_absent(self, name: impl AsRef<str>) -> Self {
        self.with(Condition::Header {
            name: name.as_ref().to_ascii_lowercase(),
            value: None,
        })
    }

    /// Only requests whose query has `name=value` (percent-decoded).
    pub fn query_param(self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.with(Condition::Query {
            name: name.into(),
            value: value.into(),
        })
    }

    /// Only requests whose JSON body equals `body`.
    pub fn body_json(self, body: Value) -> Self {
        self.with(Condition::BodyJson(body))
    }

    /// Only requests whose JSON body contains `subset`: objects key by key (extra keys
    /// allowed, recursively), arrays as an ordered subsequence (so
    /// `{"messages": [{"role": "tool"}]}` matches any conversation with a tool
    /// message), other values by equality.
    pub fn body_contains(self, subset: Value) -> Self {
        self.with(Condition::BodyContains(subset))
    }

    /// Only requests whose body, as text, contains `text`.
    pub fn body_text_contains(self, text: impl Into<String>) -> Self {
        self.with(Condition::BodyText(text.into()))
    }

    /// Only requests whose last `messages` entry has this role (`"user"`, `"tool"`,
    /// `"assistant"`, ...): the turn of an agent loop.
    pub fn last_message_role(self, role: impl Into<String>) -> Self {
        self.with(Condition::LastMessageRole(role.into()))
    }

    /// Only requests that offer tools (`true`: a non-empty `tools` or `functions`
    /// array) or that do not (`false`).
    pub fn has_tools(self, offered: bool) -> Self {
        self.with(Condition::HasTools(offered))
    }

    /// Only requests for which `predicate` returns true (it sees the whole recorded
    /// request, headers and body included).
    pub fn when(
        self,
        predicate: impl Fn(&RecordedRequest) -> bool + Send + Sync + 'static,
    ) -> Self {
        let label = format!("custom predicate #{}", self.custom_count() + 1);
        self.with(Condition::Custom {
            label,
            predicate: Arc::new(predicate),
        })
    }

    /// Adds every condition of `other`.
    pub fn and(mut self, other: RequestMatch) -> Self {
        self.conditions.extend(other.conditions);
        self
    }

    fn custom_count(&self) -> usize {
        self.conditions
            .iter()
            .filter(|c| matches!(c, Condition::Custom { .. }))
            .count()
    }

    /// Whether `request` satisfies every condition.
    pub fn matches(&self, request: &RecordedRequest) -> bool {
        self.conditions
            .iter()
            .all(|c| c.mismatch(request).is_none())
    }

    /// Why `request` does not match: one line per failed condition (empty when it
    /// matches).
    pub fn mismatches(&self, request: &RecordedRequest) -> Vec<String> {
        self.conditions
            .iter()
            .filter_map(|c| c.mismatch(request))
            .collect()
    }

    /// The conditions in words, e.g. `POST /v1/chat/completions, model "qwen",
    /// X-Priority 10` (`any request` when there are none).
    pub fn describe(&self) -> String {
        if self.conditions.is_empty() {
            return "any request".to_owned();
        }
        let mut parts: Vec<String> = Vec::new();
        for (i, condition) in self.conditions.iter().enumerate() {
            let after_method = i > 0 && matches!(self.conditions[i - 1], Condition::Method(_));
            match (condition, parts.last_mut()) {
                // "POST /v1/chat/completions" reads better than "POST, /v1/...".
                (Condition::Path(path), Some(last)) if after_method => {
                    last.push(' ');
                    last.push_str(path);
                }
                _ => parts.push(condition.describe()),
            }
        }
        parts.join(", ")
    }
}

mod builder;

pub(crate) use builder::match_methods;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_subset_takes_extra_keys_and_ordered_array_subsequences() {
        let body = json!({"model": "m", "messages": [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "u"},
            {"role": "tool", "content": "42", "tool_call_id": "c1"},
        ]});
        assert!(json_contains(&body, &json!({"model": "m"})));
        assert!(json_contains(
            &body,
            &json!({"messages": [{"role": "tool"}]})
        ));
        assert!(json_contains(
            &body,
            &json!({"messages": [{"role": "user"}, {"role": "tool"}]})
        ));
        assert!(!json_contains(
            &body,
            &json!({"messages": [{"role": "tool"}, {"role": "user"}]})
        ));
        assert!(!json_contains(&body, &json!({"model": "other"})));
        assert!(!json_contains(&body, &json!({"absent": null})));
    }

    #[test]
    fn long_text_is_cut_with_its_size() {
        assert_eq!(truncated("abc", 5), "abc");
        assert_eq!(truncated("abcdef", 3), "abc... (6 bytes)");
    }
}
