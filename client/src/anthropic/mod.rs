//! Anthropic's Messages API (`POST /v1/messages`), which the proxy serves for
//! models behind it (llama.cpp speaks it natively).
//!
//! The types follow Anthropic's wire format and are lenient like the rest of the
//! SDK: unknown content blocks, deltas and events are kept as JSON, unknown fields
//! in an `extra` map. Calls go through the same transport as every other endpoint,
//! so they carry the call's priority, retries and timeouts.
//!
//! ```no_run
//! use llama_swap_client::anthropic::{Message, MessagesRequest};
//! use llama_swap_client::{CallOptions, Client, Priority};
//!
//! # async fn run(client: Client) -> Result<(), llama_swap_client::Error> {
//! let req = MessagesRequest::new("qwen", 256, vec![Message::user("Hello")]).system("Be brief.");
//! let reply = client.messages(&req, &CallOptions::with_priority(Priority::Elevated)).await?;
//! println!("{}", reply.text());
//! # Ok(())
//! # }
//! ```

mod stream;
mod types;

pub use stream::{MessagesEvent, MessagesStream};
pub use types::{
    BlockDelta, ContentBlock, Message, MessageBody, MessageDelta, MessageRole, MessagesRequest,
    MessagesResponse, StopReason, SystemPrompt, Tool, ToolChoice, Usage,
};

use crate::client::Client;
use crate::endpoints::{post, require_model};
use crate::error::Error;
use crate::options::CallOptions;
use crate::transport::Accept;

/// The `anthropic-version` header sent unless the call sets one.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

impl Client {
    /// `POST /v1/messages`, non-streaming.
    ///
    /// # Errors
    ///
    /// As for [`Client::chat`].
    pub async fn messages(
        &self,
        request: &MessagesRequest,
        options: &CallOptions,
    ) -> Result<MessagesResponse, Error> {
        let body = messages_body(request, false)?;
        let out = post("/v1/messages", body, Accept::Json).for_model(&request.model);
        self.json_call(out, &with_version(options)).await
    }

    /// `POST /v1/messages` with `stream: true`; returns once the response headers
    /// arrive. Retries happen only before that point.
    ///
    /// # Errors
    ///
    /// As for [`Client::chat_stream`].
    pub async fn messages_stream(
        &self,
        request: &MessagesRequest,
        options: &CallOptions,
    ) -> Result<MessagesStream, Error> {
        let body = messages_body(request, true)?;
        let out = post("/v1/messages", body, Accept::EventStream).for_model(&request.model);
        let (response, deadlines) = self.send(out, &with_version(options)).await?;
        Ok(MessagesStream::new(
            response,
            deadlines,
            self.inner.max_event_bytes,
        ))
    }
}

fn messages_body(request: &MessagesRequest, stream: bool) -> Result<Vec<u8>, Error> {
    require_model(&request.model)?;
    let mut request = request.clone();
    request.stream = stream.then_some(true);
    serde_json::to_vec(&request).map_err(Error::Encode)
}

/// The call's options with `anthropic-version` added when it has none.
fn with_version(options: &CallOptions) -> CallOptions {
    if options.has_header("anthropic-version") {
        options.clone()
    } else {
        options
            .clone()
            .header("anthropic-version", ANTHROPIC_VERSION)
    }
}
