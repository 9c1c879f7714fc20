//! [`TestKitError`]: why the test kit could not be built or could not reach idle.

use std::time::Duration;

use outbox_core::DecodeError;
use sea_orm::DbErr;
use uuid::Uuid;

use super::{Crash, DrainReport};
use crate::inbox::{ConsumerConfigError, ConsumerError};
use crate::relay::{RelayConfigError, RelayError};

/// Why [`TestKit`](super::TestKit) failed. The variants that end a drain carry what the
/// drain did until then.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TestKitError {
    /// The relay's settings are invalid.
    #[error("test kit: relay configuration: {0}")]
    RelayConfig(#[from] RelayConfigError),
    /// A consumer's settings are invalid.
    #[error("test kit: consumer configuration: {0}")]
    ConsumerConfig(#[from] ConsumerConfigError),
    /// The same consumer name was given twice.
    #[error("test kit: consumer `{name}` is configured twice")]
    DuplicateConsumer {
        /// The name.
        name: String,
    },
    /// A crash names a consumer the kit does not run.
    #[error("test kit: no consumer `{name}` (the kit runs {configured:?})")]
    UnknownConsumer {
        /// The name.
        name: String,
        /// The consumers the kit runs.
        configured: Vec<String>,
    },
    /// The relay failed on a database error.
    #[error("test kit: {0}")]
    Relay(#[from] RelayError),
    /// A consumer could not settle a message (its database failed).
    #[error("test kit: {0}")]
    Consumer(#[from] ConsumerError),
    /// A consumer's redelivery of parked or requeued messages failed.
    #[error("test kit: consumer `{consumer}`: redelivery failed: {source}")]
    Redelivery {
        /// The consumer.
        consumer: String,
        /// The error.
        #[source]
        source: DbErr,
    },
    /// One step (a relay drain, one delivery, one redelivery round) did not finish in time:
    /// a handler that waits on something that never comes, or a lock held elsewhere.
    #[error("test kit: {step} did not finish within {after:?}")]
    Timeout {
        /// What was running.
        step: String,
        /// The kit's step timeout.
        after: Duration,
    },
    /// Still busy after the kit's round limit: typically handlers that raise events which
    /// trigger each other forever.
    #[error("test kit: not idle after {rounds} rounds (handlers raising events forever?)")]
    NotIdle {
        /// The round limit.
        rounds: usize,
        /// What the drain did.
        report: Box<DrainReport>,
    },
    /// Idle, but crashes were armed that no relay batch or delivery reached: the test did
    /// not exercise what it meant to.
    #[error("test kit: idle, but armed crashes were never reached: {crashes:?}")]
    CrashesNotReached {
        /// The crashes still armed (they stay armed).
        crashes: Vec<Crash>,
        /// What the drain did.
        report: Box<DrainReport>,
    },
    /// A published message of the asked event type does not decode as its contract.
    #[error("test kit: published message {message_id} does not decode as {event_type}: {source}")]
    Decode {
        /// The message.
        message_id: Uuid,
        /// The contract's event type.
        event_type: &'static str,
        /// Why.
        #[source]
        source: DecodeError,
    },
}
