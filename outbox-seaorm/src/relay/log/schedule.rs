//! The log relay and scheduled rows: while it holds its slot, the log relay moves the rows
//! that are due into the outbox table (see [`crate::schedule`]), where the log sees their
//! insert at that moment, not at the commit that scheduled them: nothing goes out early.
//! It enqueues the periodic jobs' runs the same way ([`crate::periodic`]).

use outbox_core::publish::Publisher;
use tokio_util::sync::CancellationToken;

use super::LogRelay;
use crate::{periodic, schedule};

/// The step, as [`DatabaseOutage`](crate::outage::DatabaseOutage) names it.
const SCHEDULE: &str = "scheduled rows";

impl<P: Publisher + 'static> LogRelay<P> {
    /// Every schedule interval until `stop`: enqueues the periodic runs that are due and
    /// moves the scheduled rows that are due into the outbox table. Message mode has no
    /// scheduled rows (a commit refuses them) nor periodic jobs (the build refuses them).
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
            let due = match periodic::enqueue_due(&self.db, &self.store, now).await {
                Ok(_) => {
                    schedule::promote_due(&self.db, &self.store, now, self.config.batch_size).await
                }
                Err(error) => Err(error),
            };
            match due {
                Ok(_) => self.outage.succeeded(SCHEDULE),
                Err(error) => {
                    self.outage.failed(SCHEDULE, &error);
                }
            }
        }
    }
}
