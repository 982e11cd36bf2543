//! A small agent runtime that marks its calls the way the mort bot's does, and runs
//! real tool loops on the SDK's typed API.
//!
//! ```text
//! cargo run --example majordomo_agent -- [--base-url http://127.0.0.1:8080] [--model demo] [--max-turns 4]
//! ```
//!
//! Work triggered from Discord (a person is waiting) runs Elevated and streams, so
//! its text shows as it arrives; scheduled skills, standing queries and the segments
//! of a long video chain run Low; memory consolidation runs Normal. The agent only
//! sees the [`ChatProvider`] trait and passes the priority per call through
//! [`CallOptions`], so one run mixes tiers without touching headers. Tools are typed
//! ([`Tool::function`] with a JSON schema, arguments read into Rust structs with
//! `parse_arguments`), and the history is rebuilt from the SDK's constructors.
//!
//! Without `--base-url` it starts an in-process mockswap with scripted tool-call
//! replies (the model calls a tool while the user spoke last and answers once the
//! tool result is in) and its gate closed: every task's first call arrives, then
//! the gate opens and the mock releases them highest priority first, as a
//! priority-aware proxy would. It prints the order in which they were served. With
//! `--base-url` the same tasks run against that proxy and whatever model it serves.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;
use futures::StreamExt;
use llama_swap_client::{
    CallOptions, ChatEvent, ChatMessage, ChatProvider, ChatRequest, ChatResponse, Client, Error,
    Priority, ProxyStatus, Tool, ToolCall, ToolChoice,
};
use mockswap::{MockSwap, Reply, ReplyRule};
use serde::Deserialize;
use serde_json::json;
use tokio::task::JoinSet;

/// How long the in-process mock waits for every task's first call to arrive.
const GATHER_TIMEOUT: Duration = Duration::from_secs(30);

/// Command-line flags.
#[derive(Debug, Parser)]
#[command(about = "Run a few agent tasks with bot-style priorities and tool loops against a proxy")]
struct Args {
    /// The proxy's base URL, for example http://127.0.0.1:8080 (https works too).
    /// Default: an in-process mockswap on an ephemeral loopback port.
    #[arg(long)]
    base_url: Option<String>,
    /// The model every call names.
    #[arg(long, default_value = "demo")]
    model: String,
    /// Most model turns one task may take (each round of tool calls adds one).
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

    fn kind(&self) -> &'static str {
        match self {
            Trigger::Discord { .. } => "discord",
            Trigger::ScheduledSkill { .. } => "scheduled-skill",
            Trigger::StandingQuery { .. } => "standing-query",
            Trigger::VideoChainSegment { .. } => "video-chain",
            Trigger::MemoryConsolidation => "memory",
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
    /// Whether the task offers the bot's tools.
    tools: bool,
}

/// The arguments of `current_time`.
#[derive(Debug, Deserialize)]
struct TimeArgs {
    /// An IANA zone name; only UTC is known to this toy clock.
    #[serde(default)]
    timezone: Option<String>,
}

/// The arguments of `search_notes`.
#[derive(Debug, Deserialize)]
struct SearchArgs {
    query: String,
}

/// The bot's tools, as the model sees them.
fn tools() -> Vec<Tool> {
    vec![
        Tool::function(
            "current_time",
            "The current time as seconds since the Unix epoch.",
            json!({"type": "object", "properties": {"timezone": {"type": "string"}}}),
        ),
        Tool::function(
            "search_notes",
            "Search the bot's notes and return the matching lines.",
            json!({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}),
        ),
    ]
}

/// Runs one tool call; a bad call becomes a result the model can read.
fn run_tool(call: &ToolCall) -> String {
    match call.name() {
        "current_time" => match call.function.parse_arguments::<TimeArgs>() {
            Ok(args) => {
                let secs = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                let zone = args.timezone.unwrap_or_else(|| "UTC".to_owned());
                json!({"unix_seconds": secs, "timezone": zone}).to_string()
            }
            Err(err) => json!({"error": err.to_string()}).to_string(),
        },
        "search_notes" => match call.function.parse_arguments::<SearchArgs>() {
            Ok(args) => {
                json!({"query": args.query, "matches": ["Rust 1.95 released (notes, 2026-11-27)"]})
                    .to_string()
            }
            Err(err) => json!({"error": err.to_string()}).to_string(),
        },
        other => json!({"error": format!("unknown tool {other:?}")}).to_string(),
    }
}

/// The agent: a provider, a model, and a turn limit.
struct Agent {
    provider: Arc<dyn ChatProvider>,
    model: String,
    max_turns: usize,
}

/// How a task ended.
#[derive(Default)]
struct Outcome {
    answer: String,
    turns: usize,
    tools_run: Vec<String>,
    /// Argument pieces of the streamed tool calls (more than one per call means
    /// the arguments arrived split across deltas).
    argument_pieces: usize,
    last_queue_position: Option<u32>,
}

impl Agent {
    /// Runs one task: calls the model, runs the tools it asks for, calls it again
    /// with the results, until it answers or the turn limit is reached. Every call
    /// of the task carries the task's priority.
    async fn run(&self, task: &Task) -> Result<Outcome, Error> {
        let options = CallOptions::with_priority(task.trigger.priority())
            .header("x-majordomo-trigger", task.trigger.kind());
        let mut history = vec![
            ChatMessage::system("You are majordomo, a helpful bot. Be brief."),
            ChatMessage::user(task.prompt.as_str()),
        ];
        let mut outcome = Outcome::default();
        for turn in 1..=self.max_turns {
            outcome.turns = turn;
            let mut request = ChatRequest::new(self.model.as_str(), history.clone());
            if task.tools {
                request = request.tools(tools()).tool_choice(ToolChoice::Auto);
            }
            let response = if task.trigger.streams() {
                self.streamed_turn(task, &request, &options, &mut outcome)
                    .await?
            } else {
                self.provider.chat(&request, &options).await?
            };
            let Some(message) = response.message().cloned() else {
                return Ok(outcome);
            };
            if message.tool_calls.is_empty() {
                outcome.answer = message.text();
                return Ok(outcome);
            }
            let results: Vec<ChatMessage> = message
                .tool_calls
                .iter()
                .map(|call| {
                    outcome.tools_run.push(call.name().to_owned());
                    ChatMessage::tool(call.id.as_str(), run_tool(call))
                })
                .collect();
            // The assistant turn goes back as it came (its reasoning is left out
            // of the request by the SDK), then one result per call.
            history.push(message);
            history.extend(results);
        }
        outcome.answer = "(turn limit reached)".to_owned();
        Ok(outcome)
    }

