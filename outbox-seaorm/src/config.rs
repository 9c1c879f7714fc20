//! [`Outbox`]: the configuration every unit of work, migration and relay of one outbox
//! shares, built with [`OutboxBuilder`].
//!
//! | setting | default |
//! |---|---|
//! | outbox table | `outbox` ([`DEFAULT_OUTBOX_TABLE`]) |
//! | inbox table | `inbox` ([`DEFAULT_INBOX_TABLE`]) |
//! | column naming | [`ColumnNaming::Standard`] |
//! | partitions | 64 ([`DEFAULT_PARTITIONS`]) |
//! | rows per `INSERT` | 1 000 ([`DEFAULT_CHUNK_ROWS`]), and never more than the backend's bind-parameter limit allows |
//! | bytes per `INSERT` | 4 MiB ([`DEFAULT_CHUNK_BYTES`]), a quarter of MariaDB's default `max_allowed_packet` |
//! | envelope encoding | [`EnvelopeConfig::default`] (256 KiB payload limit) |
//! | clock | [`SystemClock`] (microseconds) |
//! | PostgreSQL `NOTIFY` channel | `outbox_pending` ([`DEFAULT_NOTIFY_CHANNEL`]) |
//! | PostgreSQL wake-up | [`PostgresWakeup::AfterCommit`], at most one `NOTIFY` per 8 ms per database |
//! | SQLite transactions | `BEGIN IMMEDIATE` |
//! | trace context | [`trace::default_source`] |
//! | jobs (worker key, `retryable` per event type) | none: every row `worker_key = NULL`, `retryable = true` (see [`crate::job`]) |
//!
//! ```
//! use outbox_seaorm::Outbox;
//! use outbox_seaorm::table::ColumnNaming;
//!
//! let outbox = Outbox::builder()
//!     .outbox_table("ordering_outbox")
//!     .inbox_table("ordering_inbox")
//!     .column_naming(ColumnNaming::Debezium)
//!     .partitions(16)
//!     .build()?;
//! assert_eq!(outbox.outbox_table().to_string(), "ordering_outbox");
//! assert_eq!(outbox.columns().message_id, "id");
//!
//! assert!(Outbox::builder().outbox_table("outbox; DROP TABLE orders").build().is_err());
//! # Ok::<(), outbox_seaorm::ConfigError>(())
//! ```

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock, OnceLock};

use outbox_core::EnvelopeConfig;
use outbox_core::clock::{Clock, SystemClock};
use outbox_core::name::{EventTypeError, WorkerKeyError};
use sea_orm::DbBackend;

use crate::job::Job;
use crate::partition::DEFAULT_PARTITIONS;
use crate::table::{
    ColumnNaming, IdentifierProblem, InvalidTableName, OutboxColumns, TableName,
    validate_identifier,
};
use crate::trace::{self, TraceContextSource};
use crate::wakeup::{Notifier, PostgresWakeup, WakeupStats};
use crate::write::InsertSql;

/// Default outbox table name.
pub const DEFAULT_OUTBOX_TABLE: &str = "outbox";
/// Default inbox table name.
pub const DEFAULT_INBOX_TABLE: &str = "inbox";
/// Default PostgreSQL `NOTIFY` channel.
pub const DEFAULT_NOTIFY_CHANNEL: &str = "outbox_pending";
/// Default maximum number of rows in one multi-row `INSERT`.
pub const DEFAULT_CHUNK_ROWS: usize = 1_000;
/// Default maximum estimated size of one multi-row `INSERT`, in bytes.
pub const DEFAULT_CHUNK_BYTES: usize = 4 * 1024 * 1024;

/// The configuration of one outbox (and its inbox). Cheap to clone (a reference count);
/// share one value between the units of work of a service.
#[derive(Debug, Clone)]
pub struct Outbox(Arc<Settings>);

