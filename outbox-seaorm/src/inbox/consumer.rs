//! [`Consumer`]: routes envelopes to the handlers registered for a consumer name, retries
//! failed handlers, dead-letters what cannot be handled.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use outbox_core::cloudevents::{self, CloudEventsError};
use outbox_core::name::{ConsumerNameError, EventType, check_consumer_name};
use outbox_core::policy::Backoff;
use outbox_core::{DecodeError, Envelope};
use sea_orm::{DatabaseConnection, DbErr};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::dead_letter::{self, DeadLetterStatus, NewDeadLetter, StoredMessage};
use super::{HandlerRegistration, InboxError, InboxOutcome};
use crate::config::Outbox;
use crate::ops::Operations;

/// Metric names of consumers (labels: `consumer`, and `reason` for dead letters).
pub mod metric {
    /// Counter: messages applied.
    pub const APPLIED: &str = "outbox_inbox_applied_total";
    /// Counter: duplicates skipped.
    pub const DUPLICATES: &str = "outbox_inbox_duplicates_total";
    /// Counter: messages of event types the consumer does not handle, ignored.
    pub const IGNORED: &str = "outbox_inbox_ignored_total";
    /// Counter: failed handler attempts.
    pub const HANDLER_FAILURES: &str = "outbox_inbox_handler_failures_total";
    /// Counter: messages dead-lettered, by `reason`.
    pub const DEAD_LETTERED: &str = "outbox_inbox_dead_lettered_total";
    /// Histogram: seconds per handled message (all attempts).
    pub const HANDLE_DURATION: &str = "outbox_inbox_handle_duration_seconds";
}

/// What a consumer does with a message of an event type it has no handler for (and that
/// is not another version of a contract it handles: that is always dead-lettered).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum UnknownEvents {
    /// Ignore it, count it ([`metric::IGNORED`]) and log its id. The default: a topic often
    /// carries event types a consumer does not care about.
    #[default]
    Ignore,
    /// Dead-letter it (`unknown_event_type`).
    DeadLetter,
}

/// Why a message went to the consumer's dead-letter table.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeadLetterReason {
    /// Headers, body or payload could not be decoded: retrying cannot help.
    Malformed {
        /// The decode error.
        error: String,
    },
    /// Another version of a contract the consumer handles, with no handler or upcaster.
    UnsupportedVersion {
        /// The message's event type.
        event_type: String,
        /// The event types the consumer handles.
        handled: Vec<String>,
    },
    /// An event type the consumer does not handle ([`UnknownEvents::DeadLetter`]).
    UnknownEventType {
        /// The message's event type.
        event_type: String,
    },
    /// The handler failed on every attempt.
    HandlerFailed {
        /// Attempts made.
        attempts: u32,
        /// The last error.
        error: String,
    },
}

impl DeadLetterReason {
    /// The value of the dead-letter table's `reason` column.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Malformed { .. } => "malformed",
            Self::UnsupportedVersion { .. } => "unsupported_version",
            Self::UnknownEventType { .. } => "unknown_event_type",
            Self::HandlerFailed { .. } => "handler_failed",
        }
    }

    fn error(&self) -> String {
        match self {
            Self::Malformed { error } | Self::HandlerFailed { error, .. } => error.clone(),
            Self::UnsupportedVersion {
                event_type,
                handled,
            } => format!(
                "no handler for version `{event_type}`; handled: {}",
                handled.join(", ")
            ),
            Self::UnknownEventType { event_type } => {
                format!("no handler for event type `{event_type}`")
            }
        }
    }

    fn attempts(&self) -> u32 {
        match self {
            Self::HandlerFailed { attempts, .. } => *attempts,
            _ => 0,
        }
    }
}

