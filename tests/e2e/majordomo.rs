//! The `majordomo_agent` example, run as the built binary: tool loops on the typed
//! API, by default against its in-process mockswap, and against a given URL.

use std::process::{Output, Stdio};

use llama_swap_suite::harness::{Stack, Upstream, built, finish};
use tokio::process::Command;
use tokio::task::JoinHandle;

fn run_majordomo(args: &[&str]) -> JoinHandle<Output> {
    let mut command = Command::new(built("examples/majordomo_agent"));
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let child = command.spawn().expect("cannot start the example");
    tokio::spawn(async move { child.wait_with_output().await.expect("example I/O failed") })
}

fn stdout_of(output: &Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "the example failed: {}\nstdout:\n{stdout}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

fn line_with<'a>(stdout: &'a str, needle: &str) -> &'a str {
    stdout
        .lines()
        .find(|l| l.contains(needle) && l.contains("done after"))
        .unwrap_or_else(|| panic!("no finished task line with {needle:?}:\n{stdout}"))
}

#[tokio::test]
async fn majordomo_runs_elevated_streamed_and_low_tool_loops_served_by_priority() {
    let stdout = stdout_of(&finish("the example", run_majordomo(&[])).await);

    let discord = line_with(&stdout, "discord message from ada");
    assert!(discord.starts_with("elevated"), "{discord}");
    assert!(
        discord.contains("2 turn(s), tools [current_time]"),
        "{discord}"
    );
    let pieces: usize = discord
        .split("streamed arguments in ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no argument pieces reported: {discord}"));
    assert!(pieces >= 2, "the arguments did not arrive split: {discord}");
    assert!(stdout.contains("calling current_time..."), "{stdout}");

    let standing = line_with(&stdout, "standing query");
    assert!(standing.starts_with("low"), "{standing}");
    assert!(standing.contains("tools [search_notes]"), "{standing}");
    assert!(standing.contains("the tool's answer is in"), "{standing}");
    let memory = line_with(&stdout, "memory consolidation");
    assert!(memory.starts_with("normal"), "{memory}");

    // The first turns were held together and released by priority: 10, then
    // no header, then the -10s.
    let first_turns: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains("x-priority=") && l.ends_with("first turn"))
        .map(|l| {
            l.split("x-priority=")
                .nth(1)
                .and_then(|rest| rest.split_whitespace().next())
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(
        first_turns,
        ["10", "absent", "-10", "-10", "-10", "-10", "-10"],
        "{stdout}"
    );
    // Every turn of a task carries its priority, tool-result turns included.
    let tool_turns: Vec<&str> = stdout
        .lines()
        .filter(|l| l.ends_with("tool result"))
        .collect();
    assert_eq!(tool_turns.len(), 2, "{stdout}");
    assert!(
        tool_turns
            .iter()
            .any(|l| l.contains("x-priority=10") && l.contains("discord"))
    );
    assert!(
        tool_turns
            .iter()
            .any(|l| l.contains("x-priority=-10") && l.contains("standing-query"))
    );
}

#[tokio::test]
async fn majordomo_runs_against_a_given_url_through_the_real_server() {
    let stack = Stack::start(&[Upstream::new("demo")], "").await;
    let output = finish(
        "the example",
        run_majordomo(&[
            "--base-url",
            stack.base_url(),
            "--model",
            "demo",
            "--max-turns",
            "2",
        ]),
    )
    .await;
    let stdout = stdout_of(&output);
    let finished = stdout.lines().filter(|l| l.contains("done after")).count();
    assert_eq!(finished, 7, "{stdout}");
    assert!(
        !stdout.contains("order in which the mock served"),
        "{stdout}"
    );
    stack.shutdown().await;
}
