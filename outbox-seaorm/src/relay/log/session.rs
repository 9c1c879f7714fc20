//! One streaming session of the log relay that holds the slot's lease: the start-up checks,
//! the slot (created with an exported snapshot and **backfilled** in table mode: the rows
//! pending when the slot was created are published first, so that nothing committed before
//! the slot existed is lost), then the stream — one task reading, one publishing, one
//! writing heartbeats, one renewing the lease — until shutdown, an error, or a lost lease.

use std::sync::Arc;
use std::time::Instant;

use outbox_core::Envelope;
use outbox_core::metric;
use outbox_core::publish::Publisher;
use sea_orm::{AccessMode, IsolationLevel, TransactionTrait as _};
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

use super::change::{Acknowledger, Change};
use super::config::FINISH_TRANSACTION;
use super::config::HEARTBEAT_PREFIX;
use super::error::LogRelayError;
use super::publish::Publishing;
use super::report::LogRelayReport;
use super::row::UnreadableRow;
use super::source::{SourceError, SourceSettings, WalSource};
use super::{LogRelay, start};
use crate::sql::log::{SlotLease, SlotRow};

/// WAL statuses of `pg_replication_slots`, for the status gauge.
const WAL_STATUSES: [&str; 4] = ["reserved", "extended", "unreserved", "lost"];

/// The steps of a session, as [`DatabaseOutage`](crate::outage::DatabaseOutage) names them.
const HEARTBEAT: &str = "heartbeat";
const SLOT_GAUGES: &str = "slot gauges";

/// Rows per page of a backfill.
const BACKFILL_PAGE: u64 = 1_000;

impl<P: Publisher + 'static> LogRelay<P> {
    /// One session; see the [module documentation](self).
    pub(super) async fn session(
        &self,
        settings: &SourceSettings,
        lease: &SlotLease,
        shutdown: &CancellationToken,
        total: &mut LogRelayReport,
    ) -> Result<(), LogRelayError> {
        let slot = &self.config.slot;
        let me = &self.config.instance_id;
        start::prepare(&self.db, &self.store, &self.config).await?;
        let table_mode = self.outbox.write_mode().message_prefix().is_none();
        let mut exists = self.store.slot(&self.db, slot).await?.is_some();
        if exists && !lease.ours {
            // Never dropped nor adopted: its position says nothing about this outbox.
            return Err(LogRelayError::ForeignSlot {
                slot: slot.clone(),
                detail: format!(
                    "{} has no record of this outbox's relay creating it",
                    self.outbox.tables().relay.log_slots
                ),
            });
        }
        if exists && table_mode && !lease.backfilled {
            // A backfill was interrupted: a new slot and a new backfill (what was published
            // goes out again with the same ids; nothing is lost).
            tracing::warn!(%slot, "log relay: the slot's backfill did not finish; recreating the slot");
            self.store.drop_slot(&self.db, slot).await?;
            exists = false;
        }
        if !exists {
            // Recorded before the slot exists: a crash from here on finds the slot ours and
            // not backfilled.
            self.store
                .set_log_backfilled(&self.db, slot, me, false)
                .await?;
        }
        let mut source = WalSource::connect(settings, !exists && table_mode)
            .await
            .map_err(|error| self.source_error(error))?;
        let snapshot = source
            .ensure_slot()
            .await
            .map_err(|error| self.source_error(error))?;
        let stop = shutdown.child_token();
        let mut publishing = self.publishing(source.acknowledger());
        // The aggregates held behind dead events, and what operators released meanwhile.
        publishing.release(&stop).await?;
        if !exists {
            if let Some(snapshot) = snapshot.filter(|_| table_mode) {
                let done = self.backfill(&snapshot, &mut publishing, &stop).await;
                total.backfilled += publishing.report.published;
                total.merge(&std::mem::take(&mut publishing.report));
                if !done? {
                    return Ok(());
                }
            }
            self.store
                .set_log_backfilled(&self.db, slot, me, true)
                .await?;
        }
        source
            .start()
            .await
            .map_err(|error| self.source_error(error))?;
        tracing::info!(%slot, relay = %me, "log relay streaming");
        self.outage.succeeded(super::STREAM);
        let result = self.stream(&mut source, &mut publishing, &stop).await;
        total.merge(&publishing.report);
        result
    }

    /// Publishes the rows pending in `snapshot` (the slot's creation), page by page.
    /// `Ok(false)`: stopped before the end.
    async fn backfill(
        &self,
        snapshot: &str,
        publishing: &mut Publishing<'_, P>,
        stop: &CancellationToken,
    ) -> Result<bool, LogRelayError> {
        let txn = self
            .db
            .connection()
            .begin_with_config(
                Some(IsolationLevel::RepeatableRead),
                Some(AccessMode::ReadOnly),
            )
            .await?;
        self.store.import_snapshot(&txn, snapshot).await?;
        let mut after = i64::MIN;
        let mut rows = 0_u64;
        loop {
            let page = self.store.pending_after(&txn, after, BACKFILL_PAGE).await?;
            let Some(last) = page.last() else {
                break;
            };
            after = last.seq;
            rows += page.len() as u64;
            let mut envelopes: Vec<Envelope> = Vec::with_capacity(page.len());
            let mut unreadable = Vec::new();
            for row in page {
                match row.envelope {
                    Ok(envelope) => envelopes.push(envelope),
                    Err((event_type, aggregate_type, aggregate_id, error)) => {
                        unreadable.push(UnreadableRow {
                            message_id: None,
                            event_type,
                            aggregate_type,
                            aggregate_id,
                            error,
                        })
                    }
                }
            }
            if !publishing.publish_rows(envelopes, unreadable, stop).await? {
                return Ok(false);
            }
        }
        txn.commit().await?;
        tracing::info!(slot = %self.config.slot, rows, "log relay backfilled the rows pending at the slot's creation");
        Ok(true)
    }

    /// The stream: reading, publishing, heartbeats and the lease, until `stop` (shutdown),
    /// a stream error, or a lost lease.
    async fn stream(
        &self,
        source: &mut WalSource,
        publishing: &mut Publishing<'_, P>,
        stop: &CancellationToken,
    ) -> Result<(), LogRelayError> {
        // A single-event transaction is three changes (begin, insert, commit): room for two
        // batches of those.
        let (changes, received) = mpsc::channel(self.config.batch_size.clamp(64, 8_192) * 6);
        let acknowledger = publishing.acknowledger.clone();
        let idle = Arc::clone(&publishing.idle);
        let reading = async {
            let result = read(source, changes, &idle, stop).await;
            stop.cancel();
            result
        };
        let publishing_done = async {
            let result = publishing.run(received, stop).await;
            stop.cancel();
            result
        };
        let (read, published, (), lease, ()) = tokio::join!(
            reading,
            publishing_done,
            self.heartbeat(&acknowledger, stop),
            self.renew_lease(&acknowledger, stop),
            self.promote_scheduled(stop)
        );
        // The last acknowledgement (graceful shutdown or not: it is what was confirmed).
        if let Err(error) = source.feedback().await {
            tracing::warn!(%error, "log relay: the final status update failed");
        }
        read.map_err(|error| self.source_error(error))?;
        published?;
        lease
    }

    /// Every heartbeat interval until `stop`: the heartbeat message, the slot gauges, and
    /// the retention cleanup when it is due.
    async fn heartbeat(&self, acknowledger: &Acknowledger, stop: &CancellationToken) {
        let mut last_purge: Option<Instant> = None;
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(self.config.heartbeat_interval) => {}
            }
            match self.store.emit_heartbeat(&self.db, HEARTBEAT_PREFIX).await {
                Ok(_) => self.outage.succeeded(HEARTBEAT),
                Err(error) => {
                    self.outage.failed(HEARTBEAT, &error);
                }
            }
            match self.store.slot(&self.db, &self.config.slot).await {
                Ok(slot) => {
                    self.outage.succeeded(SLOT_GAUGES);
                    if let Some(slot) = slot {
                        self.slot_gauges(&slot);
                    }
                }
                Err(error) => {
                    self.outage.failed(SLOT_GAUGES, &error);
                }
            }
            if last_purge.is_none_or(|at| at.elapsed() >= self.config.purge_interval) {
                last_purge = Some(Instant::now());
                self.purge(acknowledger, stop).await;
            }
        }
    }

    fn slot_gauges(&self, slot: &SlotRow) {
        let mut labels = self.labels.clone();
        labels.push(metrics::Label::new("slot", self.config.slot.clone()));
        if let Some(lag) = slot.lag_bytes {
            metrics::gauge!(metric::LOG_SLOT_LAG_BYTES, labels.clone()).set(lag as f64);
        }
        for status in WAL_STATUSES {
            let mut labels = labels.clone();
            labels.push(metrics::Label::new("status", status));
            let current = slot.wal_status.as_deref() == Some(status);
            metrics::gauge!(metric::LOG_SLOT_WAL_STATUS, labels).set(f64::from(u8::from(current)));
        }
    }
}

