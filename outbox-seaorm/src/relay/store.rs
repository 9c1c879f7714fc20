//! The relay's SQL: claiming rows, marking them, leases and instance heartbeats. Every
//! statement is written out per backend here; see the [relay documentation](super) for the
//! algorithm and the exact claim query.

use chrono::{DateTime, Utc};
use outbox_core::policy::DeadLetterPolicy;
use sea_orm::sea_query::Value;
use sea_orm::{ConnectionTrait, DbBackend, DbErr, FromQueryResult, QueryResult, RuntimeErr};

use outbox_core::Envelope;

use crate::config::Outbox;
use crate::record::OutboxRecord;
use crate::relay::sql::{self, Sql, quote, quote_table};
use crate::relay::tables::RelayTables;
use crate::schema::OutboxStatus;

/// How [`Store::owned`] locks the lease rows it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LeaseLock {
    /// A plain read.
    None,
    /// Share-locked until the transaction ends; waits for a lease being taken over.
    Share,
    /// Share-locked, or at once a [lock-not-available](is_lock_not_available) error. For a
    /// pipelined relay's claim ahead: InnoDB queues a share request behind a waiting
    /// exclusive one (another relay taking a lease over), which itself waits for the share
    /// lock of this relay's batch in flight, which the relay marks only once the claim ahead
    /// returns. The database sees no cycle; `NOWAIT` breaks it.
    ShareNoWait,
}

/// Whether `error` is a lock that `NOWAIT` did not get: PostgreSQL `55P03`
/// (`lock_not_available`), MariaDB 1205 (`ER_LOCK_WAIT_TIMEOUT`).
pub(crate) fn is_lock_not_available(error: &DbErr) -> bool {
    let (DbErr::Query(RuntimeErr::SqlxError(error)) | DbErr::Exec(RuntimeErr::SqlxError(error))) =
        error
    else {
        return false;
    };
    let Some(database) = error.as_database_error() else {
        return false;
    };
    database.code().as_deref() == Some("55P03")
        || database
            .try_downcast_ref::<sea_orm::error::SqlxMySqlError>()
            .is_some_and(|mysql| mysql.number() == 1205)
}

/// One claimed row. The envelope may fail to decode (a poison row written by another
/// tool); the key columns are then read on their own so the row can still be
/// dead-lettered and its aggregate held back.
#[derive(Debug)]
pub(crate) struct ClaimedRow {
    pub(crate) seq: i64,
    pub(crate) attempts: i32,
    /// The row's worker key (job-queue mode).
    pub(crate) worker_key: Option<String>,
    /// `false`: a failed attempt marks the row `failed` (job-queue mode).
    pub(crate) retryable: bool,
    /// The envelope, or why it cannot be read. Lent to the publisher while it publishes
    /// (see [`super::decide`]).
    pub(crate) envelope: Result<Envelope, Unreadable>,
}

/// A row whose envelope cannot be read: its key columns and the reason.
#[derive(Debug)]
pub(crate) struct Unreadable {
    pub(crate) event_type: String,
    pub(crate) aggregate_type: String,
    pub(crate) aggregate_id: String,
    pub(crate) error: DbErr,
}

impl Unreadable {
    /// Stands in for an envelope lent to the publisher (allocates nothing).
    pub(crate) fn lent() -> Self {
        Self {
            event_type: String::new(),
            aggregate_type: String::new(),
            aggregate_id: String::new(),
            error: DbErr::Custom(String::new()),
        }
    }
}

impl ClaimedRow {
    /// The event type, from the envelope or the row.
    pub(crate) fn event_type(&self) -> &str {
        match &self.envelope {
            Ok(envelope) => &envelope.event_type,
            Err(unreadable) => &unreadable.event_type,
        }
    }

    /// `(aggregate_type, aggregate_id)`, from the envelope or the row.
    pub(crate) fn key(&self) -> (&str, &str) {
        match &self.envelope {
            Ok(envelope) => (&envelope.aggregate_type, &envelope.aggregate_id),
            Err(unreadable) => (&unreadable.aggregate_type, &unreadable.aggregate_id),
        }
    }
}

/// Statuses that hold back the later rows of their aggregate under
/// [`DeadLetterPolicy::Block`]: rows the relay gave up on.
pub(crate) const HOLDING: &[OutboxStatus] = &[OutboxStatus::Dead, OutboxStatus::Failed];

/// What a failed attempt leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AfterFailure {
    /// Stays `pending`, due again at this time.
    RetryAt(DateTime<Utc>),
    /// `dead`: too many attempts, or a permanent error.
    Dead,
    /// `failed`: not retryable (job-queue mode).
    Failed,
}

/// What to claim.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Claim<'a> {
    pub(crate) now: DateTime<Utc>,
    /// Only these partitions (`None`: all).
    pub(crate) partitions: Option<&'a [i32]>,
    pub(crate) limit: usize,
    /// Per-aggregate order: skip rows behind an earlier row in backoff (and behind a dead
    /// row with [`DeadLetterPolicy::Block`]).
    pub(crate) ordered: bool,
    pub(crate) dead_letters: DeadLetterPolicy,
    /// `FOR UPDATE SKIP LOCKED` (PostgreSQL, MariaDB).
    pub(crate) lock: bool,
    /// Job-queue mode: only rows with one of these worker keys (`None`: every row); the
    /// per-aggregate conditions then look at rows of the same worker key only.
    pub(crate) worker_keys: Option<&'a [String]>,
    /// A claim ahead that starts past the batches in flight (PostgreSQL; see
    /// [`PastInFlight`]).
    pub(crate) past: Option<PastInFlight>,
}

/// A claim ahead (PostgreSQL) that starts past the rows of the batches this relay has in
/// flight, instead of trying, and skipping, each of their locked rows on the way (about
/// 2.5 µs per locked row, measured with `EXPLAIN ANALYZE`).
///
/// Starting past them is only right when no other claimable row lies below them: a row
/// committed late inside their range (producers take `seq`s in one order and commit in
/// another), a row a batch left pending. Passing over such a row while taking later rows
/// of its aggregate would break per-aggregate order. So the claim, in the same statement
/// (one snapshot), counts the pending, due rows of its partitions up to [`last`](Self::last)
/// and takes rows only when the count is exactly the rows in flight: the batch being
/// published (pending, locked) and the batch being marked beside the claim, which are
/// pending until that mark commits and none after it (a batch whose rows all leave
/// `pending`). Every other row adds to the count, so any such row makes the claim take
/// nothing, and the relay claims again from the start (see `Relay::claim_locked`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PastInFlight {
    /// The highest `seq` of the batches in flight.
    pub(crate) last: i64,
    /// Rows of the batch being published.
    pub(crate) publishing: i64,
    /// The batch being marked beside the claim, when there is one: a row of it that its
    /// mark takes out of `pending` (the mark commits atomically: this row tells whether the
    /// claim's snapshot sees it), and its row count.
    pub(crate) marking: Option<(i64, i64)>,
}

