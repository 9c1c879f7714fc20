//! The benchmark's MariaDB: a binlog-enabled server of its own (`outbox_tests`' private
//! server), its databases, the CPU time of `mariadbd`, and the binlog position.

use std::time::Duration;

use outbox_tests::binlog_mariadb::BinlogMariaDb;
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement};

use crate::log::{BoxError, connect};
use crate::measure::task_cpu;

/// The server, stopped by [`stop`](Self::stop) (or when dropped).
pub(super) struct BenchServer {
    server: BinlogMariaDb,
    admin: DatabaseConnection,
}

impl BenchServer {
    /// Starts a server of its own.
    pub(super) async fn start() -> Result<Self, BoxError> {
        let server = BinlogMariaDb::dedicated("outbox-bench binlog", &[])
            .await
            .ok_or("MariaDB's server binaries (mariadb-install-db, mariadbd) are not installed")?;
        let admin = connect(&server.admin_url(), 2).await?;
        Ok(Self { server, admin })
    }

    /// The server's version and the settings that matter here.
    pub(super) async fn describe(&self) -> Result<String, BoxError> {
        let row = self
            .admin
            .query_one_raw(Statement::from_string(
                DbBackend::MySql,
                "SELECT CONCAT(VERSION(), ' binlog_format=', @@binlog_format, \
                 ' sync_binlog=', @@sync_binlog, ' innodb_flush_log_at_trx_commit=', \
                 @@innodb_flush_log_at_trx_commit) AS v",
            ))
            .await?
            .ok_or("no version")?;
        Ok(row.try_get("", "v")?)
    }

    /// A fresh database `name` (dropped first if a run left it); its URL.
    pub(super) async fn database(&self, name: &str) -> Result<String, BoxError> {
        for statement in [
            format!("DROP DATABASE IF EXISTS {name}"),
            format!("CREATE DATABASE {name}"),
        ] {
            self.admin.execute_unprepared(&statement).await?;
        }
        Ok(format!(
            "mysql://root@127.0.0.1:{}/{name}",
            self.server.port()
        ))
    }

    /// `mariadbd`'s CPU time so far (every thread).
    pub(super) fn cpu(&self) -> Duration {
        self.server
            .pid()
            .and_then(|pid| task_cpu(&pid.to_string()))
            .unwrap_or_default()
    }

    /// Stops the server.
    pub(super) async fn stop(mut self) {
        let _ = self.admin.close_by_ref().await;
        self.server.stop().await;
    }
}

/// The server's binlog position now (`@@gtid_binlog_pos`).
pub(super) async fn binlog_position(db: &DatabaseConnection) -> Result<String, BoxError> {
    let row = db
        .query_one_raw(Statement::from_string(
            DbBackend::MySql,
            "SELECT @@gtid_binlog_pos AS p",
        ))
        .await?
        .ok_or("no binlog position")?;
    Ok(row.try_get("", "p")?)
}

/// Sets the position a log relay of `slot` resumes from (what `pg_replication_slot_advance`
/// is to the PostgreSQL benchmark: the stream starts right before the round's events).
pub(super) async fn store_position(
    db: &DatabaseConnection,
    slots_table: &str,
    slot: &str,
    position: &str,
) -> Result<(), BoxError> {
    db.execute_raw(Statement::from_sql_and_values(
        DbBackend::MySql,
        format!("UPDATE {slots_table} SET acknowledged_lsn = ? WHERE slot = ?"),
        [position.into(), slot.into()],
    ))
    .await?;
    Ok(())
}

/// Waits until `slot`'s first start finished its backfill (it streams from then on).
pub(super) async fn wait_backfilled(
    db: &DatabaseConnection,
    slots_table: &str,
    slot: &str,
) -> Result<(), BoxError> {
    let statement = Statement::from_sql_and_values(
        DbBackend::MySql,
        format!(
            "SELECT COUNT(*) AS n FROM {slots_table} WHERE slot = ? AND backfilled_at IS NOT NULL"
        ),
        [slot.into()],
    );
    for _ in 0..600 {
        let row = db.query_one_raw(statement.clone()).await?;
        if row.is_some_and(|row| row.try_get::<i64>("", "n").unwrap_or(0) == 1) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(format!("slot {slot} was not backfilled within 30 s").into())
}
