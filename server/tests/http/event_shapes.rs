//! `/api/events` payloads are a superset of llama-swap's: every field of the
//! fixtures in `tests/fixtures/llama-swap-events` (written from llama-swap's
//! source) is in the event this server sends, with the same JSON type.

use std::path::PathBuf;

use serde_json::Value;

use crate::support::{Harness, ModelSpec};
use crate::ui::Events;

fn fixture(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/llama-swap-events")
        .join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// Where `ours` lacks a field of `theirs` or gives it another type; an
/// empty object or array in `theirs` takes any content, `null` takes null
/// or a string.
fn differences(path: &str, ours: &Value, theirs: &Value, out: &mut Vec<String>) {
    match (theirs, ours) {
        (Value::Null, Value::Null | Value::String(_))
        | (Value::String(_), Value::String(_))
        | (Value::Bool(_), Value::Bool(_)) => {}
        (Value::Number(_), Value::Number(_)) => {}
        (Value::Array(theirs), Value::Array(ours)) => {
            if let Some(item) = theirs.first() {
                if ours.is_empty() {
                    out.push(format!("{path}: empty, llama-swap's has items"));
                }
                for (i, value) in ours.iter().enumerate() {
                    differences(&format!("{path}[{i}]"), value, item, out);
                }
            }
        }
        (Value::Object(theirs), Value::Object(ours)) => {
            for (key, theirs) in theirs {
                match ours.get(key) {
                    Some(ours) => differences(&format!("{path}.{key}"), ours, theirs, out),
                    None => out.push(format!("{path}.{key}: missing")),
                }
            }
        }
        (theirs, ours) => out.push(format!("{path}: {ours} where llama-swap sends {theirs}")),
    }
}

fn assert_superset(name: &str, ours: &Value) {
    let mut out = Vec::new();
    differences(name, ours, &fixture(name), &mut out);
    assert!(out.is_empty(), "{}\nin {ours}", out.join("\n"));
}

#[tokio::test]
async fn every_event_carries_llama_swaps_fields_with_their_types() {
    let gated = ModelSpec {
        id: "a",
        args: "--gate-closed",
        yaml: "aliases: [alpha]\ncapabilities: { in: [text, image], out: [text], tools: true, context: 8192 }",
    };
    let h = Harness::start(
        &[gated],
        "profiles:\n  day: { description: Day, pins: { alpha: a } }\n",
    )
    .await;
    let mut events = Events::connect(&h, None).await;
    let mut seen = Seen::default();
    seen.read(
        &mut events,
        &[
            "uiConfig",
            "profileChanged",
            "modelStatus",
            "inflight.snapshot",
        ],
    )
    .await;
    let request = h.spawn(h.chat("a", Some("10"), false));
    seen.read(&mut events, &["inflight.upsert"]).await;
    h.wait_held("a", 1).await;
    h.open_gate("a").await;
    seen.read(&mut events, &["inflight.remove", "activity", "logData"])
        .await;
    assert_eq!(request.await.unwrap().0, 200);
    for name in [
        "uiConfig",
        "profileChanged",
        "modelStatus",
        "inflight.snapshot",
        "inflight.upsert",
        "inflight.remove",
        "activity",
        "logData",
    ] {
        assert_superset(name, &seen.first[name]);
    }
    let config = &seen.first["uiConfig"];
    assert_eq!(
        config["activity"]["session_id"],
        serde_json::json!(["X-Session-ID", "X-Litellm-Session-Id"]),
        "llama-swap's defaults, spelt as configured"
    );
    let models = &seen.first["modelStatus"];
    assert_eq!(models[0]["capabilities"]["vision"], true);
    assert_eq!(models[0]["capabilities"]["function_calling"], true);
    assert_eq!(models[0]["context_length"], 8192);
    h.shutdown().await;
}

/// The first event of each name read (`inflight` by its operation).
#[derive(Default)]
struct Seen {
    first: std::collections::BTreeMap<String, Value>,
}

impl Seen {
    /// Reads events until one of each of `names` was read.
    async fn read(&mut self, events: &mut Events, names: &[&str]) {
        while !names.iter().all(|n| self.first.contains_key(*n)) {
            let (kind, payload) = events.next().await.expect("the stream ended early");
            let name = match payload["operation"].as_str() {
                Some(operation) if kind == "inflight" => format!("inflight.{operation}"),
                _ => kind,
            };
            self.first.entry(name).or_insert(payload);
        }
    }
}

#[test]
fn the_superset_check_finds_a_missing_field_and_a_wrong_type() {
    let mut out = Vec::new();
    differences(
        "e",
        &serde_json::json!({"id": "7", "extra": 1}),
        &serde_json::json!({"id": 0, "data": ""}),
        &mut out,
    );
    assert_eq!(out.len(), 2, "{out:?}");
    let mut out = Vec::new();
    differences(
        "e",
        &serde_json::json!({"active": null, "requests": [{"id": "1"}], "more": true}),
        &serde_json::json!({"active": null, "requests": [{"id": ""}]}),
        &mut out,
    );
    assert!(out.is_empty(), "{out:?}");
}
