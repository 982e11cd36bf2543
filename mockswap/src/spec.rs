//! The JSON forms of faults, replies and fixture files (the binary's `--fixture` and the
//! admin API's `POST /__mockswap/faults` and `POST /__mockswap/replies`). The crate
//! README documents the format with examples.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use http::StatusCode;
use serde::Deserialize;
use serde_json::Value;

use crate::fault::{Fault, FaultRule, RequestMatch};
use crate::reply::{Reply, ReplyRule};

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
    /// A reply with more than one of `text`, `json` and `frames`.
    #[error("a reply takes at most one of \"text\", \"json\" and \"frames\"")]
    AmbiguousReply,
    /// A rule with more than one of `times`, `always` and `probability`.
    #[error("a rule takes at most one of \"times\", \"always\" and \"probability\"")]
    AmbiguousSchedule,
    /// A probability outside 0..=1.
    #[error("probability {probability} is outside 0..=1")]
    Probability {
        /// The number given.
        probability: f64,
    },
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
    ErrorFrame {
        after: usize,
        #[serde(default)]
        message: Option<String>,
    },
    MalformedFrame {
        at: usize,
    },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FaultRuleJson {
    fault: FaultJson,
    #[serde(default, rename = "match")]
    matcher: RequestMatch,
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
    #[serde(default = "ok")]
    status: u16,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    json: Option<Value>,
    #[serde(default)]
    frames: Option<Vec<String>>,
}

fn ok() -> u16 {
    200
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplyRuleJson {
    reply: ReplyJson,
    #[serde(default, rename = "match")]
    matcher: RequestMatch,
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
        FaultJson::ErrorFrame { after, message } => Fault::ErrorFrame {
            after,
            message: message.unwrap_or_else(|| "mockswap injected an in-stream error".to_owned()),
        },
        FaultJson::MalformedFrame { at } => Fault::MalformedFrame { at },
    };
    let rule = FaultRule::new(fault).matching(json.matcher);
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

fn reply_rule(json: ReplyRuleJson) -> Result<ReplyRule, SpecError> {
    let r = json.reply;
    let given = usize::from(r.text.is_some())
        + usize::from(r.json.is_some())
        + usize::from(r.frames.is_some());
    if given > 1 {
        return Err(SpecError::AmbiguousReply);
    }
    let mut reply = match (r.text, r.json, r.frames) {
        (Some(text), _, _) => Reply::text(text),
        (_, Some(json), _) => Reply::json(json),
        (_, _, Some(frames)) => Reply::frames(frames),
        _ => Reply::echo(),
    };
    reply = reply.status(status(r.status)?);
    for (name, value) in r.headers {
        reply = reply.header(name, value);
    }
    let rule = ReplyRule::new(reply).matching(json.matcher);
    Ok(match json.times {
        Some(n) => rule.times(n),
        None => rule,
    })
}

/// Parses one fault rule, or an array of them (the body of `POST /__mockswap/faults`).
///
/// # Errors
/// [`SpecError`] when the JSON does not have the documented shape.
pub fn parse_fault_rules(text: &[u8]) -> Result<Vec<FaultRule>, SpecError> {
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
pub fn parse_reply_rules(text: &[u8]) -> Result<Vec<ReplyRule>, SpecError> {
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
        assert_eq!(rules[1].matcher.model.as_deref(), Some("a"));
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
