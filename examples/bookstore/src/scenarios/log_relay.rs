//! The log relay in scenarios 3–6 (`--relay log`): the stage of a scenario (its database,
//! broker channel and replication slot), the demo's timings, a relay running in a task of
//! its own, and the prerequisites that skip a scenario instead of failing it.
//!
//! Slots are server-wide on PostgreSQL: each scenario streams from a slot of its own
//! (`bookstore_s<N>_<uuid>`), dropped at its end once its relays stopped (PostgreSQL does
//! not drop a database that still has one; the demo's database cleanup drops a slot a
//! failed scenario left behind). On MariaDB (its binary log) a slot is a row of the
//! outbox's `outbox_log_slots` holding the stored GTID position, gone with the database.

use std::sync::Arc;
use std::time::{Duration, Instant};

use outbox_core::in_process::InProcessBroker;
use outbox_core::policy::Backoff;
use outbox_core::publish::Publisher;
use outbox_seaorm::Outbox;
use outbox_seaorm::relay::log::{LogRelay, LogRelayBuilder, LogRelayError, LogRelayReport};
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::broker::{Channel, DemoPublisher, Outage, Tally};
use crate::env::Env;
use crate::error::DemoError;

/// How long a scenario waits for a relay to stream, publish or stop.
pub(crate) const WAIT: Duration = Duration::from_secs(20);

/// The demo's lease TTL: a standby takes over within it after the active relay died.
pub(crate) const LEASE_TTL: Duration = Duration::from_secs(2);

/// The scenario is skipped when the log relay lacks a prerequisite — a database without
/// a log it reads (SQLite), `wal_level` below `logical`, a role without `REPLICATION`, no
/// free slot, MariaDB without its binary log in row format or without the replication
/// privileges — with the relay's own message, which says what is missing; any other error
/// fails it.
pub(crate) fn failure(error: LogRelayError) -> DemoError {
    match error {
        LogRelayError::NotPostgres { .. }
        | LogRelayError::WalLevel { .. }
        | LogRelayError::NoReplicationPrivilege { .. }
        | LogRelayError::NoFreeSlot { .. }
        | LogRelayError::BinlogSetting { .. }
        | LogRelayError::NoBinlogPrivilege { .. } => DemoError::Skipped {
            reason: format!("--relay log: {error}"),
        },
        other => DemoError::LogRelay(other),
    }
}

/// Where a log scenario plays: its database, its broker channel and its slot.
#[derive(Debug)]
pub(crate) struct LogStage<'a> {
    /// The scenario's database.
    pub(crate) db: &'a DatabaseConnection,
    /// Its URL (the replication connection's, when it carries a password).
    url: &'a str,
    /// The scenario's broker channel.
    pub(crate) channel: &'a Channel,
    /// The scenario's replication slot.
    pub(crate) slot: String,
}

