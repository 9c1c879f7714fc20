//! `[[relay]]`: one relay, for one outbox in one database.

use std::collections::BTreeSet;

use outbox_seaorm::Outbox;
use outbox_seaorm::relay::RelayConfig;
use outbox_seaorm::relay::log::LogRelayConfig;

use super::broker::{self, BrokerSettings};
use super::env::{Overrides, env_name};
use super::file::FileRelay;
use super::log::check_log;
use super::outbox::check_outbox;
use super::problem::Problems;
use super::secret::Secret;
use super::tuning::check_relay_config;
use super::value::choice;

/// How a relay reads the outbox.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum RelayMethod {
    /// The polling relay (every database): claims rows under leases.
    Polling,
    /// The log relay: tails the outbox's inserts through a replication slot (PostgreSQL
    /// with `wal_level = logical`) or the binary log (MariaDB with `log_bin`, row
    /// format). Its configuration is complete and checked, but for the
    /// replication connection's URL: the relay's database URL, given when it starts.
    Log(Box<LogRelayConfig>),
}

impl RelayMethod {
    /// `polling` or `log`.
    pub const fn as_str(&self) -> &'static str {
        match self {
            Self::Polling => "polling",
            Self::Log(_) => "log",
        }
    }
}

/// One relay of the service.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RelaySettings {
    /// Its name: the `relay` label of its metrics, its key in `/readyz` and the console,
    /// and the `<NAME>` of its environment variables.
    pub name: String,
    /// The database the outbox is in.
    pub database_url: Secret,
    /// The outbox: its tables, column naming, partitions and write mode, with the metric
    /// label `relay = <name>`.
    pub outbox: Outbox,
    /// Polling or log relay.
    pub method: RelayMethod,
    /// Batch size, attempts, backoff, ordering, dead letters, leases and retention (the
    /// log relay takes batch size, attempts, backoff, dead-letter policy, publish timeout,
    /// lease TTL and retention from it).
    pub relay: RelayConfig,
    /// The most connections the relay's pool opens (SeaORM's default when absent).
    pub max_connections: Option<u32>,
    /// Where it publishes.
    pub broker: BrokerSettings,
}

/// Checks the relays; `relays[i]` is `None` when the `[[relay]]` table did not read.
pub(crate) fn check_all(
    relays: &[Option<FileRelay>],
    overrides: &Overrides,
    problems: &mut Problems,
) -> Vec<RelaySettings> {
    let mut names = BTreeSet::new();
    let mut checked = Vec::new();
    for (index, relay) in relays.iter().enumerate() {
        let Some(relay) = relay else { continue };
        let path = format!("relay[{index}]");
        if let Some(name) = &relay.name
            && !names.insert(env_name(name))
        {
            problems.add(
                format!("{path}.name"),
                format!("`{name}` is taken by an earlier relay (names are compared as in their environment variables: upper case, `-` as `_`)"),
            );
        }
        if let Some(settings) = check(relay, &path, overrides, problems) {
            checked.push(settings);
        }
    }
    checked
}

/// Checks one relay at `path`.
pub(crate) fn check(
    file: &FileRelay,
    path: &str,
    overrides: &Overrides,
    problems: &mut Problems,
) -> Option<RelaySettings> {
    let before = problems.len();
    let key = |name: &str| format!("{path}.{name}");
    let name = match &file.name {
        Some(name) if relay_name_ok(name) => Some(name.clone()),
        Some(name) => {
            problems.add(
                key("name"),
                format!(
                    "`{name}` is not a relay name: 1 to 63 of `a-z 0-9 _ -`, starting with a letter"
                ),
            );
            None
        }
        None => {
            problems.add(
                key("name"),
                "missing: the relay's name (its metrics label and environment prefix)",
            );
            None
        }
    };
    let method_log = match file.method.as_deref() {
        // A `method` of the wrong type says nothing about which relay this is.
        None if problems.is_unreadable(&key("method")) => None,
        None => Some(false),
        Some(text) => choice(
            problems,
            &key("method"),
            text,
            &[("polling", false), ("log", true)],
        ),
    };
    let at = overrides.at(&key("database_url"));
    let database_url = match &file.database_url {
        Some(url) => {
            if let Some(problem) = database_url_problem(url, method_log == Some(true)) {
                problems.add(at.name(), problem);
            }
            Some(Secret::new(url.clone()))
        }
        None => {
            let var = name.as_deref().map_or_else(
                || "OUTBOX_RELAY_<NAME>_DATABASE_URL".to_owned(),
                |name| format!("OUTBOX_RELAY_{}_DATABASE_URL", env_name(name)),
            );
            problems.add(at.name(), format!("missing: set it, or {var}"));
            None
        }
    };
    let relay = check_relay_config(
        file,
        name.as_deref(),
        method_log == Some(true),
        path,
        problems,
    );
    let method = match (method_log, &file.log) {
        (Some(true), Some(log)) => {
            for (polling_only, present) in [
                ("poll_interval", file.poll_interval.is_some()),
                ("ordering", file.ordering.is_some()),
                ("worker_keys", file.worker_keys.is_some()),
                ("heartbeat_interval", file.heartbeat_interval.is_some()),
            ] {
                if present {
                    problems.add(
                        key(polling_only),
                        "only for `method = \"polling\"` (the log relay publishes in commit order, with its heartbeat in [relay.log])",
                    );
                }
            }
            check_log(log, file, relay.as_ref(), path, problems)
                .map(|config| RelayMethod::Log(Box::new(config)))
        }
        (Some(true), None) => {
            problems.add(
                key("log"),
                "missing: `method = \"log\"` needs [relay.log] with its `slot`",
            );
            None
        }
        (Some(false), Some(_)) => {
            problems.add(key("log"), "only for `method = \"log\"`");
            None
        }
        (Some(false), None) => Some(RelayMethod::Polling),
        (None, _) => None,
    };
    let outbox = check_outbox(file, name.as_deref(), path, problems);
    if file.max_connections == Some(0) {
        problems.add(key("max_connections"), "must be at least 1");
    }
    let broker = broker::check(file.broker.as_ref(), &key("broker"), overrides, problems);
    if problems.len() > before {
        return None;
    }
    Some(RelaySettings {
        name: name?,
        database_url: database_url?,
        outbox: outbox?,
        method: method?,
        relay: relay?,
        max_connections: file.max_connections,
        broker: broker?,
    })
}

/// `a-z 0-9 _ -`, 1 to 63 characters, a letter first.
fn relay_name_ok(name: &str) -> bool {
    (1..=63).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

/// What is wrong with a database URL, if anything.
fn database_url_problem(url: &str, log: bool) -> Option<String> {
    let parsed = match url::Url::parse(url) {
        Ok(parsed) => parsed,
        Err(error) => {
            return Some(format!(
                "`{}` is not a URL ({error}); write e.g. `postgres://user@host:5432/db`",
                super::secret::redacted_url(url)
            ));
        }
    };
    match (parsed.scheme(), log) {
        ("postgres" | "postgresql" | "mysql" | "mariadb", _) | ("sqlite", false) => None,
        ("sqlite", true) => Some(
            "the log relay reads PostgreSQL's write-ahead log or MariaDB's binary log: SQLite has \
             neither (use `method = \"polling\"`)"
                .to_owned(),
        ),
        (scheme, _) => Some(format!(
            "scheme `{scheme}://` is not a database the relay knows: `postgres://`, `mysql://`, `mariadb://` or `sqlite://`"
        )),
    }
}