#[derive(Debug)]
struct Settings {
    outbox_table: TableName,
    inbox_table: TableName,
    naming: ColumnNaming,
    columns: OutboxColumns,
    partitions: u32,
    chunk_rows: usize,
    chunk_bytes: usize,
    envelope: EnvelopeConfig,
    clock: Arc<dyn Clock>,
    notify_channel: Option<String>,
    wakeup: PostgresWakeup,
    notifier: Notifier,
    sqlite_begin_immediate: bool,
    trace_source: TraceContextSource,
    /// The outbox `INSERT` text per backend, built on first use.
    insert_sql: InsertSql,
    /// The inbox `INSERT` text per backend, built on first use.
    inbox_insert_sql: PerBackend<String>,
    /// Job entries by event type.
    jobs: BTreeMap<String, Job>,
}

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
    /// Two [`Job`] entries for one event type.
    #[error("two job entries for event type `{event_type}`")]
    DuplicateJob {
        /// The event type.
        event_type: String,
    },
}

/// Builds an [`Outbox`]; every setting has a documented default (see the
/// [module documentation](self)).
#[derive(Debug, Clone)]
#[must_use]
pub struct OutboxBuilder {
    outbox_table: String,
    inbox_table: String,
    naming: ColumnNaming,
    partitions: u32,
    chunk_rows: usize,
    chunk_bytes: usize,
    envelope: EnvelopeConfig,
    clock: Arc<dyn Clock>,
    notify_channel: Option<String>,
    wakeup: PostgresWakeup,
    sqlite_begin_immediate: bool,
    trace_source: TraceContextSource,
    jobs: Vec<Job>,
}

impl Default for OutboxBuilder {
    fn default() -> Self {
        Self {
            outbox_table: DEFAULT_OUTBOX_TABLE.to_owned(),
            inbox_table: DEFAULT_INBOX_TABLE.to_owned(),
            naming: ColumnNaming::Standard,
            partitions: DEFAULT_PARTITIONS,
            chunk_rows: DEFAULT_CHUNK_ROWS,
            chunk_bytes: DEFAULT_CHUNK_BYTES,
            envelope: EnvelopeConfig::default(),
            clock: Arc::new(SystemClock),
            notify_channel: Some(DEFAULT_NOTIFY_CHANNEL.to_owned()),
            wakeup: PostgresWakeup::default(),
            sqlite_begin_immediate: true,
            trace_source: trace::default_source(),
            jobs: Vec::new(),
        }
    }
}

impl OutboxBuilder {
    /// The outbox table: `table` or `schema.table` (default `outbox`). Validated by
    /// [`build`](Self::build) as described in [`crate::table`].
    pub fn outbox_table(mut self, name: impl Into<String>) -> Self {
        self.outbox_table = name.into();
        self
    }

    /// The inbox table (default `inbox`), validated like the outbox table.
    pub fn inbox_table(mut self, name: impl Into<String>) -> Self {
        self.inbox_table = name.into();
        self
    }

    /// How the outbox columns are named (default [`ColumnNaming::Standard`]).
    pub fn column_naming(mut self, naming: ColumnNaming) -> Self {
        self.naming = naming;
        self
    }

    /// Number of partitions rows are spread over by aggregate id (default 64). Changing it
    /// moves aggregates between partitions: do it only with no pending rows.
    pub fn partitions(mut self, partitions: u32) -> Self {
        self.partitions = partitions;
        self
    }

    /// Maximum rows in one multi-row `INSERT` (default 1 000). The backend's bind-parameter
    /// limit (65 535 on PostgreSQL and MariaDB, 32 766 on SQLite) caps it further.
    pub fn chunk_rows(mut self, rows: usize) -> Self {
        self.chunk_rows = rows;
        self
    }

    /// Maximum estimated size of one multi-row `INSERT` in bytes (default 4 MiB). Keep it
    /// well below MariaDB's `max_allowed_packet`. A single row larger than this still goes
    /// out, alone in its statement.
    pub fn chunk_bytes(mut self, bytes: usize) -> Self {
        self.chunk_bytes = bytes;
        self
    }

    /// How contracts are encoded (payload size limit).
    pub fn envelope_config(mut self, config: EnvelopeConfig) -> Self {
        self.envelope = config;
        self
    }

    /// Where `occurred_at`, `created_at` and `next_attempt_at` come from (default
    /// [`SystemClock`]). Keep a clone of the `Arc` to drive a
    /// [`ManualClock`](outbox_core::clock::ManualClock) in tests.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The PostgreSQL channel a commit notifies so that listening relays wake up early (how
    /// and when: [`postgres_wakeup`](Self::postgres_wakeup)); `None` disables notifications
    /// like [`PostgresWakeup::Off`]. Default `outbox_pending`. Ignored on other backends.
    pub fn notify_channel(mut self, channel: Option<&str>) -> Self {
        self.notify_channel = channel.map(str::to_owned);
        self
    }