/// Opens scenario `number`'s database and broker channel, plays the scenario on them with
/// a slot of its own, then drops the slot and closes both, whatever happened. A database
/// the log relay cannot use (not PostgreSQL) skips the scenario before anything is set up.
pub(crate) async fn staged<T>(
    env: &Env,
    number: u8,
    outage: Outage,
    play: impl AsyncFnOnce(&LogStage<'_>) -> Result<T, DemoError>,
) -> Result<T, DemoError> {
    let db = env.open_database(number).await?;
    // The log relay's first check, made by its builder: the database is PostgreSQL.
    let probe = LogRelay::builder(db.conn().clone(), Outbox::default(), InProcessBroker::new())
        .slot("bookstore_probe")
        .build();
    if let Err(error) = probe {
        db.close().await;
        return Err(failure(error));
    }
    let channel = match Channel::open(&env.broker, number, outage).await {
        Ok(channel) => channel,
        Err(error) => {
            db.close().await;
            return Err(error);
        }
    };
    let stage = LogStage {
        db: db.conn(),
        url: db.url(),
        channel: &channel,
        slot: format!("bookstore_s{number}_{}", Uuid::now_v7().simple()),
    };
    let result = play(&stage).await;
    drop_slot(stage.db, &stage.slot).await;
    channel.close().await;
    db.close().await;
    result
}

impl LogStage<'_> {
    /// A relay of [`relay`](Self::relay) publishing to a [`Tally`] of the scenario's broker,
    /// started and streaming (the opening of scenarios 3 and 5).
    pub(crate) async fn streaming_relay(
        &self,
        outbox: &Outbox,
        instance: &str,
    ) -> Result<(Arc<Tally<DemoPublisher>>, Running), DemoError> {
        let publisher = Arc::new(Tally::new(self.channel.publisher().await?));
        let relay = self
            .relay(outbox, Arc::clone(&publisher), instance)
            .build()
            .map_err(failure)?;
        let mut relay = Running::start(relay);
        relay.streaming(self).await?;
        Ok((publisher, relay))
    }

    /// A log relay on the scenario's slot with the demo's timings: heartbeats every 200 ms,
    /// status updates at most every 50 ms, a 2 s lease ([`LEASE_TTL`]), a 3 s publish
    /// timeout and a deterministic backoff from 200 ms to 1 s.
    pub(crate) fn relay<P: Publisher + 'static>(
        &self,
        outbox: &Outbox,
        publisher: P,
        instance: &str,
    ) -> LogRelayBuilder<P> {
        let builder = LogRelay::builder(self.db.clone(), outbox.clone(), publisher)
            .slot(&self.slot)
            .instance_id(instance)
            .heartbeat_interval(Duration::from_millis(200))
            .feedback_interval(Duration::from_millis(50))
            .lease_ttl(LEASE_TTL)
            .publish_timeout(Duration::from_secs(3))
            .backoff(
                Backoff::new()
                    .with_min_delay(Duration::from_millis(200))
                    .with_max_delay(Duration::from_secs(1))
                    .with_jitter(false),
            );
        // The pool's settings carry no password; the URL does.
        if has_password(self.url) {
            builder.connection_url(self.url)
        } else {
            builder
        }
    }

    /// Whether the stage is a MariaDB (its binary log) rather than a PostgreSQL.
    pub(crate) fn binlog(&self) -> bool {
        self.db.get_database_backend() == DbBackend::MySql
    }

    /// The slot's confirmed position: what relays acknowledged (PostgreSQL's
    /// `confirmed_flush_lsn`; on MariaDB the GTID position the relay stored).
    pub(crate) async fn confirmed_position(&self) -> Result<String, DemoError> {
        if self.binlog() {
            return Ok(self.stored_position().await?.unwrap_or_default());
        }
        self.text(Statement::from_sql_and_values(
            DbBackend::Postgres,
            "SELECT confirmed_flush_lsn::text AS value FROM pg_replication_slots \
             WHERE slot_name = $1",
            [self.slot.clone().into()],
        ))
        .await
    }

    /// The server's current write position (an LSN, or MariaDB's `@@gtid_binlog_pos`).
    pub(crate) async fn current_position(&self) -> Result<String, DemoError> {
        let query = if self.binlog() {
            "SELECT @@gtid_binlog_pos AS value"
        } else {
            "SELECT pg_current_wal_lsn()::text AS value"
        };
        self.text(Statement::from_string(
            self.db.get_database_backend(),
            query,
        ))
        .await
    }

    /// MariaDB: the GTID position stored for the slot, if any.
    async fn stored_position(&self) -> Result<Option<String>, DemoError> {
        let row = self
            .db
            .query_one_raw(Statement::from_sql_and_values(
                DbBackend::MySql,
                "SELECT acknowledged_lsn AS value FROM outbox_log_slots WHERE slot = ?",
                [self.slot.clone().into()],
            ))
            .await?;
        Ok(row
            .map(|row| row.try_get::<Option<String>>("", "value"))
            .transpose()?
            .flatten())
    }

    /// Whether the slot's confirmed position reached `position`.
    pub(crate) async fn acknowledged(&self, position: &str) -> Result<bool, DemoError> {
        if self.binlog() {
            return Ok(self
                .stored_position()
                .await?
                .is_some_and(|stored| gtids_cover(&stored, position)));
        }
        Ok(self
            .db
            .query_one_raw(Statement::from_sql_and_values(
                DbBackend::Postgres,
                "SELECT confirmed_flush_lsn >= $2::pg_lsn AS done FROM pg_replication_slots \
                 WHERE slot_name = $1",
                [self.slot.clone().into(), position.to_owned().into()],
            ))
            .await?
            .map(|row| row.try_get::<bool>("", "done"))
            .transpose()?
            .unwrap_or(false))
    }

    /// Waits until the slot's confirmed position reached `position`: the relay
    /// acknowledged everything committed before it.
    pub(crate) async fn wait_acknowledged(&self, position: &str) -> Result<(), DemoError> {
        let deadline = Instant::now() + WAIT;
        loop {
            if self.acknowledged(position).await? {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(DemoError::Timeout(format!(
                    "slot {} did not acknowledge {position} within {WAIT:?}",
                    self.slot
                )));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Whether a replication connection streams from the slot now. On MariaDB: a relay
    /// holds the slot's lease and its first start finished (its backfill), so that what the
    /// scenario commits next is streamed. (Not "its stored position caught up with the
    /// server's": the relay's own lease writes keep the server a few transactions ahead.)
    async fn active(&self) -> Result<bool, DemoError> {
        if self.binlog() {
            let row = self
                .db
                .query_one_raw(Statement::from_sql_and_values(
                    DbBackend::MySql,
                    "SELECT CAST(owner IS NOT NULL AND backfilled_at IS NOT NULL AS SIGNED) \
                     AS value FROM outbox_log_slots WHERE slot = ?",
                    [self.slot.clone().into()],
                ))
                .await?;
            return Ok(row.map(|row| row.try_get::<i64>("", "value")).transpose()? == Some(1));
        }
        let active = self
            .db
            .query_one_raw(Statement::from_sql_and_values(
                DbBackend::Postgres,
                "SELECT active FROM pg_replication_slots WHERE slot_name = $1",
                [self.slot.clone().into()],
            ))
            .await?
            .map(|row| row.try_get::<bool>("", "active"))
            .transpose()?;
        Ok(active.unwrap_or(false))
    }

    /// The text column `value` of `statement`'s row.
    async fn text(&self, statement: Statement) -> Result<String, DemoError> {
        let what = statement.sql.clone();
        let row = self
            .db
            .query_one_raw(statement)
            .await?
            .ok_or(DemoError::Database(sea_orm::DbErr::RecordNotFound(what)))?;
        Ok(row.try_get("", "value")?)
    }
}

/// Whether the MariaDB GTID position `stored` (`domain-server-sequence`, comma separated)
/// covers `target`: for every domain of `target`, `stored` holds a sequence at least as
/// high.
fn gtids_cover(stored: &str, target: &str) -> bool {
    let parse = |position: &str| -> Vec<(u64, u64)> {
        position
            .split(',')
            .filter_map(|gtid| {
                let mut parts = gtid.trim().split('-');
                let domain = parts.next()?.parse().ok()?;
                let sequence = parts.nth(1)?.parse().ok()?;
                Some((domain, sequence))
            })
            .collect()
    };
    let stored = parse(stored);
    parse(target).iter().all(|(domain, sequence)| {
        stored
            .iter()
            .any(|(held, reached)| held == domain && reached >= sequence)
    })
}

/// Whether `url`'s user info has a password.
fn has_password(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?']).next().unwrap_or_default();
    authority
        .rsplit_once('@')
        .is_some_and(|(user_info, _)| user_info.contains(':'))
}

/// Drops `slot` once no relay streams from it (a stopped relay's walsender exits a moment
/// later); a slot that stays busy is left to the database cleanup. MariaDB keeps no slot
/// on the server.
async fn drop_slot(db: &DatabaseConnection, slot: &str) {
    if db.get_database_backend() == DbBackend::MySql {
        return;
    }
    let statement = Statement::from_sql_and_values(
        DbBackend::Postgres,
        "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots \
         WHERE slot_name = $1",
        [slot.to_owned().into()],
    );
    for _ in 0..100 {
        match db.query_all_raw(statement.clone()).await {
            Ok(_) => return,
            Err(error) => {
                tracing::debug!(%error, %slot, "the slot is still in use");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    tracing::warn!(%slot, "the scenario's slot is still in use; the database cleanup drops it");
}

/// A log relay running in a task of its own, stopped (or killed) by the scenario; dropped
/// without either, it is killed.
#[derive(Debug)]
pub(crate) struct Running {
    shutdown: CancellationToken,
    task: Option<JoinHandle<Result<LogRelayReport, LogRelayError>>>,
}

impl Running {
    /// Starts `relay`.
    pub(crate) fn start<P: Publisher + 'static>(relay: LogRelay<P>) -> Self {
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(relay.run(shutdown.clone()));
        Self {
            shutdown,
            task: Some(task),
        }
    }

    /// Waits until a relay streams from the stage's slot. A relay that stopped instead
    /// skips the scenario when a prerequisite is missing ([`failure`]).
    ///
    /// # Errors
    /// [`DemoError::Skipped`], [`DemoError::LogRelay`], or a timeout.
    pub(crate) async fn streaming(&mut self, stage: &LogStage<'_>) -> Result<(), DemoError> {
        let deadline = Instant::now() + WAIT;
        loop {
            if stage.active().await? {
                return Ok(());
            }
            if self.task.as_ref().is_some_and(JoinHandle::is_finished) {
                self.stopped().await?;
                return Err(DemoError::Timeout(
                    "the log relay stopped before it streamed".to_owned(),
                ));
            }
            if Instant::now() >= deadline {
                return Err(DemoError::Timeout(format!(
                    "the log relay did not stream from slot {} within {WAIT:?}",
                    stage.slot
                )));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Stops the relay gracefully (what it read is published, its last acknowledgement
    /// sent, its lease released) and returns its report.
    ///
    /// # Errors
    /// The relay's error, or a timeout.
    pub(crate) async fn stop(mut self) -> Result<LogRelayReport, DemoError> {
        self.shutdown.cancel();
        match tokio::time::timeout(WAIT, self.stopped()).await {
            Ok(result) => result,
            Err(_) => Err(DemoError::Timeout(format!(
                "the log relay did not stop within {WAIT:?}"
            ))),
        }
    }

    /// Kills the relay: its task is aborted, its replication connection dropped, nothing
    /// more is acknowledged and its lease is not released (a crash).
    pub(crate) async fn kill(mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
    }

    async fn stopped(&mut self) -> Result<LogRelayReport, DemoError> {
        let Some(task) = self.task.take() else {
            return Err(DemoError::Outbox(
                "the log relay already stopped".to_owned(),
            ));
        };
        match task.await {
            Ok(result) => result.map_err(failure),
            Err(error) => Err(DemoError::Outbox(format!("log relay task: {error}"))),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.shutdown.cancel();
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tells_a_password_in_the_url() {
        assert!(has_password("postgres://app:secret@db:5432/app"));
        assert!(!has_password("postgres://postgres@127.0.0.1:5432/postgres"));
        assert!(!has_password("postgres://127.0.0.1/x?user=a:b@c"));
    }

    #[test]
    fn compares_gtid_positions_per_domain() {
        assert!(gtids_cover("0-1-7", "0-1-7"));
        assert!(gtids_cover("0-1-8,1-2-3", "0-1-7"));
        assert!(!gtids_cover("0-1-6", "0-1-7"));
        assert!(!gtids_cover("0-1-9", "0-1-7,1-1-1"));
        assert!(gtids_cover("0-1-9", ""));
    }
}