/// The relay's statements for one outbox on one backend.
#[derive(Debug, Clone)]
pub(crate) struct Store {
    outbox: Outbox,
    backend: DbBackend,
    tables: RelayTables,
    /// The columns a claim reads. PostgreSQL: `o."seq", o."message_id", …`, the columns of
    /// an envelope plus `seq` and `attempts`, in the order [`PgColumn`] numbers them (read by
    /// position, see [`RowDecoder`]). Other backends: `o."seq" AS "seq", …`, every column
    /// under its standard name (read by name through [`OutboxRecord`]).
    select_list: String,
}

/// Positions of the columns of a PostgreSQL claim ([`Store::select_list`]).
struct PgColumn;

impl PgColumn {
    const SEQ: usize = 0;
    const MESSAGE_ID: usize = 1;
    const EVENT_TYPE: usize = 2;
    const VERSION: usize = 3;
    const AGGREGATE_TYPE: usize = 4;
    const AGGREGATE_ID: usize = 5;
    const CORRELATION_ID: usize = 6;
    const CAUSATION_ID: usize = 7;
    const TRACEPARENT: usize = 8;
    const TRACESTATE: usize = 9;
    const HEADERS: usize = 10;
    const OCCURRED_AT: usize = 11;
    const PAYLOAD: usize = 12;
    const ATTEMPTS: usize = 13;
    const WORKER_KEY: usize = 14;
    const RETRYABLE: usize = 15;

    fn names(outbox: &Outbox) -> [&'static str; 16] {
        let c = outbox.columns();
        [
            c.seq,
            c.message_id,
            c.event_type,
            c.version,
            c.aggregate_type,
            c.aggregate_id,
            c.correlation_id,
            c.causation_id,
            c.traceparent,
            c.tracestate,
            c.headers,
            c.occurred_at,
            c.payload,
            c.attempts,
            c.worker_key,
            c.retryable,
        ]
    }
}

fn standard_names(outbox: &Outbox) -> [(&'static str, &'static str); 22] {
    let c = outbox.columns();
    [
        (c.seq, "seq"),
        (c.message_id, "message_id"),
        (c.event_type, "event_type"),
        (c.version, "version"),
        (c.aggregate_type, "aggregate_type"),
        (c.aggregate_id, "aggregate_id"),
        (c.partition, "partition"),
        (c.correlation_id, "correlation_id"),
        (c.causation_id, "causation_id"),
        (c.traceparent, "traceparent"),
        (c.tracestate, "tracestate"),
        (c.headers, "headers"),
        (c.occurred_at, "occurred_at"),
        (c.payload, "payload"),
        (c.status, "status"),
        (c.attempts, "attempts"),
        (c.next_attempt_at, "next_attempt_at"),
        (c.last_error, "last_error"),
        (c.published_at, "published_at"),
        (c.created_at, "created_at"),
        (c.worker_key, "worker_key"),
        (c.retryable, "retryable"),
    ]
}

