//! [`LogRelayError`]: why a log relay cannot start or had to stop, each with what to do.

use sea_orm::DbErr;

/// Why a [`LogRelay`](super::LogRelay) cannot be built, cannot start, or stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LogRelayError {
    /// A setting is invalid (nothing was started).
    #[error("invalid log relay setting `{setting}`: {reason}")]
    Config {
        /// The builder method.
        setting: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The database is not PostgreSQL: the log relay tails PostgreSQL's write-ahead log.
    #[error(
        "the log relay needs PostgreSQL (found {backend}); use the polling relay \
         (outbox_seaorm::relay::Relay) on this database"
    )]
    NotPostgres {
        /// The backend found.
        backend: String,
    },
    /// The log relay's tables are missing (`<outbox>_log_slots`): the schema was not
    /// installed (yet), or was installed by an older version. [`LogRelay::run`](super::LogRelay::run)
    /// waits for them, retrying with backoff.
    #[error(
        "the log relay's table {table} does not exist: run schema::install or the \
         CreateLogRelayTables migration (outbox_seaorm::migration) on this database"
    )]
    NotInstalled {
        /// The missing table.
        table: String,
    },
    /// The server's `wal_level` is not `logical`.
    #[error(
        "PostgreSQL runs with wal_level = {found}; logical decoding needs wal_level = logical: \
         `ALTER SYSTEM SET wal_level = logical` and restart the server (book: The log relay § Setting PostgreSQL up)"
    )]
    WalLevel {
        /// The server's `wal_level`.
        found: String,
    },
    /// The connected role may not start replication.
    #[error(
        "role `{role}` may not replicate: `ALTER ROLE {role} WITH REPLICATION` (or connect the \
         log relay as a role that has it)"
    )]
    NoReplicationPrivilege {
        /// The connected role.
        role: String,
    },
    /// Every replication slot of the server is taken.
    #[error(
        "no free replication slot ({used} of max_replication_slots = {max} in use): drop an \
         unused slot (`SELECT pg_drop_replication_slot(name)`) or raise max_replication_slots \
         and restart the server"
    )]
    NoFreeSlot {
        /// Slots in use.
        used: i64,
        /// `max_replication_slots`.
        max: i32,
    },
    /// A slot of that name exists but does not belong to this outbox's log relay: another
    /// plugin or database, or a slot this outbox's relay did not create (never dropped,
    /// never adopted: its position says nothing about this outbox).
    #[error(
        "replication slot `{slot}` exists but is not this outbox's ({detail}); choose another \
         slot name, or drop it (`SELECT pg_drop_replication_slot('{slot}')`) if nothing else \
         uses it"
    )]
    ForeignSlot {
        /// The slot.
        slot: String,
        /// What it is instead.
        detail: String,
    },
    /// The publication exists but does not publish the outbox's inserts.
    #[error(
        "publication `{publication}` exists but does not publish inserts into `{table}`: \
         `ALTER PUBLICATION {publication} ADD TABLE {table}` and `SET (publish = 'insert')`, or \
         choose another publication name"
    )]
    Publication {
        /// The publication.
        publication: String,
        /// The outbox table.
        table: String,
    },
    /// The server invalidated the slot (its WAL was removed, past `max_slot_wal_keep_size`):
    /// the events it still held are gone from the log.
    #[error(
        "replication slot `{slot}` was invalidated by the server ({detail}); the events it had \
         not delivered are no longer in the write-ahead log. Recover: drop the slot \
         (`SELECT pg_drop_replication_slot('{slot}')`) and start the log relay again: it \
         creates a fresh slot, whose backfill publishes every row still pending in the outbox \
         table (write mode `table`; in message mode and with `remove_after_insert` those \
         events are lost) (book: The log relay § Recovering an invalidated slot)"
    )]
    SlotInvalidated {
        /// The slot.
        slot: String,
        /// What the server said.
        detail: String,
    },
    /// Another log relay took the slot's lease over (this one could not renew it in time):
    /// this one stops streaming and stands by.
    #[error("log relay lost the lease of slot `{slot}` to another relay")]
    LeaseLost {
        /// The slot.
        slot: String,
    },
    /// A database statement failed.
    #[error("database error: {0}")]
    Database(#[from] DbErr),
    /// The replication connection failed and retrying cannot help.
    #[error("replication error{}: {message}", sqlstate.as_ref().map(|s| format!(" [{s}]")).unwrap_or_default())]
    Replication {
        /// The server's SQLSTATE, when it sent one.
        sqlstate: Option<String>,
        /// What went wrong.
        message: String,
    },
}