    /// How a commit on PostgreSQL notifies the [`notify_channel`](Self::notify_channel)
    /// (default [`PostgresWakeup::AfterCommit`] with an 8 ms `min_interval`: after `COMMIT`,
    /// coalesced, off the caller's path). See [`crate::wakeup`] for the modes and their
    /// trade-offs. Ignored on other backends.
    pub fn postgres_wakeup(mut self, wakeup: PostgresWakeup) -> Self {
        self.wakeup = wakeup;
        self
    }

    /// Whether units of work on SQLite start with `BEGIN IMMEDIATE` (default `true`).
    ///
    /// SQLite allows one writer at a time. A deferred transaction that reads first and
    /// writes later can fail with `SQLITE_BUSY` at once, without waiting for the busy
    /// timeout, when another connection wrote in between; an immediate one takes the write
    /// lock up front and waits for it (up to the connection's busy timeout) instead.
    pub fn sqlite_begin_immediate(mut self, immediate: bool) -> Self {
        self.sqlite_begin_immediate = immediate;
        self
    }

    /// The hook that supplies the trace context of a new unit of work (default
    /// [`trace::default_source`]). See [`crate::trace`].
    pub fn trace_context_source(mut self, source: TraceContextSource) -> Self {
        self.trace_source = source;
        self
    }

    /// Adds a job entry: the worker key and `retryable` flag that every row of its event
    /// type gets at commit (job-queue mode, see [`crate::job`]). Event types without an
    /// entry get no worker key and `retryable = true`. Default: no entries.
    pub fn job(mut self, job: Job) -> Self {
        self.jobs.push(job);
        self
    }

    /// Validates the settings.
    ///
    /// # Errors
    /// [`ConfigError`] naming the first rejected setting.
    pub fn build(self) -> Result<Outbox, ConfigError> {
        let outbox_table = TableName::new(&self.outbox_table)?;
        let inbox_table = TableName::new(&self.inbox_table)?;
        if outbox_table == inbox_table {
            return Err(ConfigError::SameTable {
                name: outbox_table.to_string(),
            });
        }
        if self.partitions == 0 || i32::try_from(self.partitions).is_err() {
            return Err(ConfigError::Partitions {
                value: self.partitions,
            });
        }
        if self.chunk_rows == 0 {
            return Err(ConfigError::ZeroChunkLimit {
                setting: "chunk_rows",
            });
        }
        if self.chunk_bytes == 0 {
            return Err(ConfigError::ZeroChunkLimit {
                setting: "chunk_bytes",
            });
        }
        if let Some(channel) = &self.notify_channel {
            validate_identifier(channel).map_err(|reason| ConfigError::NotifyChannel {
                name: channel.clone(),
                reason,
            })?;
        }
        let mut jobs = BTreeMap::new();
        for job in self.jobs {
            job.validate()?;
            let event_type = job.event_type().to_owned();
            if jobs.insert(event_type.clone(), job).is_some() {
                return Err(ConfigError::DuplicateJob { event_type });
            }
        }
        Ok(Outbox(Arc::new(Settings {
            outbox_table,
            inbox_table,
            naming: self.naming,
            columns: OutboxColumns::of(self.naming),
            partitions: self.partitions,
            chunk_rows: self.chunk_rows,
            chunk_bytes: self.chunk_bytes,
            envelope: self.envelope,
            clock: self.clock,
            notifier: Notifier::new(self.notify_channel.clone(), self.wakeup),
            notify_channel: self.notify_channel,
            wakeup: self.wakeup,
            sqlite_begin_immediate: self.sqlite_begin_immediate,
            trace_source: self.trace_source,
            insert_sql: InsertSql::default(),
            inbox_insert_sql: PerBackend::default(),
            jobs,
        })))
    }
}

