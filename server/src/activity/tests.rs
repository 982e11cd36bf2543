#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use http_body::Frame;
use http_body_util::{BodyExt, Full, StreamBody};

use super::*;
use crate::priority::Priority;

fn sse_headers() -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers
}

fn json_headers() -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json; charset=utf-8"),
    );
    headers
}

#[tokio::test(start_paused = true)]
async fn a_served_request_is_kept_with_priorities_wait_and_duration() {
    let activity = Arc::new(Activity::new(10));
    let mut tracked = activity.begin(
        "qwen",
        "/v1/chat/completions?x=1",
        "req-1",
        Priority::new(-10),
    );
    tracked.admitted(7, 0);
    tokio::time::sleep(Duration::from_millis(250)).await;
    tracked.granted();
    tokio::time::sleep(Duration::from_millis(750)).await;
    tracked.answered(StatusCode::OK, false);
    let body = MeteredBody::new(
        Full::new(Bytes::from_static(
            br#"{"usage":{"prompt_tokens":3,"completion_tokens":10}}"#,
        )),
        &json_headers(),
        tracked,
    );
    body.collect().await.unwrap();
    let rows = activity.recent(10);
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    assert_eq!(row.id, 1);
    assert_eq!(row.request_id, "req-1");
    assert_eq!(row.seq, Some(7));
    assert_eq!(&*row.model, "qwen");
    assert_eq!(row.path, "/v1/chat/completions");
    assert_eq!(
        (row.requested_priority, row.effective_priority),
        (-10, Some(0))
    );
    assert_eq!(row.status, 200);
    assert_eq!(row.error, None);
    assert_eq!(row.queue_ms, Some(250));
    assert_eq!(row.duration_ms, 1000);
    assert_eq!(row.prompt_tokens, Some(3));
    assert_eq!(row.completion_tokens, Some(10));
    // A whole answer's time holds the prompt's too: not a generation speed
    // (llama-swap's -1).
    assert_eq!(row.tokens_per_second, None);
}

#[tokio::test(start_paused = true)]
async fn a_stream_without_timings_gets_its_generation_speed_from_the_stream() {
    let activity = Arc::new(Activity::new(10));
    let mut tracked = activity.begin("qwen", "/v1/chat/completions", "r", Priority::new(0));
    tracked.admitted(1, 0);
    tracked.granted();
    tokio::time::sleep(Duration::from_millis(750)).await;
    tracked.answered(StatusCode::OK, true);
    let body = MeteredBody::new(
        Full::new(Bytes::from_static(
            b"data: {\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":10}}\n\ndata: [DONE]\n\n",
        )),
        &sse_headers(),
        tracked,
    );
    body.collect().await.unwrap();
    let row = &activity.recent(1)[0];
    // 10 tokens over the 0.75 s from the grant to the end.
    let speed = row.tokens_per_second.unwrap();
    assert!((speed - 10.0 / 0.75).abs() < 1e-6, "{speed}");
}

#[tokio::test(start_paused = true)]
async fn a_granted_request_is_in_flight_until_its_body_ends() {
    let activity = Arc::new(Activity::new(10));
    let mut changes = activity.changes();
    let mut tracked = activity.begin("a", "/v1/completions", "r", Priority::new(10));
    tracked.admitted(1, 10);
    assert!(
        activity.in_flight().is_empty(),
        "admitted is not yet running"
    );
    tracked.granted();
    assert!(changes.has_changed().unwrap());
    changes.mark_unchanged();
    let running = activity.in_flight();
    assert_eq!(running.len(), 1);
    assert_eq!(&*running[0].model, "a");
    assert_eq!(running[0].effective_priority, Some(10));
    tracked.answered(StatusCode::OK, true);
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, std::io::Error>>(1);
    let mut body = MeteredBody::new(
        StreamBody::new(tokio_stream_from(rx)),
        &sse_headers(),
        tracked,
    );
    tx.send(Ok(Frame::data(Bytes::from_static(b"data: {}\n\n"))))
        .await
        .unwrap();
    body.frame().await.unwrap().unwrap();
    assert_eq!(activity.in_flight().len(), 1, "still streaming");
    drop(tx);
    assert!(body.frame().await.is_none());
    assert!(activity.in_flight().is_empty());
    assert!(changes.has_changed().unwrap());
    let row = &activity.recent(1)[0];
    assert!(row.stream);
    assert_eq!(row.error, None);
}

