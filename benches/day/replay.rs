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
    /// Replay seconds between two streamed tokens.
    pub token_gap: f64,
}

impl Shape {
    /// Words to put in the message so that mockswap's echo (`[model]` then the words,
    /// one token each, the first after the model's first-token time, each next one a
    /// `token_gap` later) lasts about the planned service.
    pub(crate) fn words(&self, ask: &Ask) -> usize {
        let first = MODELS[ask.model].first_token / self.scale;
        let rest = ask.service / self.scale - first;
        // The `[model]` token takes the first gap.
        ((rest / self.token_gap).round() as usize).saturating_sub(1)
    }
}

/// Sends one request and times it.
async fn ask(addr: SocketAddr, shape: Shape, ask: Ask, class: Class) -> Outcome {
    let words = shape.words(&ask);
    let body = serde_json::json!({
        "model": MODELS[ask.model].id,
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
    Outcome {
        class,
        wait: head.duration_since(sent).as_secs_f64(),
        service: done.duration_since(head).as_secs_f64(),
        planned: ask.service / shape.scale,
        ok,
    }
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

/// What the server counted over the replay (`GET /metrics`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Counted {
    /// `llamaswap_swaps_total{result="ok"}`, all models: starts and wakes.
    pub swaps: f64,
    /// `llamaswap_swaps_total{result="failed"}`.
    pub failed_swaps: f64,
    /// `llamaswap_swap_duration_seconds_sum`, all models, replay seconds.
    pub swap_seconds: f64,
}

/// Sums the swap counters of an OpenMetrics text over models.
pub(crate) fn count_swaps(metrics: &str) -> Counted {
    let mut counted = Counted::default();
    for line in metrics.lines() {
        let Some((name, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(value) = value.parse::<f64>() else {
            continue;
        };
        if name.starts_with("llamaswap_swaps_total{") {
            if name.contains("result=\"ok\"") {
                counted.swaps += value;
            } else {
                counted.failed_swaps += value;
            }
        } else if name.starts_with("llamaswap_swap_duration_seconds_sum{") {
            counted.swap_seconds += value;
        }
    }
    counted
}

/// The server's swap counters.
pub(crate) async fn counted(addr: SocketAddr) -> Res<Counted> {
    Ok(count_swaps(&get_text(addr, "/metrics").await?))
}

/// Wakes the upstream processes alive now counted (`GET /__mockswap/sleep` on each
/// port; a port nobody answers on counts 0: its process was stopped).
pub(crate) async fn wakes(ports: &[u16]) -> u64 {
    let mut total = 0;
    for port in ports {
        let addr = SocketAddr::from(([127, 0, 0, 1], *port));
        if let Ok(state) = crate::http::get_json(addr, "/__mockswap/sleep").await {
            total += state
                .get("wakes")
                .and_then(serde_json::Value::as_u64)
                .unwrap_or(0);
        }
    }
    total
}
