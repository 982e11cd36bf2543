//! Replays a [`Day`] against one running server, in replay time (unscaled seconds
//! divided by the scale), and reads what the server and the upstreams counted.
//!
//! Each request is a streamed chat completion on its own connection. Its wait is the
//! time from sending it to the response head: the upstream (mockswap) sends its head
//! at once and its first token after the model's first-token time, so the head
//! arrives when the server forwarded the request, after any queueing and swap. Its
//! service is the rest, to the end of the body: the model's first-token time and one
//! token per `token_gap`, as many tokens as the planned service asks.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt as _;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::Res;
use crate::http::{Conn, get_text, post};
use crate::plan::{Ask, Class, Day, MODELS};

/// What happened to one request, in replay seconds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Outcome {
    pub class: Class,
    /// Sent → response head.
    pub wait: f64,
    /// Response head → end of body.
    pub service: f64,
    /// The service the day planned for it (scaled).
    pub planned: f64,
    /// Answered 200 with a whole body.
    pub ok: bool,
}

/// How a request is shaped for the upstream: the scale and the token gap.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shape {
    /// Unscaled seconds per replay second.
    pub scale: f64,
    /// Replay seconds between two streamed tokens, as mockswap is asked to pace them.
    pub token_gap: f64,
    /// The same, as mockswap paces them on this machine ([`calibrate`]): a little
    /// longer, a sleep ends on the timer's next millisecond tick.
    pub paced_gap: f64,
}

impl Shape {
    /// Words to put in the message so that mockswap's echo (`[model]` then the words,
    /// one token each, the first after the model's first-token time, each next one a
    /// token gap later) lasts about the planned service.
    pub(crate) fn words(&self, ask: &Ask) -> usize {
        let first = MODELS[ask.model].first_token / self.scale;
        let rest = ask.service / self.scale - first;
        // The `[model]` token takes the first gap.
        ((rest / self.paced_gap).round() as usize).saturating_sub(1)
    }
}

/// Sends a streamed chat completion of `words` words for `model` and returns the
/// seconds to the response head, from there to the end of the body, and whether it
/// was answered 200 with a whole body.
async fn stream_chat(
    addr: SocketAddr,
    model: &str,
    words: usize,
    class: Class,
) -> (f64, f64, bool) {
    let body = serde_json::json!({
        "model": model,
        "stream": true,
        "messages": [{"role": "user", "content": "word ".repeat(words)}],
    });
    let sent = Instant::now();
    let mut head = sent;
    let ok = async {
        let mut conn = Conn::open(addr).await?;
        let request = post(
            "/v1/chat/completions",
            Bytes::from(body.to_string()),
            &[("x-priority", class.header().to_owned())],
        )?;
        let response = conn.send(request).await?;
        head = Instant::now();
        let status = response.status();
        response.into_body().collect().await?;
        Res::Ok(status.is_success())
    }
    .await
    .unwrap_or(false);
    let done = Instant::now();
    (
        head.duration_since(sent).as_secs_f64(),
        done.duration_since(head).as_secs_f64(),
        ok,
    )
}

/// Sends one request of the day and times it.
async fn ask(addr: SocketAddr, shape: Shape, ask: Ask, class: Class) -> Outcome {
    let (wait, service, ok) =
        stream_chat(addr, MODELS[ask.model].id, shape.words(&ask), class).await;
    Outcome {
        class,
        wait,
        service,
        planned: ask.service / shape.scale,
        ok,
    }
}

/// How long mockswap at `addr` (no first-token delay, paced at `token_gap`) takes
/// per streamed token on this machine: the median of a few streams of 40 tokens.
///
/// # Errors
///
/// When a calibration stream is not answered 200.
pub(crate) async fn calibrate(addr: SocketAddr) -> Res<f64> {
    const WORDS: usize = 39;
    let mut gaps = Vec::new();
    for _ in 0..5 {
        let (_, service, ok) = stream_chat(addr, "calibrate", WORDS, Class::Elevated).await;
        if !ok {
            return Err("a calibration stream failed".into());
        }
        gaps.push(service / (WORDS + 1) as f64);
    }
    crate::stats::median(&gaps).ok_or_else(|| "no calibration stream".into())
}