fn tokio_stream_from<T: Send + 'static>(
    mut rx: tokio::sync::mpsc::Receiver<T>,
) -> impl futures_util::Stream<Item = T> {
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

#[tokio::test]
async fn a_request_dropped_while_waiting_is_recorded_as_client_closed() {
    let activity = Arc::new(Activity::new(10));
    let mut tracked = activity.begin("a", "/v1/chat/completions", "r", Priority::new(0));
    tracked.admitted(3, 0);
    drop(tracked);
    let row = &activity.recent(1)[0];
    assert_eq!(row.status, 499);
    assert_eq!(row.error.as_deref(), Some("client_closed"));
    assert_eq!(row.queue_ms, None);
}

#[tokio::test]
async fn a_body_dropped_midway_keeps_its_status_and_says_the_client_left() {
    let activity = Arc::new(Activity::new(10));
    let mut tracked = activity.begin("a", "/v1/chat/completions", "r", Priority::new(0));
    tracked.granted();
    tracked.answered(StatusCode::OK, true);
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, std::io::Error>>(1);
    let body = MeteredBody::new(
        StreamBody::new(tokio_stream_from(rx)),
        &sse_headers(),
        tracked,
    );
    drop(body);
    drop(tx);
    let row = &activity.recent(1)[0];
    assert_eq!(
        (row.status, row.error.as_deref()),
        (200, Some("client_closed"))
    );
    assert!(activity.in_flight().is_empty());
}

#[tokio::test]
async fn a_proxy_error_is_recorded_with_its_code() {
    let activity = Arc::new(Activity::new(10));
    let mut tracked = activity.begin("a", "/v1/chat/completions", "r", Priority::new(0));
    tracked.failed(StatusCode::TOO_MANY_REQUESTS, "queue_full");
    drop(tracked);
    let row = &activity.recent(1)[0];
    assert_eq!(
        (row.status, row.error.as_deref()),
        (429, Some("queue_full"))
    );
}

#[tokio::test]
async fn an_error_frame_in_a_stream_marks_the_request_failed() {
    let activity = Arc::new(Activity::new(10));
    let mut tracked = activity.begin("a", "/v1/chat/completions", "r", Priority::new(0));
    tracked.granted();
    tracked.answered(StatusCode::OK, true);
    let body = MeteredBody::new(
        Full::new(Bytes::from_static(
            b"data: {\"error\":{\"message\":\"gone\"}}\n\ndata: [DONE]\n\n",
        )),
        &sse_headers(),
        tracked,
    );
    body.collect().await.unwrap();
    let row = &activity.recent(1)[0];
    assert_eq!(row.error.as_deref(), Some("upstream_failed"));
}

#[tokio::test]
async fn a_body_that_ends_by_length_completes_without_a_final_poll() {
    let activity = Arc::new(Activity::new(10));
    let mut tracked = activity.begin("a", "/v1/embeddings", "r", Priority::new(0));
    tracked.answered(StatusCode::OK, false);
    let mut body = MeteredBody::new(
        Full::new(Bytes::from_static(b"{\"usage\":{\"prompt_tokens\":4}}")),
        &json_headers(),
        tracked,
    );
    body.frame().await.unwrap().unwrap();
    // The server stops here: the body said it has ended.
    drop(body);
    let row = &activity.recent(1)[0];
    assert_eq!(row.error, None);
    assert_eq!(row.prompt_tokens, Some(4));
}

#[tokio::test]
async fn the_ring_keeps_only_the_most_recent_rows() {
    let activity = Arc::new(Activity::new(3));
    for i in 0..5 {
        let mut tracked = activity.begin("a", "/p", &format!("r{i}"), Priority::new(0));
        tracked.failed(StatusCode::SERVICE_UNAVAILABLE, "shutting_down");
    }
    let ids: Vec<String> = activity
        .recent(10)
        .iter()
        .map(|r| r.request_id.to_string())
        .collect();
    assert_eq!(ids, ["r2", "r3", "r4"]);
    assert_eq!(activity.recent(2).len(), 2);
    assert_eq!(activity.recent(2)[1].id, 5);
}

#[tokio::test]
async fn subscribers_receive_rows_as_they_finish() {
    let activity = Arc::new(Activity::new(3));
    let mut feed = activity.subscribe();
    drop(activity.begin("m", "/p", "r", Priority::new(0)));
    let row = feed.try_recv().unwrap();
    assert_eq!(&*row.model, "m");
}

#[tokio::test]
async fn a_later_subscriber_sees_requests_made_before_it_subscribed() {
    let activity = Arc::new(Activity::new(10));
    let mut running = activity.begin("a", "/v1/chat/completions", "running", Priority::new(0));
    running.granted();
    let mut done = activity.begin("a", "/v1/chat/completions", "done", Priority::new(0));
    done.failed(StatusCode::TOO_MANY_REQUESTS, "queue_full");
    drop(done);

    let changes = activity.changes();
    let mut feed = activity.subscribe();
    // What happened before is read, not notified.
    assert!(!changes.has_changed().unwrap());
    let in_flight = activity.in_flight();
    assert_eq!(in_flight.len(), 1);
    assert_eq!(in_flight[0].request_id, "running");
    assert_eq!(activity.recent(10)[0].request_id, "done");
    assert!(feed.try_recv().is_err());

    // What happens after is notified.
    drop(running);
    assert!(changes.has_changed().unwrap());
    assert!(activity.in_flight().is_empty());
    let row = feed.try_recv().unwrap();
    assert_eq!((row.request_id.as_str(), row.id), ("running", 2));
}

#[tokio::test]
async fn rows_are_fed_only_while_a_feed_exists() {
    let activity = Arc::new(Activity::new(10));
    drop(activity.subscribe());
    // A receiver of the channel itself, which no `Feed` counts.
    let mut raw = activity.feed.subscribe();
    drop(activity.begin("m", "/p", "unheard", Priority::new(0)));
    assert!(raw.try_recv().is_err(), "sent with no feed open");
    let mut feed = activity.subscribe();
    drop(activity.begin("m", "/p", "heard", Priority::new(0)));
    assert_eq!(feed.try_recv().unwrap().request_id, "heard");
    assert_eq!(activity.recent(10).len(), 2, "the ring keeps both");
}

#[tokio::test]
async fn in_flight_changes_are_not_bumped_without_a_receiver() {
    let activity = Arc::new(Activity::new(10));
    let mut tracked = activity.begin("m", "/p", "r", Priority::new(0));
    tracked.granted();
    drop(tracked);
    let changes = activity.changes();
    assert_eq!(*changes.borrow(), 0, "bumped with nobody watching");
    let mut tracked = activity.begin("m", "/p", "r", Priority::new(0));
    tracked.granted();
    assert_eq!(*changes.borrow(), 1);
    drop(tracked);
    assert_eq!(*changes.borrow(), 2);
}

#[tokio::test]
async fn id_and_path_survive_the_trip_through_the_in_flight_table() {
    let activity = Arc::new(Activity::new(10));
    let long_id = "a-request-id-longer-than-twenty-four-bytes";
    let mut tracked = activity.begin(
        "m",
        "/upstream/m/some/long/path?q=1",
        long_id,
        Priority::new(0),
    );
    tracked.granted();
    assert_eq!(activity.in_flight()[0].path, "/upstream/m/some/long/path");
    tracked.answered(StatusCode::OK, false);
    drop(tracked);
    let row = &activity.recent(1)[0];
    assert_eq!(row.request_id, long_id);
    assert_eq!(row.path, "/upstream/m/some/long/path");
}

#[tokio::test]
async fn records_of_one_model_share_its_name() {
    let activity = Arc::new(Activity::new(10));
    let mut first = activity.begin("model-a", "/p", "1", Priority::new(0));
    first.granted();
    let second = activity.begin("model-a", "/p", "2", Priority::new(0));
    drop(second);
    let running = &activity.in_flight()[0];
    let finished = &activity.recent(1)[0];
    assert!(Arc::ptr_eq(&running.model, &finished.model));
    let other = activity.begin("model-b", "/p", "3", Priority::new(0));
    drop(other);
    assert_eq!(&*activity.recent(1)[0].model, "model-b");
}

#[tokio::test]
async fn a_full_ring_reuses_the_oldest_rows_allocation_when_nobody_holds_it() {
    let activity = Arc::new(Activity::new(2));
    for i in 0..2 {
        drop(activity.begin("m", "/p", &format!("r{i}"), Priority::new(0)));
    }
    let oldest = Arc::as_ptr(&activity.recent(2)[0]);
    drop(activity.begin("m", "/p", "r2", Priority::new(0)));
    let rows = activity.recent(2);
    assert_eq!(Arc::as_ptr(&rows[1]), oldest, "a new allocation");
    assert_eq!(rows[1].request_id, "r2");
    assert_eq!(rows[1].id, 3);
    // A row still held elsewhere is left to its holder.
    let held = Arc::clone(&rows[0]);
    drop(rows);
    drop(activity.begin("m", "/p", "r3", Priority::new(0)));
    assert_eq!(held.request_id, "r1");
    let ids: Vec<String> = activity
        .recent(2)
        .iter()
        .map(|r| r.request_id.to_string())
        .collect();
    assert_eq!(ids, ["r2", "r3"]);
}

#[tokio::test]
async fn rows_are_fed_in_the_order_of_their_ids() {
    let activity = Arc::new(Activity::new(4));
    let mut feed = activity.subscribe();
    let finishers: Vec<_> = (0..4)
        .map(|i| {
            let activity = Arc::clone(&activity);
            std::thread::spawn(move || {
                for j in 0..50 {
                    drop(activity.begin("m", "/p", &format!("{i}-{j}"), Priority::new(0)));
                }
            })
        })
        .collect();
    for finisher in finishers {
        finisher.join().unwrap();
    }
    let mut last = 0;
    let mut seen = 0;
    loop {
        match feed.try_recv() {
            Ok(row) => {
                assert!(row.id > last, "{} after {last}", row.id);
                last = row.id;
                seen += 1;
            }
            Err(tokio::sync::broadcast::error::TryRecvError::Lagged(_)) => {}
            Err(_) => break,
        }
    }
    assert_eq!(last, 200);
    assert!(seen > 0);
    let ring: Vec<u64> = activity.recent(4).iter().map(|r| r.id).collect();
    assert_eq!(ring, [197, 198, 199, 200]);
}

#[test]
fn rows_serialize_as_llama_swap_rows_with_our_fields_beside() {
    let row = Finished {
        id: 7,
        request_id: "r".into(),
        time_ms: 1_796_194_093_607,
        model: "m".into(),
        path: "/v1/chat/completions".into(),
        status: 200,
        content_type: Some("application/json".into()),
        effective_priority: Some(10),
        capped_priority: 10,
        requested_priority: 20,
        prompt_tokens: Some(12),
        cached_tokens: Some(4),
        tokens_per_second: Some(50.5),
        selector: Some("fast".into()),
        api_key: Some("ci".into()),
        session_id: Some("s-1".into()),
        ..Finished::default()
    };
    let json = serde_json::to_value(&row).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "id": 7,
            "timestamp": "2026-12-02T06:48:13.607Z",
            "model": "m",
            "req_path": "/v1/chat/completions",
            "resp_content_type": "application/json",
            "resp_status_code": 200,
            "tokens": {
                "cache_tokens": 4, "draft_tokens": -1, "draft_acc_tokens": -1,
                "input_tokens": 12, "output_tokens": 0,
                "prompt_per_second": -1.0, "tokens_per_second": 50.5
            },
            "duration_ms": 0,
            "has_capture": false,
            "metadata": {"fifo_priority": "10", "selector": "fast"},
            "request_id": "r",
            "seq": null,
            "requested_priority": 20,
            "capped_priority": 10,
            "effective_priority": 10,
            "queue_ms": null,
            "stream": false,
            "error": null,
            "api_key": "ci",
            "session_id": "s-1"
        })
    );
}

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
        "br" => super::decode::tests::brotli_stored(text),
        other => panic!("{other}"),
    }
}

