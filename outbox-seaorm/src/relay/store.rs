//! The relay's SQL: claiming rows, marking them, leases and instance heartbeats. Every
//! statement is written out per backend here; see the [relay documentation](super) for the
//! algorithm and the exact claim query.

use chrono::{DateTime, Utc};
use outbox_core::policy::DeadLetterPolicy;
use sea_orm::sea_query::Value;
use sea_orm::{ConnectionTrait, DbBackend, DbErr, FromQueryResult, QueryResult};

use outbox_core::Envelope;

use crate::config::Outbox;
use crate::record::OutboxRecord;
use crate::relay::sql::{self, Sql, quote, quote_table};
use crate::relay::tables::RelayTables;
use crate::schema::OutboxStatus;

/// Longest `last_error` stored, in characters.
pub(crate) const MAX_ERROR_CHARS: usize = 2_000;

/// One claimed row. The envelope may fail to decode (a poison row written by another
/// tool); the key columns are read on their own so the row can still be dead-lettered and
/// its aggregate held back.
#[derive(Debug)]
pub(crate) struct ClaimedRow {
    pub(crate) seq: i64,
    pub(crate) attempts: i32,
    pub(crate) event_type: String,
    pub(crate) aggregate_type: String,
    pub(crate) aggregate_id: String,
    /// The envelope, or why it cannot be read. Taken (moved out) when published.
    pub(crate) envelope: Result<Envelope, DbErr>,
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
}

/// The relay's statements for one outbox on one backend.
#[derive(Debug, Clone)]
pub(crate) struct Store {
    outbox: Outbox,
    backend: DbBackend,
    tables: RelayTables,
    /// `o."seq" AS "seq", …`: every column under its standard name.
    select_list: String,
}

fn standard_names(outbox: &Outbox) -> [(&'static str, &'static str); 20] {
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
    ]
}

/// Truncates an error message for `last_error`.
pub(crate) fn truncate_error(message: &str) -> String {
    match message.char_indices().nth(MAX_ERROR_CHARS) {
        Some((cut, _)) => format!("{}…", &message[..cut]),
        None => message.to_owned(),
    }
}