impl Default for Outbox {
    /// The configuration with every default of [`OutboxBuilder`].
    fn default() -> Self {
        let defaults = OutboxBuilder::default();
        Outbox(Arc::new(Settings {
            outbox_table: TableName::trusted(DEFAULT_OUTBOX_TABLE),
            inbox_table: TableName::trusted(DEFAULT_INBOX_TABLE),
            naming: defaults.naming,
            columns: OutboxColumns::of(defaults.naming),
            partitions: defaults.partitions,
            chunk_rows: defaults.chunk_rows,
            chunk_bytes: defaults.chunk_bytes,
            envelope: defaults.envelope,
            clock: defaults.clock,
            notifier: Notifier::new(defaults.notify_channel.clone(), defaults.wakeup),
            notify_channel: defaults.notify_channel,
            wakeup: defaults.wakeup,
            sqlite_begin_immediate: defaults.sqlite_begin_immediate,
            trace_source: defaults.trace_source,
            insert_sql: InsertSql::default(),
            inbox_insert_sql: PerBackend::default(),
            jobs: BTreeMap::new(),
        }))
    }
}

static DEFAULT_OUTBOX: LazyLock<Outbox> = LazyLock::new(Outbox::default);

impl Outbox {
    /// A builder starting from the defaults.
    pub fn builder() -> OutboxBuilder {
        OutboxBuilder::default()
    }

    /// The shared default configuration (what [`UnitOfWork::begin`](crate::UnitOfWork::begin)
    /// uses).
    pub fn default_ref() -> &'static Outbox {
        &DEFAULT_OUTBOX
    }

    /// The outbox table.
    pub fn outbox_table(&self) -> &TableName {
        &self.0.outbox_table
    }

    /// The inbox table.
    pub fn inbox_table(&self) -> &TableName {
        &self.0.inbox_table
    }

    /// The column naming.
    pub fn column_naming(&self) -> ColumnNaming {
        self.0.naming
    }

    /// The outbox column names.
    pub fn columns(&self) -> &OutboxColumns {
        &self.0.columns
    }

    /// The number of partitions.
    pub fn partitions(&self) -> u32 {
        self.0.partitions
    }

    /// The configured maximum rows per `INSERT` (before the backend's parameter limit).
    pub fn chunk_rows(&self) -> usize {
        self.0.chunk_rows
    }

    /// The maximum estimated bytes per `INSERT`.
    pub fn chunk_bytes(&self) -> usize {
        self.0.chunk_bytes
    }

    /// The envelope encoding settings.
    pub fn envelope_config(&self) -> &EnvelopeConfig {
        &self.0.envelope
    }

    /// The clock.
    pub fn clock(&self) -> &dyn Clock {
        &*self.0.clock
    }

    /// The PostgreSQL `NOTIFY` channel, if enabled.
    pub fn notify_channel(&self) -> Option<&str> {
        self.0.notify_channel.as_deref()
    }

    /// How commits on PostgreSQL notify the channel (see [`crate::wakeup`]).
    pub fn postgres_wakeup(&self) -> PostgresWakeup {
        self.0.wakeup
    }

    /// The counters of this outbox's after-commit notifier (shared by its clones): wake-ups
    /// requested by commits, `NOTIFY`s sent, failures. All zero unless
    /// [`PostgresWakeup::AfterCommit`] is used on PostgreSQL.
    pub fn wakeup_stats(&self) -> WakeupStats {
        self.0.notifier.stats()
    }

    /// The channel to notify after `COMMIT`, when that is the configured wake-up.
    pub(crate) fn after_commit_channel(&self) -> Option<&str> {
        match self.0.wakeup {
            PostgresWakeup::AfterCommit { .. } => self.notify_channel(),
            _ => None,
        }
    }

    /// The channel to notify inside the transaction, when that is the configured wake-up.
    pub(crate) fn in_transaction_channel(&self) -> Option<&str> {
        match self.0.wakeup {
            PostgresWakeup::InTransaction => self.notify_channel(),
            _ => None,
        }
    }

    pub(crate) fn notifier(&self) -> &Notifier {
        &self.0.notifier
    }

    pub(crate) fn insert_sql(&self) -> &InsertSql {
        &self.0.insert_sql
    }

    pub(crate) fn inbox_insert_sql(&self) -> &PerBackend<String> {
        &self.0.inbox_insert_sql
    }

    /// Whether SQLite units of work begin with `BEGIN IMMEDIATE`.
    pub fn sqlite_begin_immediate(&self) -> bool {
        self.0.sqlite_begin_immediate
    }

    /// The trace-context hook.
    pub fn trace_context_source(&self) -> TraceContextSource {
        self.0.trace_source
    }

    /// The job entry of `event_type`, if configured (see [`OutboxBuilder::job`]).
    pub fn job(&self, event_type: &str) -> Option<&Job> {
        if self.0.jobs.is_empty() {
            return None;
        }
        self.0.jobs.get(event_type)
    }

    /// Every job entry, by event type.
    pub fn jobs(&self) -> impl Iterator<Item = &Job> {
        self.0.jobs.values()
    }
}

