//! What bounds a server's requests to its peers: each peer's
//! `concurrencyLimit`, and a request ending when its client leaves.

use serde_json::Value;

use crate::support::{Harness, LIMIT, model};

/// A front whose only peer is `back` (serving `a`), with `extra` peer keys.
async fn front_of(back: &Harness, extra: &str) -> Harness {
    let yaml = format!(
        "peers:\n  back:\n    proxy: {}\n    models: [a]\n{extra}",
        back.base
    );
    Harness::start(&[], &yaml).await
}

/// Waits until `h`'s metrics contain `line`.
async fn wait_metric(h: &Harness, line: &str) {
    h.wait_for(|h| async move { h.metrics().await.contains(line).then_some(()) })
        .await;
}

#[tokio::test]
async fn a_peer_at_its_concurrency_limit_refuses_one_more_with_429_until_one_ends() {
    let back = Harness::start(&[model("a", "--gate-closed")], "").await;
    let front = front_of(&back, "    concurrencyLimit: 2\n").await;
    let held: Vec<_> = (0..2)
        .map(|_| front.spawn(front.chat("back/a", None, false)))
        .collect();
    back.wait_held("a", 2).await;

    let refused = tokio::time::timeout(LIMIT, front.chat("back/a", None, false).send())
        .await
        .expect("a third request was forwarded past the limit")
        .unwrap();
    assert_eq!(refused.status(), 429);
    assert_eq!(refused.headers()["retry-after"], "1");
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "concurrency_limit", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("peer 'back'") && message.contains("2 requests"),
        "{message}"
    );
    assert!(
        front
            .metrics()
            .await
            .contains("llamaswap_peer_failures_total{peer=\"back\",reason=\"busy\"} 1"),
    );

    back.open_gate("a").await;
    for handle in held {
        let (status, _) = tokio::time::timeout(LIMIT, handle).await.unwrap().unwrap();
        assert_eq!(status, 200);
    }
    wait_metric(&front, "llamaswap_peer_requests_in_flight{peer=\"back\"} 0").await;
    assert_eq!(
        front
            .chat("back/a", None, false)
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    front.shutdown().await;
    back.shutdown().await;
}

#[tokio::test]
async fn a_peer_request_ends_on_every_hop_when_its_client_leaves() {
    let back = Harness::start(&[model("a", "--gate-closed")], "").await;
    let front = front_of(&back, "").await;
    // A client of its own: dropping its request closes its connection.
    let client = reqwest::Client::new();
    let request = client
        .post(front.url("/v1/chat/completions"))
        .json(&serde_json::json!({"model": "back/a", "messages": []}));
    let leaving = tokio::spawn(async move { request.send().await });
    back.wait_held("a", 1).await;
    wait_metric(&front, "llamaswap_peer_requests_in_flight{peer=\"back\"} 1").await;
    wait_metric(&back, "llamaswap_model_requests_in_flight{model=\"a\"} 1").await;

    leaving.abort();
    drop(client);
    // The front drops its request to the back, and the back its own upstream request.
    wait_metric(&front, "llamaswap_peer_requests_in_flight{peer=\"back\"} 0").await;
    wait_metric(&back, "llamaswap_model_requests_in_flight{model=\"a\"} 0").await;
    front.shutdown().await;
    back.shutdown().await;
}
