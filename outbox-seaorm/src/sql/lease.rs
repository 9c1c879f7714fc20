//! Lease rows: creating, acquiring, releasing and reading them, and the fencing token of
//! one. The relays' table by default; a consumer's partition leases
//! ([`crate::inbox::partitioned`]) run the same statements on the consumers' table
//! ([`Store::for_consumer_leases`]). The instances that share the leases: `instance.rs`.

use chrono::{DateTime, Utc};

use sea_orm::{ConnectionTrait, DbBackend, DbErr};

use super::dialect::{self, quote};

use super::store::Store;

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

impl Store {
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
            sql.push(verb).table(&self.leases.leases).push(&format!(
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
                    .bind(dialect::text(name.clone()))
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
            .table(&self.leases.leases)
            .push(&format!(
                " SET {token} = CASE WHEN {owner} = ",
                token = q("token"),
                owner = q("owner")
            ))
            .bind(dialect::text(owner))
            .push(&format!(
                " THEN {token} ELSE {token} + 1 END, {acq} = CASE WHEN {owner} = ",
                token = q("token"),
                acq = q("acquired_at"),
                owner = q("owner")
            ))
            .bind(dialect::text(owner))
            .push(&format!(" THEN {} ELSE ", q("acquired_at")))
            .bind(self.ts(now))
            .push(&format!(" END, {} = ", q("expires_at")))
            .bind(self.ts(until))
            .push(&format!(", {} = ", q("owner")))
            .bind(dialect::text(owner))
            .push(&format!(" WHERE {} IN (", q("name")))
            .string_list(names)
            .push(&format!(") AND ({} = ", q("owner")))
            .bind(dialect::text(owner))
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
            .table(&self.leases.leases)
            .push(&format!(
                " SET {} = NULL, {} = ",
                q("owner"),
                q("expires_at")
            ))
            .bind(self.ts(now))
            .push(&format!(" WHERE {} = ", q("owner")))
            .bind(dialect::text(owner));
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
            .table(&self.leases.leases)
            .push(&format!(" WHERE {} = ", q("owner")))
            .bind(dialect::text(owner))
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

    /// The fencing token of `name` when `owner` holds it beyond `valid_after`, share-locked
    /// until the transaction ends (PostgreSQL, MariaDB; SQLite has one writer at a time),
    /// so that nobody takes the lease over before this transaction ends.
    pub(crate) async fn held_token<C: ConnectionTrait>(
        &self,
        conn: &C,
        name: &str,
        owner: &str,
        valid_after: DateTime<Utc>,
    ) -> Result<Option<i64>, DbErr> {
        let q = |name: &str| quote(self.backend, name);
        let mut sql = self.sql();
        sql.push(&format!("SELECT {} AS token FROM ", q("token")))
            .table(&self.leases.leases)
            .push(&format!(" WHERE {} = ", q("name")))
            .bind(dialect::text(name))
            .push(&format!(" AND {} = ", q("owner")))
            .bind(dialect::text(owner))
            .push(&format!(" AND {} > ", q("expires_at")))
            .bind(self.ts(valid_after));
        match self.backend {
            DbBackend::Postgres => {
                sql.push(" FOR SHARE");
            }
            DbBackend::MySql => {
                sql.push(" LOCK IN SHARE MODE");
            }
            _ => {}
        }
        let row = conn.query_one_raw(sql.build()).await?;
        row.map(|row| row.try_get::<i64>("", "token")).transpose()
    }

    /// The leases among `names` that `owner` holds beyond `valid_after`, with their fencing
    /// tokens (incremented on every change of owner).
    pub(crate) async fn owned_tokens<C: ConnectionTrait>(
        &self,
        conn: &C,
        owner: &str,
        names: &[String],
        valid_after: DateTime<Utc>,
    ) -> Result<Vec<(String, i64)>, DbErr> {
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let q = |name: &str| quote(self.backend, name);
        let mut sql = self.sql();
        sql.push(&format!(
            "SELECT {} AS name, {} AS token FROM ",
            q("name"),
            q("token")
        ))
        .table(&self.leases.leases)
        .push(&format!(" WHERE {} = ", q("owner")))
        .bind(dialect::text(owner))
        .push(&format!(" AND {} > ", q("expires_at")))
        .bind(self.ts(valid_after))
        .push(&format!(" AND {} IN (", q("name")))
        .string_list(names)
        .push(")");
        let rows = conn.query_all_raw(sql.build()).await?;
        rows.iter()
            .map(|row| Ok((row.try_get("", "name")?, row.try_get("", "token")?)))
            .collect()
    }
}
