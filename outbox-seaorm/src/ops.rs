//! Operations on an outbox: status, dead letters, requeue and skip (recorded in the
//! operator log: who, when, why), and retention cleanup of the outbox and inbox tables.
//! The `cli` feature wraps them in embeddable subcommands ([`crate::cli`]).
//!
//! ```
//! use std::time::Duration;
//!
//! use outbox_seaorm::ops::Operations;
//! use outbox_seaorm::{Outbox, schema};
//! use sea_orm::{ConnectOptions, Database};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let mut options = ConnectOptions::new("sqlite::memory:");
//! # options.max_connections(1).min_connections(1).idle_timeout(None::<Duration>).max_lifetime(None::<Duration>);
//! let db = Database::connect(options).await?;
//! let outbox = Outbox::default();
//! schema::install(&db, &outbox).await?;
//!
//! let ops = Operations::new(db, outbox);
//! let status = ops.status().await?;
//! assert_eq!(status.pending, 0);
//! assert_eq!(status.oldest_claimable_age, None);
//! assert!(ops.dead_letters(None, 50).await?.is_empty());
//! // Deletes published rows older than a week, 1 000 per statement, one instance at a time.
//! assert_eq!(ops.purge(Duration::from_secs(7 * 86_400), 1_000).await?, Some(0));
//! # Ok(())
//! # }
//! ```
//!
//! # Requeue and skip
//!
//! - **requeue** (`dead`, `failed` or `skipped` → `pending`): `attempts` back to 0, due at
//!   once; the relay publishes it with its original message id. `last_error` is kept until
//!   the next attempt. For a `failed` row (a non-retryable job, see [`crate::job`]) this is
//!   the operator's decision to run it again — after checking that it did not happen; there
//!   is deliberately no bulk requeue of failed rows.
//! - **skip** (`dead`, `failed` or `pending` → `skipped`): the row is never published (the
//!   job never run again) and no longer holds its aggregate back under
//!   [`DeadLetterPolicy::Block`]; a reason is required.
//!
//! Both write a row to the operator log (`<outbox>_operator_log`: `seq`, `message_id`,
//! `event_type`, `action`, `previous_status`, `actor`, `reason`, `last_error`, `at`) in
//! the same transaction as the change, and count in [`metric::OPERATOR_ACTIONS`].
//!
//! [`DeadLetterPolicy::Block`]: outbox_core::policy::DeadLetterPolicy::Block

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use outbox_core::metric;
use outbox_core::policy::{DeadLetterPolicy, Ordering};
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, DbErr, FromQueryResult};
use uuid::Uuid;

use crate::config::Outbox;
use crate::inbox::dead_letter::{self, ConsumerDeadLetter, DeadLetterStatus};
use crate::record::OutboxRecord;
use crate::relay::lease::{INBOX_CLEANUP_LEASE, OUTBOX_CLEANUP_LEASE};
use crate::relay::tables::RelayTables;
use crate::schema::OutboxStatus;
use crate::sql::Store;
use crate::sql::dialect::{self as sql, quote, quote_table};
use crate::sql::statement::Sql;
use crate::table::inbox_columns;

/// Why an operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpsError {
    /// The database failed; nothing changed.
    #[error("database error: {0}")]
    Database(#[from] DbErr),
    /// No outbox row has this message id.
    #[error("no outbox row has message id {message_id}")]
    NotFound {
        /// The message id.
        message_id: Uuid,
    },
    /// The row is not in a status the action applies to.
    #[error("message {message_id} is {status}; {action} applies to {expected} rows")]
    WrongStatus {
        /// The message id.
        message_id: Uuid,
        /// Its status.
        status: OutboxStatus,
        /// The action.
        action: OperatorActionKind,
        /// The statuses the action applies to.
        expected: &'static str,
    },
    /// `skip` without a reason.
    #[error("skip needs a reason")]
    MissingReason,
    /// An operator's input is longer than its column keeps.
    #[error("{field} is {length} characters long, over the limit of {max}")]
    InputTooLong {
        /// `actor` or `reason`.
        field: &'static str,
        /// Its length in characters.
        length: usize,
        /// The limit ([`MAX_ACTOR_CHARS`](crate::limits::MAX_ACTOR_CHARS),
        /// [`MAX_REASON_CHARS`](crate::limits::MAX_REASON_CHARS)).
        max: usize,
    },
    /// No consumer dead letter has this id.
    #[error("no consumer dead letter has id {id}")]
    DeadLetterNotFound {
        /// The id.
        id: i64,
    },
}

