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
    /// The database is neither PostgreSQL (with the feature `log-relay`) nor MariaDB (with
    /// the feature `log-relay-mariadb`, in table mode): the log relay tails their logs.
    #[error(
        "the log relay needs PostgreSQL with the feature log-relay, or MariaDB with the \
         feature log-relay-mariadb and a table-mode outbox (found {backend}); use the polling \
         relay (outbox_seaorm::relay::Relay) on this database"
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
    /// MariaDB: a server setting the binlog relay needs is not set (`log_bin`,
    /// `binlog_format`, `binlog_row_image`, `binlog_row_metadata`).
    #[error(
        "MariaDB runs with {variable} = {found}; the log relay needs {variable} = {needed}: \
         start the server with --{option}={needed} (or `SET GLOBAL {variable} = '{needed}'` \
         where it is dynamic) (book: The log relay on MariaDB § Setting MariaDB up)"
    )]
    BinlogSetting {
        /// The server variable.
        variable: &'static str,
        /// Its value.
        found: String,
        /// The value needed.
        needed: &'static str,
        /// The server option that sets it.
        option: &'static str,
    },
    /// MariaDB: the connected user lacks a privilege the binlog dump needs.
    #[error(
        "user {user} lacks {missing}: `GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO {user}` \
         (or connect the log relay as a user that has them)"
    )]
    NoBinlogPrivilege {
        /// The connected user (`CURRENT_USER()`).
        user: String,
        /// The missing privileges.
        missing: String,
    },
    /// The `mysql://` server is not MariaDB: MySQL's binlog has GTIDs of another form and
    /// another dump protocol, which the log relay does not read.
    #[error(
        "the server is {version}, not MariaDB: the log relay reads MariaDB's binary log only; \
         use the polling relay (outbox_seaorm::relay::Relay) on MySQL"
    )]
    NotMariaDb {
        /// `VERSION()` as the server answered.
        version: String,
    },
    /// MariaDB: the relay would register its binlog dump with the server's own id.
    #[error(
        "the log relay's replica server id {id} is the server's own @@server_id: set another \
         one (LogRelayBuilder::replica_server_id, `replica_server_id` in the relay service)"
    )]
    ReplicaServerId {
        /// The id.
        id: u32,
    },
    /// MariaDB: the stored position is no longer (or never was) in the server's binlogs —
    /// they were purged (`expire_logs_days`, `PURGE BINARY LOGS`) while the relay was
    /// stopped or behind, or the position belongs to another server. What the log held
    /// after it is gone; the table still holds the pending rows.
    #[error(
        "the binlogs no longer hold the log relay's position {position} of slot {slot} \
         ({detail}): recover from the table with `outbox log-reset {slot}` (or \
         Operations::reset_log_position), which backfills the pending rows from a new \
         snapshot at the next start (published rows still in the table go out again, with \
         their ids)"
    )]
    PositionPurged {
        /// The slot.
        slot: String,
        /// The stored position.
        position: String,
        /// The server's message.
        detail: String,
    },
    /// MariaDB: the stored position names a GTID domain this server's binlog never had, or
    /// a sequence number beyond the server's: it was taken on another server (a failover
    /// to a server with other GTIDs, `RESET MASTER`, a restored backup). MariaDB would
    /// accept it and stream nothing of the outbox's (or skip what it holds), so the relay
    /// refuses it.
    #[error(
        "the log relay's stored position {position} of slot {slot} is not in this server's \
         binlog history (the server is at {server}): it was taken on another server (a \
         failover, RESET MASTER, a restored backup); recover from the table with `outbox \
         log-reset {slot}` (or Operations::reset_log_position), which backfills the pending \
         rows from a new snapshot at the next start"
    )]
    ForeignPosition {
        /// The slot.
        slot: String,
        /// The stored position.
        position: String,
        /// The server's `@@gtid_binlog_pos`.
        server: String,
    },
    /// MariaDB: the binlog dump failed (connection lost, server restarted, killed).
    /// Retried by [`LogRelay::run`](super::LogRelay::run).
    #[error("binlog stream: {message}")]
    Binlog {
        /// The server's error code, when it sent one.
        code: Option<u16>,
        /// What went wrong.
        message: String,
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
    /// The replication connection reached a connection pooler (PgBouncer refuses the
    /// `replication` startup parameter): the log relay reads the log through a connection
    /// of its own, straight to PostgreSQL.
    #[error(
        "the log relay's replication connection went through a connection pooler, which cannot \
         carry replication ({message}): give the log relay a URL straight to PostgreSQL \
         (connection_url), even when its pool and the services go through the pooler \
         (book: Many tenants § Behind PgBouncer)"
    )]
    ThroughPooler {
        /// What the pooler said.
        message: String,
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