/// What a consumer did with a message. Every variant but [`Delivered::Retry`] means the
/// message is settled: acknowledge it to the broker.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Delivered {
    /// The handler ran and committed.
    Applied {
        /// Attempts it took (1 = first try).
        attempts: u32,
    },
    /// Already applied by this consumer: skipped.
    Duplicate,
    /// No handler for its event type; ignored ([`UnknownEvents::Ignore`]).
    Ignored {
        /// The event type.
        event_type: String,
    },
    /// Moved to the dead-letter table.
    DeadLettered {
        /// The dead letter's id.
        id: i64,
        /// Why.
        reason: DeadLetterReason,
    },
    /// The handler failed; try again after `after` ([`Consumer::deliver_once`] only; the
    /// broker redelivers, or the caller calls again with `attempt + 1`).
    Retry {
        /// The attempt that failed.
        attempt: u32,
        /// The backoff before the next attempt.
        after: Duration,
        /// The handler's error.
        error: String,
    },
}

/// A consumer could not settle a message (the dead-letter insert itself failed): do not
/// acknowledge it; it must be delivered again.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConsumerError {
    /// The database failed.
    #[error("consumer `{consumer}`: database error while settling message: {source}")]
    Database {
        /// The consumer.
        consumer: String,
        /// The error.
        #[source]
        source: DbErr,
    },
}

/// Why [`ConsumerBuilder::build`] refused a configuration.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConsumerConfigError {
    /// The consumer name breaks the grammar.
    #[error("invalid consumer name `{name}`: {reason}")]
    InvalidName {
        /// The name.
        name: String,
        /// Why.
        reason: ConsumerNameError,
    },
    /// No `#[inbox_handler]` is registered for the consumer name.
    #[error(
        "no #[inbox_handler] is registered for consumer `{consumer}` (registered consumers: \
         {registered:?}); check the name, and that the crate holding the handlers is linked"
    )]
    NoHandlers {
        /// The name asked for.
        consumer: String,
        /// The consumer names that have handlers.
        registered: Vec<String>,
    },
    /// Two handlers of the consumer take the same event type: the second would always see
    /// a duplicate.
    #[error("consumer `{consumer}`: `{event_type}` is handled by both `{first}` and `{second}`")]
    DuplicateRoute {
        /// The consumer.
        consumer: String,
        /// The event type.
        event_type: String,
        /// One handler.
        first: String,
        /// The other.
        second: String,
    },
    /// `max_attempts` is 0.
    #[error("consumer `{consumer}`: max_attempts must be at least 1")]
    NoAttempts {
        /// The consumer.
        consumer: String,
    },
    /// The inbox keeps rows for less time than a message may be redelivered: a late
    /// redelivery would find no row and be applied twice.
    #[error(
        "consumer `{consumer}`: inbox retention {retention:?} is shorter than the redelivery \
         window {redelivery_window:?} plus the longest retry schedule {retry_window:?}; raise \
         ConsumerBuilder::inbox_retention or lower redelivery_window / max_attempts"
    )]
    RetentionTooShort {
        /// The consumer.
        consumer: String,
        /// The configured inbox retention.
        retention: Duration,
        /// The configured redelivery window.
        redelivery_window: Duration,
        /// The longest time the retries of one message may take.
        retry_window: Duration,
    },
}

/// Default handler attempts per delivery: 5.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 5;
/// Default inbox retention: 14 days.
pub const DEFAULT_INBOX_RETENTION: Duration = Duration::from_secs(14 * 24 * 3600);
/// Default redelivery window (how long a broker may redeliver a message): 7 days.
pub const DEFAULT_REDELIVERY_WINDOW: Duration = Duration::from_secs(7 * 24 * 3600);
/// Default interval between looks for requeued dead letters in
/// [`Consumer::redeliver_requeued_until`]: 5 s.
pub const DEFAULT_REQUEUE_POLL: Duration = Duration::from_secs(5);

