//! What a failed expectation prints: for each unmet expectation, what it wanted, how
//! many requests matched, and the closest requests with why each did not match; then
//! the table of every request received.

use std::fmt::Write as _;

use serde_json::{Value, json};

use crate::expect::Times;
use crate::journal::RecordedRequest;
use crate::state::{Checked, Mounted};

/// How many near misses a failure shows.
const NEAREST: usize = 3;
/// How much of a body a failure shows.
const BODY_LIMIT: usize = 200;

/// The table of every request received: seq, method, path, model, stream, x-priority.
pub fn requests_table(requests: &[RecordedRequest]) -> String {
    let rows: Vec<[String; 6]> = requests
        .iter()
        .map(|r| {
            [
                r.seq.to_string(),
                if r.websocket {
                    "WS".to_owned()
                } else {
                    r.method.to_string()
                },
                r.path.clone(),
                r.model.clone().unwrap_or_else(|| "-".to_owned()),
                r.stream.to_string(),
                r.priority.to_string(),
            ]
        })
        .collect();
    let header = ["seq", "method", "path", "model", "stream", "x-priority"].map(str::to_owned);
    let mut widths = header.clone().map(|h| h.len());
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let _ = writeln!(out, "requests received by mockswap ({}):", rows.len());
    for row in std::iter::once(&header).chain(&rows) {
        let line: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        let _ = writeln!(out, "  {}", line.join("  ").trim_end());
    }
    if rows.is_empty() {
        out.push_str("  (none)\n");
    }
    out
}

fn one_line(r: &RecordedRequest) -> String {
    format!(
        "#{} {} {} model={} stream={} x-priority={}",
        r.seq,
        if r.websocket { "WS" } else { r.method.as_str() },
        r.path,
        r.model.as_deref().unwrap_or("-"),
        r.stream,
        r.priority
    )
}

fn body_line(r: &RecordedRequest) -> String {
    let text = r.body_text();
    if text.is_empty() {
        "(empty)".to_owned()
    } else {
        body_end(r, &text)
    }
}

/// What a report shows of a body: all of a short one; of a long one, its end, since
/// the turns of an agent conversation share their beginning and differ at the end.
/// A chat body shows how many messages it holds and the last ones whole (up to the
/// limit); anything else its last characters.
fn body_end(r: &RecordedRequest, text: &str) -> String {
    if text.chars().count() <= BODY_LIMIT {
        return text.to_owned();
    }
    let messages = r
        .json
        .as_ref()
        .and_then(|body| body.get("messages"))
        .and_then(Value::as_array);
    if let Some(messages) = messages {
        let mut shown: Vec<String> = Vec::new();
        let mut used = 0;
        for message in messages.iter().rev() {
            let one = message.to_string();
            let len = one.chars().count();
            if !shown.is_empty() && used + len > BODY_LIMIT {
                break;
            }
            used += len;
            shown.push(one);
        }
        shown.reverse();
        let last = shown.join(", ");
        let last = if last.chars().count() > BODY_LIMIT {
            tail(&last, BODY_LIMIT)
        } else {
            last
        };
        return format!(
            "{} messages, the last {}: [{last}] ({} bytes)",
            messages.len(),
            shown.len(),
            text.len()
        );
    }
    format!("{} ({} bytes)", tail(text, BODY_LIMIT), text.len())
}

/// The last `limit` characters of `text`, after an ellipsis.
fn tail(text: &str, limit: usize) -> String {
    let count = text.chars().count();
    let start = text
        .char_indices()
        .nth(count.saturating_sub(limit))
        .map_or(0, |(i, _)| i);
    format!("...{}", &text[start..])
}

/// The report of one expectation that is not met.
pub(crate) fn failure(checked: &Checked<'_>) -> String {
    let e = checked.expectation;
    let mut out = String::new();
    let title = e
        .expect
        .name
        .as_deref()
        .map_or_else(|| format!("expectation #{}", e.id), |n| format!("{n:?}"));
    let _ = write!(out, "{title}");
    if let Some(at) = e.location {
        let _ = write!(
            out,
            " (mounted at {}:{}:{})",
            at.file(),
            at.line(),
            at.column()
        );
    }
    out.push('\n');
    let _ = writeln!(out, "  wanted:   {}", e.expect.matcher.describe());
    let _ = writeln!(
        out,
        "  expected: {} matching request(s), received {} (of {} since it was mounted)",
        e.expect.times,
        checked.matching.len(),
        checked.since.len()
    );
    if checked.too_many() {
        out.push_str("  matching requests:\n");
        for r in &checked.matching {
            let _ = writeln!(out, "    {}", one_line(r));
        }
        return out;
    }
    let nearest = checked.nearest(NEAREST);
    if nearest.is_empty() {
        out.push_str("  no other request arrived since it was mounted\n");
        return out;
    }
    out.push_str("  nearest requests:\n");
    for (r, why) in nearest {
        let _ = writeln!(out, "    {}", one_line(r));
        for reason in why {
            let _ = writeln!(out, "      - {reason}");
        }
        let _ = writeln!(out, "      body: {}", body_line(r));
    }
    out
}

