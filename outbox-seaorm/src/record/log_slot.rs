//! The plain types of the log relay's state as operators see it (`outbox status`, the
//! operations API): its slots and its dead letters.

/// One log relay slot of an outbox, as `<outbox>_log_slots` and `pg_replication_slots`
/// (MariaDB: `@@gtid_binlog_pos`) show it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct LogSlotStatus {
    /// The slot.
    pub slot: String,
    /// The log relay that holds its lease now (`None`: no relay is active).
    pub active_relay: Option<String>,
    /// Whether the rows pending at the slot's creation have been published.
    pub backfilled: bool,
    /// The last position a relay recorded as acknowledged.
    pub acknowledged_lsn: Option<String>,
    /// Bytes of WAL the slot holds back (`None`: the server has no such slot).
    pub lag_bytes: Option<i64>,
    /// MariaDB: transactions the server binlogged after the stored position, every
    /// replication domain summed (`None` on PostgreSQL, or when the position does not
    /// read). The relay's own lease and position writes count: an idle slot shows a few.
    pub lag_transactions: Option<u64>,
    /// `reserved`, `extended`, `unreserved` or `lost` (invalidated).
    pub wal_status: Option<String>,
    /// Whether a replication connection streams from it now.
    pub streaming: bool,
}

/// The log relay part of an outbox's status.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct LogRelayStatus {
    /// The slots.
    pub slots: Vec<LogSlotStatus>,
    /// Dead events waiting for an operator.
    pub dead: u64,
    /// Events parked behind a dead event of their aggregate.
    pub parked: u64,
    /// Events requeued, waiting for the active relay.
    pub requeued: u64,
}
