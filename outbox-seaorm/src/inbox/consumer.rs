//! [`Consumer`]: routes envelopes to the handlers registered for a consumer name, retries
//! failed handlers, dead-letters what cannot be handled.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use outbox_core::cloudevents::{self, CloudEventsError};
use outbox_core::name::{ConsumerNameError, EventType, check_consumer_name};
use outbox_core::policy::{Backoff, DeadLetterPolicy};
use outbox_core::{DecodeError, Envelope};
use sea_orm::{DatabaseConnection, DbErr, TransactionTrait as _};
use tokio::sync::Notify;

use super::dead_letter::{self, NewDeadLetter, RawMessage, StoredMessage};
use super::hold::{self, Holds};
use super::parked::{self, NewParked, ParkedMessage};
use super::{HandlerRegistration, InboxError, InboxOutcome};
use crate::config::Outbox;
use crate::retention::{self, Purge};
use crate::schema::MAX_KEY_CHARS;
use crate::sql::Store;

mod redelivery;

pub use redelivery::ParkedReport;

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
    /// Counter: messages parked in the consumer's database, by `reason` (`retrying`: the
    /// handler failed and attempts remain; `behind`: an earlier message of the aggregate is
    /// parked or dead-lettered).
    pub const PARKED: &str = "outbox_inbox_parked_total";
    /// Gauge: aggregates held — with parked messages, or (under `Block`) a dead letter.
    pub const HELD_AGGREGATES: &str = "outbox_inbox_held_aggregates";
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

/// Why a message was parked ([`Delivered::Parked`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ParkReason {
    /// The handler failed and attempts remain: the next one comes after the backoff.
    Retrying {
        /// Attempts made.
        attempts: u32,
        /// The backoff before the next attempt.
        after: Duration,
        /// The handler's error.
        error: String,
    },
    /// An earlier message of its aggregate is parked, or dead-lettered under
    /// [`DeadLetterPolicy::Block`]: it waits behind it.
    Behind,
}

