//! The `X-Priority` header on the wire, for every endpoint and every tier, as
//! mockswap (the project's double of the proxy) journals it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use futures_util::StreamExt;
use http::{HeaderMap, HeaderValue};
use llama_swap_client::{
    CallOptions, ChatMessage, ChatRequest, Client, CompletionRequest, EmbeddingsRequest, Priority,
    StreamEvent, UpstreamRequest,
};
use mockswap::{MockSwap, PriorityHeader, RecordedRequest};

/// A proxy double serving the model `demo` that journals `/health` too.
async fn proxy_double() -> MockSwap {
    MockSwap::builder()
        .models(["demo"])
        .journal_health(true)
        .start()
        .await
        .unwrap()
}

/// Every `X-Priority` line of a recorded request, as sent.
fn priority_values(req: &RecordedRequest) -> Vec<String> {
    req.header_values("x-priority")
}

/// Every kind of call the SDK makes.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Chat,
    ChatStream,
    Completions,
    Embeddings,
    Models,
    Running,
    UnloadAll,
    UnloadModel,
    Health,
    UpstreamGet,
    UpstreamPost,
}

const KINDS: [Kind; 11] = [
    Kind::Chat,
    Kind::ChatStream,
    Kind::Completions,
    Kind::Embeddings,
    Kind::Models,
    Kind::Running,
    Kind::UnloadAll,
    Kind::UnloadModel,
    Kind::Health,
    Kind::UpstreamGet,
    Kind::UpstreamPost,
];

fn chat_request() -> ChatRequest {
    ChatRequest::new("demo", vec![ChatMessage::user("hi")])
}

