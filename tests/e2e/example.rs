//! The `priority_tiers` example, run as the built binary: what it sends, and
//! how the real server ranks each of its six calls.

use std::process::{Output, Stdio};

use llama_swap_client::Priority;
use llama_swap_suite::harness::{LIMIT, Stack, Upstream, built, finish, models_of};
use mockswap::MockSwap;
use tokio::process::Command;
use tokio::task::JoinHandle;

use crate::spawn_chat;

/// Starts `target/debug/examples/priority_tiers` against `base_url`.
fn run_example(base_url: &str) -> JoinHandle<Output> {
    let mut command = Command::new(built("examples/priority_tiers"));
    command
        .args(["--base-url", base_url, "--model", "demo"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let child = command.spawn().expect("cannot start the example");
    tokio::spawn(async move { child.wait_with_output().await.expect("example I/O failed") })
}

/// Checks the example succeeded and printed one `ok` line per call, in order.
fn check_output(output: &Output) {
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the example failed: {}\nstdout:\n{stdout}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let lines: Vec<Vec<&str>> = stdout
        .lines()
        .map(|l| l.split_whitespace().take(4).collect())
        .collect();
    let expected: Vec<Vec<&str>> = [
        ["elevated", "chat", "x-priority=10", "ok"],
        ["normal", "chat", "x-priority=absent", "ok"],
        ["low", "chat", "x-priority=-10", "ok"],
        ["elevated", "stream", "x-priority=10", "ok"],
        ["normal", "stream", "x-priority=absent", "ok"],
        ["low", "stream", "x-priority=-10", "ok"],
    ]
    .iter()
    .map(|l| l.to_vec())
    .collect();
    assert_eq!(lines, expected, "stdout:\n{stdout}");
}

#[tokio::test]
async fn priority_tiers_example_sends_10_absent_minus_10_twice() {
    let mock = MockSwap::start().await;
    let output = finish("the example", run_example(&mock.uri())).await;
    check_output(&output);
    mock.assert_priorities([Some(10), None, Some(-10), Some(10), None, Some(-10)]);
    let streamed: Vec<bool> = mock.requests().iter().map(|r| r.stream).collect();
    assert_eq!(streamed, [false, false, false, true, true, true]);
}

/// Each of the example's calls is made to wait in the real server's queue, so
/// `/api/queue` shows the priority the server parsed for it.
///
/// Both models are gated and `other` (config floor 100) must stop `demo` to
/// run. A round: the example's call waits while `other` holds a call; the test
/// reads its rank and lets `other` finish; the call loads `demo` and is held
/// there while the test queues the next call for `other`; then `demo` is let
/// through. The example's next call arrives while that call for `other` waits,
/// so the drain fence queues it even though `demo` is loaded and idle, and it
/// stays queued while `other` runs and holds again.
#[tokio::test]
async fn priority_tiers_example_reaches_the_real_server_as_10_0_minus_10_twice() {
    let floors = "routing:\n  scheduler:\n    settings:\n      fifo:\n        priority:\n          other: 100\n";
    let upstreams = [Upstream::gated("demo"), Upstream::gated("other")];
    let stack = Stack::start(&upstreams, floors).await;
    let client = stack.client();
    let mut other = Some(spawn_chat(client, "other", Priority::Normal));
    stack.wait_held("other", 1).await;

    let example = run_example(stack.base_url());
    let mut ranks = Vec::new();
    for call in 0..6 {
        // Both halves hold until the test opens other's gate, so waiting for
        // one and then the other sees them hold together.
        stack.wait_held("other", 1).await;
        let queue = stack
            .wait_for(&format!("call {call} of the example queued"), || async {
                let queue = stack.queue().await;
                (models_of(&queue) == ["demo"]).then_some(queue)
            })
            .await;
        assert_eq!(stack.held("other").await, Some(1), "call {call}");
        ranks.push((queue[0].requested_priority, queue[0].effective_priority));

        stack.open_gate("other").await;
        let held = other.take().unwrap();
        finish("the call for other", held).await.unwrap();
        stack.wait_held("demo", 1).await;
        let journal = tokio::time::timeout(LIMIT, stack.journal("demo"))
            .await
            .unwrap()
            .unwrap();
        let last = journal.last().unwrap();
        assert_eq!(last["stream"], call >= 3, "call {call}: {last}");

        if call < 5 {
            other = Some(spawn_chat(client, "other", Priority::Normal));
            stack.wait_queue_len(1).await;
        }
        stack.open_gate("demo").await;
    }
    assert_eq!(
        ranks,
        [(10, 10), (0, 0), (-10, -10), (10, 10), (0, 0), (-10, -10)]
    );
    check_output(&finish("the example", example).await);
    stack.shutdown().await;
}