/// Checks an operator's name and reason against their columns.
fn check_input(actor: &str, reason: Option<&str>) -> Result<(), OpsError> {
    let check = |field, text: &str, max| {
        let length = text.chars().count();
        if length > max {
            return Err(OpsError::InputTooLong { field, length, max });
        }
        Ok(())
    };
    check("actor", actor, crate::limits::MAX_ACTOR_CHARS)?;
    if let Some(reason) = reason {
        check("reason", reason, crate::limits::MAX_REASON_CHARS)?;
    }
    Ok(())
}

/// The state of an outbox, as `outbox status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct StatusReport {
    /// The outbox table.
    pub outbox: String,
    /// Rows waiting to be published (in backoff included).
    pub pending: u64,
    /// Pending rows parked in backoff (not claimable before their `next_attempt_at`).
    pub in_backoff: u64,
    /// Pending rows that are due but held back behind an earlier row of their aggregate:
    /// one in backoff, or (under [`DeadLetterPolicy::Block`]) one that is dead or failed.
    /// The claim does not take them; they wait for a retry, or for an operator.
    ///
    /// [`DeadLetterPolicy::Block`]: outbox_core::policy::DeadLetterPolicy::Block
    pub held: u64,
    /// Age of the oldest claimable pending row — due, and not held back: the outbox lag.
    /// Rows in backoff and held-back rows are not counted, so a poisoned aggregate does not
    /// make it grow.
    #[serde(serialize_with = "serialize_age")]
    pub oldest_claimable_age: Option<Duration>,
    /// Age of the oldest held-back row.
    #[serde(serialize_with = "serialize_age")]
    pub oldest_held_age: Option<Duration>,
    /// Dead rows per event type.
    pub dead_by_event_type: BTreeMap<String, u64>,
    /// Failed rows (non-retryable jobs that failed, see [`crate::job`]) per event type.
    pub failed_by_event_type: BTreeMap<String, u64>,
    /// Pending rows per worker key (job-queue mode; rows without a worker key are not
    /// listed): the seed's per-key lag. A key whose oldest claimable row keeps ageing has no
    /// live relay.
    pub pending_by_worker_key: BTreeMap<String, WorkerKeyStatus>,
    /// Rows skipped by operators.
    pub skipped: u64,
    /// Live relay instances.
    pub live_relays: Vec<String>,
}

fn serialize_age<S: serde::Serializer>(age: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match age {
        Some(age) => s.serialize_f64(age.as_secs_f64()),
        None => s.serialize_none(),
    }
}

impl StatusReport {
    /// Dead rows in total.
    pub fn dead(&self) -> u64 {
        self.dead_by_event_type.values().sum()
    }

    /// Failed rows in total.
    pub fn failed(&self) -> u64 {
        self.failed_by_event_type.values().sum()
    }
}

/// The pending rows of one worker key ([`StatusReport::pending_by_worker_key`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct WorkerKeyStatus {
    /// Pending rows (in backoff included).
    pub pending: u64,
    /// Age of the oldest claimable pending row (backoff excluded).
    #[serde(serialize_with = "serialize_age")]
    pub oldest_claimable_age: Option<Duration>,
}

/// An operator action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum OperatorActionKind {
    /// Back to `pending`.
    Requeue,
    /// To `skipped`.
    Skip,
}

impl OperatorActionKind {
    /// `requeue` or `skip`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Requeue => "requeue",
            Self::Skip => "skip",
        }
    }
}

impl std::fmt::Display for OperatorActionKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One entry of the operator log.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct OperatorAction {
    /// The row's `seq`.
    pub seq: i64,
    /// The row's message id.
    pub message_id: Uuid,
    /// The row's event type.
    pub event_type: String,
    /// What was done.
    pub action: OperatorActionKind,
    /// The row's status before.
    pub previous_status: String,
    /// Who did it.
    pub actor: String,
    /// Why.
    pub reason: Option<String>,
    /// The row's `last_error` at that time.
    pub last_error: Option<String>,
    /// When.
    pub at: DateTime<Utc>,
}

/// The operations API for one outbox. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Operations {
    db: DatabaseConnection,
    outbox: Outbox,
    store: Store,
    labels: Vec<metrics::Label>,
    ordering: Ordering,
    dead_letter_policy: DeadLetterPolicy,
}

fn to_delta(duration: Duration) -> TimeDelta {
    TimeDelta::from_std(duration).unwrap_or(TimeDelta::MAX)
}

impl Operations {
    /// Operations on `outbox` in `db`.
    pub fn new(db: DatabaseConnection, outbox: Outbox) -> Self {
        let store = Store::new(&outbox, db.get_database_backend());
        let labels = vec![metrics::Label::new(
            "outbox",
            outbox.outbox_table().to_string(),
        )];
        Self {
            db,
            outbox,
            store,
            labels,
            ordering: Ordering::PerAggregate,
            dead_letter_policy: DeadLetterPolicy::Block,
        }
    }

