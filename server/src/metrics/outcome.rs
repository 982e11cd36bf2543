//! The outcome of one model request, recorded exactly once.

use std::sync::Arc;

use super::{Label, Metrics};

/// Tracks one model request until its outcome is known: records `served`,
/// `error` or `rejected` when told, and `cancelled` if dropped without being
/// told (the client went away).
#[derive(Debug)]
pub struct RequestOutcome {
    metrics: Arc<Metrics>,
    band: Label,
    done: bool,
}

impl RequestOutcome {
    pub(super) fn new(metrics: Arc<Metrics>, band: Label) -> Self {
        Self {
            metrics,
            band,
            done: false,
        }
    }

    /// The band label is decided by the effective priority once admitted.
    pub fn set_priority(&mut self, effective: i32) {
        self.band = self.metrics.band_label(effective);
    }

    fn record(mut self, outcome: &'static str, code: &'static str) {
        self.done = true;
        let band = std::mem::replace(&mut self.band, Label::Word(""));
        self.metrics.record_outcome(outcome, code, band);
    }

    /// The upstream answered (whatever its status).
    pub fn served(self) {
        self.record("served", "");
    }

    /// Not a model request after all (a redirect): recorded nowhere.
    pub fn discard(mut self) {
        self.done = true;
    }

    /// Refused before it could wait (`code` from docs/ERRORS.md).
    pub fn rejected(self, code: &'static str) {
        self.record("rejected", code);
    }

    /// The client went away before the answer (an upload it aborted).
    pub fn cancelled(self) {
        self.record("cancelled", "");
    }

    /// Admitted, then failed (`code` from docs/ERRORS.md).
    pub fn error(self, code: &'static str) {
        self.record("error", code);
    }
}

impl Drop for RequestOutcome {
    fn drop(&mut self) {
        if !self.done {
            let band = std::mem::replace(&mut self.band, Label::Word(""));
            self.metrics.record_outcome("cancelled", "", band);
        }
    }
}
