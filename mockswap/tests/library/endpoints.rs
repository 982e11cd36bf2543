//! Endpoint shapes, the management surface, and the error envelopes of docs/ERRORS.md.

use mockswap::{MockSwap, Reply, ReplyRule};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{chat, client, post};

async fn json_of(response: reqwest::Response) -> (StatusCode, Value) {
    let status = response.status();
    (status, response.json().await.unwrap())
}

#[tokio::test]
async fn chat_completion_is_deterministic_and_echoes_model_and_last_user_message() {
    let mock = MockSwap::start().await;
    let body = json!({"model": "qwen", "messages": [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "reply"},
        {"role": "user", "content": "second question"},
    ]});
    let (status, a) = json_of(post(&mock, "/v1/chat/completions", &body, &[]).await).await;
    assert_eq!(status, 200);
    assert_eq!(
        a["choices"][0]["message"]["content"],
        "[qwen] second question"
    );
    assert_eq!(a["id"], "chatcmpl-mockswap-1");
    let (_, b) = json_of(post(&mock, "/v1/chat/completions", &body, &[]).await).await;
    assert_eq!(b["created"], a["created"]);
    assert_eq!(b["id"], "chatcmpl-mockswap-2");
}

#[tokio::test]
async fn completions_embeddings_messages_llama_and_rerank_answer_in_their_shapes() {
    let mock = MockSwap::start().await;
    let (_, c) = json_of(
        post(
            &mock,
            "/v1/completions",
            &json!({"model": "m", "prompt": "p"}),
            &[],
        )
        .await,
    )
    .await;
    assert_eq!(c["choices"][0]["text"], "[m] p");
    let (_, e) = json_of(
        post(
            &mock,
            "/v1/embeddings",
            &json!({"model": "m", "input": ["a", "b"]}),
            &[],
        )
        .await,
    )
    .await;
    assert_eq!(e["data"].as_array().unwrap().len(), 2);
    assert_eq!(e["data"][0]["embedding"].as_array().unwrap().len(), 8);
    let (_, m) = json_of(post(&mock, "/v1/messages", &chat("m", "hi", false), &[]).await).await;
    assert_eq!(m["content"][0]["text"], "[m] hi");
    assert_eq!(m["type"], "message");
    let (_, l) = json_of(
        post(
            &mock,
            "/completion",
            &json!({"model": "m", "prompt": "p"}),
            &[],
        )
        .await,
    )
    .await;
    assert_eq!(
        (l["content"].as_str(), l["stop"].as_bool()),
        (Some("[m] p"), Some(true))
    );
    let (_, i) = json_of(
        post(
            &mock,
            "/infill",
            &json!({"model": "m", "input_prefix": "fn"}),
            &[],
        )
        .await,
    )
    .await;
    assert_eq!(i["content"], "[m] fn");
    let (_, r) = json_of(
        post(
            &mock,
            "/rerank",
            &json!({"model": "m", "query": "red fox", "documents": ["a red fox", "blue"]}),
            &[],
        )
        .await,
    )
    .await;
    assert_eq!(r["results"][0]["relevance_score"], 1.0);
    assert_eq!(r["results"][1]["relevance_score"], 0.0);
}

#[tokio::test]
async fn closure_reply_sees_the_recorded_request() {
    let mock = MockSwap::builder()
        .reply(ReplyRule::from_fn(|request| {
            Reply::text(format!("priority was {}", request.priority))
        }))
        .start()
        .await
        .unwrap();
    let (_, body) = json_of(
        post(
            &mock,
            "/v1/chat/completions",
            &chat("m", "x", false),
            &["-10"],
        )
        .await,
    )
    .await;
    assert_eq!(body["choices"][0]["message"]["content"], "priority was -10");
}

#[tokio::test]
async fn scripted_replies_per_model_run_in_sequence_then_fall_back_to_echo() {
    let mock = MockSwap::start().await;
    mock.add_reply(ReplyRule::new(Reply::text("first")).model("a").times(1));
    mock.add_reply(
        ReplyRule::new(Reply::json(json!({"raw": true})).status(StatusCode::ACCEPTED))
            .model("a")
            .times(1),
    );
    let (_, one) =
        json_of(post(&mock, "/v1/chat/completions", &chat("a", "x", false), &[]).await).await;
    assert_eq!(one["choices"][0]["message"]["content"], "first");
    let (status, two) =
        json_of(post(&mock, "/v1/chat/completions", &chat("a", "x", false), &[]).await).await;
    assert_eq!((status, two), (StatusCode::ACCEPTED, json!({"raw": true})));
    let (_, three) =
        json_of(post(&mock, "/v1/chat/completions", &chat("a", "x", false), &[]).await).await;
    assert_eq!(three["choices"][0]["message"]["content"], "[a] x");
}

