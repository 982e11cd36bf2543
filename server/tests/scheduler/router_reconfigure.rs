//! `RouterHandle::reconfigure`: the router actor applies a reload in place,
//! keeping its waiters, leases (fast ones included) and running models.

use llama_swap_server::testing::priority::Priority;
use llama_swap_server::testing::router::{ReconfigureError, RouteError, WaitStatus};
use llama_swap_server::testing::scheduler::{ModelSettings, Parallel, SchedulerSettings};
use tokio::time::timeout;

use crate::support::{BOUND, rig, submit};

fn models(ids: &[&str]) -> SchedulerSettings {
    SchedulerSettings::new(ids.iter().map(|id| ModelSettings::new(*id)).collect())
}

fn one_slot(ids: &[&str]) -> SchedulerSettings {
    let mut s = models(ids);
    s.models[0].parallel = Parallel::limit(1).unwrap();
    s
}

#[tokio::test(start_paused = true)]
async fn queued_requests_are_granted_in_order_after_a_reconfigure_without_a_restart() {
    let mut r = rig(one_slot(&["a"]));
    let first = r.load("a", &[]).await;
    let mut tickets = Vec::new();
    for priority in [0, 5, 0] {
        tickets.push(r.router.submit(submit("a", priority)).await.unwrap());
    }
    r.router
        .reconfigure(one_slot(&["a", "b"]), vec![])
        .await
        .unwrap();
    let queue = r.router.queue().await;
    assert_eq!(
        queue.iter().map(|e| e.id).collect::<Vec<_>>(),
        [tickets[1].id(), tickets[0].id(), tickets[2].id()]
    );
    drop(first);
    let mut order = Vec::new();
    let mut tickets: Vec<_> = tickets.into_iter().map(Some).collect();
    for _ in 0..3 {
        // Whichever is granted next, in turn.
        let (index, lease) = loop {
            let mut found = None;
            for (i, t) in tickets.iter_mut().enumerate() {
                if let Some(ticket) = t
                    && *ticket.status().borrow() == WaitStatus::Granted
                {
                    found = Some(i);
                }
            }
            if let Some(i) = found {
                let ticket = tickets[i].take().unwrap();
                break (i, timeout(BOUND, ticket.granted()).await.unwrap().unwrap());
            }
            r.sync().await;
        };
        order.push(index);
        drop(lease);
    }
    assert_eq!(order, [1, 0, 2]);
    assert!(r.no_call_pending(), "a was never stopped or started again");
}

#[tokio::test(start_paused = true)]
async fn a_waiter_of_a_removed_model_gets_the_removed_error() {
    let mut r = rig(models(&["a", "b"]));
    let serving = r.load("a", &[]).await;
    // b must stop a first (one default group): it waits for a's request.
    let waiting = r.router.submit(submit("b", 0)).await.unwrap();
    r.router.reconfigure(models(&["a"]), vec![]).await.unwrap();
    let error = timeout(BOUND, waiting.granted())
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(error, RouteError::Removed { model: "b".into() });
    assert_eq!(r.router.resolve("b"), None);
    drop(serving);
    r.sync().await;
    assert!(r.no_call_pending());
}

#[tokio::test(start_paused = true)]
async fn a_fast_lease_taken_before_a_reconfigure_is_counted_until_it_ends() {
    let mut r = rig(models(&["a", "b"]));
    drop(r.load("a", &[]).await);
    r.sync().await;
    let fast = r
        .router
        .try_fast("a", Priority::new(0))
        .expect("fast grant");
    // "a" changed: it must stop, but only after the fast lease ends.
    r.router
        .reconfigure(models(&["a", "b", "c"]), vec!["a".into()])
        .await
        .unwrap();
    let running = r.router.running().await;
    assert_eq!(running[0].in_flight, 1);
    assert!(
        r.router.try_fast("a", Priority::new(0)).is_none(),
        "no grant on the old process"
    );
    let next = r.router.submit(submit("a", 0)).await.unwrap();
    r.sync().await;
    assert!(r.no_call_pending(), "nothing stops a under its fast lease");
    drop(fast);
    let (_, stopped) = r.expect_stop("a").await;
    stopped.send(()).unwrap();
    r.expect_ensure("a").await.send(Ok(())).unwrap();
    let lease = timeout(BOUND, next.granted()).await.unwrap().unwrap();
    assert_eq!(lease.model(), "a");
    drop(lease);
    r.sync().await;
    // The restarted model grants on the fast path again.
    assert!(r.router.try_fast("a", Priority::new(0)).is_some());
}

#[tokio::test(start_paused = true)]
async fn new_aliases_resolve_and_the_fast_path_serves_a_kept_model_after_a_reconfigure() {
    let mut r = rig(models(&["a"]));
    drop(r.load("a", &[]).await);
    let mut s = models(&["a", "b"]);
    s.models[0].aliases = vec!["alpha".into()];
    r.router.reconfigure(s, vec![]).await.unwrap();
    assert_eq!(r.router.resolve("alpha").as_deref(), Some("a"));
    let lease = r
        .router
        .try_fast("alpha", Priority::new(0))
        .expect("fast grant");
    assert_eq!(lease.model(), "a");
    assert!(r.no_call_pending());
}

#[tokio::test(start_paused = true)]
async fn invalid_settings_are_refused_and_a_shut_down_router_refuses_any() {
    let r = rig(models(&["a"]));
    let mut bad = models(&["a", "b"]);
    bad.models[1].aliases = vec!["a".into()];
    assert!(matches!(
        r.router.reconfigure(bad, vec![]).await,
        Err(ReconfigureError::Settings(_))
    ));
    assert_eq!(r.router.resolve("b"), None);
    r.router.shutdown().await;
    assert!(matches!(
        r.router.reconfigure(models(&["a"]), vec![]).await,
        Err(ReconfigureError::ShuttingDown)
    ));
}

#[tokio::test(start_paused = true)]
async fn the_waiters_of_a_start_in_progress_at_a_reload_are_served_by_the_new_definition() {
    let mut r = rig(models(&["a"]));
    let joined = r.router.submit(submit("a", 0)).await.unwrap();
    let started = r.expect_ensure("a").await;
    // Whether that start runs the old or the new definition is the
    // launcher's timing: nobody is granted on it.
    r.router
        .reconfigure(models(&["a"]), vec!["a".into()])
        .await
        .unwrap();
    let later = r.router.submit(submit("a", 0)).await.unwrap();
    started.send(Ok(())).unwrap();
    let (_, stopped) = r.expect_stop("a").await;
    assert_ne!(*joined.status().borrow(), WaitStatus::Granted);
    stopped.send(()).unwrap();
    r.expect_ensure("a").await.send(Ok(())).unwrap();
    let first = timeout(BOUND, joined.granted()).await.unwrap().unwrap();
    let second = timeout(BOUND, later.granted()).await.unwrap().unwrap();
    assert!(first.id() < second.id(), "in their order");
}
