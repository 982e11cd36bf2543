//! The router actor on a paused clock, with a launcher the test drives by channel:
//! every `ensure_ready` and `stop` call is handed to the test, which decides when
//! (and how) it completes.

use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use llama_swap_server::testing::launcher::{LaunchError, UpstreamEvent};
use llama_swap_server::testing::policy::GroupSettings;
use llama_swap_server::testing::router::{
    Lease, ModelState, RouteError, Router, RouterHandle, WaitStatus,
};
use llama_swap_server::testing::scheduler::{ModelSettings, SchedulerKind, SchedulerSettings};
use tokio::sync::mpsc;
use tokio::time::{Instant, timeout};

use crate::support::{BOUND, Call, FakeLauncher, rig, submit};

fn models(ids: &[&str]) -> SchedulerSettings {
    SchedulerSettings::new(ids.iter().map(|id| ModelSettings::new(*id)).collect())
}

#[test]
fn handles_tickets_and_leases_can_cross_tasks() {
    fn send_sync_static<T: Send + Sync + 'static>() {}
    send_sync_static::<RouterHandle>();
    send_sync_static::<llama_swap_server::testing::router::Ticket>();
    send_sync_static::<Lease>();
}

#[tokio::test(start_paused = true)]
async fn invalid_settings_are_refused_at_spawn() {
    let (calls, _rx) = mpsc::unbounded_channel();
    let (_exits, exits_rx) = mpsc::channel(1);
    let mut s = models(&["a"]);
    s.models.push(ModelSettings::new("a"));
    let error = Router::spawn(s, Arc::new(FakeLauncher { calls }), exits_rx).unwrap_err();
    assert_eq!(
        error,
        llama_swap_server::testing::scheduler::SettingsError::DuplicateModel { model: "a".into() }
    );
}

#[tokio::test(start_paused = true)]
async fn ticket_is_granted_once_the_launcher_reports_ready() {
    let mut r = rig(models(&["a"]));
    let ticket = r.router.submit(submit("a", 3)).await.unwrap();
    assert_eq!(ticket.model(), "a");
    assert_eq!(ticket.effective_priority(), 3);
    let mut status = ticket.status();
    let done = r.expect_ensure("a").await;
    status
        .wait_for(|s| *s == WaitStatus::Starting)
        .await
        .unwrap();
    done.send(Ok(())).unwrap();
    let lease = timeout(BOUND, ticket.granted()).await.unwrap().unwrap();
    assert_eq!(lease.model(), "a");
    assert_eq!(*status.borrow(), WaitStatus::Granted);
    assert_eq!(r.router.running().await[0].state, ModelState::Ready);
}

#[tokio::test(start_paused = true)]
async fn aliases_resolve_to_the_model_id() {
    let mut m = ModelSettings::new("qwen-7b");
    m.aliases = vec!["qwen".into()];
    let mut r = rig(SchedulerSettings::new(vec![m]));
    assert_eq!(r.router.resolve("qwen").as_deref(), Some("qwen-7b"));
    assert_eq!(r.router.resolve("nope"), None);
    let lease = r.load("qwen", &[]).await;
    assert_eq!(lease.model(), "qwen-7b");
}

#[tokio::test(start_paused = true)]
async fn admission_errors_reach_the_submitter() {
    let mut m = ModelSettings::new("a");
    m.concurrency_limit = 1;
    let mut r = rig(SchedulerSettings::new(vec![m]));
    assert_eq!(
        r.router.submit(submit("zzz", 0)).await.unwrap_err(),
        RouteError::UnknownModel {
            model: "zzz".into()
        }
    );
    let _lease = r.load("a", &[]).await;
    assert!(matches!(
        r.router.submit(submit("a", 0)).await.unwrap_err(),
        RouteError::ConcurrencyLimit { .. }
    ));
}

#[tokio::test(start_paused = true)]
async fn serial_router_rejects_priorities() {
    let mut s = models(&["a"]);
    s.kind = SchedulerKind::Serial;
    let r = rig(s);
    assert_eq!(
        r.router.submit(submit("a", 10)).await.unwrap_err(),
        RouteError::PriorityNotSupported { priority: 10 }
    );
}

