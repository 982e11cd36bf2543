//! The router actor hands a request back when its upstream refused it (the lease
//! reports it), and grants it again once the exit is processed: on a paused
//! clock, with the launcher driven by the test. No polling, no sleeping.

use llama_swap_server::testing::launcher::UpstreamEvent;
use llama_swap_server::testing::router::{ModelState, RouteError};
use llama_swap_server::testing::scheduler::{ModelSettings, REFUSAL_GRACE, SchedulerSettings};
use tokio::time::{Instant, timeout};

use crate::support::{BOUND, rig, submit};

fn models(ids: &[&str]) -> SchedulerSettings {
    SchedulerSettings::new(ids.iter().map(|id| ModelSettings::new(*id)).collect())
}

fn exit(model: &str) -> UpstreamEvent {
    UpstreamEvent::Exited {
        model: model.into(),
        status: "signal: 9".into(),
    }
}

#[tokio::test(start_paused = true)]
async fn a_refused_request_is_granted_again_once_the_exit_restarts_its_model() {
    let mut r = rig(models(&["a"]));
    let lease = r.load("a", &[]).await;
    let id = lease.id();
    let again = lease.refused();
    r.sync().await;
    // The exit has not arrived: nothing restarts, the model still counts as ready.
    assert!(r.no_call_pending());
    assert_eq!(r.router.running().await[0].state, ModelState::Ready);
    assert!(r.router.queue().await.is_empty());

    r.exits.send(exit("a")).await.unwrap();
    r.expect_ensure("a").await.send(Ok(())).unwrap();
    let lease = timeout(BOUND, again.granted()).await.unwrap().unwrap();
    assert_eq!(lease.id(), id, "the same request, not a new one");
    assert_eq!(lease.model(), "a");
}

#[tokio::test(start_paused = true)]
async fn a_request_refused_after_the_exit_was_processed_restarts_the_model_at_once() {
    let mut r = rig(models(&["a"]));
    let lease = r.load("a", &[]).await;
    r.exits.send(exit("a")).await.unwrap();
    r.sync().await;
    let again = lease.refused();
    r.expect_ensure("a").await.send(Ok(())).unwrap();
    assert!(timeout(BOUND, again.granted()).await.unwrap().is_ok());
}

#[tokio::test(start_paused = true)]
async fn a_refused_request_keeps_its_turn_before_later_work() {
    let mut r = rig(models(&["a", "b"]));
    let lease = r.load("a", &[]).await;
    // b waits behind the request on a (one model at a time, no preemption).
    let later = r.router.submit(submit("b", 0)).await.unwrap();
    let again = lease.refused();
    r.sync().await;
    assert!(
        r.no_call_pending(),
        "b does not take a's turn while a's exit is pending"
    );
    r.exits.send(exit("a")).await.unwrap();
    // a starts again for the refused request before anything happens for b.
    r.expect_ensure("a").await.send(Ok(())).unwrap();
    let lease = timeout(BOUND, again.granted()).await.unwrap().unwrap();
    assert_eq!(r.router.queue().await.len(), 1, "b still waits");
    drop(lease);
    let (_, stopped) = r.expect_stop("a").await;
    stopped.send(()).unwrap();
    r.expect_ensure("b").await.send(Ok(())).unwrap();
    assert!(timeout(BOUND, later.granted()).await.unwrap().is_ok());
}

#[tokio::test(start_paused = true)]
async fn a_refused_request_whose_upstream_never_exits_fails_after_the_grace() {
    let mut r = rig(models(&["a"]));
    let lease = r.load("a", &[]).await;
    let refused_at = Instant::now();
    let again = lease.refused();
    let outcome = timeout(BOUND, again.granted()).await.unwrap();
    assert_eq!(
        outcome.unwrap_err(),
        RouteError::UpstreamRefused { model: "a".into() }
    );
    assert_eq!(refused_at.elapsed(), REFUSAL_GRACE);
    assert!(r.no_call_pending());
}

#[tokio::test(start_paused = true)]
async fn a_refused_request_whose_client_leaves_starts_nothing() {
    let mut r = rig(models(&["a"]));
    let lease = r.load("a", &[]).await;
    drop(lease.refused());
    r.sync().await;
    r.exits.send(exit("a")).await.unwrap();
    r.sync().await;
    assert!(r.no_call_pending());
    assert!(r.router.running().await.is_empty());
}