    /// The ordering and dead-letter policy of the relays, which decide what
    /// [`status`](Self::status) counts as held back (default: the relay's defaults,
    /// [`Ordering::PerAggregate`] and [`DeadLetterPolicy::Block`]).
    #[must_use]
    pub fn with_relay_policy(mut self, ordering: Ordering, dead_letters: DeadLetterPolicy) -> Self {
        self.ordering = ordering;
        self.dead_letter_policy = dead_letters;
        self
    }

    /// The names of the relay tables.
    pub fn tables(&self) -> &RelayTables {
        self.store.tables()
    }

    fn backend(&self) -> DbBackend {
        self.store.backend()
    }

    fn q(&self, name: &str) -> String {
        quote(self.backend(), name)
    }

    fn outbox_table(&self) -> String {
        quote_table(self.backend(), self.outbox.outbox_table())
    }

    /// Pending rows, the oldest claimable row's age, dead and failed rows by event type,
    /// skipped rows, pending rows by worker key and live relays; also sets the
    /// [`metric::PENDING_ROWS`], [`metric::OLDEST_CLAIMABLE_AGE`], [`metric::DEAD_ROWS`] and
    /// [`metric::FAILED_ROWS`] gauges. Reads only pending, dead, failed and skipped rows
    /// (indexed), never the published ones.
    ///
    /// # Errors
    /// The database's error.
    pub async fn status(&self) -> Result<StatusReport, DbErr> {
        let c = self.outbox.columns();
        let now = self.outbox.clock().now();
        let mut sql = Sql::new(self.backend());
        // Per pending row: due (not parked in backoff, as the relay's claim sees it), and
        // held back (the claim would not take it).
        sql.push(
            "SELECT COUNT(*) AS pending, COUNT(CASE WHEN t.due = 0 THEN 1 END) AS parked, \
             COUNT(CASE WHEN t.due = 1 AND t.held = 1 THEN 1 END) AS held, \
             MIN(CASE WHEN t.due = 1 AND t.held = 0 THEN t.created END) AS oldest, \
             MIN(CASE WHEN t.due = 1 AND t.held = 1 THEN t.created END) AS oldest_held \
             FROM (SELECT ",
        )
        .push(&format!(
            "o.{created} AS created, CASE WHEN o.{attempts} = 0 OR o.{next} <= ",
            created = self.q(c.created_at),
            attempts = self.q(c.attempts),
            next = self.q(c.next_attempt_at)
        ))
        .bind(sql::timestamp(self.backend(), now))
        .push(" THEN 1 ELSE 0 END AS due, CASE WHEN ");
        self.store.held_back(
            &mut sql,
            now,
            self.ordering == Ordering::PerAggregate,
            self.dead_letter_policy,
        );
        sql.push(&format!(
            " THEN 1 ELSE 0 END AS held FROM {table} o WHERE o.{status} = 'pending') t",
            table = self.outbox_table(),
            status = self.q(c.status)
        ));
        let row = self.db.query_one_raw(sql.build()).await?;
        let (pending, in_backoff, held, oldest, oldest_held) = match row {
            Some(row) => (
                sql::read_i64(&row, "pending")?,
                sql::read_i64(&row, "parked")?,
                sql::read_i64(&row, "held")?,
                sql::read_timestamp(&row, "oldest")?,
                sql::read_timestamp(&row, "oldest_held")?,
            ),
            None => (0, 0, 0, None, None),
        };
        let mut sql = Sql::new(self.backend());
        sql.push(&format!(
            "SELECT {status} AS status, {event} AS event_type, COUNT(*) AS n FROM {table} \
             WHERE {status} IN ('dead', 'failed', 'skipped') GROUP BY {status}, {event}",
            status = self.q(c.status),
            event = self.q(c.event_type),
            table = self.outbox_table(),
        ));
        let mut dead_by_event_type = BTreeMap::new();
        let mut failed_by_event_type = BTreeMap::new();
        let mut skipped = 0;
        for row in self.db.query_all_raw(sql.build()).await? {
            let status: String = row.try_get("", "status")?;
            let count = u64::try_from(sql::read_i64(&row, "n")?).unwrap_or(0);
            match OutboxStatus::parse(&status) {
                Some(OutboxStatus::Dead) => {
                    dead_by_event_type.insert(row.try_get("", "event_type")?, count);
                }
                Some(OutboxStatus::Failed) => {
                    failed_by_event_type.insert(row.try_get("", "event_type")?, count);
                }
                _ => skipped += count,
            }
        }
        let pending_by_worker_key = self.pending_by_worker_key(now).await?;
        let live_relays = self.store.live_instances(&self.db, now, false).await?;
        let age = |at: DateTime<Utc>| (now - at).to_std().unwrap_or(Duration::ZERO);
        let oldest_claimable_age = oldest.map(age);
        let report = StatusReport {
            outbox: self.outbox.outbox_table().to_string(),
            pending: u64::try_from(pending).unwrap_or(0),
            in_backoff: u64::try_from(in_backoff).unwrap_or(0),
            held: u64::try_from(held).unwrap_or(0),
            oldest_claimable_age,
            oldest_held_age: oldest_held.map(age),
            dead_by_event_type,
            failed_by_event_type,
            pending_by_worker_key,
            skipped,
            live_relays,
        };
        metrics::gauge!(metric::PENDING_ROWS, self.labels.clone()).set(report.pending as f64);
        metrics::gauge!(metric::OLDEST_CLAIMABLE_AGE, self.labels.clone())
            .set(oldest_claimable_age.map_or(0.0, |age| age.as_secs_f64()));
        metrics::gauge!(metric::HELD_ROWS, self.labels.clone()).set(report.held as f64);
        metrics::gauge!(metric::BACKOFF_ROWS, self.labels.clone()).set(report.in_backoff as f64);
        metrics::gauge!(metric::DEAD_ROWS, self.labels.clone()).set(report.dead() as f64);
        metrics::gauge!(metric::FAILED_ROWS, self.labels.clone()).set(report.failed() as f64);
        Ok(report)
    }

