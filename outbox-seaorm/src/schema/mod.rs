//! The outbox and inbox tables: their DDL on each backend, and [`install`].
//!
//! # Outbox table
//!
//! One row per envelope ([`outbox_core::Envelope`]: its fields are columns); the relay
//! publishes it as it is. Column types:
//!
//! | column | PostgreSQL | MariaDB / MySQL | SQLite |
//! |---|---|---|---|
//! | `seq` | `bigint` identity, primary key | `bigint AUTO_INCREMENT`, primary key | `integer PRIMARY KEY AUTOINCREMENT` |
//! | `message_id` | `uuid`, unique | `char(36)`, unique | `text`, unique |
//! | `event_type`, `aggregate_type`, `aggregate_id` | `varchar(255)` | `varchar(255)` | `text` |
//! | `version`, `partition`, `attempts` | `integer` | `int` | `integer` |
//! | `correlation_id`, `causation_id` | `uuid` | `char(36)` | `text` |
//! | `traceparent`, `tracestate`, `last_error` | `text` | `text` | `text` |
//! | `headers`, `payload` | `jsonb` | `json` (`longtext` + `json_valid` check) | `text` |
//! | `occurred_at`, `next_attempt_at`, `published_at`, `created_at` | `timestamptz` | `datetime(6)`, UTC | `text`, RFC 3339 UTC |
//! | `status` | `varchar(16)` | `varchar(16)` | `text` |
//! | `worker_key` (nullable) | `varchar(100)` | `varchar(100)` | `text` |
//! | `retryable` | `boolean`, default `true` | `boolean` (`tinyint(1)`), default `true` | `boolean` (0 / 1), default `true` |
//! | `priority` | `integer`, default `0` | `int`, default `0` | `integer`, default `0` |
//!
//! - UUIDs outside PostgreSQL are stored as lowercase hyphenated text
//!   (`0191a0b2-…-…`), readable from any language and by Debezium.
//! - SQLite timestamps are fixed-width `YYYY-MM-DDTHH:MM:SS.ffffffZ`, so text order is time
//!   order. MariaDB `datetime(6)` values are UTC.
//! - `status` is text (`pending`, `published`, `dead`, `skipped`, `failed`, checked by a
//!   constraint) rather than a number, so that other tools and languages read it without a
//!   lookup table.
//! - `worker_key`, `retryable` and `priority` are the job-queue columns ([`crate::job`]): set
//!   at commit from the [`Outbox`]'s job configuration and never changed afterwards, so a
//!   later change of configuration does not alter rows already written. Event types without
//!   a job entry get `NULL`, `true` and `0`.
//! - `partition` is `fnv1a_64(aggregate_id) % partitions` ([`crate::partition`]).
//! - `headers` is a JSON object of strings, `{}` when empty; `payload` is the contract.
//! - `next_attempt_at` is set to the commit time, so a new row is claimable at once.
//! - MariaDB tables are InnoDB, `utf8mb4` with the binary collation `utf8mb4_bin`, so that
//!   ids and aggregate ids compare byte for byte (`ABC` ≠ `abc`).
//!
//! Indexes keep the relay's claim query cost proportional to the number of **pending** rows,
//! whatever the number of published rows kept for auditing (by default a published row is
//! deleted at once, see [`RelayConfig::retention`](crate::relay::RelayConfig::retention)):
//!
//! - PostgreSQL and SQLite: partial indexes `WHERE status = 'pending'` on `(seq)`,
//!   `(partition, seq)` and `(aggregate_type, aggregate_id, seq)`, and `(worker_key, priority, seq)
//!   WHERE status = 'pending' AND worker_key IS NOT NULL` for keyed relays (rows without a
//!   worker key cost it nothing);
//! - MariaDB (no partial indexes): the same indexes led by `status`, so pending rows form one
//!   contiguous key range (`(status, worker_key, priority, seq)` for keyed relays);
//! - everywhere: a unique index on `message_id`.
//!
//! Index names are the table name plus a suffix (`_pending_seq_idx`, …), shortened with a
//! hash when that would exceed 63 characters.
//!
//! # Inbox table
//!
//! Primary key `(message_id, consumer)`; `event_type`, `received_at`, `processed_at`
//! (nullable), and an index on `received_at` for retention cleanup.
//!
//! # Installing
//!
//! [`install`] creates both tables and their indexes if they do not exist (tests, demos,
//! small services). Services that manage their schema with `sea-orm-migration` add the
//! migrations of [`crate::migration`] to their migrator instead; those that use another tool
//! can take the statements from [`create_statements`].
//!
//! Schema-qualified table names (`schema.table`) are supported on PostgreSQL and MariaDB;
//! SQLite's attached-database qualification does not fit its index syntax and is rejected
//! by [`create_statements`] with [`DbErr::Custom`].

