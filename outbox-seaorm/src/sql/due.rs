//! When a pending row is due, and when the per-aggregate order holds it back: the
//! conditions the claim, the fast path's head check and the status report share, each
//! written once.

use chrono::{DateTime, Utc};
use outbox_core::policy::DeadLetterPolicy;

use super::dialect::{quote, quote_table};
use super::statement::Sql;
use super::store::Store;
use crate::status::{HOLDING, OutboxStatus};

/// Which way [`Store::aggregate_hold`] states the per-aggregate conditions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hold {
    /// True when the row is held back.
    Held,
    /// True when the row may go (what a claim needs).
    Free,
}

/// `= '<status>'` for one status (so that partial indexes `WHERE status = '…'` apply), `IN
/// ('<status>', …)` for several.
pub(crate) fn status_condition(statuses: &[OutboxStatus]) -> String {
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

impl Store {
    /// `<alias>.` (nothing for an empty alias).
    fn prefix(alias: &str) -> String {
        if alias.is_empty() {
            String::new()
        } else {
            format!("{alias}.")
        }
    }

    /// Appends `(<alias>.attempts = 0 OR <alias>.next_attempt_at <= :now)`: a pending row
    /// that never failed is due at once, one in backoff when its time has come.
    pub(crate) fn due_time(&self, sql: &mut Sql, alias: &str, now: DateTime<Utc>) {
        let c = self.outbox.columns();
        let a = Self::prefix(alias);
        sql.push(&format!(
            "({a}{} = 0 OR {a}{} <= ",
            quote(self.backend, c.attempts),
            quote(self.backend, c.next_attempt_at)
        ))
        .bind(self.ts(now))
        .push(")");
    }

    /// Appends `<alias>.status = 'pending' AND <due time>`: the row is claimable.
    pub(crate) fn due(&self, sql: &mut Sql, alias: &str, now: DateTime<Utc>) {
        let a = Self::prefix(alias);
        sql.push(&format!(
            "{a}{} = 'pending' AND ",
            quote(self.backend, self.outbox.columns().status)
        ));
        self.due_time(sql, alias, now);
    }

    /// Appends `<alias>.attempts > 0 AND <alias>.next_attempt_at > :now`: a pending row in
    /// backoff.
    fn in_backoff(&self, sql: &mut Sql, alias: &str, now: DateTime<Utc>) {
        let c = self.outbox.columns();
        sql.push(&format!(
            "{alias}.{} > 0 AND {alias}.{} > ",
            quote(self.backend, c.attempts),
            quote(self.backend, c.next_attempt_at)
        ))
        .bind(self.ts(now));
    }

    /// Appends `b.status IN ('<status>', …) AND b.aggregate_type = o.aggregate_type AND
    /// b.aggregate_id = o.aggregate_id AND b.seq < o.seq` for alias `b`, and `AND
    /// b.worker_key = o.worker_key` when `per_worker_key` (keyed relays keep the order of an
    /// aggregate within a worker key).
    pub(crate) fn same_aggregate_before(
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

    /// Appends the per-aggregate conditions on the row `o` of an ordered claim: an earlier
    /// pending row of its aggregate is in backoff, or (with [`DeadLetterPolicy::Block`]) an
    /// earlier row of its aggregate is dead or failed; [`Hold::Held`] states that the row is
    /// held back by one, [`Hold::Free`] that it is held back by none. Only rows of the same
    /// worker key count when `per_worker_key`.
    ///
    /// On PostgreSQL each per-row check sits behind a check of the whole table that runs
    /// once per statement (an `InitPlan` on a small partial index): with no row in backoff
    /// (or none dead or failed) anywhere, the per-row check is not evaluated at all.
    pub(crate) fn aggregate_hold(
        &self,
        sql: &mut Sql,
        now: DateTime<Utc>,
        dead_letters: DeadLetterPolicy,
        per_worker_key: bool,
        hold: Hold,
    ) {
        let c = self.outbox.columns();
        let table = quote_table(self.backend, self.outbox.outbox_table());
        let q = |name: &str| quote(self.backend, name);
        let guarded = self.backend == sea_orm::DbBackend::Postgres;
        let (exists, guard_join, group_join) = match hold {
            Hold::Held => ("EXISTS", " AND ", " OR "),
            Hold::Free => ("NOT EXISTS", " OR ", " AND "),
        };
        if hold == Hold::Held {
            sql.push("(");
        }
        sql.push("(");
        if guarded {
            sql.push(&format!(
                "{exists} (SELECT 1 FROM {table} r WHERE r.{} = 'pending' AND ",
                q(c.status)
            ));
            self.in_backoff(sql, "r", now);
            sql.push(")").push(guard_join);
        }
        sql.push(&format!("{exists} (SELECT 1 FROM {table} b WHERE "));
        self.same_aggregate_before(sql, "b", &[OutboxStatus::Pending], per_worker_key);
        sql.push(" AND ");
        self.in_backoff(sql, "b", now);
        sql.push("))");
        if dead_letters == DeadLetterPolicy::Block {
            sql.push(group_join).push("(");
            if guarded {
                sql.push(&format!(
                    "{exists} (SELECT 1 FROM {table} h WHERE h.{} {})",
                    q(c.status),
                    status_condition(HOLDING)
                ))
                .push(guard_join);
            }
            sql.push(&format!("{exists} (SELECT 1 FROM {table} d WHERE "));
            self.same_aggregate_before(sql, "d", HOLDING, per_worker_key);
            sql.push("))");
        }
        if hold == Hold::Held {
            sql.push(")");
        }
    }

    /// Appends a condition on the row `o` that is true when the claim holds it back (see
    /// [`aggregate_hold`](Self::aggregate_hold)); `1 = 0` when not `ordered` (nothing is
    /// held back then).
    pub(crate) fn held_back(
        &self,
        sql: &mut Sql,
        now: DateTime<Utc>,
        ordered: bool,
        dead_letters: DeadLetterPolicy,
    ) {
        if ordered {
            self.aggregate_hold(sql, now, dead_letters, false, Hold::Held);
        } else {
            sql.push("1 = 0");
        }
    }
}
