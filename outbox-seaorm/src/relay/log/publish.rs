//! The publishing side of a log relay: takes changes in commit order, publishes their
//! envelopes in batches that span transactions, and acknowledges the end of the last
//! transaction of a batch once the broker confirmed every event of the batch — and, since
//! batches go one after the other, every earlier one.
//!
//! A failed event is retried (the batch's failed events only, in their order, after the
//! backoff) until it is published or dead after `max_attempts`; nothing after it is
//! acknowledged meanwhile. A stop in the middle of the retries acknowledges nothing of the
//! batch: the next start receives it again, with the same message ids.

use std::time::Instant;

use chrono::{DateTime, Utc};
use outbox_core::metric;
use outbox_core::publish::{ErrorClass, MessageOutcome, PublishError, PublishErrorKind, Publisher};
use outbox_core::{Envelope, EnvelopeConfig};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::config::{HEARTBEAT_PREFIX, LogRelayConfig};
use super::report::LogRelayReport;
use super::row::{self, UnreadableRow};
use super::source::{Acknowledger, Change};
use crate::table::OutboxColumns;

/// The outbox table as the stream names it.
#[derive(Debug, Clone)]
pub(super) struct StreamedTable {
    /// Its schema (`public` unless the outbox's name is qualified).
    pub(super) schema: String,
    /// Its name.
    pub(super) table: String,
}

/// What was received since the last acknowledgement.
#[derive(Debug, Default)]
struct Received {
    envelopes: Vec<Envelope>,
    unreadable: Vec<UnreadableRow>,
    /// Commit times of the transactions that ended in this batch.
    commits: Vec<DateTime<Utc>>,
    /// The end of the last transaction that ended in this batch.
    last_commit: Option<u64>,
}

impl Received {
    fn clear(&mut self) {
        self.envelopes.clear();
        self.unreadable.clear();
        self.commits.clear();
        self.last_commit = None;
    }
}

/// The publishing side; see the [module documentation](self).
pub(super) struct Publishing<'a, P> {
    pub(super) publisher: &'a P,
    pub(super) config: &'a LogRelayConfig,
    pub(super) columns: OutboxColumns,
    pub(super) table: StreamedTable,
    /// Message mode's prefix, when the outbox writes messages.
    pub(super) message_prefix: Option<String>,
    pub(super) envelope_config: EnvelopeConfig,
    pub(super) acknowledger: Acknowledger,
    pub(super) labels: Vec<metrics::Label>,
    pub(super) report: LogRelayReport,
}

