//! Fault injection: what goes wrong, for which requests, and how often.
//!
//! A [`FaultRule`] pairs a [`Fault`] with a [`RequestMatch`] and a
//! schedule: the next N matching requests, every matching request, or each matching
//! request with a seeded probability (reproducible). Rules are tried in the order they
//! were added; the first that applies wins and one use of its schedule is spent.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use http::StatusCode;
use serde_json::Value;

use crate::journal::RecordedRequest;
use crate::matcher::{RequestMatch, match_methods};

/// One thing that goes wrong with a request.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Fault {
    /// Answer with this status, body and headers instead of the normal response.
    Status {
        /// The status code.
        status: StatusCode,
        /// The body; JSON values are sent with `Content-Type: application/json`, strings
        /// as text/plain. `None` sends the standard envelope for the status.
        body: Option<Value>,
        /// Extra headers, e.g. `Retry-After`.
        headers: Vec<(String, String)>,
    },
    /// Wait this long before answering normally (tokio time).
    Delay(Duration),
    /// Never answer (until the mock stops).
    Hang,
    /// Reset the connection (TCP RST) before sending any header.
    ResetBeforeHeaders,
    /// Send `200` and the headers, then never send a byte of body (until the mock stops).
    StallAfterHeaders,
    /// Streams only: send this many frames, then end the body cleanly (no more frames,
    /// no `[DONE]`).
    TruncateAfter(usize),
    /// Streams only: send this many frames, then abort the connection mid-body.
    DisconnectAfter(usize),
    /// Streams only: send this many frames, then nothing more, keeping the
    /// connection open (until the mock stops): an upstream stalled mid-stream.
    StallAfter(usize),
    /// Streams only: after this many frames send an error envelope as a `data:` frame,
    /// then `[DONE]`, as the server does after a 200.
    ErrorFrame {
        /// Frames sent before the error frame.
        after: usize,
        /// The envelope's `message`.
        message: String,
    },
    /// Streams only: insert a frame whose data is not valid JSON at this position.
    MalformedFrame {
        /// 0-based index of the frame to insert before.
        at: usize,
    },
}

impl Fault {
    /// A status fault with the standard envelope body and no extra headers.
    pub fn status(status: StatusCode) -> Self {
        Self::Status {
            status,
            body: None,
            headers: Vec::new(),
        }
    }

    /// Adds a response header to a [`Fault::Status`], e.g. `Retry-After`:
    /// `Fault::status(StatusCode::SERVICE_UNAVAILABLE).header("retry-after", "2")`.
    /// The other faults send no response of their own; on them it does nothing.
    #[must_use]
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        if let Self::Status { headers, .. } = &mut self {
            headers.push((name.into(), value.into()));
        }
        self
    }

    /// Sets the body of a [`Fault::Status`]: a JSON value (sent as
    /// `application/json`) or a JSON string (sent as text). The other faults send no
    /// response of their own; on them it does nothing.
    #[must_use]
    pub fn body(mut self, value: Value) -> Self {
        if let Self::Status { body, .. } = &mut self {
            *body = Some(value);
        }
        self
    }

    /// A 429 with `Retry-After: <secs>` and the `concurrency_limit` envelope.
    pub fn too_many_requests(retry_after_secs: u64) -> Self {
        Self::Status {
            status: StatusCode::TOO_MANY_REQUESTS,
            body: Some(crate::envelope::proxy_envelope(
                "too many requests for this model; retry after the Retry-After delay",
                "rate_limit_error",
                "concurrency_limit",
            )),
            headers: vec![("retry-after".to_owned(), retry_after_secs.to_string())],
        }
    }

    /// Whether the fault only makes sense for a streamed response.
    pub fn streams_only(&self) -> bool {
        matches!(
            self,
            Self::TruncateAfter(_)
                | Self::DisconnectAfter(_)
                | Self::StallAfter(_)
                | Self::ErrorFrame { .. }
                | Self::MalformedFrame { .. }
        )
    }
}

/// How often a rule applies.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Schedule {
    Times(u64),
    Always,
    Chance { probability: f64, rng: SplitMix64 },
}

impl Schedule {
    /// Spends one use if the rule fires for this request.
    fn fire(&mut self) -> bool {
        match self {
            Self::Times(0) => false,
            Self::Times(n) => {
                *n -= 1;
                true
            }
            Self::Always => true,
            Self::Chance { probability, rng } => rng.next_unit() < *probability,
        }
    }

    fn exhausted(&self) -> bool {
        matches!(self, Self::Times(0))
    }
}

/// A small seeded generator (SplitMix64), so probabilistic faults replay identically.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SplitMix64(u64);

