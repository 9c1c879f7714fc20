//! The raw pgoutput baseline: `pg_walstream`'s own loop on a slot and publication of its
//! own, with the log relay's stream options (protocol 1, messages on, no streaming of
//! large transactions, status updates at most every second), counting the `Insert` events
//! of the outbox table and acknowledging at each commit. It decodes what the relay decodes
//! and publishes nothing: what any consumer of the log pays before its own work.

use std::time::{Duration, Instant};

use pg_walstream::{
    EventType, LogicalReplicationStream, ReplicationStreamConfig, RetryConfig, StreamingMode,
};
use sea_orm::sqlx::{self, PgPool};
use tokio_util::sync::CancellationToken;

use super::BoxError;

/// The baseline's slot and publication name.
pub(super) const SLOT: &str = "bench_raw";

/// Creates the baseline's publication (the outbox's inserts, as the relay's) and slot.
pub(super) async fn create(pool: &PgPool, table: &str) -> Result<(), BoxError> {
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "CREATE PUBLICATION {SLOT} FOR TABLE {table} WITH (publish = 'insert')"
    )))
    .execute(pool)
    .await?;
    sqlx::query("SELECT pg_create_logical_replication_slot($1, 'pgoutput')")
        .bind(SLOT)
        .execute(pool)
        .await?;
    Ok(())
}

/// A started stream of the baseline's slot.
pub(super) struct RawStream {
    stream: LogicalReplicationStream,
    cancel: CancellationToken,
    /// When the first counted insert arrived.
    first: Option<Instant>,
}

impl RawStream {
    /// Connects to `url`'s database in replication mode and starts streaming after the
    /// slot's confirmed position.
    pub(super) async fn start(url: &str) -> Result<Self, BoxError> {
        let config = ReplicationStreamConfig::builder(SLOT, SLOT)
            .with_protocol_version(1)
            .with_streaming_mode(StreamingMode::Off)
            .with_messages(true)
            .with_feedback_interval(Duration::from_secs(1))
            .with_connection_timeout(Duration::from_secs(10))
            .with_health_check_interval(Duration::from_secs(3600))
            .with_retry_config(RetryConfig {
                max_attempts: 1,
                ..RetryConfig::default()
            });
        let separator = if url.contains('?') { '&' } else { '?' };
        let mut stream =
            LogicalReplicationStream::new(&format!("{url}{separator}replication=database"), config)
                .await?;
        stream.start(None).await?;
        Ok(Self {
            stream,
            cancel: CancellationToken::new(),
            first: None,
        })
    }

    /// Reads until `count` inserts into `public.<table>` came by, acknowledging each
    /// commit (status updates when due, as the relay sends them).
    pub(super) async fn count(&mut self, table: &str, count: usize) -> Result<(), BoxError> {
        let mut seen = 0;
        while seen < count {
            let event = self.stream.next_event(&self.cancel).await?;
            match event.event_type {
                EventType::Insert {
                    schema,
                    table: name,
                    data,
                    ..
                } if &*name == table && &*schema == "public" => {
                    std::hint::black_box(data);
                    self.first.get_or_insert_with(Instant::now);
                    seen += 1;
                }
                EventType::Commit { end_lsn, .. } => {
                    let feedback = &self.stream.shared_lsn_feedback;
                    feedback.update_flushed_lsn(end_lsn);
                    feedback.update_applied_lsn(end_lsn);
                    self.stream.maybe_send_feedback().await;
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// When the first counted insert arrived.
    pub(super) fn first(&self) -> Option<Instant> {
        self.first
    }

    /// Reads until the commit of the last counted insert, acknowledges it and closes the
    /// connection.
    pub(super) async fn close(mut self) -> Result<(), BoxError> {
        loop {
            let event = self.stream.next_event(&self.cancel).await?;
            if let EventType::Commit { end_lsn, .. } = event.event_type {
                let feedback = &self.stream.shared_lsn_feedback;
                feedback.update_flushed_lsn(end_lsn);
                feedback.update_applied_lsn(end_lsn);
                break;
            }
        }
        self.stream.send_feedback().await?;
        Ok(())
    }
}
