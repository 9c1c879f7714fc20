//! The log relay's retention in table mode: streamed rows stay `pending` in the outbox
//! table (no mark round trip), so the relay deletes those written more than the retention
//! before the last acknowledged commit, whichever log it reads.

use outbox_core::metric;
use outbox_core::publish::Publisher;
use tokio_util::sync::CancellationToken;

use super::LogRelay;
use super::change::Acknowledger;

/// The step, as [`DatabaseOutage`](crate::outage::DatabaseOutage) names it.
const RETENTION: &str = "retention cleanup";

impl<P: Publisher + 'static> LogRelay<P> {
    /// Deletes streamed rows (table mode; they stay `pending`) written more than the
    /// retention before the last acknowledged commit (and before now), in batches.
    pub(super) async fn purge(&self, acknowledger: &Acknowledger, stop: &CancellationToken) {
        let (Some(retention), Some(acknowledged)) =
            (self.config.retention, acknowledger.acknowledged_commit())
        else {
            return;
        };
        if self.outbox.write_mode().message_prefix().is_some() {
            return;
        }
        let Ok(retention) = chrono::Duration::from_std(retention) else {
            return;
        };
        let cutoff = acknowledged.min(chrono::Utc::now()) - retention;
        let mut purged = 0_u64;
        while !stop.is_cancelled() {
            match self
                .store
                .delete_streamed(&self.db, cutoff, self.config.purge_batch)
                .await
            {
                Ok(rows) => {
                    purged += rows;
                    if rows < self.config.purge_batch as u64 {
                        self.outage.succeeded(RETENTION);
                        break;
                    }
                }
                Err(error) => {
                    self.outage.failed(RETENTION, &error);
                    break;
                }
            }
        }
        if purged > 0 {
            let mut labels = self.labels.clone();
            labels.push(metrics::Label::new("table", "outbox"));
            metrics::counter!(metric::PURGED_ROWS, labels).increment(purged);
            tracing::info!(rows = purged, %cutoff, "log relay purged streamed outbox rows");
        }
    }
}
