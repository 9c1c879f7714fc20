//! [`Budgets`]: the connection budget of each database server the service's relays use
//! (`[connections]`), keyed by the `host:port` of their database URLs.

use std::collections::BTreeMap;
use std::time::Duration;

use outbox_seaorm::budget::ConnectionBudget;

use crate::config::{ConnectionSettings, RelaySettings};

/// The connection budget of each database server, made when its first relay starts.
#[derive(Debug, Default)]
pub(super) struct Budgets {
    settings: Option<ConnectionSettings>,
    by_server: BTreeMap<String, ConnectionBudget>,
}

impl Budgets {
    /// No budget yet; one per server as relays start, when `settings` is given.
    pub(super) fn new(settings: Option<ConnectionSettings>) -> Self {
        Self {
            settings,
            by_server: BTreeMap::new(),
        }
    }

    /// The budget of `relay`'s server, if the service has budgets (SQLite has none).
    pub(super) fn of(&mut self, relay: &RelaySettings) -> Option<(ConnectionBudget, Duration)> {
        let settings = self.settings.as_ref()?;
        let server = server_of(relay.database_url.expose())?;
        let budget = self
            .by_server
            .entry(server)
            .or_insert_with(|| {
                ConnectionBudget::new(settings.max_per_server, settings.idle_timeout)
            })
            .clone();
        Some((budget, settings.idle_timeout))
    }
}

/// `host:port` of a server's database URL (the default port of its scheme when none is
/// given); `None` for SQLite.
fn server_of(url: &str) -> Option<String> {
    let parsed = url::Url::parse(url).ok()?;
    let port = parsed.port().unwrap_or(match parsed.scheme() {
        "postgres" | "postgresql" => 5432,
        "mysql" | "mariadb" => 3306,
        _ => return None,
    });
    Some(format!("{}:{port}", parsed.host_str()?))
}

#[cfg(test)]
mod tests {
    use super::server_of;

    #[test]
    fn servers_are_host_and_port() {
        assert_eq!(server_of("postgres://u:p@db/x").as_deref(), Some("db:5432"));
        assert_eq!(
            server_of("mysql://root@db:3307/x").as_deref(),
            Some("db:3307")
        );
        assert_eq!(server_of("sqlite://x.db"), None);
    }
}