#[tokio::test]
async fn error_envelopes_match_the_server_contract() {
    let mock = MockSwap::builder().models(["a"]).start().await.unwrap();
    let raw = client()
        .post(format!("{}/v1/chat/completions", mock.uri()))
        .header("content-type", "application/json")
        .body("{\"model\": ")
        .send()
        .await
        .unwrap();
    let cases = [
        (raw, 400, "invalid_request_error", "invalid_json"),
        (
            post(&mock, "/v1/chat/completions", &json!({"messages": []}), &[]).await,
            400,
            "invalid_request_error",
            "model_missing",
        ),
        (
            post(
                &mock,
                "/v1/chat/completions",
                &chat("qwen", "x", false),
                &[],
            )
            .await,
            404,
            "invalid_request_error",
            "model_not_found",
        ),
        (
            post(&mock, "/no/such/path", &json!({}), &[]).await,
            404,
            "invalid_request_error",
            "not_found",
        ),
    ];
    for (response, status, kind, code) in cases {
        assert_eq!(response.headers()["content-type"], "application/json");
        let (got, body) = json_of(response).await;
        assert_eq!(got.as_u16(), status, "{body}");
        assert_eq!(body["error"]["type"], kind, "{body}");
        assert_eq!(body["error"]["code"], code, "{body}");
        assert!(body["error"]["message"].as_str().unwrap().len() > 10);
    }
    let wrong_method = client()
        .get(format!("{}/v1/chat/completions", mock.uri()))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong_method.status(), 405);
    assert_eq!(wrong_method.headers()["allow"], "POST");
    let (_, body) = json_of(wrong_method).await;
    assert_eq!(body["error"]["code"], "method_not_allowed");
}

#[tokio::test]
async fn running_lists_served_models_and_unload_clears_them() {
    let mock = MockSwap::builder()
        .models(["a", "b"])
        .start()
        .await
        .unwrap();
    post(&mock, "/v1/chat/completions", &chat("b", "x", false), &[]).await;
    post(
        &mock,
        "/upstream/a/v1/chat/completions",
        &chat("a", "x", false),
        &[],
    )
    .await;
    let running = |mock: &MockSwap| {
        let url = format!("{}/running", mock.uri());
        async move {
            client()
                .get(url)
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        }
    };
    assert_eq!(
        running(&mock).await,
        json!({"running": [{"model": "a", "state": "ready"}, {"model": "b", "state": "ready"}]})
    );
    let one = client()
        .post(format!("{}/api/models/unload/a", mock.uri()))
        .send()
        .await
        .unwrap();
    assert_eq!(one.status(), 200);
    assert_eq!(
        running(&mock).await,
        json!({"running": [{"model": "b", "state": "ready"}]})
    );
    let unknown = client()
        .post(format!("{}/api/models/unload/zz", mock.uri()))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
    let all = client()
        .post(format!("{}/api/models/unload", mock.uri()))
        .send()
        .await
        .unwrap();
    assert_eq!(all.json::<Value>().await.unwrap(), json!({"msg": "ok"}));
    assert_eq!(running(&mock).await, json!({"running": []}));
}

#[tokio::test]
async fn health_and_model_list_answer_like_an_upstream() {
    let mock = MockSwap::builder()
        .models(["x", "y"])
        .start()
        .await
        .unwrap();
    let health = client()
        .get(format!("{}/health", mock.uri()))
        .send()
        .await
        .unwrap();
    assert_eq!(
        health.json::<Value>().await.unwrap(),
        json!({"status": "ok"})
    );
    let models: Value = client()
        .get(format!("{}/v1/models", mock.uri()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(models["data"][1]["id"], "y");
    // Health polls are not journaled; the model list is.
    assert_eq!(mock.requests().len(), 1);
}

#[tokio::test]
async fn loading_mock_answers_503_until_load_time_has_passed() {
    let mock = MockSwap::builder()
        .load_time(std::time::Duration::from_secs(3600))
        .start()
        .await
        .unwrap();
    let health = client()
        .get(format!("{}/health", mock.uri()))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 503);
    let chat = post(&mock, "/v1/chat/completions", &chat("m", "x", false), &[]).await;
    assert_eq!(chat.status(), 503);
}

#[tokio::test]
async fn form_bodies_name_the_model_as_a_field_and_json_bodies_win_like_the_server() {
    let mock = MockSwap::start().await;
    let url = format!("{}/v1/audio/transcriptions", mock.uri());
    let multipart = client()
        .post(&url)
        .header("content-type", "multipart/form-data; boundary=b0")
        .body("--b0\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper\r\n--b0--\r\n")
        .send()
        .await
        .unwrap();
    assert_eq!(multipart.status(), 200);
    // JSON sent with curl's default form content type is read as JSON, like the server.
    let mislabelled = client()
        .post(format!("{}/v1/chat/completions", mock.uri()))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(r#"{"model": "m", "messages": [{"role": "user", "content": "hi"}]}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(mislabelled.status(), 200);
    // A real form without a model field is still missing its model.
    let form = client()
        .post(format!("{}/v1/chat/completions", mock.uri()))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("prompt=hi")
        .send()
        .await
        .unwrap();
    let (status, body) = json_of(form).await;
    assert_eq!(
        (status.as_u16(), &body["error"]["code"]),
        (400, &json!("model_missing"))
    );
    let journal = mock.requests();
    assert_eq!(journal[0].model.as_deref(), Some("whisper"));
    assert_eq!(journal[0].json, None);
}

#[tokio::test]
async fn body_over_the_limit_gets_413_and_is_journaled_without_its_body() {
    let mock = MockSwap::builder().body_limit(64).start().await.unwrap();
    let big = chat("m", &"x".repeat(200), false);
    let (status, body) = json_of(post(&mock, "/v1/chat/completions", &big, &["10"]).await).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(body["error"]["code"], "body_too_large");
    let journal = mock.requests();
    assert_eq!(journal.len(), 1);
    assert!(journal[0].body.is_empty());
    assert_eq!(journal[0].priority, mockswap::PriorityHeader::Value(10));
}
