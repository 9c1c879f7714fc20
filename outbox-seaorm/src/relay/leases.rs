//! The leases a relay holds: heartbeat, then release and take leases (rendezvous hashing
//! for partitions, first come for worker keys).

use std::time::Instant;

use outbox_core::metric;
use outbox_core::publish::Publisher;

use super::core::Core;
use super::decide::to_delta;
use super::report::{LeaseReport, RelayError};
use crate::lease::owner_of;
use crate::sql::{LeaseLock, Members};

/// What a relay knows of its leases between refreshes.
#[derive(Debug, Default)]
pub(super) struct Leases {
    /// The leases held after the last refresh.
    pub(super) owned: Vec<String>,
    pub(super) last_refresh: Option<Instant>,
    pub(super) ensured: bool,
}

impl Leases {
    /// Heartbeats, then releases and takes leases as described in the
    /// [relay documentation](super).
    ///
    /// # Errors
    /// [`RelayError::Database`].
    pub(super) async fn refresh<P: Publisher + 'static>(
        &mut self,
        core: &Core<P>,
    ) -> Result<LeaseReport, RelayError> {
        let now = core.now();
        let ttl = to_delta(core.config.lease_ttl);
        let me = core.config.instance_id.clone();
        let worker_keys = core.worker_keys_label();
        core.store
            .heartbeat(
                &core.db,
                &me,
                &core.description(),
                worker_keys.as_deref(),
                now,
                now + ttl,
            )
            .await?;
        metrics::gauge!(metric::RELAY_HEARTBEAT, core.labels.clone())
            .set(now.timestamp_millis() as f64 / 1000.0);
        let mut live = core
            .store
            .live_instances(
                &core.db,
                now,
                if core.keyed() {
                    Members::All
                } else {
                    Members::Ungrouped
                },
            )
            .await?;
        if !live.contains(&me) {
            live.push(me.clone());
            live.sort();
        }
        if core.leased() {
            if !self.ensured {
                core.store.ensure_leases(&core.db, &core.lease_keys).await?;
                self.ensured = true;
            }
            let (desired, undesired): (Vec<String>, Vec<String>) = core
                .lease_keys
                .iter()
                .cloned()
                // Worker-key leases are taken by whoever is first (a standby waits);
                // partitions are spread by rendezvous hashing.
                .partition(|key| core.keyed() || owner_of(key, &live) == Some(me.as_str()));
            core.store
                .release(&core.db, &me, Some(&undesired), now)
                .await?;
            core.store
                .acquire(&core.db, &me, &desired, now, now + ttl)
                .await?;
            self.owned = core
                .store
                .owned(&core.db, &me, now, LeaseLock::None)
                .await?;
            self.owned.sort();
            metrics::gauge!(metric::LEASES_OWNED, core.labels.clone()).set(self.owned.len() as f64);
        }
        // Forget instances dead for ten lease lifetimes.
        core.store
            .remove_instances(&core.db, None, now - ttl * 10)
            .await?;
        self.last_refresh = Some(Instant::now());
        tracing::debug!(
            instance = %me,
            live = live.len(),
            owned = self.owned.len(),
            "relay leases refreshed"
        );
        Ok(LeaseReport {
            live_instances: live,
            owned: self.owned.clone(),
        })
    }

    /// After a failed batch: the next batch heartbeats first and makes sure the lease rows
    /// exist again (the failure may have been the lease tables', dropped and created anew).
    pub(super) fn refresh_next(&mut self) {
        self.last_refresh = None;
        self.ensured = false;
    }

    /// Whether a heartbeat is due.
    pub(super) fn refresh_due<P>(&self, core: &Core<P>) -> bool {
        self.last_refresh
            .is_none_or(|at| at.elapsed() >= core.config.heartbeat_interval)
    }
}
