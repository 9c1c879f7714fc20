//! [`Core`]: the state every engine part of a relay shares.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use outbox_core::policy::Ordering;

use super::config::RelayConfig;
use super::outage;
use crate::config::Outbox;
use crate::job::SharedAlertHook;
use crate::sql::{Claim, Store};
use crate::transaction::Pool;

/// What every engine part of a relay shares: the database, the outbox, the publisher, the
/// settings and the relay's statements. Built once by [`RelayBuilder`](super::RelayBuilder);
/// the batch, the pipeline, the leases and the job-queue parts work on it.
pub(super) struct Core<P> {
    pub(super) db: Pool,
    pub(super) outbox: Outbox,
    pub(super) publisher: Arc<P>,
    pub(super) config: RelayConfig,
    pub(super) alert_hook: Option<SharedAlertHook>,
    pub(super) store: Store,
    /// Every lease this relay competes for (empty: no leases).
    pub(super) lease_keys: Vec<String>,
    pub(super) labels: Vec<metrics::Label>,
    /// What the relay logs while its broker fails ([`outage`]).
    pub(super) health: Arc<outage::PublishHealth>,
    /// Set once the slot rows of the limited worker keys are written (see
    /// [`jobs`](super::jobs)).
    pub(super) worker_slots: tokio::sync::OnceCell<()>,
}

impl<P> Core<P> {
    pub(super) fn leased(&self) -> bool {
        !self.lease_keys.is_empty()
    }

    pub(super) fn now(&self) -> DateTime<Utc> {
        self.outbox.clock().now()
    }

    pub(super) fn description(&self) -> String {
        format!(
            "pid {} ordering {} outbox {}",
            std::process::id(),
            self.config.ordering.as_str(),
            self.outbox.outbox_table()
        )
    }

    pub(super) fn claim<'a>(
        &self,
        now: DateTime<Utc>,
        partitions: Option<&'a [i32]>,
        worker_keys: Option<&'a [String]>,
    ) -> Claim<'a> {
        Claim {
            now,
            partitions,
            limit: self.config.batch_size,
            ordered: self.config.ordering == Ordering::PerAggregate,
            dead_letters: self.config.dead_letter_policy,
            lock: true,
            worker_keys,
            past: None,
        }
    }
}
