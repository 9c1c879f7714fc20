//! Deciding what happens to claimed rows — publish those that may go, read the outcomes —
//! and writing and counting the decisions ([`Mark`]). Shared by the relay and the fast path.

use std::collections::HashSet;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use outbox_core::Envelope;
use outbox_core::metric;
use outbox_core::policy::{DeadLetterPolicy, Ordering};
use outbox_core::publish::{MessageOutcome, PublishError, PublishErrorKind, Publisher};
use sea_orm::{ConnectionTrait, DbErr};

use super::config::RelayConfig;
use super::outage;
use super::report::BatchReport;
use crate::sql::{AfterFailure, ClaimedRow, Store};

/// A decision about one claimed row.
#[derive(Debug)]
pub(crate) enum Mark {
    Published,
    Retry {
        attempts: i32,
        at: DateTime<Utc>,
        error: String,
    },
    Dead {
        attempts: i32,
        error: String,
    },
    /// Not retryable and failed: `failed`, alert raised after the commit.
    Failed {
        attempts: i32,
        error: PublishError,
    },
    /// A job asked to run again at `at` ([`PublishErrorKind::Snoozed`]): no attempt counted;
    /// the row waits in the scheduled table (a pending row that never failed is due at once,
    /// whatever its `next_attempt_at`).
    Snoozed {
        at: DateTime<Utc>,
    },
    Untouched,
}

pub(super) fn to_delta(duration: Duration) -> TimeDelta {
    TimeDelta::from_std(duration).unwrap_or(TimeDelta::MAX)
}