/// Configures a [`Consumer`]. Defaults: [`DEFAULT_MAX_ATTEMPTS`], backoff 100 ms doubling
/// up to 10 s with jitter, [`UnknownEvents::Ignore`], [`DEFAULT_INBOX_RETENTION`],
/// [`DEFAULT_REDELIVERY_WINDOW`], [`DEFAULT_REQUEUE_POLL`].
#[derive(Debug)]
#[must_use]
pub struct ConsumerBuilder {
    db: DatabaseConnection,
    outbox: Outbox,
    name: String,
    max_attempts: u32,
    backoff: Backoff,
    unknown: UnknownEvents,
    retention: Duration,
    redelivery_window: Duration,
    requeue_poll: Duration,
}

impl ConsumerBuilder {
    /// Handler attempts per delivery before the message is dead-lettered (default 5).
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts;
        self
    }

    /// Backoff between handler attempts (default 100 ms, doubling, at most 10 s, jitter).
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// What to do with event types no handler takes (default [`UnknownEvents::Ignore`]).
    pub fn unknown_events(mut self, policy: UnknownEvents) -> Self {
        self.unknown = policy;
        self
    }

    /// How long inbox rows are kept (default 14 days); see [`Consumer::purge_inbox`].
    pub fn inbox_retention(mut self, retention: Duration) -> Self {
        self.retention = retention;
        self
    }

    /// How long after its first delivery a broker may deliver a message again (default 7
    /// days): JetStream's `max_age`, a RabbitMQ queue's TTL, Kafka's retention, …
    pub fn redelivery_window(mut self, window: Duration) -> Self {
        self.redelivery_window = window;
        self
    }

    /// How often [`Consumer::redeliver_requeued_until`] (which every broker runner runs)
    /// looks for requeued dead letters (default 5 s).
    pub fn requeue_poll(mut self, interval: Duration) -> Self {
        self.requeue_poll = interval;
        self
    }

    /// The longest time the attempts of one delivery can take: the backoff before each
    /// retry, at its upper bound (jitter adds at most the base delay).
    fn retry_window(&self) -> Duration {
        let base = self.backoff.with_jitter(false);
        let factor = if self.backoff.jitter() { 2 } else { 1 };
        (1..self.max_attempts.max(1))
            .map(|n| base.delay(n) * factor)
            .sum()
    }

    /// Checks the configuration and collects the consumer's handlers.
    ///
    /// # Errors
    /// A [`ConsumerConfigError`]: invalid name, no handler registered under it, two
    /// handlers for one event type, no attempts, or an inbox retention shorter than the
    /// redelivery window plus the retry schedule.
    pub fn build(self) -> Result<Consumer, ConsumerConfigError> {
        let consumer = self.name.clone();
        if let Err(reason) = check_consumer_name(&consumer) {
            return Err(ConsumerConfigError::InvalidName {
                name: consumer,
                reason,
            });
        }
        if self.max_attempts == 0 {
            return Err(ConsumerConfigError::NoAttempts { consumer });
        }
        let retry_window = self.retry_window();
        if self.retention < self.redelivery_window.saturating_add(retry_window) {
            return Err(ConsumerConfigError::RetentionTooShort {
                consumer,
                retention: self.retention,
                redelivery_window: self.redelivery_window,
                retry_window,
            });
        }
        let mut routes: BTreeMap<&'static str, &'static HandlerRegistration> = BTreeMap::new();
        let mut registered = std::collections::BTreeSet::new();
        for registration in HandlerRegistration::all() {
            registered.insert(registration.consumer().to_owned());
            if registration.consumer() != consumer {
                continue;
            }
            if let Some(first) = routes.insert(registration.event_type(), registration) {
                let (first, second) = if first.handler() <= registration.handler() {
                    (first.handler(), registration.handler())
                } else {
                    (registration.handler(), first.handler())
                };
                return Err(ConsumerConfigError::DuplicateRoute {
                    consumer,
                    event_type: registration.event_type().to_owned(),
                    first: first.to_owned(),
                    second: second.to_owned(),
                });
            }
        }
        if routes.is_empty() {
            return Err(ConsumerConfigError::NoHandlers {
                consumer,
                registered: registered.into_iter().collect(),
            });
        }
        let labels = vec![metrics::Label::new("consumer", consumer.clone())];
        Ok(Consumer {
            inner: Arc::new(Inner {
                db: self.db,
                outbox: self.outbox,
                name: consumer,
                routes,
                max_attempts: self.max_attempts,
                backoff: self.backoff,
                unknown: self.unknown,
                retention: self.retention,
                requeue_poll: self.requeue_poll,
                labels,
            }),
        })
    }
}

