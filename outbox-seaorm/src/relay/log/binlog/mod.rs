//! The log relay's second source: MariaDB's binary log (feature `log-relay-mariadb`).
//!
//! Work in progress (issue 34): the GTID positions and the binlog reader stand here, tested
//! on their own; the session that backfills from a consistent snapshot, streams from the
//! stored position and acknowledges it after the broker confirmed is next, and wires this
//! module into [`LogRelay`](super::LogRelay). Until then nothing outside this module calls
//! it, hence the `dead_code` allowance below (to be removed with the wiring).
#![allow(dead_code)]

pub(crate) mod gtid;
pub(crate) mod source;
