//! `parallel` through the router actor, on a paused clock with the launcher
//! driven by the test: slot waiters are released one by one as leases drop,
//! and `parallel: auto` asks the launcher for the slot count after each start.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::FutureExt;
use llama_swap_server::testing::launcher::{BoxFuture, LaunchError, Launcher};
use llama_swap_server::testing::router::{Router, RouterHandle, WaitStatus};
use llama_swap_server::testing::scheduler::{
    ModelSettings, Parallel, SchedulerSettings, WaitReason,
};
use tokio::sync::mpsc;
use tokio::time::timeout;

use crate::support::{BOUND, FakeLauncher, Rig, rig, submit};

fn one_model(parallel: Parallel) -> SchedulerSettings {
    let mut a = ModelSettings::new("a");
    a.parallel = parallel;
    SchedulerSettings::new(vec![a, ModelSettings::new("b")])
}

async fn reasons(router: &RouterHandle) -> Vec<(String, i32, WaitReason)> {
    router
        .queue()
        .await
        .into_iter()
        .map(|e| (e.model, e.effective_priority, e.reason))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn slot_waiters_are_released_one_by_one_as_leases_drop_highest_first() {
    let mut r = rig(one_model(Parallel::limit(1).unwrap()));
    let long = r.load("a", &[]).await;
    let low = r.router.submit(submit("a", -10)).await.unwrap();
    let elevated = r.router.submit(submit("a", 10)).await.unwrap();
    assert_eq!(
        reasons(&r.router).await,
        vec![
            ("a".to_owned(), 10, WaitReason::SlotsFull),
            ("a".to_owned(), -10, WaitReason::SlotsFull),
        ]
    );
    let low_status = low.status();
    assert_eq!(*low_status.borrow(), WaitStatus::Queued { position: 2 });
    let running = r.router.running().await;
    assert_eq!((running[0].in_flight, running[0].parallel), (1, Some(1)));

    let low_grant = tokio::spawn(low.granted());
    drop(long);
    let elevated = timeout(BOUND, elevated.granted()).await.unwrap().unwrap();
    r.sync().await;
    assert!(
        !low_grant.is_finished(),
        "one slot: the low one still waits"
    );
    assert_eq!(*low_status.borrow(), WaitStatus::Queued { position: 1 });
    drop(elevated);
    let low = timeout(BOUND, low_grant).await.unwrap().unwrap().unwrap();
    assert_eq!(low.model(), "a");
    assert!(r.no_call_pending(), "no swap was needed at any point");
    drop(low);
    r.sync().await;
    assert_eq!(r.router.running().await[0].in_flight, 0);
}

#[tokio::test(start_paused = true)]
async fn a_slot_waiter_whose_client_left_is_never_granted() {
    let mut r = rig(one_model(Parallel::limit(1).unwrap()));
    let long = r.load("a", &[]).await;
    let gone = r.router.submit(submit("a", 10)).await.unwrap();
    let stays = r.router.submit(submit("a", 0)).await.unwrap();
    drop(gone);
    r.sync().await;
    assert_eq!(r.router.queue().await.len(), 1);
    drop(long);
    let lease = timeout(BOUND, stays.granted()).await.unwrap().unwrap();
    assert_eq!(lease.model(), "a");
}

/// The test's launcher, which also answers `slots` with a fixed count.
struct SlotsLauncher {
    inner: FakeLauncher,
    slots: Option<usize>,
    asked: Arc<AtomicUsize>,
}

impl Launcher for SlotsLauncher {
    fn ensure_ready(&self, model: &str) -> BoxFuture<'static, Result<(), LaunchError>> {
        self.inner.ensure_ready(model)
    }

    fn stop(&self, model: &str, grace: Duration) -> BoxFuture<'static, ()> {
        self.inner.stop(model, grace)
    }

    fn slots(&self, _model: &str) -> BoxFuture<'static, Option<usize>> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        let slots = self.slots;
        async move { slots }.boxed()
    }
}

fn slots_rig(settings: SchedulerSettings, slots: Option<usize>) -> (Rig, Arc<AtomicUsize>) {
    let (calls_tx, calls) = mpsc::unbounded_channel();
    let (exits, exits_rx) = mpsc::channel(8);
    let asked = Arc::new(AtomicUsize::new(0));
    let launcher = SlotsLauncher {
        inner: FakeLauncher { calls: calls_tx },
        slots,
        asked: Arc::clone(&asked),
    };
    let router = Router::spawn(settings, Arc::new(launcher), exits_rx).unwrap();
    let rig = Rig {
        router,
        calls,
        exits,
    };
    (rig, asked)
}

#[tokio::test(start_paused = true)]
async fn parallel_auto_limits_a_model_to_the_slots_its_upstream_reports() {
    let (mut r, asked) = slots_rig(one_model(Parallel::Auto), Some(1));
    let first = r.router.submit(submit("a", 0)).await.unwrap();
    let second = r.router.submit(submit("a", 0)).await.unwrap();
    r.expect_ensure("a").await.send(Ok(())).unwrap();
    let first = timeout(BOUND, first.granted()).await.unwrap().unwrap();
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    assert_eq!(
        reasons(&r.router).await,
        vec![("a".to_owned(), 0, WaitReason::SlotsFull)]
    );
    assert_eq!(r.router.running().await[0].parallel, Some(1));
    drop(first);
    assert!(timeout(BOUND, second.granted()).await.unwrap().is_ok());
}

#[tokio::test(start_paused = true)]
async fn parallel_auto_without_a_reported_count_and_other_models_have_no_limit() {
    let (mut r, asked) = slots_rig(one_model(Parallel::Auto), None);
    let tickets = [
        r.router.submit(submit("a", 0)).await.unwrap(),
        r.router.submit(submit("a", 0)).await.unwrap(),
    ];
    r.expect_ensure("a").await.send(Ok(())).unwrap();
    let mut leases = Vec::new();
    for ticket in tickets {
        leases.push(timeout(BOUND, ticket.granted()).await.unwrap().unwrap());
    }
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    drop(leases);
    // b has no `parallel: auto`: the launcher is not asked for it.
    let b = r.router.submit(submit("b", 0)).await.unwrap();
    let (_, stopped) = r.expect_stop("a").await;
    stopped.send(()).unwrap();
    r.expect_ensure("b").await.send(Ok(())).unwrap();
    assert!(timeout(BOUND, b.granted()).await.unwrap().is_ok());
    assert_eq!(asked.load(Ordering::SeqCst), 1);
}
