//! The shipped llama.cpp config (`examples/llama-server/config.yaml`) with real
//! `llama-server` processes, when the machine has them.
//!
//! `LLAMA_SERVER_BIN` (a llama-server binary) and `LLAMA_GGUF` (a small model,
//! e.g. Gemma 3 270M Q4_K_M) must both name files; otherwise the real test
//! prints why and returns. CI does not install llama.cpp, so there it only
//! checks that the config loads.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use futures::StreamExt;
use llama_swap_client::{
    CallOptions, ChatMessage, ChatRequest, ChatResponse, Client, Error, FinishReason, Priority,
    StreamEvent,
};
use llama_swap_server::config::Config;
use llama_swap_server::testing::scheduler::Parallel;
use llama_swap_suite::harness::{LIMIT, Stack, finish, models_of};
use tokio::task::JoinHandle;

const CONFIG: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/examples/llama-server/config.yaml"
);

/// Loads the example config with these values for its two variables.
fn load(bin: &Path, gguf: &Path) -> Config {
    let (bin, gguf) = (bin.display().to_string(), gguf.display().to_string());
    Config::loader()
        .file(CONFIG)
        .env(&|name| match name {
            "LLAMA_SERVER_BIN" => Some(bin.clone()),
            "LLAMA_GGUF" => Some(gguf.clone()),
            _ => None,
        })
        .load()
        .unwrap_or_else(|e| panic!("{CONFIG} does not load: {e}"))
        .config
}

#[test]
fn llama_server_example_config_has_two_models_in_one_exclusive_group() {
    let config = load(
        Path::new("/opt/llama/llama-server"),
        Path::new("/models/m.gguf"),
    );
    let ids: Vec<&str> = config.models.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["gemma-batch", "gemma-chat"]);
    for model in &config.models {
        let port = model.port.expect("the command uses ${PORT}");
        assert!(
            model
                .cmd
                .starts_with("/opt/llama/llama-server --host 127.0.0.1 "),
            "{}",
            model.cmd
        );
        assert!(
            model.cmd.contains(&format!("--port {port} ")),
            "{}",
            model.cmd
        );
        assert!(model.cmd.contains("-m /models/m.gguf "), "{}", model.cmd);
        assert!(model.cmd.contains(&format!("--alias {}", model.id)));
        assert_eq!(model.proxy, format!("http://127.0.0.1:{port}"));
        let group = config.group_of(&model.id).expect("in a group");
        assert!(group.swap && group.exclusive, "{group:?}");
    }
    // The priority is keyed by the alias `chat` and applies to the model.
    assert_eq!(config.resolve("chat"), Some("gemma-chat"));
    assert_eq!(config.priority("gemma-chat"), Some(5));
    assert_eq!(config.priority("gemma-batch"), None);
    // gemma-chat's one llama-server slot (--parallel 1) is known to the proxy.
    assert!(config.models[1].cmd.contains("--parallel 1"));
    assert_eq!(
        config.model("gemma-chat").unwrap().parallel,
        Parallel::limit(1).unwrap()
    );
    assert_eq!(
        config.model("gemma-batch").unwrap().parallel,
        Parallel::Unlimited
    );
}

/// The two variables, when both name files.
fn real_llama() -> Result<(PathBuf, PathBuf), String> {
    let file = |name: &str| -> Result<PathBuf, String> {
        let value = std::env::var_os(name).ok_or(format!("{name} is not set"))?;
        let path = PathBuf::from(value);
        if path.is_file() {
            Ok(path)
        } else {
            Err(format!("{name}={} is not a file", path.display()))
        }
    };
    Ok((file("LLAMA_SERVER_BIN")?, file("LLAMA_GGUF")?))
}

fn ask(model: &str, max_tokens: u32) -> ChatRequest {
    ChatRequest::new(
        model,
        vec![ChatMessage::user("Name three colours, one word each.")],
    )
    .temperature(0.0)
    .max_tokens(max_tokens)
}

