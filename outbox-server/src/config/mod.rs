//! The service's configuration: a TOML file, with `OUTBOX_…` environment overrides for
//! every secret and URL ([`mod@env`]), checked as a whole: [`ConfigError`] lists every problem
//! with its key path, never only the first.
//!
//! ```toml
//! [http]
//! listen = "127.0.0.1:8080"        # the console (and the operations endpoints)
//! ops_listen = "127.0.0.1:9464"    # optional: /metrics, /healthz, /readyz on their own
//!
//! [[console.user]]
//! name = "ana"
//! role = "operator"                # or "reader"
//! # token: OUTBOX_CONSOLE_USER_ANA_TOKEN
//!
//! [[relay]]
//! name = "orders"                  # metrics label relay="orders"
//! # database_url: OUTBOX_RELAY_ORDERS_DATABASE_URL
//! database_url = "postgres://postgres@127.0.0.1:5432/orders"
//! outbox_table = "outbox"
//! method = "polling"               # or "log" (PostgreSQL), with [relay.log] slot = "…"
//! batch_size = 100
//! [relay.broker]
//! kind = "nats"
//! url = "nats://127.0.0.1:4222"
//! route = { kind = "event_type", prefix = "" }
//! ```
//!
//! [`ServerConfig::builder`] is the only constructor: it takes the file's text and the
//! environment and checks them; [`ServerConfig::load`] reads a file and the process
//! environment.

mod broker;
mod broker_kind;
mod connections;
mod console;
pub mod env;
mod file;
mod http;
mod log;
mod outbox;
mod problem;
mod read;
mod relay;
mod route;
mod secret;
mod stream;
mod tenants;
mod tuning;
mod value;

use std::collections::BTreeMap;
use std::path::Path;

pub use broker::BrokerSettings;
pub use broker_kind::BrokerKind;
pub use connections::{
    ConnectionSettings, DEFAULT_BUDGETED_RELAY_CONNECTIONS, DEFAULT_IDLE_TIMEOUT,
};
pub use console::{
    ConsoleSettings, ConsoleSettingsBuilder, ConsoleUser, DEFAULT_SESSION_TTL, MIN_TOKEN_LEN, Role,
};
pub use http::{DEFAULT_LISTEN, HttpSettings};
pub use problem::{ConfigError, ConfigProblem};
pub use relay::{RelayMethod, RelaySettings};
pub use route::RouteSettings;
pub use secret::{Secret, redacted_url};
pub use stream::StreamSettings;
pub use tenants::{
    CatalogSettings, DEFAULT_CATALOG_TABLE, DEFAULT_REFRESH_INTERVAL, MAX_ENTRY_BYTES, MAX_TENANTS,
    TENANT_PLACEHOLDER, TenantsSettings,
};

use file::{FileConfig, FileRelay};
use problem::Problems;
use read::read;

/// The whole configuration of one service process.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServerConfig {
    /// Where it listens.
    pub http: HttpSettings,
    /// The operator console.
    pub console: ConsoleSettings,
    /// The relays, in file order (at least one, unless `[tenants]` is set).
    pub relays: Vec<RelaySettings>,
    /// `[tenants]`: relays read while the service runs.
    pub tenants: Option<TenantsSettings>,
    /// `[connections]`: a connection budget per database server.
    pub connections: Option<ConnectionSettings>,
    /// The environment variables that overrode a value of the file (names only).
    pub overridden_by: Vec<String>,
}

impl ServerConfig {
    /// A builder taking the file's text and the environment.
    pub fn builder() -> ServerConfigBuilder {
        ServerConfigBuilder::default()
    }

    /// Reads the file at `path` and applies the process environment.
    ///
    /// # Errors
    /// [`ConfigError`]: the file cannot be read, or every problem it has.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|error| {
            ConfigError::one("file", format!("cannot read {}: {error}", path.display()))
        })?;
        Self::builder().toml(text).env(std::env::vars()).build()
    }
}

/// Builds a [`ServerConfig`] from the file's text and the environment.
#[derive(Debug, Default, Clone)]
#[must_use]
pub struct ServerConfigBuilder {
    toml: String,
    env: BTreeMap<String, String>,
}

impl ServerConfigBuilder {
    /// The configuration file's text.
    pub fn toml(mut self, text: impl Into<String>) -> Self {
        self.toml = text.into();
        self
    }

    /// The environment (only `OUTBOX_…` variables are read; see [`mod@env`]).
    pub fn env<I, K, V>(mut self, vars: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        self.env = vars
            .into_iter()
            .map(|(key, value)| (key.into(), value.into()))
            .collect();
        self
    }

    /// Reads and checks the configuration.
    ///
    /// # Errors
    /// [`ConfigError`] with every problem found: TOML syntax (with line and column, the
    /// only problem that stops the check), unknown keys, values of the wrong type (each
    /// one; the rest of the file is still read and checked), missing settings, invalid
    /// names, URLs, durations and table names, and environment variables that name no
    /// setting.
    pub fn build(self) -> Result<ServerConfig, ConfigError> {
        let mut problems = Problems::default();
        let document: toml::Table = toml::from_str(&self.toml)
            .map_err(|error| ConfigError::one("file", syntax_message(&error, &self.toml)))?;
        let mut file: FileConfig =
            read(toml::Value::Table(document), "", &mut problems).unwrap_or_default();
        let mut relays: Vec<Option<FileRelay>> = std::mem::take(&mut file.relay)
            .into_iter()
            .enumerate()
            .map(|(index, value)| read(value, &format!("relay[{index}]"), &mut problems))
            .collect();
        if relays.is_empty() && file.tenants.is_none() {
            problems.add(
                "relay",
                "missing: at least one [[relay]], or [tenants] to read them while running",
            );
        }
        let overrides = env::apply(&self.env, &mut file, &mut relays, &mut problems);
        let http = http::check(&file.http, &overrides, &mut problems);
        let console = console::check(&file.console, &overrides, &mut problems);
        let relays = relay::check_all(&relays, &overrides, &mut problems);
        let tenants = tenants::check(file.tenants.as_ref(), &overrides, &mut problems);
        let connections = connections::check(file.connections.as_ref(), &mut problems);
        let overridden_by = overrides.variables();
        problems.finish(|| ServerConfig {
            http: http.unwrap_or_else(|| unreachable!("no problem, so [http] was read")),
            console: console.unwrap_or_else(|| unreachable!("no problem, so [console] was read")),
            relays,
            tenants: tenants.unwrap_or_else(|| unreachable!("no problem, so [tenants] was read")),
            connections: connections
                .unwrap_or_else(|| unreachable!("no problem, so [connections] was read")),
            overridden_by,
        })
    }
}

/// The TOML parser's message with the line and column it is about.
fn syntax_message(error: &toml::de::Error, text: &str) -> String {
    let message = error.message().trim();
    match error.span() {
        Some(span) => {
            let before = text.get(..span.start).unwrap_or(text);
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            format!("not valid TOML at line {line}, column {column}: {message}")
        }
        None => format!("not valid TOML: {message}"),
    }
}
