//! The JSON forms of faults, replies and fixture files (the binary's `--fixture` and the
//! admin API's `POST /__mockswap/faults` and `POST /__mockswap/replies`). The crate
//! README documents the format with examples.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use http::StatusCode;
use serde::Deserialize;
use serde_json::Value;

use crate::expect::{Expect, Times};
use crate::fault::{Fault, FaultRule};
use crate::matcher::{PriorityMatch, RequestMatch};
use crate::reply::{Reply, ReplyRule, ToolCall};

/// Why a fault, reply or fixture in JSON form was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpecError {
    /// The JSON does not have the documented shape.
    #[error("invalid {what}: {source}")]
    Json {
        /// What was being read (`fault`, `reply`, `fixture`).
        what: &'static str,
        /// The parser's error, with line and column.
        #[source]
        source: serde_json::Error,
    },
    /// A status code outside 100..=999.
    #[error("invalid status code {status}: use 100..=999")]
    Status {
        /// The number given.
        status: u16,
    },
    /// A reply with more than one kind (`text`/`content` with `tool_calls` is allowed).
    #[error(
        "a reply takes at most one of \"text\" (or \"content\"), \"json\", \"frames\", \"error\" and \"sequence\"; \"tool_calls\" combines only with \"text\"/\"content\""
    )]
    AmbiguousReply,
    /// A `priority` match that is not an integer, `absent`, `invalid` or `duplicated`.
    #[error(
        "invalid priority match {value:?}: use an integer, \"absent\", \"invalid\" or \"duplicated\""
    )]
    Priority {
        /// The value given.
        value: String,
    },
    /// A `queue_timeout` match that is not a number of seconds or `absent`.
    #[error("invalid queue_timeout match {value:?}: use a number of seconds or \"absent\"")]
    QueueTimeout {
        /// The value given.
        value: String,
    },
    /// A rule with more than one of `times`, `always` and `probability`.
    #[error("a rule takes at most one of \"times\", \"always\" and \"probability\"")]
    AmbiguousSchedule,
    /// A probability outside 0..=1.
    #[error("probability {probability} is outside 0..=1")]
    Probability {
        /// The number given.
        probability: f64,
    },
    /// An expectation without `times`, or with a `times` that is not a count or a range.
    #[error(
        "an expectation needs \"times\": a count, or {{\"min\": n, \"max\": m}} (either may be left out)"
    )]
    Times,
    /// The fixture file could not be read.
    #[error("cannot read fixture file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum FaultJson {
    Status {
        status: u16,
        #[serde(default)]
        body: Option<Value>,
        #[serde(default)]
        headers: BTreeMap<String, String>,
    },
    Delay {
        ms: u64,
    },
    Hang,
    Reset,
    Stall,
    Truncate {
        after: usize,
    },
    Disconnect {
        after: usize,
    },
    StallAfter {
        after: usize,
    },
    ErrorFrame {
        after: usize,
        #[serde(default)]
        message: Option<String>,
    },
    MalformedFrame {
        at: usize,
    },
}

