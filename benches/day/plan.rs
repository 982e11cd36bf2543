//! The day to replay: four models with stated load, wake and sleep times, and a
//! seeded generator of a bot's day over them. Everything here is in unscaled
//! seconds (seconds of the real day); the replay divides by the time scale.
//!
//! The same seed gives the same day: the generator draws from one `StdRng` in a fixed
//! order and reads no clock.
//!
//! - **Elevated chats**: people talking to the bot in Discord. Sessions start through
//!   the day at a rate that follows the hour (a few at night, most in the evening);
//!   a session is a burst of short requests, each sent a reading-and-typing pause after
//!   the previous answer arrived (closed loop: a person waits for the answer), mostly
//!   on the session's model, sometimes on the other chat model.
//! - **Low batch jobs**: groups of one to five longer jobs for one batch model (a
//!   summary of a channel, a report), the groups arriving as a Poisson stream all day,
//!   the jobs of a group a few seconds apart; open loop (a queue does not wait).

use rand::rngs::StdRng;
use rand::{RngExt as _, SeedableRng as _};

/// Who sends a request, and with which `X-Priority`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Class {
    /// Interactive chat: `X-Priority: 10`.
    Elevated,
    /// Batch job: `X-Priority: -10`.
    Low,
}

impl Class {
    /// The header value the client sends.
    pub(crate) fn header(self) -> &'static str {
        match self {
            Class::Elevated => "10",
            Class::Low => "-10",
        }
    }
}

/// One model of the day, with stated figures (no GPU on the benchmark machine: these
/// are typical llama-server loads of Q4_K_M GGUFs from an NVMe SSD, CUDA start and
/// warm-up included, and vLLM level-1 sleep figures for the same sizes).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ModelSpec {
    /// The model ID in the server's config.
    pub id: &'static str,
    /// What it stands for.
    pub stands_for: &'static str,
    /// GiB it holds on a GPU, weights and context (the memory router's `memory`).
    pub memory_gib: u32,
    /// Cold start: process start to healthy, seconds.
    pub load: f64,
    /// Sleep (weights offloaded), seconds.
    pub sleep: f64,
    /// Wake (weights back), seconds.
    pub wake: f64,
    /// Prompt processing before the first token, seconds.
    pub first_token: f64,
    /// Generation speed, tokens per second.
    pub tokens_per_second: f64,
}

/// The four models: two chat models, two batch models.
pub(crate) const MODELS: [ModelSpec; 4] = [
    ModelSpec {
        id: "chat-small",
        stands_for: "Gemma 3 4B Q4_K_M (2.5 GB)",
        memory_gib: 5,
        load: 5.0,
        sleep: 0.5,
        wake: 1.0,
        first_token: 0.3,
        tokens_per_second: 90.0,
    },
    ModelSpec {
        id: "chat",
        stands_for: "Qwen3 14B Q4_K_M (9 GB)",
        memory_gib: 12,
        load: 11.0,
        sleep: 1.0,
        wake: 2.0,
        first_token: 0.6,
        tokens_per_second: 45.0,
    },
    ModelSpec {
        id: "batch-alt",
        stands_for: "Mistral Small 24B Q4_K_M (14 GB)",
        memory_gib: 17,
        load: 17.0,
        sleep: 1.5,
        wake: 3.0,
        first_token: 2.0,
        tokens_per_second: 30.0,
    },
    ModelSpec {
        id: "batch",
        stands_for: "Qwen2.5 32B Q4_K_M (20 GB)",
        memory_gib: 22,
        load: 24.0,
        sleep: 2.0,
        wake: 4.0,
        first_token: 3.0,
        tokens_per_second: 22.0,
    },
];

/// Indices into [`MODELS`].
pub(crate) const CHAT_SMALL: usize = 0;
pub(crate) const CHAT: usize = 1;
pub(crate) const BATCH_ALT: usize = 2;
pub(crate) const BATCH: usize = 3;

/// One request: its model (index into [`MODELS`]) and how long the model takes to
/// answer it, seconds (first token plus generation).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Ask {
    pub model: usize,
    pub service: f64,
}

/// A chat session: a burst of Elevated requests from one person.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Session {
    /// When the first message is sent, seconds from the start of the day.
    pub start: f64,
    /// The messages in order, each with the pause before the next one is sent
    /// (counted from the previous answer's end).
    pub messages: Vec<(Ask, f64)>,
}

/// A Low batch job, sent at a fixed time whatever happens (open loop).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Job {
    pub at: f64,
    pub ask: Ask,
}

/// A generated day (or part of one).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Day {
    pub seed: u64,
    /// First and last hour replayed: `[from, to)` hours of the day.
    pub hours: (f64, f64),
    pub sessions: Vec<Session>,
    pub jobs: Vec<Job>,
}

impl Day {
    /// Seconds the replayed part of the day lasts.
    pub(crate) fn length(&self) -> f64 {
        (self.hours.1 - self.hours.0) * 3600.0
    }

    /// Elevated requests in the day.
    pub(crate) fn chats(&self) -> usize {
        self.sessions.iter().map(|s| s.messages.len()).sum()
    }