#[tokio::test(start_paused = true)]
async fn dropping_the_lease_lets_a_queued_request_swap_models() {
    let mut s = models(&["a", "b"]);
    // The evicted model is stopped with its own unloadTimeout, as an unload
    // would stop it (not healthCheckTimeout: issue 31 #7).
    s.models[0].unload_timeout = Duration::from_secs(3);
    let mut r = rig(s);
    let lease = r.load("a", &[]).await;
    let ticket = r.router.submit(submit("b", 0)).await.unwrap();
    let mut status = ticket.status();
    status
        .wait_for(|s| *s == WaitStatus::Queued { position: 1 })
        .await
        .unwrap();
    r.sync().await;
    assert!(r.no_call_pending(), "nothing is stopped while a serves");
    drop(lease);
    let (grace, stopped) = r.expect_stop("a").await;
    assert_eq!(grace, Duration::from_secs(3));
    stopped.send(()).unwrap();
    r.expect_ensure("b").await.send(Ok(())).unwrap();
    assert_eq!(
        timeout(BOUND, ticket.granted())
            .await
            .unwrap()
            .unwrap()
            .model(),
        "b"
    );
}

#[tokio::test(start_paused = true)]
async fn dropped_queued_ticket_never_starts_its_model() {
    let mut r = rig(models(&["a", "b"]));
    let lease = r.load("a", &[]).await;
    let ticket = r.router.submit(submit("b", 0)).await.unwrap();
    drop(ticket);
    drop(lease);
    r.sync().await;
    assert!(r.router.queue().await.is_empty());
    assert_eq!(r.router.running().await.len(), 1, "only a, still ready");
    assert!(r.no_call_pending());
}

#[tokio::test(start_paused = true)]
async fn submitter_gone_before_admission_leaves_nothing_behind() {
    let mut r = rig(models(&["a", "b"]));
    let lease = r.load("a", &[]).await;
    // The submit command reaches the mailbox, then its caller goes away before the reply.
    assert!(r.router.submit(submit("b", 0)).now_or_never().is_none());
    r.sync().await;
    assert!(r.router.queue().await.is_empty());
    drop(lease);
    r.sync().await;
    assert!(r.no_call_pending(), "the abandoned request never loads b");
    assert_eq!(r.router.running().await[0].state, ModelState::Ready);
}

#[tokio::test(start_paused = true)]
async fn abandoned_wait_on_granted_cancels_the_request() {
    let mut r = rig(models(&["a", "b"]));
    let lease = r.load("a", &[]).await;
    let ticket = r.router.submit(submit("b", 0)).await.unwrap();
    // The client goes away while waiting: the future of `granted` is dropped.
    assert!(ticket.granted().now_or_never().is_none());
    drop(lease);
    r.sync().await;
    assert!(r.router.queue().await.is_empty());
    assert!(r.no_call_pending());
}

#[tokio::test(start_paused = true)]
async fn ticket_dropped_after_its_grant_still_releases_the_model() {
    let mut r = rig(models(&["a", "b"]));
    drop(r.load("a", &[]).await);
    // Granted at once (fast path), but the client never picks the lease up.
    drop(r.router.submit(submit("a", 0)).await.unwrap());
    let b = r.router.submit(submit("b", 0)).await.unwrap();
    r.expect_stop("a").await.1.send(()).unwrap();
    r.expect_ensure("b").await.send(Ok(())).unwrap();
    assert!(timeout(BOUND, b.granted()).await.unwrap().is_ok());
}

#[tokio::test(start_paused = true)]
async fn elevated_request_overtakes_queued_low() {
    let mut r = rig(models(&["a", "b", "c"]));
    let lease = r.load("a", &[]).await;
    let low = r.router.submit(submit("b", -10)).await.unwrap();
    let high = r.router.submit(submit("c", 10)).await.unwrap();
    let mut low_status = low.status();
    low_status
        .wait_for(|s| *s == WaitStatus::Queued { position: 2 })
        .await
        .unwrap();
    drop(lease);
    r.expect_stop("a").await.1.send(()).unwrap();
    r.expect_ensure("c").await.send(Ok(())).unwrap();
    let high_lease = timeout(BOUND, high.granted()).await.unwrap().unwrap();
    assert_eq!(high_lease.model(), "c");
    assert_eq!(*low_status.borrow(), WaitStatus::Queued { position: 1 });
}

