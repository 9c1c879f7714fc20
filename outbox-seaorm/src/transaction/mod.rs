//! Transactions that a cancelled caller cannot leave half-way on a pooled connection.
//!
//! sqlx's connections are not cancel-safe: a future dropped while a statement is in flight
//! leaves the connection mid-protocol. Dropped mid-`BEGIN`, the connection goes back to the
//! pool inside a transaction nobody owns (PostgreSQL and MariaDB: sqlx counts a transaction
//! only once `BEGIN` has returned); dropped while MariaDB prepares a statement, the
//! connection cannot read its own replies any more and its return to the pool waits
//! forever, holding a pool slot (launchbadge/sqlx#563); dropped mid-`BEGIN` on SQLite, the
//! connection is closed, and an in-memory database with it. All three were reproduced by
//! `tests/tests/cancellation.rs`. The cure is the same: the statement runs on a task of its
//! own, which completes it whatever happens to the caller.
//!
//! - [`begin`]: `BEGIN` on a task of its own (the relay, the operations, the inbox, every
//!   unit of work begun on a pool);
//! - [`task`]: a transaction whose every statement, and its `COMMIT`, runs on a task of its
//!   own on MariaDB (the unit of work's);
//! - [`pool`]: the pool of the relay, the inbox and the operations, which behind a
//!   transaction pooler runs each statement outside a transaction in one of its own.

mod begin;
mod pool;
mod task;

pub(crate) use begin::{begin_whole, begin_whole_at};
pub(crate) use pool::Pool;
pub(crate) use task::TaskTransaction;