/// A value per backend (PostgreSQL, MariaDB, SQLite), built on first use: the statement
/// texts an [`Outbox`] keeps (the outbox and inbox `INSERT`s).
#[derive(Debug)]
pub(crate) struct PerBackend<T>([OnceLock<T>; 3]);

impl<T> Default for PerBackend<T> {
    fn default() -> Self {
        Self([OnceLock::new(), OnceLock::new(), OnceLock::new()])
    }
}

impl<T> PerBackend<T> {
    /// The value for `backend`, built by `init` the first time.
    pub(crate) fn get_or_init(&self, backend: DbBackend, init: impl FnOnce() -> T) -> &T {
        let index = match backend {
            DbBackend::Postgres => 0,
            DbBackend::MySql => 1,
            _ => 2,
        };
        self.0[index].get_or_init(init)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_documented_values() {
        let outbox = Outbox::default();
        assert_eq!(outbox.outbox_table().to_string(), "outbox");
        assert_eq!(outbox.inbox_table().to_string(), "inbox");
        assert_eq!(outbox.partitions(), 64);
        assert_eq!(outbox.chunk_rows(), 1_000);
        assert_eq!(outbox.chunk_bytes(), 4 * 1024 * 1024);
        assert_eq!(outbox.notify_channel(), Some("outbox_pending"));
        assert_eq!(
            outbox.postgres_wakeup(),
            PostgresWakeup::AfterCommit {
                min_interval: std::time::Duration::from_millis(8)
            }
        );
        assert_eq!(outbox.wakeup_stats(), WakeupStats::default());
        assert!(outbox.sqlite_begin_immediate());
        let built = Outbox::builder().build().unwrap();
        assert_eq!(built.outbox_table(), outbox.outbox_table());
        assert_eq!(built.columns(), outbox.columns());
        assert_eq!(built.postgres_wakeup(), outbox.postgres_wakeup());
        let strict = Outbox::builder()
            .postgres_wakeup(PostgresWakeup::InTransaction)
            .build()
            .unwrap();
        assert_eq!(strict.in_transaction_channel(), Some("outbox_pending"));
        assert_eq!(strict.after_commit_channel(), None);
        assert_eq!(outbox.after_commit_channel(), Some("outbox_pending"));
        let silent = Outbox::builder().notify_channel(None).build().unwrap();
        assert_eq!(silent.after_commit_channel(), None);
    }

    #[test]
    fn rejects_bad_settings() {
        assert!(matches!(
            Outbox::builder().inbox_table("outbox").build(),
            Err(ConfigError::SameTable { .. })
        ));
        assert!(matches!(
            Outbox::builder().partitions(0).build(),
            Err(ConfigError::Partitions { value: 0 })
        ));
        assert!(matches!(
            Outbox::builder().partitions(u32::MAX).build(),
            Err(ConfigError::Partitions { .. })
        ));
        assert!(matches!(
            Outbox::builder().chunk_rows(0).build(),
            Err(ConfigError::ZeroChunkLimit {
                setting: "chunk_rows"
            })
        ));
        assert!(matches!(
            Outbox::builder().chunk_bytes(0).build(),
            Err(ConfigError::ZeroChunkLimit {
                setting: "chunk_bytes"
            })
        ));
        assert!(matches!(
            Outbox::builder()
                .notify_channel(Some("a'; NOTIFY x"))
                .build(),
            Err(ConfigError::NotifyChannel { .. })
        ));
        assert!(matches!(
            Outbox::builder().inbox_table("in`box").build(),
            Err(ConfigError::TableName(_))
        ));
        assert!(
            Outbox::builder()
                .notify_channel(None)
                .build()
                .unwrap()
                .notify_channel()
                .is_none()
        );
    }
}