#[tokio::test]
async fn usage_of_an_encoded_body_is_counted_and_the_client_gets_the_bytes_unchanged() {
    let text = concat!(
        "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n",
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":21,\"completion_tokens\":8,\"prompt_tokens_details\":{\"cached_tokens\":5}}}\n\n",
        "data: [DONE]\n\n",
    );
    for encoding in ["gzip", "deflate", "br", "zstd"] {
        let activity = Arc::new(Activity::new(10));
        let mut tracked = activity.begin("m", "/v1/chat/completions", "r", Priority::new(0));
        tracked.granted();
        tracked.answered(StatusCode::OK, true);
        let bytes = encoded(encoding, text.as_bytes());
        let chunks: Vec<Result<Frame<Bytes>, std::convert::Infallible>> = bytes
            .chunks(5)
            .map(|c| Ok(Frame::data(Bytes::copy_from_slice(c))))
            .collect();
        let mut headers = sse_headers();
        headers.insert(
            header::CONTENT_ENCODING,
            HeaderValue::from_str(encoding).unwrap(),
        );
        let body = MeteredBody::new(
            StreamBody::new(futures_util::stream::iter(chunks)),
            &headers,
            tracked,
        );
        let sent = body.collect().await.unwrap().to_bytes();
        assert_eq!(sent, bytes, "{encoding}: the client's bytes changed");
        let row = &activity.recent(1)[0];
        assert_eq!(
            (row.prompt_tokens, row.completion_tokens, row.cached_tokens),
            (Some(21), Some(8), Some(5)),
            "{encoding}"
        );
        assert_eq!(row.error_msg, None, "{encoding}");
    }
}