#[cfg(feature = "migration")]
use sea_orm::sea_query::{Table, TableDropStatement};
use sea_orm::{ConnectionTrait, DbBackend, DbErr};

mod dead_letter;
mod inbox;
mod lease;
mod log;
mod outbox;
mod parked;
mod periodic;
mod relay;
mod scheduled;
mod types;
mod unique;
mod worker_slots;

use crate::config::Outbox;
#[cfg(feature = "migration")]
use crate::sql::dialect::table_ref;
#[cfg(feature = "migration")]
use crate::table::TableName;
#[cfg(test)]
use crate::table::index_name;

pub use crate::status::{MAX_KEY_CHARS, OutboxStatus};

fn check_backend(backend: DbBackend, outbox: &Outbox) -> Result<(), DbErr> {
    if backend == DbBackend::Sqlite
        && (outbox.outbox_table().schema().is_some() || outbox.inbox_table().schema().is_some())
    {
        return Err(DbErr::Custom(format!(
            "schema-qualified table names ({}, {}) are not supported on SQLite",
            outbox.outbox_table(),
            outbox.inbox_table()
        )));
    }
    Ok(())
}

/// Which tables a statement list covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tables {
    Outbox,
    /// The scheduled rows' table beside the outbox table ([`crate::schedule`]).
    Scheduled,
    /// The periodic jobs' table beside the outbox table ([`crate::periodic`]).
    Periodic,
    /// The unique jobs' keys beside the outbox table ([`Unique`](crate::job::Unique)).
    Unique,
    /// The worker keys' concurrency slots beside the outbox table
    /// ([`OutboxBuilder::worker_key_limit`](crate::OutboxBuilder::worker_key_limit)).
    WorkerSlots,
    Inbox,
    /// The relay's tables ([`crate::relay::tables`]); needs the outbox table.
    Relay,
    /// The consumer's dead-letter and parked-message tables ([`crate::inbox::dead_letter`],
    /// [`crate::inbox::parked`]).
    InboxDeadLetters,
    /// The partitioned consumers' lease and instance tables ([`crate::inbox::partitioned`]).
    ConsumerLeases,
    /// The log relay's slot and dead-letter tables (PostgreSQL and MariaDB, [`crate::relay`]'s
    /// `log` module).
    LogRelay,
    /// Every table: outbox, inbox, relay, consumer tables.
    Both,
}

