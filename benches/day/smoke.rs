//! The `day` bench's own tests, so it does not rot between runs: the generator's
//! (seeded determinism, the shape of a day), the metrics parsing, and a tiny part of
//! a day replayed over HTTP on every setup with the binaries of this build
//! (`cargo build --workspace --bins` makes them; scripts/test does).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[allow(dead_code)]
mod compare;
#[allow(dead_code)]
#[path = "../budget/http.rs"]
mod http;
#[allow(dead_code)]
mod plan;
#[allow(dead_code)]
#[path = "../budget/procs.rs"]
mod procs;
#[allow(dead_code)]
mod replay;
#[allow(dead_code)]
mod report;
#[allow(dead_code)]
mod setup;
#[allow(dead_code)]
#[path = "../budget/stats.rs"]
mod stats;

use std::time::Duration;

use compare::Options;
use plan::{Ask, BATCH, BATCH_ALT, CHAT, CHAT_SMALL, generate};
use replay::{Counted, Shape, count_swaps, stated_swap_time};
use setup::Setup;

/// Errors of the harness.
pub type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tiny_day_replays_on_every_setup_and_every_request_is_answered() {
    let bin = procs::bin_dir().unwrap();
    for needed in ["mockswap", "llama-swap-server"] {
        assert!(
            bin.join(needed).is_file(),
            "{} is missing: cargo build --workspace --bins",
            bin.join(needed).display()
        );
    }
    // Twelve minutes of seed 1's evening: chats on both chat models and jobs on both
    // batch models, so every setup swaps.
    let day = plan::generate(1, 18.8, 19.0);
    let per_model = day.per_model();
    assert!(
        per_model.iter().all(|&(elevated, low)| elevated + low > 0),
        "the window no longer asks for every model: {per_model:?}"
    );
    let options = Options {
        bin,
        scale: 240.0,
        min_resident: 240.0,
        aging_after: 720.0,
        token_gap: 2.0,
        stagger: Duration::ZERO,
    };
    let results = compare::compare(&day, &Setup::ALL, &options).await.unwrap();
    println!("{}", report::preamble(&day, &options));
    println!("{}", report::table(&results));
    assert_eq!(results.len(), Setup::ALL.len());
    for (setup, result) in &results {
        let figures = result
            .as_ref()
            .unwrap_or_else(|e| panic!("{}: {e}", setup.name()));
        assert_eq!(figures.elevated, day.chats(), "{}", setup.name());
        assert_eq!(figures.low, day.jobs.len(), "{}", setup.name());
        assert_eq!(figures.failed, 0, "{}", setup.name());
        assert_eq!(figures.failed_swaps, 0.0, "{}", setup.name());
        assert!(figures.swaps_per_hour > 0.0, "{}", setup.name());
    }
}

#[test]
fn the_same_seed_gives_the_same_day() {
    assert_eq!(generate(7, 0.0, 24.0), generate(7, 0.0, 24.0));
    assert_ne!(generate(7, 0.0, 24.0), generate(8, 0.0, 24.0));
}

#[test]
fn a_window_holds_the_same_requests_as_the_whole_day() {
    let day = generate(11, 0.0, 24.0);
    let evening = generate(11, 18.0, 20.0);
    let expected: Vec<f64> = day
        .jobs
        .iter()
        .filter(|j| (18.0 * 3600.0..20.0 * 3600.0).contains(&j.at))
        .map(|j| j.at - 18.0 * 3600.0)
        .collect();
    let got: Vec<f64> = evening.jobs.iter().map(|j| j.at).collect();
    assert_eq!(got, expected);
    assert_eq!(evening.length(), 7200.0);
}

#[test]
fn a_day_is_bursts_of_chats_on_the_chat_models_and_jobs_on_the_batch_models() {
    let day = generate(1, 0.0, 24.0);
    let per_model = day.per_model();
    // Chats go to the chat models only, jobs to the batch models only.
    assert_eq!(per_model[CHAT_SMALL].1 + per_model[CHAT].1, 0);
    assert_eq!(per_model[BATCH].0 + per_model[BATCH_ALT].0, 0);
    // Some 80 sessions of about 7 messages, some 360 jobs: wide bounds, any seed.
    assert!(
        (30..200).contains(&day.sessions.len()),
        "{}",
        day.sessions.len()
    );
    assert!((150..1500).contains(&day.chats()), "{}", day.chats());
    assert!((150..700).contains(&day.jobs.len()), "{}", day.jobs.len());
    // The evening is busier than the night.
    let started = |from: f64, to: f64| {
        day.sessions
            .iter()
            .filter(|s| (from * 3600.0..to * 3600.0).contains(&s.start))
            .count()
    };
    assert!(started(18.0, 22.0) > started(2.0, 6.0));
    // Jobs are in time order; chats are short and jobs long.
    assert!(day.jobs.windows(2).all(|w| w[0].at <= w[1].at));
    for session in &day.sessions {
        assert!(session.messages.len() >= 2);
        for (ask, pause) in &session.messages {
            assert!((0.9..15.0).contains(&ask.service), "{ask:?}");
            assert!((4.0..=180.0).contains(pause));
        }
    }
    for job in &day.jobs {
        assert!((10.0..200.0).contains(&job.ask.service), "{job:?}");
    }
}

#[test]
fn swaps_are_read_per_model_from_the_metrics_text() {
    let text = "# TYPE llamaswap_swaps counter\n\
        llamaswap_swaps_total{model=\"chat\",result=\"ok\"} 3\n\
        llamaswap_swaps_total{model=\"batch\",result=\"ok\"} 2\n\
        llamaswap_swaps_total{model=\"batch\",result=\"failed\"} 1\n\
        llamaswap_swap_duration_seconds_sum{model=\"chat\"} 0.5\n\
        llamaswap_swap_duration_seconds_count{model=\"chat\"} 3\n\
        llamaswap_swap_duration_seconds_sum{model=\"batch\"} 0.25\n";
    let counted = count_swaps(text);
    assert_eq!(
        counted,
        Counted {
            swaps: [0.0, 3.0, 0.0, 2.0],
            failed_swaps: 1.0,
            swap_seconds: [0.0, 0.5, 0.0, 0.25],
        }
    );
    assert_eq!(counted.total_swaps(), 5.0);
    // chat: 1 wake (2 s) and 2 starts (11 s each), 4 sleeps (1 s each); batch: 2 starts (24 s).
    let stated = stated_swap_time(&counted, &[(0, 0), (4, 1), (0, 0), (0, 0)]);
    assert_eq!(stated, 2.0 + 22.0 + 4.0 + 48.0);
}

#[test]
fn a_request_streams_about_its_planned_service() {
    let shape = Shape {
        scale: 100.0,
        token_gap: 0.019,
        paced_gap: 0.02,
    };
    // chat: 0.6 s to the first token, then 10 s of tokens: 0.1 s scaled, 5 gaps,
    // the first taken by the `[model]` token.
    let ask = Ask {
        model: 1,
        service: 10.6,
    };
    assert_eq!(shape.words(&ask), 4);
}