    /// Requests per model, Elevated and Low.
    pub(crate) fn per_model(&self) -> [(usize, usize); 4] {
        let mut out = [(0, 0); 4];
        for session in &self.sessions {
            for (ask, _) in &session.messages {
                out[ask.model].0 += 1;
            }
        }
        for job in &self.jobs {
            out[job.ask.model].1 += 1;
        }
        out
    }

    /// Total service time the day asks for, seconds (what one GPU serving one
    /// request at a time would be busy with, without any swap).
    pub(crate) fn service_total(&self) -> f64 {
        let chats: f64 = self
            .sessions
            .iter()
            .flat_map(|s| s.messages.iter().map(|(a, _)| a.service))
            .sum();
        chats + self.jobs.iter().map(|j| j.ask.service).sum::<f64>()
    }
}

/// Chat sessions started per hour, by hour of the day (a community bot: quiet at
/// night, busiest in the evening).
const SESSIONS_PER_HOUR: [f64; 24] = [
    1.0, 0.5, 0.3, 0.2, 0.2, 0.3, 0.5, 1.0, 2.0, 2.5, 3.0, 3.0, 3.5, 3.0, 3.0, 3.5, 4.0, 5.0, 6.0,
    7.0, 7.0, 6.0, 4.0, 2.0,
];

/// Groups of batch jobs per hour, all day.
const JOB_GROUPS_PER_HOUR: f64 = 5.0;

/// Generates the day of `seed`, hours `[from, to)` of it (0 ≤ from < to ≤ 24).
///
/// The whole day is always drawn, then cut, so a window of a seed's day is the
/// same requests as in its whole day.
pub(crate) fn generate(seed: u64, from: f64, to: f64) -> Day {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut sessions = Vec::new();
    for (hour, &rate) in SESSIONS_PER_HOUR.iter().enumerate() {
        let hour_start = hour as f64 * 3600.0;
        let mut at = hour_start + exponential(&mut rng, rate / 3600.0);
        while at < hour_start + 3600.0 {
            sessions.push(session(&mut rng, at));
            at += exponential(&mut rng, rate / 3600.0);
        }
    }
    let mut jobs = Vec::new();
    let mut at = exponential(&mut rng, JOB_GROUPS_PER_HOUR / 3600.0);
    while at < 86_400.0 {
        let model = if rng.random_bool(0.6) {
            BATCH
        } else {
            BATCH_ALT
        };
        let size = rng.random_range(1..=5);
        let mut job_at = at;
        for _ in 0..size {
            jobs.push(Job {
                at: job_at,
                ask: Ask {
                    model,
                    service: batch_service(&mut rng, model),
                },
            });
            job_at += rng.random_range(1.0..10.0);
        }
        at += exponential(&mut rng, JOB_GROUPS_PER_HOUR / 3600.0);
    }
    // Groups overlap when one starts before the previous one's last job.
    jobs.sort_by(|a, b| a.at.total_cmp(&b.at));
    let (lo, hi) = (from * 3600.0, to * 3600.0);
    sessions.retain(|s| s.start >= lo && s.start < hi);
    jobs.retain(|j| j.at >= lo && j.at < hi);
    for s in &mut sessions {
        s.start -= lo;
    }
    for j in &mut jobs {
        j.at -= lo;
    }
    Day {
        seed,
        hours: (from, to),
        sessions,
        jobs,
    }
}

/// One chat session starting at `start`.
fn session(rng: &mut StdRng, start: f64) -> Session {
    let home = if rng.random_bool(0.65) {
        CHAT
    } else {
        CHAT_SMALL
    };
    // 2 + geometric: mean about 7 messages, at most 25.
    let mut count = 2;
    while count < 25 && rng.random_bool(0.82) {
        count += 1;
    }
    let messages = (0..count)
        .map(|_| {
            let model = if rng.random_bool(0.85) {
                home
            } else {
                CHAT + CHAT_SMALL - home
            };
            // A reply of 60 to 500 tokens, median about 180.
            let tokens = lognormal(rng, 180.0, 0.5).clamp(60.0, 500.0);
            let spec = &MODELS[model];
            let service = spec.first_token + tokens / spec.tokens_per_second;
            // Reading the answer and typing the next message: median 20 s.
            let pause = lognormal(rng, 20.0, 0.7).clamp(4.0, 180.0);
            (Ask { model, service }, pause)
        })
        .collect();
    Session { start, messages }
}

/// A batch job's service: a long prompt and 300 to 3 000 tokens, median about 900.
fn batch_service(rng: &mut StdRng, model: usize) -> f64 {
    let spec = &MODELS[model];
    let tokens = lognormal(rng, 900.0, 0.6).clamp(300.0, 3000.0);
    spec.first_token * 4.0 + tokens / spec.tokens_per_second
}

/// An exponential draw with this rate (per second).
fn exponential(rng: &mut StdRng, rate: f64) -> f64 {
    -(1.0 - rng.random::<f64>()).ln() / rate
}

/// A log-normal draw with this median and shape (Box-Muller).
fn lognormal(rng: &mut StdRng, median: f64, sigma: f64) -> f64 {
    let u1 = 1.0 - rng.random::<f64>();
    let u2 = rng.random::<f64>();
    let normal = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
    median * (sigma * normal).exp()
}