pub(crate) fn statements(
    backend: DbBackend,
    outbox: &Outbox,
    tables: Tables,
) -> Result<Vec<String>, DbErr> {
    check_backend(backend, outbox)?;
    let mut statements = Vec::new();
    if matches!(tables, Tables::Outbox | Tables::Both) {
        statements.extend(outbox::statements(backend, outbox));
    }
    if matches!(tables, Tables::Scheduled | Tables::Both) {
        statements.extend(scheduled::statements(backend, outbox));
    }
    if matches!(tables, Tables::Periodic | Tables::Both) {
        statements.extend(periodic::statements(backend, outbox));
    }
    if matches!(tables, Tables::Unique | Tables::Both) {
        statements.extend(unique::statements(backend, outbox));
    }
    if matches!(tables, Tables::WorkerSlots | Tables::Both) {
        statements.extend(worker_slots::statements(backend, outbox));
    }
    if matches!(tables, Tables::Inbox | Tables::Both) {
        statements.extend(inbox::statements(backend, outbox));
    }
    if matches!(tables, Tables::Relay | Tables::Both) {
        statements.extend(relay::statements(backend, outbox));
    }
    if matches!(tables, Tables::InboxDeadLetters | Tables::Both) {
        statements.extend(dead_letter::statements(backend, outbox));
        statements.extend(parked::statements(backend, outbox));
    }
    if matches!(tables, Tables::ConsumerLeases | Tables::Both) {
        statements.extend(lease::consumer_statements(backend, outbox));
    }
    if matches!(tables, Tables::LogRelay | Tables::Both) {
        statements.extend(log::statements(backend, outbox));
    }
    Ok(statements)
}

/// The DDL creating the outbox and inbox tables, the relay's tables
/// ([`crate::relay::tables`]) and their indexes on `backend`, each statement idempotent
/// (`IF NOT EXISTS`).
///
/// ```
/// use outbox_seaorm::{Outbox, schema};
/// use sea_orm::DbBackend;
///
/// let ddl = schema::create_statements(DbBackend::Postgres, &Outbox::default())?;
/// assert!(ddl[0].starts_with(r#"CREATE TABLE IF NOT EXISTS "outbox""#));
/// assert!(ddl.iter().any(|s| s.contains(r#"WHERE "status" = 'pending'"#)));
/// # Ok::<(), sea_orm::DbErr>(())
/// ```
///
/// # Errors
/// [`DbErr::Custom`] for a schema-qualified table name on SQLite.
pub fn create_statements(backend: DbBackend, outbox: &Outbox) -> Result<Vec<String>, DbErr> {
    statements(backend, outbox, Tables::Both)
}

#[cfg(feature = "migration")]
pub(crate) fn drop_statement(backend: DbBackend, name: &TableName) -> String {
    let statement: TableDropStatement = Table::drop().table(table_ref(name)).if_exists().to_owned();
    backend.build(&statement).to_string()
}

pub(crate) async fn execute_all<C: ConnectionTrait>(
    db: &C,
    statements: Vec<String>,
) -> Result<(), DbErr> {
    for statement in statements {
        db.execute_unprepared(&statement).await?;
    }
    Ok(())
}

/// Creates the outbox and inbox tables, the relay's tables and their indexes unless they
/// exist.
///
/// Runs on any connection: a pool, a transaction (DDL is transactional on PostgreSQL and
/// SQLite, not on MariaDB), or a migration's connection.
///
/// # Errors
/// The database's error ([`DbErr`]) for the first statement that fails, or
/// [`DbErr::Custom`] for a schema-qualified name on SQLite.
pub async fn install<C: ConnectionTrait>(db: &C, outbox: &Outbox) -> Result<(), DbErr> {
    let statements = create_statements(db.get_database_backend(), outbox)?;
    tracing::debug!(
        outbox = %outbox.outbox_table(),
        inbox = %outbox.inbox_table(),
        "installing outbox tables"
    );
    execute_all(db, statements).await
}

#[cfg(test)]
mod tests {
    use super::*;
    // Imported by the module only with the `migration` feature.
    use crate::table::TableName;

    #[test]
    fn index_names_fit_identifiers() {
        let short = TableName::new("outbox").unwrap();
        assert_eq!(
            index_name(&short, "pending_seq_idx"),
            "outbox_pending_seq_idx"
        );
        let long = TableName::new(&"t".repeat(63)).unwrap();
        let name = index_name(&long, "pending_aggregate_idx");
        assert!(name.len() <= 63, "{name}");
        assert!(name.ends_with("_pending_aggregate_idx"));
        let other = TableName::new(&format!("{}u", "t".repeat(62))).unwrap();
        assert_ne!(index_name(&other, "pending_aggregate_idx"), name);
    }

