//! The configuration file as written: serde's view of the TOML, before environment
//! overrides and validation ([`super::check`]). Every value a user can get wrong in more
//! than its type is kept as text here, so that the checker reports it with its key path
//! instead of serde stopping at the first one.

use std::collections::BTreeMap;

use serde::Deserialize;

/// The whole file.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct FileConfig {
    /// `[http]`.
    #[serde(default)]
    pub(crate) http: FileHttp,
    /// `[console]`.
    #[serde(default)]
    pub(crate) console: FileConsole,
    /// `[[relay]]`: kept as TOML values so that each relay is read, and its errors reported,
    /// on its own.
    #[serde(default)]
    pub(crate) relay: Vec<toml::Value>,
    /// `[tenants]`: relays read at runtime from a directory or a catalog table.
    pub(crate) tenants: Option<FileTenants>,
    /// `[connections]`: the connection budget per database server.
    pub(crate) connections: Option<FileConnections>,
}

/// `[connections]`: what the relays of one database server may hold at once.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct FileConnections {
    /// The budget of each server (host and port of the database URLs).
    pub(crate) max_per_server: Option<u32>,
    /// How long a relay's connections stay open after its last turn.
    pub(crate) idle_timeout: Option<String>,
}

/// `[tenants]`: where the tenants' relays come from while the service runs.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct FileTenants {
    /// A directory of `<name>.toml` files, each the body of a `[[relay]]`.
    pub(crate) directory: Option<String>,
    /// The control database holding the catalog table.
    pub(crate) catalog_url: Option<String>,
    /// The catalog table: `name`, `database_url`, `settings` (TOML text).
    pub(crate) catalog_table: Option<String>,
    /// How often the sources are read again.
    pub(crate) refresh_interval: Option<String>,
    /// The `[[relay]]` body every entry is merged over; `{tenant}` in its strings becomes
    /// the tenant's name. Kept as TOML: it is read as a relay once merged with an entry.
    pub(crate) template: Option<toml::Table>,
}

/// `[http]`: where the service listens.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct FileHttp {
    /// The console (and the operations endpoints unless `ops_listen` is set).
    pub(crate) listen: Option<String>,
    /// `/metrics`, `/healthz` and `/readyz` on an address of their own.
    pub(crate) ops_listen: Option<String>,
}

/// `[console]`: the operator console and its users.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct FileConsole {
    /// Off: no console routes at all.
    pub(crate) enabled: Option<bool>,
    /// How long a login lasts.
    pub(crate) session_ttl: Option<String>,
    /// Whether the session cookie is `Secure` (HTTPS only).
    pub(crate) secure_cookies: Option<bool>,
    /// A folder exported by `schemas export`: the contracts the console shows.
    pub(crate) contracts: Option<String>,
    /// `[[console.user]]`.
    #[serde(default)]
    pub(crate) user: Vec<FileUser>,
}

/// `[[console.user]]`: one operator credential.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct FileUser {
    /// Who acts: recorded in the operator log.
    pub(crate) name: Option<String>,
    /// `operator` or `reader`.
    pub(crate) role: Option<String>,
    /// The login token (better from `OUTBOX_CONSOLE_USER_<NAME>_TOKEN`).
    pub(crate) token: Option<String>,
}

/// `[[relay]]`: one relay, for one outbox in one database.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct FileRelay {
    pub(crate) name: Option<String>,
    pub(crate) database_url: Option<String>,
    pub(crate) method: Option<String>,
    pub(crate) outbox_table: Option<String>,
    pub(crate) inbox_table: Option<String>,
    pub(crate) column_naming: Option<String>,
    pub(crate) partitions: Option<u32>,
    pub(crate) ordering: Option<String>,
    pub(crate) dead_letter_policy: Option<String>,
    pub(crate) batch_size: Option<usize>,
    pub(crate) max_attempts: Option<u32>,
    pub(crate) poll_interval: Option<String>,
    pub(crate) lease_ttl: Option<String>,
    pub(crate) heartbeat_interval: Option<String>,
    pub(crate) publish_timeout: Option<String>,
    pub(crate) schedule_interval: Option<String>,
    /// A duration, or `"forever"`.
    pub(crate) retention: Option<String>,
    pub(crate) worker_keys: Option<Vec<String>>,
    pub(crate) max_connections: Option<u32>,
    /// The database is reached through a pooler in transaction mode (PgBouncer).
    pub(crate) transaction_pooling: Option<bool>,
    pub(crate) log: Option<FileLog>,
    pub(crate) broker: Option<FileBroker>,
}

/// `[relay.log]`: the log relay's settings (`method = "log"`).
#[derive(Debug, Default, Deserialize)]
pub(crate) struct FileLog {
    pub(crate) slot: Option<String>,
    pub(crate) publication: Option<String>,
    pub(crate) write_mode: Option<String>,
    pub(crate) message_prefix: Option<String>,
    pub(crate) heartbeat_interval: Option<String>,
    pub(crate) feedback_interval: Option<String>,
    /// MariaDB: the server id the relay's binlog dump registers with.
    pub(crate) replica_server_id: Option<u32>,
}

/// `[relay.broker]`: where the relay publishes.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct FileBroker {
    pub(crate) kind: Option<String>,
    /// `nats://…`, `amqp://…`, `redis://…`, or Kafka's bootstrap servers `host:port,…`.
    pub(crate) url: Option<String>,
    pub(crate) route: Option<FileRoute>,
    /// RabbitMQ: the exchange.
    pub(crate) exchange: Option<String>,
    /// NATS: the JetStream stream the service makes sure exists.
    pub(crate) stream: Option<FileStream>,
    /// How long the broker may take to confirm a message.
    pub(crate) ack_timeout: Option<String>,
    /// Kafka: librdkafka producer properties.
    pub(crate) options: Option<BTreeMap<String, String>>,
    /// Redis: `MAXLEN ~` of each stream.
    pub(crate) max_len: Option<usize>,
}

/// `[relay.broker.route]`: how an event type becomes a destination.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct FileRoute {
    /// `event_type`, `context`, `fixed` or `partitioned`.
    pub(crate) kind: Option<String>,
    pub(crate) prefix: Option<String>,
    pub(crate) destination: Option<String>,
    pub(crate) partitions: Option<u32>,
    pub(crate) with_event_type: Option<bool>,
}

/// `[relay.broker.stream]`: a JetStream stream.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct FileStream {
    pub(crate) name: Option<String>,
    pub(crate) subjects: Option<Vec<String>>,
    pub(crate) duplicate_window: Option<String>,
    pub(crate) max_age: Option<String>,
    pub(crate) replicas: Option<usize>,
}
