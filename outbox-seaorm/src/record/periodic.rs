//! [`PeriodicRecord`]: a periodic job's row (see [`crate::periodic`]).

use chrono::{DateTime, Utc};
use uuid::Uuid;

/// A periodic job as the relays left it: its schedule, next run and last run.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PeriodicRecord {
    /// The job's name ([`Periodic::name`](crate::Periodic::name)).
    pub name: String,
    /// The cron expression its next run was computed from.
    pub schedule: String,
    /// When its next run is due.
    pub next_run_at: DateTime<Utc>,
    /// The time of the last run enqueued; `None` before the first.
    pub last_run_at: Option<DateTime<Utc>>,
    /// The message id of the last run enqueued (its outbox row).
    pub last_message_id: Option<Uuid>,
    /// When a relay last wrote the row.
    pub updated_at: DateTime<Utc>,
}