/// Decides what happens to each claimed row: publishes those that may go and reads the
/// outcomes. Shared by the relay and the fast path; the relay's batches report to `health`
/// (the fast path leaves failures to the relay and passes `None`).
pub(crate) async fn decide<P: Publisher + ?Sized>(
    rows: &mut [ClaimedRow],
    held: &HashSet<i64>,
    config: &RelayConfig,
    now: DateTime<Utc>,
    publisher: &P,
    health: Option<&outage::PublishHealth>,
) -> Vec<Mark> {
    let ordered = config.ordering == Ordering::PerAggregate;
    let block = config.dead_letter_policy == DeadLetterPolicy::Block;
    let mut marks: Vec<Mark> = Vec::with_capacity(rows.len());
    let mut to_send: Vec<usize> = Vec::with_capacity(rows.len());
    {
        // Rows behind a held or unreadable row of their aggregate wait; a row that cannot be
        // read is dead at once. (Nothing is stopped in the common case: no lookups then.)
        let mut stopped: HashSet<(&str, &str)> = HashSet::new();
        for (index, row) in rows.iter().enumerate() {
            let behind = ordered && !stopped.is_empty() && stopped.contains(&row.key());
            if behind || (!held.is_empty() && held.contains(&row.seq)) {
                if ordered {
                    stopped.insert(row.key());
                }
                marks.push(Mark::Untouched);
                continue;
            }
            match &row.envelope {
                Ok(_) => {
                    to_send.push(index);
                    marks.push(Mark::Untouched);
                }
                Err(unreadable) => {
                    let error = &unreadable.error;
                    tracing::error!(seq = row.seq, %error, "outbox row cannot be read: dead-lettered");
                    if ordered && block {
                        stopped.insert(row.key());
                    }
                    marks.push(Mark::Dead {
                        attempts: row.attempts.saturating_add(1),
                        error: format!("unreadable row: {error}"),
                    });
                }
            }
        }
    }
    // Lend the envelopes to the publisher (moved, not copied) and take them back after.
    let mut envelopes: Vec<Envelope> = Vec::with_capacity(to_send.len());
    for &index in &to_send {
        if let Ok(envelope) = std::mem::replace(
            &mut rows[index].envelope,
            Err(crate::sql::Unreadable::lent()),
        ) {
            envelopes.push(envelope);
        }
    }
    if envelopes.is_empty() {
        return marks;
    }
    let outcomes: Vec<MessageOutcome> =
        match tokio::time::timeout(config.publish_timeout, publisher.publish(&envelopes)).await {
            Err(_) => {
                let error = PublishError::timeout(format!(
                    "no answer within the publish timeout of {:?}",
                    config.publish_timeout
                ));
                vec![Err(error); envelopes.len()]
            }
            Ok(Err(error)) => vec![Err(error); envelopes.len()],
            Ok(Ok(mut outcomes)) => {
                if outcomes.len() != envelopes.len() {
                    tracing::warn!(
                        expected = envelopes.len(),
                        got = outcomes.len(),
                        "publisher returned the wrong number of outcomes"
                    );
                    outcomes.resize_with(envelopes.len(), || {
                        Err(PublishError::unavailable("no outcome from the publisher"))
                    });
                }
                outcomes
            }
        };
    for (&index, envelope) in to_send.iter().zip(envelopes) {
        rows[index].envelope = Ok(envelope);
    }
    if let Some(health) = health {
        let published = outcomes.iter().filter(|outcome| outcome.is_ok()).count();
        let mut transient = outcomes
            .iter()
            .filter_map(|outcome| outcome.as_ref().err())
            .filter(|error| !error.is_permanent() && error.kind() != PublishErrorKind::Snoozed);
        let first = transient.next();
        health.observe(published, first.map_or(0, |_| 1 + transient.count()), first);
    }
    let mut stopped: HashSet<(&str, &str)> = HashSet::new();
    for (&index, outcome) in to_send.iter().zip(outcomes) {
        let row = &rows[index];
        let key = row.key();
        let message_id = row
            .envelope
            .as_ref()
            .map(|envelope| envelope.message_id)
            .unwrap_or_default();
        let span = tracing::info_span!(
            "outbox.relay.message",
            seq = row.seq,
            %message_id,
            event_type = %row.event_type(),
            outcome = tracing::field::Empty,
        );
        let _entered = span.enter();
        let behind_failure = ordered && !stopped.is_empty() && stopped.contains(&key);
        let mark = match outcome {
            // Not a failure: due again later, no attempt counted; the row leaves its
            // aggregate's order for the scheduled table (the rest of this batch's rows of
            // the aggregate wait for the next batch).
            Err(error) if error.kind() == PublishErrorKind::Snoozed && !behind_failure => {
                if ordered {
                    stopped.insert(key);
                }
                match error
                    .snooze()
                    .and_then(|due| crate::schedule::snoozed_until(due, now))
                {
                    Some(at) => {
                        tracing::debug!(seq = row.seq, %at, "job snoozed");
                        Mark::Snoozed { at }
                    }
                    None => {
                        let attempts = row.attempts.saturating_add(1);
                        let error = format!(
                            "{error}: beyond the latest due time a row may have ({})",
                            crate::limits::MAX_DUE
                        );
                        tracing::warn!(seq = row.seq, %error, "snooze refused: a failed attempt");
                        Mark::Retry {
                            attempts,
                            at: now
                                + to_delta(
                                    config.backoff.delay(u32::try_from(attempts).unwrap_or(1)),
                                ),
                            error,
                        }
                    }
                }
            }
            // A row that must not run twice automatically: any attempted failure is final,
            // whatever its class (a timeout may mean it happened).
            Err(error) if !row.retryable && error.kind() != PublishErrorKind::NotAttempted => {
                let attempts = row.attempts.saturating_add(1);
                tracing::error!(
                    seq = row.seq,
                    %message_id,
                    attempts,
                    %error,
                    "non-retryable outbox row failed: marked failed, never retried"
                );
                if ordered && block {
                    stopped.insert(key);
                }
                Mark::Failed { attempts, error }
            }
            Ok(()) => {
                if behind_failure {
                    tracing::warn!(
                        seq = row.seq,
                        "published after an earlier message of its aggregate failed: the \
                         publisher does not stop an aggregate after a failure"
                    );
                }
                Mark::Published
            }
            Err(_) if behind_failure => Mark::Untouched,
            Err(error) if error.kind() == PublishErrorKind::NotAttempted => {
                if ordered {
                    stopped.insert(key);
                }
                Mark::Untouched
            }
            Err(error) => {
                let attempts = row.attempts.saturating_add(1);
                let exhausted = u32::try_from(attempts).unwrap_or(u32::MAX) >= config.max_attempts;
                if error.is_permanent() || exhausted {
                    tracing::error!(
                        seq = row.seq,
                        attempts,
                        %error,
                        "outbox row dead-lettered"
                    );
                    if ordered && block {
                        stopped.insert(key);
                    }
                    Mark::Dead {
                        attempts,
                        error: error.to_string(),
                    }
                } else {
                    let delay = config.backoff.delay(u32::try_from(attempts).unwrap_or(1));
                    tracing::debug!(seq = row.seq, attempts, %error, ?delay, "publish failed, retry later");
                    if ordered {
                        stopped.insert(key);
                    }
                    Mark::Retry {
                        attempts,
                        at: now + to_delta(delay),
                        error: error.to_string(),
                    }
                }
            }
        };
        span.record(
            "outcome",
            match &mark {
                Mark::Published => "published",
                Mark::Retry { .. } => "retry",
                Mark::Dead { .. } => "dead",
                Mark::Failed { .. } => "failed",
                Mark::Snoozed { .. } => "snoozed",
                Mark::Untouched => "deferred",
            },
        );
        marks[index] = mark;
    }
    marks
}

