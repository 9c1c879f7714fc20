//! Where the log relay reads PostgreSQL's changes from: a thin seam over the logical
//! replication client (`pg_walstream`, a fast-moving 0.x crate), so that nothing else of the
//! relay names its types. [`WalSource`] produces the relay's [`Change`]s from a replication
//! connection; its [`Acknowledger`] moves the slot's confirmed position.

use std::sync::Arc;
use std::time::Duration;

use pg_walstream::{
    ChangeEvent, EventType, LogicalReplicationStream, ReplicationError, ReplicationSlotOptions,
    ReplicationStreamConfig, RetryConfig, StreamingMode,
};
use tokio_util::sync::CancellationToken;

use super::change::{Acknowledger, Change, Confirmed, Position, Row};
use super::wal_row::WalRow;

/// A failure of the replication connection, with the server's SQLSTATE when it sent one.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub(crate) struct SourceError {
    /// The five-character SQLSTATE, when the server reported one.
    pub(crate) sqlstate: Option<String>,
    /// What went wrong.
    pub(crate) message: String,
    /// Whether retrying cannot help (authentication, a missing or invalidated slot).
    pub(crate) permanent: bool,
}

impl From<ReplicationError> for SourceError {
    fn from(error: ReplicationError) -> Self {
        let message = error.to_string();
        // The client writes server errors as `[SQLSTATE] message`.
        let sqlstate = message.find('[').and_then(|start| {
            let code = message.get(start + 1..start + 6)?;
            let closed = message.get(start + 6..start + 7) == Some("]");
            (closed && code.bytes().all(|b| b.is_ascii_alphanumeric())).then(|| code.to_owned())
        });
        Self {
            permanent: error.is_permanent(),
            sqlstate,
            message,
        }
    }
}

/// Settings of one replication connection.
#[derive(Debug, Clone)]
pub(crate) struct SourceSettings {
    /// A libpq connection string to the database, without `replication=database`.
    pub(crate) url: String,
    /// The slot to stream from (created when missing).
    pub(crate) slot: String,
    /// The publication to stream.
    pub(crate) publication: String,
    /// How long connecting may take.
    pub(crate) connect_timeout: Duration,
    /// How often status updates go out while changes arrive.
    pub(crate) feedback_interval: Duration,
}

/// A logical replication stream of the `pgoutput` plugin, messages included.
pub(crate) struct WalSource {
    stream: LogicalReplicationStream,
}

impl std::fmt::Debug for WalSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WalSource").finish_non_exhaustive()
    }
}

/// `url` (a URL or a libpq `key=value` string) with `replication=database`, and ISO dates
/// so that timestamps parse whatever the server's default `DateStyle`.
fn replication_url(url: &str) -> String {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let separator = if url.contains('?') { '&' } else { '?' };
        format!("{url}{separator}replication=database&options=-c%20DateStyle%3DISO")
    } else {
        format!("{url} replication=database options='-c DateStyle=ISO'")
    }
}

/// A libpq `key=value` connection string (values quoted, `\` and `'` escaped).
pub(crate) fn conninfo(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(key, value)| {
            let value = value.replace('\\', "\\\\").replace('\'', "\\'");
            format!("{key}='{value}'")
        })
        .collect::<Vec<_>>()
        .join(" ")
}

impl WalSource {
    /// Connects. With `export_snapshot`, a slot this connection creates exports a snapshot
    /// ([`ensure_slot`](Self::ensure_slot) returns its name).
    pub(crate) async fn connect(
        settings: &SourceSettings,
        export_snapshot: bool,
    ) -> Result<Self, SourceError> {
        let retry = RetryConfig {
            max_attempts: 1,
            ..RetryConfig::default()
        };
        let mut config =
            ReplicationStreamConfig::builder(settings.slot.clone(), settings.publication.clone())
                .with_protocol_version(1)
                .with_streaming_mode(StreamingMode::Off)
                .with_messages(true)
                .with_feedback_interval(settings.feedback_interval)
                .with_connection_timeout(settings.connect_timeout)
                .with_health_check_interval(Duration::from_secs(3600))
                .with_retry_config(retry);
        if export_snapshot {
            config = config.with_slot_options(ReplicationSlotOptions {
                snapshot: Some("export".to_owned()),
                ..ReplicationSlotOptions::default()
            });
        }
        let stream = LogicalReplicationStream::new(&replication_url(&settings.url), config).await?;
        Ok(Self { stream })
    }