/// The report of the given expectations against the journal, `None` when all are met.
pub(crate) fn unmet_report(mounted: &[Mounted], requests: &[RecordedRequest]) -> Option<String> {
    let checked: Vec<Checked<'_>> = mounted.iter().map(|m| Checked::new(m, requests)).collect();
    let failed: Vec<&Checked<'_>> = checked.iter().filter(|c| !c.met()).collect();
    (!failed.is_empty()).then(|| unmet(&failed, mounted.len(), requests))
}

/// The whole report: every unmet expectation, then the request table.
pub(crate) fn unmet(failed: &[&Checked<'_>], total: usize, requests: &[RecordedRequest]) -> String {
    let mut out = format!(
        "mockswap: {} of {total} expectation(s) not met\n\n",
        failed.len()
    );
    for checked in failed {
        out.push_str(&failure(checked));
        out.push('\n');
    }
    out.push_str(&requests_table(requests));
    out
}

fn times_json(times: Times) -> Value {
    json!({"min": times.min, "max": times.max})
}

fn request_json(r: &RecordedRequest) -> Value {
    json!({
        "seq": r.seq,
        "method": r.method.as_str(),
        "path": r.path,
        "model": r.model,
        "stream": r.stream,
        "priority": r.priority.to_string(),
        "body": body_end(r, &r.body_text()),
    })
}

/// One expectation as `GET /__mockswap/expectations` lists it.
pub(crate) fn listed(checked: &Checked<'_>) -> Value {
    let e = checked.expectation;
    json!({
        "id": e.id,
        "name": e.expect.name,
        "match": e.expect.matcher.describe(),
        "times": times_json(e.expect.times),
        "expected": e.expect.times.to_string(),
        "received": checked.matching.len(),
        "ok": checked.met(),
    })
}

/// One unmet expectation as `GET /__mockswap/verify` reports it.
pub(crate) fn failure_json(checked: &Checked<'_>) -> Value {
    let mut value = listed(checked);
    let nearest: Vec<Value> = checked
        .nearest(NEAREST)
        .into_iter()
        .map(|(r, why)| {
            let mut entry = request_json(r);
            entry["mismatches"] = json!(why);
            entry
        })
        .collect();
    value["nearest"] = Value::Array(if checked.too_many() {
        Vec::new()
    } else {
        nearest
    });
    value["matching"] = checked.matching.iter().map(|r| request_json(r)).collect();
    value["report"] = Value::String(failure(checked));
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_body(body: &str) -> RecordedRequest {
        RecordedRequest {
            body: bytes::Bytes::from(body.to_owned()),
            json: serde_json::from_str(body).ok(),
            ..RecordedRequest::for_tests()
        }
    }

    #[test]
    fn a_long_chat_body_shows_how_many_messages_and_the_last_ones() {
        let history = "the same long system prompt every turn shares ".repeat(10);
        let body = json!({"model": "qwen", "messages": [
            {"role": "system", "content": history},
            {"role": "user", "content": "What time is it?"},
            {"role": "assistant", "tool_calls": [{"id": "c1"}]},
            {"role": "tool", "tool_call_id": "c1", "content": "12:00 UTC"},
        ]})
        .to_string();
        let shown = body_line(&with_body(&body));
        assert!(shown.starts_with("4 messages, the last 3: ["), "{shown}");
        assert!(shown.contains(r#""content":"12:00 UTC""#), "{shown}");
        assert!(shown.contains("What time is it?"), "{shown}");
        assert!(!shown.contains("every turn shares"), "{shown}");
    }

    #[test]
    fn a_long_plain_body_shows_its_end_and_a_short_one_all_of_it() {
        let body = format!("{}THE END", "x".repeat(500));
        let shown = body_line(&with_body(&body));
        assert!(shown.starts_with("...x"), "{shown}");
        assert!(shown.ends_with("THE END (507 bytes)"), "{shown}");
        assert_eq!(body_line(&with_body("short")), "short");
        assert_eq!(body_line(&with_body("")), "(empty)");
    }

    #[test]
    fn one_huge_last_message_is_cut_from_its_start() {
        let body = json!({"messages": [{"role": "user", "content": "y".repeat(400)}]}).to_string();
        let shown = body_line(&with_body(&body));
        assert!(shown.starts_with("1 messages, the last 1: [..."), "{shown}");
        assert!(shown.contains(r#"yyy","role":"user"}]"#), "{shown}");
    }
}