    /// Pending keyed rows per worker key, with the age of each key's oldest claimable row
    /// (served by the `(worker_key, seq)` index of pending keyed rows).
    async fn pending_by_worker_key(
        &self,
        now: DateTime<Utc>,
    ) -> Result<BTreeMap<String, WorkerKeyStatus>, DbErr> {
        let c = self.outbox.columns();
        let mut sql = Sql::new(self.backend());
        sql.push(&format!(
            "SELECT {key} AS worker_key, COUNT(*) AS pending, MIN(CASE WHEN {attempts} = 0 OR \
             {next} <= ",
            key = self.q(c.worker_key),
            attempts = self.q(c.attempts),
            next = self.q(c.next_attempt_at)
        ))
        .bind(sql::timestamp(self.backend(), now))
        .push(&format!(
            " THEN {created} END) AS oldest FROM {table} WHERE {status} = 'pending' AND {key} \
             IS NOT NULL GROUP BY {key}",
            created = self.q(c.created_at),
            table = self.outbox_table(),
            status = self.q(c.status),
            key = self.q(c.worker_key),
        ));
        let mut keys = BTreeMap::new();
        for row in self.db.query_all_raw(sql.build()).await? {
            let oldest = sql::read_timestamp(&row, "oldest")?;
            keys.insert(
                row.try_get("", "worker_key")?,
                WorkerKeyStatus {
                    pending: u64::try_from(sql::read_i64(&row, "pending")?).unwrap_or(0),
                    oldest_claimable_age: oldest
                        .map(|at| (now - at).to_std().unwrap_or(Duration::ZERO)),
                },
            );
        }
        Ok(keys)
    }

    /// Dead rows in `seq` order, of one event type or all, at most `limit`.
    ///
    /// # Errors
    /// The database's error.
    pub async fn dead_letters(
        &self,
        event_type: Option<&str>,
        limit: u64,
    ) -> Result<Vec<OutboxRecord>, DbErr> {
        self.rows_with_status(OutboxStatus::Dead, event_type, limit)
            .await
    }

    /// Failed rows (non-retryable jobs that failed, see [`crate::job`]) in `seq` order, of
    /// one event type or all, at most `limit`.
    ///
    /// # Errors
    /// The database's error.
    pub async fn failed_jobs(
        &self,
        event_type: Option<&str>,
        limit: u64,
    ) -> Result<Vec<OutboxRecord>, DbErr> {
        self.rows_with_status(OutboxStatus::Failed, event_type, limit)
            .await
    }

    async fn rows_with_status(
        &self,
        status: OutboxStatus,
        event_type: Option<&str>,
        limit: u64,
    ) -> Result<Vec<OutboxRecord>, DbErr> {
        use sea_orm::sea_query::{Alias, Expr, ExprTrait as _};
        let c = self.outbox.columns();
        let mut select = OutboxRecord::select(&self.outbox);
        select
            .and_where(Expr::col(Alias::new(c.status)).eq(status.as_str()))
            .limit(limit);
        if let Some(event_type) = event_type {
            select.and_where(Expr::col(Alias::new(c.event_type)).eq(event_type));
        }
        let rows = self.db.query_all(&select).await?;
        rows.iter()
            .map(|row| OutboxRecord::from_query_result(row, ""))
            .collect()
    }

