//! A request that comes back to the server through a model's upstream.

use llama_swap_server::config::Config;
use llama_swap_server::serve_with;
use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::support::LIMIT;

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