impl Store {
    pub(crate) fn new(outbox: &Outbox, backend: DbBackend) -> Self {
        let select_list = if backend == DbBackend::Postgres {
            PgColumn::names(outbox)
                .iter()
                .map(|column| format!("o.{}", quote(backend, column)))
                .collect::<Vec<_>>()
                .join(", ")
        } else {
            standard_names(outbox)
                .iter()
                .map(|(column, name)| {
                    format!("o.{} AS {}", quote(backend, column), quote(backend, name))
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        Self {
            outbox: outbox.clone(),
            backend,
            tables: RelayTables::of(outbox),
            select_list,
        }
    }

    pub(crate) fn backend(&self) -> DbBackend {
        self.backend
    }

    pub(crate) fn tables(&self) -> &RelayTables {
        &self.tables
    }

    fn sql(&self) -> Sql {
        Sql::new(self.backend)
    }

    fn ts(&self, at: DateTime<Utc>) -> Value {
        sql::timestamp(self.backend, at)
    }

    /// Appends `b.status IN ('<status>', …) AND b.aggregate_type = o.aggregate_type AND
    /// b.aggregate_id = o.aggregate_id AND b.seq < o.seq` for alias `b`, and `AND
    /// b.worker_key = o.worker_key` when `per_worker_key` (keyed relays keep the order of an
    /// aggregate within a worker key).
    fn same_aggregate_before(
        &self,
        sql: &mut Sql,
        alias: &str,
        statuses: &[OutboxStatus],
        per_worker_key: bool,
    ) {
        let c = self.outbox.columns();
        let q = |name: &str| quote(self.backend, name);
        let condition = status_condition(statuses);
        sql.push(&format!(
            "{alias}.{status_col} {condition} AND {alias}.{at} = o.{at} AND {alias}.{ai} = o.{ai} \
             AND {alias}.{seq} < o.{seq}",
            status_col = q(c.status),
            at = q(c.aggregate_type),
            ai = q(c.aggregate_id),
            seq = q(c.seq),
        ));
        if per_worker_key {
            sql.push(&format!(" AND {alias}.{wk} = o.{wk}", wk = q(c.worker_key)));
        }
    }

    /// Appends a condition on the row `o` that is true when the claim holds it back: with
    /// `ordered`, an earlier pending row of its aggregate is in backoff, or (with
    /// [`DeadLetterPolicy::Block`]) an earlier row of its aggregate is dead or failed.
    /// `1 = 0` when not `ordered` (nothing is held back then). On PostgreSQL each check sits
    /// behind a check of the whole table that runs once, as in the claim.
    pub(crate) fn held_back(
        &self,
        sql: &mut Sql,
        now: DateTime<Utc>,
        ordered: bool,
        dead_letters: DeadLetterPolicy,
    ) {
        if !ordered {
            sql.push("1 = 0");
            return;
        }
        let c = self.outbox.columns();
        let table = quote_table(self.backend, self.outbox.outbox_table());
        let q = |name: &str| quote(self.backend, name);
        let guarded = self.backend == DbBackend::Postgres;
        sql.push("((");
        if guarded {
            sql.push(&format!(
                "EXISTS (SELECT 1 FROM {table} r WHERE r.{} = 'pending' AND r.{} > 0 AND r.{} > ",
                q(c.status),
                q(c.attempts),
                q(c.next_attempt_at)
            ))
            .bind(self.ts(now))
            .push(") AND ");
        }
        sql.push(&format!("EXISTS (SELECT 1 FROM {table} b WHERE "));
        self.same_aggregate_before(sql, "b", &[OutboxStatus::Pending], false);
        sql.push(&format!(
            " AND b.{} > 0 AND b.{} > ",
            q(c.attempts),
            q(c.next_attempt_at)
        ))
        .bind(self.ts(now))
        .push("))");
        if dead_letters == DeadLetterPolicy::Block {
            sql.push(" OR (");
            if guarded {
                sql.push(&format!(
                    "EXISTS (SELECT 1 FROM {table} h WHERE h.{} {}) AND ",
                    q(c.status),
                    status_condition(HOLDING)
                ));
            }
            sql.push(&format!("EXISTS (SELECT 1 FROM {table} d WHERE "));
            self.same_aggregate_before(sql, "d", HOLDING, false);
            sql.push("))");
        }
        sql.push(")");
    }

    /// Claims up to `claim.limit` due pending rows in `seq` order.
    ///
    /// ```sql
    /// SELECT <columns> FROM outbox o
    /// WHERE o.status = 'pending' AND o.next_attempt_at <= :now
    ///   AND o.partition IN (<owned partitions>)                      -- leased modes
    ///   AND NOT EXISTS (SELECT 1 FROM outbox b WHERE b.status = 'pending'
    ///         AND b.aggregate_type = o.aggregate_type AND b.aggregate_id = o.aggregate_id
    ///         AND b.seq < o.seq AND b.next_attempt_at > :now)        -- ordered
    ///   AND NOT EXISTS (SELECT 1 FROM outbox d WHERE d.status IN ('dead', 'failed')
    ///         AND <same aggregate> AND d.seq < o.seq)                -- ordered + Block
    ///   AND o.worker_key IN (<keys>)                                 -- keyed relays
    /// ORDER BY o.seq LIMIT :limit
    /// FOR UPDATE SKIP LOCKED                                         -- PostgreSQL, MariaDB
    /// ```
    pub(crate) async fn claim<C: ConnectionTrait>(
        &self,
        conn: &C,
        claim: Claim<'_>,
    ) -> Result<Vec<ClaimedRow>, DbErr> {
        if claim.lock && self.backend == DbBackend::MySql {
            return self.claim_mysql(conn, claim).await;
        }
        let c = self.outbox.columns();
        let mut sql = self.sql();
        sql.push("SELECT ").push(&self.select_list);
        self.claim_conditions(&mut sql, claim);
        if let Some(past) = claim.past.filter(|_| claim.lock) {
            self.past_in_flight(&mut sql, claim, past);
        }
        sql.push(&format!(
            " ORDER BY o.{} LIMIT {}",
            quote(self.backend, c.seq),
            claim.limit
        ));
        if claim.lock && self.backend == DbBackend::Postgres {
            sql.push(" FOR UPDATE SKIP LOCKED");
        }
        let rows = conn.query_all_raw(sql.build()).await?;
        RowDecoder::default().decode_all(&rows)
    }

    /// `FROM outbox o WHERE …` of the claim (see [`claim`](Self::claim)).
    fn claim_conditions(&self, sql: &mut Sql, claim: Claim<'_>) {
        let c = self.outbox.columns();
        let table = quote_table(self.backend, self.outbox.outbox_table());
        let q = |name: &str| quote(self.backend, name);
        sql.push(&format!(
            " FROM {table} o WHERE o.{} = 'pending' AND (o.{} = 0 OR o.{} <= ",
            q(c.status),
            q(c.attempts),
            q(c.next_attempt_at)
        ))
        .bind(self.ts(claim.now))
        .push(")");
        if let Some(partitions) = claim.partitions {
            sql.push(" AND ");
            partition_condition(sql, &format!("o.{}", q(c.partition)), partitions);
        }
        let keyed = claim.worker_keys.is_some();
        if let Some(keys) = claim.worker_keys {
            sql.push(&format!(" AND o.{} IN (", q(c.worker_key)))
                .string_list(keys)
                .push(")");
        }
        if claim.ordered {
            // On PostgreSQL each per-row check sits behind a check of the whole table
            // that runs once per claim (an `InitPlan` on a small partial index): with no
            // row in backoff (or none dead or failed) anywhere, the per-row check is not
            // evaluated at all.
            let guarded = self.backend == DbBackend::Postgres;
            sql.push(" AND (");
            if guarded {
                sql.push(&format!(
                    "NOT EXISTS (SELECT 1 FROM {table} r WHERE r.{status} = 'pending' \
                     AND r.{attempts} > 0 AND r.{next} > ",
                    status = q(c.status),
                    attempts = q(c.attempts),
                    next = q(c.next_attempt_at)
                ))
                .bind(self.ts(claim.now))
                .push(") OR ");
            }
            sql.push(&format!("NOT EXISTS (SELECT 1 FROM {table} b WHERE "));
            self.same_aggregate_before(sql, "b", &[OutboxStatus::Pending], keyed);
            sql.push(&format!(
                " AND b.{} > 0 AND b.{} > ",
                q(c.attempts),
                q(c.next_attempt_at)
            ))
            .bind(self.ts(claim.now))
            .push("))");
            if claim.dead_letters == DeadLetterPolicy::Block {
                sql.push(" AND (");
                if guarded {
                    sql.push(&format!(
                        "NOT EXISTS (SELECT 1 FROM {table} h WHERE h.{} {}) OR ",
                        q(c.status),
                        status_condition(HOLDING)
                    ));
                }
                sql.push(&format!("NOT EXISTS (SELECT 1 FROM {table} d WHERE "));
                self.same_aggregate_before(sql, "d", HOLDING, keyed);
                sql.push("))");
            }
        }
    }

    /// `AND o.seq > :last AND (SELECT count(*) FROM (SELECT 1 FROM outbox s WHERE s.status
    /// = 'pending' AND <due> AND s.seq <= :last AND <partitions, keys> ORDER BY s.seq LIMIT
    /// :in_flight + 1) AS s) = :publishing [+ CASE WHEN
    /// (SELECT p.status FROM outbox p WHERE p.seq = :probe) = 'pending' THEN :marking ELSE
    /// 0 END]` (see [`PastInFlight`]). The count does not depend on the row: PostgreSQL
    /// evaluates it once, before the scan, and scans nothing when it differs.
    fn past_in_flight(&self, sql: &mut Sql, claim: Claim<'_>, past: PastInFlight) {
        let c = self.outbox.columns();
        let table = quote_table(self.backend, self.outbox.outbox_table());
        let q = |name: &str| quote(self.backend, name);
        sql.push(&format!(" AND o.{} > ", q(c.seq)))
            .bind(Value::BigInt(Some(past.last)));
        sql.push(&format!(
            " AND (SELECT count(*) FROM (SELECT 1 FROM {table} s WHERE s.{} = 'pending' \
             AND (s.{} = 0 OR s.{} <= ",
            q(c.status),
            q(c.attempts),
            q(c.next_attempt_at)
        ))
        .bind(self.ts(claim.now))
        .push(&format!(") AND s.{} <= ", q(c.seq)))
        .bind(Value::BigInt(Some(past.last)));
        if let Some(partitions) = claim.partitions {
            sql.push(" AND ");
            partition_condition(sql, &format!("s.{}", q(c.partition)), partitions);
        }
        if let Some(keys) = claim.worker_keys {
            sql.push(&format!(" AND s.{} IN (", q(c.worker_key)))
                .string_list(keys)
                .push(")");
        }
        // In `seq` order, and no further than one row more than can be in flight: the
        // count stays a walk of the pending index from its start, whatever the statistics
        // (a generic plan counting every row of the table by a sequential scan took 21 ms
        // instead of 0.9 after a few thousand batches).
        let in_flight = past.publishing + past.marking.map_or(0, |(_, rows)| rows);
        sql.push(&format!(" ORDER BY s.{} LIMIT ", q(c.seq)))
            .bind(Value::BigInt(Some(in_flight.saturating_add(1))))
            .push(") AS s) = ")
            .bind(Value::BigInt(Some(past.publishing)));
        if let Some((probe, count)) = past.marking {
            sql.push(&format!(
                " + CASE WHEN (SELECT p.{} FROM {table} p WHERE p.{} = ",
                q(c.status),
                q(c.seq)
            ))
            .bind(Value::BigInt(Some(probe)))
            .push(") = 'pending' THEN ")
            .bind(Value::BigInt(Some(count)))
            .push(" ELSE 0 END");
        }
    }

    /// The claim on MariaDB, in two steps. A locking read through a secondary index leaves
    /// InnoDB locks on the secondary entries of the rows it skips; the relay that owns
    /// those rows then waits for them when its `UPDATE` changes `status` (an indexed
    /// column), and two relays deadlock. So: (1) a plain read of candidate `seq`s with the
    /// whole condition, through any index; (2) `SELECT … FORCE INDEX (PRIMARY) WHERE seq
    /// IN (…) AND status = 'pending' AND next_attempt_at <= :now ORDER BY seq LIMIT :n FOR
    /// UPDATE SKIP LOCKED`, which locks clustered records only. Unordered relays compete
    /// for the same first rows: they read four times the batch size of candidates; a
    /// leased relay reads three times the batch size, since the batches it has in flight
    /// while it claims the next one (pipelining: the batch being published and the one
    /// being marked beside the claim) are still pending.
    async fn claim_mysql<C: ConnectionTrait>(
        &self,
        conn: &C,
        claim: Claim<'_>,
    ) -> Result<Vec<ClaimedRow>, DbErr> {
        let c = self.outbox.columns();
        let q = |name: &str| quote(self.backend, name);
        let candidates = if claim.partitions.is_some() {
            claim.limit.saturating_mul(3)
        } else {
            claim.limit.saturating_mul(4).min(10_000)
        };
        let mut sql = self.sql();
        sql.push(&format!("SELECT o.{seq} AS seq", seq = q(c.seq)));
        self.claim_conditions(&mut sql, claim);
        sql.push(&format!(" ORDER BY o.{} LIMIT {candidates}", q(c.seq)));
        let seqs = conn
            .query_all_raw(sql.build())
            .await?
            .iter()
            .map(|row| sql::read_i64(row, "seq"))
            .collect::<Result<Vec<i64>, DbErr>>()?;
        if seqs.is_empty() {
            return Ok(Vec::new());
        }
        let mut sql = self.sql();
        sql.push("SELECT ").push(&self.select_list).push(&format!(
            " FROM {} o FORCE INDEX (PRIMARY) WHERE o.{} IN (",
            quote_table(self.backend, self.outbox.outbox_table()),
            q(c.seq)
        ));
        sql.seq_list(&seqs)
            .push(&format!(
                ") AND o.{} = 'pending' AND (o.{} = 0 OR o.{} <= ",
                q(c.status),
                q(c.attempts),
                q(c.next_attempt_at)
            ))
            .bind(self.ts(claim.now))
            .push(&format!(
                ") ORDER BY o.{} LIMIT {} FOR UPDATE SKIP LOCKED",
                q(c.seq),
                claim.limit
            ));
        let rows = conn.query_all_raw(sql.build()).await?;
        RowDecoder::default().decode_all(&rows)
    }

    /// Rows of `seqs` that have an earlier pending row of their aggregate outside `seqs`
    /// (held by someone else: the fast path or a relay), or an earlier dead or failed row
    /// when `dead_letters` is [`DeadLetterPolicy::Block`]; only rows of the same worker key
    /// count when `per_worker_key`.
    pub(crate) async fn not_at_head<C: ConnectionTrait>(
        &self,
        conn: &C,
        seqs: &[i64],
        dead_letters: DeadLetterPolicy,
        per_worker_key: bool,
    ) -> Result<Vec<i64>, DbErr> {
        if seqs.is_empty() {
            return Ok(Vec::new());
        }
        let c = self.outbox.columns();
        let table = quote_table(self.backend, self.outbox.outbox_table());
        let q = |name: &str| quote(self.backend, name);
        let mut sql = self.sql();
        sql.push(&format!(
            "SELECT o.{seq} AS {seq} FROM {table} o WHERE o.{seq} IN (",
            seq = q(c.seq)
        ))
        .seq_list(seqs)
        .push(&format!(") AND EXISTS (SELECT 1 FROM {table} b WHERE "));
        let statuses: &[OutboxStatus] = match dead_letters {
            DeadLetterPolicy::Block => &[
                OutboxStatus::Pending,
                OutboxStatus::Dead,
                OutboxStatus::Failed,
            ],
            _ => &[OutboxStatus::Pending],
        };
        self.same_aggregate_before(&mut sql, "b", statuses, per_worker_key);
        sql.push(&format!(" AND b.{} NOT IN (", q(c.seq)))
            .seq_list(seqs)
            .push("))");
        let rows = conn.query_all_raw(sql.build()).await?;
        rows.iter().map(|row| sql::read_i64(row, "seq")).collect()
    }

    /// Pending rows with these message ids, for the fast path, locked when `lock`.
    pub(crate) async fn pending_by_message_id<C: ConnectionTrait>(
        &self,
        conn: &C,
        ids: &[uuid::Uuid],
        lock: bool,
    ) -> Result<Vec<ClaimedRow>, DbErr> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let c = self.outbox.columns();
        let table = quote_table(self.backend, self.outbox.outbox_table());
        let q = |name: &str| quote(self.backend, name);
        let mut sql = self.sql();
        sql.push("SELECT ").push(&self.select_list).push(&format!(
            " FROM {table} o WHERE o.{} = 'pending' AND o.{} IN (",
            q(c.status),
            q(c.message_id)
        ));
        for (i, id) in ids.iter().enumerate() {
            if i > 0 {
                sql.push(", ");
            }
            sql.bind(sql::uuid(self.backend, *id));
        }
        sql.push(&format!(") ORDER BY o.{}", q(c.seq)));
        if lock && self.backend != DbBackend::Sqlite {
            sql.push(" FOR UPDATE SKIP LOCKED");
        }
        let rows = conn.query_all_raw(sql.build()).await?;
        RowDecoder::default().decode_all(&rows)
    }

    /// `UPDATE <outbox>` of rows picked by `seq`; on MariaDB through the primary key
    /// (`FORCE INDEX (PRIMARY)`). InnoDB may otherwise pick the `status` index for `seq IN
    /// (…) AND status = 'pending'` (it does on a small table) and lock, while it scans, every
    /// pending row it passes, releasing the others only afterwards (`READ COMMITTED`). A
    /// claim running meanwhile (another relay, or this relay's claim ahead) then skips such
    /// a row as `SKIP LOCKED` and may take the later rows of its aggregate: out of order.
    fn update_by_seq<'s>(&self, sql: &'s mut Sql) -> &'s mut Sql {
        sql.push("UPDATE ").table(self.outbox.outbox_table());
        if self.backend == DbBackend::MySql {
            sql.push(" FORCE INDEX (PRIMARY)");
        }
        sql
    }

