//! One chat call per priority tier, plain then streaming, against a proxy.
//!
//! ```text
//! cargo run --example priority_tiers -- --base-url http://127.0.0.1:8080 [--model demo]
//! ```
//!
//! Makes, in this order, a non-streaming chat call at Elevated, Normal and Low, then a
//! streaming chat call at Elevated, Normal and Low, and prints one line per call.
//! Exits with status 1 if any call fails. Automated checks run it against a server
//! that records headers, so the order of calls is part of its contract.

use std::process::ExitCode;

use clap::Parser;
use futures::StreamExt;
use llama_swap_client::{
    CallOptions, ChatMessage, ChatRequest, Client, Error, Priority, ProxyStatus, RetryPolicy,
    StreamEvent,
};

/// Command-line flags.
#[derive(Debug, Parser)]
#[command(about = "Make one chat call per priority tier, plain then streaming")]
struct Args {
    /// The proxy's base URL, for example http://127.0.0.1:8080.
    #[arg(long)]
    base_url: String,
    /// The model every call names.
    #[arg(long, default_value = "demo")]
    model: String,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    // No retries: exactly six requests reach the server, in the documented order.
    let client = match Client::builder()
        .base_url(&args.base_url)
        .retry_policy(RetryPolicy::none())
        .build()
    {
        Ok(client) => client,
        Err(err) => {
            eprintln!("priority_tiers: {}", describe(&err));
            return ExitCode::FAILURE;
        }
    };
    let request = ChatRequest::new(
        args.model.as_str(),
        vec![ChatMessage::user("Say hello in five words.")],
    )
    .max_tokens(32);

    let mut failed = 0;
    for tier in Priority::ALL {
        let outcome = client
            .chat(&request, &CallOptions::with_priority(tier))
            .await
            .map(|resp| {
                let finish = resp.finish_reason().map_or("none", |f| f.as_str());
                format!("{:?} (finish: {finish})", resp.text())
            });
        failed += report(tier, "chat", outcome);
    }
    for tier in Priority::ALL {
        let outcome = stream_once(&client, &request, tier).await;
        failed += report(tier, "stream", outcome);
    }

    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        eprintln!("priority_tiers: {failed} of 6 calls failed");
        ExitCode::FAILURE
    }
}

/// Reads one streaming call to its end and summarises it.
async fn stream_once(
    client: &Client,
    request: &ChatRequest,
    tier: Priority,
) -> Result<String, Error> {
    let mut stream = client
        .chat_stream(request, &CallOptions::with_priority(tier))
        .await?;
    let (mut text, mut chunks, mut proxy_events) = (String::new(), 0usize, 0usize);
    let mut last_position = None;
    while let Some(event) = stream.next().await {
        match event? {
            StreamEvent::Chunk(chunk) => {
                chunks += 1;
                text.push_str(chunk.content().unwrap_or_default());
            }
            StreamEvent::Proxy(proxy) => {
                proxy_events += 1;
                if let ProxyStatus::Queued { position } = proxy.status {
                    last_position = Some(position);
                }
            }
            _ => {}
        }
    }
    let queued = last_position.map_or(String::new(), |p| format!(", last queue position #{p}"));
    Ok(format!(
        "{text:?} ({chunks} chunks, {proxy_events} proxy events{queued})"
    ))
}

/// Prints one line for a call; returns 1 when it failed.
fn report(tier: Priority, kind: &str, outcome: Result<String, Error>) -> usize {
    let header = tier
        .header_int()
        .map_or_else(|| "absent".to_owned(), |v| v.to_string());
    match outcome {
        Ok(summary) => {
            println!("{tier:<8} {kind:<6} x-priority={header:<6} ok     {summary}");
            0
        }
        Err(err) => {
            println!(
                "{tier:<8} {kind:<6} x-priority={header:<6} FAILED {}",
                describe(&err)
            );
            1
        }
    }
}

/// The error and its causes, for one readable line.
fn describe(err: &Error) -> String {
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
