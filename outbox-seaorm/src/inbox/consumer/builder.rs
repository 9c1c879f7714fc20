//! [`ConsumerBuilder`]: a consumer's settings and their defaults, validated by
//! [`build`](ConsumerBuilder::build).

use crate::outage::DatabaseOutage;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use outbox_core::name::{ConsumerNameError, check_consumer_name};
use outbox_core::policy::{Backoff, DeadLetterPolicy};
use sea_orm::DatabaseConnection;
use tokio::sync::Notify;

use super::outcome::UnknownEvents;
use super::{Consumer, Inner};
use crate::config::Outbox;
use crate::inbox::HandlerRegistration;
use crate::inbox::hold::Holds;
use crate::transaction::Pool;

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
        let outage = DatabaseOutage::new("consumer", consumer.clone(), labels.clone());
        Ok(Consumer {
            inner: Arc::new(Inner {
                db: Pool::new(self.db, self.outbox.transaction_pooling()),
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
                outage,
            }),
            fence: None,
        })
    }
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
}
