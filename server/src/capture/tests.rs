#![allow(clippy::unwrap_used, clippy::expect_used)]

use bytes::Bytes;
use http::{HeaderMap, HeaderValue};

use super::*;

fn request_headers() -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert("content-type", HeaderValue::from_static("application/json"));
    h.insert(
        "authorization",
        HeaderValue::from_static("Bearer sk-secret"),
    );
    h.insert("x-api-key", HeaderValue::from_static("sk-secret"));
    h.insert("cookie", HeaderValue::from_static("session=abc"));
    h.insert("x-session-id", HeaderValue::from_static("s-1"));
    h.insert(
        "x-echo",
        HeaderValue::from_static("key is sk-live-123 here"),
    );
    h
}

fn recorder(body: &str, limit: usize) -> Recorder {
    let mut r = Recorder::new(
        "/v1/chat/completions?x=1",
        &request_headers(),
        Some(&Bytes::from(body.to_owned())),
        limit,
    );
    let mut resp = HeaderMap::new();
    resp.insert(
        "content-type",
        HeaderValue::from_static("text/event-stream"),
    );
    resp.insert("set-cookie", HeaderValue::from_static("a=b"));
    resp.insert("content-encoding", HeaderValue::from_static("gzip"));
    r.response_headers(&resp, true);
    r.body(&Bytes::from_static(b"data: {\"a\":1}\n\n"));
    r.body_decoded(b"data: [DONE]\n\n");
    r
}

