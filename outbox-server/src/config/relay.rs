//! `[[relay]]`: one relay, for one outbox in one database.

use std::collections::BTreeSet;
use std::time::Duration;

use outbox_core::policy::{DeadLetterPolicy, Ordering};
use outbox_seaorm::relay::RelayConfig;
use outbox_seaorm::relay::RelayConfigError;
use outbox_seaorm::table::{ColumnNaming, TableName};
use outbox_seaorm::{Outbox, WriteMode};

use super::broker::{self, BrokerSettings};
use super::env::{Overrides, env_name};
use super::file::{FileLog, FileRelay};
use super::problem::Problems;
use super::secret::Secret;
use super::value::{choice, duration, positive_duration};

/// How a relay reads the outbox.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RelayMethod {
    /// The polling relay (every database): claims rows under leases.
    Polling,
    /// The log relay (PostgreSQL with `wal_level = logical`): tails the outbox's inserts
    /// through a replication slot.
    Log(LogSettings),
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

/// The log relay's settings (`[relay.log]`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LogSettings {
    /// The replication slot (required: it is the relay's position in the log, kept by the
    /// server; renaming it starts over from a new slot).
    pub slot: String,
    /// The publication (default: the log relay's, named after the outbox table).
    pub publication: Option<String>,
    /// Time between idle-database heartbeats.
    pub heartbeat_interval: Option<Duration>,
    /// Time between acknowledgements to the server.
    pub feedback_interval: Option<Duration>,
    /// The relay-level settings the file gives explicitly, which the log relay takes
    /// (the others keep the log relay's own defaults, e.g. its 10 s lease TTL).
    pub shared: SharedSettings,
}

/// The `[[relay]]` settings that both relays take, as the file gives them (`None`: the
/// relay's default).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SharedSettings {
    /// Events per batch.
    pub batch_size: Option<usize>,
    /// Attempts before a dead letter.
    pub max_attempts: Option<u32>,
    /// What a dead letter does to its aggregate.
    pub dead_letter_policy: Option<DeadLetterPolicy>,
    /// The lease TTL.
    pub lease_ttl: Option<Duration>,
    /// The publish timeout.
    pub publish_timeout: Option<Duration>,
    /// The retention (`Some(None)`: forever).
    pub retention: Option<Option<Duration>>,
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
fn check(
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
            check_log(log, &key("log"), problems).map(|mut settings| {
                if let Some(config) = &relay {
                    settings.shared = shared_settings(file, config);
                }
                RelayMethod::Log(settings)
            })
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
        ("postgres" | "postgresql", _) => None,
        ("mysql" | "mariadb" | "sqlite", false) => None,
        ("mysql" | "mariadb" | "sqlite", true) => Some(format!(
            "the log relay reads PostgreSQL's log: `{}://` is not PostgreSQL (use `method = \"polling\"`)",
            parsed.scheme()
        )),
        (scheme, _) => Some(format!(
            "scheme `{scheme}://` is not a database the relay knows: `postgres://`, `mysql://`, `mariadb://` or `sqlite://`"
        )),
    }
}

/// Checks `[relay.log]`.
fn check_log(file: &FileLog, path: &str, problems: &mut Problems) -> Option<LogSettings> {
    let before = problems.len();
    let slot = match &file.slot {
        Some(slot) => {
            if let Err(error) = outbox_seaorm::relay::log::validate_slot_name(slot) {
                problems.add(format!("{path}.slot"), error.to_string());
            }
            Some(slot.clone())
        }
        None => {
            problems.add(
                format!("{path}.slot"),
                "missing: the replication slot the relay streams from",
            );
            None
        }
    };
    if let Some(publication) = &file.publication
        && let Err(error) = outbox_seaorm::relay::log::validate_publication_name(publication)
    {
        problems.add(format!("{path}.publication"), error.to_string());
    }
    let heartbeat_interval = file
        .heartbeat_interval
        .as_ref()
        .and_then(|text| positive_duration(problems, &format!("{path}.heartbeat_interval"), text));
    let feedback_interval = file
        .feedback_interval
        .as_ref()
        .and_then(|text| positive_duration(problems, &format!("{path}.feedback_interval"), text));
    if problems.len() > before {
        return None;
    }
    Some(LogSettings {
        slot: slot?,
        publication: file.publication.clone(),
        heartbeat_interval,
        feedback_interval,
        shared: SharedSettings::default(),
    })
}

/// The shared settings the file gives, with the values `config` checked.
fn shared_settings(file: &FileRelay, config: &RelayConfig) -> SharedSettings {
    SharedSettings {
        batch_size: file.batch_size.map(|_| config.batch_size),
        max_attempts: file.max_attempts.map(|_| config.max_attempts),
        dead_letter_policy: file
            .dead_letter_policy
            .as_ref()
            .map(|_| config.dead_letter_policy),
        lease_ttl: file.lease_ttl.as_ref().map(|_| config.lease_ttl),
        publish_timeout: file
            .publish_timeout
            .as_ref()
            .map(|_| config.publish_timeout),
        retention: file.retention.as_ref().map(|_| config.retention),
    }
}

