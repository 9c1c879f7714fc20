//! The consumer's redelivery loop: dead letters an operator requeued, and parked messages
//! once they are due and nothing holds them ([`crate::inbox::parked`]).

use std::time::Duration;

use chrono::{DateTime, Utc};
use outbox_core::Envelope;
use outbox_core::policy::DeadLetterPolicy;
use sea_orm::DbErr;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::outcome::{ConsumerError, DeadLetterReason, Delivered, metric};
use super::{Attempt, Consumer, RedeliveryReport};
use crate::inbox::dead_letter::{self, Actor, DeadLetterStatus, StoredMessage};
use crate::inbox::parked::{self, ParkedMessage};

/// What a round over the parked messages did ([`Consumer::redeliver_parked`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ParkedReport {
    /// Applied (or found already applied, or ignored): no longer parked.
    pub applied: u64,
    /// Failed again, attempts remain: parked until their next attempt.
    pub retried: u64,
    /// Attempts over, or cannot be handled: dead-lettered.
    pub dead_lettered: u64,
    /// When the earliest parked message that waits for its next attempt is due.
    pub next_due: Option<DateTime<Utc>>,
}

impl ParkedReport {
    fn due_at(&mut self, at: DateTime<Utc>) {
        self.next_due = Some(self.next_due.map_or(at, |due| due.min(at)));
    }
}

/// The steps of the redelivery loop, as
/// [`DatabaseOutage`](crate::outage::DatabaseOutage) names them.
const REQUEUED: &str = "requeued dead letters";
const PARKED: &str = "parked messages";

/// How many parked aggregates one round looks at.
const PARKED_ROUND: u64 = 500;
/// How many requeued dead letters one round looks at.
const REQUEUED_ROUND: u64 = 100;

impl Consumer {
    /// Redelivers up to `limit` dead letters an operator requeued for this consumer: each
    /// gets `max_attempts` attempts; applied (or already applied) → `resolved`, failed
    /// again → back to `dead` with the new error. A dead letter stored cut
    /// ([`RawMessage::truncated`](crate::inbox::dead_letter::RawMessage::truncated)) cannot
    /// be redelivered: it goes back to `dead` saying so.
    ///
    /// # Errors
    /// The database's error reading or updating the dead-letter table.
    pub async fn redeliver_requeued(&self, limit: u64) -> Result<RedeliveryReport, DbErr> {
        let inner = &self.inner;
        let letters = dead_letter::list(
            &inner.db,
            &inner.outbox,
            Some(&inner.name),
            Some(DeadLetterStatus::Requeued),
            limit,
        )
        .await?;
        let mut report = RedeliveryReport::default();
        for letter in letters {
            let envelope = match &letter.message {
                StoredMessage::Envelope(envelope) => Ok(envelope.as_ref().clone()),
                StoredMessage::Binary(raw) if raw.truncated => Err(DeadLetterReason::Malformed {
                    error: format!(
                        "stored cut ({} bytes, sha256 {}): it cannot be redelivered; skip it",
                        raw.body_bytes, raw.body_sha256
                    ),
                }),
                StoredMessage::Binary(raw) => self
                    .decode_binary(&raw.headers, raw.body.as_bytes())
                    .map_err(|error| DeadLetterReason::Malformed {
                        error: error.to_string(),
                    }),
            };
            let outcome = match envelope {
                Ok(envelope) => self.attempts(&envelope).await?,
                Err(reason) => Err(reason),
            };
            match outcome {
                Ok(delivered) => {
                    self.record(&delivered);
                    dead_letter::transition(
                        &inner.db,
                        &inner.outbox,
                        letter.id,
                        DeadLetterStatus::Requeued,
                        DeadLetterStatus::Resolved,
                        Actor::default(),
                    )
                    .await?;
                    tracing::info!(consumer = %inner.name, dead_letter = letter.id, ?delivered, "requeued dead letter resolved");
                    report.resolved += 1;
                }
                Err(reason) => {
                    dead_letter::fail_again(
                        &inner.db,
                        &inner.outbox,
                        letter.id,
                        &reason.error(),
                        reason.attempts(),
                    )
                    .await?;
                    tracing::error!(consumer = %inner.name, dead_letter = letter.id, error = %reason.error(), "requeued dead letter failed again");
                    report.failed += 1;
                }
            }
        }
        Ok(report)
    }

