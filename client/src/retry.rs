//! Retry timing: jittered backoff, or the server's `Retry-After` (read by
//! `retry_after.rs`) within the policy's cap.
//!
//! Pure functions of their inputs (the clock and the random draw are passed in), so
//! the rules are unit-tested without waiting.

use std::time::Duration;

use crate::options::RetryPolicy;

/// What to do after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RetryDecision {
    /// Wait this long, then send again.
    After(Duration),
    /// Give up and report the attempt's error.
    GiveUp,
}

/// Decides the delay before retry number `retry` (0 for the first retry).
///
/// A `Retry-After` within the policy's cap is used as is; one above the cap means
/// the server asks for longer than the caller is willing to wait, so the call fails
/// at once. Without one, the delay is `base * 2^retry`, capped at the policy's
/// maximum, scaled by `jitter` (expected in `0.5..=1.0`) so that clients that failed
/// together do not retry together.
pub(crate) fn decide(
    policy: &RetryPolicy,
    retry: u32,
    server_delay: Option<Duration>,
    jitter: f64,
) -> RetryDecision {
    if retry >= policy.max_retries {
        return RetryDecision::GiveUp;
    }
    if let Some(delay) = server_delay {
        return if delay <= policy.retry_after_cap {
            RetryDecision::After(delay)
        } else {
            RetryDecision::GiveUp
        };
    }
    let factor = 2u32.saturating_pow(retry.min(31));
    let exp = policy
        .backoff_base
        .saturating_mul(factor)
        .min(policy.backoff_max);
    RetryDecision::After(exp.mul_f64(jitter.clamp(0.0, 1.0)))
}

/// A jitter factor in `0.5..=1.0`.
pub(crate) fn jitter() -> f64 {
    rand::random_range(0.5..=1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_delay_within_cap_is_used_exactly() {
        let p = RetryPolicy::default();
        assert_eq!(
            decide(&p, 0, Some(Duration::from_secs(60)), 0.5),
            RetryDecision::After(Duration::from_secs(60))
        );
    }

    #[test]
    fn server_delay_above_cap_gives_up_at_once() {
        let p = RetryPolicy::default();
        assert_eq!(
            decide(&p, 0, Some(Duration::from_secs(61)), 1.0),
            RetryDecision::GiveUp
        );
    }

    #[test]
    fn backoff_doubles_caps_and_applies_jitter() {
        let p = RetryPolicy::default()
            .with_max_retries(10)
            .with_backoff(Duration::from_millis(100), Duration::from_millis(350));
        assert_eq!(
            decide(&p, 0, None, 1.0),
            RetryDecision::After(Duration::from_millis(100))
        );
        assert_eq!(
            decide(&p, 1, None, 1.0),
            RetryDecision::After(Duration::from_millis(200))
        );
        assert_eq!(
            decide(&p, 2, None, 1.0),
            RetryDecision::After(Duration::from_millis(350))
        );
        assert_eq!(
            decide(&p, 1, None, 0.5),
            RetryDecision::After(Duration::from_millis(100))
        );
        assert_eq!(
            decide(&p, 9, None, 1.0),
            RetryDecision::After(Duration::from_millis(350))
        );
    }

    #[test]
    fn retries_stop_at_the_policy_maximum() {
        let p = RetryPolicy::default();
        assert!(matches!(decide(&p, 1, None, 1.0), RetryDecision::After(_)));
        assert_eq!(decide(&p, 2, None, 1.0), RetryDecision::GiveUp);
        assert_eq!(
            decide(&RetryPolicy::none(), 0, Some(Duration::ZERO), 1.0),
            RetryDecision::GiveUp
        );
    }

    #[test]
    fn jitter_stays_in_range() {
        for _ in 0..1000 {
            let j = jitter();
            assert!((0.5..=1.0).contains(&j));
        }
    }
}
