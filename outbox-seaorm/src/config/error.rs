//! [`ConfigError`]: why [`OutboxBuilder::build`](super::OutboxBuilder::build) rejected a
//! setting.

use outbox_core::name::{EventTypeError, WorkerKeyError};

#[cfg(doc)]
use super::{Job, OutboxBuilder};
use crate::table::{IdentifierProblem, InvalidTableName};

/// A setting of [`OutboxBuilder`] was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A table name is not a valid SQL identifier.
    #[error(transparent)]
    TableName(#[from] InvalidTableName),
    /// The outbox and inbox tables have the same name.
    #[error("the outbox and inbox tables are both named `{name}`")]
    SameTable {
        /// The shared name.
        name: String,
    },
    /// The number of partitions is 0 or above `i32::MAX`.
    #[error("partitions must be between 1 and {}, got {value}", i32::MAX)]
    Partitions {
        /// The rejected value.
        value: u32,
    },
    /// A chunk limit is 0.
    #[error("`{setting}` must be at least 1")]
    ZeroChunkLimit {
        /// `chunk_rows` or `chunk_bytes`.
        setting: &'static str,
    },
    /// The `NOTIFY` channel is not a valid identifier.
    #[error("invalid NOTIFY channel {name:?}: {reason}")]
    NotifyChannel {
        /// The rejected channel.
        name: String,
        /// What is wrong with it.
        reason: IdentifierProblem,
    },
    /// A [`Job`]'s event type is not a versioned contract name.
    #[error("invalid job event type {event_type:?}: {reason}")]
    JobEventType {
        /// The rejected event type.
        event_type: String,
        /// Which rule of the grammar it breaks.
        reason: EventTypeError,
    },
    /// A [`Job`]'s worker key breaks the worker-key grammar.
    #[error("invalid worker key {key:?} for job `{event_type}`: {reason}")]
    WorkerKey {
        /// The job's event type.
        event_type: String,
        /// The rejected key.
        key: String,
        /// Which rule it breaks.
        reason: WorkerKeyError,
    },
    /// The write mode's settings are invalid (a message prefix).
    #[error("invalid write mode: {reason}")]
    WriteMode {
        /// What is wrong.
        reason: String,
    },
    /// Two [`Job`] entries for one event type.
    #[error("two job entries for event type `{event_type}`")]
    DuplicateJob {
        /// The event type.
        event_type: String,
    },
    /// A unique job's window is zero: it would keep nothing out.
    #[error("job `{event_type}`: a uniqueness window must be above zero")]
    UniqueWindow {
        /// The job's event type.
        event_type: String,
    },
    /// Unique jobs under message mode: whether a job is still pending is read in the
    /// outbox table, which message mode does not have.
    #[error("job `{event_type}` is unique, which message mode cannot check (no outbox table)")]
    UniqueInMessageMode {
        /// The job's event type.
        event_type: String,
    },
    /// A job's priority is above [`MAX_PRIORITY`](super::MAX_PRIORITY).
    #[error("job `{event_type}`: priority {priority} is above the lowest, 9")]
    Priority {
        /// The job's event type.
        event_type: String,
        /// The rejected priority.
        priority: u8,
    },
    /// A job with a priority but no worker key: priorities order a keyed relay's claim.
    #[error("job `{event_type}` has a priority but no worker key to be claimed by")]
    PriorityWithoutWorkerKey {
        /// The job's event type.
        event_type: String,
    },
    /// A worker key's concurrency limit
    /// ([`OutboxBuilder::worker_key_limit`](super::OutboxBuilder::worker_key_limit)) is zero
    /// or above [`MAX_WORKER_KEY_LIMIT`](super::MAX_WORKER_KEY_LIMIT).
    #[error(
        "worker key `{key}`: a concurrency limit of {limit} is outside 1..={max}",
        max = super::MAX_WORKER_KEY_LIMIT
    )]
    WorkerKeyLimit {
        /// The worker key.
        key: String,
        /// The rejected limit.
        limit: u32,
    },
    /// A concurrency limit names a worker key that breaks the key grammar.
    #[error("invalid worker key {key:?} in a concurrency limit: {reason}")]
    LimitWorkerKey {
        /// The rejected key.
        key: String,
        /// Which rule it breaks.
        reason: WorkerKeyError,
    },
    /// Concurrency limits under message mode: only the polling relay claims rows, and
    /// message mode has no outbox table to claim from.
    #[error("worker key `{key}`: message mode has no claim to limit")]
    LimitInMessageMode {
        /// The worker key.
        key: String,
    },
    /// A [`Periodic`](super::Periodic) job's name breaks the key grammar
    /// (`[a-z0-9][a-z0-9._-]*`, at most 100 characters).
    #[error("invalid periodic job name {name:?}: {reason}")]
    PeriodicName {
        /// The rejected name.
        name: String,
        /// Which rule it breaks.
        reason: WorkerKeyError,
    },
    /// A periodic job's cron expression does not parse.
    #[error("periodic job `{name}`: the schedule {schedule:?} does not parse: {reason}")]
    Cron {
        /// The periodic job.
        name: String,
        /// The expression.
        schedule: String,
        /// The parser's message.
        reason: String,
    },
    /// A periodic job's schedule names no time from now on (`0 0 30 2 *`: February 30).
    #[error("periodic job `{name}`: the schedule {schedule:?} never runs")]
    CronNeverRuns {
        /// The periodic job.
        name: String,
        /// The expression.
        schedule: String,
    },
    /// Two periodic jobs of one name.
    #[error("two periodic jobs named `{name}`")]
    DuplicatePeriodic {
        /// The name.
        name: String,
    },
    /// Periodic jobs under message mode: their runs are written by the relays, into the
    /// outbox table, which message mode does not have.
    #[error("periodic job `{name}`: message mode has no outbox table to enqueue its runs in")]
    PeriodicInMessageMode {
        /// The periodic job.
        name: String,
    },
    /// An extra metric label ([`OutboxBuilder::metric_label`]) is rejected.
    #[error("invalid metric label `{key}`: {problem}")]
    MetricLabel {
        /// The rejected key.
        key: String,
        /// What is wrong with it.
        problem: &'static str,
    },
}