impl<P: Publisher> Publishing<'_, P> {
    /// Publishes what `changes` brings until it closes, or until `stop` interrupts a
    /// retry.
    pub(super) async fn run(
        &mut self,
        mut changes: mpsc::Receiver<Change>,
        stop: &CancellationToken,
    ) {
        let mut received = Received::default();
        while let Some(change) = changes.recv().await {
            self.take(change, &mut received);
            while received.envelopes.len() < self.config.batch_size {
                match changes.try_recv() {
                    Ok(change) => self.take(change, &mut received),
                    Err(_) => break,
                }
            }
            if !self.publish(&received.envelopes, stop).await {
                return;
            }
            self.dead_letter_unreadable(&received.unreadable);
            let now = Utc::now();
            for committed_at in &received.commits {
                let seconds = (now - *committed_at)
                    .to_std()
                    .unwrap_or_default()
                    .as_secs_f64();
                metrics::histogram!(metric::LOG_COMMIT_TO_PUBLISH, self.labels.clone())
                    .record(seconds);
            }
            if let Some(lsn) = received.last_commit {
                self.acknowledger.acknowledge(lsn);
                self.report.transactions += received.commits.len() as u64;
                self.report.acknowledged_lsn = lsn;
            }
            received.clear();
        }
    }

    fn take(&mut self, change: Change, received: &mut Received) {
        match change {
            Change::Insert { schema, table, row }
                if *schema == *self.table.schema && *table == *self.table.table =>
            {
                match row::envelope(&row, &self.columns) {
                    Ok(envelope) => received.envelopes.push(envelope),
                    Err(unreadable) => received.unreadable.push(unreadable),
                }
            }
            Change::Message { prefix, .. } if &*prefix == HEARTBEAT_PREFIX => {
                self.report.heartbeats += 1;
            }
            Change::Message {
                prefix,
                content,
                transactional,
                lsn,
            } if self.message_prefix.as_deref() == Some(&*prefix) => {
                match row::message_envelope(&content, &self.envelope_config) {
                    Ok(envelope) => received.envelopes.push(envelope),
                    Err(unreadable) => received.unreadable.push(unreadable),
                }
                // A message outside a transaction is acknowledged at its own position.
                if !transactional {
                    received.last_commit = Some(lsn);
                }
            }
            Change::Commit {
                end_lsn,
                committed_at,
            } => {
                received.commits.push(committed_at);
                received.last_commit = Some(end_lsn);
            }
            Change::Begin | Change::Insert { .. } | Change::Message { .. } | Change::Other => {}
        }
    }

    /// Publishes `envelopes` until each is published or dead. `false`: `stop` interrupted
    /// the retries (nothing may be acknowledged).
    pub(super) async fn publish(
        &mut self,
        envelopes: &[Envelope],
        stop: &CancellationToken,
    ) -> bool {
        if envelopes.is_empty() {
            return true;
        }
        let mut attempts = vec![0_u32; envelopes.len()];
        let mut todo: Vec<usize> = (0..envelopes.len()).collect();
        loop {
            let started = Instant::now();
            let outcomes = if todo.len() == envelopes.len() {
                self.call(envelopes).await
            } else {
                let retry: Vec<Envelope> = todo.iter().map(|&i| envelopes[i].clone()).collect();
                self.call(&retry).await
            };
            metrics::histogram!(metric::BATCH_DURATION, self.labels.clone())
                .record(started.elapsed().as_secs_f64());
            let mut again = Vec::new();
            let mut published = 0_u64;
            for (&index, outcome) in todo.iter().zip(outcomes) {
                let Err(error) = outcome else {
                    published += 1;
                    continue;
                };
                if error.kind() == PublishErrorKind::NotAttempted {
                    again.push(index);
                    continue;
                }
                metrics::counter!(metric::PUBLISH_FAILURES, self.class_labels(error.class()))
                    .increment(1);
                attempts[index] += 1;
                if error.class() == ErrorClass::Permanent
                    || attempts[index] >= self.config.max_attempts
                {
                    self.dead_letter(&envelopes[index], &error, attempts[index]);
                } else {
                    self.report.retried += 1;
                    again.push(index);
                }
            }
            self.report.published += published;
            metrics::counter!(metric::PUBLISHED, self.labels.clone()).increment(published);
            if again.is_empty() {
                return true;
            }
            let failed = again.iter().map(|&i| attempts[i]).max().unwrap_or(1);
            todo = again;
            tokio::select! {
                () = stop.cancelled() => return false,
                () = tokio::time::sleep(self.config.backoff.delay(failed.max(1))) => {}
            }
        }
    }

    /// One `publish` call, bounded by the publish timeout, with exactly one outcome per
    /// envelope.
    async fn call(&self, batch: &[Envelope]) -> Vec<MessageOutcome> {
        let outcome =
            tokio::time::timeout(self.config.publish_timeout, self.publisher.publish(batch)).await;
        let mut outcomes = match outcome {
            Ok(Ok(outcomes)) => outcomes,
            Ok(Err(error)) => vec![Err(error); batch.len()],
            Err(_) => vec![
                Err(PublishError::timeout(format!(
                    "no answer within {:?}",
                    self.config.publish_timeout
                )));
                batch.len()
            ],
        };
        outcomes.resize_with(batch.len(), || {
            Err(PublishError::unavailable(
                "the publisher returned no outcome",
            ))
        });
        outcomes
    }

    fn class_labels(&self, class: ErrorClass) -> Vec<metrics::Label> {
        let mut labels = self.labels.clone();
        labels.push(metrics::Label::new("class", class.as_str()));
        labels
    }

    /// An event that will not be published: counted and logged with its id.
    fn dead_letter(&mut self, envelope: &Envelope, error: &PublishError, attempts: u32) {
        self.report.dead_lettered += 1;
        let mut labels = self.labels.clone();
        labels.push(metrics::Label::new(
            "event_type",
            envelope.event_type.clone(),
        ));
        metrics::counter!(metric::DEAD_LETTERED, labels).increment(1);
        tracing::error!(
            message_id = %envelope.message_id,
            event_type = %envelope.event_type,
            attempts,
            %error,
            "log relay: event dead-lettered"
        );
    }

    pub(super) fn dead_letter_unreadable(&mut self, rows: &[UnreadableRow]) {
        for unreadable in rows {
            self.report.dead_lettered += 1;
            let mut labels = self.labels.clone();
            labels.push(metrics::Label::new("event_type", "unreadable"));
            metrics::counter!(metric::DEAD_LETTERED, labels).increment(1);
            tracing::error!(
                message_id = ?unreadable.message_id,
                event_type = %unreadable.event_type,
                error = %unreadable.error,
                "log relay: unreadable outbox row dead-lettered"
            );
        }
    }
}
