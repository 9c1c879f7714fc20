//! One streaming session of a binlog relay that holds the slot's lease (MariaDB): the
//! start-up checks; on first start (or after a reset) a consistent snapshot whose pending
//! rows are published first (the **backfill**) and whose GTID position is stored; then the
//! binlog dump from the stored position — one task reading, one publishing, one storing the
//! acknowledged position, one renewing the lease, one purging — until shutdown, an error,
//! or a lost lease.
//!
//! MariaDB keeps no position for a reader, so the relay stores it: the GTID state (every
//! domain) of the last transaction whose events the broker confirmed, written to
//! `<outbox>_log_slots` at most every `feedback_interval` while events flow, at once when
//! the stream pauses, and at the end of the session — only while this relay holds the
//! lease. Transactions of other tables only (the relay's own writes among them) move it
//! with the lease renewal, every third of the lease's TTL. A crash republishes from the
//! stored position, with the same message ids.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use outbox_core::publish::Publisher;
use outbox_core::{Envelope, metric};
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

use super::super::LogRelay;
use super::super::change::{Acknowledger, Change, Confirmed, Position, Row};
use super::super::config::FINISH_TRANSACTION;
use super::super::error::LogRelayError;
use super::super::publish::Publishing;
use super::super::report::LogRelayReport;
use super::super::row::{self, UnreadableRow};
use super::snapshot::Snapshot;
use super::source::{BinlogError, BinlogSettings, BinlogSource, POSITION_NOT_IN_BINLOG};
use super::start;
use crate::gtid::GtidPosition;
use crate::sql::log::SlotLease;

/// The steps of a session, as [`DatabaseOutage`](crate::outage::DatabaseOutage) names them.
const POSITION: &str = "stored position";

/// Rows per page of a backfill.
const BACKFILL_PAGE: u64 = 1_000;

