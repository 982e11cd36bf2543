//! A small agent loop that marks its calls the way the mort bot's runtime does.
//!
//! ```text
//! cargo run --example majordomo_agent -- --base-url http://127.0.0.1:8080 [--model demo]
//! ```
//!
//! Work triggered from Discord (a person is waiting) runs Elevated; scheduled skills,
//! standing queries and the segments of a long video chain run Low; everything else
//! (here: memory consolidation) runs Normal. The agent only sees the
//! [`ChatProvider`] trait and passes the priority per call through [`CallOptions`],
//! so one run mixes tiers without touching headers. All tasks start together, as
//! they would in the bot, so a priority-aware proxy serves the Discord work first.
//!
//! Without `--base-url` it starts an in-process mockswap with its gate closed, lets
//! every task's first call arrive, then opens the gate: the mock releases waiting
//! requests highest priority first, as a priority-aware proxy would, and the example
//! prints the order in which they were served.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use futures::StreamExt;
use llama_swap_client::{
    CallOptions, ChatMessage, ChatProvider, ChatRequest, ChatResponse, Client, Error, Priority,
    ProxyStatus, StreamEvent, Tool,
};
use mockswap::MockSwap;
use serde_json::json;
use tokio::task::JoinSet;

/// How long the in-process mock waits for every task's first call to arrive.
const GATHER_TIMEOUT: Duration = Duration::from_secs(30);

/// Command-line flags.
#[derive(Debug, Parser)]
#[command(about = "Run a few agent tasks with bot-style priorities against a proxy")]
struct Args {
    /// The proxy's base URL, for example http://127.0.0.1:8080. Default: an
    /// in-process mockswap on an ephemeral loopback port.
    #[arg(long)]
    base_url: Option<String>,
    /// The model every call names.
    #[arg(long, default_value = "demo")]
    model: String,
    /// Most model turns one task may take (tool calls add turns).
    #[arg(long, default_value_t = 4)]
    max_turns: usize,
}

/// What started a piece of agent work.
#[derive(Debug, Clone)]
enum Trigger {
    /// A message in a Discord channel: someone is waiting for the answer.
    Discord { user: String },
    /// A skill the scheduler runs on a timer.
    ScheduledSkill { skill: String },
    /// A saved query the bot re-runs to watch for changes.
    StandingQuery { query: String },
    /// One segment of a long video being summarised piece by piece.
    VideoChainSegment { video: String, segment: u32 },
    /// Housekeeping nobody waits for but that should not lag behind batch work.
    MemoryConsolidation,
}

impl Trigger {
    /// The bot's rule: people first, background work last, the rest in between.
    fn priority(&self) -> Priority {
        match self {
            Trigger::Discord { .. } => Priority::Elevated,
            Trigger::ScheduledSkill { .. }
            | Trigger::StandingQuery { .. }
            | Trigger::VideoChainSegment { .. } => Priority::Low,
            Trigger::MemoryConsolidation => Priority::Normal,
        }
    }

    fn label(&self) -> String {
        match self {
            Trigger::Discord { user } => format!("discord message from {user}"),
            Trigger::ScheduledSkill { skill } => format!("scheduled skill {skill}"),
            Trigger::StandingQuery { query } => format!("standing query {query:?}"),
            Trigger::VideoChainSegment { video, segment } => {
                format!("video {video} segment {segment}")
            }
            Trigger::MemoryConsolidation => "memory consolidation".to_owned(),
        }
    }

    /// A person watches Discord replies appear, so those stream; the rest need
    /// only the final text.
    fn streams(&self) -> bool {
        matches!(self, Trigger::Discord { .. })
    }
}

/// One unit of agent work.
#[derive(Debug, Clone)]
struct Task {
    trigger: Trigger,
    prompt: String,
}

/// The agent: a provider, a model, and a turn limit.
struct Agent {
    provider: Arc<dyn ChatProvider>,
    model: String,
    max_turns: usize,
}

/// How a task ended.
struct Outcome {
    answer: String,
    turns: usize,
    proxy_events: usize,
}

impl Agent {
    /// Runs one task: calls the model, runs any tools it asks for, and calls it
    /// again with the results, until it answers or the turn limit is reached. Every
    /// call of the task carries the task's priority.
    async fn run(&self, task: &Task) -> Result<Outcome, Error> {
        let options = CallOptions::with_priority(task.trigger.priority())
            .header("x-majordomo-trigger", trigger_kind(&task.trigger));
        let mut messages = vec![
            ChatMessage::system("You are majordomo, a helpful bot. Be brief."),
            ChatMessage::user(task.prompt.as_str()),
        ];
        let mut proxy_events = 0;
        for turn in 1..=self.max_turns {
            let request =
                ChatRequest::new(self.model.as_str(), messages.clone()).tool(clock_tool());
            let response = if task.trigger.streams() {
                let mut stream = self.provider.chat_stream(&request, &options).await?;
                let mut chunks = Vec::new();
                while let Some(event) = stream.next().await {
                    match event? {
                        StreamEvent::Proxy(proxy) => {
                            proxy_events += 1;
                            if let ProxyStatus::Queued { position } = proxy.status {
                                println!("  [{}] queued at #{position}", task.trigger.label());
                            }
                        }
                        StreamEvent::Chunk(chunk) => chunks.push(chunk),
                        _ => {}
                    }
                }
                ChatResponse::from_chunks(chunks)
            } else {
                self.provider.chat(&request, &options).await?
            };
            let Some(choice) = response.choices.first() else {
                return Ok(Outcome {
                    answer: String::new(),
                    turns: turn,
                    proxy_events,
                });
            };
            let message = choice.message.clone();
            if message.tool_calls.is_empty() {
                return Ok(Outcome {
                    answer: message.text(),
                    turns: turn,
                    proxy_events,
                });
            }
            let results: Vec<ChatMessage> = message
                .tool_calls
                .iter()
                .map(|call| ChatMessage::tool(call.id.as_str(), run_tool(&call.function.name)))
                .collect();
            messages.push(message);
            messages.extend(results);
        }
        Ok(Outcome {
            answer: "(turn limit reached)".to_owned(),
            turns: self.max_turns,
            proxy_events,
        })
    }
}