    /// One streamed turn: live text for the person, whole tool calls for the loop.
    async fn streamed_turn(
        &self,
        task: &Task,
        request: &ChatRequest,
        options: &CallOptions,
        outcome: &mut Outcome,
    ) -> Result<ChatResponse, Error> {
        let label = task.trigger.label();
        let mut events = self.provider.chat_stream(request, options).await?.events();
        while let Some(event) = events.next().await {
            match event? {
                ChatEvent::Proxy(proxy) => {
                    if let ProxyStatus::Queued { position } = proxy.status
                        && outcome.last_queue_position != Some(position)
                    {
                        outcome.last_queue_position = Some(position);
                        println!("  [{label}] queued at #{position}");
                    }
                }
                ChatEvent::TextDelta { text, .. } => println!("  [{label}] text: {text:?}"),
                ChatEvent::ToolCallStarted { name, .. } => {
                    println!("  [{label}] calling {name}...");
                }
                ChatEvent::ToolCallArgumentsDelta { .. } => outcome.argument_pieces += 1,
                ChatEvent::ToolCallFinished {
                    call, arguments, ..
                } => println!(
                    "  [{label}] {} arguments complete: {}",
                    call.name(),
                    arguments.map_or_else(|| call.function.arguments.clone(), |a| a.to_string())
                ),
                _ => {}
            }
        }
        Ok(events.response())
    }
}

fn tasks() -> Vec<Task> {
    let task = |trigger, prompt: &str, tools| Task {
        trigger,
        prompt: prompt.to_owned(),
        tools,
    };
    let mut tasks = vec![
        task(
            Trigger::ScheduledSkill {
                skill: "morning-digest".into(),
            },
            "Summarise yesterday's server activity in three bullet points.",
            false,
        ),
        task(
            Trigger::StandingQuery {
                query: "new rust release".into(),
            },
            "Has a new stable Rust been released? Search the notes.",
            true,
        ),
        task(
            Trigger::MemoryConsolidation,
            "Merge these notes: 'likes tea', 'prefers green tea'.",
            false,
        ),
        task(
            Trigger::Discord { user: "ada".into() },
            "What time is it? Use the clock tool.",
            true,
        ),
    ];
    for segment in 1..=3 {
        tasks.push(task(
            Trigger::VideoChainSegment {
                video: "talk-2026-11".into(),
                segment,
            },
            &format!("Summarise transcript segment {segment} of the talk."),
            false,
        ));
    }
    tasks
}

/// The in-process proxy: a tool call while the user spoke last (per prompt), an
/// answer once a tool result is in, an echo for everything else.
async fn start_mock(model: &str) -> Result<MockSwap, mockswap::StartError> {
    MockSwap::builder()
        .models([model.to_owned()])
        .reply(
            ReplyRule::new(Reply::tool_call("current_time", json!({"timezone": "UTC"})))
                .has_tools(true)
                .last_message_role("user")
                .body_text_contains("clock tool"),
        )
        .reply(
            ReplyRule::new(Reply::tool_call(
                "search_notes",
                json!({"query": "stable Rust release"}),
            ))
            .has_tools(true)
            .last_message_role("user")
            .body_text_contains("Search the notes"),
        )
        .reply(
            ReplyRule::new(Reply::text("Done: the tool's answer is in.")).last_message_role("tool"),
        )
        .gate_closed()
        .start()
        .await
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let (base_url, mock) = match args.base_url.clone() {
        Some(url) => (url, None),
        None => match start_mock(&args.model).await {
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
            Ok(outcome) => {
                let tools = if outcome.tools_run.is_empty() {
                    String::new()
                } else {
                    format!(", tools [{}]", outcome.tools_run.join(", "))
                };
                let pieces = if outcome.argument_pieces > 0 {
                    format!(", streamed arguments in {} pieces", outcome.argument_pieces)
                } else {
                    String::new()
                };
                println!(
                    "{tier:<8} {:<38} done after {elapsed} ms, {} turn(s){tools}{pieces}: {:?}",
                    task.trigger.label(),
                    outcome.turns,
                    outcome.answer
                );
            }
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
        let turn = if req.body_text().contains("\"role\":\"tool\"") {
            "tool result"
        } else {
            "first turn"
        };
        println!(
            "  {:>2}. x-priority={priority:<6} {trigger:<16} {turn}",
            at + 1
        );
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
