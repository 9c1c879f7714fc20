//! [`Consumer`]: routes envelopes to the handlers registered for a consumer name, retries
//! failed handlers, dead-letters what cannot be handled.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use outbox_core::cloudevents::{self, CloudEventsError};
use outbox_core::name::EventType;
use outbox_core::policy::{Backoff, DeadLetterPolicy};
use outbox_core::{DecodeError, Envelope};
use sea_orm::{ConnectionTrait as _, DbErr};
use tokio::sync::Notify;

use super::dead_letter::{self, NewDeadLetter, RawMessage, StoredMessage};
use super::hold::{self, Holds};
use super::parked::{self, NewParked, ParkedMessage};
use super::partitioned::Fence;
use super::{HandlerRegistration, InboxError, InboxOutcome};
use crate::config::Outbox;
use crate::outage::DatabaseOutage;
use crate::retention::{self, Purge};
use crate::sql::Store;
use crate::status::MAX_KEY_CHARS;
use crate::transaction::Pool;

pub(super) mod builder;
pub(super) mod outcome;
mod redelivery;

pub use redelivery::ParkedReport;

use self::outcome::{
    ConsumerError, DeadLetterReason, Delivered, ParkReason, UnknownEvents, metric,
};

#[derive(Debug)]
struct Inner {
    db: Pool,
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
    /// The database health of the consumer's loops (delivery, redelivery rounds).
    outage: DatabaseOutage,
}

/// The steps of a consumer, as [`DatabaseOutage`] names them.
const DELIVERY: &str = "delivery";

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
    /// The partition lease this copy applies messages under (a
    /// [partitioned](super::partitioned) consumer's partition runner); `None`: unfenced.
    fence: Option<Arc<Fence>>,
}

/// The result of one attempt, before deciding what to do next.
enum Attempt {
    Settled(Delivered),
    Failed(String),
    /// `BEGIN` or the inbox insert failed: the database's fault, not the handler's; no
    /// attempt is counted.
    Database(DbErr),
    DeadLetter(DeadLetterReason),
    /// The partition lease was lost: nothing ran, the message is the new owner's.
    LeaseLost(String),
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
    /// The database health of this consumer's delivery and redelivery rounds (shared by
    /// its clones): what fails now, for a readiness check, and how long a runner should
    /// wait before it hands an unsettled message back ([`DatabaseOutage::pause`]). See
    /// [`crate::outage`].
    pub fn database_outage(&self) -> DatabaseOutage {
        self.inner.outage.clone()
    }

    /// The consumer name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// This consumer applying messages under `fence` only.
    pub(crate) fn fenced(&self, fence: Fence) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
            fence: Some(Arc::new(fence)),
        }
    }

    /// The consumer's database.
    pub(crate) fn db(&self) -> &Pool {
        &self.inner.db
    }

    /// The outbox configuration (table names, clock).
    pub(crate) fn outbox(&self) -> &Outbox {
        &self.inner.outbox
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
        match route
            .apply(
                inner.db.connection(),
                &inner.outbox,
                envelope,
                self.fence.as_deref(),
            )
            .await
        {
            Ok(InboxOutcome::Applied) => Attempt::Settled(Delivered::Applied { attempts: 1 }),
            Ok(InboxOutcome::Duplicate) => Attempt::Settled(Delivered::Duplicate),
            Err(InboxError::Decode { source, .. }) => {
                Attempt::DeadLetter(DeadLetterReason::Malformed {
                    error: source.to_string(),
                })
            }
            Err(InboxError::LeaseLost { lease }) => Attempt::LeaseLost(lease),
            Err(InboxError::Database(source)) => Attempt::Database(source),
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
        match &result {
            Ok(delivered) => {
                self.inner.outage.succeeded(DELIVERY);
                self.record(delivered);
            }
            Err(ConsumerError::Database { source, .. }) => {
                self.inner.outage.failed(DELIVERY, source);
            }
            Err(ConsumerError::LeaseLost { .. }) => {}
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
                Attempt::Failed(_) | Attempt::Database(_) | Attempt::LeaseLost(_) => {}
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
                Attempt::LeaseLost(lease) => {
                    return Err(ConsumerError::LeaseLost {
                        consumer: inner.name.clone(),
                        lease,
                    });
                }
                Attempt::DeadLetter(reason) => reason,
                Attempt::Database(source) => return Err(self.database(source)),
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
        let txn =
            crate::transaction::begin_whole(&inner.db, sea_orm::TransactionOptions::default())
                .await?;
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