/// The JSON form of a [`RequestMatch`] (the `match` of rules, the body of
/// `POST /__mockswap/expectations`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MatchJson {
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    priority: Option<PriorityJsonMatch>,
    /// Seconds, or `"absent"`.
    #[serde(default)]
    queue_timeout: Option<QueueTimeoutJsonMatch>,
    /// Name → value, or `null` for "absent".
    #[serde(default)]
    header: BTreeMap<String, Option<String>>,
    #[serde(default)]
    query: BTreeMap<String, String>,
    #[serde(default)]
    body_json: Option<Value>,
    #[serde(default)]
    body_contains: Option<Value>,
    #[serde(default)]
    body_text_contains: Option<String>,
    #[serde(default)]
    last_message_role: Option<String>,
    #[serde(default)]
    has_tools: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum QueueTimeoutJsonMatch {
    Seconds(f64),
    State(String),
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum PriorityJsonMatch {
    Value(i32),
    State(String),
}

impl MatchJson {
    pub(crate) fn into_match(self) -> Result<RequestMatch, SpecError> {
        let mut m = RequestMatch::any();
        if let Some(method) = self.method {
            m = m.method(method);
        }
        if let Some(path) = self.path {
            m = m.path(path);
        }
        if let Some(model) = self.model {
            m = m.model(model);
        }
        if let Some(stream) = self.stream {
            m = m.stream(stream);
        }
        match self.priority {
            Some(PriorityJsonMatch::Value(v)) => m = m.priority(v),
            Some(PriorityJsonMatch::State(state)) => {
                m = m.priority_is(match state.as_str() {
                    "absent" => PriorityMatch::Absent,
                    "invalid" => PriorityMatch::Invalid,
                    "duplicated" => PriorityMatch::Duplicated,
                    _ => return Err(SpecError::Priority { value: state }),
                });
            }
            None => {}
        }
        match self.queue_timeout {
            Some(QueueTimeoutJsonMatch::Seconds(s)) => {
                let d = std::time::Duration::try_from_secs_f64(s).map_err(|_| {
                    SpecError::QueueTimeout {
                        value: s.to_string(),
                    }
                })?;
                m = m.queue_timeout(d);
            }
            Some(QueueTimeoutJsonMatch::State(state)) if state == "absent" => {
                m = m.queue_timeout_absent();
            }
            Some(QueueTimeoutJsonMatch::State(state)) => {
                return Err(SpecError::QueueTimeout { value: state });
            }
            None => {}
        }
        for (name, value) in self.header {
            m = match value {
                Some(value) => m.header(name, value),
                None => m.header_absent(name),
            };
        }
        for (name, value) in self.query {
            m = m.query_param(name, value);
        }
        if let Some(body) = self.body_json {
            m = m.body_json(body);
        }
        if let Some(subset) = self.body_contains {
            m = m.body_contains(subset);
        }
        if let Some(text) = self.body_text_contains {
            m = m.body_text_contains(text);
        }
        if let Some(role) = self.last_message_role {
            m = m.last_message_role(role);
        }
        if let Some(offered) = self.has_tools {
            m = m.has_tools(offered);
        }
        Ok(m)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FaultRuleJson {
    fault: FaultJson,
    #[serde(default, rename = "match")]
    matcher: MatchJson,
    #[serde(default)]
    times: Option<u64>,
    #[serde(default)]
    always: bool,
    #[serde(default)]
    probability: Option<f64>,
    #[serde(default)]
    seed: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplyJson {
    #[serde(default)]
    status: Option<u16>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCallJson>>,
    #[serde(default)]
    json: Option<Value>,
    #[serde(default)]
    frames: Option<Vec<String>>,
    #[serde(default)]
    error: Option<ErrorJson>,
    #[serde(default)]
    sequence: Option<Vec<ReplyJson>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolCallJson {
    name: String,
    #[serde(default = "empty_object")]
    arguments: Value,
    #[serde(default)]
    id: Option<String>,
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ErrorJson {
    #[serde(default)]
    message: Option<String>,
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    code: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplyRuleJson {
    reply: ReplyJson,
    #[serde(default, rename = "match")]
    matcher: MatchJson,
    #[serde(default)]
    times: Option<u64>,
}

/// A fixture file: scripted replies and faults installed at start.
#[derive(Debug, Default)]
pub struct Fixture {
    /// Reply rules, in file order.
    pub replies: Vec<ReplyRule>,
    /// Fault rules, in file order.
    pub faults: Vec<FaultRule>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FixtureJson {
    #[serde(default)]
    replies: Vec<ReplyRuleJson>,
    #[serde(default)]
    faults: Vec<FaultRuleJson>,
}

fn status(code: u16) -> Result<StatusCode, SpecError> {
    StatusCode::from_u16(code).map_err(|_| SpecError::Status { status: code })
}

fn fault_rule(json: FaultRuleJson) -> Result<FaultRule, SpecError> {
    let fault = match json.fault {
        FaultJson::Status {
            status: code,
            body,
            headers,
        } => Fault::Status {
            status: status(code)?,
            body,
            headers: headers.into_iter().collect(),
        },
        FaultJson::Delay { ms } => Fault::Delay(Duration::from_millis(ms)),
        FaultJson::Hang => Fault::Hang,
        FaultJson::Reset => Fault::ResetBeforeHeaders,
        FaultJson::Stall => Fault::StallAfterHeaders,
        FaultJson::Truncate { after } => Fault::TruncateAfter(after),
        FaultJson::Disconnect { after } => Fault::DisconnectAfter(after),
        FaultJson::StallAfter { after } => Fault::StallAfter(after),
        FaultJson::ErrorFrame { after, message } => Fault::ErrorFrame {
            after,
            message: message.unwrap_or_else(|| "mockswap injected an in-stream error".to_owned()),
        },
        FaultJson::MalformedFrame { at } => Fault::MalformedFrame { at },
    };
    let rule = FaultRule::new(fault).matching(json.matcher.into_match()?);
    let chosen = usize::from(json.times.is_some())
        + usize::from(json.always)
        + usize::from(json.probability.is_some());
    if chosen > 1 {
        return Err(SpecError::AmbiguousSchedule);
    }
    Ok(match (json.times, json.always, json.probability) {
        (Some(n), _, _) => rule.times(n),
        (_, true, _) => rule.always(),
        (_, _, Some(p)) if (0.0..=1.0).contains(&p) => rule.probability(p, json.seed),
        (_, _, Some(p)) => return Err(SpecError::Probability { probability: p }),
        _ => rule,
    })
}

fn reply(r: ReplyJson) -> Result<Reply, SpecError> {
    if r.text.is_some() && r.content.is_some() {
        return Err(SpecError::AmbiguousReply);
    }
    let text = r.text.or(r.content);
    let kinds = usize::from(text.is_some() || r.tool_calls.is_some())
        + usize::from(r.json.is_some())
        + usize::from(r.frames.is_some())
        + usize::from(r.error.is_some())
        + usize::from(r.sequence.is_some());
    if kinds > 1 {
        return Err(SpecError::AmbiguousReply);
    }
    let mut reply = if let Some(calls) = r.tool_calls {
        let calls = calls.into_iter().map(|c| {
            let call = ToolCall::new(c.name, c.arguments);
            match c.id {
                Some(id) => call.id(id),
                None => call,
            }
        });
        Reply::tool_calls(calls).with_content(text.unwrap_or_default())
    } else if let Some(text) = text {
        Reply::text(text)
    } else if let Some(json) = r.json {
        Reply::json(json)
    } else if let Some(frames) = r.frames {
        Reply::frames(frames)
    } else if let Some(error) = r.error {
        let status = status(r.status.unwrap_or(500))?;
        let mut reply = Reply::error(
            status,
            error
                .message
                .unwrap_or_else(|| "mockswap scripted error".to_owned()),
        );
        if let Some(kind) = error.kind {
            reply = reply.error_type(kind);
        }
        if let Some(code) = error.code {
            reply = reply.error_code(code);
        }
        reply
    } else if let Some(items) = r.sequence {
        Reply::sequence(
            items
                .into_iter()
                .map(reply)
                .collect::<Result<Vec<_>, _>>()?,
        )
    } else {
        Reply::echo()
    };
    if let Some(code) = r.status {
        reply = reply.status(status(code)?);
    }
    for (name, value) in r.headers {
        reply = reply.header(name, value);
    }
    Ok(reply)
}

fn reply_rule(json: ReplyRuleJson) -> Result<ReplyRule, SpecError> {
    let rule = ReplyRule::new(reply(json.reply)?).matching(json.matcher.into_match()?);
    Ok(match json.times {
        Some(n) => rule.times(n),
        None => rule,
    })
}

/// Parses one fault rule, or an array of them (the body of `POST /__mockswap/faults`).
///
/// # Errors
/// [`SpecError`] when the JSON does not have the documented shape.
pub(crate) fn parse_fault_rules(text: &[u8]) -> Result<Vec<FaultRule>, SpecError> {
    let json = |source| SpecError::Json {
        what: "fault",
        source,
    };
    let value: Value = serde_json::from_slice(text).map_err(json)?;
    let items = match value {
        Value::Array(items) => items,
        one => vec![one],
    };
    items
        .into_iter()
        .map(|item| fault_rule(serde_json::from_value(item).map_err(json)?))
        .collect()
}

/// Parses one reply rule, or an array of them (the body of `POST /__mockswap/replies`).
///
/// # Errors
/// [`SpecError`] when the JSON does not have the documented shape.
pub(crate) fn parse_reply_rules(text: &[u8]) -> Result<Vec<ReplyRule>, SpecError> {
    let json = |source| SpecError::Json {
        what: "reply",
        source,
    };
    let value: Value = serde_json::from_slice(text).map_err(json)?;
    let items = match value {
        Value::Array(items) => items,
        one => vec![one],
    };
    items
        .into_iter()
        .map(|item| reply_rule(serde_json::from_value(item).map_err(json)?))
        .collect()
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum TimesJson {
    Exactly(u64),
    Range {
        #[serde(default)]
        min: Option<u64>,
        #[serde(default)]
        max: Option<u64>,
    },
}

/// Parses the body of `POST /__mockswap/expectations`: the fields of "Matching
/// requests" at the top level, plus `times` (required) and `name`.
///
/// # Errors
/// [`SpecError`] when the JSON does not have the documented shape.
pub(crate) fn parse_expectation(text: &[u8]) -> Result<Expect, SpecError> {
    let json = |source| SpecError::Json {
        what: "expectation",
        source,
    };
    let mut fields: serde_json::Map<String, Value> = serde_json::from_slice(text).map_err(json)?;
    let times: TimesJson = match fields.remove("times") {
        Some(times) => serde_json::from_value(times).map_err(|_| SpecError::Times)?,
        None => return Err(SpecError::Times),
    };
    let name = match fields.remove("name") {
        Some(Value::String(name)) => Some(name),
        Some(Value::Null) | None => None,
        Some(other) => {
            return Err(json(<serde_json::Error as serde::de::Error>::custom(
                format!("name must be a string, got {other}"),
            )));
        }
    };
    let matcher: MatchJson = serde_json::from_value(Value::Object(fields)).map_err(json)?;
    let times = match times {
        TimesJson::Exactly(n) => Times::from(n),
        TimesJson::Range {
            min,
            max: Some(max),
        } => Times::from(min.unwrap_or(0)..=max),
        TimesJson::Range { min, max: None } => Times::at_least(min.unwrap_or(0)),
    };
    let mut expect = Expect::new().matching(matcher.into_match()?).times(times);
    if let Some(name) = name {
        expect = expect.named(name);
    }
    Ok(expect)
}

impl Fixture {
    /// Parses a fixture document.
    ///
    /// # Errors
    /// [`SpecError`] when the JSON does not have the documented shape.
    pub fn parse(text: &[u8]) -> Result<Self, SpecError> {
        let doc: FixtureJson = serde_json::from_slice(text).map_err(|source| SpecError::Json {
            what: "fixture",
            source,
        })?;
        Ok(Self {
            replies: doc
                .replies
                .into_iter()
                .map(reply_rule)
                .collect::<Result<_, _>>()?,
            faults: doc
                .faults
                .into_iter()
                .map(fault_rule)
                .collect::<Result<_, _>>()?,
        })
    }

    /// Reads and parses a fixture file.
    ///
    /// # Errors
    /// [`SpecError::Read`] when the file cannot be read, else as [`Fixture::parse`].
    pub fn load(path: &Path) -> Result<Self, SpecError> {
        let text = std::fs::read(path).map_err(|source| SpecError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_json_forms_parse_to_their_faults() {
        let rules = parse_fault_rules(
            br#"[
              {"fault": {"type": "status", "status": 429, "headers": {"retry-after": "0"}}, "times": 2},
              {"fault": {"type": "truncate", "after": 3}, "match": {"model": "a"}, "always": true},
              {"fault": {"type": "reset"}, "probability": 0.5, "seed": 9}
            ]"#,
        )
        .unwrap();
        assert_eq!(rules.len(), 3);
        assert!(
            matches!(&rules[0].fault, Fault::Status { status, headers, .. }
            if status.as_u16() == 429 && headers == &[("retry-after".to_owned(), "0".to_owned())])
        );
        assert_eq!(rules[1].fault, Fault::TruncateAfter(3));
        assert_eq!(rules[1].matcher.describe(), "model \"a\"");
    }

    #[test]
    fn unknown_fault_type_is_a_typed_error() {
        let err = parse_fault_rules(br#"{"fault": {"type": "explode"}}"#).unwrap_err();
        assert!(
            matches!(err, SpecError::Json { what: "fault", .. }),
            "{err}"
        );
    }

    #[test]
    fn reply_with_text_and_json_is_ambiguous() {
        let err = parse_reply_rules(br#"{"reply": {"text": "a", "json": {}}}"#).unwrap_err();
        assert!(matches!(err, SpecError::AmbiguousReply));
    }

    #[test]
    fn fixture_with_replies_and_faults_parses() {
        let fixture = Fixture::parse(
            br#"{"replies": [{"match": {"model": "a"}, "reply": {"text": "hi"}}],
                 "faults": [{"fault": {"type": "hang"}}]}"#,
        )
        .unwrap();
        assert_eq!(fixture.replies.len(), 1);
        assert_eq!(fixture.faults.len(), 1);
    }
}
