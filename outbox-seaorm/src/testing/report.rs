//! [`DrainReport`]: what [`TestKit::drain_until_idle`](super::TestKit::drain_until_idle) did.

use chrono::{DateTime, Utc};

use crate::inbox::{Delivered, ParkedReport, RedeliveryReport};
use crate::relay::RelayReport;

/// What one [`drain_until_idle`](super::TestKit::drain_until_idle) did, summed over its
/// rounds (a round: the relay drains, then every consumer takes what the broker received
/// since its last delivery, then redelivers its due parked and requeued messages).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DrainReport {
    /// Rounds run, the last one idle.
    pub rounds: usize,
    /// Outbox rows the relay marked published.
    pub published: usize,
    /// Outbox rows whose publication failed transiently (they wait for their next attempt).
    pub relay_retried: usize,
    /// Outbox rows the relay dead-lettered or marked `failed`.
    pub relay_dead_lettered: usize,
    /// Messages handed to consumers (one per consumer and broker message, redeliveries
    /// after a crash included).
    pub deliveries: usize,
    /// Messages whose handler ran and committed (parked and requeued ones included).
    pub applied: usize,
    /// Messages a consumer had already applied: skipped by its inbox.
    pub duplicates: usize,
    /// Messages no handler of their consumer takes (ignored or dead-lettered as unknown are
    /// counted here or in `dead_lettered`, as the consumer decided).
    pub ignored: usize,
    /// Messages moved to a consumer's dead-letter table.
    pub dead_lettered: usize,
    /// Messages parked for a later attempt, or behind an earlier message of their aggregate.
    pub parked: usize,
    /// Crashes played ([`Crash`](super::Crash)).
    pub crashes: usize,
    /// When the earliest parked message waiting for its next attempt is due: advance a
    /// [`ManualClock`](super::ManualClock) to it and drain again.
    pub next_retry_due: Option<DateTime<Utc>>,
}

impl DrainReport {
    pub(super) fn relay(&mut self, relay: &RelayReport) {
        self.published += relay.published;
        self.relay_retried += relay.retried;
        self.relay_dead_lettered += relay.dead_lettered + relay.failed;
    }

    pub(super) fn delivered(&mut self, delivered: &Delivered) {
        self.deliveries += 1;
        match delivered {
            Delivered::Applied { .. } => self.applied += 1,
            Delivered::Duplicate => self.duplicates += 1,
            Delivered::Ignored { .. } => self.ignored += 1,
            Delivered::DeadLettered { .. } => self.dead_lettered += 1,
            Delivered::Parked { .. } => self.parked += 1,
        }
    }

    pub(super) fn parked(&mut self, parked: &ParkedReport) {
        self.applied += usize::try_from(parked.applied).unwrap_or(usize::MAX);
        self.dead_lettered += usize::try_from(parked.dead_lettered).unwrap_or(usize::MAX);
        if let Some(due) = parked.next_due {
            self.next_retry_due = Some(self.next_retry_due.map_or(due, |at| at.min(due)));
        }
    }

    pub(super) fn requeued(&mut self, requeued: &RedeliveryReport) {
        self.applied += usize::try_from(requeued.resolved).unwrap_or(usize::MAX);
    }
}