/// Reads changes into `changes` until `stop`, the publishing side is gone, or the stream
/// fails. Sends a status update after a commit when one is due, and at once when the
/// publishing side signals `idle` (an acknowledgement with nothing behind it: no commit may
/// come to carry it for a long time). Stopped inside a transaction, it reads on to that
/// transaction's commit (for at most [`FINISH_TRANSACTION`]): its rows may be published
/// already, and only its commit lets them be acknowledged.
async fn read(
    source: &mut WalSource,
    changes: mpsc::Sender<Change>,
    idle: &Notify,
    stop: &CancellationToken,
) -> Result<(), SourceError> {
    // Made anew only once the signal cancelled it.
    let mut wake = stop.child_token();
    // Inside a transaction (its commit not read yet); reading on after the stop.
    let (mut open, mut finishing) = (false, false);
    loop {
        // The read is never dropped half-way: the signal only cancels `wake`, and the read
        // then returns what it holds, or `None`.
        let change = {
            let next = source.next(&wake);
            tokio::pin!(next);
            loop {
                tokio::select! {
                    biased;
                    change = &mut next => break change?,
                    () = idle.notified(), if !wake.is_cancelled() => wake.cancel(),
                }
            }
        };
        match change {
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
                    source.feedback_if_due().await;
                    if finishing {
                        return Ok(());
                    }
                }
            }
            None if stop.is_cancelled() && open && !finishing => {
                finishing = true;
                wake = CancellationToken::new();
                let deadline = wake.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(FINISH_TRANSACTION).await;
                    deadline.cancel();
                });
            }
            None if stop.is_cancelled() => return Ok(()),
            None => {
                wake = stop.child_token();
                source.feedback().await?;
            }
        }
    }
}
