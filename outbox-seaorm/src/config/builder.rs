//! [`OutboxBuilder`]: the only constructor of an [`Outbox`], with the defaults of every
//! setting and their validation.

use std::collections::BTreeMap;
use std::sync::Arc;

use outbox_core::EnvelopeConfig;
use outbox_core::clock::{Clock, SystemClock};

use super::error::ConfigError;
use super::job::Job;
use super::periodic::Periodic;
use super::write_mode::WriteMode;
use super::{
    DEFAULT_CHUNK_BYTES, DEFAULT_CHUNK_ROWS, DEFAULT_INBOX_TABLE, DEFAULT_NOTIFY_CHANNEL,
    DEFAULT_OUTBOX_TABLE, MAX_WORKER_KEY_LIMIT, Outbox, Settings,
};
use crate::backend::StatementCache;
use crate::partition::DEFAULT_PARTITIONS;
use crate::table::{ColumnNaming, OutboxColumns, TableName, TableNames, validate_identifier};
use crate::trace::{self, TraceContextSource};
use crate::wakeup::{Notifier, PostgresWakeup};
use outbox_core::name::check_worker_key;

/// Builds an [`Outbox`]; every setting has a documented default (see the
/// [module documentation](crate::config)).
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
    transaction_pooling: bool,
    trace_source: TraceContextSource,
    jobs: Vec<Job>,
    periodic: Vec<Periodic>,
    worker_key_limits: BTreeMap<String, u32>,
    write_mode: WriteMode,
    metric_labels: Vec<(String, String)>,
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
            transaction_pooling: false,
            trace_source: trace::default_source(),
            jobs: Vec::new(),
            periodic: Vec::new(),
            worker_key_limits: BTreeMap::new(),
            write_mode: WriteMode::default(),
            metric_labels: Vec::new(),
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

    /// Whether the database is reached through a pooler in transaction mode, such as
    /// PgBouncer's `pool_mode = transaction` (default `false`).
    ///
    /// Such a pooler lends a server connection from `BEGIN` to `COMMIT` only, or for one
    /// protocol exchange outside a transaction. Then the relay, the inbox and the
    /// operations run each statement they send outside a transaction in a transaction of
    /// its own (sqlx sends one statement as two exchanges), and the polling relay does not
    /// `LISTEN` (a notification would reach whichever client holds that server connection
    /// next): it polls. Units of work run in a transaction anyway. The connection needs
    /// sqlx's statement cache off (`statement-cache-capacity=0` in the URL) and the pooler
    /// must drop prepared statements when it takes a server connection back; the book's
    /// chapter "Many tenants" has the settings. The log relay reads the log through a
    /// replication connection of its own, which a pooler cannot carry.
    pub fn transaction_pooling(mut self, pooled: bool) -> Self {
        self.transaction_pooling = pooled;
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

    /// Adds a job enqueued on a cron schedule, once per period across every relay of this
    /// outbox (see [`crate::periodic`]).
    pub fn periodic(mut self, periodic: Periodic) -> Self {
        self.periodic.push(periodic);
        self
    }

    /// At most `limit` jobs of worker key `key` claimed at once, across every polling relay
    /// of this outbox, in every process (default: no limit but the relays' batch sizes).
    /// A relay's claim first takes free slots of the key (rows of `<outbox>_worker_slots`,
    /// locked with `FOR UPDATE SKIP LOCKED` for as long as its batch's transaction holds
    /// the claimed rows), then at most that many rows of the key; a relay that crashes
    /// gives its slots back with its transaction. On SQLite, where one relay at a time holds
    /// a worker key's lease, the limit caps that relay's claim. `limit` is 1 to
    /// [`MAX_WORKER_KEY_LIMIT`]; a second call for one key replaces the first. See the
    /// [job-queue documentation](crate::job).
    pub fn worker_key_limit(mut self, key: impl Into<String>, limit: u32) -> Self {
        self.worker_key_limits.insert(key.into(), limit);
        self
    }

    /// How commits write their envelopes (default [`WriteMode::Table`]): see
    /// [`WriteMode`] for the modes that only the log relay reads.
    pub fn write_mode(mut self, mode: WriteMode) -> Self {
        self.write_mode = mode;
        self
    }

    /// Adds a constant label to every metric that the relays, the log relay, the status
    /// report, the retention purge and the operations of this outbox record, beside
    /// `outbox` (the table). A process that runs the relays of several databases tells them
    /// apart with it (the `outbox` relay service labels each with `relay = <name>`).
    ///
    /// The key must be a Prometheus label name (`[a-zA-Z_][a-zA-Z0-9_]*`, not starting with
    /// `__`) other than the labels the outbox records itself (`outbox`, `event_type`,
    /// `class`, `consumer`, `table`, `slot`, `status`, `mode`, `action`, `reason`), given once.
    pub fn metric_label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.metric_labels.push((key.into(), value.into()));
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
        if let Some(reason) = self.write_mode.problem() {
            return Err(ConfigError::WriteMode { reason });
        }
        if self.write_mode.message_prefix().is_some()
            && let Some(job) = jobs.values().find(|job| job.unique_ref().is_some())
        {
            return Err(ConfigError::UniqueInMessageMode {
                event_type: job.event_type().to_owned(),
            });
        }
        let now = self.clock.now();
        let mut periodic: Vec<Periodic> = Vec::with_capacity(self.periodic.len());
        for job in self.periodic {
            let job = job.validate(now)?;
            if periodic.iter().any(|other| other.name() == job.name()) {
                return Err(ConfigError::DuplicatePeriodic {
                    name: job.name().to_owned(),
                });
            }
            if self.write_mode.message_prefix().is_some() {
                return Err(ConfigError::PeriodicInMessageMode {
                    name: job.name().to_owned(),
                });
            }
            periodic.push(job);
        }
        for (key, &limit) in &self.worker_key_limits {
            check_worker_key(key).map_err(|reason| ConfigError::LimitWorkerKey {
                key: key.clone(),
                reason,
            })?;
            if limit == 0 || limit > MAX_WORKER_KEY_LIMIT {
                return Err(ConfigError::WorkerKeyLimit {
                    key: key.clone(),
                    limit,
                });
            }
            if self.write_mode.message_prefix().is_some() {
                return Err(ConfigError::LimitInMessageMode { key: key.clone() });
            }
        }
        let priorities = jobs.values().any(|job| job.priority_value() != 0);
        let metric_labels = metric_labels(&outbox_table, self.metric_labels)?;
        Ok(Outbox(Arc::new(Settings {
            tables: TableNames::derive(outbox_table, inbox_table),
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
            transaction_pooling: self.transaction_pooling,
            trace_source: self.trace_source,
            statements: StatementCache::default(),
            jobs,
            priorities,
            periodic,
            worker_key_limits: self.worker_key_limits,
            write_mode: self.write_mode,
            metric_labels,
        })))
    }
}

/// The labels the outbox records itself: an extra label may not take one of their keys.
const RECORDED_LABELS: [&str; 10] = [
    "outbox",
    "event_type",
    "class",
    "consumer",
    "table",
    "slot",
    "status",
    "mode",
    "action",
    "reason",
];

/// `outbox = <table>` followed by the validated extra labels.
fn metric_labels(
    table: &TableName,
    extra: Vec<(String, String)>,
) -> Result<Vec<metrics::Label>, ConfigError> {
    let mut labels = vec![metrics::Label::new("outbox", table.to_string())];
    for (key, value) in extra {
        let mut chars = key.chars();
        let well_formed = chars
            .next()
            .is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !key.starts_with("__");
        let problem = if !well_formed {
            Some("not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*, not starting with `__`)")
        } else if RECORDED_LABELS.contains(&key.as_str()) {
            Some("the outbox records this label itself")
        } else if labels.iter().any(|label| label.key() == key) {
            Some("given twice")
        } else {
            None
        };
        if let Some(problem) = problem {
            return Err(ConfigError::MetricLabel { key, problem });
        }
        labels.push(metrics::Label::new(key, value));
    }
    Ok(labels)
}
