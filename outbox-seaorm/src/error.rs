//! Errors of a unit of work.

use std::error::Error as StdError;
use std::fmt;

use outbox_core::mapping::MapError;
use sea_orm::DbErr;
use uuid::Uuid;

/// Why [`UnitOfWork::commit`](crate::UnitOfWork::commit) failed.
///
/// Every variant except [`Commit`](Self::Commit) means the transaction was rolled back:
/// neither the business rows nor any outbox row were written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CommitError {
    /// The mapper failed on a raised domain event.
    #[error("mapping domain event #{index} (a `{event_type}`) to contracts failed: {source}")]
    Map {
        /// Position of the event among those raised in the unit of work (from 0).
        index: usize,
        /// The Rust type of the domain event.
        event_type: &'static str,
        /// The mapper's error.
        #[source]
        source: MapError,
    },
    /// A key column value is longer than its column allows (see
    /// [`schema::MAX_KEY_CHARS`](crate::schema::MAX_KEY_CHARS)).
    #[error(
        "`{field}` of `{event_type}` (message {message_id}) is {length} characters long, \
         over the column's {max}"
    )]
    FieldTooLong {
        /// The envelope field.
        field: &'static str,
        /// The contract's event type.
        event_type: String,
        /// The envelope's message id.
        message_id: Uuid,
        /// Its length in characters.
        length: usize,
        /// The limit.
        max: usize,
    },
    /// Writing the outbox rows failed (with
    /// [`PostgresWakeup::InTransaction`](crate::PostgresWakeup::InTransaction), the last
    /// `INSERT` also runs the `NOTIFY`); the transaction was rolled back.
    #[error("writing the outbox rows failed, the unit of work was rolled back: {0}")]
    Database(#[source] DbErr),
    /// A statement run through the unit of work failed earlier (and the caller went on to
    /// commit): the unit of work rolled back instead, business rows and events alike. Run a
    /// statement that may fail on purpose in a savepoint (`uow.begin()`).
    #[error(
        "a statement run through the unit of work failed, so it was rolled back instead of \
         committed: {error}"
    )]
    StatementFailed {
        /// The first failed statement's error.
        error: String,
    },
    /// The outbox's [`WriteMode`](crate::config::WriteMode) writes what only a log relay
    /// reads, and the database has none for it ([`WriteMode::runs_on`](crate::config::WriteMode::runs_on)):
    /// message mode needs PostgreSQL; `remove_after_insert` PostgreSQL or MariaDB. Nothing was
    /// written.
    #[error(
        "write mode `{mode}` cannot run on {backend}: message mode needs PostgreSQL, \
         remove_after_insert a log relay (PostgreSQL or MariaDB); use WriteMode::table() on \
         this database"
    )]
    WriteModeUnsupported {
        /// The write mode.
        mode: &'static str,
        /// The database found.
        backend: &'static str,
    },
    /// An event raised for later cannot be stored as its schedule asks (see
    /// [`crate::schedule`]); the transaction was rolled back and nothing was written.
    #[error("the schedule of `{event_type}` (message {message_id}) {problem}")]
    Schedule {
        /// The contract's event type.
        event_type: String,
        /// The envelope's message id.
        message_id: Uuid,
        /// What is wrong with it.
        problem: ScheduleProblem,
    },
    /// `COMMIT` itself failed. The database normally rolled back; if the connection was
    /// lost during `COMMIT`, the outcome is unknown (as for any transaction).
    #[error("COMMIT failed: {0}")]
    Commit(#[source] DbErr),
}

/// What is wrong with a schedule: [`CommitError::Schedule`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScheduleProblem {
    /// The due time is later than every backend's timestamp column holds, or a delay
    /// overflows a timestamp.
    #[error("is due later than {max}, the latest time the outbox stores")]
    DueOutOfRange {
        /// [`MAX_DUE`](crate::limits::MAX_DUE).
        max: chrono::DateTime<chrono::Utc>,
    },
    /// The key is empty.
    #[error("has an empty key")]
    EmptyKey,
    /// The key is longer than its column (`varchar(255)`).
    #[error("has a key of {length} characters, over the column's {max}")]
    KeyTooLong {
        /// Its length in characters.
        length: usize,
        /// The limit ([`MAX_KEY_CHARS`](crate::schema::MAX_KEY_CHARS)).
        max: usize,
    },
    /// The outbox writes logical messages ([`WriteMode::Message`](crate::WriteMode::Message)),
    /// which the log relay publishes as they are decoded, at commit: there is no table to
    /// wait in. Use [`WriteMode::table`](crate::WriteMode::table) for an outbox with events
    /// due later.
    #[error(
        "is in the future, and write mode `message` has no table for a row to wait in: \
         use WriteMode::table() for an outbox with events due later"
    )]
    MessageMode,
}

/// Why [`UnitOfWorkBuilder::transaction`](crate::UnitOfWorkBuilder::transaction) (or
/// [`Outbox::transaction`](crate::Outbox::transaction)) failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum UnitOfWorkError<E> {
    /// The transaction could not begin; the closure did not run.
    Begin(DbErr),
    /// The closure returned this error; the unit of work was rolled back.
    Aborted(E),
    /// The closure succeeded but the commit failed (see [`CommitError`]).
    Commit(CommitError),
}

impl<E> UnitOfWorkError<E> {
    /// The closure's error, if that is why the unit of work was rolled back.
    pub fn aborted(&self) -> Option<&E> {
        match self {
            Self::Aborted(error) => Some(error),
            _ => None,
        }
    }
}

impl<E: fmt::Display> fmt::Display for UnitOfWorkError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Begin(error) => write!(f, "could not begin the unit of work: {error}"),
            Self::Aborted(error) => write!(f, "the unit of work was rolled back: {error}"),
            Self::Commit(error) => write!(f, "{error}"),
        }
    }
}

impl<E: StdError + 'static> StdError for UnitOfWorkError<E> {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            Self::Begin(error) => Some(error),
            Self::Aborted(error) => Some(error),
            Self::Commit(error) => Some(error),
        }
    }
}