#[tokio::test]
async fn a_failed_answer_keeps_the_upstreams_error_message() {
    let activity = Arc::new(Activity::new(10));
    let mut tracked = activity.begin("m", "/v1/chat/completions", "r", Priority::new(0));
    tracked.granted();
    tracked.answered(StatusCode::BAD_REQUEST, false);
    let body = encoded(
        "gzip",
        br#"{"error":{"message":"context too long","code":400}}"#,
    );
    let mut headers = json_headers();
    headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    let body = MeteredBody::new(Full::new(Bytes::from(body)), &headers, tracked);
    body.collect().await.unwrap();
    let row = &activity.recent(1)[0];
    assert_eq!(row.status, 400);
    assert_eq!(row.error_msg.as_deref(), Some("context too long"));
}

/// A body that does not decode is recorded in llama-swap's words: it fails
/// decompressing a 200's body for its usage, decoding an error's for its
/// message.
#[tokio::test]
async fn a_corrupt_encoded_body_is_recorded_as_undecodable_in_llama_swaps_words() {
    for (status, words) in [
        (StatusCode::OK, "response decompression failed: "),
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            "response decode failed: ",
        ),
    ] {
        let activity = Arc::new(Activity::new(10));
        let mut tracked = activity.begin("m", "/v1/chat/completions", "r", Priority::new(0));
        tracked.granted();
        tracked.answered(status, false);
        let mut headers = json_headers();
        headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        let body = MeteredBody::new(
            Full::new(Bytes::from_static(b"plain, not gzip")),
            &headers,
            tracked,
        );
        body.collect().await.unwrap();
        let row = &activity.recent(1)[0];
        assert!(
            row.error_msg
                .as_deref()
                .is_some_and(|m| m.starts_with(words)),
            "{status}: {:?}",
            row.error_msg
        );
    }
}

