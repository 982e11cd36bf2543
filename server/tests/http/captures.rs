//! Captures over HTTP: `GET /api/captures/{id}` returns what was sent and
//! answered (a stream as the client got it), with secrets redacted; the
//! buffer drops the oldest when full; rows say `has_capture`.

use base64::Engine as _;
use llama_swap_server::{HttpOptions, ServeOptions};
use serde_json::{Value, json};

use crate::support::{Harness, model};

const KEY: &str = "sk-capture-test-key";

async fn get(h: &Harness, path: &str) -> (u16, Value) {
    let response = h
        .http
        .get(h.url(path))
        .bearer_auth(KEY)
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

fn decode(value: &Value) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(value.as_str().unwrap())
        .unwrap()
}

#[tokio::test]
async fn a_capture_holds_the_request_and_the_streamed_answer_as_sent_with_secrets_redacted() {
    let h = Harness::start(&[model("a", "")], &format!("apiKeys: [{KEY}]\n")).await;
    let body = json!({"model": "a", "stream": true,
                      "messages": [{"role": "user", "content": format!("my key is {KEY}")}]});
    let response = h
        .http
        .post(h.url("/v1/chat/completions"))
        .bearer_auth(KEY)
        .header("X-Session-ID", "s-42")
        .header("Cookie", "theme=dark")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let sent = response.bytes().await.unwrap();

    let (status, page) = get(&h, "/api/metrics/activity").await;
    assert_eq!(status, 200);
    let row = &page["data"][0];
    assert_eq!(row["has_capture"], true, "{row}");
    let id = row["id"].as_u64().unwrap();
    let (status, capture) = get(&h, &format!("/api/captures/{id}")).await;
    assert_eq!(status, 200, "{capture}");
    assert_eq!(capture["id"], id);
    assert_eq!(capture["req_path"], "/v1/chat/completions");
    assert_eq!(capture["req_headers"]["X-Session-Id"], "s-42");
    assert_eq!(capture["req_headers"]["Cookie"], "[REDACTED]");
    assert_eq!(capture["resp_headers"]["Content-Type"], "text/event-stream");
    // The echo repeats the key: redacted there too, the rest as the client got it.
    let expected = String::from_utf8(sent.to_vec())
        .unwrap()
        .replace(KEY, "[REDACTED]");
    assert_eq!(
        String::from_utf8(decode(&capture["resp_body"])).unwrap(),
        expected,
        "the stream as the client got it"
    );
    let request: Value = serde_json::from_slice(&decode(&capture["req_body"])).unwrap();
    assert_eq!(request["messages"][0]["content"], "my key is [REDACTED]");
    assert!(
        !capture.to_string().contains(KEY),
        "the key appears in the capture: {capture}"
    );
    h.shutdown().await;
}

#[tokio::test]
async fn a_full_buffer_drops_the_oldest_captures() {
    let options = ServeOptions::default().http(HttpOptions::default().capture_buffer(8 * 1024));
    let h = Harness::start_with(&[model("a", "")], &format!("apiKeys: [{KEY}]\n"), options).await;
    // Prompts of pseudo-random letters: they do not compress away, and the
    // echo answers them back.
    let mut seed = 7u64;
    for _ in 0..12 {
        let prompt: String = (0..1500)
            .map(|_| {
                seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                char::from(b'a' + u8::try_from(seed >> 59).unwrap())
            })
            .collect();
        let response = h
            .http
            .post(h.url("/v1/chat/completions"))
            .bearer_auth(KEY)
            .json(&json!({"model": "a", "messages": [{"role": "user", "content": prompt}]}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        response.bytes().await.unwrap();
    }
    let (_, page) = get(&h, "/api/metrics/activity?order=asc").await;
    let kept: Vec<bool> = page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["has_capture"].as_bool().unwrap())
        .collect();
    assert_eq!(kept.len(), 12);
    assert!(!kept[0], "the oldest went: {kept:?}");
    assert!(kept[11], "the newest is kept: {kept:?}");
    let first_kept = kept.iter().position(|k| *k).unwrap();
    assert!(
        kept[first_kept..].iter().all(|k| *k),
        "kept rows are the newest: {kept:?}"
    );
    assert_eq!(get(&h, "/api/captures/1").await.0, 404);
    assert_eq!(get(&h, "/api/captures/12").await.0, 200);
    h.shutdown().await;
}

#[tokio::test]
async fn bad_and_missing_capture_ids_are_told_apart() {
    let h = Harness::start(&[model("a", "")], &format!("apiKeys: [{KEY}]\n")).await;
    let (status, body) = get(&h, "/api/captures/abc").await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["param"], "id");
    assert_eq!(body["error"]["message"], "invalid capture ID");
    let (status, body) = get(&h, "/api/captures/999").await;
    assert_eq!(status, 404);
    assert_eq!(body["error"]["code"], "capture_not_found");
    // As llama-swap reads ids (Go's Atoi): a negative one names no row, one
    // past 64 bits is not a number.
    let (status, body) = get(&h, "/api/captures/-1").await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (404, &json!("capture_not_found"))
    );
    let (status, _) = get(&h, "/api/captures/9223372036854775808").await;
    assert_eq!(status, 400);
    h.shutdown().await;
}

#[tokio::test]
async fn with_captures_off_rows_say_so_and_nothing_is_kept() {
    let options = ServeOptions::default().http(HttpOptions::default().capture_buffer(0));
    let h = Harness::start_with(&[model("a", "")], &format!("apiKeys: [{KEY}]\n"), options).await;
    let response = h
        .http
        .post(h.url("/v1/chat/completions"))
        .bearer_auth(KEY)
        .json(&json!({"model": "a", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    response.bytes().await.unwrap();
    let (_, page) = get(&h, "/api/metrics/activity").await;
    assert_eq!(page["data"][0]["has_capture"], false);
    let (status, body) = get(&h, "/api/captures/1").await;
    assert_eq!(status, 404);
    assert!(
        body["error"]["message"].as_str().unwrap().contains("off"),
        "{body}"
    );
    h.shutdown().await;
}
