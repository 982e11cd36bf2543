//! The provider trait as a downstream crate meets it: decorators over any pointer to
//! a provider, implementations through the re-exported `async_trait`, and the general
//! error for fakes and decorators.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::error::Error as _;
use std::sync::{Arc, Mutex};

use llama_swap_client::{
    CallOptions, ChatEvent, ChatMessage, ChatProvider, ChatRequest, ChatResponse, ChatStream,
    Client, Error, Priority, RetryPolicy, StatusCode, async_trait,
};
use mockswap::{MockSwap, Reply, ReplyRule};

/// A decorator generic over the provider it wraps: records each call's priority.
struct Recording<P> {
    inner: P,
    seen: Mutex<Vec<Priority>>,
}

#[async_trait]
impl<P: ChatProvider> ChatProvider for Recording<P> {
    async fn chat(
        &self,
        request: &ChatRequest,
        options: &CallOptions,
    ) -> Result<ChatResponse, Error> {
        self.seen
            .lock()
            .unwrap()
            .push(options.priority_override().unwrap_or_default());
        self.inner.chat(request, options).await
    }

    async fn chat_stream(
        &self,
        request: &ChatRequest,
        options: &CallOptions,
    ) -> Result<ChatStream, Error> {
        self.seen
            .lock()
            .unwrap()
            .push(options.priority_override().unwrap_or_default());
        self.inner.chat_stream(request, options).await
    }
}

/// A fake that fails with the general error, as a fake or a fallback would.
struct Exhausted;

#[async_trait]
impl ChatProvider for Exhausted {
    async fn chat(&self, _: &ChatRequest, _: &CallOptions) -> Result<ChatResponse, Error> {
        Err(Error::with_source(
            "every backend failed",
            std::io::Error::other("backend b refused"),
        ))
    }

    async fn chat_stream(&self, _: &ChatRequest, _: &CallOptions) -> Result<ChatStream, Error> {
        Ok(ChatStream::from_events(futures_util::stream::iter([Ok(
            ChatEvent::text("canned"),
        )])))
    }
}

fn request() -> ChatRequest {
    ChatRequest::new("qwen", vec![ChatMessage::user("hi")])
}

#[tokio::test]
async fn a_decorator_generic_over_chat_provider_wraps_an_arc_dyn_provider() {
    let mock = MockSwap::builder()
        .reply(ReplyRule::new(Reply::text("hello")))
        .start()
        .await
        .unwrap();
    let shared: Arc<dyn ChatProvider> = Arc::new(Client::new(mock.uri()).unwrap());
    let decorated = Recording {
        inner: Arc::clone(&shared),
        seen: Mutex::new(Vec::new()),
    };
    let answer = decorated
        .chat(&request(), &CallOptions::with_priority(Priority::Elevated))
        .await
        .unwrap();
    assert_eq!(answer.text(), "hello");
    // Boxed and borrowed providers are providers too.
    let boxed: Box<dyn ChatProvider> = Box::new(decorated);
    let by_ref: &dyn ChatProvider = &*boxed;
    let stream = Recording {
        inner: by_ref,
        seen: Mutex::new(Vec::new()),
    }
    .chat_stream(&request(), &CallOptions::with_priority(Priority::Low))
    .await
    .unwrap();
    assert_eq!(stream.collect().await.unwrap().text(), "hello");
    mock.assert_priorities([Some(10), Some(-10)]);
}

#[tokio::test]
async fn a_provider_implemented_with_the_re_exported_async_trait_fails_with_the_general_error() {
    let provider: Arc<dyn ChatProvider> = Arc::new(Exhausted);
    let err = provider
        .chat(&request(), &CallOptions::new())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Other { .. }), "{err:?}");
    assert_eq!(err.to_string(), "every backend failed");
    assert_eq!(err.source().unwrap().to_string(), "backend b refused");
    assert!(!err.is_retryable());
    let plain = Error::other("no backend configured");
    assert_eq!(plain.to_string(), "no backend configured");
    assert!(plain.source().is_none());
    let streamed = provider
        .chat_stream(&request(), &CallOptions::new())
        .await
        .unwrap();
    assert_eq!(streamed.collect().await.unwrap().text(), "canned");
}

#[tokio::test]
async fn the_re_exported_status_code_configures_retries() {
    let mock = MockSwap::builder()
        .fault(mockswap::FaultRule::new(mockswap::Fault::status(StatusCode::CONFLICT)).times(1))
        .start()
        .await
        .unwrap();
    let client = Client::builder()
        .base_url(mock.uri())
        .retry_policy(
            RetryPolicy::default()
                .with_statuses([StatusCode::CONFLICT])
                .with_backoff(
                    std::time::Duration::from_millis(1),
                    std::time::Duration::from_millis(2),
                ),
        )
        .build()
        .unwrap();
    client
        .chat(&request(), &CallOptions::with_priority(Priority::Low))
        .await
        .unwrap();
    mock.assert_priorities([Some(-10), Some(-10)]);
}
