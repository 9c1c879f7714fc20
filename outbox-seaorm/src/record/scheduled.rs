//! [`ScheduledRecord`]: a row of the scheduled table, waiting for its due time (see
//! [`crate::schedule`]).

use chrono::{DateTime, Utc};

use super::OutboxRecord;

/// A scheduled row: the outbox row it becomes when due (`status` is
/// [`Scheduled`](crate::schema::OutboxStatus::Scheduled), `next_attempt_at` the due time,
/// `seq` the scheduled table's), and its key.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ScheduledRecord {
    /// The row.
    pub record: OutboxRecord,
    /// The key it was raised with ([`Schedule::key`](outbox_core::schedule::Schedule::key)).
    pub key: Option<String>,
}

impl ScheduledRecord {
    /// When it is due.
    pub fn due_at(&self) -> DateTime<Utc> {
        self.record.next_attempt_at
    }
}
