//! The log relay: publishes every committed outbox row by tailing the database's log, as
//! Debezium does — without a JVM, Kafka Connect or Kafka, to any [`Publisher`]. Two log
//! sources, picked by the connection's backend:
//!
//! | feature | database | log | position kept by |
//! |---|---|---|---|
//! | `log-relay` | PostgreSQL, `wal_level = logical` | the write-ahead log through logical decoding (`pgoutput`) | the server's replication slot |
//! | `log-relay-mariadb` | MariaDB with `log_bin`, `binlog_format = ROW` | the binary log, dumped as a replica from a GTID position | the relay, in `<outbox>_log_slots` (after the broker confirmed) |
//!
//! What follows describes PostgreSQL; MariaDB's differences are in the `binlog` module's
//! documentation and in the book's chapter *The log relay on MariaDB* (start-up checks of
//! the binlog settings and privileges, a consistent snapshot for the first start, the
//! stored GTID position, [`LogRelayError::PositionPurged`] when the binlogs holding it are
//! gone, table mode only).
//!
//! ```no_run
//! use outbox_core::in_process::InProcessBroker;
//! use outbox_seaorm::Outbox;
//! use outbox_seaorm::relay::log::LogRelay;
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn demo(db: sea_orm::DatabaseConnection) -> Result<(), Box<dyn std::error::Error>> {
//! let relay = LogRelay::builder(db, Outbox::default(), InProcessBroker::new())
//!     .slot("orders_outbox")
//!     .build()?;
//! let shutdown = CancellationToken::new();
//! let running = tokio::spawn(relay.run(shutdown.clone()));
//! // … on SIGTERM:
//! shutdown.cancel();
//! let report = running.await??;
//! # let _ = report; Ok(()) }
//! ```
//!
//! # How it works
//!
//! At start the relay takes the slot's lease (`<outbox>_log_slots`: one active relay per
//! slot, the others stand by and take over within `lease_ttl` after it dies), checks the
//! server (`wal_level = logical`, the `REPLICATION` privilege, a free slot), creates the
//! publication (`FOR TABLE <outbox> WITH (publish = 'insert')`: deletes never stream, no
//! replica identity is needed) and, on first start, the slot — with an exported snapshot
//! whose pending rows it publishes first (the **backfill**: nothing committed before the
//! slot existed is lost, e.g. when switching from the polling relay). It then streams from
//! the slot's confirmed position:
//!
//! - changes arrive in **commit order**: a transaction that inserted first and committed
//!   second is published second. No watermark can miss it: the log holds it at its commit.
//! - one task reads the stream while another publishes, in batches of up to
//!   `batch_size` events that span transactions; a batch's last transaction end is
//!   **acknowledged only once the broker confirmed every event of the batch** (and, batches
//!   going one after the other, every earlier one). Status updates go to the server at most
//!   every `feedback_interval` while changes arrive, at once when the stream pauses, and
//!   once more at shutdown.
//! - a crash at any point loses nothing: what was not acknowledged is streamed again at
//!   the next start, with the same message ids (the consumer's inbox applies it once).
//! - rows are not updated (no mark round trip): in the table they stay `pending` until the
//!   retention cleanup deletes them (24 h after their transaction's acknowledgement).
//! - every `heartbeat_interval` the relay writes a transactional logical message that its
//!   own stream receives and acknowledges, so the slot moves on while the outbox is idle
//!   (otherwise the server keeps the WAL of every other table's writes for the slot). The
//!   heartbeat also reads the slot's lag and `wal_status` into the metrics
//!   `outbox_log_slot_lag_bytes` and `outbox_log_slot_wal_status`; the histogram
//!   `outbox_log_commit_to_publish_seconds` measures commit → broker confirmation.
//!
//! A failed event is retried after the backoff, alone with the batch's other failed events,
//! until it is published or dead after `max_attempts` (a permanent rejection at once);
//! nothing later is acknowledged meanwhile. A dead event is written to
//! `<outbox>_log_dead_letters` and the slot moves on; under `DeadLetterPolicy::Block` the
//! later events of its aggregate are parked there in order until an operator requeues or
//! skips it ([`Operations`](crate::ops::Operations)' `log_dead_letters`, or `outbox
//! log-dead` on the command line).
//!
//! # Errors that stop the relay
//!
//! [`run`](LogRelay::run) retries connection and database failures — and tables not
//! installed yet, the usual order of a first deployment — with the backoff of
//! [`crate::outage`] (1 s doubling, at most 4 s apart), logging the first failure at WARN,
//! then every 30 s, then the recovery at INFO (a second relay on the same slot gets
//! SQLSTATE 55006 and retries until the slot is free). It stops with an error that says
//! what to do when retrying cannot help: `wal_level` is not `logical`, the role may not replicate, no slot is free, a
//! slot of its name exists that this outbox's relay did not create (never dropped nor
//! adopted), the publication does not cover the outbox, or the server **invalidated** the slot
//! ([`LogRelayError::SlotInvalidated`]: its WAL passed `max_slot_wal_keep_size` and the
//! events it held are gone from the log).

#[cfg(feature = "log-relay-mariadb")]
mod binlog;
mod builder;
mod change;
pub mod config;
mod error;
mod lease_renewal;
mod publish;
mod report;
mod retention;
mod row;
mod schedule;
#[cfg(feature = "log-relay")]
mod session;
#[cfg(feature = "log-relay")]
mod source;
#[cfg(feature = "log-relay")]
mod start;
#[cfg(feature = "log-relay-mariadb")]
mod text_row;
#[cfg(feature = "log-relay")]
mod wal_row;

use std::time::Duration;

use outbox_core::publish::Publisher;
use sea_orm::{ConnectionTrait as _, DatabaseConnection};
use tokio_util::sync::CancellationToken;

pub use builder::LogRelayBuilder;
pub use config::{LogRelayConfig, validate_publication_name, validate_slot_name};
pub use error::LogRelayError;
pub use report::LogRelayReport;

use self::publish::StreamedTable;
#[cfg(feature = "log-relay")]
use self::source::{SourceError, SourceSettings};
use crate::config::Outbox;
use crate::outage::DatabaseOutage;
use crate::sql::{Store, dialect};
use crate::transaction::Pool;

/// The step of [`LogRelay::run`]'s loop that takes the lease and streams, as
/// [`DatabaseOutage`] names it.
const STREAM: &str = "stream";

/// SQLSTATE `object_not_in_prerequisite_state`: at `START_REPLICATION`, an invalidated slot.
#[cfg(feature = "log-relay")]
const SLOT_INVALIDATED: &str = "55000";

/// Which log a relay reads.
enum Source {
    /// PostgreSQL's, through logical decoding.
    #[cfg(feature = "log-relay")]
    Wal(SourceSettings),
    /// MariaDB's binlog (settings made per session, after its checks).
    #[cfg(feature = "log-relay-mariadb")]
    Binlog,
}

/// A relay that tails PostgreSQL's log; see the [module documentation](self).
pub struct LogRelay<P> {
    db: Pool,
    outbox: Outbox,
    publisher: P,
    config: LogRelayConfig,
    store: Store,
    labels: Vec<metrics::Label>,
    outage: DatabaseOutage,
}

impl<P> std::fmt::Debug for LogRelay<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogRelay")
            .field("outbox", &self.outbox.outbox_table().to_string())
            .field("slot", &self.config.slot)
            .finish_non_exhaustive()
    }
}

