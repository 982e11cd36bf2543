//! The `llama_swap_call` tracing span: model, priority, attempt, status and latency.
//!
//! This test is alone in its binary on purpose. tracing caches each callsite's
//! interest process-wide: when another test's thread meets the span's callsite first,
//! with no subscriber of its own, while this test is installing its thread-local
//! subscriber, the callsite can stay cached as "never" and the span is never seen
//! (`cargo test` runs a binary's tests on threads of one process; nextest runs each in
//! its own process). One test per binary makes it deterministic under both runners.
//! Add no other test to this file.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use http::StatusCode;
use llama_swap_client::{CallOptions, ChatMessage, ChatRequest, Client, Priority, RetryPolicy};
use mockswap::{Fault, FaultRule, MockSwap};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// Records the fields of every `llama_swap_call` span.
#[derive(Clone, Default)]
struct SpanFields(Arc<Mutex<BTreeMap<String, String>>>);

struct Collect<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Collect<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl<S: tracing::Subscriber> Layer<S> for SpanFields {
    fn on_new_span(&self, attrs: &Attributes<'_>, _id: &Id, _ctx: Context<'_, S>) {
        if attrs.metadata().name() == "llama_swap_call" {
            attrs.record(&mut Collect(&mut self.0.lock().unwrap()));
        }
    }
    fn on_record(&self, _id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        values.record(&mut Collect(&mut self.0.lock().unwrap()));
    }
}

#[tokio::test]
async fn the_call_span_carries_model_priority_attempt_status_and_latency() {
    let mock = MockSwap::builder()
        .fault(FaultRule::new(Fault::Status {
            status: StatusCode::SERVICE_UNAVAILABLE,
            body: None,
            headers: vec![("retry-after".to_owned(), "0".to_owned())],
        }))
        .start()
        .await
        .unwrap();
    let fields = SpanFields::default();
    let subscriber = tracing_subscriber::registry().with(fields.clone());
    let _guard = tracing::subscriber::set_default(subscriber);
    let client = Client::builder()
        .base_url(mock.uri())
        .retry_policy(RetryPolicy::default().with_max_retries(1))
        .build()
        .unwrap();
    let request = ChatRequest::new("demo", vec![ChatMessage::user("hi")]);
    client
        .chat(&request, &CallOptions::with_priority(Priority::Elevated))
        .await
        .unwrap();
    let got = fields.0.lock().unwrap().clone();
    assert_eq!(got["model"], "demo", "{got:?}");
    assert_eq!(got["x_priority"], "10");
    assert_eq!(got["attempt"], "2");
    assert_eq!(got["status"], "200");
    assert_eq!(got["path"], "/v1/chat/completions");
    assert!(got["latency_ms"].parse::<u64>().is_ok(), "{got:?}");
    mock.assert_priorities([Some(10), Some(10)]);
}
