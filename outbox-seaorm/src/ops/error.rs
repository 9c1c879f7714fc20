//! [`OpsError`]: why an operation failed, and the check of an operator's input.

use sea_orm::DbErr;
use uuid::Uuid;

use crate::record::operator_action::OperatorActionKind;
use crate::status::OutboxStatus;

/// Why an operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpsError {
    /// The database failed; nothing changed.
    #[error("database error: {0}")]
    Database(#[from] DbErr),
    /// No outbox row has this message id.
    #[error("no outbox row has message id {message_id}")]
    NotFound {
        /// The message id.
        message_id: Uuid,
    },
    /// The row is not in a status the action applies to.
    #[error("message {message_id} is {status}; {action} applies to {expected} rows")]
    WrongStatus {
        /// The message id.
        message_id: Uuid,
        /// Its status.
        status: OutboxStatus,
        /// The action.
        action: OperatorActionKind,
        /// The statuses the action applies to.
        expected: &'static str,
    },
    /// `skip` or `cancel` without a reason.
    #[error("skip and cancel need a reason")]
    MissingReason,
    /// The message is not waiting in the scheduled table: it fell due and is in the outbox
    /// table (pending, published, …), where cancelling it is a
    /// [`skip`](super::Operations::skip).
    #[error(
        "message {message_id} is not scheduled: it is due already and {status} in the outbox          table (skip it instead of cancelling it)"
    )]
    NotScheduled {
        /// The message id.
        message_id: Uuid,
        /// Its status in the outbox table.
        status: OutboxStatus,
    },
    /// No scheduled row has this key (none was raised with it, or all fell due already).
    #[error("no scheduled row has key {key:?}")]
    NothingScheduled {
        /// The key.
        key: String,
    },
    /// A new due time later than the outbox stores
    /// ([`MAX_DUE`](crate::limits::MAX_DUE)).
    #[error("due time {at} is later than {max}, the latest time the outbox stores")]
    DueOutOfRange {
        /// The time asked for.
        at: chrono::DateTime<chrono::Utc>,
        /// The limit.
        max: chrono::DateTime<chrono::Utc>,
    },
    /// An operator's input is longer than its column keeps.
    #[error("{field} is {length} characters long, over the limit of {max}")]
    InputTooLong {
        /// `actor` or `reason`.
        field: &'static str,
        /// Its length in characters.
        length: usize,
        /// The limit ([`MAX_ACTOR_CHARS`](crate::limits::MAX_ACTOR_CHARS),
        /// [`MAX_REASON_CHARS`](crate::limits::MAX_REASON_CHARS)).
        max: usize,
    },
    /// No consumer dead letter has this id.
    #[error("no consumer dead letter has id {id}")]
    DeadLetterNotFound {
        /// The id.
        id: i64,
    },
}

/// Checks an operator's name and reason against their columns.
pub(super) fn check_input(actor: &str, reason: Option<&str>) -> Result<(), OpsError> {
    let check = |field, text: &str, max| {
        let length = text.chars().count();
        if length > max {
            return Err(OpsError::InputTooLong { field, length, max });
        }
        Ok(())
    };
    check("actor", actor, crate::limits::MAX_ACTOR_CHARS)?;
    if let Some(reason) = reason {
        check("reason", reason, crate::limits::MAX_REASON_CHARS)?;
    }
    Ok(())
}