    /// The outbox row with this message id, whatever its status.
    ///
    /// # Errors
    /// The database's error.
    pub async fn find(&self, message_id: Uuid) -> Result<Option<OutboxRecord>, DbErr> {
        use sea_orm::sea_query::{Alias, Expr, ExprTrait as _};
        let mut select = OutboxRecord::select(&self.outbox);
        select.and_where(
            Expr::col(Alias::new(self.outbox.columns().message_id))
                .eq(sql::uuid(self.backend(), message_id)),
        );
        let row = self.db.query_one(&select).await?;
        row.map(|row| OutboxRecord::from_query_result(&row, ""))
            .transpose()
    }

    /// Puts a `dead`, `failed` or `skipped` row back to `pending` (attempts 0, due now),
    /// recorded in the operator log. For a `failed` row this runs a non-retryable job again:
    /// an operator's decision.
    ///
    /// # Errors
    /// [`OpsError::NotFound`], [`OpsError::WrongStatus`] (e.g. a published row), or the
    /// database's error.
    pub async fn requeue(
        &self,
        message_id: Uuid,
        actor: &str,
        reason: Option<&str>,
    ) -> Result<OperatorAction, OpsError> {
        self.act(
            message_id,
            OperatorActionKind::Requeue,
            actor,
            reason,
            &[
                OutboxStatus::Dead,
                OutboxStatus::Failed,
                OutboxStatus::Skipped,
            ],
        )
        .await
    }

    /// Requeues every dead row (of one event type, or all), each recorded in the operator
    /// log. Returns the actions, in `seq` order. `failed` rows are left alone: each is
    /// requeued on its own, after a person checked it.
    ///
    /// # Errors
    /// The database's error; rows requeued before it stay requeued.
    pub async fn requeue_dead(
        &self,
        event_type: Option<&str>,
        actor: &str,
        reason: Option<&str>,
    ) -> Result<Vec<OperatorAction>, OpsError> {
        let mut actions = Vec::new();
        loop {
            let rows = self.dead_letters(event_type, 500).await?;
            if rows.is_empty() {
                return Ok(actions);
            }
            for row in rows {
                match self.requeue(row.envelope.message_id, actor, reason).await {
                    Ok(action) => actions.push(action),
                    // Changed meanwhile (another operator): not ours to requeue.
                    Err(OpsError::WrongStatus { .. } | OpsError::NotFound { .. }) => {}
                    Err(error) => return Err(error),
                }
            }
        }
    }

    /// Marks a `dead`, `failed` or `pending` row `skipped`: never published (a job never
    /// run again), no longer blocking its aggregate. Recorded in the operator log with
    /// `actor` and `reason`.
    ///
    /// # Errors
    /// [`OpsError::MissingReason`], [`OpsError::NotFound`], [`OpsError::WrongStatus`], or
    /// the database's error.
    pub async fn skip(
        &self,
        message_id: Uuid,
        actor: &str,
        reason: &str,
    ) -> Result<OperatorAction, OpsError> {
        if reason.trim().is_empty() {
            return Err(OpsError::MissingReason);
        }
        self.act(
            message_id,
            OperatorActionKind::Skip,
            actor,
            Some(reason),
            &[
                OutboxStatus::Dead,
                OutboxStatus::Failed,
                OutboxStatus::Pending,
            ],
        )
        .await
    }