#[tokio::test(start_paused = true)]
async fn queue_snapshot_reports_priorities_positions_and_wait() {
    let mut m = ModelSettings::new("c");
    m.priority = Some(5);
    let mut r = rig(SchedulerSettings::new(vec![
        ModelSettings::new("a"),
        ModelSettings::new("b"),
        m,
    ]));
    let _lease = r.load("a", &[]).await;
    let _b = r.router.submit(submit("b", 1)).await.unwrap();
    tokio::time::advance(Duration::from_secs(2)).await;
    let _c = r.router.submit(submit("c", -10)).await.unwrap();
    tokio::time::advance(Duration::from_secs(1)).await;
    let q = r.router.queue().await;
    assert_eq!(q.len(), 2);
    assert_eq!((q[0].model.as_str(), q[0].position), ("c", 1));
    assert_eq!((q[0].requested_priority, q[0].effective_priority), (-10, 5));
    assert_eq!(q[0].waited, Duration::from_secs(1));
    assert_eq!(
        (q[1].model.as_str(), q[1].position, q[1].effective_priority),
        ("b", 2, 1)
    );
    assert_eq!(q[1].waited, Duration::from_secs(3));
}

#[tokio::test(start_paused = true)]
async fn failed_start_reaches_every_waiter() {
    let mut r = rig(models(&["a"]));
    let first = r.router.submit(submit("a", 0)).await.unwrap();
    let second = r.router.submit(submit("a", 0)).await.unwrap();
    let error = LaunchError::ExitedDuringStart {
        model: "a".into(),
        status: "exit status: 1".into(),
        last_output: "boom".into(),
    };
    r.expect_ensure("a").await.send(Err(error.clone())).unwrap();
    for ticket in [first, second] {
        assert_eq!(
            timeout(BOUND, ticket.granted()).await.unwrap().unwrap_err(),
            RouteError::StartFailed(error.clone())
        );
    }
    assert!(r.router.running().await.is_empty());
}

#[tokio::test(start_paused = true)]
async fn unload_fails_waiters_and_resolves_once_stopped() {
    let mut r = rig(models(&["a"]));
    let waiting = r.router.submit(submit("a", 0)).await.unwrap();
    let _start = r.expect_ensure("a").await;
    let router = r.router.clone();
    let mut unload = tokio::spawn(async move { router.unload(Some(vec!["a".into()])).await });
    assert_eq!(
        timeout(BOUND, waiting.granted())
            .await
            .unwrap()
            .unwrap_err(),
        RouteError::Unloaded { model: "a".into() }
    );
    let (grace, stopped) = r.expect_stop("a").await;
    assert_eq!(grace, ModelSettings::new("a").unload_timeout);
    assert!(
        (&mut unload).now_or_never().is_none(),
        "resolves only when stopped"
    );
    stopped.send(()).unwrap();
    assert_eq!(timeout(BOUND, unload).await.unwrap().unwrap(), Ok(()));
}

#[tokio::test(start_paused = true)]
async fn unload_stops_smallest_timeout_first_and_equal_timeouts_in_parallel() {
    let ids = ["a", "c", "e", "f"];
    let mut ms = Vec::new();
    for (id, secs) in ids.iter().zip([45, 10, 25, 25]) {
        let mut m = ModelSettings::new(*id);
        m.unload_timeout = Duration::from_secs(secs);
        ms.push(m);
    }
    let mut s = SchedulerSettings::new(ms);
    let mut all = GroupSettings::new("all", ids.iter().map(|s| (*s).to_owned()).collect());
    all.swap = false;
    all.exclusive = false;
    s.groups = vec![all];
    let mut r = rig(s);
    for id in ids {
        drop(r.load(id, &[]).await);
    }
    let router = r.router.clone();
    let unload = tokio::spawn(async move { router.unload(None).await });
    let (grace, c) = r.expect_stop("c").await;
    assert_eq!(grace, Duration::from_secs(10));
    r.sync().await;
    assert!(r.no_call_pending(), "the next batch waits for c");
    c.send(()).unwrap();
    // e and f are both asked to stop before either finishes.
    let (_, e) = r.expect_stop("e").await;
    let (_, f) = r.expect_stop("f").await;
    e.send(()).unwrap();
    f.send(()).unwrap();
    let (grace, a) = r.expect_stop("a").await;
    assert_eq!(grace, Duration::from_secs(45));
    a.send(()).unwrap();
    assert_eq!(timeout(BOUND, unload).await.unwrap().unwrap(), Ok(()));
    assert!(r.router.running().await.is_empty());
}

