//! The provider trait an agent framework holds.

use std::sync::Arc;

use async_trait::async_trait;

use crate::client::Client;
use crate::error::Error;
use crate::options::CallOptions;
use crate::stream::ChatStream;
use crate::types::{ChatRequest, ChatResponse, EmbeddingsRequest, EmbeddingsResponse, ModelList};

/// A model backend that honours per-call options (priority above all).
///
/// Object safe: frameworks hold an `Arc<dyn ChatProvider>` and pass
/// [`CallOptions`] with each call, so one agent run can mark single calls
/// Elevated or Low without touching headers. [`Client`] implements it against the
/// proxy; a downstream crate can implement it too: an in-process fake (build the
/// stream with [`ChatStream::from_events`] or [`ChatStream::from_chunks`]), a
/// logging decorator, or a fallback between two providers. Every [`Error`] variant
/// can be constructed outside this crate ([`Error::other`] is the general one).
///
/// The trait is implemented for `&P`, `Box<P>` and `Arc<P>` of any provider,
/// `dyn ChatProvider` included, so a decorator generic over `P: ChatProvider` wraps an
/// `Arc<dyn ChatProvider>` as it is. Implementations use [`async_trait`](macro@async_trait) (re-exported
/// by this crate, so no extra dependency): trait objects need its boxed futures.
///
/// ```
/// use std::sync::Arc;
/// use llama_swap_client::{CallOptions, ChatMessage, ChatProvider, ChatRequest, Client, Priority};
///
/// async fn summarise(provider: &dyn ChatProvider) -> Result<String, llama_swap_client::Error> {
///     let req = ChatRequest::new("qwen", vec![ChatMessage::user("Summarise the log")]);
///     let resp = provider.chat(&req, &CallOptions::with_priority(Priority::Low)).await?;
///     Ok(resp.text())
/// }
///
/// let provider: Arc<dyn ChatProvider> = Arc::new(Client::new("http://127.0.0.1:8080").unwrap());
/// # drop(provider);
/// ```
#[async_trait]
pub trait ChatProvider: Send + Sync {
    /// A non-streaming chat completion.
    ///
    /// # Errors
    ///
    /// Whatever the backend reports; for [`Client`], see [`Client::chat`].
    async fn chat(
        &self,
        request: &ChatRequest,
        options: &CallOptions,
    ) -> Result<ChatResponse, Error>;

    /// A streaming chat completion.
    ///
    /// # Errors
    ///
    /// Whatever the backend reports before the stream starts; for [`Client`], see
    /// [`Client::chat_stream`].
    async fn chat_stream(
        &self,
        request: &ChatRequest,
        options: &CallOptions,
    ) -> Result<ChatStream, Error>;

    /// Embeddings. The default reports [`Error::Unsupported`].
    ///
    /// # Errors
    ///
    /// Whatever the backend reports; for [`Client`], see [`Client::embeddings`].
    async fn embeddings(
        &self,
        request: &EmbeddingsRequest,
        options: &CallOptions,
    ) -> Result<EmbeddingsResponse, Error> {
        let _ = (request, options);
        Err(Error::Unsupported {
            operation: "embeddings",
        })
    }

    /// The models the backend serves. The default reports [`Error::Unsupported`].
    ///
    /// # Errors
    ///
    /// Whatever the backend reports; for [`Client`], see [`Client::models`].
    async fn models(&self, options: &CallOptions) -> Result<ModelList, Error> {
        let _ = options;
        Err(Error::Unsupported {
            operation: "model listing",
        })
    }
}

#[async_trait]
impl ChatProvider for Client {
    async fn chat(
        &self,
        request: &ChatRequest,
        options: &CallOptions,
    ) -> Result<ChatResponse, Error> {
        Client::chat(self, request, options).await
    }

    async fn chat_stream(
        &self,
        request: &ChatRequest,
        options: &CallOptions,
    ) -> Result<ChatStream, Error> {
        Client::chat_stream(self, request, options).await
    }

    async fn embeddings(
        &self,
        request: &EmbeddingsRequest,
        options: &CallOptions,
    ) -> Result<EmbeddingsResponse, Error> {
        Client::embeddings(self, request, options).await
    }

    async fn models(&self, options: &CallOptions) -> Result<ModelList, Error> {
        Client::models(self, options).await
    }
}

/// Forwards every call to the provider behind a pointer, so `&P`, `Box<P>` and
/// `Arc<P>` (including `Arc<dyn ChatProvider>`) are providers themselves.
macro_rules! forward_provider {
    ($($pointer:ty),+) => {$(
        #[async_trait]
        impl<P: ChatProvider + ?Sized> ChatProvider for $pointer {
            async fn chat(
                &self,
                request: &ChatRequest,
                options: &CallOptions,
            ) -> Result<ChatResponse, Error> {
                (**self).chat(request, options).await
            }

            async fn chat_stream(
                &self,
                request: &ChatRequest,
                options: &CallOptions,
            ) -> Result<ChatStream, Error> {
                (**self).chat_stream(request, options).await
            }

            async fn embeddings(
                &self,
                request: &EmbeddingsRequest,
                options: &CallOptions,
            ) -> Result<EmbeddingsResponse, Error> {
                (**self).embeddings(request, options).await
            }

            async fn models(&self, options: &CallOptions) -> Result<ModelList, Error> {
                (**self).models(options).await
            }
        }
    )+};
}

forward_provider!(&P, Box<P>, Arc<P>);
