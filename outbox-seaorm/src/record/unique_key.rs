//! [`UniqueKeyRecord`]: a unique job's key (see [`Unique`](crate::job::Unique)).

use chrono::{DateTime, Utc};
use uuid::Uuid;

/// A key of `<outbox>_unique`: which job took it, and whether it still keeps a second job
/// of its key out.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct UniqueKeyRecord {
    /// The job's event type.
    pub event_type: String,
    /// The key: the aggregate id, or the SHA-256 of the job's arguments (hex).
    pub key: String,
    /// The message id of the job that took it.
    pub message_id: Uuid,
    /// Until when a windowed key holds; `None`: while its job waits.
    pub expires_at: Option<DateTime<Utc>>,
    /// When the job took the key.
    pub created_at: DateTime<Utc>,
    /// Whether the key holds now: its window has not passed, or (without a window) its job
    /// is still pending or scheduled. A key that no longer holds is taken over by the next
    /// job of that key.
    pub holding: bool,
}