    /// Creates the slot (`pgoutput`) unless it exists. Returns the exported snapshot's name
    /// when this call created the slot with one: valid until [`start`](Self::start).
    pub(crate) async fn ensure_slot(&mut self) -> Result<Option<String>, SourceError> {
        self.stream.ensure_replication_slot().await?;
        Ok(self.stream.exported_snapshot_name().map(str::to_owned))
    }

    /// Starts streaming after the slot's confirmed position (creating the slot, without a
    /// snapshot, if [`ensure_slot`](Self::ensure_slot) did not).
    pub(crate) async fn start(&mut self) -> Result<(), SourceError> {
        Ok(self.stream.start(None).await?)
    }

    /// The acknowledger of this stream.
    pub(crate) fn acknowledger(&self) -> Acknowledger {
        Acknowledger::new(Confirmed::Wal(Arc::clone(&self.stream.shared_lsn_feedback)))
    }

    /// The next change, or `None` once `wake` is cancelled (nothing is lost: the stream
    /// goes on at the next call).
    pub(crate) async fn next(
        &mut self,
        wake: &CancellationToken,
    ) -> Result<Option<Change>, SourceError> {
        match self.stream.next_event(wake).await {
            Ok(event) => Ok(Some(change(event))),
            Err(ReplicationError::Cancelled(_)) => Ok(None),
            Err(error) => Err(error.into()),
        }
    }

    /// Sends a status update when the feedback interval has passed and the acknowledged
    /// position moved.
    pub(crate) async fn feedback_if_due(&mut self) {
        self.stream.maybe_send_feedback().await;
    }

    /// Sends a status update now.
    pub(crate) async fn feedback(&mut self) -> Result<(), SourceError> {
        Ok(self.stream.send_feedback().await?)
    }
}

fn change(event: ChangeEvent) -> Change {
    match event.event_type {
        EventType::Begin { .. } => Change::Begin,
        EventType::Insert {
            schema,
            table,
            data,
            ..
        } => Change::Insert {
            schema,
            table,
            row: Row::Wal(WalRow::new(data)),
        },
        EventType::Message {
            flags,
            message_lsn,
            prefix,
            content,
        } => Change::Message {
            transactional: flags & 1 == 1,
            prefix,
            content: content.to_vec(),
            position: Position::Lsn(message_lsn.0),
        },
        EventType::Commit {
            end_lsn,
            commit_timestamp,
            ..
        } => Change::Commit {
            position: Position::Lsn(end_lsn.0),
            committed_at: commit_timestamp,
        },
        _ => Change::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_sqlstate_of_server_errors() {
        let error = SourceError::from(ReplicationError::ReplicationSlot(
            "[55006] replication slot \"s\" is active for PID 42".into(),
        ));
        assert_eq!(error.sqlstate.as_deref(), Some("55006"));
        let error = SourceError::from(ReplicationError::Protocol("no state [x]".into()));
        assert_eq!(error.sqlstate, None);
    }

    #[test]
    fn replication_urls_ask_for_a_database_connection() {
        assert_eq!(
            replication_url("postgres://u@h:1/db"),
            "postgres://u@h:1/db?replication=database&options=-c%20DateStyle%3DISO"
        );
        assert!(replication_url("postgres://h/db?sslmode=disable").contains("disable&replication"));
        assert_eq!(
            replication_url(&conninfo(&[("host", "/run/pg"), ("user", "o'k")])),
            "host='/run/pg' user='o\\'k' replication=database options='-c DateStyle=ISO'"
        );
    }
}
