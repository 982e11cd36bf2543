//! One credential per request, and failed API-key attempts rate-limited per client
//! address (429 with `Retry-After`, even for the right key while it lasts).

use llama_swap_server::testing::api::auth_limit::BURST;
use serde_json::Value;

use crate::support::{Harness, model};

const KEYS: &str = "apiKeys:\n  - sk-right\n";

async fn code_of(response: reqwest::Response) -> (u16, String) {
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap();
    (
        status,
        body["error"]["code"].as_str().unwrap_or("").to_owned(),
    )
}

#[tokio::test]
async fn several_credential_lines_are_refused_even_when_one_is_right() {
    let h = Harness::start(&[model("a", "")], KEYS).await;
    let variants: [&[(&str, &str)]; 3] = [
        &[
            ("authorization", "Bearer sk-guess"),
            ("authorization", "Bearer sk-right"),
        ],
        &[("x-api-key", "sk-guess"), ("x-api-key", "sk-right")],
        &[
            ("authorization", "Bearer sk-guess"),
            ("x-api-key", "sk-right"),
        ],
    ];
    for headers in variants {
        let mut request = h.chat("a", None, false);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let (status, code) = code_of(request.send().await.unwrap()).await;
        assert_eq!(
            (status, code.as_str()),
            (400, "multiple_credentials"),
            "{headers:?}"
        );
    }
    // The same key in both headers is one credential.
    let response = h
        .chat("a", None, false)
        .bearer_auth("sk-right")
        .header("x-api-key", "sk-right")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    h.shutdown().await;
}

#[tokio::test]
async fn an_address_that_keeps_guessing_gets_429_with_retry_after_even_for_the_right_key() {
    let h = Harness::start(&[model("a", "")], KEYS).await;
    // Requests without any key are not guesses and never count.
    for _ in 0..BURST + 5 {
        let (status, _) = code_of(h.chat("a", None, false).send().await.unwrap()).await;
        assert_eq!(status, 401);
    }
    // All at once: the bucket refills one guess every 2 s, and ten guesses
    // one after another on a slow machine could take longer than that.
    let guesses = (0..BURST).map(|n| {
        let request = h
            .chat("a", None, false)
            .bearer_auth(format!("sk-guess-{n}"));
        async move { code_of(request.send().await.unwrap()).await }
    });
    for (status, code) in futures_util::future::join_all(guesses).await {
        assert_eq!((status, code.as_str()), (401, "invalid_api_key"));
    }
    let response = h
        .chat("a", None, false)
        .bearer_auth("sk-right")
        .send()
        .await
        .unwrap();
    let retry_after: u64 = response.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(retry_after >= 1, "{retry_after}");
    let (status, code) = code_of(response).await;
    assert_eq!((status, code.as_str()), (429, "too_many_auth_failures"));
    // /health stays open.
    assert_eq!(
        h.http.get(h.url("/health")).send().await.unwrap().status(),
        200
    );
    h.shutdown().await;
}
