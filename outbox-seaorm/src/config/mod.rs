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
//! | periodic jobs ([`Periodic`]) | none |
//! | concurrency limits per worker key ([`OutboxBuilder::worker_key_limit`]) | none |
//! | write mode | [`WriteMode::Table`]: rows in the outbox table, kept until published |
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
use std::sync::{Arc, LazyLock};

use outbox_core::EnvelopeConfig;
use outbox_core::clock::Clock;
#[cfg(doc)]
use outbox_core::clock::SystemClock;

mod builder;
mod error;
mod job;
mod periodic;
mod unique;
mod write_mode;

pub use builder::OutboxBuilder;
pub use error::ConfigError;
pub use job::{Job, MAX_PRIORITY};
pub use periodic::Periodic;
pub use unique::{Unique, UniqueBy, UniqueScope};
pub use write_mode::{DEFAULT_MESSAGE_PREFIX, MAX_MESSAGE_PREFIX_LEN, WriteMode};

/// The highest concurrency limit of a worker key
/// ([`OutboxBuilder::worker_key_limit`]): one slot row per unit.
pub const MAX_WORKER_KEY_LIMIT: u32 = 1_000;

use crate::backend::StatementCache;
use crate::table::{ColumnNaming, OutboxColumns, RelayTables, TableName, TableNames};
use crate::trace::TraceContextSource;
use crate::wakeup::{Notifier, PostgresWakeup, WakeupStats};
#[cfg(doc)]
use crate::{partition::DEFAULT_PARTITIONS, trace};

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
    /// The outbox and inbox tables and the names derived from them.
    tables: TableNames,
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
    /// Whether the database sits behind a transaction pooler.
    transaction_pooling: bool,
    trace_source: TraceContextSource,
    /// The statement texts per backend, built on first use.
    statements: StatementCache,
    /// Job entries by event type.
    jobs: BTreeMap<String, Job>,
    /// Whether a job has a priority other than 0: keyed claims then order by it.
    priorities: bool,
    /// Periodic jobs, in the order added.
    periodic: Vec<Periodic>,
    /// Concurrency limits by worker key.
    worker_key_limits: BTreeMap<String, u32>,
    /// How commits write their envelopes.
    write_mode: WriteMode,
    /// `outbox = <table>` and the extra labels of the builder.
    metric_labels: Vec<metrics::Label>,
}

impl Default for Outbox {
    /// The configuration with every default of [`OutboxBuilder`]: what
    /// `Outbox::builder().build()` returns.
    fn default() -> Self {
        match OutboxBuilder::default().build() {
            Ok(outbox) => outbox,
            // The defaults are constants that `build` accepts (a unit test checks it).
            Err(error) => unreachable!("the default outbox configuration is invalid: {error}"),
        }
    }
}

impl RelayTables {
    /// The relay tables of `outbox` (in the outbox table's schema).
    pub fn of(outbox: &Outbox) -> Self {
        outbox.tables().relay.clone()
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
        &self.0.tables.outbox
    }

    /// The inbox table.
    pub fn inbox_table(&self) -> &TableName {
        &self.0.tables.inbox
    }

    /// The table of scheduled rows not yet due, beside the outbox table
    /// (`<outbox>_scheduled`, see [`crate::schedule`]).
    pub fn scheduled_table(&self) -> &TableName {
        &self.0.tables.scheduled
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

    /// The labels of every metric recorded for this outbox: `outbox = <table>`, then the
    /// extra labels of [`OutboxBuilder::metric_label`].
    pub fn metric_labels(&self) -> &[metrics::Label] {
        &self.0.metric_labels
    }

    /// How commits write their envelopes (see [`WriteMode`]).
    pub fn write_mode(&self) -> &WriteMode {
        &self.0.write_mode
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

    /// The statement texts, cached per backend.
    pub(crate) fn statements(&self) -> &StatementCache {
        &self.0.statements
    }

    /// Every table this configuration names, derived ones included.
    pub(crate) fn tables(&self) -> &TableNames {
        &self.0.tables
    }

    /// Whether SQLite units of work begin with `BEGIN IMMEDIATE`.
    pub fn sqlite_begin_immediate(&self) -> bool {
        self.0.sqlite_begin_immediate
    }

    /// Whether the database is reached through a transaction pooler (see
    /// [`OutboxBuilder::transaction_pooling`]).
    pub fn transaction_pooling(&self) -> bool {
        self.0.transaction_pooling
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

    /// Whether a job entry has a priority other than `0` ([`Job::priority`]): keyed claims
    /// then take rows by `(priority, seq)` instead of `seq`.
    pub fn has_priorities(&self) -> bool {
        self.0.priorities
    }

    /// The concurrency limit of worker key `key`, if any
    /// ([`OutboxBuilder::worker_key_limit`]).
    pub fn worker_key_limit(&self, key: &str) -> Option<u32> {
        self.0.worker_key_limits.get(key).copied()
    }

    /// Every concurrency limit, by worker key.
    pub fn worker_key_limits(&self) -> impl Iterator<Item = (&str, u32)> {
        self.0
            .worker_key_limits
            .iter()
            .map(|(key, limit)| (key.as_str(), *limit))
    }

    /// The worker keys' concurrency slots beside the outbox table
    /// (`<outbox>_worker_slots`, see [`OutboxBuilder::worker_key_limit`]).
    pub fn worker_slots_table(&self) -> &TableName {
        &self.0.tables.worker_slots
    }

    /// The periodic jobs, in the order added ([`OutboxBuilder::periodic`]).
    pub fn periodic_jobs(&self) -> &[Periodic] {
        &self.0.periodic
    }

    /// The unique jobs' keys beside the outbox table (`<outbox>_unique`, see
    /// [`Unique`]).
    pub fn unique_table(&self) -> &TableName {
        &self.0.tables.unique
    }

    /// The periodic jobs' table beside the outbox table (`<outbox>_periodic`, see
    /// [`crate::periodic`]): each job's next and last run.
    pub fn periodic_table(&self) -> &TableName {
        &self.0.tables.periodic
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
    fn metric_labels_follow_the_table_and_reject_clashes() {
        let outbox = Outbox::builder()
            .outbox_table("app.orders_outbox")
            .metric_label("relay", "orders")
            .metric_label("tenant_id", "7")
            .build()
            .unwrap();
        let labels: Vec<(&str, &str)> = outbox
            .metric_labels()
            .iter()
            .map(|label| (label.key(), label.value()))
            .collect();
        assert_eq!(
            labels,
            [
                ("outbox", "app.orders_outbox"),
                ("relay", "orders"),
                ("tenant_id", "7")
            ]
        );
        for (key, problem) in [
            ("event_type", "the outbox records this label itself"),
            ("outbox", "the outbox records this label itself"),
            ("9lives", "not a Prometheus label name"),
            ("__name__", "not a Prometheus label name"),
            ("a-b", "not a Prometheus label name"),
            ("", "not a Prometheus label name"),
        ] {
            match Outbox::builder().metric_label(key, "x").build() {
                Err(ConfigError::MetricLabel {
                    key: rejected,
                    problem: said,
                }) => {
                    assert_eq!(rejected, key);
                    assert!(said.starts_with(problem), "{key}: {said}");
                }
                other => panic!("{key}: {other:?}"),
            }
        }
        assert!(matches!(
            Outbox::builder()
                .metric_label("relay", "a")
                .metric_label("relay", "b")
                .build(),
            Err(ConfigError::MetricLabel {
                problem: "given twice",
                ..
            })
        ));
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
