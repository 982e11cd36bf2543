//! The router actor with the matrix policy, on a paused clock with a launcher the
//! test drives: set mates load in parallel, a model that cannot run beside a
//! starting one waits for it and then evicts it, the fence holds under the matrix, and
//! each real swap logs one INFO line naming the set, the evicted models and the cost.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use llama_swap_server::testing::launcher::{BoxFuture, LaunchError, Launcher};
use llama_swap_server::testing::policy::matrix::{MatrixSet, MatrixSettings};
use llama_swap_server::testing::router::{ModelState, Router, RouterHandle, WaitStatus};
use llama_swap_server::testing::scheduler::{ModelSettings, SchedulerSettings};
use tokio::sync::{mpsc, oneshot};
use tokio::time::timeout;

use crate::support::{BOUND, submit};

/// A launcher call, handed to the test.
#[derive(Debug)]
enum Call {
    Ready(String, oneshot::Sender<Result<(), LaunchError>>),
    Stop(String, oneshot::Sender<()>),
}

struct Driven(mpsc::UnboundedSender<Call>);

impl Launcher for Driven {
    fn ensure_ready(&self, model: &str) -> BoxFuture<'static, Result<(), LaunchError>> {
        let (done, result) = oneshot::channel();
        let _ = self.0.send(Call::Ready(model.to_owned(), done));
        let model = model.to_owned();
        Box::pin(async move { result.await.unwrap_or(Err(LaunchError::Aborted { model })) })
    }

    fn stop(&self, model: &str, _grace: Duration) -> BoxFuture<'static, ()> {
        let (done, result) = oneshot::channel();
        let _ = self.0.send(Call::Stop(model.to_owned(), done));
        Box::pin(async move {
            let _ = result.await;
        })
    }
}

fn settings(ids: &[&str], sets: &[(&str, &str)], costs: &[(&str, u32)]) -> SchedulerSettings {
    let mut s = SchedulerSettings::new(ids.iter().map(|id| ModelSettings::new(*id)).collect());
    s.matrix = Some(MatrixSettings {
        vars: Vec::new(),
        evict_costs: costs.iter().map(|(m, c)| ((*m).to_owned(), *c)).collect(),
        sets: sets.iter().map(|(n, e)| MatrixSet::new(*n, *e)).collect(),
    });
    s
}

fn spawn(settings: SchedulerSettings) -> (RouterHandle, mpsc::UnboundedReceiver<Call>) {
    let (tx, calls) = mpsc::unbounded_channel();
    let (_exits, exits_rx) = mpsc::channel(1);
    let router = Router::spawn(settings, Arc::new(Driven(tx)), exits_rx).unwrap();
    (router, calls)
}

async fn next(calls: &mut mpsc::UnboundedReceiver<Call>) -> Call {
    timeout(BOUND, calls.recv()).await.unwrap().unwrap()
}

async fn expect_ready(
    calls: &mut mpsc::UnboundedReceiver<Call>,
) -> (String, oneshot::Sender<Result<(), LaunchError>>) {
    match next(calls).await {
        Call::Ready(model, done) => (model, done),
        other => panic!("expected ensure_ready, got {other:?}"),
    }
}

async fn expect_stop(calls: &mut mpsc::UnboundedReceiver<Call>, model: &str) {
    match next(calls).await {
        Call::Stop(m, done) if m == model => done.send(()).unwrap(),
        other => panic!("expected stop({model}), got {other:?}"),
    }
}

