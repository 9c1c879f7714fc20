//! Claiming rows: the relay's claim (PostgreSQL and SQLite in one statement, MariaDB in
//! two), the fast path's claim by message id, and its check that rows are at the head of
//! their aggregate.

use chrono::{DateTime, Utc};
use outbox_core::policy::DeadLetterPolicy;
use sea_orm::sea_query::Value;
use sea_orm::{ConnectionTrait, DbBackend, DbErr};

use super::decode::{ClaimedRow, RowDecoder};
use super::dialect::{self, quote, quote_table};
use super::due::Hold;
use super::statement::Sql;
use super::store::Store;
use crate::status::OutboxStatus;

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

/// Puts each aggregate's rows of a batch claimed by priority back in `seq` order, in the
/// places its rows hold: a priority-0 job claimed with an earlier priority-7 job of its
/// aggregate must not run first (the batch runs in its order), while other aggregates keep
/// their priority order.
fn in_aggregate_order(rows: &mut [ClaimedRow]) {
    let shared: Vec<Vec<usize>> = {
        let mut places: std::collections::HashMap<(&str, &str), Vec<usize>> =
            std::collections::HashMap::new();
        for (index, row) in rows.iter().enumerate() {
            places.entry(row.aggregate()).or_default().push(index);
        }
        places
            .into_values()
            .filter(|indexes| indexes.len() > 1)
            .collect()
    };
    for indexes in &shared {
        // Selection by `seq` over the aggregate's places (few rows per aggregate).
        for (n, &place) in indexes.iter().enumerate() {
            let Some(&lowest) = indexes[n..].iter().min_by_key(|&&i| rows[i].seq) else {
                continue;
            };
            rows.swap(place, lowest);
        }
    }
}

impl Store {
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
    /// ORDER BY o.seq LIMIT :limit          -- keyed, with priorities: o.priority, o.seq
    /// FOR UPDATE SKIP LOCKED                                         -- PostgreSQL, MariaDB
    /// ```
    pub(crate) async fn claim<C: ConnectionTrait>(
        &self,
        conn: &C,
        claim: Claim<'_>,
    ) -> Result<Vec<ClaimedRow>, DbErr> {
        let mut rows = if claim.lock && self.backend == DbBackend::MySql {
            self.claim_mysql(conn, claim).await?
        } else {
            self.claim_in_one(conn, claim).await?
        };
        if claim.ordered && self.by_priority(claim) {
            in_aggregate_order(&mut rows);
        }
        Ok(rows)
    }

    /// The claim in one statement (PostgreSQL, SQLite, and MariaDB without locks).
    async fn claim_in_one<C: ConnectionTrait>(
        &self,
        conn: &C,
        claim: Claim<'_>,
    ) -> Result<Vec<ClaimedRow>, DbErr> {
        debug_assert!(
            claim.past.is_none() || !self.by_priority(claim),
            "a claim by priority cannot start past the batches in flight"
        );
        let mut sql = self.sql();
        sql.push("SELECT ").push(&self.select_list);
        self.claim_conditions(&mut sql, claim);
        if let Some(past) = claim.past.filter(|_| claim.lock) {
            self.past_in_flight(&mut sql, claim, past);
        }
        sql.push(&format!(
            " ORDER BY {} LIMIT {}",
            self.claim_order(claim),
            claim.limit
        ));
        if claim.lock && self.backend == DbBackend::Postgres {
            sql.push(" FOR UPDATE SKIP LOCKED");
        }
        let rows = conn.query_all_raw(sql.build()).await?;
        RowDecoder::default().decode_all(&rows)
    }

    /// Whether the claim takes rows by `(priority, seq)`: a keyed claim of an outbox whose
    /// jobs have priorities ([`Outbox::has_priorities`](crate::Outbox::has_priorities)).
    /// Such a claim never starts past the batches in flight ([`PastInFlight`] counts in
    /// `seq` order).
    pub(crate) fn by_priority(&self, claim: Claim<'_>) -> bool {
        claim.worker_keys.is_some() && self.outbox.has_priorities()
    }

    /// `o.seq`, or `o.priority, o.seq` (see [`by_priority`](Self::by_priority)).
    fn claim_order(&self, claim: Claim<'_>) -> String {
        let c = self.outbox.columns();
        let seq = quote(self.backend, c.seq);
        if self.by_priority(claim) {
            format!("o.{}, o.{seq}", quote(self.backend, c.priority))
        } else {
            format!("o.{seq}")
        }
    }

    /// `FROM outbox o WHERE …` of the claim (see [`claim`](Self::claim)).
    fn claim_conditions(&self, sql: &mut Sql, claim: Claim<'_>) {
        let c = self.outbox.columns();
        let table = quote_table(self.backend, self.outbox.outbox_table());
        let q = |name: &str| quote(self.backend, name);
        sql.push(&format!(" FROM {table} o WHERE "));
        self.due(sql, "o", claim.now);
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
            sql.push(" AND ");
            self.aggregate_hold(sql, claim.now, claim.dead_letters, keyed, Hold::Free);
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
            " AND (SELECT count(*) FROM (SELECT 1 FROM {table} s WHERE "
        ));
        self.due(sql, "s", claim.now);
        sql.push(&format!(" AND s.{} <= ", q(c.seq)))
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
        let order = self.claim_order(claim);
        sql.push(&format!(" ORDER BY {order} LIMIT {candidates}"));
        let seqs = conn
            .query_all_raw(sql.build())
            .await?
            .iter()
            .map(|row| dialect::read_i64(row, "seq"))
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
        sql.seq_list(&seqs).push(") AND ");
        self.due(&mut sql, "o", claim.now);
        sql.push(&format!(
            " ORDER BY {order} LIMIT {} FOR UPDATE SKIP LOCKED",
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
        rows.iter()
            .map(|row| dialect::read_i64(row, "seq"))
            .collect()
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
            sql.bind(dialect::uuid(self.backend, *id));
        }
        sql.push(&format!(") ORDER BY o.{}", q(c.seq)));
        if lock && self.backend != DbBackend::Sqlite {
            sql.push(" FOR UPDATE SKIP LOCKED");
        }
        let rows = conn.query_all_raw(sql.build()).await?;
        RowDecoder::default().decode_all(&rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Outbox;

    #[test]
    fn a_priority_batch_keeps_each_aggregates_rows_in_seq_order() {
        let row = |seq: i64, aggregate: &str| ClaimedRow {
            seq,
            attempts: 0,
            worker_key: Some("mail".into()),
            retryable: true,
            envelope: Err(super::super::Unreadable {
                event_type: "shop.mail.requested.v1".into(),
                aggregate_type: "order".into(),
                aggregate_id: aggregate.into(),
                error: DbErr::Custom("test".into()),
            }),
        };
        // Claimed by (priority, seq): o-1's priority-0 row (seq 9) came before its
        // priority-7 rows (seqs 2 and 5); o-2 and o-3 have one row each or are in order.
        let mut rows = vec![
            row(9, "o-1"),
            row(7, "o-2"),
            row(2, "o-1"),
            row(3, "o-3"),
            row(5, "o-1"),
            row(8, "o-3"),
        ];
        in_aggregate_order(&mut rows);
        let seqs: Vec<i64> = rows.iter().map(|row| row.seq).collect();
        assert_eq!(seqs, [2, 7, 5, 3, 9, 8]);
    }

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
