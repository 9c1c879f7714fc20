//! The log relay (feature `log-relay`, PostgreSQL only): publishes every committed outbox
//! row by tailing PostgreSQL's write-ahead log through logical decoding (`pgoutput`), as
//! Debezium does — without a JVM, Kafka Connect or Kafka, to any [`Publisher`].
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
//! At start the relay checks the server (`wal_level = logical`, the `REPLICATION`
//! privilege, a free slot), creates the publication (`FOR TABLE <outbox> WITH (publish =
//! 'insert')`: deletes never stream, no replica identity is needed) and, on first start,
//! the slot. It then streams from the slot's confirmed position:
//!
//! - changes arrive in **commit order**: a transaction that inserted first and committed
//!   second is published second. No watermark can miss it: the log holds it at its commit.
//! - one task reads the stream while another publishes, in batches of up to
//!   `batch_size` events that span transactions; a batch's last transaction end is
//!   **acknowledged only once the broker confirmed every event of the batch** (and, batches
//!   going one after the other, every earlier one). Status updates go to the server at most
//!   every `feedback_interval` while changes arrive, and once more at shutdown.
//! - a crash at any point loses nothing: what was not acknowledged is streamed again at
//!   the next start, with the same message ids (the consumer's inbox applies it once).
//! - rows are not updated (no mark round trip): in the table they stay `pending`.
//! - every `heartbeat_interval` the relay writes a transactional logical message that its
//!   own stream receives and acknowledges, so the slot moves on while the outbox is idle
//!   (otherwise the server keeps the WAL of every other table's writes for the slot). The
//!   heartbeat also reads the slot's lag and `wal_status` into the metrics
//!   `outbox_log_slot_lag_bytes` and `outbox_log_slot_wal_status`; the histogram
//!   `outbox_log_commit_to_publish_seconds` measures commit → broker confirmation.
//!
//! A failed event is retried after the backoff, alone with the batch's other failed events,
//! until it is published or dead after `max_attempts` (a permanent rejection at once);
//! nothing later is acknowledged meanwhile.
//!
//! # Errors that stop the relay
//!
//! [`run`](LogRelay::run) retries connection and database failures with the backoff (a
//! second relay on the same slot gets SQLSTATE 55006 and retries until the slot is free).
//! It stops with an error that says what to do when retrying cannot help: `wal_level` is not
//! `logical`, the role may not replicate, no slot is free, the slot belongs to something
//! else, the publication does not cover the outbox, or the server **invalidated** the slot
//! ([`LogRelayError::SlotInvalidated`]: its WAL passed `max_slot_wal_keep_size` and the
//! events it held are gone from the log).

mod builder;
pub mod config;
mod error;
mod publish;
mod report;
mod row;
mod source;
mod start;

use outbox_core::publish::Publisher;
use sea_orm::DatabaseConnection;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub use builder::LogRelayBuilder;
pub use config::LogRelayConfig;
pub use error::LogRelayError;
pub use report::LogRelayReport;

use self::config::HEARTBEAT_PREFIX;
use self::publish::{Publishing, StreamedTable};
use self::source::{Change, SourceError, SourceSettings, WalSource};
use crate::config::Outbox;
use crate::sql::Store;
use outbox_core::metric;

/// SQLSTATE `object_not_in_prerequisite_state`: at `START_REPLICATION`, an invalidated slot.
const SLOT_INVALIDATED: &str = "55000";
/// SQLSTATE `object_in_use`: another consumer streams from the slot.
const SLOT_IN_USE: &str = "55006";

/// WAL statuses of `pg_replication_slots`, for the status gauge.
const WAL_STATUSES: [&str; 4] = ["reserved", "extended", "unreserved", "lost"];

