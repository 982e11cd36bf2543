//! The journal: completeness and the four priority states on every request path.

use mockswap::{MockSwap, PriorityHeader};
use serde_json::json;

use crate::{BOUND, body_text, chat, client, post};

#[tokio::test]
async fn journal_keeps_absent_value_invalid_and_duplicated_priorities_apart() {
    let mock = MockSwap::start().await;
    for priority in [
        &[][..],
        &["10"],
        &["0"],
        &["+10"],
        &["high"],
        &["10", "-10"],
        &["10, -10"],
    ] {
        let response = post(
            &mock,
            "/v1/chat/completions",
            &chat("m", "x", false),
            priority,
        )
        .await;
        assert_eq!(response.status(), 200);
    }
    let journal = mock.requests();
    let seen: Vec<PriorityHeader> = journal.iter().map(|r| r.priority.clone()).collect();
    assert_eq!(
        seen,
        [
            PriorityHeader::Absent,
            PriorityHeader::Value(10),
            PriorityHeader::Value(0),
            PriorityHeader::Value(10),
            PriorityHeader::Invalid("high".into()),
            PriorityHeader::Duplicated(vec!["10".into(), "-10".into()]),
            PriorityHeader::Duplicated(vec!["10, -10".into()]),
        ]
    );
    // What was sent is kept verbatim, even for a valid value.
    assert_eq!(journal[3].header_values("X-Priority"), ["+10"]);
    assert_eq!(
        journal[3].to_json()["priority"]["raw"],
        serde_json::json!(["+10"])
    );
}

#[tokio::test]
async fn journal_records_streaming_and_upstream_requests_with_model_and_stream_flag() {
    let mock = MockSwap::start().await;
    let streamed = post(
        &mock,
        "/v1/chat/completions",
        &chat("a", "s", true),
        &["-10"],
    )
    .await;
    body_text(streamed).await.unwrap();
    let upstream = post(
        &mock,
        "/upstream/b/v1/chat/completions",
        &chat("ignored", "u", false),
        &["10"],
    )
    .await;
    assert_eq!(upstream.status(), 200);
    let get = client()
        .get(format!("{}/upstream/c/props?x=1", mock.uri()))
        .send()
        .await
        .unwrap();
    assert_eq!(get.status(), 200);
    let journal = mock.requests();
    assert_eq!(journal.len(), 3);
    assert_eq!(
        (journal[0].model.as_deref(), journal[0].stream),
        (Some("a"), true)
    );
    assert_eq!(journal[0].priority, PriorityHeader::Value(-10));
    assert_eq!(journal[1].path, "/upstream/b/v1/chat/completions");
    assert_eq!(journal[1].model.as_deref(), Some("b"));
    assert_eq!(journal[1].priority, PriorityHeader::Value(10));
    assert_eq!(journal[2].model.as_deref(), Some("c"));
    assert_eq!(journal[2].query.as_deref(), Some("x=1"));
    assert_eq!(journal[2].priority, PriorityHeader::Absent);
}

#[tokio::test]
async fn journal_entry_has_seq_method_headers_in_order_raw_body_and_json() {
    let mock = MockSwap::start().await;
    let body = chat("m", "hello", false);
    let response = client()
        .post(format!("{}/v1/chat/completions?trace=1", mock.uri()))
        .header("x-first", "1")
        .header("x-dup", "a")
        .header("x-dup", "b")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let journal = mock.wait_for_requests(1, BOUND).await.unwrap();
    let entry = &journal[0];
    assert_eq!(entry.seq, 1);
    assert_eq!(entry.method, "POST");
    assert_eq!(entry.query.as_deref(), Some("trace=1"));
    assert_eq!(entry.header_values("x-dup"), ["a", "b"]);
    assert_eq!(entry.json.as_ref(), Some(&body));
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&entry.body).unwrap(),
        body
    );
    let names: Vec<&str> = entry.headers.keys().map(|k| k.as_str()).collect();
    let first = names.iter().position(|n| *n == "x-first").unwrap();
    let dup = names.iter().position(|n| *n == "x-dup").unwrap();
    assert!(first < dup, "{names:?}");
    let json = entry.to_json();
    assert_eq!(json["seq"], 1);
    assert_eq!(
        json["priority"],
        json!({"state": "absent", "value": null, "raw": []})
    );
    let dup_pairs: Vec<&serde_json::Value> = json["headers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["name"] == "x-dup")
        .collect();
    assert_eq!(dup_pairs.len(), 2);
}