/// Shuts the router down, answering the stops it asks for, until the
/// launcher is dropped.
async fn shut_down(router: RouterHandle, mut calls: mpsc::UnboundedReceiver<Call>) {
    let shutdown = tokio::spawn(async move { router.shutdown().await });
    while let Some(call) = timeout(BOUND, calls.recv()).await.unwrap() {
        if let Call::Stop(_, done) = call {
            let _ = done.send(());
        }
    }
    timeout(BOUND, shutdown).await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn models_of_one_combination_start_in_parallel_and_neither_is_stopped() {
    let (router, mut calls) = spawn(settings(&["a", "b"], &[("s_ab", "a & b")], &[]));
    let first = router.submit(submit("a", 0)).await.unwrap();
    let second = router.submit(submit("b", 0)).await.unwrap();
    // Both starts are under way before either finishes.
    let (m1, done1) = expect_ready(&mut calls).await;
    let (m2, done2) = expect_ready(&mut calls).await;
    assert_eq!([m1.as_str(), m2.as_str()], ["a", "b"]);
    done2.send(Ok(())).unwrap();
    done1.send(Ok(())).unwrap();
    let lease_a = timeout(BOUND, first.granted()).await.unwrap().unwrap();
    let lease_b = timeout(BOUND, second.granted()).await.unwrap().unwrap();
    drop((lease_a, lease_b));
    router.queue().await;
    assert!(calls.try_recv().is_err(), "neither model was stopped");
    shut_down(router, calls).await;
}

#[tokio::test(start_paused = true)]
async fn the_fence_holds_low_requests_for_a_model_an_elevated_waiter_must_stop() {
    let (router, mut calls) = spawn(settings(&["a", "b"], &[("s_a", "a"), ("s_b", "b")], &[]));
    let first = router.submit(submit("a", -10)).await.unwrap();
    let (_, done) = expect_ready(&mut calls).await;
    done.send(Ok(())).unwrap();
    let lease = timeout(BOUND, first.granted()).await.unwrap().unwrap();

    let high = router.submit(submit("b", 10)).await.unwrap();
    let late_low = router.submit(submit("a", -10)).await.unwrap();
    assert!(
        matches!(
            *late_low.status().borrow(),
            WaitStatus::Queued { position: 2 }
        ),
        "a is ready, but the elevated waiter needs it stopped"
    );
    let queue = router.queue().await;
    let order: Vec<&str> = queue.iter().map(|e| e.model.as_str()).collect();
    assert_eq!(order, ["b", "a"]);

    drop(lease);
    expect_stop(&mut calls, "a").await;
    let (model, done) = expect_ready(&mut calls).await;
    assert_eq!(model, "b");
    done.send(Ok(())).unwrap();
    drop(timeout(BOUND, high.granted()).await.unwrap().unwrap());
    // Then the fenced request loads a again, evicting b.
    expect_stop(&mut calls, "b").await;
    let (model, done) = expect_ready(&mut calls).await;
    assert_eq!(model, "a");
    done.send(Ok(())).unwrap();
    drop(timeout(BOUND, late_low.granted()).await.unwrap().unwrap());
    shut_down(router, calls).await;
}

#[tokio::test(start_paused = true)]
async fn a_model_that_cannot_run_beside_one_still_starting_waits_then_evicts_it() {
    let (router, mut calls) = spawn(settings(&["a", "b"], &[("s_a", "a"), ("s_b", "b")], &[]));
    let first = router.submit(submit("a", 0)).await.unwrap();
    let (model, done) = expect_ready(&mut calls).await;
    assert_eq!(model, "a");

    // a is only starting, yet it counts as running: b neither starts beside it
    // nor cancels its start.
    let second = router.submit(submit("b", 0)).await.unwrap();
    assert!(matches!(
        *second.status().borrow(),
        WaitStatus::Queued { position: 1 }
    ));
    let running: Vec<(String, ModelState)> = router
        .running()
        .await
        .into_iter()
        .map(|r| (r.model, r.state))
        .collect();
    assert_eq!(running, [("a".to_owned(), ModelState::Starting)]);

    done.send(Ok(())).unwrap();
    let lease = timeout(BOUND, first.granted()).await.unwrap().unwrap();
    assert!(
        matches!(*second.status().borrow(), WaitStatus::Queued { .. }),
        "a serves: it is not evicted under its request"
    );
    drop(lease);
    expect_stop(&mut calls, "a").await;
    let (model, done) = expect_ready(&mut calls).await;
    assert_eq!(model, "b");
    done.send(Ok(())).unwrap();
    drop(timeout(BOUND, second.granted()).await.unwrap().unwrap());
    shut_down(router, calls).await;
}

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Capture {
    type Writer = Capture;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

#[tokio::test(start_paused = true)]
async fn each_matrix_swap_logs_one_info_line_naming_the_set_the_evicted_models_and_the_cost() {
    let capture = Capture::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(capture.clone())
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .finish();
    // Current-thread runtime: the actor runs on this thread, under this subscriber.
    let _guard = tracing::subscriber::set_default(subscriber);
    let (router, mut calls) = spawn(settings(
        &["a", "b", "c"],
        &[("s_ab", "a & b"), ("s_c", "c")],
        &[("a", 4)],
    ));
    for model in ["a", "b"] {
        let ticket = router.submit(submit(model, 0)).await.unwrap();
        let (_, done) = expect_ready(&mut calls).await;
        done.send(Ok(())).unwrap();
        drop(timeout(BOUND, ticket.granted()).await.unwrap().unwrap());
    }
    let ticket = router.submit(submit("c", 0)).await.unwrap();
    expect_stop(&mut calls, "a").await;
    expect_stop(&mut calls, "b").await;
    let (_, done) = expect_ready(&mut calls).await;
    done.send(Ok(())).unwrap();
    drop(timeout(BOUND, ticket.granted()).await.unwrap().unwrap());

    let text = String::from_utf8(capture.0.lock().unwrap().clone()).unwrap();
    let swaps: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("swap: starting"))
        .collect();
    assert_eq!(swaps.len(), 3, "one line per swap: {text}");
    assert!(swaps.iter().all(|l| l.contains("INFO")), "{text}");
    assert!(
        swaps[1].contains("matrix set s_ab (a & b), evict cost 0"),
        "{}",
        swaps[1]
    );
    let to_c = swaps[2];
    assert!(to_c.contains("evicted=[\"a\", \"b\"]"), "{to_c}");
    assert!(to_c.contains("matrix set s_c (c), evict cost 5"), "{to_c}");
    drop(_guard);
    shut_down(router, calls).await;
}
