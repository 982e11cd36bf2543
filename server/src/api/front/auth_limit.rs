//! Rate limit on failed API-key attempts, per client address.
//!
//! Each address (an IPv6 client by its /64, which one machine usually owns
//! whole) has a bucket of [`BURST`] attempts that refills one every
//! [`REFILL`]. A request that presents a wrong key spends one; while a bucket is
//! empty, every request from that address that needs a key is answered 429 with
//! `Retry-After`, whether its key is right or not, so the limit gives a guesser
//! no answer to learn from. Requests that present no key at all are not guesses
//! and spend nothing.
//!
//! The table is bounded ([`MAX_TRACKED`] addresses): a full bucket is the same as
//! no entry and is dropped first; beyond that the least limited entry goes.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// Failed attempts an address may make in a burst.
pub const BURST: u32 = 10;
/// Time to regain one attempt (30 a minute once the burst is spent).
pub(crate) const REFILL: Duration = Duration::from_secs(2);
/// Most addresses tracked at once.
pub(crate) const MAX_TRACKED: usize = 16_384;

/// Per-address buckets of failed API-key attempts. Cheap critical sections under a
/// std mutex that is never held across an `.await`.
#[derive(Debug, Default)]
pub(crate) struct AuthLimiter {
    buckets: Mutex<HashMap<IpAddr, Bucket>>,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    /// Attempts left, as of `at`.
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn refilled(self, now: Instant) -> f64 {
        let gained = now.saturating_duration_since(self.at).as_secs_f64() / REFILL.as_secs_f64();
        (self.tokens + gained).min(f64::from(BURST))
    }
}

/// The key of an address: IPv4 (also when mapped into IPv6) as is, IPv6 by /64.
fn key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let prefix = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(prefix.into())
        }
        v4 => v4,
    }
}

impl AuthLimiter {
    /// `Some(retry after)` when `ip` has no attempt left at `now`.
    pub(crate) fn blocked(&self, ip: IpAddr, now: Instant) -> Option<Duration> {
        let buckets = self.lock();
        let tokens = buckets.get(&key(ip))?.refilled(now);
        if tokens >= 1.0 {
            return None;
        }
        Some(REFILL.mul_f64(1.0 - tokens))
    }

    /// Spends one attempt of `ip` at `now`.
    pub(crate) fn record_failure(&self, ip: IpAddr, now: Instant) {
        let mut buckets = self.lock();
        let key = key(ip);
        if !buckets.contains_key(&key) && buckets.len() >= MAX_TRACKED {
            make_room(&mut buckets, now);
        }
        let tokens = buckets
            .get(&key)
            .map_or(f64::from(BURST), |b| b.refilled(now));
        buckets.insert(
            key,
            Bucket {
                tokens: (tokens - 1.0).max(0.0),
                at: now,
            },
        );
    }

    /// Addresses tracked now.
    #[cfg(test)]
    pub(crate) fn tracked(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, Bucket>> {
        // A panic while holding it cannot leave a bucket half-written.
        self.buckets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Drops full buckets; if none is full, the one with the most attempts left.
fn make_room(buckets: &mut HashMap<IpAddr, Bucket>, now: Instant) {
    let full = f64::from(BURST);
    buckets.retain(|_, b| b.refilled(now) < full);
    if buckets.len() < MAX_TRACKED {
        return;
    }
    let fullest = buckets
        .iter()
        .max_by(|a, b| a.1.refilled(now).total_cmp(&b.1.refilled(now)))
        .map(|(k, _)| *k);
    if let Some(k) = fullest {
        buckets.remove(&k);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn an_address_is_blocked_after_its_burst_and_regains_one_attempt_per_refill() {
        let limiter = AuthLimiter::default();
        let client = ip("192.0.2.7");
        for _ in 0..BURST {
            assert_eq!(limiter.blocked(client, Instant::now()), None);
            limiter.record_failure(client, Instant::now());
        }
        let retry = limiter.blocked(client, Instant::now()).unwrap();
        assert_eq!(retry, REFILL);
        tokio::time::advance(REFILL / 2).await;
        assert_eq!(limiter.blocked(client, Instant::now()), Some(REFILL / 2));
        tokio::time::advance(REFILL / 2).await;
        assert_eq!(limiter.blocked(client, Instant::now()), None);
        limiter.record_failure(client, Instant::now());
        assert!(limiter.blocked(client, Instant::now()).is_some());
        // Another address is not affected.
        assert_eq!(limiter.blocked(ip("192.0.2.8"), Instant::now()), None);
    }

    #[tokio::test(start_paused = true)]
    async fn ipv6_clients_are_limited_by_their_64_prefix() {
        let limiter = AuthLimiter::default();
        for n in 0..BURST {
            limiter.record_failure(ip(&format!("2001:db8:1:2::{n:x}")), Instant::now());
        }
        assert!(
            limiter
                .blocked(ip("2001:db8:1:2:ffff::1"), Instant::now())
                .is_some()
        );
        assert_eq!(limiter.blocked(ip("2001:db8:1:3::1"), Instant::now()), None);
        // An IPv4 client seen through an IPv6 socket is the same client.
        for _ in 0..BURST {
            limiter.record_failure(ip("::ffff:198.51.100.1"), Instant::now());
        }
        assert!(
            limiter
                .blocked(ip("198.51.100.1"), Instant::now())
                .is_some()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_table_stays_bounded_and_keeps_the_most_limited_addresses() {
        let limiter = AuthLimiter::default();
        let attacker = ip("203.0.113.1");
        for _ in 0..BURST {
            limiter.record_failure(attacker, Instant::now());
        }
        for n in 0..(MAX_TRACKED as u32 + 100) {
            let other = IpAddr::V4((0x0a00_0000 + n).into());
            limiter.record_failure(other, Instant::now());
        }
        assert!(limiter.tracked() <= MAX_TRACKED);
        assert!(limiter.blocked(attacker, Instant::now()).is_some());
    }
}