fn trigger_kind(trigger: &Trigger) -> &'static str {
    match trigger {
        Trigger::Discord { .. } => "discord",
        Trigger::ScheduledSkill { .. } => "scheduled-skill",
        Trigger::StandingQuery { .. } => "standing-query",
        Trigger::VideoChainSegment { .. } => "video-chain",
        Trigger::MemoryConsolidation => "memory",
    }
}

fn clock_tool() -> Tool {
    Tool::function(
        "current_time",
        "The current time as seconds since the Unix epoch.",
        json!({"type": "object", "properties": {}}),
    )
}

fn run_tool(name: &str) -> String {
    match name {
        "current_time" => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or_else(|_| "unknown".to_owned(), |d| d.as_secs().to_string()),
        other => format!("unknown tool {other:?}"),
    }
}

fn tasks() -> Vec<Task> {
    let mut tasks = vec![
        Task {
            trigger: Trigger::ScheduledSkill {
                skill: "morning-digest".into(),
            },
            prompt: "Summarise yesterday's server activity in three bullet points.".into(),
        },
        Task {
            trigger: Trigger::StandingQuery {
                query: "new rust release".into(),
            },
            prompt: "Has a new stable Rust been released? Answer yes or no.".into(),
        },
        Task {
            trigger: Trigger::MemoryConsolidation,
            prompt: "Merge these notes: 'likes tea', 'prefers green tea'.".into(),
        },
        Task {
            trigger: Trigger::Discord { user: "ada".into() },
            prompt: "What time is it? Use the clock tool.".into(),
        },
    ];
    for segment in 1..=3 {
        tasks.push(Task {
            trigger: Trigger::VideoChainSegment {
                video: "talk-2026-11".into(),
                segment,
            },
            prompt: format!("Summarise transcript segment {segment} of the talk."),
        });
    }
    tasks
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let (base_url, mock) = match args.base_url.clone() {
        Some(url) => (url, None),
        None => match MockSwap::builder()
            .models([args.model.clone()])
            .gate_closed()
            .start()
            .await
        {
            Ok(mock) => {
                println!(
                    "no --base-url: serving from an in-process mockswap at {}",
                    mock.uri()
                );
                (mock.uri(), Some(mock))
            }
            Err(err) => {
                eprintln!("majordomo_agent: could not start mockswap: {err}");
                return ExitCode::FAILURE;
            }
        },
    };
    let client = match Client::new(base_url) {
        Ok(client) => client,
        Err(err) => {
            eprintln!("majordomo_agent: {}", describe(&err));
            return ExitCode::FAILURE;
        }
    };
    let agent = Arc::new(Agent {
        provider: Arc::new(client),
        model: args.model,
        max_turns: args.max_turns,
    });

    let tasks = tasks();
    let task_count = tasks.len();
    let started = Instant::now();
    let mut running = JoinSet::new();
    for task in tasks {
        let agent = Arc::clone(&agent);
        running.spawn(async move {
            let outcome = agent.run(&task).await;
            (task, outcome)
        });
    }

    if let Some(mock) = &mock {
        // Every task is waiting now, so the release order is decided by priority
        // alone, not by which task happened to start first.
        if let Err(err) = mock.wait_for_held(task_count, GATHER_TIMEOUT).await {
            eprintln!("majordomo_agent: the tasks' first calls did not all arrive: {err}");
            mock.open_gate();
            running.abort_all();
            return ExitCode::FAILURE;
        }
        println!("{task_count} calls waiting at the mock; opening the gate");
        mock.open_gate();
    }

    let mut failed = 0;
    while let Some(joined) = running.join_next().await {
        let (task, outcome) = match joined {
            Ok(done) => done,
            Err(err) => {
                eprintln!("majordomo_agent: a task panicked: {err}");
                failed += 1;
                continue;
            }
        };
        let tier = task.trigger.priority();
        let elapsed = started.elapsed().as_millis();
        match outcome {
            Ok(outcome) => println!(
                "{tier:<8} {:<38} done after {elapsed} ms, {} turn(s), {} proxy event(s): {:?}",
                task.trigger.label(),
                outcome.turns,
                outcome.proxy_events,
                outcome.answer
            ),
            Err(err) => {
                failed += 1;
                println!(
                    "{tier:<8} {:<38} FAILED after {elapsed} ms: {}",
                    task.trigger.label(),
                    describe(&err)
                );
            }
        }
    }
    if let Some(mock) = &mock {
        print_dispatch_order(mock);
    }
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Shows the order in which the mock served the calls, with what each one sent.
fn print_dispatch_order(mock: &MockSwap) {
    let mut served: Vec<_> = mock
        .requests()
        .into_iter()
        .filter_map(|req| req.dispatched.map(|at| (at, req)))
        .collect();
    served.sort_by_key(|(at, _)| *at);
    println!("order in which the mock served the calls:");
    for (at, req) in served {
        let priority = req
            .header_values("x-priority")
            .first()
            .cloned()
            .unwrap_or_else(|| "absent".to_owned());
        let trigger = req
            .header_values("x-majordomo-trigger")
            .first()
            .cloned()
            .unwrap_or_default();
        println!("  {:>2}. x-priority={priority:<6} {trigger}", at + 1);
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