impl Store {
    pub(crate) fn new(outbox: &Outbox, backend: DbBackend) -> Self {
        let select_list = standard_names(outbox)
            .iter()
            .map(|(column, name)| {
                format!("o.{} AS {}", quote(backend, column), quote(backend, name))
            })
            .collect::<Vec<_>>()
            .join(", ");
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
    /// b.aggregate_id = o.aggregate_id AND b.seq < o.seq` for alias `b`.
    fn same_aggregate_before(&self, sql: &mut Sql, alias: &str, statuses: &[OutboxStatus]) {
        let c = self.outbox.columns();
        let q = |name: &str| quote(self.backend, name);
        // A single status as `=`, so that partial indexes `WHERE status = '…'` apply.
        let condition = match statuses {
            [status] => format!("= '{}'", status.as_str()),
            _ => format!(
                "IN ({})",
                statuses
                    .iter()
                    .map(|status| format!("'{}'", status.as_str()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        sql.push(&format!(
            "{alias}.{status_col} {condition} AND {alias}.{at} = o.{at} AND {alias}.{ai} = o.{ai} \
             AND {alias}.{seq} < o.{seq}",
            status_col = q(c.status),
            at = q(c.aggregate_type),
            ai = q(c.aggregate_id),
            seq = q(c.seq),
        ));
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
    ///   AND NOT EXISTS (SELECT 1 FROM outbox d WHERE d.status = 'dead'
    ///         AND <same aggregate> AND d.seq < o.seq)                -- ordered + Block
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
        sql.push(&format!(
            " ORDER BY o.{} LIMIT {}",
            quote(self.backend, c.seq),
            claim.limit
        ));
        if claim.lock && self.backend == DbBackend::Postgres {
            sql.push(" FOR UPDATE SKIP LOCKED");
        }
        let rows = conn.query_all_raw(sql.build()).await?;
        rows.iter().map(claimed_row).collect()
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
            sql.push(&format!(" AND o.{} IN (", q(c.partition)))
                .int_list(partitions)
                .push(")");
        }
        if claim.ordered {
            sql.push(&format!(" AND NOT EXISTS (SELECT 1 FROM {table} b WHERE "));
            self.same_aggregate_before(sql, "b", &[OutboxStatus::Pending]);
            sql.push(&format!(
                " AND b.{} > 0 AND b.{} > ",
                q(c.attempts),
                q(c.next_attempt_at)
            ))
            .bind(self.ts(claim.now))
            .push(")");
            if claim.dead_letters == DeadLetterPolicy::Block {
                sql.push(&format!(" AND NOT EXISTS (SELECT 1 FROM {table} d WHERE "));
                self.same_aggregate_before(sql, "d", &[OutboxStatus::Dead]);
                sql.push(")");
            }
        }
    }

    /// The claim on MariaDB, in two steps. A locking read through a secondary index leaves
    /// InnoDB locks on the secondary entries of the rows it skips; the relay that owns
    /// those rows then waits for them when its `UPDATE` changes `status` (an indexed
    /// column), and two relays deadlock. So: (1) a plain read of candidate `seq`s with the
    /// whole condition, through any index; (2) `SELECT … FORCE INDEX (PRIMARY) WHERE seq
    /// IN (…) AND status = 'pending' AND next_attempt_at <= :now ORDER BY seq LIMIT :n FOR
    /// UPDATE SKIP LOCKED`, which locks clustered records only. Unordered relays compete
    /// for the same first rows: they read four times the batch size of candidates.
    async fn claim_mysql<C: ConnectionTrait>(
        &self,
        conn: &C,
        claim: Claim<'_>,
    ) -> Result<Vec<ClaimedRow>, DbErr> {
        let c = self.outbox.columns();
        let q = |name: &str| quote(self.backend, name);
        let candidates = if claim.partitions.is_some() {
            claim.limit
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
        rows.iter().map(claimed_row).collect()
    }

    /// Rows of `seqs` that have an earlier pending row of their aggregate outside `seqs`
    /// (held by someone else: the fast path or a relay), or an earlier dead row when
    /// `dead_letters` is [`DeadLetterPolicy::Block`].
    pub(crate) async fn not_at_head<C: ConnectionTrait>(
        &self,
        conn: &C,
        seqs: &[i64],
        dead_letters: DeadLetterPolicy,
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
            DeadLetterPolicy::Block => &[OutboxStatus::Pending, OutboxStatus::Dead],
            _ => &[OutboxStatus::Pending],
        };
        self.same_aggregate_before(&mut sql, "b", statuses);
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
        rows.iter().map(claimed_row).collect()
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
        sql.push("UPDATE ")
            .table(self.outbox.outbox_table())
            .push(&format!(
                " SET {} = 'published', {} = ",
                q(c.status),
                q(c.published_at)
            ))
            .bind(self.ts(now))
            .push(&format!(" WHERE {} IN (", q(c.seq)))
            .seq_list(seqs)
            .push(&format!(") AND {} = 'pending'", q(c.status)));
        Ok(conn.execute_raw(sql.build()).await?.rows_affected())
    }

    /// A failed attempt: `attempts`, `next_attempt_at`, `last_error`; `dead` instead of a
    /// next attempt.
    pub(crate) async fn mark_failed<C: ConnectionTrait>(
        &self,
        conn: &C,
        seq: i64,
        attempts: i32,
        next_attempt_at: Option<DateTime<Utc>>,
        error: &str,
    ) -> Result<u64, DbErr> {
        let c = self.outbox.columns();
        let q = |name: &str| quote(self.backend, name);
        let mut sql = self.sql();
        sql.push("UPDATE ")
            .table(self.outbox.outbox_table())
            .push(" SET ");
        match next_attempt_at {
            Some(at) => {
                sql.push(&format!("{} = ", q(c.next_attempt_at)))
                    .bind(self.ts(at));
            }
            None => {
                sql.push(&format!("{} = 'dead'", q(c.status)));
            }
        }
        sql.push(&format!(", {} = ", q(c.attempts)))
            .bind(Value::Int(Some(attempts)))
            .push(&format!(", {} = ", q(c.last_error)))
            .bind(sql::text(truncate_error(error)))
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

    /// The leases `owner` holds beyond `valid_after`; with `lock`, share-locked until the
    /// transaction ends, so that nobody takes them over meanwhile (PostgreSQL, MariaDB).
    pub(crate) async fn owned<C: ConnectionTrait>(
        &self,
        conn: &C,
        owner: &str,
        valid_after: DateTime<Utc>,
        lock: bool,
    ) -> Result<Vec<String>, DbErr> {
        let q = |name: &str| quote(self.backend, name);
        let mut sql = self.sql();
        sql.push(&format!("SELECT {} AS name FROM ", q("name")))
            .table(&self.tables.leases)
            .push(&format!(" WHERE {} = ", q("owner")))
            .bind(sql::text(owner))
            .push(&format!(" AND {} > ", q("expires_at")))
            .bind(self.ts(valid_after));
        if lock {
            match self.backend {
                DbBackend::Postgres => {
                    sql.push(" FOR SHARE");
                }
                DbBackend::MySql => {
                    sql.push(" LOCK IN SHARE MODE");
                }
                _ => {}
            }
        }
        let rows = conn.query_all_raw(sql.build()).await?;
        rows.iter()
            .map(|row| row.try_get::<String>("", "name"))
            .collect()
    }

    // ---- instances -------------------------------------------------------------------

    /// Registers or refreshes the instance `id`, live until `until`.
    pub(crate) async fn heartbeat<C: ConnectionTrait>(
        &self,
        conn: &C,
        id: &str,
        description: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<(), DbErr> {
        let q = |name: &str| quote(self.backend, name);
        let mut sql = self.sql();
        sql.push("INSERT INTO ")
            .table(&self.tables.instances)
            .push(&format!(
                " ({}, {}, {}, {}, {}) VALUES (",
                q("instance_id"),
                q("description"),
                q("started_at"),
                q("heartbeat_at"),
                q("expires_at")
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
            .push(")");
        let updates = ["description", "heartbeat_at", "expires_at"];
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

    /// Ids of the instances live at `now`, sorted.
    pub(crate) async fn live_instances<C: ConnectionTrait>(
        &self,
        conn: &C,
        now: DateTime<Utc>,
    ) -> Result<Vec<String>, DbErr> {
        let q = |name: &str| quote(self.backend, name);
        let mut sql = self.sql();
        sql.push(&format!("SELECT {} AS id FROM ", q("instance_id")))
            .table(&self.tables.instances)
            .push(&format!(" WHERE {} > ", q("expires_at")))
            .bind(self.ts(now))
            .push(&format!(" ORDER BY {}", q("instance_id")));
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

fn claimed_row(row: &QueryResult) -> Result<ClaimedRow, DbErr> {
    if let Some(row) = row.try_as_pg_row() {
        return claimed_pg_row(row);
    }
    Ok(ClaimedRow {
        seq: sql::read_i64(row, "seq")?,
        attempts: row.try_get("", "attempts")?,
        event_type: row.try_get("", "event_type")?,
        aggregate_type: row.try_get("", "aggregate_type")?,
        aggregate_id: row.try_get("", "aggregate_id")?,
        envelope: OutboxRecord::from_query_result(row, "").map(|record| record.envelope),
    })
}

/// The PostgreSQL fast path of [`claimed_row`]: the envelope's columns by position (the
/// order of [`standard_names`]) with their native types, without a lookup by name per
/// column and without the bookkeeping columns the relay does not need. A relay decodes
/// every row it publishes: this halves its CPU time per row.
fn claimed_pg_row(row: &sea_orm::sqlx::postgres::PgRow) -> Result<ClaimedRow, DbErr> {
    use outbox_core::envelope::EnvelopeParts;
    use sea_orm::sqlx::Row as _;
    use uuid::Uuid;

    fn get<'r, T>(row: &'r sea_orm::sqlx::postgres::PgRow, index: usize) -> Result<T, DbErr>
    where
        T: sea_orm::sqlx::Decode<'r, sea_orm::sqlx::Postgres>
            + sea_orm::sqlx::Type<sea_orm::sqlx::Postgres>,
    {
        row.try_get(index)
            .map_err(|error| DbErr::Type(format!("outbox column #{index}: {error}")))
    }
    let seq: i64 = get(row, 0)?;
    let event_type: String = get(row, 2)?;
    let aggregate_type: String = get(row, 4)?;
    let aggregate_id: String = get(row, 5)?;
    let attempts: i32 = get(row, 15)?;
    let envelope = (|| {
        let headers = match get::<serde_json::Value>(row, 11)? {
            serde_json::Value::Object(map) => map
                .into_iter()
                .map(|(name, value)| match value {
                    serde_json::Value::String(text) => (name, text),
                    other => (name, other.to_string()),
                })
                .collect(),
            _ => Default::default(),
        };
        let version: i32 = get(row, 3)?;
        let envelope = Envelope::from_parts(EnvelopeParts {
            message_id: get::<Uuid>(row, 1)?,
            event_type: event_type.clone(),
            occurred_at: get(row, 12)?,
            correlation_id: get(row, 7)?,
            causation_id: get(row, 8)?,
            traceparent: get(row, 9)?,
            tracestate: get(row, 10)?,
            aggregate_type: aggregate_type.clone(),
            aggregate_id: aggregate_id.clone(),
            headers,
            payload: get(row, 13)?,
        })
        .map_err(|error| DbErr::Type(format!("outbox column `event_type`: {error}")))?;
        if i64::from(envelope.version) != i64::from(version) {
            return Err(DbErr::Type(format!(
                "outbox column `version`: {version} disagrees with event type `{event_type}`"
            )));
        }
        Ok(envelope)
    })();
    Ok(ClaimedRow {
        seq,
        attempts,
        event_type,
        aggregate_type,
        aggregate_id,
        envelope,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claim_sql_per_backend() {
        let outbox = Outbox::default();
        let store = Store::new(&outbox, DbBackend::Postgres);
        assert!(
            store
                .select_list
                .starts_with(r#"o."seq" AS "seq", o."message_id""#)
        );
        let long = "é".repeat(3_000);
        let truncated = truncate_error(&long);
        assert_eq!(truncated.chars().count(), MAX_ERROR_CHARS + 1);
        assert_eq!(truncate_error("short"), "short");
    }
}
