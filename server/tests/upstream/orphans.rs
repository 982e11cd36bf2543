//! No process outlives its model: descendants that left the process group or the
//! session are stopped with their model, and orphaned descendants are adopted and
//! reaped.

use std::path::Path;
use std::time::Duration;

use llama_swap_server::testing::launcher::Launcher;
use llama_swap_server::testing::upstream::{Monitor, ProcessSpec, Supervisor, adopt_orphans};

use crate::support::{LIMIT, free_port, is_alive, wait_exit, within};

fn spec(model: &str, cmd: &str) -> ProcessSpec {
    ProcessSpec {
        model: model.into(),
        cmd: cmd.into(),
        cmd_stop: None,
        env: vec![],
        proxy: format!("http://127.0.0.1:{}", free_port()),
        check_endpoint: None,
        health_check_timeout: Duration::from_secs(60),
        sleep: None,
        monitor: Monitor::default(),
    }
}

/// The pid printed by the upstream on a line `<prefix><pid>`.
async fn pid_line(sup: &Supervisor, model: &str, prefix: &str) -> u32 {
    let mut sub = sup.logs().subscribe(model).unwrap();
    let parse = |text: &str| text.strip_prefix(prefix)?.trim().parse().ok();
    if let Some(pid) = sub.history.iter().find_map(|l| parse(&l.text)) {
        return pid;
    }
    within(&format!("a line {prefix:?}"), async {
        loop {
            if let Some(pid) = parse(&sub.live.recv().await.unwrap().text) {
                return pid;
            }
        }
    })
    .await
}

/// Field `index` (1-based, as in proc(5)) of `/proc/<pid>/stat`.
fn stat_field(pid: u32, index: usize) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    rest.split_whitespace().nth(index - 3).map(str::to_owned)
}

/// Polls until `cond` holds, for the changes of a process that nothing announces
/// (its session, its parent, its reaping; its exit has [`wait_exit`]).
pub(crate) async fn eventually(what: &str, cond: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + LIMIT;
    while !cond() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn exists(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

#[tokio::test]
async fn a_descendant_that_left_the_session_is_stopped_with_its_model() {
    let cmd = "sh -c 'setsid sleep 300 & echo escaped $!; exec sleep 300'";
    let (sup, _events) = Supervisor::new(vec![spec("m", cmd)], 100);
    within("ready", sup.ensure_ready("m")).await.unwrap();
    let leader = sup.status("m").unwrap().pid.unwrap();
    let escaped = pid_line(&sup, "m", "escaped ").await;
    eventually("the descendant has its own session", || {
        stat_field(escaped, 6).is_some_and(|sid| sid == escaped.to_string())
    })
    .await;
    assert_ne!(stat_field(escaped, 5), Some(leader.to_string()));

    within("stop", sup.stop("m", Duration::from_secs(5))).await;
    wait_exit(escaped).await;
    assert!(!is_alive(escaped), "the descendant outlived its model");
    sup.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn an_orphaned_descendant_is_adopted_and_reaped_when_its_model_stops() {
    adopt_orphans().unwrap();
    // The inner shell exits at once, orphaning its background child, which has
    // moved to a session of its own.
    let cmd = r#"sh -c 'sh -c "setsid sleep 300 & echo orphan \$!"; exec sleep 300'"#;
    let (sup, _events) = Supervisor::new(vec![spec("m", cmd)], 100);
    within("ready", sup.ensure_ready("m")).await.unwrap();
    let orphan = pid_line(&sup, "m", "orphan ").await;
    let me = std::process::id().to_string();
    // The orphan is reparented as its parent (the inner shell) exits, before
    // that exit is announced on the parent's pidfd.
    if let Some(parent) = stat_field(orphan, 4).filter(|ppid| *ppid != me) {
        wait_exit(parent.parse().unwrap()).await;
    }
    assert_eq!(
        stat_field(orphan, 4),
        Some(me),
        "the orphan was not adopted by this process"
    );

    within("stop", sup.stop("m", Duration::from_secs(5))).await;
    wait_exit(orphan).await;
    // The reaper that removes the zombie announces nothing: a bounded look.
    eventually("the orphan is reaped", || !exists(orphan)).await;
    sup.shutdown(Duration::from_secs(5)).await;
}