    #[test]
    fn status_round_trips() {
        for status in [
            OutboxStatus::Pending,
            OutboxStatus::Published,
            OutboxStatus::Dead,
            OutboxStatus::Skipped,
            OutboxStatus::Failed,
        ] {
            assert_eq!(OutboxStatus::parse(status.as_str()), Some(status));
        }
        assert_eq!(OutboxStatus::parse("PENDING"), None);
    }

    #[test]
    fn sqlite_rejects_schema_qualified_names() {
        let outbox = Outbox::builder()
            .outbox_table("aux.outbox")
            .build()
            .unwrap();
        assert!(create_statements(DbBackend::Sqlite, &outbox).is_err());
        assert!(create_statements(DbBackend::Postgres, &outbox).is_ok());
    }

    #[test]
    fn ddl_per_backend() {
        let outbox = Outbox::default();
        let postgres = create_statements(DbBackend::Postgres, &outbox)
            .unwrap()
            .join(";\n");
        for fragment in [
            r#""seq" bigint GENERATED BY DEFAULT AS IDENTITY NOT NULL PRIMARY KEY"#,
            r#""message_id" uuid NOT NULL"#,
            r#""payload" jsonb NOT NULL"#,
            r#""occurred_at" timestamptz NOT NULL"#,
            r#"CHECK ("status" IN ('pending', 'published', 'dead', 'skipped', 'failed'))"#,
            r#""worker_key" varchar(100) NULL"#,
            r#""retryable" boolean NOT NULL DEFAULT TRUE"#,
            r#"CREATE INDEX IF NOT EXISTS "outbox_pending_worker_key_idx" ON "outbox" ("worker_key", "priority", "seq") WHERE "status" = 'pending' AND "worker_key" IS NOT NULL"#,
            r#"CREATE UNIQUE INDEX IF NOT EXISTS "outbox_message_id_key" ON "outbox" ("message_id")"#,
            r#"CREATE INDEX IF NOT EXISTS "outbox_pending_partition_idx" ON "outbox" ("partition", "seq") WHERE "status" = 'pending'"#,
            r#"CONSTRAINT "inbox_pkey" PRIMARY KEY ("message_id", "consumer")"#,
        ] {
            assert!(postgres.contains(fragment), "{fragment}\n{postgres}");
        }
        let mysql = create_statements(DbBackend::MySql, &outbox)
            .unwrap()
            .join(";\n");
        for fragment in [
            "`seq` bigint NOT NULL PRIMARY KEY AUTO_INCREMENT",
            "`message_id` char(36) NOT NULL",
            "`payload` json NOT NULL",
            "`occurred_at` datetime(6) NOT NULL",
            "KEY `outbox_pending_aggregate_idx` (`status`, `aggregate_type`, `aggregate_id`, `seq`)",
            "KEY `outbox_pending_worker_key_idx` (`status`, `worker_key`, `priority`, `seq`)",
            "`priority` int NOT NULL DEFAULT 0",
            "`worker_key` varchar(100) NULL",
            "`retryable` boolean NOT NULL DEFAULT TRUE",
            "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
        ] {
            assert!(mysql.contains(fragment), "{fragment}\n{mysql}");
        }
        assert!(!mysql.contains("CREATE INDEX"), "{mysql}");
        let sqlite = create_statements(DbBackend::Sqlite, &outbox)
            .unwrap()
            .join(";\n");
        for fragment in [
            r#""seq" integer NOT NULL PRIMARY KEY AUTOINCREMENT"#,
            r#""payload" text NOT NULL"#,
            r#"ON "outbox" ("seq") WHERE "status" = 'pending'"#,
        ] {
            assert!(sqlite.contains(fragment), "{fragment}\n{sqlite}");
        }
    }
}