/// Plays `day` against the server at `addr` from `t0`: every session as one task
/// (its messages one after the other, each after its pause), every job at its time.
/// Returns when every request has ended.
pub(crate) async fn play(addr: SocketAddr, day: &Day, shape: Shape, t0: Instant) -> Vec<Outcome> {
    let at = |secs: f64| t0 + Duration::from_secs_f64(secs / shape.scale);
    let mut tasks: JoinSet<Vec<Outcome>> = JoinSet::new();
    for session in &day.sessions {
        let start = at(session.start);
        let messages = session.messages.clone();
        tasks.spawn(async move {
            tokio::time::sleep_until(start).await;
            let mut out = Vec::with_capacity(messages.len());
            for (message, pause) in messages {
                out.push(ask(addr, shape, message, Class::Elevated).await);
                tokio::time::sleep(Duration::from_secs_f64(pause / shape.scale)).await;
            }
            out
        });
    }
    for job in &day.jobs {
        let start = at(job.at);
        let job = *job;
        tasks.spawn(async move {
            tokio::time::sleep_until(start).await;
            vec![ask(addr, shape, job.ask, Class::Low).await]
        });
    }
    let mut out = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        // A panicking task is a bug of the harness: its requests count as failed.
        if let Ok(outcomes) = joined {
            out.extend(outcomes);
        }
    }
    out
}

/// What the server counted over the replay (`GET /metrics`), per model (indices
/// into [`MODELS`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Counted {
    /// `llamaswap_swaps_total{result="ok"}`: starts and wakes.
    pub swaps: [f64; 4],
    /// `llamaswap_swaps_total{result="failed"}`, all models.
    pub failed_swaps: f64,
    /// `llamaswap_swap_duration_seconds_sum`, replay seconds.
    pub swap_seconds: [f64; 4],
}

impl Counted {
    /// Starts and wakes, all models.
    pub(crate) fn total_swaps(&self) -> f64 {
        self.swaps.iter().sum()
    }

    /// Time in swaps, all models, replay seconds.
    pub(crate) fn total_seconds(&self) -> f64 {
        self.swap_seconds.iter().sum()
    }
}

/// The value of `label` in a metric line's name (`name{a="x",b="y"}`).
fn label<'a>(name: &'a str, label: &str) -> Option<&'a str> {
    let start = name.find(&format!("{label}=\""))? + label.len() + 2;
    let len = name[start..].find('"')?;
    Some(&name[start..start + len])
}

/// Reads the swap counters of an OpenMetrics text, per model of [`MODELS`].
pub(crate) fn count_swaps(metrics: &str) -> Counted {
    let mut counted = Counted::default();
    for line in metrics.lines() {
        let Some((name, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(value) = value.parse::<f64>() else {
            continue;
        };
        let model = label(name, "model").and_then(|m| MODELS.iter().position(|s| s.id == m));
        if name.starts_with("llamaswap_swaps_total{") {
            match (label(name, "result"), model) {
                (Some("ok"), Some(m)) => counted.swaps[m] += value,
                (Some("ok"), None) => {}
                _ => counted.failed_swaps += value,
            }
        } else if name.starts_with("llamaswap_swap_duration_seconds_sum{")
            && let Some(m) = model
        {
            counted.swap_seconds[m] += value;
        }
    }
    counted
}

/// The server's swap counters.
pub(crate) async fn counted(addr: SocketAddr) -> Res<Counted> {
    Ok(count_swaps(&get_text(addr, "/metrics").await?))
}

/// What the upstream processes alive at the end counted of their sleep mode
/// (`GET /__mockswap/sleep` on each port), per model: (sleeps, wakes). A port
/// nobody answers on counts 0: its process was stopped for good, and what it
/// counted went with it, so these are lower bounds.
pub(crate) async fn sleeps_and_wakes(ports: &[u16; 4]) -> [(u64, u64); 4] {
    let mut out = [(0, 0); 4];
    for (slot, port) in out.iter_mut().zip(ports) {
        let addr = SocketAddr::from(([127, 0, 0, 1], *port));
        if let Ok(state) = crate::http::get_json(addr, "/__mockswap/sleep").await {
            let count = |key: &str| state.get(key).and_then(serde_json::Value::as_u64);
            *slot = (count("sleeps").unwrap_or(0), count("wakes").unwrap_or(0));
        }
    }
    out
}

/// The time the swaps would take at the stated figures alone, unscaled seconds:
/// each wake at its wake time, each other start at its load time, each sleep at its
/// sleep time (a stop of a model without sleep counts nothing: a process stops in
/// milliseconds). What the server measured beyond it is this machine's own cost of a
/// swap (process start, health polls, HTTP), magnified by the time scale.
pub(crate) fn stated_swap_time(counted: &Counted, sleeps_wakes: &[(u64, u64); 4]) -> f64 {
    MODELS
        .iter()
        .zip(counted.swaps)
        .zip(sleeps_wakes)
        .map(|((spec, swaps), &(sleeps, wakes))| {
            let wakes = (wakes as f64).min(swaps);
            wakes * spec.wake + (swaps - wakes) * spec.load + sleeps as f64 * spec.sleep
        })
        .sum()
}