impl SplitMix64 {
    fn next_unit(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A fault, the requests it applies to, and its schedule.
#[derive(Debug, Clone)]
#[must_use]
pub struct FaultRule {
    pub(crate) fault: Fault,
    pub(crate) matcher: RequestMatch,
    pub(crate) schedule: Schedule,
}

match_methods!(FaultRule);

impl FaultRule {
    /// A rule for the next matching request (one use), matching every model request.
    pub fn new(fault: Fault) -> Self {
        Self {
            fault,
            matcher: RequestMatch::default(),
            schedule: Schedule::Times(1),
        }
    }

    /// Applies to the next `n` matching requests. Default: 1.
    pub fn times(mut self, n: u64) -> Self {
        self.schedule = Schedule::Times(n);
        self
    }

    /// Applies to every matching request.
    pub fn always(mut self) -> Self {
        self.schedule = Schedule::Always;
        self
    }

    /// Applies to each matching request with this probability (clamped to 0..=1), drawn
    /// from a generator seeded with `seed`, so a run replays identically.
    pub fn probability(mut self, probability: f64, seed: u64) -> Self {
        let probability = if probability.is_nan() {
            0.0
        } else {
            probability.clamp(0.0, 1.0)
        };
        self.schedule = Schedule::Chance {
            probability,
            rng: SplitMix64(seed),
        };
        self
    }
}

/// The installed rules, each with an id that stays valid while it is installed.
#[derive(Debug, Default)]
pub(crate) struct Faults {
    rules: Mutex<(u64, Vec<(u64, FaultRule)>)>,
}

impl Faults {
    fn lock(&self) -> std::sync::MutexGuard<'_, (u64, Vec<(u64, FaultRule)>)> {
        self.rules.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn add(&self, rule: FaultRule) {
        let mut installed = self.lock();
        installed.0 += 1;
        let id = installed.0;
        installed.1.push((id, rule));
    }

    pub(crate) fn clear(&self) {
        self.lock().1.clear();
    }

    /// The fault for this request, if a rule fires; spends one use of that rule.
    /// Conditions are evaluated outside the lock (closures are user code).
    pub(crate) fn take(&self, request: &RecordedRequest) -> Option<Fault> {
        let candidates: Vec<(u64, RequestMatch)> = self
            .lock()
            .1
            .iter()
            .filter(|(_, r)| request.stream || !r.fault.streams_only())
            .map(|(id, r)| (*id, r.matcher.clone()))
            .collect();
        let matching: Vec<u64> = candidates
            .into_iter()
            .filter(|(_, m)| m.matches(request))
            .map(|(id, _)| id)
            .collect();
        let mut installed = self.lock();
        let fired = matching.iter().find_map(|id| {
            let (_, rule) = installed.1.iter_mut().find(|(i, _)| i == id)?;
            rule.schedule.fire().then(|| rule.fault.clone())
        });
        installed.1.retain(|(_, r)| !r.schedule.exhausted());
        fired
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(model: Option<&str>, path: &str, stream: bool) -> RecordedRequest {
        RecordedRequest {
            model: model.map(str::to_owned),
            path: path.to_owned(),
            stream,
            ..RecordedRequest::for_tests()
        }
    }

    #[test]
    fn next_n_rule_fires_exactly_n_times_then_disappears() {
        let faults = Faults::default();
        faults.add(FaultRule::new(Fault::Hang).times(2));
        let r = req(Some("a"), "/v1/chat/completions", false);
        assert_eq!(faults.take(&r), Some(Fault::Hang));
        assert_eq!(faults.take(&r), Some(Fault::Hang));
        assert_eq!(faults.take(&r), None);
    }

    #[test]
    fn rule_for_another_model_does_not_fire_or_spend() {
        let faults = Faults::default();
        faults.add(FaultRule::new(Fault::Hang).model("b"));
        assert_eq!(faults.take(&req(Some("a"), "/v1/completions", false)), None);
        assert_eq!(
            faults.take(&req(Some("b"), "/v1/completions", false)),
            Some(Fault::Hang)
        );
    }

    #[test]
    fn stream_faults_skip_non_stream_requests() {
        let faults = Faults::default();
        faults.add(FaultRule::new(Fault::TruncateAfter(1)));
        assert_eq!(faults.take(&req(None, "/v1/chat/completions", false)), None);
        assert_eq!(
            faults.take(&req(None, "/v1/chat/completions", true)),
            Some(Fault::TruncateAfter(1))
        );
    }

    #[test]
    fn seeded_probability_replays_the_same_pattern() {
        let pattern = |seed| {
            let faults = Faults::default();
            faults.add(FaultRule::new(Fault::Hang).probability(0.5, seed));
            (0..64)
                .map(|_| faults.take(&req(None, "/x", false)).is_some())
                .collect::<Vec<_>>()
        };
        let a = pattern(7);
        assert_eq!(a, pattern(7));
        let hits = a.iter().filter(|h| **h).count();
        assert!(hits > 0 && hits < 64, "{hits}");
    }
}