    /// `status = 'published'` for pending rows of `seqs`. Returns the rows changed.
    pub(crate) async fn mark_published<C: ConnectionTrait>(
        &self,
        conn: &C,
        seqs: &[i64],
        now: DateTime<Utc>,
    ) -> Result<u64, DbErr> {
        if seqs.is_empty() {
            return Ok(0);
        }
        let c = self.outbox.columns();
        let q = |name: &str| quote(self.backend, name);
        let mut sql = self.sql();
        self.update_by_seq(&mut sql)
            .push(&format!(
                " SET {} = 'published', {} = ",
                q(c.status),
                q(c.published_at)
            ))
            .bind(self.ts(now))
            .push(" WHERE ")
            .seq_in(&q(c.seq), seqs)
            .push(&format!(" AND {} = 'pending'", q(c.status)));
        Ok(conn.execute_raw(sql.build()).await?.rows_affected())
    }

    /// A failed attempt: `attempts`, `last_error`, and what happens next (see
    /// [`AfterFailure`]).
    pub(crate) async fn mark_failed<C: ConnectionTrait>(
        &self,
        conn: &C,
        seq: i64,
        attempts: i32,
        next: AfterFailure,
        error: &str,
    ) -> Result<u64, DbErr> {
        let c = self.outbox.columns();
        let q = |name: &str| quote(self.backend, name);
        let mut sql = self.sql();
        self.update_by_seq(&mut sql).push(" SET ");
        match next {
            AfterFailure::RetryAt(at) => {
                sql.push(&format!("{} = ", q(c.next_attempt_at)))
                    .bind(self.ts(at));
            }
            AfterFailure::Dead => {
                sql.push(&format!("{} = 'dead'", q(c.status)));
            }
            AfterFailure::Failed => {
                sql.push(&format!("{} = 'failed'", q(c.status)));
            }
        }
        sql.push(&format!(", {} = ", q(c.attempts)))
            .bind(Value::Int(Some(attempts)))
            .push(&format!(", {} = ", q(c.last_error)))
            .bind(sql::text(crate::limits::error_text(error)))
            .push(&format!(
                " WHERE {} = {seq} AND {} = 'pending'",
                q(c.seq),
                q(c.status)
            ));
        Ok(conn.execute_raw(sql.build()).await?.rows_affected())
    }