/// What becomes of a published row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PublishedRows {
    /// `status = 'published'`, deleted later by the retention cleanup.
    Keep,
    /// Deleted by the mark (retention zero).
    Delete,
}

impl PublishedRows {
    /// What `config` asks for.
    pub(crate) fn of(config: &RelayConfig) -> Self {
        if config.retention == Some(std::time::Duration::ZERO) {
            Self::Delete
        } else {
            Self::Keep
        }
    }
}

/// Writes the marks; returns the batch report.
pub(crate) async fn apply_marks<C: ConnectionTrait>(
    store: &Store,
    conn: &C,
    rows: &[ClaimedRow],
    marks: &[Mark],
    now: DateTime<Utc>,
    published_rows: PublishedRows,
) -> Result<BatchReport, DbErr> {
    let mut report = BatchReport {
        claimed: rows.len(),
        ..BatchReport::default()
    };
    let mut published = Vec::new();
    for (row, mark) in rows.iter().zip(marks) {
        match mark {
            Mark::Published => published.push(row.seq),
            Mark::Retry {
                attempts,
                at,
                error,
            } => {
                store
                    .mark_failed(conn, row.seq, *attempts, AfterFailure::RetryAt(*at), error)
                    .await?;
                report.retried += 1;
            }
            Mark::Dead { attempts, error } => {
                store
                    .mark_failed(conn, row.seq, *attempts, AfterFailure::Dead, error)
                    .await?;
                report.dead_lettered += 1;
            }
            Mark::Failed { attempts, error } => {
                store
                    .mark_failed(
                        conn,
                        row.seq,
                        *attempts,
                        AfterFailure::Failed,
                        &error.to_string(),
                    )
                    .await?;
                report.failed += 1;
            }
            Mark::Snoozed { at } => {
                store.snooze_row(conn, row.seq, *at).await?;
                report.snoozed += 1;
            }
            Mark::Untouched => report.deferred += 1,
        }
    }
    match published_rows {
        PublishedRows::Keep => store.mark_published(conn, &published, now).await?,
        PublishedRows::Delete => store.delete_pending_rows(conn, &published).await?,
    };
    report.published = published.len();
    Ok(report)
}

/// Counts the marks in the metrics (after the commit).
pub(crate) fn count_marks(labels: &[metrics::Label], rows: &[ClaimedRow], marks: &[Mark]) {
    let mut published = 0u64;
    for (row, mark) in rows.iter().zip(marks) {
        match mark {
            Mark::Published => published += 1,
            Mark::Retry { .. } => {
                let mut labels = labels.to_vec();
                labels.push(metrics::Label::new("class", "transient"));
                metrics::counter!(metric::PUBLISH_FAILURES, labels).increment(1);
            }
            Mark::Dead { .. } => {
                let mut failure = labels.to_vec();
                failure.push(metrics::Label::new("class", "permanent"));
                metrics::counter!(metric::PUBLISH_FAILURES, failure).increment(1);
                let mut dead = labels.to_vec();
                dead.push(metrics::Label::new(
                    "event_type",
                    row.event_type().to_owned(),
                ));
                metrics::counter!(metric::DEAD_LETTERED, dead).increment(1);
            }
            Mark::Failed { error, .. } => {
                let mut failure = labels.to_vec();
                failure.push(metrics::Label::new("class", error.class().as_str()));
                metrics::counter!(metric::PUBLISH_FAILURES, failure).increment(1);
                let mut failed = labels.to_vec();
                failed.push(metrics::Label::new(
                    "event_type",
                    row.event_type().to_owned(),
                ));
                metrics::counter!(metric::FAILED, failed).increment(1);
            }
            Mark::Snoozed { .. } => {
                let mut snoozed = labels.to_vec();
                snoozed.push(metrics::Label::new(
                    "event_type",
                    row.event_type().to_owned(),
                ));
                metrics::counter!(metric::SNOOZED, snoozed).increment(1);
            }
            Mark::Untouched => {}
        }
    }
    if published > 0 {
        metrics::counter!(metric::PUBLISHED, labels.to_vec()).increment(published);
    }
}
