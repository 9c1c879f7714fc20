//! Relay policies that do not depend on a database: the [`Ordering`] of publication, what a
//! dead letter does to its aggregate ([`DeadLetterPolicy`]) and the retry [`Backoff`].
//!
//! ```
//! use std::time::Duration;
//! use outbox_kernel::policy::Backoff;
//!
//! let backoff = Backoff::default();
//! assert_eq!(backoff.min_delay(), Duration::from_secs(1));
//! // The n-th retry waits between base and twice the base (jitter), base = 1 s · 2^(n-1),
//! // capped at 5 minutes.
//! let third = backoff.delay(3);
//! assert!(third >= Duration::from_secs(4) && third < Duration::from_secs(8));
//! assert!(backoff.delay(30) < Duration::from_secs(600));
//! ```

use std::time::Duration;

use backon::{BackoffBuilder as _, ExponentialBuilder};

/// How a relay orders publication.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Ordering {
    /// The default: the rows of one aggregate are published in `seq` order, one at a time
    /// in flight; an aggregate whose earliest pending row waits (backoff, or dead under
    /// [`DeadLetterPolicy::Block`]) holds its later rows back while other aggregates go on.
    /// Relays share the work by partition, each partition owned by one live relay at a time
    /// through a lease.
    #[default]
    PerAggregate,
    /// No order: any relay claims any due row (`FOR UPDATE SKIP LOCKED` batches), a failed
    /// row never holds anything back. For events whose consumers do not care about order;
    /// the most throughput with many relays.
    Unordered,
}

impl Ordering {
    /// `per-aggregate` or `unordered`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::PerAggregate => "per-aggregate",
            Self::Unordered => "unordered",
        }
    }
}

/// What a dead-lettered row does to the later rows of its aggregate (with
/// [`Ordering::PerAggregate`]; with [`Ordering::Unordered`] nothing waits anyway).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum DeadLetterPolicy {
    /// The default: the aggregate's later rows wait until an operator requeues or skips
    /// the dead row. Consumers never see an aggregate's events with a gap.
    #[default]
    Block,
    /// The aggregate's later rows go on; the dead row stays for an operator to inspect.
    Skip,
}

impl DeadLetterPolicy {
    /// `block` or `skip`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Block => "block",
            Self::Skip => "skip",
        }
    }
}

/// Default first retry delay: 1 s.
pub const DEFAULT_MIN_DELAY: Duration = Duration::from_secs(1);
/// Default longest retry delay (before jitter): 5 minutes.
pub const DEFAULT_MAX_DELAY: Duration = Duration::from_secs(300);
/// Default growth factor between retries: 2.
pub const DEFAULT_FACTOR: f32 = 2.0;

/// Exponential backoff with jitter between the attempts of one row, computed by
/// [`backon`]'s exponential strategy.
///
/// The delay after the `n`-th failed attempt is `min(min_delay · factor^(n-1), max_delay)`
/// plus, with jitter (the default), a random amount below that base: the retries of rows
/// that failed together (a broker outage) spread out instead of hitting the broker at
/// once. Defaults: 1 s, factor 2, at most 5 minutes, jitter on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    min_delay: Duration,
    max_delay: Duration,
    factor: f32,
    jitter: bool,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            min_delay: DEFAULT_MIN_DELAY,
            max_delay: DEFAULT_MAX_DELAY,
            factor: DEFAULT_FACTOR,
            jitter: true,
        }
    }
}

impl Backoff {
    /// The defaults (see the type's documentation).
    pub fn new() -> Self {
        Self::default()
    }

    /// The delay before the first retry (default 1 s).
    #[must_use]
    pub fn with_min_delay(mut self, delay: Duration) -> Self {
        self.min_delay = delay;
        self
    }

    /// The longest delay before jitter (default 5 minutes).
    #[must_use]
    pub fn with_max_delay(mut self, delay: Duration) -> Self {
        self.max_delay = delay;
        self
    }

    /// The growth factor between retries (default 2; values below 1 are treated as 1).
    #[must_use]
    pub fn with_factor(mut self, factor: f32) -> Self {
        self.factor = factor;
        self
    }

    /// Whether a random jitter is added (default `true`). Tests that compare exact times
    /// turn it off.
    #[must_use]
    pub fn with_jitter(mut self, jitter: bool) -> Self {
        self.jitter = jitter;
        self
    }

    /// The delay before the first retry.
    pub fn min_delay(&self) -> Duration {
        self.min_delay
    }

    /// The longest delay before jitter.
    pub fn max_delay(&self) -> Duration {
        self.max_delay
    }

    /// The growth factor.
    pub fn factor(&self) -> f32 {
        self.factor
    }

    /// Whether jitter is added.
    pub fn jitter(&self) -> bool {
        self.jitter
    }

    /// The delay after `failed_attempts` failed attempts (1 = the first failure).
    pub fn delay(&self, failed_attempts: u32) -> Duration {
        let mut builder = ExponentialBuilder::new()
            .with_min_delay(self.min_delay)
            .with_max_delay(self.max_delay.max(self.min_delay))
            .with_factor(if self.factor.is_finite() {
                self.factor.max(1.0)
            } else {
                DEFAULT_FACTOR
            })
            .without_max_times();
        if self.jitter {
            builder = builder.with_jitter();
        }
        // Past the cap the base stops growing: no need to iterate further.
        let steps = usize::try_from(failed_attempts.clamp(1, 64)).unwrap_or(64);
        let delay = builder.build().nth(steps - 1).unwrap_or(self.max_delay);
        // backon computes in f32: truncate its rounding noise to whole microseconds (the
        // precision timestamps are stored with).
        Duration::from_micros(u64::try_from(delay.as_micros()).unwrap_or(u64::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_and_caps_without_jitter() {
        let backoff = Backoff::new()
            .with_jitter(false)
            .with_min_delay(Duration::from_millis(100))
            .with_max_delay(Duration::from_secs(1));
        let delays: Vec<_> = (1..=6).map(|n| backoff.delay(n)).collect();
        assert_eq!(
            delays,
            [100, 200, 400, 800, 1000, 1000].map(Duration::from_millis)
        );
        assert_eq!(backoff.delay(0), Duration::from_millis(100));
        assert_eq!(backoff.delay(u32::MAX), Duration::from_secs(1));
    }

    #[test]
    fn jitter_stays_below_twice_the_base() {
        let backoff = Backoff::new();
        for n in 1..10 {
            let base = Backoff::new().with_jitter(false).delay(n);
            let delay = backoff.delay(n);
            assert!(
                delay >= base && delay < base * 2,
                "{n}: {delay:?} vs {base:?}"
            );
        }
    }
}