    // ---- leases ----------------------------------------------------------------------

    /// Creates the lease rows `names` unless they exist.
    pub(crate) async fn ensure_leases<C: ConnectionTrait>(
        &self,
        conn: &C,
        names: &[String],
    ) -> Result<(), DbErr> {
        for chunk in names.chunks(256) {
            let mut sql = self.sql();
            let verb = if self.backend == DbBackend::MySql {
                "INSERT IGNORE INTO "
            } else {
                "INSERT INTO "
            };
            sql.push(verb).table(&self.tables.leases).push(&format!(
                " ({}, {}, {}) VALUES ",
                quote(self.backend, "name"),
                quote(self.backend, "token"),
                quote(self.backend, "expires_at")
            ));
            for (i, name) in chunk.iter().enumerate() {
                if i > 0 {
                    sql.push(", ");
                }
                sql.push("(")
                    .bind(sql::text(name.clone()))
                    .push(", 0, ")
                    .bind(self.ts(DateTime::UNIX_EPOCH))
                    .push(")");
            }
            if self.backend != DbBackend::MySql {
                sql.push(&format!(
                    " ON CONFLICT ({}) DO NOTHING",
                    quote(self.backend, "name")
                ));
            }
            conn.execute_raw(sql.build()).await?;
        }
        Ok(())
    }

