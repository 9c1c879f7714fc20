//! The server side of the log benchmarks: its settings, its replication slots, and
//! waiting for a slot to stream.

use std::time::{Duration, Instant};

use sea_orm::sqlx::{self, PgPool};
use sea_orm::{ConnectionTrait as _, DatabaseConnection};

use super::BoxError;

/// The settings that matter to the figures, as `name=value` pairs.
pub(super) async fn settings(db: &DatabaseConnection) -> Result<String, BoxError> {
    let pool = db.get_postgres_connection_pool();
    let rows: Vec<(String, String)> = sqlx::query_as(
        "SELECT name, current_setting(name) FROM pg_settings WHERE name IN \
         ('wal_level', 'fsync', 'synchronous_commit', 'shared_buffers', 'max_wal_size', \
          'logical_decoding_work_mem', 'max_replication_slots', 'max_wal_senders', \
          'wal_writer_delay', 'server_version') ORDER BY name",
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .iter()
        .map(|(name, value)| format!("{name}={value}"))
        .collect::<Vec<_>>()
        .join(" "))
}

/// The database name of `url`.
pub(super) fn database_of(url: &str) -> &str {
    url.rsplit_once('/')
        .map_or("", |(_, name)| name)
        .split('?')
        .next()
        .unwrap_or("")
}

/// Ends the streams of the replication slots of `url`'s database and drops the slots
/// (they keep a database from being dropped).
pub(super) async fn drop_slots(admin: &DatabaseConnection, url: &str) -> Result<(), BoxError> {
    let name = database_of(url);
    admin
        .execute_unprepared(&format!(
            "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots \
             WHERE database = '{name}' AND active_pid IS NOT NULL"
        ))
        .await?;
    let drop = format!(
        "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots \
         WHERE database = '{name}'"
    );
    let mut last = None;
    for _ in 0..50 {
        match admin.execute_unprepared(&drop).await {
            Ok(_) => return Ok(()),
            // A terminated walsender may still hold its slot for a moment.
            Err(error) => last = Some(error),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(last.map_or_else(|| "cannot drop the slots".into(), Into::into))
}

/// Waits until a walsender streams from `slot` (`START_REPLICATION` done).
pub(super) async fn wait_streaming(pool: &PgPool, slot: &str) -> Result<(), BoxError> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let streaming: Option<(i32,)> = sqlx::query_as(
            "SELECT 1 FROM pg_stat_replication r JOIN pg_replication_slots s \
             ON s.active_pid = r.pid WHERE s.slot_name = $1 AND r.state = 'streaming'",
        )
        .bind(slot)
        .fetch_optional(pool)
        .await?;
        if streaming.is_some() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("slot {slot} never streamed").into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until no walsender holds `slot` (a stopped stream's server side is gone).
pub(super) async fn wait_released(pool: &PgPool, slot: &str) -> Result<(), BoxError> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let active: Option<(bool,)> =
            sqlx::query_as("SELECT active FROM pg_replication_slots WHERE slot_name = $1")
                .bind(slot)
                .fetch_optional(pool)
                .await?;
        if !active.is_some_and(|(active,)| active) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("slot {slot} is still in use").into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Moves `slot` to the current end of the WAL (decoding what lies between, outside any
/// measurement): the next stream starts right before what is written next.
pub(super) async fn advance_slot(pool: &PgPool, slot: &str) -> Result<(), BoxError> {
    sqlx::query("SELECT pg_replication_slot_advance($1, pg_current_wal_lsn())")
        .bind(slot)
        .execute(pool)
        .await?;
    Ok(())
}

/// `CHECKPOINT`, so that no checkpoint of the writes lands in a measurement.
pub(super) async fn checkpoint(pool: &PgPool) -> Result<(), BoxError> {
    sqlx::query("CHECKPOINT").execute(pool).await?;
    Ok(())
}
