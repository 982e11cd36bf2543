//! The router's fast path: grants for a ready model with nothing waiting,
//! taken without a round trip to the actor, and how the actor accounts for
//! them before it decides anything else.

use std::time::Duration;

use llama_swap_server::testing::priority::Priority;
use llama_swap_server::testing::router::WaitStatus;
use llama_swap_server::testing::scheduler::{
    ModelSettings, Parallel, SchedulerKind, SchedulerSettings,
};
use tokio::time::timeout;

use crate::support::{BOUND, group, rig, submit};

fn models(ids: &[&str]) -> SchedulerSettings {
    SchedulerSettings::new(ids.iter().map(|id| ModelSettings::new(*id)).collect())
}

#[tokio::test(start_paused = true)]
async fn a_ready_model_with_nothing_waiting_grants_without_the_actor() {
    let mut r = rig(models(&["a", "b"]));
    assert!(
        r.router.try_fast("a", Priority::new(0)).is_none(),
        "a stopped model needs a start"
    );
    let first = r.load("a", &[]).await;
    r.sync().await;
    let lease = r
        .router
        .try_fast("a", Priority::new(3))
        .expect("fast grant");
    assert_eq!(lease.model(), "a");
    assert!(lease.is_fast());
    assert_eq!(lease.effective_priority(), 3);
    assert!(lease.id() > first.id(), "IDs keep their arrival order");
    assert!(r.router.try_fast("b", Priority::new(0)).is_none());
    let running = r.router.running().await;
    assert_eq!(running[0].in_flight, 2, "fast grants count as in flight");
}

#[tokio::test(start_paused = true)]
async fn a_swap_waits_for_the_fast_grants_of_the_model_it_evicts() {
    let mut s = models(&["a", "b"]);
    s.groups = vec![group("g", &["a", "b"], true, false, false)];
    let mut r = rig(s);
    drop(r.load("a", &[]).await);
    r.sync().await;
    let fast = r
        .router
        .try_fast("a", Priority::new(0))
        .expect("fast grant");
    let ticket = r.router.submit(submit("b", 10)).await.unwrap();
    r.sync().await;
    assert!(
        r.no_call_pending(),
        "a serves a fast grant: nothing may stop it"
    );
    assert!(
        r.router.try_fast("a", Priority::new(0)).is_none(),
        "closed while a request waits"
    );
    drop(fast);
    let (_, done) = r.expect_stop("a").await;
    done.send(()).unwrap();
    r.expect_ensure("b").await.send(Ok(())).unwrap();
    let lease = timeout(BOUND, ticket.granted()).await.unwrap().unwrap();
    assert_eq!(lease.model(), "b");
}

#[tokio::test(start_paused = true)]
async fn slots_taken_by_fast_grants_make_later_requests_queue_in_rank_order() {
    let mut s = models(&["a"]);
    s.models[0].parallel = Parallel::limit(1).unwrap();
    let mut r = rig(s);
    drop(r.load("a", &[]).await);
    r.sync().await;
    let fast = r
        .router
        .try_fast("a", Priority::new(0))
        .expect("the one slot");
    assert!(
        r.router.try_fast("a", Priority::new(0)).is_none(),
        "slot taken"
    );
    let low = r.router.submit(submit("a", -5)).await.unwrap();
    let high = r.router.submit(submit("a", 5)).await.unwrap();
    assert_eq!(*high.status().borrow(), WaitStatus::Queued { position: 1 });
    drop(fast);
    let lease = timeout(BOUND, high.granted()).await.unwrap().unwrap();
    assert!(!lease.is_fast());
    assert!(
        r.router.try_fast("a", Priority::new(9)).is_none(),
        "low still waits"
    );
    drop(lease);
    drop(timeout(BOUND, low.granted()).await.unwrap().unwrap());
    r.sync().await;
    assert!(
        r.router.try_fast("a", Priority::new(0)).is_some(),
        "open again"
    );
}

#[tokio::test(start_paused = true)]
async fn the_concurrency_limit_counts_fast_grants() {
    let mut s = models(&["a"]);
    s.models[0].concurrency_limit = 2;
    let mut r = rig(s);
    drop(r.load("a", &[]).await);
    r.sync().await;
    let one = r.router.try_fast("a", Priority::new(0)).expect("first");
    let two = r.router.try_fast("a", Priority::new(0)).expect("second");
    assert!(r.router.try_fast("a", Priority::new(0)).is_none());
    let refused = r.router.submit(submit("a", 0)).await;
    assert!(refused.is_err(), "two admitted: the limit is reached");
    drop((one, two));
}

#[tokio::test(start_paused = true)]
async fn fast_traffic_keeps_a_model_alive_until_its_ttl_after_the_last_response() {
    let mut s = models(&["a"]);
    s.models[0].ttl = Some(Duration::from_secs(10));
    let mut r = rig(s);
    drop(r.load("a", &[]).await);
    r.sync().await;
    for _ in 0..3 {
        tokio::time::advance(Duration::from_secs(6)).await;
        drop(
            r.router
                .try_fast("a", Priority::new(0))
                .expect("fast grant"),
        );
    }
    // 18 s after the load, 0 s after the last response: still up.
    r.sync().await;
    assert!(r.no_call_pending(), "stopped while in use");
    tokio::time::advance(Duration::from_secs(11)).await;
    let (_, done) = r.expect_stop("a").await;
    done.send(()).unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_fast_grant_refused_by_its_upstream_is_served_by_the_next_instance() {
    let mut r = rig(models(&["a"]));
    drop(r.load("a", &[]).await);
    r.sync().await;
    let fast = r
        .router
        .try_fast("a", Priority::new(0))
        .expect("fast grant");
    let id = fast.id();
    let again = fast.refused();
    r.exits
        .send(
            llama_swap_server::testing::launcher::UpstreamEvent::Exited {
                model: "a".into(),
                status: "signal 9".into(),
            },
        )
        .await
        .unwrap();
    r.expect_ensure("a").await.send(Ok(())).unwrap();
    let lease = timeout(BOUND, again.granted()).await.unwrap().unwrap();
    assert_eq!(lease.id(), id, "the same request, handed back");
}

#[tokio::test(start_paused = true)]
async fn the_serial_scheduler_never_opens_the_fast_path() {
    let mut s = models(&["a"]);
    s.kind = SchedulerKind::Serial;
    let mut r = rig(s);
    drop(r.load("a", &[]).await);
    r.sync().await;
    assert!(r.router.try_fast("a", Priority::new(0)).is_none());
}