#[tokio::test(start_paused = true)]
async fn unload_of_unknown_model_is_an_error() {
    let r = rig(models(&["a"]));
    assert_eq!(
        r.router.unload(Some(vec!["x".into()])).await,
        Err(RouteError::UnknownModel { model: "x".into() })
    );
}

#[tokio::test(start_paused = true)]
async fn shutdown_fails_waiters_stops_models_and_is_idempotent() {
    let mut r = rig(models(&["a", "b"]));
    let lease = r.load("a", &[]).await;
    let queued = r.router.submit(submit("b", 0)).await.unwrap();
    let router = r.router.clone();
    let mut shutdown = tokio::spawn(async move { router.shutdown().await });
    assert_eq!(
        timeout(BOUND, queued.granted()).await.unwrap().unwrap_err(),
        RouteError::ShuttingDown
    );
    let (_, stopped) = r.expect_stop("a").await;
    assert_eq!(
        r.router.submit(submit("a", 0)).await.unwrap_err(),
        RouteError::ShuttingDown
    );
    assert!(
        (&mut shutdown).now_or_never().is_none(),
        "waits for the stop"
    );
    stopped.send(()).unwrap();
    timeout(BOUND, shutdown).await.unwrap().unwrap();
    timeout(BOUND, r.router.shutdown()).await.unwrap();
    assert_eq!(
        r.router.submit(submit("a", 0)).await.unwrap_err(),
        RouteError::ShuttingDown
    );
    assert_eq!(r.router.unload(None).await, Err(RouteError::ShuttingDown));
    assert!(r.router.queue().await.is_empty());
    drop(lease); // after the actor ended: nothing to report, nothing panics
}

