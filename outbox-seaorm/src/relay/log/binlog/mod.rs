//! The log relay's second source: MariaDB's binary log (feature `log-relay-mariadb`).
//!
//! | concept | file |
//! |---|---|
//! | GTIDs, positions of every domain, MariaDB's GTID event | `gtid.rs` |
//! | the binlog dump: connecting at a position, events into [`Change`](super::change::Change)s | `source.rs` |
//! | the first start's consistent snapshot and its position | `snapshot.rs` |
//! | the checks at start (binlog settings, grants, server id) | `start.rs` |
//! | one session: backfill, stream, stored position | `session.rs` |

pub(crate) mod gtid;
mod session;
mod snapshot;
pub(crate) mod source;
mod start;
