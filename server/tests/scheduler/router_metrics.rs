//! The router actor's measurements on a paused clock: `Retry-After` of a full
//! queue from measured serve times, swaps and their durations, aging driven by
//! the actor's timer.

use std::sync::Arc;
use std::time::Duration;

use llama_swap_server::testing::launcher::{BoxFuture, LaunchError, Launcher};
use llama_swap_server::testing::metrics::Metrics;
use llama_swap_server::testing::priority::Bands;
use llama_swap_server::testing::router::{RouteError, Router, RouterHandle, RouterOptions};
use llama_swap_server::testing::scheduler::{ModelSettings, SchedulerSettings};

use crate::support::{BOUND, submit};

/// Starts take `load` of virtual time; stops are instant.
struct Timed {
    load: Duration,
}

impl Launcher for Timed {
    fn ensure_ready(&self, _model: &str) -> BoxFuture<'static, Result<(), LaunchError>> {
        let load = self.load;
        Box::pin(async move {
            tokio::time::sleep(load).await;
            Ok(())
        })
    }
    fn stop(&self, _model: &str, _grace: Duration) -> BoxFuture<'static, ()> {
        Box::pin(async {})
    }
}

fn router(settings: SchedulerSettings, metrics: Arc<Metrics>) -> RouterHandle {
    let (_exits, exits_rx) = tokio::sync::mpsc::channel(1);
    // The sender is dropped: no upstream exits in these tests.
    Router::spawn_with(
        settings,
        Arc::new(Timed {
            load: Duration::from_millis(500),
        }),
        exits_rx,
        RouterOptions::default().metrics(metrics),
    )
    .unwrap()
}

#[tokio::test(start_paused = true)]
async fn full_queue_retry_after_follows_measured_serve_time() {
    let mut bounded = ModelSettings::new("b");
    bounded.max_queued = Some(1);
    let settings = SchedulerSettings::new(vec![ModelSettings::new("a"), bounded]);
    let metrics = Arc::new(Metrics::new(["a", "b"], Bands::default()));
    let r = router(settings, Arc::clone(&metrics));

    // One request to b that takes 4 s to serve.
    let lease = tokio::time::timeout(BOUND, r.submit(submit("b", 0)).await.unwrap().granted())
        .await
        .unwrap()
        .unwrap();
    tokio::time::sleep(Duration::from_secs(4)).await;
    drop(lease);

    // a takes the GPU and holds it; one request for b waits, the next is refused.
    let held = tokio::time::timeout(BOUND, r.submit(submit("a", 0)).await.unwrap().granted())
        .await
        .unwrap()
        .unwrap();
    let waiting = r.submit(submit("b", 0)).await.unwrap();
    match r.submit(submit("b", 10)).await {
        Err(RouteError::QueueFull {
            model,
            waiting,
            retry_after,
        }) => {
            assert_eq!(model, "b");
            assert_eq!(waiting, 1);
            // 4 s per request × (1 waiting + this one), one at a time.
            assert_eq!(retry_after, Duration::from_secs(8));
        }
        other => panic!("expected QueueFull, got {other:?}"),
    }
    drop(held);
    let lease = tokio::time::timeout(BOUND, waiting.granted())
        .await
        .unwrap()
        .unwrap();
    drop(lease);

    let text = metrics.encode();
    assert!(
        text.contains("llamaswap_swaps_total{model=\"b\",result=\"ok\"} 2\n"),
        "{text}"
    );
    assert!(
        text.contains("llamaswap_swaps_total{model=\"a\",result=\"ok\"} 1\n"),
        "{text}"
    );
    // Each start took the launcher's 0.5 s of virtual time.
    assert!(
        text.contains("llamaswap_swap_duration_seconds_sum{model=\"a\"} 0.5\n"),
        "{text}"
    );
    r.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn actor_wakes_to_age_a_waiter_ahead_of_newer_higher_work() {
    let mut settings = SchedulerSettings::new(vec![
        ModelSettings::new("a"),
        ModelSettings::new("b"),
        ModelSettings::new("c"),
    ]);
    settings.aging_after = Some(Duration::from_secs(30));
    let metrics = Arc::new(Metrics::new(["a", "b", "c"], Bands::default()));
    let r = router(settings, metrics);
    let held = tokio::time::timeout(BOUND, r.submit(submit("a", 0)).await.unwrap().granted())
        .await
        .unwrap()
        .unwrap();
    let low = r.submit(submit("b", -10)).await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let high = r.submit(submit("c", 10)).await.unwrap();
    let queue = r.queue().await;
    assert_eq!(queue[0].model, "c");
    assert!(!queue[1].aged);
    // No event but the actor's own timer happens in between.
    tokio::time::sleep(Duration::from_secs(30)).await;
    let queue = r.queue().await;
    assert_eq!(queue[0].model, "b");
    assert!(queue[0].aged);
    assert_eq!(queue[0].effective_priority, -10);
    drop(held);
    let lease = tokio::time::timeout(BOUND, low.granted())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(lease.model(), "b");
    drop(lease);
    drop(high);
    r.shutdown().await;
}

/// Captures formatted log output.
#[derive(Clone, Default)]
struct Capture(Arc<std::sync::Mutex<Vec<u8>>>);

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
async fn each_swap_logs_one_info_line_with_the_evicted_models_and_the_reason() {
    let capture = Capture::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(capture.clone())
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .finish();
    // Current-thread runtime: the actor task runs on this thread, under this subscriber.
    let _guard = tracing::subscriber::set_default(subscriber);
    let settings = SchedulerSettings::new(vec![ModelSettings::new("a"), ModelSettings::new("b")]);
    let r = router(
        settings,
        Arc::new(Metrics::new(["a", "b"], Bands::default())),
    );
    let first = r.submit(submit("a", 0)).await.unwrap();
    drop(
        tokio::time::timeout(BOUND, first.granted())
            .await
            .unwrap()
            .unwrap(),
    );
    let second = r.submit(submit("b", -10)).await.unwrap();
    let seq = second.id().0;
    drop(
        tokio::time::timeout(BOUND, second.granted())
            .await
            .unwrap()
            .unwrap(),
    );
    r.shutdown().await;
    let text = String::from_utf8(capture.0.lock().unwrap().clone()).unwrap();
    let swaps: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("swap: starting"))
        .collect();
    assert_eq!(swaps.len(), 2, "{text}");
    assert!(swaps.iter().all(|l| l.contains("INFO")), "{text}");
    let to_b = swaps[1];
    assert!(to_b.contains("model=b"), "{to_b}");
    assert!(to_b.contains("evicted=[\"a\"]"), "{to_b}");
    assert!(to_b.contains(&format!("for_request={seq}")), "{to_b}");
    assert!(to_b.contains("requested_priority=-10"), "{to_b}");
}