    /// Runs attempts of a requeued dead letter until it settles or `max_attempts` failed.
    /// The outer error: the database failed (the letter stays requeued).
    async fn attempts(
        &self,
        envelope: &Envelope,
    ) -> Result<Result<Delivered, DeadLetterReason>, DbErr> {
        let max = self.inner.max_attempts;
        let mut attempt = 1;
        Ok(loop {
            match self.attempt(envelope).await {
                Attempt::Settled(Delivered::Applied { .. }) => {
                    break Ok(Delivered::Applied { attempts: attempt });
                }
                Attempt::Settled(delivered) => break Ok(delivered),
                Attempt::DeadLetter(reason) => break Err(reason),
                Attempt::Database(error) => return Err(error),
                // Redelivery runs unfenced: no lease to lose. Counted as a failed attempt
                // should a fenced copy ever get here.
                Attempt::LeaseLost(lease) if attempt >= max => {
                    break Err(DeadLetterReason::HandlerFailed {
                        attempts: attempt,
                        error: format!("partition lease `{lease}` lost"),
                    });
                }
                Attempt::LeaseLost(_) => {
                    tokio::time::sleep(self.inner.backoff.delay(attempt)).await;
                    attempt += 1;
                }
                Attempt::Failed(error) if attempt >= max => {
                    break Err(DeadLetterReason::HandlerFailed {
                        attempts: attempt,
                        error,
                    });
                }
                Attempt::Failed(_) => {
                    tokio::time::sleep(self.inner.backoff.delay(attempt)).await;
                    attempt += 1;
                }
            }
        })
    }

    /// One round over the parked messages: for each aggregate, oldest first, applies its
    /// first parked message when it is due and nothing holds it (aggregates a dead letter
    /// holds under [`DeadLetterPolicy::Block`] are not looked at), then the next, until one
    /// fails or the aggregate has none left. A failure with attempts remaining is parked for
    /// its next attempt; the last failure is dead-lettered. Looks at up to 500 aggregates. Then reloads which
    /// aggregates are held (see [`metric::HELD_AGGREGATES`]).
    ///
    /// [`redeliver_until`](Self::redeliver_until) runs it; call it yourself only in tests or
    /// a transport of your own.
    ///
    /// # Errors
    /// The database's error; what was applied before it stays applied.
    pub async fn redeliver_parked(&self) -> Result<ParkedReport, DbErr> {
        let inner = &self.inner;
        let mut report = ParkedReport::default();
        // Under `Block`, aggregates a dead letter holds are left out.
        let skip_held = inner.policy == DeadLetterPolicy::Block;
        let heads = parked::heads(
            &inner.db,
            &inner.outbox,
            &inner.name,
            skip_held,
            PARKED_ROUND,
        )
        .await?;
        for head in heads {
            let aggregate = head.aggregate.clone();
            let key = (aggregate.0.as_str(), aggregate.1.as_str());
            let mut current = Some(head);
            while let Some(message) = current.take() {
                if message.next_attempt_at > inner.outbox.clock().now() {
                    report.due_at(message.next_attempt_at);
                    break;
                }
                if !self.redeliver_one(&message, &mut report).await? {
                    break;
                }
                current =
                    parked::next_of(&inner.db, &inner.outbox, &inner.name, key, message.id).await?;
            }
        }
        // Holds released by this round, or by an operator, go away.
        let held = inner.holds.reload(self.source()).await?;
        metrics::gauge!(metric::HELD_AGGREGATES, inner.labels.clone()).set(held as f64);
        Ok(report)
    }

    /// One attempt of a parked message; `true` when the aggregate may go on to its next.
    async fn redeliver_one(
        &self,
        message: &ParkedMessage,
        report: &mut ParkedReport,
    ) -> Result<bool, DbErr> {
        let inner = &self.inner;
        let reason = match self.attempt(&message.envelope).await {
            Attempt::Settled(delivered) => {
                parked::delete(&inner.db, &inner.outbox, message.id).await?;
                let delivered = match delivered {
                    Delivered::Applied { .. } => Delivered::Applied {
                        attempts: message.attempts + 1,
                    },
                    other => other,
                };
                self.record(&delivered);
                tracing::info!(
                    consumer = %inner.name,
                    message_id = %message.envelope.message_id,
                    ?delivered,
                    "parked message settled"
                );
                report.applied += 1;
                return Ok(true);
            }
            Attempt::DeadLetter(reason) => reason,
            // The database failed: the message stays parked as it is (no attempt counted).
            Attempt::Database(error) => return Err(error),
            // Redelivery runs unfenced; should a fenced copy get here, the message stays
            // parked as it is for a later round.
            Attempt::LeaseLost(_) => return Ok(false),
            Attempt::Failed(error) => {
                let attempts = message.attempts.saturating_add(1);
                if attempts < inner.max_attempts {
                    let after = inner.backoff.delay(attempts);
                    let at = inner.outbox.clock().now()
                        + chrono::TimeDelta::from_std(after).unwrap_or(chrono::TimeDelta::MAX);
                    parked::retry_at(&inner.db, &inner.outbox, message.id, attempts, at, &error)
                        .await?;
                    report.retried += 1;
                    report.due_at(at);
                    return Ok(false);
                }
                DeadLetterReason::HandlerFailed { attempts, error }
            }
        };
        if self.dead_letter_parked(message, reason).await?.is_none() {
            // Another process of this consumer settled it meanwhile.
            return Ok(false);
        }
        report.dead_lettered += 1;
        Ok(inner.policy != DeadLetterPolicy::Block)
    }