impl<P> LogRelay<P> {
    fn new(db: DatabaseConnection, outbox: Outbox, publisher: P, config: LogRelayConfig) -> Self {
        let store = Store::new(&outbox, db.get_database_backend());
        let db = Pool::new(db, outbox.transaction_pooling());
        let labels = outbox.metric_labels().to_vec();
        let outage = DatabaseOutage::new("log relay", config.slot.clone(), labels.clone());
        Self {
            db,
            outbox,
            publisher,
            config,
            store,
            labels,
            outage,
        }
    }

    /// This relay's database health (shared with [`run`](LogRelay::run)'s loop): what
    /// fails now, for a readiness check. See [`crate::outage`].
    pub fn database_outage(&self) -> DatabaseOutage {
        self.outage.clone()
    }

    /// The settings.
    pub fn config(&self) -> &LogRelayConfig {
        &self.config
    }

    /// The publisher.
    pub fn publisher(&self) -> &P {
        &self.publisher
    }
}

impl<P: Publisher + 'static> LogRelay<P> {
    /// A builder for a log relay publishing `outbox`'s rows, read from `db`'s log, to
    /// `publisher`.
    pub fn builder(db: DatabaseConnection, outbox: Outbox, publisher: P) -> LogRelayBuilder<P> {
        LogRelayBuilder::new(db, outbox, publisher)
    }

    /// Streams and publishes until `shutdown` is cancelled; see the
    /// [module documentation](self). Graceful shutdown: the reading stops, what was read
    /// is published (without new retries), the last acknowledgement goes to the server and
    /// the slot's lease is released, so that a standby takes over at once.
    ///
    /// # Errors
    /// The errors retrying cannot help (see the module documentation); connection and
    /// database failures are retried.
    pub async fn run(self, shutdown: CancellationToken) -> Result<LogRelayReport, LogRelayError> {
        let source = match self.db.get_database_backend() {
            #[cfg(feature = "log-relay-mariadb")]
            sea_orm::DbBackend::MySql => Source::Binlog,
            #[cfg(feature = "log-relay")]
            sea_orm::DbBackend::Postgres => Source::Wal(self.source_settings()),
            // `build` accepts no other backend.
            backend => {
                return Err(LogRelayError::NotPostgres {
                    backend: dialect::name(backend).to_owned(),
                });
            }
        };
        let mut total = LogRelayReport::default();
        let mut standby = false;
        let mut installed = false;
        let me = self.config.instance_id.clone();
        tracing::info!(
            slot = %self.config.slot,
            relay = %me,
            outbox = %self.outbox.outbox_table(),
            write_mode = self.outbox.write_mode().as_str(),
            "log relay started"
        );
        let mut mode = self.labels.clone();
        mode.push(metrics::Label::new(
            "mode",
            self.outbox.write_mode().as_str(),
        ));
        metrics::gauge!(outbox_core::metric::WRITE_MODE, mode).set(1.0);
        let result = loop {
            if shutdown.is_cancelled() {
                break Ok(());
            }
            let pause = match self
                .attempt(&source, &mut standby, &mut installed, &shutdown, &mut total)
                .await
            {
                Ok(pause) => pause,
                Err(error) if fatal(&error) => break Err(error),
                Err(error) => {
                    installed = false;
                    total.restarts += 1;
                    let missing = match &error {
                        LogRelayError::Database(error) => dialect::missing_table(error),
                        LogRelayError::NotInstalled { table } => Some(table.clone()),
                        _ => None,
                    };
                    self.outage.failed_with(STREAM, &error, missing)
                }
            };
            tokio::select! {
                () = shutdown.cancelled() => {}
                () = tokio::time::sleep(pause) => {}
            }
        };
        if let Err(error) = self
            .store
            .release_log_lease(&self.db, &self.config.slot, &me)
            .await
        {
            tracing::warn!(%error, "log relay could not release its slot lease; it expires");
        }
        match result {
            Ok(()) => {
                tracing::info!(slot = %self.config.slot, published = total.published, "log relay stopped");
                Ok(total)
            }
            Err(error) => {
                tracing::error!(%error, slot = %self.config.slot, "log relay stopped");
                Err(error)
            }
        }
    }

    /// One turn of [`run`](Self::run)'s loop: the tables, the slot's lease, a session.
    /// Returns how long to wait before the next turn.
    async fn attempt(
        &self,
        source: &Source,
        standby: &mut bool,
        installed: &mut bool,
        shutdown: &CancellationToken,
        total: &mut LogRelayReport,
    ) -> Result<Duration, LogRelayError> {
        let me = &self.config.instance_id;
        // Looked at once, and again after a failed turn (the tables may have gone): not at
        // every standby turn.
        if !*installed {
            if !self.store.log_tables_exist(&self.db).await? {
                return Err(LogRelayError::NotInstalled {
                    table: self.outbox.tables().relay.log_slots.to_string(),
                });
            }
            *installed = true;
        }
        let lease = self
            .store
            .take_log_lease(&self.db, &self.config.slot, me, self.config.lease_ttl)
            .await?;
        let Some(lease) = lease else {
            self.outage.succeeded(STREAM);
            if !*standby {
                tracing::info!(slot = %self.config.slot, relay = %me, "another log relay holds the slot; standing by");
                *standby = true;
            }
            return Ok(self.config.lease_ttl / 5);
        };
        if *standby {
            tracing::info!(slot = %self.config.slot, relay = %me, "log relay took the slot over");
            *standby = false;
        }
        match source {
            #[cfg(feature = "log-relay")]
            Source::Wal(settings) => self.session(settings, &lease, shutdown, total).await?,
            #[cfg(feature = "log-relay-mariadb")]
            Source::Binlog => self.binlog_session(&lease, shutdown, total).await?,
        }
        Ok(Duration::ZERO)
    }

    fn streamed_table(&self) -> StreamedTable {
        let table = self.outbox.outbox_table();
        StreamedTable {
            schema: table.schema().unwrap_or("public").to_owned(),
            table: table.table().to_owned(),
        }
    }

    /// The replication connection: the configured URL, or the pool's settings.
    #[cfg(feature = "log-relay")]
    fn source_settings(&self) -> SourceSettings {
        let url = self.config.connection_url.clone().unwrap_or_else(|| {
            let options = self
                .db
                .connection()
                .get_postgres_connection_pool()
                .connect_options();
            let port = options.get_port().to_string();
            let host = match options.get_socket() {
                Some(socket) => socket.display().to_string(),
                None => options.get_host().to_owned(),
            };
            let mut pairs = vec![
                ("host", host.as_str()),
                ("port", port.as_str()),
                ("user", options.get_username()),
            ];
            if let Some(database) = options.get_database() {
                pairs.push(("dbname", database));
            }
            source::conninfo(&pairs)
        });
        SourceSettings {
            url,
            slot: self.config.slot.clone(),
            publication: self.config.publication.clone(),
            connect_timeout: self.config.connect_timeout,
            feedback_interval: self.config.feedback_interval,
        }
    }

    #[cfg(feature = "log-relay")]
    fn source_error(&self, error: SourceError) -> LogRelayError {
        let invalidated = error.sqlstate.as_deref() == Some(SLOT_INVALIDATED)
            && (error.message.contains("invalidated")
                || error.message.contains("can no longer get changes"));
        // PgBouncer's answer to `replication=database`.
        if error.message.contains("unsupported startup parameter") {
            return LogRelayError::ThroughPooler {
                message: error.message,
            };
        }
        if invalidated {
            return LogRelayError::SlotInvalidated {
                slot: self.config.slot.clone(),
                detail: error.message,
            };
        }
        LogRelayError::Replication {
            sqlstate: error.sqlstate,
            message: error.message,
        }
    }
}

/// Whether retrying cannot help.
fn fatal(error: &LogRelayError) -> bool {
    match error {
        LogRelayError::Database(_)
        | LogRelayError::LeaseLost { .. }
        | LogRelayError::NotInstalled { .. } => false,
        LogRelayError::Replication { sqlstate, .. } => sqlstate
            .as_deref()
            .is_some_and(|code| code.starts_with("28") || code == "3D000" || code == "42704"),
        // Access denied, no database, no privilege: retrying cannot help.
        LogRelayError::Binlog { code, .. } => {
            code.is_some_and(|code| matches!(code, 1044 | 1045 | 1049 | 1227 | 1698))
        }
        _ => true,
    }
}