    async fn act(
        &self,
        message_id: Uuid,
        action: OperatorActionKind,
        actor: &str,
        reason: Option<&str>,
        from: &[OutboxStatus],
    ) -> Result<OperatorAction, OpsError> {
        check_input(actor, reason)?;
        let backend = self.backend();
        let c = self.outbox.columns();
        let txn = crate::transaction::begin_whole(&self.db, None).await?;
        let mut sql = Sql::new(backend);
        sql.push(&format!(
            "SELECT {seq} AS seq, {event} AS event_type, {status} AS status, {error} AS last_error \
             FROM {table} WHERE {id} = ",
            seq = self.q(c.seq),
            event = self.q(c.event_type),
            status = self.q(c.status),
            error = self.q(c.last_error),
            table = self.outbox_table(),
            id = self.q(c.message_id),
        ))
        .bind(sql::uuid(backend, message_id));
        if backend != DbBackend::Sqlite {
            sql.push(" FOR UPDATE");
        }
        let Some(row) = txn.query_one_raw(sql.build()).await? else {
            return Err(OpsError::NotFound { message_id });
        };
        let seq = sql::read_i64(&row, "seq")?;
        let event_type: String = row.try_get("", "event_type")?;
        let previous: String = row.try_get("", "status")?;
        let last_error: Option<String> = row.try_get("", "last_error")?;
        let status = OutboxStatus::parse(&previous)
            .ok_or_else(|| DbErr::Type(format!("unknown outbox status {previous:?}")))?;
        if !from.contains(&status) {
            return Err(OpsError::WrongStatus {
                message_id,
                status,
                action,
                expected: match action {
                    OperatorActionKind::Requeue => "dead, failed or skipped",
                    OperatorActionKind::Skip => "dead, failed or pending",
                },
            });
        }
        let now = self.outbox.clock().now();
        let mut sql = Sql::new(backend);
        sql.push("UPDATE ")
            .table(self.outbox.outbox_table())
            .push(" SET ");
        match action {
            OperatorActionKind::Requeue => {
                sql.push(&format!(
                    "{status} = 'pending', {attempts} = 0, {next} = ",
                    status = self.q(c.status),
                    attempts = self.q(c.attempts),
                    next = self.q(c.next_attempt_at)
                ))
                .bind(sql::timestamp(backend, now));
            }
            OperatorActionKind::Skip => {
                sql.push(&format!("{} = 'skipped'", self.q(c.status)));
            }
        }
        sql.push(&format!(" WHERE {} = {seq}", self.q(c.seq)));
        txn.execute_raw(sql.build()).await?;
        let entry = OperatorAction {
            seq,
            message_id,
            event_type,
            action,
            previous_status: previous,
            actor: actor.to_owned(),
            reason: reason.map(str::to_owned),
            last_error,
            at: now,
        };
        self.log(&txn, &entry).await?;
        txn.commit().await?;
        let mut labels = self.labels.clone();
        labels.push(metrics::Label::new("action", action.as_str()));
        metrics::counter!(metric::OPERATOR_ACTIONS, labels).increment(1);
        tracing::info!(
            %message_id,
            seq,
            action = action.as_str(),
            actor,
            reason = reason.unwrap_or(""),
            "outbox operator action"
        );
        Ok(entry)
    }

    async fn log<C: ConnectionTrait>(&self, conn: &C, entry: &OperatorAction) -> Result<(), DbErr> {
        let backend = self.backend();
        let mut sql = Sql::new(backend);
        sql.push("INSERT INTO ")
            .table(&self.store.tables().operator_log)
            .push(&format!(
                " ({}, {}, {}, {}, {}, {}, {}, {}, {}) VALUES ({}, ",
                self.q("seq"),
                self.q("message_id"),
                self.q("event_type"),
                self.q("action"),
                self.q("previous_status"),
                self.q("actor"),
                self.q("reason"),
                self.q("last_error"),
                self.q("at"),
                entry.seq,
            ))
            .bind(sql::uuid(backend, entry.message_id))
            .push(", ")
            .bind(sql::text(entry.event_type.clone()))
            .push(", ")
            .bind(sql::text(entry.action.as_str()))
            .push(", ")
            .bind(sql::text(entry.previous_status.clone()))
            .push(", ")
            .bind(sql::text(entry.actor.clone()))
            .push(", ")
            .bind(sql::opt_text(entry.reason.clone()))
            .push(", ")
            .bind(sql::opt_text(entry.last_error.clone()))
            .push(", ")
            .bind(sql::timestamp(backend, entry.at))
            .push(")");
        conn.execute_raw(sql.build()).await?;
        Ok(())
    }

    /// The operator log, oldest first: every entry, or those of one message.
    ///
    /// # Errors
    /// The database's error.
    pub async fn operator_log(
        &self,
        message_id: Option<Uuid>,
    ) -> Result<Vec<OperatorAction>, DbErr> {
        let backend = self.backend();
        let mut sql = Sql::new(backend);
        sql.push(&format!(
            "SELECT {}, {}, {}, {}, {}, {}, {}, {}, {} FROM ",
            self.q("seq"),
            self.q("message_id"),
            self.q("event_type"),
            self.q("action"),
            self.q("previous_status"),
            self.q("actor"),
            self.q("reason"),
            self.q("last_error"),
            self.q("at"),
        ))
        .table(&self.store.tables().operator_log);
        if let Some(id) = message_id {
            sql.push(&format!(" WHERE {} = ", self.q("message_id")))
                .bind(sql::uuid(backend, id));
        }
        sql.push(&format!(" ORDER BY {}", self.q("id")));
        let rows = self.db.query_all_raw(sql.build()).await?;
        rows.iter()
            .map(|row| {
                let action: String = row.try_get("", "action")?;
                Ok(OperatorAction {
                    seq: sql::read_i64(row, "seq")?,
                    message_id: sql::read_uuid(row, "message_id")?,
                    event_type: row.try_get("", "event_type")?,
                    action: if action == "skip" {
                        OperatorActionKind::Skip
                    } else {
                        OperatorActionKind::Requeue
                    },
                    previous_status: row.try_get("", "previous_status")?,
                    actor: row.try_get("", "actor")?,
                    reason: row.try_get("", "reason")?,
                    last_error: row.try_get("", "last_error")?,
                    at: sql::read_timestamp(row, "at")?
                        .ok_or_else(|| DbErr::Type("operator log `at` is NULL".into()))?,
                })
            })
            .collect()
    }