    /// Takes or renews the leases `names` for `owner` until `until`: those it owns, those
    /// nobody owns and those whose owner let them expire. Returns the number of rows
    /// changed.
    pub(crate) async fn acquire<C: ConnectionTrait>(
        &self,
        conn: &C,
        owner: &str,
        names: &[String],
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<u64, DbErr> {
        if names.is_empty() {
            return Ok(0);
        }
        let q = |name: &str| quote(self.backend, name);
        let mut sql = self.sql();
        // MariaDB evaluates SET assignments left to right on the updated row: `owner` last.
        sql.push("UPDATE ")
            .table(&self.tables.leases)
            .push(&format!(
                " SET {token} = CASE WHEN {owner} = ",
                token = q("token"),
                owner = q("owner")
            ))
            .bind(sql::text(owner))
            .push(&format!(
                " THEN {token} ELSE {token} + 1 END, {acq} = CASE WHEN {owner} = ",
                token = q("token"),
                acq = q("acquired_at"),
                owner = q("owner")
            ))
            .bind(sql::text(owner))
            .push(&format!(" THEN {} ELSE ", q("acquired_at")))
            .bind(self.ts(now))
            .push(&format!(" END, {} = ", q("expires_at")))
            .bind(self.ts(until))
            .push(&format!(", {} = ", q("owner")))
            .bind(sql::text(owner))
            .push(&format!(" WHERE {} IN (", q("name")))
            .string_list(names)
            .push(&format!(") AND ({} = ", q("owner")))
            .bind(sql::text(owner))
            .push(&format!(
                " OR {} IS NULL OR {} <= ",
                q("owner"),
                q("expires_at")
            ))
            .bind(self.ts(now))
            .push(")");
        Ok(conn.execute_raw(sql.build()).await?.rows_affected())
    }

    /// Gives up `owner`'s leases among `names` (all of them with `None`).
    pub(crate) async fn release<C: ConnectionTrait>(
        &self,
        conn: &C,
        owner: &str,
        names: Option<&[String]>,
        now: DateTime<Utc>,
    ) -> Result<u64, DbErr> {
        if names.is_some_and(<[String]>::is_empty) {
            return Ok(0);
        }
        let q = |name: &str| quote(self.backend, name);
        let mut sql = self.sql();
        sql.push("UPDATE ")
            .table(&self.tables.leases)
            .push(&format!(
                " SET {} = NULL, {} = ",
                q("owner"),
                q("expires_at")
            ))
            .bind(self.ts(now))
            .push(&format!(" WHERE {} = ", q("owner")))
            .bind(sql::text(owner));
        if let Some(names) = names {
            sql.push(&format!(" AND {} IN (", q("name")))
                .string_list(names)
                .push(")");
        }
        Ok(conn.execute_raw(sql.build()).await?.rows_affected())
    }

    /// The leases `owner` holds beyond `valid_after`; with a [`LeaseLock`] other than
    /// `None`, share-locked until the transaction ends, so that nobody takes them over
    /// meanwhile (PostgreSQL, MariaDB).
    pub(crate) async fn owned<C: ConnectionTrait>(
        &self,
        conn: &C,
        owner: &str,
        valid_after: DateTime<Utc>,
        lock: LeaseLock,
    ) -> Result<Vec<String>, DbErr> {
        let q = |name: &str| quote(self.backend, name);
        let mut sql = self.sql();
        sql.push(&format!("SELECT {} AS name FROM ", q("name")))
            .table(&self.tables.leases)
            .push(&format!(" WHERE {} = ", q("owner")))
            .bind(sql::text(owner))
            .push(&format!(" AND {} > ", q("expires_at")))
            .bind(self.ts(valid_after));
        match (lock, self.backend) {
            (LeaseLock::None, _) | (_, DbBackend::Sqlite) => {}
            (LeaseLock::Share, DbBackend::Postgres) => {
                sql.push(" FOR SHARE");
            }
            (LeaseLock::ShareNoWait, DbBackend::Postgres) => {
                sql.push(" FOR SHARE NOWAIT");
            }
            (LeaseLock::Share, _) => {
                sql.push(" LOCK IN SHARE MODE");
            }
            (LeaseLock::ShareNoWait, _) => {
                sql.push(" LOCK IN SHARE MODE NOWAIT");
            }
        }
        let rows = conn.query_all_raw(sql.build()).await?;
        rows.iter()
            .map(|row| row.try_get::<String>("", "name"))
            .collect()
    }

    // ---- instances -------------------------------------------------------------------

    /// Registers or refreshes the instance `id`, live until `until`; `worker_keys` is its
    /// comma-separated worker keys (`None` for a relay that claims every row).
    pub(crate) async fn heartbeat<C: ConnectionTrait>(
        &self,
        conn: &C,
        id: &str,
        description: &str,
        worker_keys: Option<&str>,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<(), DbErr> {
        let q = |name: &str| quote(self.backend, name);
        let mut sql = self.sql();
        sql.push("INSERT INTO ")
            .table(&self.tables.instances)
            .push(&format!(
                " ({}, {}, {}, {}, {}, {}) VALUES (",
                q("instance_id"),
                q("description"),
                q("started_at"),
                q("heartbeat_at"),
                q("expires_at"),
                q("worker_keys")
            ));
        sql.bind(sql::text(id))
            .push(", ")
            .bind(sql::text(description))
            .push(", ")
            .bind(self.ts(now))
            .push(", ")
            .bind(self.ts(now))
            .push(", ")
            .bind(self.ts(until))
            .push(", ")
            .bind(sql::opt_text(worker_keys.map(str::to_owned)))
            .push(")");
        let updates = ["description", "heartbeat_at", "expires_at", "worker_keys"];
        if self.backend == DbBackend::MySql {
            let set: Vec<String> = updates
                .iter()
                .map(|c| format!("{0} = VALUES({0})", q(c)))
                .collect();
            sql.push(" ON DUPLICATE KEY UPDATE ").push(&set.join(", "));
        } else {
            let set: Vec<String> = updates
                .iter()
                .map(|c| format!("{0} = excluded.{0}", q(c)))
                .collect();
            sql.push(&format!(
                " ON CONFLICT ({}) DO UPDATE SET ",
                q("instance_id")
            ))
            .push(&set.join(", "));
        }
        conn.execute_raw(sql.build()).await?;
        Ok(())
    }

    /// Ids of the instances live at `now`, sorted: every one, or (`unkeyed_only`) those
    /// without worker keys — the relays that share partitions and the SQLite relay lease
    /// by rendezvous hashing (keyed relays never take those leases).
    pub(crate) async fn live_instances<C: ConnectionTrait>(
        &self,
        conn: &C,
        now: DateTime<Utc>,
        unkeyed_only: bool,
    ) -> Result<Vec<String>, DbErr> {
        let q = |name: &str| quote(self.backend, name);
        let mut sql = self.sql();
        sql.push(&format!("SELECT {} AS id FROM ", q("instance_id")))
            .table(&self.tables.instances)
            .push(&format!(" WHERE {} > ", q("expires_at")))
            .bind(self.ts(now));
        if unkeyed_only {
            sql.push(&format!(" AND {} IS NULL", q("worker_keys")));
        }
        sql.push(&format!(" ORDER BY {}", q("instance_id")));
        let rows = conn.query_all_raw(sql.build()).await?;
        rows.iter()
            .map(|row| row.try_get::<String>("", "id"))
            .collect()
    }

    /// Removes instance `id` (graceful shutdown), or every instance expired before
    /// `expired_before`.
    pub(crate) async fn remove_instances<C: ConnectionTrait>(
        &self,
        conn: &C,
        id: Option<&str>,
        expired_before: DateTime<Utc>,
    ) -> Result<u64, DbErr> {
        let q = |name: &str| quote(self.backend, name);
        let mut sql = self.sql();
        sql.push("DELETE FROM ").table(&self.tables.instances);
        match id {
            Some(id) => {
                sql.push(&format!(" WHERE {} = ", q("instance_id")))
                    .bind(sql::text(id));
            }
            None => {
                sql.push(&format!(" WHERE {} < ", q("expires_at")))
                    .bind(self.ts(expired_before));
            }
        }
        Ok(conn.execute_raw(sql.build()).await?.rows_affected())
    }
}

/// Turns the rows of a claim into [`ClaimedRow`]s. On PostgreSQL it reads the columns of
/// [`Store::select_list`] by position with their native types and remembers the last event
/// type it validated, so that a batch of one contract parses its name once; elsewhere it
/// reads by name through [`OutboxRecord`]. A relay decodes every row it publishes: this is
/// most of its CPU time per row.
#[derive(Default)]
struct RowDecoder {
    /// The last event type [`Envelope::from_parts`] accepted, its version, and an envelope
    /// of that type with nothing else (no allocation to clone).
    last: Option<(String, u32, Envelope)>,
}

/// `= '<status>'` for one status (so that partial indexes `WHERE status = '…'` apply), `IN
/// ('<status>', …)` for several.
fn status_condition(statuses: &[OutboxStatus]) -> String {
    match statuses {
        [status] => format!("= '{}'", status.as_str()),
        _ => format!(
            "IN ({})",
            statuses
                .iter()
                .map(|status| format!("'{}'", status.as_str()))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Appends the condition that `column` (a partition number) is one of `partitions`: runs
/// of consecutive numbers as `BETWEEN` (a relay usually owns a few such runs; a relay alone
/// owns them all, `BETWEEN 0 AND n − 1`), or an `IN` list when they are scattered. An `IN`
/// list is a linear search per row, which cost about 0.2 ms per claim of 500 rows with 64
/// partitions on PostgreSQL.
fn partition_condition(sql: &mut Sql, column: &str, partitions: &[i32]) {
    let mut sorted = partitions.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut runs: Vec<(i32, i32)> = Vec::new();
    for partition in sorted.iter().copied() {
        match runs.last_mut() {
            Some((_, last)) if last.checked_add(1) == Some(partition) => *last = partition,
            _ => runs.push((partition, partition)),
        }
    }
    if runs.is_empty() || runs.len() > 4 {
        sql.push(&format!("{column} IN ("));
        if sorted.is_empty() {
            sql.push("NULL");
        } else {
            sql.int_list(&sorted);
        }
        sql.push(")");
        return;
    }
    sql.push("(");
    for (i, (first, last)) in runs.iter().enumerate() {
        if i > 0 {
            sql.push(" OR ");
        }
        sql.push(&format!("{column} BETWEEN {first} AND {last}"));
    }
    sql.push(")");
}

/// A column value that failed to decode.
fn column_error(index: usize, error: impl std::fmt::Display) -> DbErr {
    DbErr::Type(format!("outbox column #{index}: {error}"))
}

type PgRow = sea_orm::sqlx::postgres::PgRow;

/// Decodes column `index` after checking that its type is compatible with `T`.
fn pg_get<'r, T>(row: &'r PgRow, index: usize) -> Result<T, DbErr>
where
    T: sea_orm::sqlx::Decode<'r, sea_orm::sqlx::Postgres>
        + sea_orm::sqlx::Type<sea_orm::sqlx::Postgres>,
{
    use sea_orm::sqlx::Row as _;
    row.try_get(index)
        .map_err(|error| column_error(index, error))
}

/// Decodes a text column without sqlx's type check (which compares type names for every
/// value): the text, varchar or name binary format is the UTF-8 string, which decoding
/// validates.
fn pg_text<'r, T>(row: &'r PgRow, index: usize) -> Result<T, DbErr>
where
    T: sea_orm::sqlx::Decode<'r, sea_orm::sqlx::Postgres>,
{
    use sea_orm::sqlx::Row as _;
    row.try_get_unchecked(index)
        .map_err(|error| column_error(index, error))
}

/// The headers column: a JSON object of strings (a non-string value is kept as its JSON
/// text; anything but an object reads as no headers).
fn pg_headers(row: &PgRow) -> Result<std::collections::BTreeMap<String, String>, DbErr> {
    use sea_orm::sqlx::types::Json;
    let index = PgColumn::HEADERS;
    // Nearly always `{}` or an object of strings: decoded straight into the map.
    if let Ok(Json(map)) = pg_get::<Json<std::collections::BTreeMap<String, String>>>(row, index) {
        return Ok(map);
    }
    Ok(match pg_get::<Json<serde_json::Value>>(row, index)?.0 {
        serde_json::Value::Object(map) => map
            .into_iter()
            .map(|(name, value)| match value {
                serde_json::Value::String(text) => (name, text),
                other => (name, other.to_string()),
            })
            .collect(),
        _ => Default::default(),
    })
}

impl RowDecoder {
    fn decode_all(&mut self, rows: &[QueryResult]) -> Result<Vec<ClaimedRow>, DbErr> {
        rows.iter().map(|row| self.decode(row)).collect()
    }

    fn decode(&mut self, row: &QueryResult) -> Result<ClaimedRow, DbErr> {
        if let Some(row) = row.try_as_pg_row() {
            return self.decode_pg(row);
        }
        let seq = sql::read_i64(row, "seq")?;
        let attempts = row.try_get("", "attempts")?;
        let worker_key = row.try_get("", "worker_key")?;
        let retryable = sql::read_bool(row, "", "retryable")?;
        let envelope = match OutboxRecord::from_query_result(row, "") {
            Ok(record) => Ok(record.envelope),
            Err(error) => Err(Unreadable {
                event_type: row.try_get("", "event_type")?,
                aggregate_type: row.try_get("", "aggregate_type")?,
                aggregate_id: row.try_get("", "aggregate_id")?,
                error,
            }),
        };
        Ok(ClaimedRow {
            seq,
            attempts,
            worker_key,
            retryable,
            envelope,
        })
    }

    fn decode_pg(&mut self, row: &PgRow) -> Result<ClaimedRow, DbErr> {
        let seq: i64 = pg_get(row, PgColumn::SEQ)?;
        let attempts: i32 = pg_get(row, PgColumn::ATTEMPTS)?;
        let worker_key: Option<String> = pg_text(row, PgColumn::WORKER_KEY)?;
        let retryable: bool = pg_get(row, PgColumn::RETRYABLE)?;
        let event_type: String = pg_text(row, PgColumn::EVENT_TYPE)?;
        let aggregate_type: String = pg_text(row, PgColumn::AGGREGATE_TYPE)?;
        let aggregate_id: String = pg_text(row, PgColumn::AGGREGATE_ID)?;
        let envelope = self
            .envelope_pg(row, event_type, aggregate_type, aggregate_id)
            .map_err(|unreadable| *unreadable);
        Ok(ClaimedRow {
            seq,
            attempts,
            worker_key,
            retryable,
            envelope,
        })
    }

    /// The envelope of a PostgreSQL row, or the key columns back with the reason it cannot
    /// be read.
    fn envelope_pg(
        &mut self,
        row: &PgRow,
        event_type: String,
        aggregate_type: String,
        aggregate_id: String,
    ) -> Result<Envelope, Box<Unreadable>> {
        let unreadable = |event_type, aggregate_type, aggregate_id, error| {
            Box::new(Unreadable {
                event_type,
                aggregate_type,
                aggregate_id,
                error,
            })
        };
        use outbox_core::envelope::EnvelopeParts;
        use sea_orm::sqlx::types::Json;
        let fields = (|| {
            Ok::<_, DbErr>((
                pg_get::<i32>(row, PgColumn::VERSION)?,
                pg_get::<uuid::Uuid>(row, PgColumn::MESSAGE_ID)?,
                pg_get::<DateTime<Utc>>(row, PgColumn::OCCURRED_AT)?,
                pg_get::<Option<uuid::Uuid>>(row, PgColumn::CORRELATION_ID)?,
                pg_get::<Option<uuid::Uuid>>(row, PgColumn::CAUSATION_ID)?,
                pg_text::<Option<String>>(row, PgColumn::TRACEPARENT)?,
                pg_text::<Option<String>>(row, PgColumn::TRACESTATE)?,
                pg_headers(row)?,
                // The stored text, validated but not parsed into a tree: the broker gets it
                // as the body.
                pg_get::<Json<outbox_core::Payload>>(row, PgColumn::PAYLOAD)?.0,
            ))
        })();
        let (
            stored_version,
            message_id,
            occurred_at,
            correlation_id,
            causation_id,
            traceparent,
            tracestate,
            headers,
            payload,
        ) = match fields {
            Ok(fields) => fields,
            Err(error) => return Err(unreadable(event_type, aggregate_type, aggregate_id, error)),
        };
        let version_error = |event_type: &str| {
            DbErr::Type(format!(
                "outbox column `version`: {stored_version} disagrees with event type \
                 `{event_type}`"
            ))
        };
        // The same event type as the previous row: already validated.
        if let Some((last_type, version, template)) = &self.last
            && *last_type == event_type
        {
            let version = *version;
            if i64::from(version) != i64::from(stored_version) {
                let error = version_error(&event_type);
                return Err(unreadable(event_type, aggregate_type, aggregate_id, error));
            }
            let mut envelope = template.clone();
            envelope.message_id = message_id;
            envelope.event_type = event_type;
            envelope.version = version;
            envelope.occurred_at = occurred_at;
            envelope.correlation_id = correlation_id;
            envelope.causation_id = causation_id;
            envelope.traceparent = traceparent;
            envelope.tracestate = tracestate;
            envelope.aggregate_type = aggregate_type;
            envelope.aggregate_id = aggregate_id;
            envelope.headers = headers;
            envelope.payload = payload;
            return Ok(envelope);
        }
        let parts =
            |event_type: String, aggregate_type: String, aggregate_id: String, headers, payload| {
                EnvelopeParts {
                    message_id,
                    event_type,
                    occurred_at,
                    correlation_id,
                    causation_id,
                    traceparent: traceparent.clone(),
                    tracestate: tracestate.clone(),
                    aggregate_type,
                    aggregate_id,
                    headers,
                    payload,
                }
            };
        let envelope = match Envelope::from_parts(parts(
            event_type.clone(),
            aggregate_type.clone(),
            aggregate_id.clone(),
            headers,
            payload,
        )) {
            Ok(envelope) => envelope,
            Err(error) => {
                let error = DbErr::Type(format!("outbox column `event_type`: {error}"));
                return Err(unreadable(event_type, aggregate_type, aggregate_id, error));
            }
        };
        if i64::from(envelope.version) != i64::from(stored_version) {
            let error = version_error(&event_type);
            return Err(unreadable(event_type, aggregate_type, aggregate_id, error));
        }
        // Remember the type, with an envelope of it holding nothing else.
        if let Ok(template) = Envelope::from_parts(parts(
            event_type.clone(),
            String::new(),
            String::new(),
            Default::default(),
            outbox_core::Payload::null(),
        )) {
            let mut template = template;
            template.event_type = String::new();
            template.traceparent = None;
            template.tracestate = None;
            self.last = Some((event_type, envelope.version, template));
        }
        Ok(envelope)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_as_runs_or_a_list() {
        let condition = |partitions: &[i32]| {
            let mut sql = Sql::new(DbBackend::Postgres);
            partition_condition(&mut sql, "p", partitions);
            sql.build().sql
        };
        let all: Vec<i32> = (0..64).collect();
        assert_eq!(condition(&all), "(p BETWEEN 0 AND 63)");
        assert_eq!(
            condition(&[9, 3, 2, 4, 8, 20]),
            "(p BETWEEN 2 AND 4 OR p BETWEEN 8 AND 9 OR p BETWEEN 20 AND 20)"
        );
        assert_eq!(condition(&[1, 3, 5, 7, 9]), "p IN (1, 3, 5, 7, 9)");
        assert_eq!(condition(&[]), "p IN (NULL)");
        assert_eq!(
            condition(&[i32::MAX, i32::MAX - 1]),
            format!("(p BETWEEN {} AND {})", i32::MAX - 1, i32::MAX)
        );
    }

    #[test]
    fn claim_sql_per_backend() {
        let outbox = Outbox::default();
        let store = Store::new(&outbox, DbBackend::Postgres);
        assert_eq!(
            store.select_list,
            r#"o."seq", o."message_id", o."event_type", o."version", o."aggregate_type", o."aggregate_id", o."correlation_id", o."causation_id", o."traceparent", o."tracestate", o."headers", o."occurred_at", o."payload", o."attempts", o."worker_key", o."retryable""#
        );
        let store = Store::new(&outbox, DbBackend::Sqlite);
        assert!(
            store
                .select_list
                .starts_with(r#"o."seq" AS "seq", o."message_id" AS "message_id""#)
        );
    }

    #[test]
    fn a_claim_past_the_batches_in_flight_counts_the_rows_below_them() {
        let store = Store::new(&Outbox::default(), DbBackend::Postgres);
        let claim = Claim {
            now: "2026-03-01T09:00:00Z".parse().expect("time"),
            partitions: Some(&[0, 1, 2, 3]),
            limit: 500,
            ordered: true,
            dead_letters: DeadLetterPolicy::Block,
            lock: true,
            worker_keys: None,
            past: None,
        };
        let sql_of = |past| {
            let mut sql = store.sql();
            store.past_in_flight(&mut sql, claim, past);
            let statement = sql.build();
            (statement.sql, statement.values.map(|v| v.0.len()))
        };
        let beside_a_mark = PastInFlight {
            last: 1500,
            publishing: 500,
            marking: Some((501, 500)),
        };
        assert_eq!(
            sql_of(beside_a_mark),
            (
                r#" AND o."seq" > $1 AND (SELECT count(*) FROM (SELECT 1 FROM "outbox" s WHERE s."status" = 'pending' AND (s."attempts" = 0 OR s."next_attempt_at" <= $2) AND s."seq" <= $3 AND (s."partition" BETWEEN 0 AND 3) ORDER BY s."seq" LIMIT $4) AS s) = $5 + CASE WHEN (SELECT p."status" FROM "outbox" p WHERE p."seq" = $6) = 'pending' THEN $7 ELSE 0 END"#
                    .to_owned(),
                Some(7)
            )
        );
        let alone = PastInFlight {
            marking: None,
            ..beside_a_mark
        };
        assert!(sql_of(alone).0.ends_with(") AS s) = $5"));
    }
}
