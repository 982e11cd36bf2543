//! Observability over HTTP: `/metrics` content, request ids, and label
//! cardinality under hostile input.

use std::collections::BTreeSet;

use crate::support::{Harness, LIMIT, model};

/// Series (name and labels, the histogram `le` label left out), skipping comments.
fn series(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.rsplit_once(' ').map(|(s, _)| s.to_owned()))
        .map(|s| {
            let Some(start) = s.find("le=\"") else {
                return s;
            };
            let end = s[start + 4..].find('"').map_or(s.len(), |e| start + 5 + e);
            let tail = s[end..].trim_start_matches(',');
            format!("{}{tail}", &s[..start])
        })
        .collect()
}

/// Every value of label `name` in the text.
fn label_values(text: &str, name: &str) -> BTreeSet<String> {
    let key = format!("{name}=\"");
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let start = l.find(&key)? + key.len();
            let end = l[start..].find('"')? + start;
            Some(l[start..end].to_owned())
        })
        .collect()
}

#[tokio::test]
async fn metrics_count_outcomes_swaps_bad_headers_and_model_state() {
    let h = Harness::start(&[model("a", ""), model("b", "")], "").await;
    let ok = h.chat("a", Some("10"), false).send().await.unwrap();
    assert_eq!(ok.status(), 200);
    let dup = h
        .chat("a", None, false)
        .header("X-Priority", "1")
        .header("X-Priority", "2")
        .send()
        .await
        .unwrap();
    assert_eq!(dup.status(), 200);
    let bad = h.chat("a", Some("urgent"), false).send().await.unwrap();
    assert_eq!(bad.status(), 200);
    let missing = h.chat("nope", Some("-10"), false).send().await.unwrap();
    assert_eq!(missing.status(), 404);
    let text = h.metrics().await;
    for line in [
        "llamaswap_requests_total{outcome=\"served\",code=\"\",band=\"elevated\"} 1\n",
        "llamaswap_requests_total{outcome=\"served\",code=\"\",band=\"normal\"} 2\n",
        "llamaswap_requests_total{outcome=\"rejected\",code=\"model_not_found\",band=\"low\"} 1\n",
        "llamaswap_swaps_total{model=\"a\",result=\"ok\"} 1\n",
        "llamaswap_swap_duration_seconds_count{model=\"a\"} 1\n",
        "llamaswap_priority_header_rejected_total{reason=\"invalid\"} 1\n",
        "llamaswap_priority_header_rejected_total{reason=\"duplicated\"} 1\n",
        "llamaswap_model_state{model=\"a\",state=\"ready\"} 1\n",
        "llamaswap_model_state{model=\"b\",state=\"stopped\"} 1\n",
        "llamaswap_model_queue_wait_seconds_count{model=\"a\",band=\"elevated\"} 1\n",
        "llamaswap_drain_fence_holds_total 0\n",
        "llamaswap_requests_in_progress 0\n",
    ] {
        assert!(text.contains(line), "missing {line}in\n{text}");
    }
    h.shutdown().await;
}

#[tokio::test]
async fn request_id_is_echoed_or_generated() {
    let h = Harness::start(&[model("a", "")], "").await;
    let sent = h
        .chat("a", None, false)
        .header("X-Request-Id", "trace-42")
        .send()
        .await
        .unwrap();
    assert_eq!(sent.headers()["x-request-id"], "trace-42");
    let generated = h.chat("a", None, false).send().await.unwrap();
    let first = generated.headers()["x-request-id"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(!first.is_empty());
    let error = h.http.get(h.url("/no/such/path")).send().await.unwrap();
    assert_eq!(error.status(), 404);
    let second = error.headers()["x-request-id"].to_str().unwrap();
    assert_ne!(first, second);
    // The upstream sees the same id, so its logs can be matched.
    let journal = h.journal("a").await.unwrap();
    let carried = journal.iter().any(|entry| {
        entry["headers"].as_array().unwrap().iter().any(|pair| {
            pair["name"]
                .as_str()
                .unwrap()
                .eq_ignore_ascii_case("x-request-id")
                && pair["value"] == "trace-42"
        })
    });
    assert!(carried, "{journal:?}");
    h.shutdown().await;
}

#[tokio::test]
async fn label_cardinality_stays_bounded_under_random_priorities_and_models() {
    let h = Harness::start(&[model("a", "")], "").await;
    // Every series the server can have once each outcome happened at least once.
    let warm = h.chat("a", None, false).send().await.unwrap();
    assert_eq!(warm.status(), 200);
    let before = series(&h.metrics().await);
    // Deterministic pseudo-random priorities and unknown model names.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for i in 0..200 {
        let priority = (next() as i32).to_string();
        let model = if i % 2 == 0 {
            format!("unknown-{}", next())
        } else {
            "a".to_owned()
        };
        let response = tokio::time::timeout(LIMIT, h.chat(&model, Some(&priority), false).send())
            .await
            .unwrap()
            .unwrap();
        assert!(matches!(response.status().as_u16(), 200 | 404));
    }
    let text = h.metrics().await;
    let after = series(&text);
    let added: Vec<_> = after.difference(&before).collect();
    // At most, per band: served and rejected outcomes (2), and the model
    // wait histogram's bucket, sum and count (3).
    assert!(added.len() <= 3 * 5, "new series: {added:#?}");
    let bands: BTreeSet<String> = ["low", "normal", "elevated"].map(String::from).into();
    assert!(label_values(&text, "band").is_subset(&bands), "{text}");
    let models: BTreeSet<String> = ["a", "other"].map(String::from).into();
    assert!(label_values(&text, "model").is_subset(&models), "{text}");
    h.shutdown().await;
}

/// Captures formatted log output.
#[derive(Clone, Default)]
struct Capture(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Capture {
    type Writer = Capture;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

#[tokio::test]
async fn request_id_is_a_span_field_of_the_request_logs() {
    let capture = Capture::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(capture.clone())
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .finish();
    // Current-thread runtime: the server's tasks run on this thread, under this subscriber.
    let _guard = tracing::subscriber::set_default(subscriber);
    let h = Harness::start(&[model("a", "")], "").await;
    let response = h
        .chat("a", Some("oops"), false)
        .header("X-Request-Id", "trace-77")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    h.shutdown().await;
    let text = String::from_utf8(capture.0.lock().unwrap().clone()).unwrap();
    let tagged: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("request_id=trace-77"))
        .collect();
    // The bad header (before queueing) and the access line (after proxying)
    // both carry the id, and so does the scheduler's sequence number.
    assert!(
        tagged.iter().any(|l| l.contains("malformed X-Priority")),
        "{text}"
    );
    assert!(
        tagged
            .iter()
            .any(|l| l.contains("status=200") && l.contains("seq=")),
        "{text}"
    );
}