    /// Consumer dead letters ([`crate::inbox::dead_letter`]), oldest first, of one consumer
    /// or all, in one state or all.
    ///
    /// # Errors
    /// The database's error.
    pub async fn consumer_dead_letters(
        &self,
        consumer: Option<&str>,
        status: Option<DeadLetterStatus>,
        limit: u64,
    ) -> Result<Vec<ConsumerDeadLetter>, DbErr> {
        dead_letter::list(&self.db, &self.outbox, consumer, status, limit).await
    }

    /// One consumer dead letter by id.
    ///
    /// # Errors
    /// The database's error.
    pub async fn consumer_dead_letter(&self, id: i64) -> Result<Option<ConsumerDeadLetter>, DbErr> {
        dead_letter::find(&self.db, &self.outbox, id).await
    }

    /// Marks a consumer dead letter `requeued` (recording who and when); the running
    /// [`Consumer`](crate::inbox::Consumer) of its consumer name redelivers it to its
    /// handler. Returns `false` when the dead letter does not exist or is not `dead`.
    ///
    /// # Errors
    /// [`OpsError::InputTooLong`] for an actor over
    /// [`MAX_ACTOR_CHARS`](crate::limits::MAX_ACTOR_CHARS); the database's error.
    pub async fn requeue_consumer_dead_letter(
        &self,
        id: i64,
        actor: &str,
    ) -> Result<bool, OpsError> {
        check_input(actor, None)?;
        let requeued = dead_letter::transition(
            &self.db,
            &self.outbox,
            id,
            DeadLetterStatus::Dead,
            DeadLetterStatus::Requeued,
            dead_letter::Actor {
                name: Some(actor),
                reason: None,
            },
        )
        .await?;
        if requeued {
            let mut labels = self.labels.clone();
            labels.push(metrics::Label::new("action", "requeue-consumer"));
            metrics::counter!(metric::OPERATOR_ACTIONS, labels).increment(1);
            tracing::info!(dead_letter = id, actor, "consumer dead letter requeued");
        }
        Ok(requeued)
    }

    /// Messages a consumer parked ([`crate::inbox::parked`]): waiting for their next
    /// attempt, or behind an earlier message of their aggregate. Oldest first, of one
    /// consumer or all, at most `limit`.
    ///
    /// # Errors
    /// The database's error.
    pub async fn consumer_parked(
        &self,
        consumer: Option<&str>,
        limit: u64,
    ) -> Result<Vec<crate::inbox::parked::ParkedMessage>, DbErr> {
        crate::inbox::parked::list(&self.db, &self.outbox, consumer, limit).await
    }

    /// Gives a consumer dead letter up: `dead` → `skipped`, recording who, when and why. A
    /// skipped letter no longer holds its aggregate: the consumer applies the messages parked
    /// behind it ([`crate::inbox::parked`]). Returns `false` when the dead letter is not
    /// `dead` (a `requeued` one is being redelivered).
    ///
    /// # Errors
    /// [`OpsError::MissingReason`] for an empty reason, [`OpsError::InputTooLong`],
    /// [`OpsError::DeadLetterNotFound`], or the database's error.
    pub async fn skip_consumer_dead_letter(
        &self,
        id: i64,
        actor: &str,
        reason: &str,
    ) -> Result<bool, OpsError> {
        if reason.trim().is_empty() {
            return Err(OpsError::MissingReason);
        }
        check_input(actor, Some(reason))?;
        if dead_letter::find(&self.db, &self.outbox, id)
            .await?
            .is_none()
        {
            return Err(OpsError::DeadLetterNotFound { id });
        }
        let skipped = dead_letter::transition(
            &self.db,
            &self.outbox,
            id,
            DeadLetterStatus::Dead,
            DeadLetterStatus::Skipped,
            dead_letter::Actor {
                name: Some(actor),
                reason: Some(reason),
            },
        )
        .await?;
        if skipped {
            let mut labels = self.labels.clone();
            labels.push(metrics::Label::new("action", "skip-consumer"));
            metrics::counter!(metric::OPERATOR_ACTIONS, labels).increment(1);
            tracing::info!(
                dead_letter = id,
                actor,
                reason,
                "consumer dead letter skipped"
            );
        }
        Ok(skipped)
    }

