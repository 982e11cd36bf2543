//! The cross-crate end-to-end suite: the SDK's calls through the real server
//! (in-process, on `127.0.0.1:0`) to real `mockswap` upstream processes.
//!
//! Order is made deterministic without sleeps: a gated mockswap holds the
//! running request, the test waits until `/api/queue` shows every waiter, then
//! releases, and reads which waiter the scheduler picked from which upstream
//! holds a request next (one model runs at a time in the default group).
//! Every test ends with a checked shutdown: `serve` returns `Ok` and no mockswap
//! process of the test is left.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod bare_proxy;
mod errors;
mod example;
mod majordomo;
mod priority;
mod streaming;
mod tls;

use llama_swap_client::{
    CallOptions, ChatMessage, ChatRequest, ChatResponse, Client, Error, Priority,
};
use tokio::task::JoinHandle;

/// A short chat request for `model`.
fn chat(model: &str) -> ChatRequest {
    ChatRequest::new(model, vec![ChatMessage::user("hi")])
}

/// Sends a non-streaming chat call at `priority` in the background.
fn spawn_chat(
    client: &Client,
    model: &str,
    priority: Priority,
) -> JoinHandle<Result<ChatResponse, Error>> {
    spawn_chat_with(client, model, CallOptions::with_priority(priority))
}

/// Sends a non-streaming chat call with `options` in the background.
fn spawn_chat_with(
    client: &Client,
    model: &str,
    options: CallOptions,
) -> JoinHandle<Result<ChatResponse, Error>> {
    let client = client.clone();
    let request = chat(model);
    tokio::spawn(async move { client.chat(&request, &options).await })
}
