//! What a [`Consumer`](super::Consumer) reports: the outcome of a delivery, why a message
//! was parked or dead-lettered, its errors, and its metric names.

use sea_orm::DbErr;
use std::time::Duration;

#[cfg(doc)]
use outbox_core::policy::DeadLetterPolicy;

/// Metric names of consumers (labels: `consumer`, and `reason` for dead letters).
pub mod metric {
    /// Counter: messages applied.
    pub const APPLIED: &str = "outbox_inbox_applied_total";
    /// Counter: duplicates skipped.
    pub const DUPLICATES: &str = "outbox_inbox_duplicates_total";
    /// Counter: messages of event types the consumer does not handle, ignored.
    pub const IGNORED: &str = "outbox_inbox_ignored_total";
    /// Counter: failed handler attempts.
    pub const HANDLER_FAILURES: &str = "outbox_inbox_handler_failures_total";
    /// Counter: messages dead-lettered, by `reason`.
    pub const DEAD_LETTERED: &str = "outbox_inbox_dead_lettered_total";
    /// Histogram: seconds per handled message (all attempts).
    pub const HANDLE_DURATION: &str = "outbox_inbox_handle_duration_seconds";
    /// Counter: messages parked in the consumer's database, by `reason` (`retrying`: the
    /// handler failed and attempts remain; `behind`: an earlier message of the aggregate is
    /// parked or dead-lettered).
    pub const PARKED: &str = "outbox_inbox_parked_total";
    /// Gauge: aggregates held — with parked messages, or (under `Block`) a dead letter.
    pub const HELD_AGGREGATES: &str = "outbox_inbox_held_aggregates";
    /// Gauge: partitions a [partitioned](crate::inbox::partitioned) consumer instance
    /// runs, by `consumer`.
    pub const PARTITIONS_OWNED: &str = "outbox_consumer_partitions_owned";
}

/// What a consumer does with a message of an event type it has no handler for (and that
/// is not another version of a contract it handles: that is always dead-lettered).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum UnknownEvents {
    /// Ignore it, count it ([`metric::IGNORED`]) and log its id. The default: a topic often
    /// carries event types a consumer does not care about.
    #[default]
    Ignore,
    /// Dead-letter it (`unknown_event_type`).
    DeadLetter,
}

/// Why a message went to the consumer's dead-letter table.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeadLetterReason {
    /// Headers, body or payload could not be decoded: retrying cannot help.
    Malformed {
        /// The decode error.
        error: String,
    },
    /// Another version of a contract the consumer handles, with no handler or upcaster.
    UnsupportedVersion {
        /// The message's event type.
        event_type: String,
        /// The event types the consumer handles.
        handled: Vec<String>,
    },
    /// An event type the consumer does not handle ([`UnknownEvents::DeadLetter`]).
    UnknownEventType {
        /// The message's event type.
        event_type: String,
    },
    /// The handler failed on every attempt.
    HandlerFailed {
        /// Attempts made.
        attempts: u32,
        /// The last error.
        error: String,
    },
}

impl DeadLetterReason {
    /// The value of the dead-letter table's `reason` column.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Malformed { .. } => "malformed",
            Self::UnsupportedVersion { .. } => "unsupported_version",
            Self::UnknownEventType { .. } => "unknown_event_type",
            Self::HandlerFailed { .. } => "handler_failed",
        }
    }

    pub(crate) fn error(&self) -> String {
        match self {
            Self::Malformed { error } | Self::HandlerFailed { error, .. } => error.clone(),
            Self::UnsupportedVersion {
                event_type,
                handled,
            } => format!(
                "no handler for version `{event_type}`; handled: {}",
                handled.join(", ")
            ),
            Self::UnknownEventType { event_type } => {
                format!("no handler for event type `{event_type}`")
            }
        }
    }

    pub(crate) fn attempts(&self) -> u32 {
        match self {
            Self::HandlerFailed { attempts, .. } => *attempts,
            _ => 0,
        }
    }
}

/// Why a message was parked ([`Delivered::Parked`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ParkReason {
    /// The handler failed and attempts remain: the next one comes after the backoff.
    Retrying {
        /// Attempts made.
        attempts: u32,
        /// The backoff before the next attempt.
        after: Duration,
        /// The handler's error.
        error: String,
    },
    /// An earlier message of its aggregate is parked, or dead-lettered under
    /// [`DeadLetterPolicy::Block`]: it waits behind it.
    Behind,
}

/// What a consumer did with a message. Every variant means the message is settled —
/// applied, skipped, or stored in the consumer's database — so acknowledge it to the
/// broker.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Delivered {
    /// The handler ran and committed.
    Applied {
        /// Attempts it took (1 = first try).
        attempts: u32,
    },
    /// Already applied by this consumer: skipped.
    Duplicate,
    /// No handler for its event type; ignored ([`UnknownEvents::Ignore`]).
    Ignored {
        /// The event type.
        event_type: String,
    },
    /// Moved to the dead-letter table.
    DeadLettered {
        /// The dead letter's id.
        id: i64,
        /// Why.
        reason: DeadLetterReason,
    },
    /// Parked in the consumer's database ([`super::parked`]); the consumer's redelivery loop
    /// applies it in its aggregate's order.
    Parked {
        /// Why.
        reason: ParkReason,
    },
}

/// A consumer could not settle a message (the dead-letter insert itself failed): do not
/// acknowledge it; it must be delivered again.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConsumerError {
    /// The database failed.
    #[error("consumer `{consumer}`: database error while settling message: {source}")]
    Database {
        /// The consumer.
        consumer: String,
        /// The error.
        #[source]
        source: DbErr,
    },
    /// A [partitioned](crate::inbox::partitioned) consumer's runner lost the lease of the
    /// message's partition: nothing was committed; the new owner applies the message (do
    /// not acknowledge it).
    #[error("consumer `{consumer}`: partition lease `{lease}` lost")]
    LeaseLost {
        /// The consumer.
        consumer: String,
        /// The lease.
        lease: String,
    },
}
