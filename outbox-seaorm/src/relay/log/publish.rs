//! The publishing side of a log relay: takes changes in commit order, publishes their
//! envelopes in batches that span transactions, and acknowledges the end of the last
//! transaction of a batch once the broker confirmed every event of the batch — and, since
//! batches go one after the other, every earlier one.
//!
//! A failed event is retried (the batch's failed events only, in their order, after the
//! backoff) until it is published or dead after `max_attempts` (a permanent rejection at
//! once). A dead event is written to the dead-letter table before the batch is
//! acknowledged, so the slot moves on and nothing is lost. Under
//! [`DeadLetterPolicy::Block`] its aggregate is then **held**: the aggregate's later events
//! are parked in the same table, in order, and go out — in order — once an operator requeues
//! or skips the dead one (the relay looks at every heartbeat). A stop in the middle of the
//! retries acknowledges nothing of the batch: the next start receives it again, with the
//! same message ids.
//!
//! A job that snoozes ([`PublishErrorKind::Snoozed`]) is written to the scheduled table,
//! due at its snooze's time, before the batch is acknowledged; the relay's mover brings it
//! back into the outbox table then (out of its aggregate's order, like a scheduled event).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use crate::transaction::Pool;
use chrono::{DateTime, Utc};
use outbox_core::metric;
use outbox_core::policy::DeadLetterPolicy;
use outbox_core::publish::{ErrorClass, MessageOutcome, PublishError, PublishErrorKind, Publisher};
use outbox_core::{Envelope, EnvelopeConfig};
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

use super::change::{Acknowledger, Change, Position};
use super::config::{HEARTBEAT_PREFIX, LogRelayConfig};
use super::error::LogRelayError;
use super::report::LogRelayReport;
use super::row::{self, UnreadableRow};
use crate::record::log_dead_letter::{LogDeadLetter, LogDeadLetterStatus};
use crate::sql::Store;
use crate::sql::log::NewLogDeadLetter;
use crate::sql::scheduled::SnoozeWriteError;
use crate::table::OutboxColumns;

/// Holding entries a release walk reads at most.
const RELEASE_LIMIT: u64 = 10_000;

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
    /// Events of held aggregates, in order.
    parked: Vec<Envelope>,
    unreadable: Vec<UnreadableRow>,
    /// Commit times of the transactions that ended in this batch.
    commits: Vec<DateTime<Utc>>,
    /// The position of the transactions that ended in this batch (the last one's, or
    /// per domain for MariaDB).
    last_commit: Option<Position>,
    /// A heartbeat came by: time to look at the held aggregates.
    release_due: bool,
}

impl Received {
    /// A transaction (or a message outside one) ended at `position`.
    fn commit_at(&mut self, position: Position) {
        match &mut self.last_commit {
            Some(last) => last.advance(position),
            None => self.last_commit = Some(position),
        }
    }

    fn clear(&mut self) {
        self.envelopes.clear();
        self.parked.clear();
        self.unreadable.clear();
        self.commits.clear();
        self.last_commit = None;
        self.release_due = false;
    }
}

/// How a batch ended.
#[derive(Debug, Default)]
struct Published {
    /// Dead events: the envelope, the last error, the attempts.
    dead: Vec<(Envelope, String, u32)>,
    /// Events parked behind an event of their aggregate that died in this batch.
    parked: Vec<Envelope>,
    /// Jobs that asked to run again later, and when: written to the scheduled table.
    snoozed: Vec<(Envelope, DateTime<Utc>)>,
    /// `false`: stopped in the middle of the retries (nothing may be acknowledged).
    finished: bool,
}

