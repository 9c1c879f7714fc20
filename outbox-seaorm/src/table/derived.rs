//! The names derived from the outbox and inbox tables — the relay's tables, the consumers'
//! dead-letter, parked-message and lease tables, index names — computed here and nowhere else.
//!
//! A derived name is `<table>_<suffix>` in the same schema, shortened with a hash of the
//! table name when it would exceed [`MAX_IDENTIFIER_LEN`] characters.

use super::{MAX_IDENTIFIER_LEN, TableName};
use crate::partition::fnv1a_64;

/// The names of the relay's tables for one outbox.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RelayTables {
    /// Leases: partitions, the SQLite relay lease, cleanup leases.
    pub leases: TableName,
    /// Live relay instances and their heartbeats.
    pub instances: TableName,
    /// Operator actions (requeue, skip): who, when, why.
    pub operator_log: TableName,
    /// The log relay's slots: the lease of each slot's active relay, its backfill (PostgreSQL).
    pub log_slots: TableName,
    /// The log relay's dead and parked events (PostgreSQL).
    pub log_dead_letters: TableName,
}

impl RelayTables {
    /// The relay tables next to `outbox_table`.
    pub(crate) fn next_to(outbox_table: &TableName) -> Self {
        Self {
            leases: derived(outbox_table, "relay_leases"),
            instances: derived(outbox_table, "relay_instances"),
            operator_log: derived(outbox_table, "operator_log"),
            log_slots: derived(outbox_table, "log_slots"),
            log_dead_letters: derived(outbox_table, "log_dead_letters"),
        }
    }
}

/// Every table one outbox configuration names: its two tables and those derived from them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TableNames {
    /// The outbox table.
    pub(crate) outbox: TableName,
    /// The inbox table.
    pub(crate) inbox: TableName,
    /// The scheduled rows, not yet due: `<outbox>_scheduled`.
    pub(crate) scheduled: TableName,
    /// The periodic jobs' next and last runs: `<outbox>_periodic`.
    pub(crate) periodic: TableName,
    /// The unique jobs' keys: `<outbox>_unique`.
    pub(crate) unique: TableName,
    /// The worker keys' concurrency slots: `<outbox>_worker_slots`.
    pub(crate) worker_slots: TableName,
    /// The relay's tables, next to the outbox table.
    pub(crate) relay: RelayTables,
    /// The consumers' dead letters: `<inbox>_dead_letters`.
    pub(crate) dead_letters: TableName,
    /// The consumers' parked messages: `<inbox>_parked`.
    pub(crate) parked: TableName,
    /// The partitioned consumers' leases: `<inbox>_consumer_leases`.
    pub(crate) consumer_leases: TableName,
    /// The partitioned consumers' live instances: `<inbox>_consumer_instances`.
    pub(crate) consumer_instances: TableName,
}

impl TableNames {
    /// The names of an outbox configuration with these two tables.
    pub(crate) fn derive(outbox: TableName, inbox: TableName) -> Self {
        Self {
            relay: RelayTables::next_to(&outbox),
            scheduled: derived(&outbox, "scheduled"),
            periodic: derived(&outbox, "periodic"),
            unique: derived(&outbox, "unique"),
            worker_slots: derived(&outbox, "worker_slots"),
            dead_letters: derived(&inbox, "dead_letters"),
            parked: derived(&inbox, "parked"),
            consumer_leases: derived(&inbox, "consumer_leases"),
            consumer_instances: derived(&inbox, "consumer_instances"),
            outbox,
            inbox,
        }
    }
}

/// `<table>_<suffix>` in `table`'s schema, shortened with a hash when over 63 characters.
pub(crate) fn derived(table: &TableName, suffix: &str) -> TableName {
    let name = index_name(table, suffix);
    let qualified = match table.schema() {
        Some(schema) => format!("{schema}.{name}"),
        None => name,
    };
    // Built from a valid name and an identifier suffix: always valid.
    TableName::new(&qualified).unwrap_or_else(|_| table.clone())
}

/// `<table>_<suffix>` without the schema (an index name), shortened with a hash of the table
/// name when over 63 characters.
pub(crate) fn index_name(table: &TableName, suffix: &str) -> String {
    let full = format!("{}_{suffix}", table.table());
    if full.len() <= MAX_IDENTIFIER_LEN {
        return full;
    }
    let hash = fnv1a_64(table.table().as_bytes()) as u32;
    let keep = MAX_IDENTIFIER_LEN - suffix.len() - 10;
    // Validated table names are ASCII, so any byte index is a character boundary.
    let prefix = table.table().get(..keep).unwrap_or_default();
    format!("{prefix}_{hash:08x}_{suffix}")
}