impl<P: Publisher + 'static> LogRelay<P> {
    /// One binlog session; see the [module documentation](self).
    pub(in crate::relay::log) async fn binlog_session(
        &self,
        lease: &SlotLease,
        shutdown: &CancellationToken,
        total: &mut LogRelayReport,
    ) -> Result<(), LogRelayError> {
        let slot = &self.config.slot;
        let me = &self.config.instance_id;
        start::check_server(&self.store.server_version(&self.db).await?)?;
        let (preflight, grants) = self.store.binlog_preflight(&self.db).await?;
        start::check(&preflight, &grants, &self.config)?;
        let settings = self.binlog_settings(preflight.database.as_deref());
        let stop = shutdown.child_token();
        let from = if lease.ours && lease.backfilled {
            let stored = self
                .store
                .log_acknowledged(&self.db, slot)
                .await?
                .unwrap_or_default();
            let stored =
                GtidPosition::parse(&stored).map_err(|error| LogRelayError::PositionPurged {
                    slot: slot.clone(),
                    position: stored.clone(),
                    detail: format!("the stored position is unreadable: {error}"),
                })?;
            start::check_position(slot, &stored, &preflight.binlog_position)?;
            stored
        } else {
            // Recorded before the snapshot: a crash from here on backfills again.
            self.store
                .set_log_backfilled(&self.db, slot, me, false)
                .await?;
            let confirmed = Arc::new(Mutex::new(GtidPosition::default()));
            let mut publishing =
                self.binlog_publishing(Acknowledger::new(Confirmed::Binlog(confirmed)), &settings);
            publishing.release(&stop).await?;
            let snapshot = Snapshot::open(&settings)
                .await
                .map_err(|error| binlog_error(error, slot, "the snapshot"))?;
            let position = snapshot.position.clone();
            let done = self.binlog_backfill(snapshot, &mut publishing, &stop).await;
            total.backfilled += publishing.report.published;
            total.merge(&std::mem::take(&mut publishing.report));
            if !done? {
                return Ok(());
            }
            // The position first, then the mark: a crash between the two backfills again.
            if !self
                .store
                .record_log_acknowledged(&self.db, slot, me, &position.to_string())
                .await?
            {
                return Err(LogRelayError::LeaseLost { slot: slot.clone() });
            }
            self.store
                .set_log_backfilled(&self.db, slot, me, true)
                .await?;
            position
        };
        let mut source = BinlogSource::connect(&settings, &from)
            .await
            .map_err(|error| binlog_error(error, slot, &from.to_string()))?;
        let mut publishing = self.binlog_publishing(source.acknowledger(), &settings);
        // The aggregates held behind dead events, and what operators released meanwhile.
        publishing.release(&stop).await?;
        tracing::info!(%slot, relay = %me, position = %from, "log relay streaming the binlog");
        let result = self
            .binlog_stream(&mut source, &mut publishing, &from, &stop)
            .await;
        total.merge(&publishing.report);
        result
    }

    /// The publishing side, for the table the binlog names (`database.table`: MariaDB's
    /// schema is the database).
    fn binlog_publishing(
        &self,
        acknowledger: Acknowledger,
        settings: &BinlogSettings,
    ) -> Publishing<'_, P> {
        let mut publishing = self.publishing(acknowledger);
        publishing.table.schema.clone_from(&settings.schema);
        publishing
    }

    /// The replication connection's settings: the configured URL, or the pool's host,
    /// port, user and database (no password: give a URL when the user has one).
    fn binlog_settings(&self, database: Option<&str>) -> BinlogSettings {
        let url = self.config.connection_url.clone().unwrap_or_else(|| {
            let options = self
                .db
                .connection()
                .get_mysql_connection_pool()
                .connect_options();
            let mut url = format!(
                "mysql://{}@{}:{}/{}",
                options.get_username(),
                options.get_host(),
                options.get_port(),
                options.get_database().unwrap_or_default()
            );
            if let Some(socket) = options.get_socket() {
                url.push_str(&format!("?socket={}", socket.display()));
            }
            url
        });
        let table = self.outbox.outbox_table();
        BinlogSettings {
            url,
            server_id: self.config.replica_server_id(),
            heartbeat: self.config.heartbeat_interval,
            connect_timeout: self.config.connect_timeout,
            schema: table.schema().or(database).unwrap_or_default().to_owned(),
            table: table.table().to_owned(),
        }
    }

    /// Publishes the rows pending in `snapshot`, page by page, and ends it. `Ok(false)`:
    /// stopped before the end.
    async fn binlog_backfill(
        &self,
        mut snapshot: Snapshot,
        publishing: &mut Publishing<'_, P>,
        stop: &CancellationToken,
    ) -> Result<bool, LogRelayError> {
        let slot = &self.config.slot;
        let select = self.store.binlog_backfill_page(BACKFILL_PAGE);
        let columns = *self.outbox.columns();
        let mut after = i64::MIN;
        let mut rows = 0_u64;
        loop {
            let page = snapshot
                .page(&select, columns.seq, after)
                .await
                .map_err(|error| binlog_error(error, slot, "the snapshot"))?;
            let Some((last, _)) = page.last() else {
                break;
            };
            after = *last;
            rows += page.len() as u64;
            let mut envelopes: Vec<Envelope> = Vec::with_capacity(page.len());
            let mut unreadable: Vec<UnreadableRow> = Vec::new();
            for (_, text) in page {
                match row::envelope(&Row::Binlog(text), &columns) {
                    Ok(envelope) => envelopes.push(envelope),
                    Err(row) => unreadable.push(row),
                }
            }
            if !publishing.publish_rows(envelopes, unreadable, stop).await? {
                return Ok(false);
            }
        }
        if let Err(error) = snapshot.close().await {
            tracing::warn!(%error, "log relay: ending the backfill snapshot failed");
        }
        tracing::info!(%slot, rows, "log relay backfilled the rows pending at its first start");
        Ok(true)
    }

    /// The stream: reading, publishing, the stored position, the lease and retention,
    /// until `stop` (shutdown), a stream error, or a lost lease.
    async fn binlog_stream(
        &self,
        source: &mut BinlogSource,
        publishing: &mut Publishing<'_, P>,
        from: &GtidPosition,
        stop: &CancellationToken,
    ) -> Result<(), LogRelayError> {
        let slot = &self.config.slot;
        // A single-event transaction is three changes (begin, insert, commit): room for two
        // batches of those.
        let (changes, received) = mpsc::channel(self.config.batch_size.clamp(64, 8_192) * 6);
        let acknowledger = publishing.acknowledger.clone();
        let idle = Arc::clone(&publishing.idle);
        let mut stored = Some(Position::Gtid(from.clone()));
        let reading = async {
            let result = read(source, changes, self.config.heartbeat_interval, stop).await;
            stop.cancel();
            result
        };
        let publishing_done = async {
            let result = publishing.run(received, stop).await;
            stop.cancel();
            result
        };
        let storing = async {
            let result = self
                .store_positions(&acknowledger, &idle, &mut stored, stop)
                .await;
            stop.cancel();
            result
        };
        let maintaining = async {
            let mut purge = tokio::time::interval(self.config.purge_interval);
            purge.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut lag = tokio::time::interval(self.config.heartbeat_interval);
            lag.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    _ = purge.tick() => self.purge(&acknowledger, stop).await,
                    _ = lag.tick() => self.lag_gauge(&acknowledger).await,
                }
            }
        };
        let (read, published, storing, lease, (), ()) = tokio::join!(
            reading,
            publishing_done,
            storing,
            self.renew_lease(&acknowledger, stop),
            maintaining,
            self.promote_scheduled(stop)
        );
        // The last position (graceful shutdown or not: it is what was confirmed).
        if let Err(error) = self.store_position(&acknowledger, &mut stored).await {
            tracing::warn!(%error, %slot, "log relay: storing the final position failed");
        }
        let resumed_from = from.to_string();
        read.map_err(|error| binlog_error(error, slot, &resumed_from))?;
        published?;
        storing?;
        lease
    }

    /// Stores the acknowledged position every `feedback_interval` while rows of the outbox
    /// move it, and at once when the publishing side signals `idle`, until `stop`.
    ///
    /// A position moved by other tables' transactions only is left to the lease renewal
    /// (every third of the lease's TTL): the relay's own writes are binlog transactions
    /// too, and storing each one at once would write its position forever, about ten
    /// times a second, on an idle server.
    async fn store_positions(
        &self,
        acknowledger: &Acknowledger,
        idle: &Notify,
        stored: &mut Option<Position>,
        stop: &CancellationToken,
    ) -> Result<(), LogRelayError> {
        let mut rows_stored = acknowledger.acknowledged_with_rows();
        loop {
            tokio::select! {
                () = stop.cancelled() => return Ok(()),
                () = idle.notified() => {}
                () = tokio::time::sleep(self.config.feedback_interval) => {}
            }
            let rows = acknowledger.acknowledged_with_rows();
            if rows == rows_stored {
                continue;
            }
            match self.store_position(acknowledger, stored).await {
                Ok(()) => {
                    rows_stored = rows;
                    self.outage.succeeded(POSITION);
                }
                Err(LogRelayError::Database(error)) => {
                    self.outage.failed(POSITION, &error);
                }
                Err(error) => return Err(error),
            }
            // At most one write per interval, idle or not.
            tokio::select! {
                () = stop.cancelled() => return Ok(()),
                () = tokio::time::sleep(self.config.feedback_interval.min(Duration::from_millis(100))) => {}
            }
        }
    }

    /// Sets `outbox_log_slot_lag_transactions`: the transactions the server binlogged after
    /// the acknowledged position. A failed read leaves the gauge as it was (the lease
    /// renewal reports the database's outages).
    async fn lag_gauge(&self, acknowledger: &Acknowledger) {
        let Some(Position::Gtid(acknowledged)) = acknowledger.acknowledged() else {
            return;
        };
        let Ok(server) = self.store.binlog_position(&self.db).await else {
            return;
        };
        let Ok(server) = GtidPosition::parse(&server) else {
            return;
        };
        let mut labels = self.labels.clone();
        labels.push(metrics::Label::new("slot", self.config.slot.clone()));
        metrics::gauge!(metric::LOG_SLOT_LAG_TRANSACTIONS, labels)
            .set(acknowledged.transactions_behind(&server) as f64);
    }

    /// Stores the acknowledged position when it moved since `stored`.
    async fn store_position(
        &self,
        acknowledger: &Acknowledger,
        stored: &mut Option<Position>,
    ) -> Result<(), LogRelayError> {
        let Some(position) = acknowledger.acknowledged() else {
            return Ok(());
        };
        if stored.as_ref() == Some(&position) {
            return Ok(());
        }
        let slot = &self.config.slot;
        let me = &self.config.instance_id;
        if !self
            .store
            .record_log_acknowledged(&self.db, slot, me, &position.text())
            .await?
        {
            return Err(LogRelayError::LeaseLost { slot: slot.clone() });
        }
        *stored = Some(position);
        Ok(())
    }
}