#[tokio::test(start_paused = true)]
async fn shutdown_during_a_start_aborts_it_and_stops_the_model() {
    let mut r = rig(models(&["a"]));
    let waiting = r.router.submit(submit("a", 0)).await.unwrap();
    let _never_answered = r.expect_ensure("a").await;
    let router = r.router.clone();
    let shutdown = tokio::spawn(async move { router.shutdown().await });
    assert_eq!(
        timeout(BOUND, waiting.granted())
            .await
            .unwrap()
            .unwrap_err(),
        RouteError::ShuttingDown
    );
    r.expect_stop("a").await.1.send(()).unwrap();
    timeout(BOUND, shutdown).await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn dropping_every_handle_shuts_the_router_down() {
    let mut r = rig(models(&["a"]));
    drop(r.load("a", &[]).await);
    drop(r.router);
    let (_, stopped) = match timeout(BOUND, r.calls.recv()).await.unwrap().unwrap() {
        Call::Stop { model, grace, done } if model == "a" => (grace, done),
        other => panic!("expected stop(a), got {other:?}"),
    };
    stopped.send(()).unwrap();
    // The actor ends and drops its launcher: the call channel closes.
    assert!(timeout(BOUND, r.calls.recv()).await.unwrap().is_none());
}

#[tokio::test(start_paused = true)]
async fn exited_upstream_is_started_again_by_the_next_request() {
    let mut r = rig(models(&["a"]));
    drop(r.load("a", &[]).await);
    r.exits
        .send(UpstreamEvent::Exited {
            model: "a".into(),
            status: "signal: 9".into(),
        })
        .await
        .unwrap();
    // The actor looks at launcher events before commands, so this query sees the exit.
    assert!(r.router.running().await.is_empty());
    let ticket = r.router.submit(submit("a", 0)).await.unwrap();
    r.expect_ensure("a").await.send(Ok(())).unwrap();
    assert!(timeout(BOUND, ticket.granted()).await.unwrap().is_ok());
}

fn with_ttl(secs: u64) -> SchedulerSettings {
    let mut m = ModelSettings::new("a");
    m.ttl = Some(Duration::from_secs(secs));
    SchedulerSettings::new(vec![m])
}

#[tokio::test(start_paused = true)]
async fn ttl_unloads_an_idle_model() {
    let mut r = rig(with_ttl(60));
    let lease = r.load("a", &[]).await;
    let idle_from = Instant::now();
    drop(lease);
    let (grace, stopped) = r.expect_stop("a").await;
    assert!(
        idle_from.elapsed() >= Duration::from_secs(60),
        "not before the TTL"
    );
    assert_eq!(grace, ModelSettings::new("a").unload_timeout);
    stopped.send(()).unwrap();
    r.sync().await;
    assert!(r.router.running().await.is_empty());
}

#[tokio::test(start_paused = true)]
async fn new_request_restarts_the_ttl() {
    let mut r = rig(with_ttl(60));
    drop(r.load("a", &[]).await);
    tokio::time::sleep(Duration::from_secs(50)).await;
    let lease = r
        .router
        .submit(submit("a", 0))
        .await
        .unwrap()
        .granted()
        .await
        .unwrap();
    let idle_from = Instant::now();
    drop(lease);
    r.expect_stop("a").await.1.send(()).unwrap();
    assert!(idle_from.elapsed() >= Duration::from_secs(60));
}

#[tokio::test(start_paused = true)]
async fn request_arriving_during_a_ttl_stop_is_served_after_a_restart() {
    let mut r = rig(with_ttl(1));
    drop(r.load("a", &[]).await);
    let (_, stopped) = r.expect_stop("a").await;
    let ticket = r.router.submit(submit("a", 0)).await.unwrap();
    r.sync().await;
    assert!(r.no_call_pending(), "no start while the stop runs");
    stopped.send(()).unwrap();
    r.expect_ensure("a").await.send(Ok(())).unwrap();
    assert!(timeout(BOUND, ticket.granted()).await.unwrap().is_ok());
}

#[tokio::test(start_paused = true)]
async fn changes_advance_when_a_request_queues_and_when_its_model_is_ready() {
    let mut r = rig(models(&["a"]));
    let mut changes = r.router.changes();
    changes.mark_unchanged();
    let ticket = r.router.submit(submit("a", 0)).await.unwrap();
    timeout(BOUND, changes.changed()).await.unwrap().unwrap();
    assert_eq!(r.router.running().await[0].state, ModelState::Starting);
    let done = r.expect_ensure("a").await;
    changes.mark_unchanged();
    done.send(Ok(())).unwrap();
    timeout(BOUND, changes.changed()).await.unwrap().unwrap();
    assert_eq!(r.router.running().await[0].state, ModelState::Ready);
    let lease = timeout(BOUND, ticket.granted()).await.unwrap().unwrap();
    changes.mark_unchanged();
    drop(lease);
    timeout(BOUND, changes.changed())
        .await
        .expect("the end of a request is a change (in-flight count)")
        .unwrap();
}

#[tokio::test(start_paused = true)]
async fn snapshots_do_not_count_as_changes() {
    let r = rig(models(&["a"]));
    let changes = r.router.changes();
    let before = *changes.borrow();
    r.router.queue().await;
    r.router.running().await;
    assert_eq!(
        *changes.borrow(),
        before,
        "an observer's snapshot must not wake it again"
    );
    assert!(!changes.has_changed().unwrap());
}

#[tokio::test(start_paused = true)]
async fn changes_end_when_the_router_has_shut_down() {
    let r = rig(models(&["a"]));
    let mut changes = r.router.changes();
    r.router.shutdown().await;
    // The shutdown itself is a last change; after it the sender is gone.
    let _ = changes.borrow_and_update();
    assert!(timeout(BOUND, changes.changed()).await.unwrap().is_err());
}