#[derive(Debug)]
struct Inner {
    db: DatabaseConnection,
    outbox: Outbox,
    name: String,
    routes: BTreeMap<&'static str, &'static HandlerRegistration>,
    max_attempts: u32,
    backoff: Backoff,
    unknown: UnknownEvents,
    retention: Duration,
    requeue_poll: Duration,
    labels: Vec<metrics::Label>,
}

/// A consumer group: every `#[inbox_handler]` registered under one consumer name,
/// dispatched by event type, each message applied once through the inbox. Cheap to clone.
///
/// [`deliver`](Self::deliver) settles one message: the handler runs with up to
/// `max_attempts` attempts and backoff in between; a malformed payload, an unsupported
/// version, or an unknown type (with [`UnknownEvents::DeadLetter`]) goes to the
/// dead-letter table at once. Broker adapters that prefer the broker's redelivery call
/// [`deliver_once`](Self::deliver_once) with the delivery count instead.
#[derive(Debug, Clone)]
pub struct Consumer {
    inner: Arc<Inner>,
}

/// The result of one attempt, before deciding what to do next.
enum Attempt {
    Settled(Delivered),
    Failed(String),
    DeadLetter(DeadLetterReason),
}

/// What requeued dead letters became in [`Consumer::redeliver_requeued`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RedeliveryReport {
    /// Applied, or found already applied: now `resolved`.
    pub resolved: u64,
    /// Failed again: back to `dead`.
    pub failed: u64,
}

impl Consumer {
    /// Starts configuring the consumer `name` (e.g. `inventory.reserve-stock`) on `db`.
    pub fn builder(
        db: DatabaseConnection,
        outbox: Outbox,
        name: impl Into<String>,
    ) -> ConsumerBuilder {
        ConsumerBuilder {
            db,
            outbox,
            name: name.into(),
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            backoff: Backoff::new()
                .with_min_delay(Duration::from_millis(100))
                .with_max_delay(Duration::from_secs(10)),
            unknown: UnknownEvents::default(),
            retention: DEFAULT_INBOX_RETENTION,
            redelivery_window: DEFAULT_REDELIVERY_WINDOW,
            requeue_poll: DEFAULT_REQUEUE_POLL,
        }
    }

