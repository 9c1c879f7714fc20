//! The plain types of a log relay dead letter (`<outbox>_log_dead_letters`, see the `log`
//! module of [`crate::relay`]).

use chrono::{DateTime, Utc};
use outbox_core::Envelope;
use uuid::Uuid;

/// The state of a log relay dead letter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum LogDeadLetterStatus {
    /// Given up on (a permanent rejection, `max_attempts` transient failures, an unreadable
    /// row): waits for an operator, and under `DeadLetterPolicy::Block` holds its aggregate.
    Dead,
    /// A later event of a held aggregate, parked in order behind the dead one.
    Parked,
    /// An operator asked for a new attempt: the active log relay publishes it, then the
    /// events parked behind it.
    Requeued,
    /// An operator gave it up, with a reason: it no longer holds its aggregate.
    Skipped,
    /// Published after a requeue, or after the aggregate was released.
    Published,
}

impl LogDeadLetterStatus {
    /// The stored value.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Dead => "dead",
            Self::Parked => "parked",
            Self::Requeued => "requeued",
            Self::Skipped => "skipped",
            Self::Published => "published",
        }
    }

    /// Parses a stored value.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "dead" => Some(Self::Dead),
            "parked" => Some(Self::Parked),
            "requeued" => Some(Self::Requeued),
            "skipped" => Some(Self::Skipped),
            "published" => Some(Self::Published),
            _ => None,
        }
    }

    /// Whether an entry in this state holds the later events of its aggregate (under
    /// `DeadLetterPolicy::Block`): `dead`, `parked` and `requeued`.
    pub const fn holds_aggregate(self) -> bool {
        matches!(self, Self::Dead | Self::Parked | Self::Requeued)
    }
}

impl std::fmt::Display for LogDeadLetterStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One entry of the log relay's dead-letter table.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[non_exhaustive]
pub struct LogDeadLetter {
    /// The entry's id (insert order).
    pub id: i64,
    /// The slot whose relay wrote it.
    pub slot: String,
    /// The message id, when the event could be read.
    pub message_id: Option<Uuid>,
    /// The event type (as written, at most 255 characters).
    pub event_type: String,
    /// The aggregate type.
    pub aggregate_type: String,
    /// The aggregate id.
    pub aggregate_id: String,
    /// The envelope, when the event could be read.
    pub envelope: Option<Envelope>,
    /// The last error (bounded, see [`crate::limits::MAX_ERROR_CHARS`]).
    pub error: String,
    /// Failed attempts.
    pub attempts: i32,
    /// The state.
    pub status: LogDeadLetterStatus,
    /// When it was written.
    pub dead_at: DateTime<Utc>,
    /// When an operator or the relay last changed it.
    pub resolved_at: Option<DateTime<Utc>>,
    /// Who requeued or skipped it.
    pub resolved_by: Option<String>,
    /// Why it was skipped.
    pub reason: Option<String>,
}
