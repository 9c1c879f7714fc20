//! Where `occurred_at` and every other timestamp of the framework comes from.
//!
//! Production code uses [`SystemClock`]; tests inject a [`ManualClock`] to make time
//! deterministic. Both return microsecond precision, the precision PostgreSQL's `timestamptz`
//! and MariaDB's `DATETIME(6)` store, so a timestamp read back from a table equals the one
//! written.

use std::fmt::Debug;
use std::sync::Mutex;

use chrono::{DateTime, SubsecRound, TimeDelta, Utc};

/// A source of the current time.
pub trait Clock: Send + Sync + Debug {
    /// The current time, with microsecond precision.
    fn now(&self) -> DateTime<Utc>;
}

/// The system clock, truncated to microseconds.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now().trunc_subsecs(6)
    }
}

/// A clock that only moves when told to. For tests and demos.
///
/// ```
/// use outbox_kernel::clock::{Clock, ManualClock};
/// use chrono::TimeDelta;
///
/// let clock = ManualClock::starting_at("2026-01-01T00:00:00Z".parse()?);
/// clock.advance(TimeDelta::seconds(90));
/// assert_eq!(clock.now().to_rfc3339(), "2026-01-01T00:01:30+00:00");
/// # Ok::<(), chrono::ParseError>(())
/// ```
#[derive(Debug)]
pub struct ManualClock {
    now: Mutex<DateTime<Utc>>,
}

impl ManualClock {
    /// A clock showing `at` (truncated to microseconds).
    pub fn starting_at(at: DateTime<Utc>) -> Self {
        Self {
            now: Mutex::new(at.trunc_subsecs(6)),
        }
    }

    /// Sets the time.
    pub fn set(&self, at: DateTime<Utc>) {
        *self
            .now
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = at.trunc_subsecs(6);
    }

    /// Moves the time forward (or backward, with a negative delta).
    pub fn advance(&self, by: TimeDelta) {
        let mut now = self
            .now
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        *now = (*now + by).trunc_subsecs(6);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self
            .now
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
