//! The slot's lease while a session streams, whichever log it reads: renewed every third
//! of its TTL, with the acknowledged position recorded in the same turn; a lease taken
//! over, or not renewed within its TTL, ends the session.

use std::time::{Duration, Instant};

use outbox_core::publish::Publisher;
use tokio_util::sync::CancellationToken;

use super::LogRelay;
use super::change::Acknowledger;
use super::error::LogRelayError;

/// The steps, as [`DatabaseOutage`](crate::outage::DatabaseOutage) names them.
const LEASE_RENEWAL: &str = "lease renewal";
const ACKNOWLEDGED: &str = "acknowledged position";

impl<P: Publisher + 'static> LogRelay<P> {
    /// Renews the slot's lease every third of its TTL (recording the acknowledged
    /// position) until `stop`; a lease taken over or not renewed within its TTL stops the
    /// session ([`LogRelayError::LeaseLost`]).
    pub(super) async fn renew_lease(
        &self,
        acknowledger: &Acknowledger,
        stop: &CancellationToken,
    ) -> Result<(), LogRelayError> {
        let ttl = self.config.lease_ttl;
        let mut renewed = Instant::now();
        loop {
            tokio::select! {
                () = stop.cancelled() => return Ok(()),
                () = tokio::time::sleep(ttl / 3) => {}
            }
            let slot = &self.config.slot;
            let me = &self.config.instance_id;
            match self.store.take_log_lease(&self.db, slot, me, ttl).await {
                Ok(Some(_)) => {
                    renewed = Instant::now();
                    self.outage.succeeded(LEASE_RENEWAL);
                }
                Ok(None) => {
                    stop.cancel();
                    return Err(LogRelayError::LeaseLost { slot: slot.clone() });
                }
                Err(error) => {
                    self.outage.failed(LEASE_RENEWAL, &error);
                    if renewed.elapsed() >= ttl.saturating_sub(Duration::from_millis(100)) {
                        stop.cancel();
                        return Err(LogRelayError::LeaseLost { slot: slot.clone() });
                    }
                    continue;
                }
            }
            if let Some(position) = acknowledger.acknowledged() {
                let text = position.text();
                match self
                    .store
                    .record_log_acknowledged(&self.db, slot, me, &text)
                    .await
                {
                    Ok(_) => self.outage.succeeded(ACKNOWLEDGED),
                    Err(error) => {
                        self.outage.failed(ACKNOWLEDGED, &error);
                    }
                }
            }
        }
    }
}
