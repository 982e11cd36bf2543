//! The request history scripts read: `GET /api/metrics/activity` (llama-swap's
//! paged rows) and `GET /api/metrics/stats`, kept in memory or in the
//! database at `store.path` across restarts and reloads, with token usage in
//! every format upstreams report it.

use std::str::FromStr as _;
use std::sync::Arc;

use llama_swap_server::{History, HttpOptions, Retention, ServeOptions, StoreSettings};
use serde_json::{Value, json};

use crate::support::{Harness, model};

fn with_history(history: &Arc<History>) -> ServeOptions {
    ServeOptions::default().http(HttpOptions::default().history(Arc::clone(history)))
}

fn open(path: &std::path::Path) -> Arc<History> {
    Arc::new(
        History::open(&StoreSettings {
            path: Some(path.to_owned()),
            retention: Retention {
                max_rows: 0,
                max_age: None,
            },
        })
        .unwrap(),
    )
}

async fn page(h: &Harness, query: &str) -> Value {
    let response = h
        .http
        .get(h.url(&format!("/api/metrics/activity?{query}")))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{query}");
    response.json().await.unwrap()
}

async fn chat_ok(h: &Harness, model: &str, content: &str, stream: bool) {
    let response = h
        .http
        .post(h.url("/v1/chat/completions"))
        .json(&json!({"model": model, "stream": stream,
                      "messages": [{"role": "user", "content": content}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.bytes().await.unwrap();
}

#[tokio::test]
async fn history_survives_a_restart_and_a_reload_and_ids_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.db");
    let history = open(&path);
    let h = Harness::start_with(&[model("a", "")], "", with_history(&history)).await;
    for i in 0..3 {
        chat_ok(&h, "a", &format!("q{i}"), i == 1).await;
    }
    h.reload_same().await;
    chat_ok(&h, "a", "after reload", false).await;
    let before = page(&h, "order=asc").await;
    assert_eq!(before["total"], 4, "{before}");
    h.shutdown().await;
    history.close();
    drop(history);

    let history = open(&path);
    let h = Harness::start_with(&[model("a", "")], "", with_history(&history)).await;
    let after = page(&h, "order=asc").await;
    // Captures live in memory: after a restart no row has one any more.
    let without_captures = |page: &Value| -> Vec<Value> {
        page["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|row| {
                let mut row = row.clone();
                row["has_capture"] = json!(false);
                row
            })
            .collect()
    };
    assert!(
        after["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["has_capture"] == false)
    );
    assert_eq!(
        without_captures(&after),
        without_captures(&before),
        "the rows came back as they were"
    );
    chat_ok(&h, "a", "next", false).await;
    let newest = page(&h, "limit=1").await;
    assert_eq!(newest["data"][0]["id"], 5, "{newest}");
    assert_eq!(newest["total"], 5);
    h.shutdown().await;
}

#[tokio::test]
async fn a_page_has_llama_swaps_shape_and_filters() {
    let h = Harness::start(&[model("a", ""), model("b", "")], "").await;
    for (m, n) in [("a", 3), ("b", 2)] {
        for i in 0..n {
            chat_ok(&h, m, &format!("{m}{i}"), false).await;
        }
    }
    let all = page(&h, "").await;
    assert_eq!(
        (
            &all["page"],
            &all["limit"],
            &all["total"],
            &all["total_pages"]
        ),
        (&json!(1), &json!(25), &json!(5), &json!(1))
    );
    let ids: Vec<u64> = all["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_u64().unwrap())
        .collect();
    assert_eq!(ids, [5, 4, 3, 2, 1], "newest first");
    let row = &all["data"][0];
    for key in [
        "id",
        "timestamp",
        "model",
        "req_path",
        "resp_content_type",
        "resp_status_code",
        "tokens",
        "duration_ms",
        "has_capture",
    ] {
        assert!(row.get(key).is_some(), "{key} missing: {row}");
    }
    let b = page(&h, "model=b&limit=1&page=2").await;
    assert_eq!((&b["total"], &b["total_pages"]), (&json!(2), &json!(2)));
    assert_eq!(b["data"][0]["model"], "b");
    let both = page(&h, "model=a&model=b&min_id=2&max_id=4&order=asc").await;
    assert_eq!(both["total"], 3);
    let normal = page(&h, "band=normal").await;
    assert_eq!(normal["total"], 5, "no X-Priority: the normal band");
    assert_eq!(page(&h, "band=elevated").await["total"], 0);
    h.shutdown().await;
}

#[tokio::test]
async fn every_bad_activity_parameter_is_a_400_naming_it() {
    let h = Harness::start(&[model("a", "")], "").await;
    for (query, param) in [
        ("limit=0", "limit"),
        ("limit=1000", "limit"),
        ("limit=ten", "limit"),
        ("page=0", "page"),
        ("sort=nope", "sort"),
        ("order=sideways", "order"),
        ("start=yesterday", "start"),
        ("end=2026-02-30T00:00:00Z", "end"),
        (
            "start=2026-12-02T00:00:00Z&end=2026-12-01T00:00:00Z",
            "start",
        ),
        ("min_id=0", "min_id"),
        ("max_id=-1", "max_id"),
        ("min_id=9&max_id=3", "min_id"),
        ("band=urgent", "band"),
    ] {
        let response = h
            .http
            .get(h.url(&format!("/api/metrics/activity?{query}")))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "{query}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["src"], "llama-swap", "{body}");
        assert_eq!(body["error"]["param"], param, "{query}: {body}");
        assert_eq!(body["error"]["type"], "invalid_request_error");
        assert!(
            !body["error"]["message"].as_str().unwrap().is_empty(),
            "{body}"
        );
    }
    h.shutdown().await;
}

/// One reply per usage format, chosen by the prompt.
const FORMATS: &str = r#"{"replies": [
  {"match": {"body_text_contains": "fmt-openai"}, "reply": {"json": {
     "choices": [{"message": {"role": "assistant", "content": "x"}}],
     "usage": {"prompt_tokens": 100, "completion_tokens": 7,
               "prompt_tokens_details": {"cached_tokens": 60}}}}},
  {"match": {"body_text_contains": "fmt-llamacpp"}, "reply": {"json": {
     "choices": [{"message": {"role": "assistant", "content": "x"}}],
     "usage": {"prompt_tokens": 1, "completion_tokens": 1},
     "timings": {"cache_n": 30, "prompt_n": 12, "prompt_ms": 40, "prompt_per_second": 300.0,
                 "predicted_n": 64, "predicted_ms": 1000, "predicted_per_second": 64.0,
                 "draft_n": 40, "draft_n_accepted": 31}}}},
  {"match": {"body_text_contains": "fmt-vllm"}, "reply": {"json": {
     "choices": [{"message": {"role": "assistant", "content": "x"}}],
     "usage": {"prompt_tokens": 120, "completion_tokens": 50,
               "prompt_tokens_details": {"cached_tokens": 20}},
     "metrics": {"speculative_decoding": {"num_draft_tokens": 30, "num_accepted_draft_tokens": 21},
                 "time_to_first_token_ms": 200.0, "mean_itl_ms": 20.0}}}},
  {"match": {"body_text_contains": "fmt-anthropic"}, "reply": {"frames": [
     "{\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":11,\"cache_read_input_tokens\":7,\"output_tokens\":1}}}",
     "{\"type\":\"message_delta\",\"usage\":{\"output_tokens\":25}}"]}},
  {"match": {"body_text_contains": "fmt-nousage"}, "reply": {"json": {
     "choices": [{"message": {"role": "assistant", "content": "x"}}]}}},
  {"match": {"body_text_contains": "fmt-failed"}, "reply": {"status": 400,
     "error": {"message": "the prompt is too long for this model"}}}
]}"#;

#[tokio::test]
async fn token_usage_in_every_format_reaches_the_history() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = dir.path().join("formats.json");
    std::fs::write(&fixture, FORMATS).unwrap();
    let args: &'static str = Box::leak(format!("--fixture {}", fixture.display()).into_boxed_str());
    let h = Harness::start(&[model("a", args)], "").await;
    for (format, stream) in [
        ("fmt-openai", false),
        ("fmt-llamacpp", false),
        ("fmt-vllm", false),
        ("fmt-anthropic", true),
    ] {
        chat_ok(&h, "a", format, stream).await;
    }
    let failed = h
        .http
        .post(h.url("/v1/chat/completions"))
        .json(&json!({"model": "a", "messages": [{"role": "user", "content": "fmt-failed"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(failed.status(), 400);
    failed.bytes().await.unwrap();
    let rows = page(&h, "order=asc").await["data"].clone();
    let tokens = |i: usize| rows[i]["tokens"].clone();
    assert_eq!(tokens(0)["input_tokens"], 100);
    assert_eq!(tokens(0)["cache_tokens"], 60);
    assert_eq!(tokens(0)["draft_tokens"], -1);
    assert_eq!(
        tokens(1),
        json!({"cache_tokens": 30, "draft_tokens": 40, "draft_acc_tokens": 31,
               "input_tokens": 12, "output_tokens": 64,
               "prompt_per_second": 300.0, "tokens_per_second": 64.0})
    );
    assert!(
        rows[1]["duration_ms"].as_u64().unwrap() >= 1040,
        "llama.cpp's own time counts"
    );
    assert_eq!(
        tokens(2),
        json!({"cache_tokens": 20, "draft_tokens": 30, "draft_acc_tokens": 21,
               "input_tokens": 120, "output_tokens": 50,
               "prompt_per_second": 500.0, "tokens_per_second": 50.0})
    );
    assert_eq!(
        (
            &tokens(3)["input_tokens"],
            &tokens(3)["output_tokens"],
            &tokens(3)["cache_tokens"]
        ),
        (&json!(11), &json!(25), &json!(7))
    );
    assert_eq!(rows[3]["resp_content_type"], "text/event-stream");
    assert_eq!(rows[4]["resp_status_code"], 400);
    assert_eq!(
        rows[4]["error_msg"],
        "the prompt is too long for this model"
    );

    let stats: Value = h
        .http
        .get(h.url("/api/metrics/stats?model=a"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(stats["total_requests"], 5);
    assert_eq!(stats["total_input_tokens"], 100 + 12 + 120 + 11);
    assert_eq!(stats["total_cache_tokens"], 60 + 30 + 20 + 7);
    assert_eq!(stats["prompt_histogram"]["p50"], 400.0, "{stats}");
    let none: Value = h
        .http
        .get(h.url("/api/metrics/stats?model=nobody"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(none["total_requests"], 0);
    assert_eq!(none["gen_histogram"], Value::Null);
    h.shutdown().await;
}

#[tokio::test]
async fn a_row_without_usage_has_every_token_figure_zero_and_one_with_some_has_minus_one_for_the_rest()
 {
    let dir = tempfile::tempdir().unwrap();
    let fixture = dir.path().join("formats.json");
    std::fs::write(&fixture, FORMATS).unwrap();
    let args: &'static str = Box::leak(format!("--fixture {}", fixture.display()).into_boxed_str());
    let h = Harness::start(&[model("a", args)], "").await;
    chat_ok(&h, "a", "fmt-nousage", false).await;
    chat_ok(&h, "a", "fmt-openai", false).await;
    let rows = page(&h, "order=asc").await["data"].clone();
    assert_eq!(
        rows[0]["tokens"],
        json!({"cache_tokens": 0, "draft_tokens": 0, "draft_acc_tokens": 0,
               "input_tokens": 0, "output_tokens": 0,
               "prompt_per_second": 0.0, "tokens_per_second": 0.0}),
        "llama-swap leaves every figure 0 when it parsed no usage"
    );
    let some = &rows[1]["tokens"];
    assert_eq!(
        (
            &some["input_tokens"],
            &some["cache_tokens"],
            &some["draft_tokens"],
            &some["draft_acc_tokens"],
            &some["prompt_per_second"]
        ),
        (
            &json!(100),
            &json!(60),
            &json!(-1),
            &json!(-1),
            &json!(-1.0)
        ),
        "once some usage is parsed, what was not reported is -1: {some}"
    );
    h.shutdown().await;
}

fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

fn rfc3339(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms).unwrap().to_string()
}

#[tokio::test]
async fn a_rows_timestamp_is_its_completion_and_start_and_end_select_by_it() {
    let h = Harness::start(&[model("a", "--gate-closed")], "").await;
    let held = h.spawn(h.chat("a", None, false));
    h.wait_held("a", 1).await;
    // The request arrived at or before `between`; it ends after it (the
    // clock is read again until it has passed `between`).
    let between = now_ms();
    while now_ms() <= between {
        tokio::task::yield_now().await;
    }
    h.open_gate("a").await;
    let (status, _) = tokio::time::timeout(crate::support::LIMIT, held)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status, 200);
    let after = now_ms();
    let row = page(&h, "").await["data"][0].clone();
    let stamped = jiff::Timestamp::from_str(row["timestamp"].as_str().unwrap())
        .unwrap()
        .as_millisecond();
    assert!(
        (between + 1..=after).contains(&stamped),
        "{stamped} is not the completion (between {between} and {after}): {row}"
    );
    // `start` and `end` cover whole seconds, as llama-swap's (it keeps its
    // times in seconds): the row's second, written as llama-swap prints it,
    // selects it from either side; the seconds around it do not.
    let second = stamped - stamped.rem_euclid(1000);
    let since = |ms: i64| format!("start={}", rfc3339(ms));
    let until = |ms: i64| format!("end={}", rfc3339(ms));
    assert_eq!(page(&h, &since(second)).await["total"], 1);
    assert_eq!(page(&h, &since(second + 999)).await["total"], 1);
    assert_eq!(page(&h, &since(second + 1000)).await["total"], 0);
    assert_eq!(page(&h, &until(second)).await["total"], 1);
    assert_eq!(page(&h, &until(second - 1)).await["total"], 0);
    h.shutdown().await;
}

/// `text` in `encoding` (`gzip`, `deflate`, `br` or `zstd`).
fn encoded(encoding: &str, text: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    match encoding {
        "gzip" => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(text).unwrap();
            e.finish().unwrap()
        }
        "deflate" => {
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(text).unwrap();
            e.finish().unwrap()
        }
        "zstd" => zstd::bulk::compress(text, 1).unwrap(),
        "br" => {
            // One uncompressed meta-block (RFC 7932 9.2): WBITS=16, ISLAST=0,
            // MNIBBLES=4, MLEN-1, ISUNCOMPRESSED=1; then ISLAST, ISLASTEMPTY.
            let len = u32::try_from(text.len() - 1).unwrap();
            let bits: u32 = (len << 4) | (1 << 20);
            let mut out = bits.to_le_bytes()[..3].to_vec();
            out.extend_from_slice(text);
            out.push(0b11);
            out
        }
        other => panic!("{other}"),
    }
}

const USAGE_ANSWER: &str = r#"{"choices":[{"message":{"role":"assistant","content":"x"}}],"usage":{"prompt_tokens":21,"completion_tokens":8,"prompt_tokens_details":{"cached_tokens":5}}}"#;

/// An upstream that answers every chat with [`USAGE_ANSWER`] in the encoding
/// its prompt names (`enc-gzip`, ...). Not mockswap: it sends no encoded bodies.
async fn encoding_upstream() -> (u16, tokio::task::JoinHandle<()>) {
    use axum::response::IntoResponse as _;
    async fn answer(body: axum::body::Bytes) -> axum::response::Response {
        let text = String::from_utf8_lossy(&body);
        let encoding = ["gzip", "deflate", "br", "zstd"]
            .into_iter()
            .find(|e| text.contains(&format!("enc-{e}")))
            .unwrap_or("identity");
        let bytes = if encoding == "identity" {
            USAGE_ANSWER.as_bytes().to_vec()
        } else {
            encoded(encoding, USAGE_ANSWER.as_bytes())
        };
        (
            [
                ("content-type", "application/json"),
                ("content-encoding", encoding),
            ],
            bytes,
        )
            .into_response()
    }
    serve_chat(axum::routing::post(answer)).await
}

#[tokio::test]
async fn usage_of_an_encoded_answer_is_counted_and_the_client_gets_the_encoded_bytes() {
    let (port, upstream) = encoding_upstream().await;
    let h = Harness::start_yaml(&format!(
        "models:\n  a:\n    cmd: sleep 300\n    proxy: http://127.0.0.1:{port}\n    checkEndpoint: none\n"
    ))
    .await;
    let encodings = ["gzip", "deflate", "br", "zstd"];
    for encoding in encodings {
        let response = h
            .http
            .post(h.url("/v1/chat/completions"))
            .json(&json!({"model": "a",
                          "messages": [{"role": "user", "content": format!("enc-{encoding}")}]}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{encoding}");
        assert_eq!(response.headers()["content-encoding"], encoding);
        let bytes = response.bytes().await.unwrap();
        assert_eq!(
            &bytes[..],
            &encoded(encoding, USAGE_ANSWER.as_bytes())[..],
            "{encoding}: the client's bytes changed"
        );
    }
    let rows = page(&h, "order=asc").await["data"].clone();
    for (i, encoding) in encodings.iter().enumerate() {
        let tokens = &rows[i]["tokens"];
        assert_eq!(
            (
                &tokens["input_tokens"],
                &tokens["output_tokens"],
                &tokens["cache_tokens"]
            ),
            (&json!(21), &json!(8), &json!(5)),
            "{encoding}: {}",
            rows[i]
        );
        assert!(rows[i]["error_msg"].is_null(), "{encoding}: {}", rows[i]);
    }
    h.shutdown().await;
    upstream.abort();
}

fn load(yaml: &str) -> Result<llama_swap_server::config::Loaded, String> {
    llama_swap_server::config::Config::loader()
        .yaml("test.yaml", yaml)
        .load()
        .map_err(|e| e.to_string())
}

#[test]
fn the_history_keys_are_read_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let yaml = format!(
        "models: {{}}\nstore:\n  path: {}\n  maxRows: 10\n  maxAge: 24h\n\
         metricsMaxInMemory: 5\ncaptureBuffer: 2\n\
         ui:\n  activity:\n    session_id: [\" X-Conv \", x-conv, X-Other]\n",
        db.display()
    );
    let loaded = load(&yaml).unwrap();
    let activity = &loaded.config.activity;
    assert_eq!(activity.store.path.as_deref(), Some(db.as_path()));
    assert_eq!(activity.store.retention.max_rows, 10);
    assert_eq!(
        activity.store.retention.max_age,
        Some(std::time::Duration::from_secs(86_400))
    );
    assert_eq!(activity.max_in_memory, 5);
    assert_eq!(activity.capture_buffer, 2 * 1024 * 1024);
    assert_eq!(activity.session_headers, ["X-Conv", "X-Other"]);
    let warned: Vec<String> = loaded.warnings.iter().map(ToString::to_string).collect();
    assert!(
        !warned.iter().any(|w| w.contains("store")
            || w.contains("captureBuffer")
            || w.contains("metricsMaxInMemory")
            || w.contains("ui")),
        "{warned:?}"
    );

    let defaults = load("models: {}\n").unwrap().config.activity;
    assert_eq!(defaults.store.path, None);
    assert_eq!(
        (defaults.max_in_memory, defaults.capture_buffer),
        (1000, 5 << 20)
    );
    assert_eq!(
        defaults.session_headers,
        ["X-Session-ID", "X-Litellm-Session-Id"]
    );
    // llama-swap's readings of out-of-range values: 1000 rows, captures off.
    let odd = load("models: {}\nmetricsMaxInMemory: 0\ncaptureBuffer: -1\n").unwrap();
    assert_eq!(
        (
            odd.config.activity.max_in_memory,
            odd.config.activity.capture_buffer
        ),
        (1000, 0)
    );

    for (bad, key) in [
        ("store:\n  path: /x/y.db\n  maxAge: soon\n", "store.maxAge"),
        ("store:\n  path: /x/y.db\n  maxRows: -1\n", "store.maxRows"),
        ("store: {}\n", "store.path"),
        (
            "ui:\n  activity:\n    session_id: 5\n",
            "ui.activity.session_id",
        ),
    ] {
        let error = load(&format!("models: {{}}\n{bad}")).unwrap_err();
        assert!(error.contains(key), "{bad}: {error}");
    }
}

#[tokio::test]
async fn rows_name_the_session_and_the_api_key_and_memory_keeps_metrics_max_in_memory() {
    let h = Harness::start(
        &[model("a", "")],
        "apiKeys: [sk-one, sk-two]\nmetricsMaxInMemory: 2\nui:\n  activity:\n    session_id: [X-Conversation]\n",
    )
    .await;
    for (key, session) in [("sk-one", "c-1"), ("sk-two", "c-2"), ("sk-two", "c-3")] {
        let response = h
            .http
            .post(h.url("/v1/chat/completions"))
            .bearer_auth(key)
            .header("X-Conversation", session)
            .json(&json!({"model": "a", "messages": [{"role": "user", "content": "hi"}]}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        response.bytes().await.unwrap();
    }
    let page: Value = h
        .http
        .get(h.url("/api/metrics/activity"))
        .bearer_auth("sk-one")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        page["total"], 2,
        "metricsMaxInMemory bounds the in-memory history: {page}"
    );
    assert_eq!(page["data"][0]["session_id"], "c-3");
    assert_eq!(page["data"][0]["api_key"], "key1");
    assert!(!page.to_string().contains("sk-two"), "a key leaked: {page}");
    let by_key: Value = h
        .http
        .get(h.url("/api/metrics/activity?key=key1"))
        .bearer_auth("sk-one")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(by_key["total"], 2);
    h.shutdown().await;
}

#[tokio::test]
async fn metrics_count_the_rows_the_history_database_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let history = open(&dir.path().join("history.db"));
    let h = Harness::start_with(&[model("a", "")], "", with_history(&history)).await;
    for i in 0..3 {
        chat_ok(&h, "a", &format!("q{i}"), false).await;
    }
    // The rows are written off the request path: the page waits for them,
    // and after it the counters say what became of them.
    assert_eq!(page(&h, "").await["total"], 3);
    let metrics = h
        .http
        .get(h.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for (outcome, n) in [("written", 3), ("dropped", 0), ("failed", 0)] {
        let line = format!("llamaswap_history_rows_total{{outcome=\"{outcome}\"}} {n}\n");
        assert!(metrics.contains(&line), "no {line:?} in:\n{metrics}");
    }
    assert!(metrics.ends_with("# EOF\n"), "{metrics}");
    h.shutdown().await;
}

#[tokio::test]
async fn a_post_naming_an_unknown_model_is_a_404_row_as_in_llama_swap_and_a_get_is_none() {
    let h = Harness::start(&[model("a", "")], "").await;
    let response = h
        .http
        .post(h.url("/v1/chat/completions"))
        .header("x-priority", "10")
        .json(&json!({"model": "nope", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
    // A GET naming a model in its query is refused too, and leaves no row
    // (llama-swap records POSTs only).
    let response = h.http.get(h.url("/props?model=nope")).send().await.unwrap();
    assert_eq!(response.status(), 404);
    chat_ok(&h, "a", "known", false).await;
    let data = page(&h, "").await["data"].clone();
    let rows = data.as_array().unwrap();
    assert_eq!(rows.len(), 2, "{data}");
    let unknown = &rows[1];
    assert_eq!(unknown["model"], "nope", "{unknown}");
    assert_eq!(unknown["req_path"], "/v1/chat/completions");
    assert_eq!(unknown["resp_status_code"], 404);
    assert!(
        unknown["error_msg"]
            .as_str()
            .is_some_and(|m| m.contains("nope")),
        "{unknown}"
    );
    assert_eq!(unknown["tokens"]["input_tokens"], 0, "{unknown}");
    assert_eq!(unknown["tokens"]["cache_tokens"], 0, "{unknown}");
    assert_eq!(unknown["has_capture"], false);
    assert_eq!(rows[0]["model"], "a");
    assert_eq!(page(&h, "model=nope").await["total"], 1);
    h.shutdown().await;
}

/// Serves `chat` as `/v1/chat/completions` on a free loopback port.
async fn serve_chat(chat: axum::routing::MethodRouter) -> (u16, tokio::task::JoinHandle<()>) {
    let app = axum::Router::new().route("/v1/chat/completions", chat);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (port, server)
}

/// An upstream whose answer the prompt names: `case-<name>` picks a
/// (status, content type, body) from `cases`. Not mockswap: these are the
/// odd answers real upstreams send.
async fn canned_upstream(
    cases: &'static [(&'static str, u16, Option<&'static str>, &'static [u8])],
) -> (u16, tokio::task::JoinHandle<()>) {
    use axum::response::IntoResponse as _;
    let answer = move |body: axum::body::Bytes| async move {
        let text = String::from_utf8_lossy(&body);
        let (_, status, content_type, bytes) = cases
            .iter()
            .find(|(name, ..)| text.contains(&format!("case-{name}\"")))
            .expect("a known case");
        let mut response =
            (http::StatusCode::from_u16(*status).unwrap(), bytes.to_vec()).into_response();
        response.headers_mut().remove("content-type");
        if let Some(content_type) = content_type {
            response
                .headers_mut()
                .insert("content-type", content_type.parse().unwrap());
        }
        response
    };
    serve_chat(axum::routing::post(answer)).await
}

/// Sends each case in turn (the whole answer read) and returns its row.
async fn rows_of_cases(
    cases: &'static [(&'static str, u16, Option<&'static str>, &'static [u8])],
) -> Vec<Value> {
    let (port, upstream) = canned_upstream(cases).await;
    let h = Harness::start_yaml(&format!(
        "models:\n  a:\n    cmd: sleep 300\n    proxy: http://127.0.0.1:{port}\n    checkEndpoint: none\n"
    ))
    .await;
    for (name, status, _, body) in cases {
        let response = h
            .http
            .post(h.url("/v1/chat/completions"))
            .json(&json!({"model": "a",
                          "messages": [{"role": "user", "content": format!("case-{name}")}]}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), *status, "{name}");
        assert_eq!(&response.bytes().await.unwrap()[..], *body, "{name}");
    }
    let rows = page(&h, &format!("order=asc&limit={}", cases.len())).await["data"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(rows.len(), cases.len());
    h.shutdown().await;
    upstream.abort();
    rows
}

#[tokio::test]
async fn an_answer_without_a_body_is_recorded_with_its_status_not_as_a_client_that_left() {
    static CASES: &[(&str, u16, Option<&str>, &[u8])] = &[
        ("500", 500, Some("application/json"), b""),
        ("502", 502, None, b""),
        ("599", 599, Some("text/plain"), b""),
        ("200", 200, Some("application/json"), b""),
    ];
    let rows = rows_of_cases(CASES).await;
    let errors: Vec<(&Value, &Value)> = rows
        .iter()
        .map(|row| (&row["error_msg"], &row["error"]))
        .collect();
    assert_eq!(
        errors,
        [
            (&json!("500 Internal Server Error"), &Value::Null),
            (&json!("502 Bad Gateway"), &Value::Null),
            (&json!("HTTP 599"), &Value::Null),
            (&Value::Null, &Value::Null),
        ],
        "{rows:#?}"
    );
}

/// As llama-swap's: a row for each POST to a model endpoint, directly or
/// through `/upstream/<model>/`; a health check, a GET or another path
/// through `/upstream` keeps none (it is in flight while it runs).
#[tokio::test]
async fn only_posts_to_model_endpoints_keep_history_rows() {
    let h = Harness::start(&[model("a", "")], "").await;
    let chat = json!({"model": "a", "messages": [{"role": "user", "content": "hi"}]});
    let calls = [
        h.http.get(h.url("/upstream/a/health")),
        h.http.post(h.url("/upstream/a/v1/whatever")).json(&chat),
        h.http.get(h.url("/props?model=a")),
        h.http
            .post(h.url("/upstream/a/v1/chat/completions"))
            .json(&chat),
        h.http.post(h.url("/v1/chat/completions")).json(&chat),
    ];
    for call in calls {
        let response = call.send().await.unwrap();
        response.bytes().await.unwrap();
    }
    let rows = page(&h, "order=asc").await;
    let paths: Vec<&Value> = rows["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| &row["req_path"])
        .collect();
    assert_eq!(
        paths,
        [
            &json!("/v1/chat/completions"),
            &json!("/v1/chat/completions")
        ],
        "{rows}"
    );
    assert_eq!(rows["total"], 2);
    h.shutdown().await;
}

#[tokio::test]
async fn usage_in_pretty_printed_json_and_in_json_sent_as_text_is_counted() {
    const PRETTY: &[u8] = b"{\n  \"choices\": [],\n  \"usage\": {\n    \"prompt_tokens\": 12,\n    \"completion_tokens\": 34\n  }\n}\n";
    const LINE: &[u8] = br#"{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":34}}"#;
    static CASES: &[(&str, u16, Option<&str>, &[u8])] = &[
        ("pretty", 200, Some("application/json"), PRETTY),
        ("text", 200, Some("text/plain; charset=utf-8"), LINE),
        ("untyped", 200, None, LINE),
        ("binary", 200, Some("application/octet-stream"), LINE),
    ];
    let rows = rows_of_cases(CASES).await;
    let counts: Vec<(&Value, &Value)> = rows
        .iter()
        .map(|row| {
            (
                &row["tokens"]["input_tokens"],
                &row["tokens"]["output_tokens"],
            )
        })
        .collect();
    let (twelve, thirty_four, zero) = (json!(12), json!(34), json!(0));
    assert_eq!(
        counts,
        [
            (&twelve, &thirty_four),
            (&twelve, &thirty_four),
            (&twelve, &thirty_four),
            (&zero, &zero),
        ],
        "a binary answer is not scanned: {rows:#?}"
    );
}