/// Makes one call of `kind` and checks it succeeded.
async fn call(client: &Client, kind: Kind, opts: &CallOptions) {
    match kind {
        Kind::Chat => {
            let resp = client.chat(&chat_request(), opts).await.unwrap();
            assert_eq!(resp.text(), "[demo] hi");
        }
        Kind::ChatStream => {
            let mut stream = client.chat_stream(&chat_request(), opts).await.unwrap();
            let mut text = String::new();
            while let Some(ev) = stream.next().await {
                if let StreamEvent::Chunk(c) = ev.unwrap() {
                    text.push_str(c.content().unwrap_or_default());
                }
            }
            assert_eq!(text, "[demo] hi");
        }
        Kind::Completions => {
            let resp = client
                .completions(&CompletionRequest::new("demo", "hi"), opts)
                .await
                .unwrap();
            assert_eq!(resp.text(), "[demo] hi");
        }
        Kind::Embeddings => {
            let resp = client
                .embeddings(&EmbeddingsRequest::new("demo", "hi"), opts)
                .await
                .unwrap();
            assert_eq!(resp.data[0].embedding.len(), 8);
        }
        Kind::Models => {
            let list = client.models(opts).await.unwrap();
            assert_eq!(list.data[0].id, "demo");
        }
        Kind::Running => {
            let running = client.running(opts).await.unwrap();
            assert!(running.running.iter().all(|r| r.model == "demo"));
        }
        Kind::UnloadAll => client.unload_all(opts).await.unwrap(),
        Kind::UnloadModel => client.unload_model("demo", opts).await.unwrap(),
        Kind::Health => client.health(opts).await.unwrap(),
        Kind::UpstreamGet => {
            let resp = client
                .upstream("demo", UpstreamRequest::get("health"), opts)
                .await
                .unwrap();
            assert_eq!(resp.text().await.unwrap(), r#"{"status":"ok"}"#);
        }
        Kind::UpstreamPost => {
            let req = UpstreamRequest::post_json("/v1/chat/completions", &chat_request()).unwrap();
            let resp = client.upstream("demo", req, opts).await.unwrap();
            assert!(resp.status().is_success());
        }
    }
}

/// Runs `kind` with `opts` and returns the `X-Priority` values of the request.
async fn sent_priority(
    client: &Client,
    server: &MockSwap,
    kind: Kind,
    opts: &CallOptions,
) -> Vec<String> {
    let before = server.requests().len();
    call(client, kind, opts).await;
    let all = server.requests();
    assert_eq!(all.len(), before + 1, "{kind:?} sent one request");
    priority_values(all.last().unwrap())
}

#[tokio::test]
async fn every_endpoint_sends_ten_for_elevated_minus_ten_for_low_and_nothing_for_normal() {
    let server = proxy_double().await;
    let client = Client::new(server.uri()).unwrap();
    for kind in KINDS {
        let elevated = sent_priority(
            &client,
            &server,
            kind,
            &CallOptions::with_priority(Priority::Elevated),
        )
        .await;
        assert_eq!(elevated, vec!["10"], "{kind:?} elevated");
        let low = sent_priority(
            &client,
            &server,
            kind,
            &CallOptions::with_priority(Priority::Low),
        )
        .await;
        assert_eq!(low, vec!["-10"], "{kind:?} low");
        let normal = sent_priority(
            &client,
            &server,
            kind,
            &CallOptions::with_priority(Priority::Normal),
        )
        .await;
        assert!(normal.is_empty(), "{kind:?} normal sent {normal:?}");
        let inherited = sent_priority(&client, &server, kind, &CallOptions::new()).await;
        assert!(inherited.is_empty(), "{kind:?} default sent {inherited:?}");
    }
}

#[tokio::test]
async fn client_default_priority_applies_to_every_endpoint_and_normal_call_removes_it() {
    let server = proxy_double().await;
    let client = Client::builder()
        .base_url(server.uri())
        .default_priority(Priority::Low)
        .build()
        .unwrap();
    for kind in KINDS {
        let inherited = sent_priority(&client, &server, kind, &CallOptions::new()).await;
        assert_eq!(inherited, vec!["-10"], "{kind:?} inherited");
        let normal = sent_priority(
            &client,
            &server,
            kind,
            &CallOptions::with_priority(Priority::Normal),
        )
        .await;
        assert!(normal.is_empty(), "{kind:?} normal sent {normal:?}");
        let elevated = sent_priority(
            &client,
            &server,
            kind,
            &CallOptions::with_priority(Priority::Elevated),
        )
        .await;
        assert_eq!(elevated, vec!["10"], "{kind:?} elevated");
    }
}

#[tokio::test]
async fn exactly_one_priority_value_even_when_default_header_maps_name_it() {
    let server = proxy_double().await;
    let mut defaults = HeaderMap::new();
    defaults.append("x-priority", HeaderValue::from_static("10"));
    defaults.append("X-Priority", HeaderValue::from_static("10"));
    let client = Client::builder()
        .base_url(server.uri())
        .default_headers(defaults)
        .default_header("X-PRIORITY", "10")
        .build()
        .unwrap();
    for kind in KINDS {
        let inherited = sent_priority(&client, &server, kind, &CallOptions::new()).await;
        assert_eq!(inherited, vec!["10"], "{kind:?} inherited");
        let low = sent_priority(
            &client,
            &server,
            kind,
            &CallOptions::with_priority(Priority::Low),
        )
        .await;
        assert_eq!(low, vec!["-10"], "{kind:?} low");
        let per_call_header = sent_priority(
            &client,
            &server,
            kind,
            &CallOptions::new()
                .header("x-priority", "-10")
                .header("X-Priority", "-10"),
        )
        .await;
        assert_eq!(per_call_header, vec!["-10"], "{kind:?} per-call header");
        let normal = sent_priority(
            &client,
            &server,
            kind,
            &CallOptions::with_priority(Priority::Normal),
        )
        .await;
        assert!(normal.is_empty(), "{kind:?} normal sent {normal:?}");
    }
}

#[tokio::test]
async fn derived_client_priority_does_not_touch_the_original() {
    let server = proxy_double().await;
    let client = Client::new(server.uri()).unwrap();
    let low = client.with_priority(Priority::Low);
    assert_eq!(
        sent_priority(&low, &server, Kind::Chat, &CallOptions::new()).await,
        vec!["-10"]
    );
    assert!(
        sent_priority(&client, &server, Kind::Chat, &CallOptions::new())
            .await
            .is_empty()
    );
}

#[tokio::test]
async fn a_call_priority_does_not_leak_into_the_next_call() {
    let server = proxy_double().await;
    let client = Client::new(server.uri()).unwrap();
    let first = sent_priority(
        &client,
        &server,
        Kind::Chat,
        &CallOptions::with_priority(Priority::Elevated),
    )
    .await;
    assert_eq!(first, vec!["10"]);
    let second = sent_priority(&client, &server, Kind::Chat, &CallOptions::new()).await;
    assert!(second.is_empty(), "second call sent {second:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_with_different_priorities_never_bleed_into_each_other() {
    let server = proxy_double().await;
    let client = Client::new(server.uri()).unwrap();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..90usize {
        let client = client.clone();
        let priority = Priority::ALL[i % 3];
        let kind = if i % 2 == 0 {
            Kind::Chat
        } else {
            Kind::ChatStream
        };
        tasks.spawn(async move {
            let opts = CallOptions::with_priority(priority).header("x-call", i.to_string());
            call(&client, kind, &opts).await;
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    let seen = server.requests();
    assert_eq!(seen.len(), 90);
    for req in &seen {
        let i: usize = req.headers["x-call"].to_str().unwrap().parse().unwrap();
        let expected = match Priority::ALL[i % 3].header_int() {
            Some(value) => PriorityHeader::Value(value),
            None => PriorityHeader::Absent,
        };
        assert_eq!(req.priority, expected, "call {i}");
    }
}

#[tokio::test]
async fn api_key_is_sent_as_bearer_and_accept_matches_the_call() {
    let server = proxy_double().await;
    let client = Client::builder()
        .base_url(server.uri())
        .api_key("sk-test")
        .build()
        .unwrap();
    call(&client, Kind::Chat, &CallOptions::new()).await;
    call(&client, Kind::ChatStream, &CallOptions::new()).await;
    let seen = server.requests();
    assert_eq!(seen[0].headers["authorization"], "Bearer sk-test");
    assert_eq!(seen[0].headers["accept"], "application/json");
    assert_eq!(seen[1].headers["accept"], "text/event-stream");
    assert!(seen[1].stream);
    assert_eq!(seen[1].json.as_ref().unwrap()["stream"], true);
}

#[tokio::test]
async fn upstream_requests_keep_model_path_and_query() {
    let server = proxy_double().await;
    let client = Client::new(server.uri()).unwrap();
    client
        .upstream(
            "demo",
            UpstreamRequest::get("/slots?fail_on_no_slot=1"),
            &CallOptions::new(),
        )
        .await
        .unwrap();
    let seen = server.requests();
    assert_eq!(seen[0].path, "/upstream/demo/slots");
    assert_eq!(seen[0].query.as_deref(), Some("fail_on_no_slot=1"));
    assert_eq!(seen[0].model.as_deref(), Some("demo"));
}

#[tokio::test]
async fn provider_trait_object_carries_each_calls_priority() {
    use llama_swap_client::ChatProvider;
    use std::sync::Arc;

    let server = proxy_double().await;
    let provider: Arc<dyn ChatProvider> = Arc::new(Client::new(server.uri()).unwrap());
    let req = chat_request();
    provider
        .chat(&req, &CallOptions::with_priority(Priority::Elevated))
        .await
        .unwrap();
    let stream = provider
        .chat_stream(&req, &CallOptions::with_priority(Priority::Low))
        .await
        .unwrap();
    assert_eq!(stream.collect().await.unwrap().text(), "[demo] hi");
    provider.chat(&req, &CallOptions::new()).await.unwrap();
    server.assert_priorities([Some(10), Some(-10), None]);
}