/// The publishing side; see the [module documentation](self).
pub(super) struct Publishing<'a, P> {
    pub(super) publisher: &'a P,
    pub(super) config: &'a LogRelayConfig,
    pub(super) db: &'a Pool,
    pub(super) store: &'a Store,
    pub(super) columns: OutboxColumns,
    pub(super) table: StreamedTable,
    /// Message mode's prefix, when the outbox writes messages.
    pub(super) message_prefix: Option<String>,
    pub(super) envelope_config: EnvelopeConfig,
    pub(super) acknowledger: Acknowledger,
    pub(super) labels: Vec<metrics::Label>,
    /// The aggregates held behind a dead event (Block).
    pub(super) held: HashSet<(String, String)>,
    /// Signalled after an acknowledgement that nothing follows yet: the reading side sends
    /// it to the server at once instead of with the next commit it reads.
    pub(super) idle: Arc<Notify>,
    pub(super) report: LogRelayReport,
}

fn key(envelope: &Envelope) -> (String, String) {
    (
        envelope.aggregate_type.clone(),
        envelope.aggregate_id.clone(),
    )
}

impl<P: Publisher> Publishing<'_, P> {
    /// Publishes what `changes` brings until it closes, or until `stop` interrupts a
    /// retry.
    ///
    /// # Errors
    /// A dead-letter write failed: nothing of the batch was acknowledged.
    pub(super) async fn run(
        &mut self,
        mut changes: mpsc::Receiver<Change>,
        stop: &CancellationToken,
    ) -> Result<(), LogRelayError> {
        self.release(stop).await?;
        let mut received = Received::default();
        while let Some(change) = changes.recv().await {
            self.take(change, &mut received);
            while received.envelopes.len() < self.config.batch_size {
                match changes.try_recv() {
                    Ok(change) => self.take(change, &mut received),
                    Err(_) => break,
                }
            }
            let mut published = self.publish(&received.envelopes, stop).await;
            if !published.finished {
                return Ok(());
            }
            self.write_snoozed(&mut published).await?;
            self.write_dead_letters(&published, &received).await?;
            let now = Utc::now();
            for committed_at in &received.commits {
                let seconds = (now - *committed_at)
                    .to_std()
                    .unwrap_or_default()
                    .as_secs_f64();
                metrics::histogram!(metric::LOG_COMMIT_TO_PUBLISH, self.labels.clone())
                    .record(seconds);
            }
            if let Some(position) = &received.last_commit {
                let rows = !received.envelopes.is_empty()
                    || !received.parked.is_empty()
                    || !received.unreadable.is_empty();
                self.acknowledger
                    .acknowledge(position, received.commits.last().copied(), rows);
                self.report.transactions += received.commits.len() as u64;
                self.report.acknowledge(position);
                if changes.is_empty() {
                    self.idle.notify_one();
                }
            }
            if received.release_due {
                self.release(stop).await?;
            }
            received.clear();
        }
        Ok(())
    }

    fn take(&mut self, change: Change, received: &mut Received) {
        let envelope = match change {
            Change::Insert { schema, table, row }
                if *schema == *self.table.schema && *table == *self.table.table =>
            {
                row::envelope(&row, &self.columns)
            }
            Change::Tick => {
                received.release_due = true;
                return;
            }
            Change::Message { prefix, .. } if &*prefix == HEARTBEAT_PREFIX => {
                self.report.heartbeats += 1;
                received.release_due = true;
                return;
            }
            Change::Message {
                prefix,
                content,
                transactional,
                position,
            } if self.message_prefix.as_deref() == Some(&*prefix) => {
                // A message outside a transaction is acknowledged at its own position.
                if !transactional {
                    received.commit_at(position);
                }
                row::message_envelope(&content, &self.envelope_config)
            }
            Change::Commit {
                position,
                committed_at,
            } => {
                received.commits.push(committed_at);
                received.commit_at(position);
                return;
            }
            Change::Begin | Change::Insert { .. } | Change::Message { .. } | Change::Other => {
                return;
            }
        };
        match envelope {
            Ok(envelope) if self.held.contains(&key(&envelope)) => received.parked.push(envelope),
            Ok(envelope) => received.envelopes.push(envelope),
            Err(unreadable) => {
                if self.config.dead_letter_policy == DeadLetterPolicy::Block {
                    self.held.insert((
                        unreadable.aggregate_type.clone(),
                        unreadable.aggregate_id.clone(),
                    ));
                }
                received.unreadable.push(unreadable);
            }
        }
    }

    /// Publishes `envelopes` until each is published or dead; see [`Published`].
    async fn publish(&mut self, envelopes: &[Envelope], stop: &CancellationToken) -> Published {
        let mut outcome = Published {
            finished: true,
            ..Published::default()
        };
        if envelopes.is_empty() {
            return outcome;
        }
        let block = self.config.dead_letter_policy == DeadLetterPolicy::Block;
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
            for (&index, result) in todo.iter().zip(outcomes) {
                let Err(error) = result else {
                    published += 1;
                    continue;
                };
                if error.kind() == PublishErrorKind::NotAttempted {
                    again.push(index);
                    continue;
                }
                if error.kind() == PublishErrorKind::Snoozed {
                    match self.snoozed_until(&error) {
                        Ok(at) => outcome.snoozed.push((envelopes[index].clone(), at)),
                        Err(why) => {
                            outcome
                                .dead
                                .push((envelopes[index].clone(), why, attempts[index]));
                        }
                    }
                    continue;
                }
                metrics::counter!(metric::PUBLISH_FAILURES, self.class_labels(error.class()))
                    .increment(1);
                attempts[index] += 1;
                if error.class() == ErrorClass::Permanent
                    || attempts[index] >= self.config.max_attempts
                {
                    let envelope = envelopes[index].clone();
                    if block {
                        self.held.insert(key(&envelope));
                    }
                    outcome
                        .dead
                        .push((envelope, error.to_string(), attempts[index]));
                } else {
                    self.report.retried += 1;
                    again.push(index);
                }
            }
            self.report.published += published;
            metrics::counter!(metric::PUBLISHED, self.labels.clone()).increment(published);
            // Later events of an aggregate that just died wait behind it (Block).
            again.retain(|&index| {
                let held = block && self.held.contains(&key(&envelopes[index]));
                if held {
                    outcome.parked.push(envelopes[index].clone());
                }
                !held
            });
            if again.is_empty() {
                return outcome;
            }
            let failed = again.iter().map(|&i| attempts[i]).max().unwrap_or(1);
            todo = again;
            tokio::select! {
                () = stop.cancelled() => {
                    outcome.finished = false;
                    return outcome;
                }
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

    /// When a snoozed job is due again (at once for a time not in the future), or why it
    /// cannot wait: message mode has no scheduled table, or the time is beyond what a row
    /// holds. Such a job is dead-lettered for an operator with that reason: nothing is lost.
    fn snoozed_until(&self, error: &PublishError) -> Result<DateTime<Utc>, String> {
        if self.message_prefix.is_some() {
            return Err(format!(
                "{error}: under message mode there is no scheduled table to wait in \
                 (requeue it when it is due)"
            ));
        }
        let now = self.store.outbox().clock().now();
        error
            .snooze()
            .and_then(|due| crate::schedule::snoozed_until(due, now))
            .ok_or_else(|| {
                format!(
                    "{error}: beyond the latest due time a row may have ({})",
                    crate::limits::MAX_DUE
                )
            })
    }

    /// Writes the batch's snoozed jobs to the scheduled table, before the batch is
    /// acknowledged; a job whose row cannot be stored is dead-lettered instead.
    async fn write_snoozed(&mut self, published: &mut Published) -> Result<(), LogRelayError> {
        let now = self.store.outbox().clock().now();
        for (envelope, at) in std::mem::take(&mut published.snoozed) {
            match self
                .store
                .snooze_to_scheduled(self.db, envelope.clone(), now, at)
                .await
            {
                Ok(()) => {
                    tracing::debug!(message_id = %envelope.message_id, %at, "log relay: job snoozed");
                    let mut labels = self.labels.clone();
                    labels.push(metrics::Label::new(
                        "event_type",
                        envelope.event_type.clone(),
                    ));
                    metrics::counter!(metric::SNOOZED, labels).increment(1);
                    self.report.snoozed += 1;
                }
                Err(SnoozeWriteError::Database(error)) => return Err(error.into()),
                Err(SnoozeWriteError::Row(error)) => {
                    published
                        .dead
                        .push((envelope, format!("snoozed, but {error}"), 0));
                }
            }
        }
        Ok(())
    }

    fn class_labels(&self, class: ErrorClass) -> Vec<metrics::Label> {
        let mut labels = self.labels.clone();
        labels.push(metrics::Label::new("class", class.as_str()));
        labels
    }

    fn count_dead(&mut self, event_type: &str) {
        self.report.dead_lettered += 1;
        let mut labels = self.labels.clone();
        labels.push(metrics::Label::new("event_type", event_type.to_owned()));
        metrics::counter!(metric::DEAD_LETTERED, labels).increment(1);
    }

    /// Publishes a page of a backfill (rows read from the table), writing its dead, unreadable
    /// and parked events. `Ok(false)`: stopped before the end.
    pub(super) async fn publish_rows(
        &mut self,
        envelopes: Vec<Envelope>,
        unreadable: Vec<UnreadableRow>,
        stop: &CancellationToken,
    ) -> Result<bool, LogRelayError> {
        let mut received = Received {
            unreadable,
            ..Received::default()
        };
        for envelope in envelopes {
            if self.held.contains(&key(&envelope)) {
                received.parked.push(envelope);
            } else {
                received.envelopes.push(envelope);
            }
        }
        let mut published = self.publish(&received.envelopes, stop).await;
        if !published.finished {
            return Ok(false);
        }
        self.write_snoozed(&mut published).await?;
        self.write_dead_letters(&published, &received).await?;
        Ok(true)
    }

    /// Writes a batch's dead, unreadable and parked events, in that order (a dead event
    /// before the events parked behind it), before the batch is acknowledged.
    async fn write_dead_letters(
        &mut self,
        published: &Published,
        received: &Received,
    ) -> Result<(), LogRelayError> {
        let slot = self.config.slot.as_str();
        for (envelope, error, attempts) in &published.dead {
            tracing::error!(
                message_id = %envelope.message_id,
                event_type = %envelope.event_type,
                attempts,
                %error,
                "log relay: event dead-lettered"
            );
            self.count_dead(&envelope.event_type);
            let entry = entry(envelope, error, *attempts, LogDeadLetterStatus::Dead);
            self.store
                .insert_log_dead_letter(self.db, slot, &entry)
                .await?;
        }
        self.write_unreadable(&received.unreadable).await?;
        for envelope in published.parked.iter().chain(&received.parked) {
            let entry = entry(
                envelope,
                "held behind a dead event of its aggregate",
                0,
                LogDeadLetterStatus::Parked,
            );
            self.store
                .insert_log_dead_letter(self.db, slot, &entry)
                .await?;
            self.report.parked += 1;
        }
        Ok(())
    }

    /// Dead-letters rows that cannot be read (never published, never retried).
    async fn write_unreadable(&mut self, rows: &[UnreadableRow]) -> Result<(), LogRelayError> {
        for unreadable in rows {
            tracing::error!(
                message_id = ?unreadable.message_id,
                event_type = %unreadable.event_type,
                error = %unreadable.error,
                "log relay: unreadable event dead-lettered"
            );
            self.count_dead("unreadable");
            let entry = NewLogDeadLetter {
                message_id: unreadable.message_id,
                event_type: &unreadable.event_type,
                aggregate_type: &unreadable.aggregate_type,
                aggregate_id: &unreadable.aggregate_id,
                envelope: None,
                error: &unreadable.error,
                attempts: 0,
                status: LogDeadLetterStatus::Dead,
            };
            self.store
                .insert_log_dead_letter(self.db, &self.config.slot, &entry)
                .await?;
        }
        Ok(())
    }

    /// Publishes requeued entries and the events parked behind them, aggregate by
    /// aggregate in order, stopping an aggregate at its first entry still `dead` or failing;
    /// then reloads the held aggregates.
    pub(super) async fn release(&mut self, stop: &CancellationToken) -> Result<(), LogRelayError> {
        let slot = self.config.slot.clone();
        let entries = self
            .store
            .log_holding_entries(self.db, &slot, RELEASE_LIMIT)
            .await?;
        let mut blocked: Option<(String, String)> = None;
        for entry in entries {
            let aggregate = (entry.aggregate_type.clone(), entry.aggregate_id.clone());
            if blocked.as_ref() == Some(&aggregate) || stop.is_cancelled() {
                continue;
            }
            // Entries come in id order per aggregate and the walk stops an aggregate at its
            // first `dead` entry: a parked entry reached here has nothing dead before it.
            let publish = matches!(
                entry.status,
                LogDeadLetterStatus::Requeued | LogDeadLetterStatus::Parked
            );
            if !publish || !self.release_one(&entry).await? {
                blocked = Some(aggregate);
            }
        }
        // Under Skip a dead event holds nothing back.
        if self.config.dead_letter_policy == DeadLetterPolicy::Block {
            self.held = self
                .store
                .log_held_aggregates(self.db, &slot)
                .await?
                .into_iter()
                .collect();
        }
        Ok(())
    }

    /// Publishes one held entry; `Ok(false)` when it failed (a requeued entry is dead again,
    /// a parked one stays parked).
    async fn release_one(&mut self, entry: &LogDeadLetter) -> Result<bool, LogRelayError> {
        let from = entry.status;
        let Some(envelope) = &entry.envelope else {
            if from == LogDeadLetterStatus::Requeued {
                self.store
                    .transition_log_dead_letter(
                        self.db,
                        entry.id,
                        from,
                        LogDeadLetterStatus::Dead,
                        Some(("unreadable: there is no envelope to publish", 0)),
                        None,
                        None,
                    )
                    .await?;
            }
            return Ok(false);
        };
        let outcome = self.call(std::slice::from_ref(envelope)).await;
        match outcome.into_iter().next() {
            Some(Ok(())) => {
                self.store
                    .transition_log_dead_letter(
                        self.db,
                        entry.id,
                        from,
                        LogDeadLetterStatus::Published,
                        None,
                        None,
                        None,
                    )
                    .await?;
                self.report.published += 1;
                self.report.released += 1;
                metrics::counter!(metric::PUBLISHED, self.labels.clone()).increment(1);
                Ok(true)
            }
            Some(Err(error)) => {
                tracing::warn!(
                    message_id = %envelope.message_id,
                    %error,
                    "log relay: publishing a held event failed"
                );
                if from == LogDeadLetterStatus::Requeued {
                    let attempts = u32::try_from(entry.attempts).unwrap_or(0) + 1;
                    self.store
                        .transition_log_dead_letter(
                            self.db,
                            entry.id,
                            from,
                            LogDeadLetterStatus::Dead,
                            Some((&error.to_string(), attempts)),
                            None,
                            None,
                        )
                        .await?;
                }
                Ok(false)
            }
            None => Ok(false),
        }
    }
}

fn entry<'a>(
    envelope: &'a Envelope,
    error: &'a str,
    attempts: u32,
    status: LogDeadLetterStatus,
) -> NewLogDeadLetter<'a> {
    NewLogDeadLetter {
        message_id: Some(envelope.message_id),
        event_type: &envelope.event_type,
        aggregate_type: &envelope.aggregate_type,
        aggregate_id: &envelope.aggregate_id,
        envelope: envelope
            .to_json_vec()
            .ok()
            .and_then(|json| String::from_utf8(json).ok()),
        error,
        attempts,
        status,
    }
}

impl<P: Publisher + 'static> super::LogRelay<P> {
    /// The publishing side of a session, acknowledging through `acknowledger`.
    pub(super) fn publishing(&self, acknowledger: Acknowledger) -> Publishing<'_, P> {
        Publishing {
            publisher: &self.publisher,
            config: &self.config,
            db: &self.db,
            store: &self.store,
            held: Default::default(),
            idle: Arc::new(Notify::new()),
            columns: *self.outbox.columns(),
            table: self.streamed_table(),
            message_prefix: self.outbox.write_mode().message_prefix().map(str::to_owned),
            envelope_config: *self.outbox.envelope_config(),
            acknowledger,
            labels: self.labels.clone(),
            report: LogRelayReport::default(),
        }
    }
}
