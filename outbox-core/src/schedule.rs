//! When an event is due: [`Schedule`], what [`RaiseLater`](crate::raise::RaiseLater) and
//! [`ContractSink::emit_scheduled`](crate::mapping::ContractSink::emit_scheduled) take.
//!
//! A schedule is plain data: a time (`at`) or a delay from the moment the event is raised
//! (`after`), and optionally a **key** of the user's choosing (`"order-42/payment-timeout"`)
//! by which an operator or the service cancels or reschedules the event before it is due,
//! without knowing its message id.
//!
//! ```
//! use std::time::Duration;
//! use outbox_kernel::schedule::{Due, Schedule};
//!
//! let timeout = Schedule::after(Duration::from_secs(30 * 60)).key("order-42/payment-timeout");
//! assert_eq!(timeout.due(), Due::After(Duration::from_secs(1800)));
//! assert_eq!(timeout.key_str(), Some("order-42/payment-timeout"));
//!
//! let at = "2026-12-08T09:00:00Z".parse().unwrap();
//! assert_eq!(Schedule::at(at).due(), Due::At(at));
//! ```
//!
//! Whether a due time can be stored (a time beyond what the database's column holds), and
//! whether a key fits its column, is checked when the unit of work commits: a typed error
//! then, never later.

use std::time::Duration;

use chrono::{DateTime, Utc};

/// When a scheduled event is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Due {
    /// At this instant. A time in the past (or now) makes the event due at once.
    At(DateTime<Utc>),
    /// This long after the event was raised (the unit of work's clock at the raise).
    After(Duration),
}

impl Due {
    /// The instant this is due, for an event raised at `raised_at`; `None` when it does not
    /// fit a timestamp.
    pub fn resolve(self, raised_at: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            Self::At(at) => Some(at),
            Self::After(delay) => {
                let delay = chrono::TimeDelta::from_std(delay).ok()?;
                raised_at.checked_add_signed(delay)
            }
        }
    }
}

/// When an event is due, and the key that names it for cancelling and rescheduling.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Schedule {
    due: Due,
    key: Option<String>,
}

impl Schedule {
    /// Due at `at` (at once when `at` is not in the future).
    pub fn at(at: DateTime<Utc>) -> Self {
        Self {
            due: Due::At(at),
            key: None,
        }
    }

    /// Due `delay` after the event is raised.
    pub fn after(delay: Duration) -> Self {
        Self {
            due: Due::After(delay),
            key: None,
        }
    }

    /// Names the scheduled event with `key`: cancel or reschedule it by this key. Keys are
    /// not unique: several events may share one, and an action by key acts on all of them.
    /// Checked at commit: not empty, at most 255 characters.
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// When the event is due.
    pub fn due(&self) -> Due {
        self.due
    }

    /// The key, if one was given.
    pub fn key_str(&self) -> Option<&str> {
        self.key.as_deref()
    }
}

impl From<DateTime<Utc>> for Schedule {
    fn from(at: DateTime<Utc>) -> Self {
        Self::at(at)
    }
}

impl From<Duration> for Schedule {
    fn from(delay: Duration) -> Self {
        Self::after(delay)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delay_resolves_from_the_raise_and_overflows_to_none() {
        let raised: DateTime<Utc> = "2026-12-07T10:00:00Z".parse().expect("time");
        assert_eq!(
            Due::After(Duration::from_secs(90)).resolve(raised),
            Some("2026-12-07T10:01:30Z".parse().expect("time"))
        );
        assert_eq!(Due::After(Duration::MAX).resolve(raised), None);
        assert_eq!(
            Due::At(raised).resolve(DateTime::<Utc>::MAX_UTC),
            Some(raised)
        );
    }
}
