//! The in-process library, tested with a real HTTP client over loopback.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod endpoints;
mod expectations;
mod faults;
mod gate;
mod journal;
mod loading;
mod media;
mod openai_python;
mod replies;
mod streams;
mod websockets;
mod with_client;

use std::time::Duration;

use futures_util::StreamExt;
use mockswap::MockSwap;
use serde_json::{Value, json};

/// Generous upper bound for anything that should happen promptly.
pub const BOUND: Duration = Duration::from_secs(10);

/// A client that never goes through a proxy.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// A chat request body with one user message.
pub fn chat(model: &str, text: &str, stream: bool) -> Value {
    json!({"model": model, "stream": stream, "messages": [{"role": "user", "content": text}]})
}

/// POSTs JSON to `path` with the given `X-Priority` header lines.
pub async fn post(
    mock: &MockSwap,
    path: &str,
    body: &Value,
    priority: &[&str],
) -> reqwest::Response {
    let mut request = client().post(format!("{}{path}", mock.uri())).json(body);
    for value in priority {
        request = request.header("x-priority", *value);
    }
    tokio::time::timeout(BOUND, request.send())
        .await
        .unwrap()
        .unwrap()
}

/// Reads a whole body as text; `Err` carries what arrived before a transport error.
pub async fn body_text(response: reqwest::Response) -> Result<String, String> {
    let mut stream = response.bytes_stream();
    let mut bytes = Vec::new();
    while let Some(chunk) = tokio::time::timeout(BOUND, stream.next()).await.unwrap() {
        match chunk {
            Ok(chunk) => bytes.extend_from_slice(&chunk),
            Err(_) => return Err(String::from_utf8_lossy(&bytes).into_owned()),
        }
    }
    Ok(String::from_utf8(bytes).unwrap())
}

/// The `data:` payloads of an SSE text (LF or CRLF framing).
pub fn data_frames(text: &str) -> Vec<String> {
    text.replace("\r\n", "\n")
        .split("\n\n")
        .filter_map(|frame| {
            frame
                .lines()
                .find_map(|l| l.strip_prefix("data: "))
                .map(str::to_owned)
        })
        .collect()
}
