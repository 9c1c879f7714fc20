//! The log relay and scheduled rows: while it holds its slot, the log relay moves the rows
//! that are due into the outbox table (see [`crate::schedule`]), where the log sees their
//! insert at that moment, not at the commit that scheduled them: nothing goes out early.

use outbox_core::publish::Publisher;
use tokio_util::sync::CancellationToken;

use super::LogRelay;
use crate::schedule;

/// The step, as [`DatabaseOutage`](crate::outage::DatabaseOutage) names it.
const SCHEDULE: &str = "scheduled rows";

impl<P: Publisher + 'static> LogRelay<P> {
    /// Every schedule interval until `stop`: moves the scheduled rows that are due into the
    /// outbox table. Message mode has no scheduled rows (a commit refuses them).
    pub(super) async fn promote_scheduled(&self, stop: &CancellationToken) {
        if self.outbox.write_mode().message_prefix().is_some() {
            return;
        }
        let mut tick = tokio::time::interval(self.config.schedule_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            let now = self.outbox.clock().now();
            match schedule::promote_due(&self.db, &self.store, now, self.config.batch_size).await {
                Ok(_) => self.outage.succeeded(SCHEDULE),
                Err(error) => {
                    self.outage.failed(SCHEDULE, &error);
                }
            }
        }
    }
}