/// The relay's `Outbox`: tables, naming, partitions, write mode, metric label.
fn check_outbox(
    file: &FileRelay,
    name: Option<&str>,
    path: &str,
    problems: &mut Problems,
) -> Option<Outbox> {
    let before = problems.len();
    let mut builder = Outbox::builder();
    for (key, table) in [
        ("outbox_table", &file.outbox_table),
        ("inbox_table", &file.inbox_table),
    ] {
        if let Some(table) = table {
            match TableName::new(table) {
                Err(error) => problems.add(format!("{path}.{key}"), error.to_string()),
                Ok(_) if key == "outbox_table" => builder = builder.outbox_table(table),
                Ok(_) => builder = builder.inbox_table(table),
            }
        }
    }
    if let Some(text) = &file.column_naming
        && let Some(naming) = choice(
            problems,
            &format!("{path}.column_naming"),
            text,
            &[
                ("standard", ColumnNaming::Standard),
                ("debezium", ColumnNaming::Debezium),
            ],
        )
    {
        builder = builder.column_naming(naming);
    }
    if let Some(partitions) = file.partitions {
        builder = builder.partitions(partitions);
    }
    if let Some(log) = &file.log {
        let mode = match log.write_mode.as_deref() {
            None | Some("table") => {
                if log.message_prefix.is_some() {
                    problems.add(
                        format!("{path}.log.message_prefix"),
                        "only for `write_mode = \"message\"`",
                    );
                }
                Some(WriteMode::table())
            }
            Some("table_removed_after_insert") => Some(WriteMode::table_removed_after_insert()),
            Some("message") => Some(match &log.message_prefix {
                Some(prefix) => WriteMode::message_with_prefix(prefix.clone()),
                None => WriteMode::message(),
            }),
            Some(other) => {
                problems.add(
                    format!("{path}.log.write_mode"),
                    format!(
                        "`{other}` is not one of `table`, `table_removed_after_insert`, `message`"
                    ),
                );
                None
            }
        };
        if let Some(mode) = mode {
            builder = builder.write_mode(mode);
        }
    }
    if let Some(name) = name {
        builder = builder.metric_label("relay", name);
    }
    if problems.len() > before {
        return None;
    }
    match builder.build() {
        Ok(outbox) => Some(outbox),
        Err(error) => {
            let key = match &error {
                outbox_seaorm::ConfigError::Partitions { .. } => "partitions",
                outbox_seaorm::ConfigError::WriteMode { .. } => "log.write_mode",
                outbox_seaorm::ConfigError::SameTable { .. } => "inbox_table",
                _ => "outbox_table",
            };
            problems.add(format!("{path}.{key}"), error.to_string());
            None
        }
    }
}

/// The polling relay's settings (which the log relay shares in part).
fn check_relay_config(
    file: &FileRelay,
    name: Option<&str>,
    log: bool,
    path: &str,
    problems: &mut Problems,
) -> Option<RelayConfig> {
    let before = problems.len();
    let key = |name: &str| format!("{path}.{name}");
    let mut config = RelayConfig::default();
    if let Some(name) = name {
        config.instance_id = format!("{name}-{}-{}", std::process::id(), &uuid_suffix());
    }
    if let Some(text) = &file.ordering
        && let Some(ordering) = choice(
            problems,
            &key("ordering"),
            text,
            &[
                ("per_aggregate", Ordering::PerAggregate),
                ("unordered", Ordering::Unordered),
            ],
        )
    {
        config.ordering = ordering;
    }
    if let Some(text) = &file.dead_letter_policy
        && let Some(policy) = choice(
            problems,
            &key("dead_letter_policy"),
            text,
            &[
                ("block", DeadLetterPolicy::Block),
                ("skip", DeadLetterPolicy::Skip),
            ],
        )
    {
        config.dead_letter_policy = policy;
    }
    if let Some(rows) = file.batch_size {
        config.batch_size = rows;
    }
    if let Some(attempts) = file.max_attempts {
        config.max_attempts = attempts;
    }
    let durations: [(&str, &Option<String>, &mut Duration); 4] = [
        (
            "poll_interval",
            &file.poll_interval,
            &mut config.poll_interval,
        ),
        ("lease_ttl", &file.lease_ttl, &mut config.lease_ttl),
        (
            "heartbeat_interval",
            &file.heartbeat_interval,
            &mut config.heartbeat_interval,
        ),
        (
            "publish_timeout",
            &file.publish_timeout,
            &mut config.publish_timeout,
        ),
    ];
    for (name, text, target) in durations {
        if let Some(text) = text
            && let Some(value) = positive_duration(problems, &key(name), text)
        {
            *target = value;
        }
    }
    match file.retention.as_deref() {
        None => {}
        Some("forever") => config.retention = None,
        Some(text) => {
            if let Some(retention) = duration(problems, &key("retention"), text) {
                config.retention = Some(retention);
            }
        }
    }
    if let Some(keys) = &file.worker_keys {
        config.worker_keys = Some(keys.iter().cloned().collect());
    }
    for (setting, zero) in [
        ("batch_size", config.batch_size == 0),
        ("max_attempts", config.max_attempts == 0),
    ] {
        if zero {
            problems.add(key(setting), "must be at least 1");
        }
    }
    // The log relay checks its own combination of settings when it starts.
    if problems.len() > before || log {
        return (problems.len() == before).then_some(config);
    }
    if let Err(error) = config.validate() {
        let setting = match &error {
            RelayConfigError::Zero { setting } => setting,
            RelayConfigError::Heartbeat { .. } => "heartbeat_interval",
            RelayConfigError::PublishTimeout { .. } => "publish_timeout",
            RelayConfigError::NoWorkerKeys | RelayConfigError::WorkerKey { .. } => "worker_keys",
            _ => "name",
        };
        problems.add(key(setting), error.to_string());
        return None;
    }
    Some(config)
}

/// Eight hexadecimal digits of a new UUID: tells two processes with the same pid apart.
fn uuid_suffix() -> String {
    let id = uuid::Uuid::now_v7().simple().to_string();
    id[id.len() - 8..].to_owned()
}