    /// Deletes published rows older than `retention`, `batch` rows per statement, while
    /// holding the outbox cleanup lease (one instance at a time). Returns the rows deleted,
    /// or `None` when another instance is cleaning up.
    ///
    /// # Errors
    /// The database's error; batches deleted before it stay deleted.
    pub async fn purge(&self, retention: Duration, batch: usize) -> Result<Option<u64>, DbErr> {
        let owner = format!("ops-{}", Uuid::now_v7());
        self.purge_with_lease(
            OUTBOX_CLEANUP_LEASE,
            &owner,
            retention,
            batch,
            Duration::from_secs(60),
        )
        .await
    }

    /// Deletes inbox rows received more than `retention` ago, like [`purge`](Self::purge)
    /// (inbox cleanup lease). The retention must exceed the longest redelivery window of
    /// the brokers feeding the inbox, or a late duplicate is applied twice.
    ///
    /// # Errors
    /// The database's error.
    pub async fn purge_inbox(
        &self,
        retention: Duration,
        batch: usize,
    ) -> Result<Option<u64>, DbErr> {
        let owner = format!("ops-{}", Uuid::now_v7());
        self.purge_with_lease(
            INBOX_CLEANUP_LEASE,
            &owner,
            retention,
            batch,
            Duration::from_secs(60),
        )
        .await
    }

    pub(crate) async fn purge_with_lease(
        &self,
        lease: &str,
        owner: &str,
        retention: Duration,
        batch: usize,
        ttl: Duration,
    ) -> Result<Option<u64>, DbErr> {
        let names = [lease.to_owned()];
        let clock = self.outbox.clock();
        self.store.ensure_leases(&self.db, &names).await?;
        let now = clock.now();
        if self
            .store
            .acquire(&self.db, owner, &names, now, now + to_delta(ttl))
            .await?
            == 0
        {
            return Ok(None);
        }
        let cutoff = now - to_delta(retention);
        let batch = batch.max(1);
        let mut total = 0u64;
        let result = async {
            loop {
                let deleted = self.delete_batch(lease, cutoff, batch).await?;
                total += deleted;
                if deleted < batch as u64 {
                    return Ok::<_, DbErr>(());
                }
                let now = clock.now();
                if self
                    .store
                    .acquire(&self.db, owner, &names, now, now + to_delta(ttl))
                    .await?
                    == 0
                {
                    return Ok(());
                }
            }
        }
        .await;
        let released = self
            .store
            .release(&self.db, owner, Some(&names), clock.now())
            .await;
        result?;
        released?;
        if total > 0 {
            let mut labels = self.labels.clone();
            let table = if lease == INBOX_CLEANUP_LEASE {
                "inbox"
            } else {
                "outbox"
            };
            labels.push(metrics::Label::new("table", table));
            metrics::counter!(metric::PURGED_ROWS, labels).increment(total);
        }
        Ok(Some(total))
    }

    async fn delete_batch(
        &self,
        lease: &str,
        cutoff: DateTime<Utc>,
        batch: usize,
    ) -> Result<u64, DbErr> {
        let backend = self.backend();
        let c = self.outbox.columns();
        let mut sql = Sql::new(backend);
        if lease == INBOX_CLEANUP_LEASE {
            let table = quote_table(backend, self.outbox.inbox_table());
            let received = self.q(inbox_columns::RECEIVED_AT);
            if backend == DbBackend::MySql {
                sql.push(&format!("DELETE FROM {table} WHERE {received} < "))
                    .bind(sql::timestamp(backend, cutoff))
                    .push(&format!(" ORDER BY {received} LIMIT {batch}"));
            } else {
                let key = format!(
                    "({}, {})",
                    self.q(inbox_columns::MESSAGE_ID),
                    self.q(inbox_columns::CONSUMER)
                );
                sql.push(&format!(
                    "DELETE FROM {table} WHERE {key} IN (SELECT {key_list} FROM {table} WHERE {received} < ",
                    key_list = &key[1..key.len() - 1],
                ))
                .bind(sql::timestamp(backend, cutoff))
                .push(&format!(" LIMIT {batch})"));
            }
        } else {
            let table = self.outbox_table();
            let condition = format!(
                "{status} = 'published' AND {published} < ",
                status = self.q(c.status),
                published = self.q(c.published_at)
            );
            if backend == DbBackend::MySql {
                sql.push(&format!("DELETE FROM {table} WHERE {condition}"))
                    .bind(sql::timestamp(backend, cutoff))
                    .push(&format!(" ORDER BY {} LIMIT {batch}", self.q(c.seq)));
            } else {
                let seq = self.q(c.seq);
                sql.push(&format!(
                    "DELETE FROM {table} WHERE {seq} IN (SELECT {seq} FROM {table} WHERE {condition}"
                ))
                .bind(sql::timestamp(backend, cutoff))
                .push(&format!(" ORDER BY {seq} LIMIT {batch})"));
            }
        }
        Ok(self.db.execute_raw(sql.build()).await?.rows_affected())
    }
}
