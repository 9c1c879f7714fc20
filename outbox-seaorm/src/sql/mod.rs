//! Every statement the crate runs against the outbox and its relay tables, one operation
//! per file, on top of three shared pieces:
//!
//! - [`columns`]: the outbox columns in their one order, used by the `INSERT`, every
//!   `SELECT` and the decoding;
//! - [`dialect`]: how each backend quotes names and binds and reads values;
//! - [`statement`]: [`Sql`](statement::Sql), a statement under construction.
//!
//! | operation | file |
//! |---|---|
//! | a commit's multi-row `INSERT` (and its `NOTIFY`, or the `remove_after_insert` delete) | `insert.rs` |
//! | a commit's logical messages (message mode, PostgreSQL) | `emit.rs` |
//! | reading rows back as [`OutboxRecord`](crate::record::OutboxRecord)s | `record.rs` |
//! | the due-row and per-aggregate conditions | `due.rs` |
//! | claiming rows (relay, fast path) | `claim.rs` |
//! | decoding claimed rows | `decode.rs` |
//! | marking rows published or failed | `mark.rs` |
//! | leases (relay, consumer partitions, cleanup) and their fencing tokens | `lease.rs` |
//! | the relay or consumer instances that share them: heartbeats, live list | `instance.rs` |
//! | the inbox, the consumers' dead letters and parked messages | `inbox/` |
//! | retention deletes | `retention.rs` |
//! | rows due later: a commit's insert, the promotion into the outbox table | `scheduled/` |
//! | periodic jobs' runs; unique jobs' keys; worker keys' concurrency slots | `periodic/`, `unique/`, `worker_slots/` |
//! | the log relay: start-up checks, publication, slot, heartbeat (PostgreSQL) | `log/` |
//! | operator actions, status | `ops/` |
//!
//! This layer knows tables, columns and backends; it never imports the relay, the inbox
//! runtime or the operations.

pub(crate) mod columns;
pub(crate) mod dialect;
pub(crate) mod statement;

mod claim;
mod decode;
mod due;
pub(crate) mod emit;
pub(crate) mod inbox;
pub(crate) mod insert;
mod instance;
mod lease;
#[cfg(log_relay)]
pub(crate) mod log;
mod mark;
pub(crate) mod ops;
pub(crate) mod periodic;
mod plan_cache;
mod record;
mod retention;
pub(crate) mod scheduled;
mod store;
pub(crate) mod unique;
mod worker_slots;

pub(crate) use claim::{Claim, PastInFlight};
pub(crate) use decode::{ClaimedRow, Unreadable};
pub(crate) use dialect::is_lock_not_available;
pub(crate) use instance::Members;
pub(crate) use lease::LeaseLock;
pub(crate) use mark::AfterFailure;
pub(crate) use ops::{ActionRow, InstanceRow};
pub(crate) use store::Store;