#[tokio::test]
async fn a_finished_request_leaves_its_capture_with_the_body_as_sent() {
    let captures = crate::capture::Captures::new(1 << 20);
    let activity = Arc::new(Activity::new(10).with_captures(captures));
    let mut tracked = activity.begin("m", "/v1/chat/completions", "r", Priority::new(0));
    let mut headers = HeaderMap::new();
    headers.insert("x-session-id", HeaderValue::from_static("s"));
    tracked.capture_request(&headers, Some(&Bytes::from_static(b"{\"model\":\"m\"}")));
    tracked.granted();
    let response = http::Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(axum::body::Body::from(
            "data: {\"x\":1}\n\ndata: [DONE]\n\n",
        ))
        .unwrap();
    let response = tracked.respond(response);
    let sent = response.into_body().collect().await.unwrap().to_bytes();
    let mut rows: Vec<Finished> = activity.recent(1).iter().map(|r| (**r).clone()).collect();
    assert!(rows[0].has_capture);
    activity.overlay_captures(rows.iter_mut()).await;
    assert!(rows[0].has_capture);
    let capture = activity.captures().unwrap().get(rows[0].id).unwrap();
    assert_eq!(capture.resp_body, sent);
    assert_eq!(capture.req_headers["X-Session-Id"], "s");
}

fn listed(activity: &Arc<Activity>, request_id: &str) -> Tracked {
    let mut tracked = activity.begin("m", "/v1/chat/completions", request_id, Priority::new(4));
    tracked.admitted(3, 5);
    let mut headers = HeaderMap::new();
    headers.insert(header::USER_AGENT, HeaderValue::from_static("curl/8"));
    tracked.listed(
        &http::Method::POST,
        Some(std::net::IpAddr::from([127, 0, 0, 1])),
        &headers,
    );
    tracked
}

