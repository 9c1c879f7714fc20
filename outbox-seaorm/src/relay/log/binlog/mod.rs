//! The log relay's second source: MariaDB's binary log (feature `log-relay-mariadb`).
//!
//! | concept | file |
//! |---|---|
//! | MariaDB's GTID event (GTIDs and positions: `crate::gtid`) | `gtid_event.rs` |
//! | the binlog dump: connecting at a position, events into [`Change`](super::change::Change)s | `source.rs` |
//! | the first start's consistent snapshot and its position | `snapshot.rs` |
//! | the checks at start (binlog settings, grants, server id) | `start.rs` |
//! | one session: backfill, stream, stored position | `session.rs` |

mod gtid_event;
mod session;
mod snapshot;
pub(crate) mod source;
mod start;
