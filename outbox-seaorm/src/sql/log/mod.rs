//! The log relay's statements, one operation per file (PostgreSQL's and, where MariaDB's
//! differ, both in the same file):
//!
//! | operation | file |
//! |---|---|
//! | what start-up checks: `wal_level`, the `REPLICATION` privilege, free slots | `preflight.rs` |
//! | the publication of the outbox's inserts: create, check | `publication.rs` |
//! | the replication slot: state, lag, `wal_status`, drop | `slot.rs` |
//! | the idle-database heartbeat (`pg_logical_emit_message`) | `heartbeat.rs` |
//! | the slot lease (one active relay per slot), backfill mark, acknowledged position | `lease.rs` |
//! | MariaDB's start-up checks: binlog settings, server id, grants | `binlog_preflight.rs` |
//! | MariaDB's binlog position now (a slot's lag) | `binlog_position.rs` |
//! | dead and parked events: write, held aggregates, transitions, operator reads | `dead_letter.rs` |
//! | retention: the oldest streamed (still `pending`) rows, in `seq` order | `purge.rs` |
//! | a new slot's backfill: the snapshot import, the pending rows page by page | `backfill.rs` |
//!
//! The replication stream itself is not SQL: it lives behind `relay::log::source` (and
//! MariaDB's binlog dump and snapshot behind `relay::log::binlog`).

mod backfill;
#[cfg(feature = "log-relay-mariadb")]
mod binlog_position;
#[cfg(feature = "log-relay-mariadb")]
mod binlog_preflight;
mod dead_letter;
mod heartbeat;
mod lease;
mod preflight;
mod publication;
mod purge;
mod slot;

#[cfg(feature = "log-relay-mariadb")]
pub(crate) use binlog_preflight::BinlogPreflight;
pub(crate) use dead_letter::NewLogDeadLetter;
pub(crate) use lease::SlotLease;
pub(crate) use preflight::Preflight;
pub(crate) use slot::SlotRow;