/// Reads changes into `changes` until `stop`, the publishing side is gone, or the stream
/// fails (a closed stream is a failure: the server went away). Between transactions, every
/// `tick` it sends [`Change::Tick`] (the publishing side then releases what operators
/// requeued or skipped). Stopped inside a transaction, it reads on to that transaction's
/// commit (for at most [`FINISH_TRANSACTION`]): its rows may be published already, and only
/// its commit lets them be acknowledged.
async fn read(
    source: &mut BinlogSource,
    changes: mpsc::Sender<Change>,
    tick: Duration,
    stop: &CancellationToken,
) -> Result<(), BinlogError> {
    let mut open = false;
    let mut finish_by: Option<tokio::time::Instant> = None;
    // The first after one interval: the session released what was held when it started.
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + tick, tick);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut tick_due = false;
    loop {
        if tick_due && !open {
            tick_due = false;
            if changes.send(Change::Tick).await.is_err() {
                return Ok(());
            }
        }
        // A read dropped half-way (a tick, a stop) loses nothing: the dump's stream keeps the
        // packet read in progress in itself (`mysql_async`'s `BinlogStream`).
        let change = match finish_by {
            None => tokio::select! {
                biased;
                () = stop.cancelled(), if !open => return Ok(()),
                () = stop.cancelled(), if open => {
                    finish_by = Some(tokio::time::Instant::now() + FINISH_TRANSACTION);
                    continue;
                }
                _ = ticks.tick() => {
                    tick_due = true;
                    continue;
                }
                change = source.next() => change?,
            },
            Some(deadline) => tokio::select! {
                () = tokio::time::sleep_until(deadline) => return Ok(()),
                change = source.next() => change?,
            },
        };
        match change {
            Some(Change::Other) => {}
            Some(change) => {
                let commit = matches!(change, Change::Commit { .. });
                if matches!(change, Change::Begin) {
                    open = true;
                }
                if changes.send(change).await.is_err() {
                    return Ok(());
                }
                if commit {
                    open = false;
                    if finish_by.is_some() {
                        return Ok(());
                    }
                }
            }
            None => return Err(BinlogError::protocol("the server closed the binlog stream")),
        }
    }
}

/// The relay's error for a failure of the replication connection: a position the server's
/// binlogs do not hold is [`LogRelayError::PositionPurged`] (it stops the relay), anything
/// else [`LogRelayError::Binlog`] (retried).
fn binlog_error(error: BinlogError, slot: &str, position: &str) -> LogRelayError {
    // 1236 also ends a dump whose server id another replica took (a successor relay of
    // the same slot): only the GTID messages mean a missing position.
    if error.code == Some(POSITION_NOT_IN_BINLOG) && error.message.contains("GTID") {
        return LogRelayError::PositionPurged {
            slot: slot.to_owned(),
            position: position.to_owned(),
            detail: error.message,
        };
    }
    LogRelayError::Binlog {
        code: error.code,
        message: error.message,
    }
}
