//! A request that comes back to the server through a model's upstream or a
//! peer, and one that passed through too many servers.

use llama_swap_server::config::Config;
use llama_swap_server::serve_with;
use llama_swap_server::testing::proxy::{MAX_HOPS, VIA_HEADER};
use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::support::{Harness, LIMIT};

async fn bound() -> (tokio::net::TcpListener, u16) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    (listener, port)
}

/// A model whose upstream is the server on `port` (a placeholder command that
/// is not given the port, so it attaches).
fn attached_to(port: u16) -> Config {
    let yaml = format!(
        "models:\n  m:\n    cmd: sleep 300\n    proxy: http://127.0.0.1:{port}\n    checkEndpoint: none\n"
    );
    Config::loader()
        .yaml("test.yaml", &yaml)
        .env(&|_: &str| None)
        .load()
        .unwrap()
        .config
}

#[tokio::test]
async fn two_servers_whose_models_proxy_to_each_other_answer_508_instead_of_looping() {
    let ((la, pa), (lb, pb)) = (bound().await, bound().await);
    let (stop_a, stopped_a) = oneshot::channel::<()>();
    let (stop_b, stopped_b) = oneshot::channel::<()>();
    let a = tokio::spawn(serve_with(la, attached_to(pb), Default::default(), async {
        let _ = stopped_a.await;
    }));
    let b = tokio::spawn(serve_with(lb, attached_to(pa), Default::default(), async {
        let _ = stopped_b.await;
    }));

    let response = tokio::time::timeout(
        LIMIT,
        reqwest::Client::new()
            .post(format!("http://127.0.0.1:{pa}/v1/chat/completions"))
            .json(&json!({"model": "m", "messages": []}))
            .send(),
    )
    .await
    .expect("the request looped")
    .unwrap();
    assert_eq!(response.status().as_u16(), 508);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "proxy_loop", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("x-llama-swap-via"),
        "{body}"
    );

    stop_a.send(()).unwrap();
    stop_b.send(()).unwrap();
    a.await.unwrap().unwrap();
    b.await.unwrap().unwrap();
}

fn loaded(yaml: &str) -> Config {
    Config::loader()
        .yaml("test.yaml", yaml)
        .env(&|_: &str| None)
        .load()
        .unwrap()
        .config
}

/// A config whose only model `x` is the peer's at `port` (no local `x`).
fn peer_of(port: u16) -> Config {
    loaded(&format!(
        "peers:\n  other:\n    proxy: http://127.0.0.1:{port}\n    models: [x]\n"
    ))
}

async fn activity(port: u16) -> Vec<Value> {
    let body: Value = reqwest::get(format!("http://127.0.0.1:{port}/api/activity"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    body["activity"].as_array().unwrap().clone()
}

/// The finished requests of the server on `port` once nothing is in flight
/// to its peer any more (the count and the row end with the response body,
/// an instant after its last byte reached the client).
async fn settled(port: u16) -> Vec<Value> {
    tokio::time::timeout(LIMIT, async {
        loop {
            let metrics = reqwest::get(format!("http://127.0.0.1:{port}/metrics"))
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            let rows = activity(port).await;
            if metrics.contains("llamaswap_peer_requests_in_flight{peer=\"other\"} 0")
                && !rows.is_empty()
            {
                return rows;
            }
            // Polled: nothing announces the end of a body.
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("a request to the peer is still in flight")
}

async fn chat_x(port: u16) -> (u16, Value) {
    let response = tokio::time::timeout(
        LIMIT,
        reqwest::Client::new()
            .post(format!("http://127.0.0.1:{port}/v1/chat/completions"))
            .json(&json!({"model": "x", "messages": []}))
            .send(),
    )
    .await
    .expect("the request looped")
    .unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

#[tokio::test]
async fn two_servers_listing_each_other_as_the_peer_of_a_model_answer_508_after_one_round() {
    let ((la, pa), (lb, pb)) = (bound().await, bound().await);
    let (stop_a, stopped_a) = oneshot::channel::<()>();
    let (stop_b, stopped_b) = oneshot::channel::<()>();
    // Two servers, each its own instance in this process: each has its own mark.
    let a = tokio::spawn(serve_with(la, peer_of(pb), Default::default(), async {
        let _ = stopped_a.await;
    }));
    let b = tokio::spawn(serve_with(lb, peer_of(pa), Default::default(), async {
        let _ = stopped_b.await;
    }));

    let (status, body) = chat_x(pa).await;
    assert_eq!(status, 508, "{body}");
    assert_eq!(body["error"]["code"], "proxy_loop", "{body}");
    // A sent it to B, B sent it back to A, which refused its own mark: one
    // request to a peer on each server, and nothing left in flight.
    for port in [pa, pb] {
        let rows = settled(port).await;
        assert_eq!(rows.len(), 1, "{port}: {rows:?}");
        assert_eq!(rows[0]["model"], "other/x");
    }

    stop_a.send(()).unwrap();
    stop_b.send(()).unwrap();
    a.await.unwrap().unwrap();
    b.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_server_listing_itself_as_a_peer_answers_508_at_the_first_hop() {
    let (listener, port) = bound().await;
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(serve_with(
        listener,
        peer_of(port),
        Default::default(),
        async {
            let _ = stopped.await;
        },
    ));
    let (status, body) = chat_x(port).await;
    assert_eq!(status, 508, "{body}");
    assert_eq!(body["error"]["code"], "proxy_loop", "{body}");
    assert_eq!(settled(port).await.len(), 1);
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_request_that_passed_through_more_than_max_hops_servers_is_refused() {
    let h = Harness::start(&[], "").await;
    let send = |marks: usize| {
        let list: Vec<String> = (0..marks).map(|i| format!("elsewhere-{i}")).collect();
        h.http
            .get(h.url("/v1/models"))
            .header(VIA_HEADER, list.join(", "))
            .send()
    };
    assert_eq!(send(MAX_HOPS).await.unwrap().status(), 200);
    let refused = send(MAX_HOPS + 1).await.unwrap();
    assert_eq!(refused.status(), 508);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "proxy_loop", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("passed through {} servers", MAX_HOPS + 1)),
        "{message}"
    );
    h.shutdown().await;
}
