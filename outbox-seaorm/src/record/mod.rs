//! Reading outbox rows back: [`OutboxRecord`]. Read-only — rows are written only by
//! [`UnitOfWork::commit`](crate::UnitOfWork::commit).
//!
//! Queries select every column under its standard name (`"id" AS "message_id"` with the
//! Debezium naming), so one [`FromQueryResult`] implementation reads both namings on every
//! backend ([`OutboxRecord::select`], [`OutboxRecord::list`], [`OutboxRecord::count`]).

use chrono::{DateTime, Utc};
use outbox_core::Envelope;
#[cfg(doc)]
use sea_orm::FromQueryResult;

use crate::status::OutboxStatus;

pub(crate) mod dead_letter;
pub mod log_dead_letter;
pub mod log_slot;
pub(crate) mod operator_action;
pub(crate) mod parked;
mod periodic;
mod scheduled;
mod unique_key;

pub use periodic::PeriodicRecord;
pub use scheduled::ScheduledRecord;
pub use unique_key::UniqueKeyRecord;

/// One outbox row: the envelope and the relay's bookkeeping.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct OutboxRecord {
    /// Insert order.
    pub seq: i64,
    /// The envelope, as written.
    pub envelope: Envelope,
    /// `fnv1a_64(aggregate_id) % partitions` at insert time.
    pub partition: i32,
    /// Publication state.
    pub status: OutboxStatus,
    /// Failed publication attempts.
    pub attempts: i32,
    /// Earliest next publication attempt.
    pub next_attempt_at: DateTime<Utc>,
    /// Error of the last failed attempt.
    pub last_error: Option<String>,
    /// When it was published.
    pub published_at: Option<DateTime<Utc>>,
    /// When the row was written.
    pub created_at: DateTime<Utc>,
    /// The worker key (job-queue mode, see [`crate::job`]); `None` for event types without
    /// a job entry.
    pub worker_key: Option<String>,
    /// Whether a failed attempt may be retried (`false`: the first failure marks the row
    /// `failed`).
    pub retryable: bool,
}