fn spawn_ask(
    client: &Client,
    model: &str,
    priority: Priority,
) -> JoinHandle<Result<ChatResponse, Error>> {
    let client = client.clone();
    let request = ask(model, 8);
    tokio::spawn(async move {
        client
            .chat(&request, &CallOptions::with_priority(priority))
            .await
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_llama_server_swap_and_priority_or_skip() {
    let (bin, gguf) = match real_llama() {
        Ok(found) => found,
        Err(why) => {
            eprintln!("skipped: {why} (set LLAMA_SERVER_BIN and LLAMA_GGUF to run it)");
            return;
        }
    };
    let stack = Stack::serve_config(load(&bin, &gguf), &bin).await;
    let client = stack.client();

    // A swap: each model answers, and loading one stopped the other.
    for model in ["chat", "gemma-batch"] {
        let answer =
            tokio::time::timeout(LIMIT * 10, client.chat(&ask(model, 8), &CallOptions::new()))
                .await
                .expect("no answer from llama-server")
                .unwrap_or_else(|e| panic!("{model}: {e}"));
        assert!(!answer.choices.is_empty(), "{answer:?}");
        assert!(answer.finish_reason().is_some(), "{answer:?}");
    }
    assert_eq!(stack.running().await, ["gemma-batch"]);

    // A long low-priority generation keeps gemma-batch busy...
    let long = ChatRequest::new(
        "gemma-batch",
        vec![ChatMessage::user("Count from one to two hundred in words.")],
    )
    .temperature(0.0)
    .max_tokens(160)
    .extra("ignore_eos", true);
    let mut stream = client
        .chat_stream(&long, &CallOptions::with_priority(Priority::Low))
        .await
        .unwrap();
    let mut chunks = 0usize;
    while chunks == 0 {
        match tokio::time::timeout(LIMIT, stream.next()).await.unwrap() {
            Some(Ok(StreamEvent::Chunk(_))) => chunks += 1,
            Some(Ok(_proxy_status)) => {}
            other => panic!("the stream ended before its first chunk: {other:?}"),
        }
    }
    // ...an Elevated call for gemma-chat has to wait for it, and a Low call
    // for the loaded gemma-batch queues behind that (the drain fence) instead
    // of starving it.
    let elevated = spawn_ask(client, "gemma-chat", Priority::Elevated);
    stack.wait_queue_len(1).await;
    let low = spawn_ask(client, "gemma-batch", Priority::Low);
    let queue = stack.wait_queue_len(2).await;
    assert_eq!(models_of(&queue), ["gemma-chat", "gemma-batch"]);
    let ranks: Vec<(i64, i64)> = queue
        .iter()
        .map(|w| (w.requested_priority, w.effective_priority))
        .collect();
    assert_eq!(ranks, [(10, 10), (-10, -10)]);
    assert_eq!(stack.running().await, ["gemma-batch"]);

    // The running generation is not interrupted: it runs to its token limit.
    let mut finish_reason = None;
    while let Some(event) = tokio::time::timeout(LIMIT, stream.next()).await.unwrap() {
        if let StreamEvent::Chunk(chunk) = event.unwrap() {
            chunks += 1;
            if let Some(reason) = chunk.finish_reason() {
                finish_reason = Some(reason.clone());
            }
        }
    }
    assert_eq!(finish_reason, Some(FinishReason::Length), "{chunks} chunks");

    // Then the Elevated call is first out of the queue: the Low one waits
    // while gemma-chat loads and answers.
    stack
        .wait_for("the elevated call to leave the queue first", || async {
            let queue = stack.queue().await;
            (models_of(&queue) == ["gemma-batch"]).then_some(())
        })
        .await;
    finish("the elevated call", elevated).await.unwrap();
    finish("the low call", low).await.unwrap();
    assert_eq!(stack.running().await, ["gemma-batch"]);

    same_model_priority(&stack, client).await;
    stack.shutdown().await;
}

/// `parallel: 1` on gemma-chat: while a long generation holds its one slot, a
/// Low and then an Elevated call for the same model wait in the proxy's queue
/// ("slots full"), and the Elevated one reaches llama-server first.
async fn same_model_priority(stack: &Stack, client: &Client) {
    let long = ChatRequest::new(
        "gemma-chat",
        vec![ChatMessage::user("Count from one to two hundred in words.")],
    )
    .temperature(0.0)
    .max_tokens(120)
    .extra("ignore_eos", true);
    let mut stream = client
        .chat_stream(&long, &CallOptions::new())
        .await
        .unwrap();
    loop {
        match tokio::time::timeout(LIMIT * 10, stream.next())
            .await
            .unwrap()
        {
            Some(Ok(StreamEvent::Chunk(_))) => break,
            Some(Ok(_proxy_status)) => {}
            other => panic!("the stream ended before its first chunk: {other:?}"),
        }
    }
    let low = spawn_ask(client, "gemma-chat", Priority::Low);
    stack.wait_queue_len(1).await;
    let elevated = spawn_ask(client, "gemma-chat", Priority::Elevated);
    let queue = stack.wait_queue_len(2).await;
    let seen: Vec<(i64, &str)> = queue
        .iter()
        .map(|w| (w.requested_priority, w.reason.as_str()))
        .collect();
    // The floor of 5 lifts Low to 5; Elevated ranks 10 and goes first.
    assert_eq!(seen, [(10, "slots full"), (-10, "slots full")]);
    assert_eq!(stack.running().await, ["gemma-chat"]);

    while let Some(event) = tokio::time::timeout(LIMIT, stream.next()).await.unwrap() {
        event.unwrap();
    }
    finish("the elevated call", elevated).await.unwrap();
    finish("the low call", low).await.unwrap();
    // One slot, so they ran one after the other: the Elevated one finished first.
    let activity: serde_json::Value = reqwest::get(format!(
        "{}/api/activity?model=gemma-chat",
        stack.base_url()
    ))
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let finished = |priority: i64| {
        activity["activity"]
            .as_array()
            .unwrap()
            .iter()
            .find(|row| row["requested_priority"] == priority)
            .and_then(|row| row["id"].as_u64())
            .unwrap_or_else(|| panic!("no finished call at {priority}: {activity}"))
    };
    assert!(finished(10) < finished(-10), "{activity}");
    assert!(stack.queue().await.is_empty());
}
