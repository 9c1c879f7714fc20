//! The instances that share leases: heartbeats, live instances, removal. The relays'
//! instance table by default (grouped by `worker_keys`), the consumers' with
//! [`Store::for_consumer_leases`] (grouped by `consumer`).

use chrono::{DateTime, Utc};

use sea_orm::{ConnectionTrait, DbBackend, DbErr};

use super::dialect::{self, quote};

use super::store::Store;

/// Which instances [`Store::live_instances`] returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Members<'a> {
    /// Every live instance.
    All,
    /// Those whose group is `NULL`: relays without worker keys (the relays that share
    /// partitions and the SQLite relay lease by rendezvous hashing; keyed relays never take
    /// those leases).
    Ungrouped,
    /// Those of one group: the instances of one consumer.
    Group(&'a str),
}

impl Store {
    /// Registers or refreshes the instance `id`, live until `until`; `group` is its group
    /// column: a relay's comma-separated worker keys (`None` for a relay that claims every
    /// row), a consumer instance's consumer name.
    pub(crate) async fn heartbeat<C: ConnectionTrait>(
        &self,
        conn: &C,
        id: &str,
        description: &str,
        group: Option<&str>,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<(), DbErr> {
        let q = |name: &str| quote(self.backend, name);
        let mut sql = self.sql();
        let group_column = self.leases.group_column;
        sql.push("INSERT INTO ")
            .table(&self.leases.instances)
            .push(&format!(
                " ({}, {}, {}, {}, {}, {}) VALUES (",
                q("instance_id"),
                q("description"),
                q("started_at"),
                q("heartbeat_at"),
                q("expires_at"),
                q(group_column)
            ));
        sql.bind(dialect::text(id))
            .push(", ")
            .bind(dialect::text(description))
            .push(", ")
            .bind(self.ts(now))
            .push(", ")
            .bind(self.ts(now))
            .push(", ")
            .bind(self.ts(until))
            .push(", ")
            .bind(dialect::opt_text(group.map(str::to_owned)))
            .push(")");
        let updates = ["description", "heartbeat_at", "expires_at", group_column];
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

    /// Ids of the [`Members`] live at `now`, sorted.
    pub(crate) async fn live_instances<C: ConnectionTrait>(
        &self,
        conn: &C,
        now: DateTime<Utc>,
        members: Members<'_>,
    ) -> Result<Vec<String>, DbErr> {
        let q = |name: &str| quote(self.backend, name);
        let mut sql = self.sql();
        sql.push(&format!("SELECT {} AS id FROM ", q("instance_id")))
            .table(&self.leases.instances)
            .push(&format!(" WHERE {} > ", q("expires_at")))
            .bind(self.ts(now));
        match members {
            Members::All => {}
            Members::Ungrouped => {
                sql.push(&format!(" AND {} IS NULL", q(self.leases.group_column)));
            }
            Members::Group(group) => {
                sql.push(&format!(" AND {} = ", q(self.leases.group_column)))
                    .bind(dialect::text(group));
            }
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
        sql.push("DELETE FROM ").table(&self.leases.instances);
        match id {
            Some(id) => {
                sql.push(&format!(" WHERE {} = ", q("instance_id")))
                    .bind(dialect::text(id));
            }
            None => {
                sql.push(&format!(" WHERE {} < ", q("expires_at")))
                    .bind(self.ts(expired_before));
            }
        }
        Ok(conn.execute_raw(sql.build()).await?.rows_affected())
    }
}
