//! What a relay reports: [`RelayError`], [`BatchReport`], [`RelayReport`], [`LeaseReport`].

use sea_orm::DbErr;

#[cfg(doc)]
use super::Relay;

/// Why a relay operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RelayError {
    /// The database failed; nothing of the batch was marked (it is retried later).
    #[error("relay database error: {0}")]
    Database(#[from] DbErr),
}

/// What one batch did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BatchReport {
    /// Rows claimed.
    pub claimed: usize,
    /// Rows marked published.
    pub published: usize,
    /// Rows that failed transiently and wait for their next attempt.
    pub retried: usize,
    /// Rows moved to `dead`.
    pub dead_lettered: usize,
    /// Rows moved to `failed` (not retryable, see [`crate::job`]).
    pub failed: usize,
    /// Claimed rows left untouched (behind a failed row of their aggregate, or not at the
    /// head of their aggregate).
    pub deferred: usize,
    /// Jobs that asked to run again later (snoozed; no attempt counted). Not progress: a
    /// batch of snoozes alone ends a drain, so that a job snoozed into the past runs again
    /// at the next poll, not in a loop within one drain.
    pub snoozed: usize,
}

impl BatchReport {
    /// Whether the batch changed any row.
    pub fn made_progress(&self) -> bool {
        self.published + self.retried + self.dead_lettered + self.failed > 0
    }
}

/// What a relay did over several batches ([`Relay::drain`], [`Relay::run`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RelayReport {
    /// Batches run (including empty ones).
    pub batches: usize,
    /// Rows published.
    pub published: usize,
    /// Transient failures (each followed by a retry later).
    pub retried: usize,
    /// Rows dead-lettered.
    pub dead_lettered: usize,
    /// Rows marked `failed` (not retryable, see [`crate::job`]).
    pub failed: usize,
    /// Jobs snoozed (see [`BatchReport::snoozed`]).
    pub snoozed: usize,
    /// Batches that failed on a database error (run only; they are retried).
    pub errors: usize,
}

impl RelayReport {
    pub(super) fn add(&mut self, batch: &BatchReport) {
        self.batches += 1;
        self.published += batch.published;
        self.retried += batch.retried;
        self.dead_lettered += batch.dead_lettered;
        self.failed += batch.failed;
        self.snoozed += batch.snoozed;
    }

    pub(super) fn merge(&mut self, other: &RelayReport) {
        self.batches += other.batches;
        self.published += other.published;
        self.retried += other.retried;
        self.dead_lettered += other.dead_lettered;
        self.failed += other.failed;
        self.snoozed += other.snoozed;
        self.errors += other.errors;
    }
}

/// What a lease refresh found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaseReport {
    /// Live relay instances, this one included: those without worker keys for a relay
    /// without worker keys (they share partitions), every live instance for a keyed relay.
    pub live_instances: Vec<String>,
    /// The leases this relay holds now (`partition/N`, `relay` on SQLite, `worker/<key>`
    /// for a relay with worker keys).
    pub owned: Vec<String>,
}
