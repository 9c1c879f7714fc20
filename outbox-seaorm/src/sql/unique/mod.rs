//! The unique jobs' statements (see [`Unique`](crate::job::Unique)), run on the committing unit of
//! work's transaction: a key's holder read and locked, whether that job still waits, the
//! key released, the key taken.

mod claim;
mod list;

pub(crate) use claim::{Holder, job_waiting, lock_holder, release, take};