#[tokio::test]
async fn rejected_requests_are_journaled_too_but_never_dispatched() {
    let mock = MockSwap::builder().models(["a"]).start().await.unwrap();
    let unknown = post(
        &mock,
        "/v1/chat/completions",
        &chat("zz", "x", false),
        &["10"],
    )
    .await;
    assert_eq!(unknown.status(), 404);
    let ok = post(&mock, "/v1/chat/completions", &chat("a", "x", false), &[]).await;
    assert_eq!(ok.status(), 200);
    let journal = mock.requests();
    assert_eq!(journal.len(), 2);
    assert_eq!(journal[0].dispatched, None);
    assert_eq!(journal[1].dispatched, Some(0));
    assert_eq!(mock.dispatch_order(), [2]);
}

#[tokio::test]
async fn clearing_the_journal_keeps_sequence_numbers_increasing() {
    let mock = MockSwap::start().await;
    post(
        &mock,
        "/v1/completions",
        &serde_json::json!({"model": "m", "prompt": "p"}),
        &[],
    )
    .await;
    mock.clear_requests();
    assert!(mock.requests().is_empty());
    post(
        &mock,
        "/v1/completions",
        &serde_json::json!({"model": "m", "prompt": "p"}),
        &[],
    )
    .await;
    assert_eq!(mock.requests()[0].seq, 2);
}

#[tokio::test]
async fn wait_for_requests_times_out_with_a_table_of_what_arrived() {
    let mock = MockSwap::start().await;
    post(
        &mock,
        "/v1/chat/completions",
        &chat("m", "x", false),
        &["-10"],
    )
    .await;
    let err = mock
        .wait_for_requests(2, std::time::Duration::from_millis(50))
        .await
        .unwrap_err();
    assert!(err.is_timeout());
    let text = err.to_string();
    assert!(text.contains("for 2 request(s), 1 arrived"), "{text}");
    assert!(text.contains("/v1/chat/completions"), "{text}");
    assert!(text.contains("-10"), "{text}");
}

#[tokio::test]
async fn four_priority_states_are_journaled_on_plain_streaming_and_upstream_paths() {
    let mock = MockSwap::start().await;
    let states: [(&[&str], PriorityHeader); 4] = [
        (&[], PriorityHeader::Absent),
        (&["-10"], PriorityHeader::Value(-10)),
        (&["1.5"], PriorityHeader::Invalid("1.5".into())),
        (
            &["10", "10"],
            PriorityHeader::Duplicated(vec!["10".into(), "10".into()]),
        ),
    ];
    let paths = [
        ("/v1/chat/completions", false),
        ("/v1/chat/completions", true),
        ("/upstream/m/v1/chat/completions", true),
    ];
    let mut expected = Vec::new();
    for (path, stream) in paths {
        for (headers, state) in &states {
            let response = post(&mock, path, &chat("m", "x", stream), headers).await;
            assert_eq!(response.status(), 200);
            body_text(response).await.unwrap();
            expected.push((path.to_owned(), stream, state.clone()));
        }
    }
    let journal: Vec<(String, bool, PriorityHeader)> = mock
        .requests()
        .into_iter()
        .map(|r| (r.path, r.stream, r.priority))
        .collect();
    assert_eq!(journal, expected);
}