/// What a consumer did with a message. Every variant means the message is settled —
/// applied, skipped, or stored in the consumer's database — so acknowledge it to the
/// broker.
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
    /// Parked in the consumer's database ([`super::parked`]); the consumer's redelivery loop
    /// applies it in its aggregate's order.
    Parked {
        /// Why.
        reason: ParkReason,
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
/// Default interval between looks for requeued dead letters and parked messages in
/// [`Consumer::redeliver_until`]: 5 s (a message parked by this process is looked at when
/// it is due).
pub const DEFAULT_REQUEUE_POLL: Duration = Duration::from_secs(5);
/// Default handler attempts made while a message is delivered, before it is parked: 1.
pub const DEFAULT_INLINE_ATTEMPTS: u32 = 1;

/// Configures a [`Consumer`]. Defaults: [`DEFAULT_MAX_ATTEMPTS`] of which
/// [`DEFAULT_INLINE_ATTEMPTS`] inline, backoff 100 ms doubling up to 10 s with jitter,
/// [`DeadLetterPolicy::Block`], [`UnknownEvents::Ignore`], [`DEFAULT_INBOX_RETENTION`],
/// [`DEFAULT_REDELIVERY_WINDOW`], [`DEFAULT_REQUEUE_POLL`].
#[derive(Debug)]
#[must_use]
pub struct ConsumerBuilder {
    db: DatabaseConnection,
    outbox: Outbox,
    name: String,
    max_attempts: u32,
    inline_attempts: u32,
    dead_letter_policy: DeadLetterPolicy,
    backoff: Backoff,
    unknown: UnknownEvents,
    retention: Duration,
    redelivery_window: Duration,
    requeue_poll: Duration,
}

impl ConsumerBuilder {
    /// Handler attempts per message before it is dead-lettered (default 5).
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts;
        self
    }

    /// Handler attempts made while the message is delivered, with the backoff in between
    /// (default 1). The later attempts happen after the message is parked in the consumer's
    /// database ([`super::parked`]) and acknowledged, so that a failing message does not
    /// stall the messages of every other aggregate; set it to `max_attempts` to retry only
    /// inline. At most `max_attempts`.
    pub fn inline_attempts(mut self, attempts: u32) -> Self {
        self.inline_attempts = attempts;
        self
    }

    /// What a dead letter does to the later messages of its aggregate (default
    /// [`DeadLetterPolicy::Block`]): `Block` parks them, in order, until the dead letter is
    /// requeued and applied, or skipped; `Skip` applies them (the aggregate's order then has
    /// a gap, and a requeued dead letter is applied late). Either way a message waiting for
    /// its next attempt holds the later messages of its aggregate.
    pub fn dead_letter_policy(mut self, policy: DeadLetterPolicy) -> Self {
        self.dead_letter_policy = policy;
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

    /// How often [`Consumer::redeliver_until`] (which every broker runner runs) looks for
    /// requeued dead letters and parked messages (default 5 s).
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
                inline_attempts: self.inline_attempts.clamp(1, self.max_attempts),
                policy: self.dead_letter_policy,
                holds: Holds::default(),
                parked: Notify::new(),
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
    inline_attempts: u32,
    policy: DeadLetterPolicy,
    /// The aggregates held by parked messages or dead letters.
    holds: Holds,
    /// Signalled when this process parks a message: the redelivery loop looks at it when
    /// it is due.
    parked: Notify,
    backoff: Backoff,
    unknown: UnknownEvents,
    retention: Duration,
    requeue_poll: Duration,
    labels: Vec<metrics::Label>,
}

/// A consumer group: every `#[inbox_handler]` registered under one consumer name,
/// dispatched by event type, each message applied once through the inbox. Cheap to clone.
///
/// [`deliver`](Self::deliver) settles one message: the handler runs (`inline_attempts`
/// times at most, default once); when it fails and attempts remain, the message is parked
/// in the consumer's database ([`super::parked`]) for its later attempts, with backoff, so
/// that the runner goes on with the other aggregates. A malformed payload, an unsupported
/// version, or an unknown type (with [`UnknownEvents::DeadLetter`]) goes to the dead-letter
/// table at once, as does a message whose `max_attempts` all failed.
///
/// Order per aggregate: a message of an aggregate that has parked messages — or, under
/// [`DeadLetterPolicy::Block`] (the default), a `dead` or `requeued` dead letter — is
/// parked behind them, and [`redeliver_until`](Self::redeliver_until) applies them in
/// arrival order once nothing holds them. Aggregates whose type or id is longer than
/// [`MAX_KEY_CHARS`](crate::schema::MAX_KEY_CHARS) cannot be parked: their messages are
/// retried inline only and dead-lettered without holding anything.
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
            inline_attempts: DEFAULT_INLINE_ATTEMPTS,
            dead_letter_policy: DeadLetterPolicy::Block,
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

    /// Where the consumer's holds are read from.
    fn source(&self) -> hold::Source<'_> {
        let inner = &self.inner;
        hold::Source {
            db: &inner.db,
            outbox: &inner.outbox,
            consumer: &inner.name,
            policy: inner.policy,
        }
    }

    /// Writes a dead letter. `hold`: the message's aggregate, which the dead letter holds
    /// under [`DeadLetterPolicy::Block`] (the write then runs under the holds' lock).
    async fn dead_letter(
        &self,
        message: StoredMessage,
        message_id: Option<uuid::Uuid>,
        event_type: Option<&str>,
        hold: Option<hold::Key<'_>>,
        reason: DeadLetterReason,
    ) -> Result<Delivered, ConsumerError> {
        let inner = &self.inner;
        let letter = NewDeadLetter {
            message_id,
            consumer: &inner.name,
            event_type,
            aggregate: hold,
            reason: reason.as_str(),
            error: reason.error(),
            attempts: reason.attempts(),
            message,
        };
        let id = match hold.filter(|_| inner.policy == DeadLetterPolicy::Block) {
            Some(key) => {
                inner
                    .holds
                    .write(self.source(), key, async |_| {
                        let id = dead_letter::insert(&inner.db, &inner.outbox, letter).await?;
                        Ok((id, true))
                    })
                    .await
            }
            None => dead_letter::insert(&inner.db, &inner.outbox, letter).await,
        }
        .map_err(|source| self.database(source))?;
        self.dead_lettered(id, message_id, event_type, &reason);
        Ok(Delivered::DeadLettered { id, reason })
    }

    /// Counts and logs a dead letter.
    fn dead_lettered(
        &self,
        id: i64,
        message_id: Option<uuid::Uuid>,
        event_type: Option<&str>,
        reason: &DeadLetterReason,
    ) {
        let inner = &self.inner;
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

    /// Settles `envelope`: applies it once through the inbox, parks it (for its later
    /// attempts, or behind an earlier message of its aggregate), or dead-letters it. See
    /// the [type documentation](Self).
    ///
    /// A message over the payload or metadata limit
    /// ([`EnvelopeConfig`](outbox_core::EnvelopeConfig), the outbox's) is dead-lettered as
    /// `malformed`, stored bounded ([`RawMessage`]).
    ///
    /// # Errors
    /// [`ConsumerError`] when the database failed (parking, or the dead-letter insert): do
    /// not acknowledge the message.
    pub async fn deliver(&self, envelope: &Envelope) -> Result<Delivered, ConsumerError> {
        let started = std::time::Instant::now();
        let result = self.settle(envelope).await;
        if let Ok(delivered) = &result {
            self.record(delivered);
        }
        metrics::histogram!(metric::HANDLE_DURATION, self.inner.labels.clone())
            .record(started.elapsed().as_secs_f64());
        result
    }

    async fn settle(&self, envelope: &Envelope) -> Result<Delivered, ConsumerError> {
        let inner = &self.inner;
        if let Err(error) = inner.outbox.envelope_config().check_envelope(envelope) {
            return self
                .dead_letter(
                    StoredMessage::Binary(RawMessage::of_envelope(envelope)),
                    Some(envelope.message_id),
                    Some(&envelope.event_type),
                    None,
                    DeadLetterReason::from(error),
                )
                .await;
        }
        let key = parkable(&envelope.aggregate_type, &envelope.aggregate_id);
        // A message no handler takes has no effect to order: it is ignored or dead-lettered
        // at once, even when its aggregate is held.
        if !inner.routes.contains_key(envelope.event_type.as_str()) {
            match self.unrouted(envelope) {
                Attempt::Settled(delivered) => return Ok(delivered),
                Attempt::DeadLetter(reason) => {
                    return self.dead_letter_envelope(envelope, key, reason).await;
                }
                Attempt::Failed(_) => {}
            }
        }
        if let Some(key) = key {
            let held = inner
                .holds
                .is_held(self.source(), key)
                .await
                .map_err(|source| self.database(source))?;
            if held && let Some(parked) = self.park_behind(envelope, key).await? {
                return Ok(parked);
            }
        }
        let mut attempt = 1;
        loop {
            let reason = match self.attempt(envelope).await {
                Attempt::Settled(Delivered::Applied { .. }) => {
                    return Ok(Delivered::Applied { attempts: attempt });
                }
                Attempt::Settled(delivered) => return Ok(delivered),
                Attempt::DeadLetter(reason) => reason,
                Attempt::Failed(error) if attempt >= inner.max_attempts => {
                    DeadLetterReason::HandlerFailed {
                        attempts: attempt,
                        error,
                    }
                }
                Attempt::Failed(error) => match key {
                    // Its later attempts happen while it is parked.
                    Some(key) if attempt >= inner.inline_attempts => {
                        return self.park_retrying(envelope, key, attempt, error).await;
                    }
                    _ => {
                        tokio::time::sleep(inner.backoff.delay(attempt)).await;
                        attempt += 1;
                        continue;
                    }
                },
            };
            return self.dead_letter_envelope(envelope, key, reason).await;
        }
    }

    /// Dead-letters a decoded envelope (holding `key` under `Block`).
    async fn dead_letter_envelope(
        &self,
        envelope: &Envelope,
        key: Option<hold::Key<'_>>,
        reason: DeadLetterReason,
    ) -> Result<Delivered, ConsumerError> {
        self.dead_letter(
            StoredMessage::Envelope(Box::new(envelope.clone())),
            Some(envelope.message_id),
            Some(&envelope.event_type),
            key,
            reason,
        )
        .await
    }

    /// Parks `envelope` behind the messages of its aggregate, under the holds' lock, if the
    /// aggregate is still held; `None`: it is not (any more), apply it now.
    async fn park_behind(
        &self,
        envelope: &Envelope,
        key: hold::Key<'_>,
    ) -> Result<Option<Delivered>, ConsumerError> {
        let inner = &self.inner;
        let now = inner.outbox.clock().now();
        let parked = inner
            .holds
            .write(self.source(), key, async |held| {
                if !held {
                    return Ok((false, false));
                }
                self.insert_parked(envelope, 0, now, None).await?;
                Ok((true, true))
            })
            .await
            .map_err(|source| self.database(source))?;
        Ok(parked.then(|| self.parked(envelope, ParkReason::Behind)))
    }

    /// Parks `envelope` for its next attempt after `attempts` failed ones (the last with
    /// `error`), under the holds' lock: its aggregate is held from now on.
    async fn park_retrying(
        &self,
        envelope: &Envelope,
        key: hold::Key<'_>,
        attempts: u32,
        error: String,
    ) -> Result<Delivered, ConsumerError> {
        let inner = &self.inner;
        let after = inner.backoff.delay(attempts);
        let at = inner.outbox.clock().now()
            + chrono::TimeDelta::from_std(after).unwrap_or(chrono::TimeDelta::MAX);
        inner
            .holds
            .write(self.source(), key, async |_| {
                self.insert_parked(envelope, attempts, at, Some(&error))
                    .await?;
                Ok(((), true))
            })
            .await
            .map_err(|source| self.database(source))?;
        let reason = ParkReason::Retrying {
            attempts,
            after,
            error,
        };
        Ok(self.parked(envelope, reason))
    }

    async fn insert_parked(
        &self,
        envelope: &Envelope,
        attempts: u32,
        next_attempt_at: chrono::DateTime<chrono::Utc>,
        last_error: Option<&str>,
    ) -> Result<bool, DbErr> {
        let inner = &self.inner;
        parked::insert(
            &inner.db,
            &inner.outbox,
            NewParked {
                consumer: &inner.name,
                envelope,
                attempts,
                next_attempt_at,
                last_error,
            },
        )
        .await
    }

    /// Wakes the redelivery loop, counts and logs a parked message.
    fn parked(&self, envelope: &Envelope, reason: ParkReason) -> Delivered {
        let inner = &self.inner;
        inner.parked.notify_one();
        let label = match reason {
            ParkReason::Behind => "behind",
            ParkReason::Retrying { .. } => "retrying",
        };
        let mut labels = inner.labels.clone();
        labels.push(metrics::Label::new("reason", label));
        metrics::counter!(metric::PARKED, labels).increment(1);
        tracing::info!(
            consumer = %inner.name,
            message_id = %envelope.message_id,
            aggregate_type = %envelope.aggregate_type,
            aggregate_id = %envelope.aggregate_id,
            ?reason,
            "message parked"
        );
        Delivered::Parked { reason }
    }

    /// Settles a CloudEvents binary-mode message (broker headers and body): decodes it
    /// with [`cloudevents::from_binary`] — a message that cannot be decoded is
    /// dead-lettered at once as `malformed`, with its headers and body bounded
    /// ([`RawMessage`]) — then [`deliver`](Self::deliver)s it.
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
                let aggregate = header(headers, cloudevents::header::AGGREGATE_TYPE)
                    .zip(header(headers, cloudevents::header::SUBJECT))
                    .and_then(|(t, id)| parkable(t, id));
                let delivered = self
                    .dead_letter(
                        StoredMessage::Binary(RawMessage::capture(headers, body)),
                        header(headers, cloudevents::header::ID)
                            .and_then(|id| uuid::Uuid::parse_str(id).ok()),
                        header(headers, cloudevents::header::TYPE)
                            .filter(|t| t.len() <= MAX_KEY_CHARS),
                        aggregate,
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

    /// Deletes this database's inbox rows older than the configured retention, `batch`
    /// rows per statement, one instance at a time (cleanup lease). `None` when another
    /// instance holds the lease.
    ///
    /// # Errors
    /// The database's error.
    pub async fn purge_inbox(&self, batch: usize) -> Result<Option<u64>, DbErr> {
        let db = &self.inner.db;
        let outbox = &self.inner.outbox;
        let owner = format!("consumer-{}", uuid::Uuid::now_v7());
        retention::purge(
            db,
            outbox,
            &Store::new(outbox, db.get_database_backend()),
            Purge {
                table: retention::Table::Inbox,
                owner: &owner,
                retention: self.inner.retention,
                batch,
                lease_ttl: std::time::Duration::from_secs(60),
            },
        )
        .await
    }

    /// Dead-letters a parked message whose attempts are over (or that cannot be handled),
    /// removing it from the parked messages in the same transaction. `None` when another
    /// process of the consumer already settled it (the row was gone): nothing is written.
    async fn dead_letter_parked(
        &self,
        parked: &ParkedMessage,
        reason: DeadLetterReason,
    ) -> Result<Option<i64>, DbErr> {
        let inner = &self.inner;
        let envelope = &parked.envelope;
        let txn = inner.db.begin().await?;
        if !parked::delete(&txn, &inner.outbox, parked.id).await? {
            txn.rollback().await?;
            return Ok(None);
        }
        let id = dead_letter::insert(
            &txn,
            &inner.outbox,
            NewDeadLetter {
                message_id: Some(envelope.message_id),
                consumer: &inner.name,
                event_type: Some(&envelope.event_type),
                aggregate: Some((&parked.aggregate.0, &parked.aggregate.1)),
                reason: reason.as_str(),
                error: reason.error(),
                attempts: reason.attempts(),
                message: StoredMessage::Envelope(Box::new(envelope.clone())),
            },
        )
        .await?;
        txn.commit().await?;
        self.dead_lettered(
            id,
            Some(envelope.message_id),
            Some(&envelope.event_type),
            &reason,
        );
        Ok(Some(id))
    }
}

/// The aggregate of a message as a hold key, when it fits the key columns.
fn parkable<'a>(aggregate_type: &'a str, aggregate_id: &'a str) -> Option<hold::Key<'a>> {
    let fits = |text: &str| text.len() <= MAX_KEY_CHARS || text.chars().count() <= MAX_KEY_CHARS;
    (fits(aggregate_type) && fits(aggregate_id) && !aggregate_id.is_empty())
        .then_some((aggregate_type, aggregate_id))
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