    /// Redelivers requeued dead letters ([`redeliver_requeued`](Self::redeliver_requeued),
    /// up to 100 at a time) and parked messages ([`redeliver_parked`](Self::redeliver_parked))
    /// until `shutdown`: every `requeue_poll` (default 5 s, the first right away), and as
    /// soon as a message this process parked is due. Every broker runner of
    /// `outbox-brokers` runs it beside its subscription, as
    /// [`run_in_process`](Self::run_in_process) does; call it yourself when you feed
    /// [`deliver`](Self::deliver) from a transport of your own — without it, parked messages
    /// wait. A failed round is tried again at the next tick (at least the backoff of
    /// [`crate::outage`] later), and logged by the rule of that module.
    pub async fn redeliver_until(&self, shutdown: CancellationToken) {
        let inner = &self.inner;
        let poll = inner.requeue_poll;
        let mut requeue_due = tokio::time::Instant::now();
        loop {
            let now = tokio::time::Instant::now();
            if now >= requeue_due {
                requeue_due = now + poll;
                match self.redeliver_requeued(REQUEUED_ROUND).await {
                    Ok(report) => {
                        inner.outage.succeeded(REQUEUED);
                        tracing::debug!(consumer = %inner.name, ?report, "requeued dead letters redelivered");
                    }
                    Err(error) => {
                        let pause = inner.outage.failed(REQUEUED, &error);
                        requeue_due = now + poll.max(pause);
                    }
                }
            }
            let mut wait = requeue_due.saturating_duration_since(tokio::time::Instant::now());
            match self.redeliver_parked().await {
                Ok(report) => {
                    inner.outage.succeeded(PARKED);
                    tracing::debug!(consumer = %inner.name, ?report, "parked messages redelivered");
                    if let Some(due) = report.next_due {
                        let until = (due - inner.outbox.clock().now())
                            .to_std()
                            .unwrap_or(Duration::ZERO)
                            .max(Duration::from_millis(5));
                        wait = wait.min(until);
                    }
                }
                Err(error) => {
                    let pause = inner.outage.failed(PARKED, &error);
                    wait = wait.max(pause);
                }
            }
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = inner.parked.notified() => {}
                () = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// Consumes the [`InProcessBroker`](outbox_core::in_process::InProcessBroker)'s
    /// messages (from [`subscribe`](outbox_core::in_process::InProcessBroker::subscribe))
    /// until `shutdown`, with [`redeliver_until`](Self::redeliver_until) beside it. For
    /// tests and the embedded demo; the broker adapters have their own runners.
    ///
    /// # Errors
    /// A [`ConsumerError`] when a message could not be settled (it is then lost to this
    /// fake broker, which has no redelivery).
    pub async fn run_in_process(
        &self,
        mut messages: broadcast::Receiver<Envelope>,
        shutdown: CancellationToken,
    ) -> Result<(), ConsumerError> {
        let stop = shutdown.child_token();
        let receive = async {
            let result = loop {
                tokio::select! {
                    () = stop.cancelled() => break Ok(()),
                    message = messages.recv() => match message {
                        Ok(envelope) => {
                            if let Err(error) = self.deliver(&envelope).await {
                                break Err(error);
                            }
                        }
                        Err(broadcast::error::RecvError::Lagged(missed)) => {
                            tracing::error!(consumer = %self.inner.name, missed, "in-process consumer lagged: messages missed");
                        }
                        Err(broadcast::error::RecvError::Closed) => break Ok(()),
                    },
                }
            };
            stop.cancel();
            result
        };
        let (result, ()) = tokio::join!(receive, self.redeliver_until(stop.clone()));
        result
    }
}