    /// The consumer name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The event types routed to a handler, sorted.
    pub fn event_types(&self) -> Vec<&'static str> {
        self.inner.routes.keys().copied().collect()
    }

    fn count(&self, name: &'static str) {
        metrics::counter!(name, self.inner.labels.clone()).increment(1);
    }

    /// Runs one attempt of the handler of `envelope`'s event type.
    async fn attempt(&self, envelope: &Envelope) -> Attempt {
        let inner = &self.inner;
        let Some(route) = inner.routes.get(envelope.event_type.as_str()) else {
            return self.unrouted(envelope);
        };
        match route.apply(&inner.db, &inner.outbox, envelope).await {
            Ok(InboxOutcome::Applied) => Attempt::Settled(Delivered::Applied { attempts: 1 }),
            Ok(InboxOutcome::Duplicate) => Attempt::Settled(Delivered::Duplicate),
            Err(InboxError::Decode { source, .. }) => {
                Attempt::DeadLetter(DeadLetterReason::Malformed {
                    error: source.to_string(),
                })
            }
            Err(error) => {
                self.count(metric::HANDLER_FAILURES);
                tracing::warn!(
                    consumer = %inner.name,
                    handler = route.handler(),
                    message_id = %envelope.message_id,
                    %error,
                    "inbox handler failed"
                );
                Attempt::Failed(error.to_string())
            }
        }
    }

    fn unrouted(&self, envelope: &Envelope) -> Attempt {
        let inner = &self.inner;
        let event_type = envelope.event_type.clone();
        let name = EventType::parse(&event_type)
            .ok()
            .map(|parsed| parsed.name());
        let handled_name =
            |handled: &&str| EventType::parse(handled).ok().map(|parsed| parsed.name()) == name;
        if name.is_some() && inner.routes.keys().any(handled_name) {
            return Attempt::DeadLetter(DeadLetterReason::UnsupportedVersion {
                event_type,
                handled: inner.routes.keys().map(|t| (*t).to_owned()).collect(),
            });
        }
        match inner.unknown {
            UnknownEvents::DeadLetter => {
                Attempt::DeadLetter(DeadLetterReason::UnknownEventType { event_type })
            }
            UnknownEvents::Ignore => {
                self.count(metric::IGNORED);
                tracing::info!(
                    consumer = %inner.name,
                    message_id = %envelope.message_id,
                    event_type = %event_type,
                    "ignored: no handler for this event type"
                );
                Attempt::Settled(Delivered::Ignored { event_type })
            }
        }
    }

    async fn dead_letter(
        &self,
        message: StoredMessage,
        message_id: Option<uuid::Uuid>,
        event_type: Option<&str>,
        reason: DeadLetterReason,
    ) -> Result<Delivered, ConsumerError> {
        let inner = &self.inner;
        let id = dead_letter::insert(
            &inner.db,
            &inner.outbox,
            NewDeadLetter {
                message_id,
                consumer: &inner.name,
                event_type,
                reason: reason.as_str(),
                error: reason.error(),
                attempts: reason.attempts(),
                message,
            },
        )
        .await
        .map_err(|source| self.database(source))?;
        let mut labels = inner.labels.clone();
        labels.push(metrics::Label::new("reason", reason.as_str()));
        metrics::counter!(metric::DEAD_LETTERED, labels).increment(1);
        tracing::error!(
            consumer = %inner.name,
            dead_letter = id,
            message_id = ?message_id,
            event_type = ?event_type,
            reason = reason.as_str(),
            error = %reason.error(),
            "message dead-lettered"
        );
        Ok(Delivered::DeadLettered { id, reason })
    }

    fn database(&self, source: DbErr) -> ConsumerError {
        ConsumerError::Database {
            consumer: self.inner.name.clone(),
            source,
        }
    }

    fn record(&self, delivered: &Delivered) {
        match delivered {
            Delivered::Applied { .. } => self.count(metric::APPLIED),
            Delivered::Duplicate => self.count(metric::DUPLICATES),
            _ => {}
        }
    }

    /// Runs attempts until the message settles or `max_attempts` failed.
    async fn attempts(&self, envelope: &Envelope) -> Result<Delivered, DeadLetterReason> {
        let max = self.inner.max_attempts;
        let mut attempt = 1;
        loop {
            match self.attempt(envelope).await {
                Attempt::Settled(Delivered::Applied { .. }) => {
                    return Ok(Delivered::Applied { attempts: attempt });
                }
                Attempt::Settled(delivered) => return Ok(delivered),
                Attempt::DeadLetter(reason) => return Err(reason),
                Attempt::Failed(error) if attempt >= max => {
                    return Err(DeadLetterReason::HandlerFailed {
                        attempts: attempt,
                        error,
                    });
                }
                Attempt::Failed(_) => {
                    tokio::time::sleep(self.inner.backoff.delay(attempt)).await;
                    attempt += 1;
                }
            }
        }
    }

    /// Settles `envelope`: applies it once through the inbox, with up to `max_attempts`
    /// attempts and backoff, or dead-letters it.
    ///
    /// # Errors
    /// [`ConsumerError`] when the dead-letter insert fails: do not acknowledge the message.
    pub async fn deliver(&self, envelope: &Envelope) -> Result<Delivered, ConsumerError> {
        let started = std::time::Instant::now();
        let result = match self.attempts(envelope).await {
            Ok(delivered) => Ok(delivered),
            Err(reason) => {
                self.dead_letter(
                    StoredMessage::Envelope(Box::new(envelope.clone())),
                    Some(envelope.message_id),
                    Some(&envelope.event_type),
                    reason,
                )
                .await
            }
        };
        if let Ok(delivered) = &result {
            self.record(delivered);
        }
        metrics::histogram!(metric::HANDLE_DURATION, self.inner.labels.clone())
            .record(started.elapsed().as_secs_f64());
        result
    }

    /// One attempt at `envelope`, the `attempt`-th delivery of it (from 1, e.g. the broker's
    /// delivery count): [`Delivered::Retry`] when the handler failed and attempts remain
    /// (redeliver after the delay), otherwise the message is settled as in
    /// [`deliver`](Self::deliver).
    ///
    /// # Errors
    /// As [`deliver`](Self::deliver).
    pub async fn deliver_once(
        &self,
        envelope: &Envelope,
        attempt: u32,
    ) -> Result<Delivered, ConsumerError> {
        let attempt = attempt.max(1);
        let reason = match self.attempt(envelope).await {
            Attempt::Settled(Delivered::Applied { .. }) => {
                let delivered = Delivered::Applied { attempts: attempt };
                self.record(&delivered);
                return Ok(delivered);
            }
            Attempt::Settled(delivered) => {
                self.record(&delivered);
                return Ok(delivered);
            }
            Attempt::Failed(error) if attempt < self.inner.max_attempts => {
                return Ok(Delivered::Retry {
                    attempt,
                    after: self.inner.backoff.delay(attempt),
                    error,
                });
            }
            Attempt::Failed(error) => DeadLetterReason::HandlerFailed {
                attempts: attempt,
                error,
            },
            Attempt::DeadLetter(reason) => reason,
        };
        self.dead_letter(
            StoredMessage::Envelope(Box::new(envelope.clone())),
            Some(envelope.message_id),
            Some(&envelope.event_type),
            reason,
        )
        .await
    }

    /// Settles a CloudEvents binary-mode message (broker headers and body): decodes it
    /// with [`cloudevents::from_binary`] — a message that cannot be decoded is
    /// dead-lettered at once as `malformed`, with its raw headers and body — then
    /// [`deliver`](Self::deliver)s it.
    ///
    /// The header pairs may be owned or borrowed strings, such as
    /// [`cloudevents::BinaryMessage::headers`] or what a broker client yields.
    ///
    /// # Errors
    /// As [`deliver`](Self::deliver).
    pub async fn deliver_binary<K, V>(
        &self,
        headers: &[(K, V)],
        body: &[u8],
    ) -> Result<Delivered, ConsumerError>
    where
        K: AsRef<str> + Sync,
        V: AsRef<str> + Sync,
    {
        match self.decode_binary(headers, body) {
            Ok(envelope) => self.deliver(&envelope).await,
            Err(error) => {
                let delivered = self
                    .dead_letter(
                        StoredMessage::Binary {
                            headers: headers
                                .iter()
                                .map(|(k, v)| (k.as_ref().to_owned(), v.as_ref().to_owned()))
                                .collect(),
                            body: String::from_utf8_lossy(body).into_owned(),
                        },
                        header(headers, cloudevents::header::ID)
                            .and_then(|id| uuid::Uuid::parse_str(id).ok()),
                        header(headers, cloudevents::header::TYPE),
                        DeadLetterReason::Malformed {
                            error: error.to_string(),
                        },
                    )
                    .await?;
                Ok(delivered)
            }
        }
    }

    fn decode_binary<K: AsRef<str>, V: AsRef<str>>(
        &self,
        headers: &[(K, V)],
        body: &[u8],
    ) -> Result<Envelope, CloudEventsError> {
        cloudevents::from_binary(
            headers
                .iter()
                .map(|(k, v)| (k.as_ref(), v.as_ref().as_bytes())),
            body,
            self.inner.outbox.envelope_config(),
        )
    }

    /// Redelivers up to `limit` dead letters an operator requeued for this consumer: each
    /// gets `max_attempts` attempts; applied (or already applied) → `resolved`, failed
    /// again → back to `dead` with the new error.
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
                StoredMessage::Binary { headers, body } => self
                    .decode_binary(headers, body.as_bytes())
                    .map_err(|error| DeadLetterReason::Malformed {
                        error: error.to_string(),
                    }),
            };
            let outcome = match envelope {
                Ok(envelope) => self.attempts(&envelope).await,
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
                        None,
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

    /// Deletes this database's inbox rows older than the configured retention, `batch`
    /// rows per statement, one instance at a time (cleanup lease). `None` when another
    /// instance holds the lease.
    ///
    /// # Errors
    /// The database's error.
    pub async fn purge_inbox(&self, batch: usize) -> Result<Option<u64>, DbErr> {
        Operations::new(self.inner.db.clone(), self.inner.outbox.clone())
            .purge_inbox(self.inner.retention, batch)
            .await
    }

    /// Redelivers requeued dead letters ([`redeliver_requeued`](Self::redeliver_requeued),
    /// up to 100 at a time) every `requeue_poll` (default 5 s, the first right away) until
    /// `shutdown`. Every broker runner of `outbox-brokers` runs it beside its subscription,
    /// as [`run_in_process`](Self::run_in_process) does; call it yourself when you feed
    /// [`deliver`](Self::deliver) from a transport of your own. A failed round is logged and
    /// tried again at the next tick.
    pub async fn redeliver_requeued_until(&self, shutdown: CancellationToken) {
        let mut requeue = tokio::time::interval(self.inner.requeue_poll);
        requeue.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = requeue.tick() => self.redeliver_requeued_round().await,
            }
        }
    }

    async fn redeliver_requeued_round(&self) {
        match self.redeliver_requeued(100).await {
            Ok(report) => {
                tracing::debug!(consumer = %self.inner.name, ?report, "requeued dead letters redelivered")
            }
            Err(error) => {
                tracing::warn!(consumer = %self.inner.name, %error, "redelivering requeued dead letters failed");
            }
        }
    }

    /// Consumes the [`InProcessBroker`](outbox_core::in_process::InProcessBroker)'s
    /// messages (from [`subscribe`](outbox_core::in_process::InProcessBroker::subscribe))
    /// until `shutdown`, and redelivers requeued dead letters every `requeue_poll`. For
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
        let mut requeue = tokio::time::interval(self.inner.requeue_poll);
        requeue.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                _ = requeue.tick() => self.redeliver_requeued_round().await,
                message = messages.recv() => match message {
                    Ok(envelope) => {
                        self.deliver(&envelope).await?;
                    }
                    Err(broadcast::error::RecvError::Lagged(missed)) => {
                        tracing::error!(consumer = %self.inner.name, missed, "in-process consumer lagged: messages missed");
                    }
                    Err(broadcast::error::RecvError::Closed) => return Ok(()),
                },
            }
        }
    }
}

fn header<'a, K: AsRef<str>, V: AsRef<str>>(headers: &'a [(K, V)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.as_ref().eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_ref())
}

impl From<DecodeError> for DeadLetterReason {
    fn from(error: DecodeError) -> Self {
        Self::Malformed {
            error: error.to_string(),
        }
    }
}