#[tokio::test]
async fn a_listed_request_is_in_flight_waiting_until_granted_then_running() {
    let activity = Arc::new(Activity::new(10));
    let mut tracked = listed(&activity, "r");
    let waiting = activity.in_flight();
    assert_eq!(waiting.len(), 1);
    let entry = &waiting[0];
    assert_eq!(entry.id, 1);
    assert_eq!((entry.seq, entry.effective_priority), (Some(3), Some(5)));
    assert_eq!(entry.method, http::Method::POST);
    assert_eq!(entry.req_headers[header::USER_AGENT], "curl/8");
    assert_eq!((entry.granted_ms(), entry.queue_ms()), (None, None));
    tracked.granted();
    assert!(entry.granted_ms().is_some());
    assert!(entry.queue_ms().is_some());
    let mut response = HeaderMap::new();
    response.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    tracked.response_headers(&response);
    assert_eq!(
        entry
            .resp_headers()
            .map(|h| h[header::CONTENT_TYPE].clone()),
        Some(HeaderValue::from_static("text/plain"))
    );
    drop(tracked);
    assert!(activity.in_flight().is_empty());
}

#[tokio::test]
async fn a_request_cancelled_before_any_answer_is_recorded_as_a_503_cancelled() {
    let activity = Arc::new(Activity::new(10));
    let tracked = listed(&activity, "r");
    let id = tracked.in_flight().unwrap().id;
    assert!(!activity.cancel(id + 1), "no such request");
    assert!(activity.cancel(id));
    assert!(tracked.in_flight().unwrap().is_cancelled());
    // Whoever waits on it is told at once.
    tokio::time::timeout(
        Duration::from_secs(5),
        tracked.in_flight().unwrap().cancelled(),
    )
    .await
    .unwrap();
    drop(tracked);
    assert!(!activity.cancel(id), "gone once ended");
    let row = &activity.recent(1)[0];
    assert_eq!(row.status, 503);
    assert_eq!(row.error.as_deref(), Some("cancelled"));
}

#[tokio::test]
async fn a_request_cancelled_mid_answer_keeps_its_status_and_says_cancelled() {
    let activity = Arc::new(Activity::new(10));
    let mut tracked = listed(&activity, "r");
    tracked.granted();
    tracked.answered(StatusCode::OK, true);
    assert!(activity.cancel(tracked.in_flight().unwrap().id));
    drop(tracked);
    let row = &activity.recent(1)[0];
    assert_eq!(row.status, 200);
    assert_eq!(row.error.as_deref(), Some("cancelled"));
}

fn open_history(path: &std::path::Path) -> Arc<History> {
    let settings = crate::store::StoreSettings {
        path: Some(path.to_owned()),
        retention: crate::store::Retention {
            max_rows: 0,
            max_age: None,
        },
    };
    Arc::new(History::open(&settings).unwrap())
}

/// A query that picked the database a reload then closed is asked again of
/// the new one; a database closed with no new one (a server stopping) answers
/// that it is closed rather than asking again forever.
#[tokio::test]
async fn a_query_on_a_database_a_reload_closed_asks_the_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let first = open_history(&dir.path().join("first.db"));
    let second = open_history(&dir.path().join("second.db"));
    let only_in_second = Finished {
        id: 7,
        model: "m".into(),
        ..Finished::default()
    };
    second.database().unwrap().record(Arc::new(only_in_second));
    let activity = Activity::with_history(10, Arc::clone(&first));
    let asked = AtomicUsize::new(0);
    let page = activity
        .on_database(|db| {
            if asked.fetch_add(1, Ordering::Relaxed) == 0 {
                // The reload happens between the choice and the query.
                activity.reconfigure(10, 0, Some(Arc::clone(&second)));
                first.close();
            }
            async move { db.page(ActivityQuery::default()).await }
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(asked.load(Ordering::Relaxed), 2);
    assert_eq!(page.data.iter().map(|r| r.id).collect::<Vec<_>>(), [7]);

    second.close();
    let error = activity.page(ActivityQuery::default()).await.unwrap_err();
    assert!(matches!(error, StoreError::Closed { .. }), "{error}");
    let error = activity.stats(None).await.unwrap_err();
    assert!(matches!(error, StoreError::Closed { .. }), "{error}");
}