#[tokio::test]
async fn a_capture_comes_back_as_llama_swaps_shape_with_secrets_redacted() {
    let captures = Captures::new(1 << 20).unwrap();
    captures.set_secrets(vec!["sk-live-123".into(), String::new()]);
    assert!(captures.submit(7, recorder(r#"{"model":"m","key":"sk-live-123"}"#, 1 << 20)));
    captures.caught_up().await;
    let capture = captures.get(7).expect("kept");
    assert_eq!(capture.req_path, "/v1/chat/completions");
    assert_eq!(capture.req_headers["Authorization"], "[REDACTED]");
    assert_eq!(capture.req_headers["X-Api-Key"], "[REDACTED]");
    assert_eq!(capture.req_headers["Cookie"], "[REDACTED]");
    assert_eq!(capture.req_headers["X-Session-Id"], "s-1");
    assert_eq!(capture.req_headers["X-Echo"], "key is [REDACTED] here");
    assert_eq!(capture.req_body, br#"{"model":"m","key":"[REDACTED]"}"#);
    assert_eq!(capture.resp_headers["Set-Cookie"], "[REDACTED]");
    assert!(
        !capture.resp_headers.contains_key("Content-Encoding"),
        "the body is kept decoded"
    );
    assert_eq!(capture.resp_body, b"data: {\"a\":1}\n\ndata: [DONE]\n\n");
    let json = serde_json::to_value(&capture).unwrap();
    assert_eq!(json["id"], 7);
    assert_eq!(
        json["req_body"],
        "eyJtb2RlbCI6Im0iLCJrZXkiOiJbUkVEQUNURURdIn0="
    );
    assert!(captures.get(8).is_none());
}

/// A large request body is held by reference, not copied on the request
/// path, and comes back whole (secrets redacted, with or without secrets
/// to redact); the capture thread lets go of it once it is stored, so a
/// recorder kept for reuse does not hold it.
#[tokio::test]
async fn a_large_request_body_is_held_not_copied_and_comes_back_whole() {
    for secrets in [vec![], vec!["sk-live-123".to_owned()]] {
        let captures = Captures::new(1 << 20).unwrap();
        captures.set_secrets(secrets.clone());
        let prompt = "p".repeat(40 * 1024);
        let text = format!(r#"{{"model":"m","key":"sk-live-123","prompt":"{prompt}"}}"#);
        let body = Bytes::from(text.clone());
        let mut r = captures.recorder("/v1/chat/completions", &request_headers(), Some(&body));
        assert!(
            r.capacity() < 4 * 1024,
            "the body was copied: {} bytes of room",
            r.capacity()
        );
        assert!(!body.is_unique(), "the recorder holds the body");
        r.response_headers(&HeaderMap::new(), false);
        r.body(&Bytes::from_static(b"{\"ok\":true}"));
        assert!(captures.submit(3, r));
        captures.caught_up().await;
        assert!(body.is_unique(), "let go once stored");
        let capture = captures.get(3).expect("kept");
        let expected = if secrets.is_empty() {
            text.clone()
        } else {
            text.replace("sk-live-123", "[REDACTED]")
        };
        assert_eq!(capture.req_body, expected.as_bytes());
        assert_eq!(capture.req_path, "/v1/chat/completions");
        assert_eq!(capture.req_headers["Authorization"], "[REDACTED]");
        assert_eq!(capture.resp_body, b"{\"ok\":true}");
    }
    // Past the limit, it is given up as a copied one is.
    let captures = Captures::new(32 * 1024).unwrap();
    let body = Bytes::from(vec![b'x'; 40 * 1024]);
    let r = captures.recorder("/v1/chat/completions", &request_headers(), Some(&body));
    assert!(r.overflowed());
    assert!(body.is_unique());
}

#[tokio::test]
async fn the_oldest_captures_go_when_the_buffer_is_full() {
    // Incompressible bodies of ~3 KiB in a 16 KiB buffer.
    let captures = Captures::new(16 * 1024).unwrap();
    let mut seed = 1u64;
    let mut noise = || {
        (0..3000)
            .map(|_| {
                seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                char::from(b'a' + u8::try_from(seed >> 59).unwrap())
            })
            .collect::<String>()
    };
    for id in 1..=20 {
        assert!(captures.submit(id, recorder(&noise(), 1 << 20)));
    }
    captures.caught_up().await;
    assert!(
        captures.held_bytes() <= 16 * 1024,
        "{}",
        captures.held_bytes()
    );
    assert!(captures.contains(20), "the newest is kept");
    assert!(!captures.contains(1), "the oldest went");
    let kept: Vec<u64> = (1..=20).filter(|id| captures.contains(*id)).collect();
    assert!(kept.len() >= 3, "{kept:?}");
    assert_eq!(
        kept,
        (21 - kept.len() as u64..=20).collect::<Vec<_>>(),
        "a suffix is kept"
    );
}

#[tokio::test]
async fn captures_compressed_together_each_come_back_whole() {
    let captures = Captures::new(1 << 20).unwrap();
    for id in 1..=500 {
        assert!(captures.submit(id, recorder(&format!(r#"{{"n":{id}}}"#), 1 << 20)));
    }
    captures.caught_up().await;
    assert_eq!(captures.len(), 500);
    for id in [1, 2, 250, 499, 500] {
        let capture = captures.get(id).expect("kept");
        assert_eq!(capture.id, id);
        assert_eq!(capture.req_body, format!(r#"{{"n":{id}}}"#).as_bytes());
        assert_eq!(capture.resp_body, b"data: {\"a\":1}\n\ndata: [DONE]\n\n");
    }
    // Together they compress far below one frame each (~300 bytes).
    assert!(
        captures.held_bytes() < 500 * (ENTRY_COST + 100),
        "{}",
        captures.held_bytes()
    );
}

#[tokio::test]
async fn the_index_of_many_small_captures_counts_against_the_budget() {
    // 20 000 captures that compress to almost nothing: what holds memory is
    // their places in the index, and the budget bounds that too.
    let budget = 64 * 1024;
    let captures = Captures::new(budget).unwrap();
    for id in 1..=20_000 {
        assert!(captures.submit(id, recorder("{}", 1 << 20)));
    }
    captures.caught_up().await;
    assert!(captures.held_bytes() <= budget, "{}", captures.held_bytes());
    assert!(captures.len() * ENTRY_COST <= budget, "{}", captures.len());
    assert!(captures.contains(20_000), "the newest is kept");
    assert!(!captures.contains(1), "the oldest went");
    let kept: Vec<u64> = (1..=20_000).filter(|id| captures.contains(*id)).collect();
    assert_eq!(
        kept,
        (20_001 - kept.len() as u64..=20_000).collect::<Vec<_>>(),
        "a suffix is kept"
    );
    assert!(captures.get(20_000).is_some());
}

#[tokio::test]
async fn a_capture_larger_than_the_buffer_is_not_kept() {
    let captures = Captures::new(1024).unwrap();
    let big = "x".repeat(4096);
    let r = recorder(&big, captures.collect_limit());
    assert!(r.overflowed());
    assert!(!captures.submit(1, r));
    captures.caught_up().await;
    assert!(captures.is_empty());
}

#[test]
fn a_body_the_route_leaves_out_is_null_and_a_kept_empty_one_is_empty() {
    let capture = |path: &str| {
        serde_json::to_value(Capture {
            id: 1,
            req_path: path.to_owned(),
            req_headers: BTreeMap::new(),
            req_body: b"in".to_vec(),
            resp_headers: BTreeMap::new(),
            resp_body: Vec::new(),
        })
        .unwrap()
    };
    let speech = capture("/v1/audio/speech");
    assert_eq!(
        (&speech["req_body"], &speech["resp_body"]),
        (&serde_json::json!("aW4="), &serde_json::Value::Null)
    );
    let heard = capture("/v1/audio/transcriptions");
    assert_eq!(
        (&heard["req_body"], &heard["resp_body"]),
        (&serde_json::Value::Null, &serde_json::json!(""))
    );
    let chat = capture("/v1/chat/completions");
    assert_eq!(
        (&chat["req_body"], &chat["resp_body"]),
        (&serde_json::json!("aW4="), &serde_json::json!(""))
    );
}

#[test]
fn audio_and_image_routes_keep_what_llama_swap_keeps() {
    assert!(!Parts::for_path("/v1/audio/speech").resp_body);
    assert!(!Parts::for_path("/v1/audio/transcriptions").req_body);
    assert!(Parts::for_path("/v1/audio/transcriptions").resp_body);
    assert!(!Parts::for_path("/v1/images/edits").req_body);
    assert_eq!(Parts::for_path("/v1/chat/completions"), Parts::ALL);
    let mut r = Recorder::new(
        "/v1/audio/speech",
        &HeaderMap::new(),
        Some(&Bytes::from_static(b"{}")),
        1 << 20,
    );
    assert!(!r.wants_body());
    r.body(&Bytes::from_static(b"RIFF...."));
}

#[test]
fn captures_are_off_with_a_zero_buffer() {
    assert!(Captures::new(0).is_none());
}

#[test]
fn header_names_are_canonical_as_go_writes_them() {
    assert_eq!(canonical("content-type"), "Content-Type");
    assert_eq!(canonical("x-session-id"), "X-Session-Id");
    assert_eq!(canonical("X-API-KEY"), "X-Api-Key");
}

/// Captures `id` through `captures`' own recorders (used again once they
/// come back), with `body` as the request's and `answer` as the response's.
fn capture_through(captures: &Captures, id: u64, body: &str, answer: Option<&str>) {
    let mut r = captures.recorder(
        "/v1/chat/completions",
        &request_headers(),
        Some(&Bytes::from(body.to_owned())),
    );
    if let Some(answer) = answer {
        let mut resp = HeaderMap::new();
        resp.insert("content-type", HeaderValue::from_static("application/json"));
        r.response_headers(&resp, false);
        r.body(&Bytes::from(answer.to_owned()));
    }
    assert!(captures.submit(id, r));
}

#[tokio::test]
async fn a_recorder_used_again_keeps_nothing_of_its_last_capture() {
    let captures = Captures::new(1 << 20).unwrap();
    // A long capture first, then shorter ones in the same recorders.
    for id in 1..=50 {
        capture_through(
            &captures,
            id,
            &"long".repeat(500),
            Some(&"answer".repeat(300)),
        );
    }
    captures.caught_up().await;
    assert!(
        !lock(&captures.spare).recorders.is_empty(),
        "used recorders come back for reuse"
    );
    for id in 51..=100 {
        capture_through(&captures, id, &format!("short {id}"), Some("ok"));
    }
    captures.caught_up().await;
    for id in [51, 75, 100] {
        let capture = captures.get(id).expect("kept");
        assert_eq!(capture.req_body, format!("short {id}").as_bytes());
        assert_eq!(capture.resp_body, b"ok");
        assert_eq!(capture.resp_headers.len(), 1, "{:?}", capture.resp_headers);
    }
    assert_eq!(captures.get(50).expect("kept").resp_body.len(), 1800);
}

#[tokio::test]
async fn a_request_that_got_no_answer_is_captured_with_an_empty_response() {
    let captures = Captures::new(1 << 20).unwrap();
    capture_through(&captures, 1, "asked", None);
    captures.caught_up().await;
    let capture = captures.get(1).expect("kept");
    assert_eq!(capture.req_body, b"asked");
    assert_eq!(capture.req_headers["X-Session-Id"], "s-1");
    assert!(capture.resp_headers.is_empty());
    assert!(capture.resp_body.is_empty());
}

#[tokio::test]
async fn an_answer_that_outgrows_the_limit_is_not_kept_and_its_room_is_not_kept_either() {
    let captures = Captures::new(64 * 1024).unwrap();
    let mut r = captures.recorder("/v1/completions", &HeaderMap::new(), None);
    r.response_headers(&HeaderMap::new(), false);
    for _ in 0..100 {
        r.body(&Bytes::from(vec![b'x'; 1024]));
    }
    assert!(r.overflowed());
    assert!(!r.wants_body());
    assert!(!captures.submit(1, r));
    captures.caught_up().await;
    assert!(captures.is_empty());
    // A recorder holding more than a spare may is freed, not kept.
    let mut big = captures.recorder("/v1/completions", &HeaderMap::new(), None);
    big.body(&Bytes::from(vec![b'y'; 2 * SPARE_ROOM]));
    let before = lock(&captures.spare).recorders.len();
    give_back(&captures.spare, [big]);
    assert_eq!(lock(&captures.spare).recorders.len(), before);
}
