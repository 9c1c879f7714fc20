//! [`LogRelayReport`]: what a log relay did.

use super::change::Position;

/// What a [`LogRelay`](super::LogRelay) did while it ran.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LogRelayReport {
    /// Events the broker confirmed.
    pub published: u64,
    /// Failed attempts that were retried.
    pub retried: u64,
    /// Events given up on (a permanent rejection, `max_attempts` transient failures, or an
    /// unreadable row).
    pub dead_lettered: u64,
    /// Events published by backfills (rows pending when a new slot was created); also
    /// counted in `published`.
    pub backfilled: u64,
    /// Events parked behind a dead event of their aggregate (Block).
    pub parked: u64,
    /// Jobs that snoozed: written to the scheduled table, due again at their snooze's time.
    pub snoozed: u64,
    /// Held events published after an operator's requeue or skip (also counted in
    /// `published`).
    pub released: u64,
    /// Transactions acknowledged (heartbeats included).
    pub transactions: u64,
    /// Heartbeat messages received back from the stream.
    pub heartbeats: u64,
    /// Failed attempts retried after the backoff: the tables, the slot's lease or the
    /// stream failed.
    pub restarts: u64,
    /// The last position acknowledged to the server (PostgreSQL; 0: none).
    pub acknowledged_lsn: u64,
}

impl LogRelayReport {
    /// Adds the counts of `other` (one streaming session) to this report.
    pub(super) fn merge(&mut self, other: &Self) {
        self.published += other.published;
        self.backfilled += other.backfilled;
        self.retried += other.retried;
        self.snoozed += other.snoozed;
        self.dead_lettered += other.dead_lettered;
        self.parked += other.parked;
        self.released += other.released;
        self.transactions += other.transactions;
        self.heartbeats += other.heartbeats;
        self.restarts += other.restarts;
        self.acknowledged_lsn = self.acknowledged_lsn.max(other.acknowledged_lsn);
    }

    /// Notes the position of an acknowledgement.
    pub(super) fn acknowledge(&mut self, position: &Position) {
        match position {
            #[cfg(feature = "log-relay")]
            Position::Lsn(lsn) => self.acknowledged_lsn = self.acknowledged_lsn.max(*lsn),
            #[cfg(feature = "log-relay-mariadb")]
            Position::Gtid(_) => {}
        }
    }
}
