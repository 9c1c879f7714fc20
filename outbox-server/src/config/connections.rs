//! `[connections]`: a connection budget per database server, shared by the relays of its
//! databases (see `outbox_seaorm::budget`).
//!
//! ```toml
//! [connections]
//! max_per_server = 20     # every relay on postgres://db:5432 together
//! idle_timeout = "30s"    # a relay idle this long holds no connection
//! ```

use std::time::Duration;

use super::file::FileConnections;
use super::problem::Problems;
use super::value::positive_duration;

/// How long a relay's connections stay open after its last turn, unless `idle_timeout`
/// says otherwise.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// The connections each relay of a budgeted server may hold in its turn, unless its
/// `max_connections` says otherwise.
pub const DEFAULT_BUDGETED_RELAY_CONNECTIONS: u32 = 2;

/// The connection budget per database server.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnectionSettings {
    /// The most connections the relays of one server (host and port) hold at once.
    pub max_per_server: u32,
    /// A relay idle this long closes its connections (default 30 s).
    pub idle_timeout: Duration,
}

/// Checks `[connections]`.
pub(crate) fn check(
    file: Option<&FileConnections>,
    problems: &mut Problems,
) -> Option<Option<ConnectionSettings>> {
    let Some(file) = file else {
        return Some(None);
    };
    let max_per_server = match file.max_per_server {
        Some(0) => {
            problems.add("connections.max_per_server", "must be at least 1");
            None
        }
        Some(max) => Some(max),
        None => {
            problems.add(
                "connections.max_per_server",
                "missing: the most connections the relays of one database server hold at once",
            );
            None
        }
    };
    let idle_timeout = match &file.idle_timeout {
        Some(text) => positive_duration(problems, "connections.idle_timeout", text),
        None => Some(DEFAULT_IDLE_TIMEOUT),
    };
    Some(Some(ConnectionSettings {
        max_per_server: max_per_server?,
        idle_timeout: idle_timeout?,
    }))
}
