//! The columns of the worker keys' concurrency slots (`<outbox>_worker_slots`, see
//! [`OutboxBuilder::worker_key_limit`](crate::OutboxBuilder::worker_key_limit)).

/// A column of the worker slots table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WorkerSlotColumn {
    /// The worker key (with the slot, the primary key).
    WorkerKey,
    /// The slot's number, `0` to the key's limit − 1.
    Slot,
}

impl WorkerSlotColumn {
    /// The column's name.
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Self::WorkerKey => "worker_key",
            Self::Slot => "slot",
        }
    }
}