/// A relay that tails PostgreSQL's log; see the [module documentation](self).
pub struct LogRelay<P> {
    db: DatabaseConnection,
    outbox: Outbox,
    publisher: P,
    config: LogRelayConfig,
    store: Store,
    labels: Vec<metrics::Label>,
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
        let labels = vec![metrics::Label::new(
            "outbox",
            outbox.outbox_table().to_string(),
        )];
        Self {
            db,
            outbox,
            publisher,
            config,
            store,
            labels,
        }
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
        LogRelayBuilder {
            db,
            outbox,
            publisher,
            slot: None,
            publication: None,
            batch_size: None,
            max_attempts: None,
            backoff: None,
            heartbeat_interval: None,
            feedback_interval: None,
            publish_timeout: None,
            connect_timeout: None,
            connection_url: None,
        }
    }

    /// Streams and publishes until `shutdown` is cancelled; see the
    /// [module documentation](self). Graceful shutdown: the reading stops, what was read
    /// is published (without new retries), and the last acknowledgement goes to the server.
    ///
    /// # Errors
    /// The errors retrying cannot help (see the module documentation); connection and
    /// database failures are retried.
    pub async fn run(self, shutdown: CancellationToken) -> Result<LogRelayReport, LogRelayError> {
        let settings = self.source_settings();
        let mut total = LogRelayReport::default();
        let mut failures = 0_u32;
        tracing::info!(
            slot = %self.config.slot,
            outbox = %self.outbox.outbox_table(),
            "log relay started"
        );
        while !shutdown.is_cancelled() {
            let session = async {
                start::prepare(&self.db, &self.store, &self.config).await?;
                self.stream(&settings, &shutdown, &mut total).await
            };
            match session.await {
                Ok(()) => failures = 0,
                Err(error) if fatal(&error) => {
                    tracing::error!(%error, slot = %self.config.slot, "log relay stopped");
                    return Err(error);
                }
                Err(error) => {
                    failures = failures.saturating_add(1);
                    total.restarts += 1;
                    if matches!(&error, LogRelayError::Replication { sqlstate: Some(s), .. } if s == SLOT_IN_USE)
                    {
                        tracing::info!(slot = %self.config.slot, "another relay streams from the slot; waiting");
                    } else {
                        tracing::warn!(%error, slot = %self.config.slot, "log relay stream failed; restarting");
                    }
                    tokio::select! {
                        () = shutdown.cancelled() => {}
                        () = tokio::time::sleep(self.config.backoff.delay(failures)) => {}
                    }
                }
            }
        }
        tracing::info!(
            slot = %self.config.slot,
            published = total.published,
            "log relay stopped"
        );
        Ok(total)
    }

    /// One streaming session: until `shutdown`, or an error of the stream.
    async fn stream(
        &self,
        settings: &SourceSettings,
        shutdown: &CancellationToken,
        total: &mut LogRelayReport,
    ) -> Result<(), LogRelayError> {
        let mut source = WalSource::start(settings)
            .await
            .map_err(|error| self.source_error(error))?;
        let stop = shutdown.child_token();
        let (changes, received) = mpsc::channel(self.config.batch_size.clamp(64, 8_192) * 2);
        let mut publishing = Publishing {
            publisher: &self.publisher,
            config: &self.config,
            columns: *self.outbox.columns(),
            table: self.streamed_table(),
            message_prefix: self.outbox.write_mode().message_prefix().map(str::to_owned),
            envelope_config: self.outbox.envelope_config().clone(),
            acknowledger: source.acknowledger(),
            labels: self.labels.clone(),
            report: LogRelayReport::default(),
        };
        let reading = async {
            let result = read(&mut source, changes, &stop).await;
            stop.cancel();
            result
        };
        let publishing_done = async {
            publishing.run(received, &stop).await;
            stop.cancel();
        };
        let (read, (), ()) = tokio::join!(reading, publishing_done, self.heartbeat(&stop));
        // The last acknowledgement (graceful shutdown or not: it is what was confirmed).
        if let Err(error) = source.feedback().await {
            tracing::warn!(%error, "log relay: the final status update failed");
        }
        total.merge(&publishing.report);
        read.map_err(|error| self.source_error(error))
    }

    /// Every heartbeat interval until `stop`: the heartbeat message, then the slot gauges.
    async fn heartbeat(&self, stop: &CancellationToken) {
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(self.config.heartbeat_interval) => {}
            }
            if let Err(error) = self.store.emit_heartbeat(&self.db, HEARTBEAT_PREFIX).await {
                tracing::warn!(%error, "log relay heartbeat failed");
            }
            match self.store.slot(&self.db, &self.config.slot).await {
                Ok(Some(slot)) => self.slot_gauges(&slot),
                Ok(None) => {}
                Err(error) => tracing::warn!(%error, "log relay: reading the slot failed"),
            }
        }
    }

    fn slot_gauges(&self, slot: &crate::sql::log::SlotRow) {
        let mut labels = self.labels.clone();
        labels.push(metrics::Label::new("slot", self.config.slot.clone()));
        if let Some(lag) = slot.lag_bytes {
            metrics::gauge!(metric::LOG_SLOT_LAG_BYTES, labels.clone()).set(lag as f64);
        }
        for status in WAL_STATUSES {
            let mut labels = labels.clone();
            labels.push(metrics::Label::new("status", status));
            let current = slot.wal_status.as_deref() == Some(status);
            metrics::gauge!(metric::LOG_SLOT_WAL_STATUS, labels).set(f64::from(u8::from(current)));
        }
    }

    fn streamed_table(&self) -> StreamedTable {
        let table = self.outbox.outbox_table();
        StreamedTable {
            schema: table.schema().unwrap_or("public").to_owned(),
            table: table.table().to_owned(),
        }
    }

    /// The replication connection: the configured URL, or the pool's settings.
    fn source_settings(&self) -> SourceSettings {
        let url = self.config.connection_url.clone().unwrap_or_else(|| {
            let options = self.db.get_postgres_connection_pool().connect_options();
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

    fn source_error(&self, error: SourceError) -> LogRelayError {
        let invalidated = error.sqlstate.as_deref() == Some(SLOT_INVALIDATED)
            && (error.message.contains("invalidated")
                || error.message.contains("can no longer get changes"));
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

/// Reads changes into `changes` until `stop`, the publishing side is gone, or the stream
/// fails; sends a status update after a commit when one is due.
async fn read(
    source: &mut WalSource,
    changes: mpsc::Sender<Change>,
    stop: &CancellationToken,
) -> Result<(), SourceError> {
    while let Some(change) = source.next(stop).await? {
        let commit = matches!(change, Change::Commit { .. });
        if changes.send(change).await.is_err() {
            return Ok(());
        }
        if commit {
            source.feedback_if_due().await;
        }
    }
    Ok(())
}

/// Whether retrying cannot help.
fn fatal(error: &LogRelayError) -> bool {
    match error {
        LogRelayError::Database(_) => false,
        LogRelayError::Replication { sqlstate, .. } => sqlstate
            .as_deref()
            .is_some_and(|code| code.starts_with("28") || code == "3D000" || code == "42704"),
        _ => true,
    }
}
