//! [`KafkaPublisher`]: the relay's batches through librdkafka's idempotent producer.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::join_all;
use outbox_core::Envelope;
use outbox_core::cloudevents;
use outbox_core::publish::{
    BatchOutcome, MessageOutcome, PublishError, PublishErrorKind, Publisher,
};
use rdkafka::ClientConfig;
use rdkafka::error::KafkaError as RdKafkaError;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord, Producer as _};
use rdkafka::types::RDKafkaErrorCode;
use tokio::time::Instant;

use super::KafkaError;
use crate::route::Route;

/// Default delivery timeout (`message.timeout.ms`): 5 s, below the relay's default publish
/// timeout of 10 s.
pub const DEFAULT_DELIVERY_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a batch waits for room in a full producer queue before the message is
/// reported as failed (transient).
const QUEUE_FULL_WAIT: Duration = Duration::from_secs(1);

/// Configures a [`KafkaPublisher`]. Defaults:
///
/// | setting | default |
/// |---|---|
/// | [`route`](Self::route) | [`Route::context("")`](Route::context): topic = the event type's context |
/// | [`delivery_timeout`](Self::delivery_timeout) | [`DEFAULT_DELIVERY_TIMEOUT`] (5 s, `message.timeout.ms`) |
/// | `enable.idempotence` / `acks` | `true` / `all` (not meant to be changed) |
/// | `partitioner` | `murmur2_random` (the Java client's key hashing) |
/// | `client.id` | `outbox-relay` |
/// | anything else | librdkafka's defaults; override with [`set`](Self::set) |
#[must_use]
pub struct KafkaPublisherBuilder {
    route: Route,
    delivery_timeout: Duration,
    config: BTreeMap<String, String>,
}

impl fmt::Debug for KafkaPublisherBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KafkaPublisherBuilder")
            .field("route", &self.route)
            .field("delivery_timeout", &self.delivery_timeout)
            .field("config", &self.config)
            .finish()
    }
}

impl KafkaPublisherBuilder {
    /// How the topic is derived (default: the event type's context).
    pub fn route(mut self, route: Route) -> Self {
        self.route = route;
        self
    }

    /// How long librdkafka may try to deliver a message (`message.timeout.ms`, default 5 s,
    /// retries included). A message not acknowledged by then is reported `timeout`. Keep it
    /// below the relay's publish timeout.
    pub fn delivery_timeout(mut self, timeout: Duration) -> Self {
        self.delivery_timeout = timeout;
        self
    }

    /// Sets any librdkafka producer property (`linger.ms`, `compression.type`,
    /// `message.max.bytes`, `security.protocol`, …). `enable.idempotence` and `acks` can
    /// be set too, but then the guarantees of the module documentation no longer hold.
    pub fn set(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.config.insert(key.into(), value.into());
        self
    }

    /// Creates the producer (it connects in the background; the first batch waits for it).
    ///
    /// # Errors
    /// [`KafkaError::Client`] when librdkafka refuses the configuration.
    pub fn build(self) -> Result<KafkaPublisher, KafkaError> {
        let mut config = ClientConfig::new();
        for (key, value) in &self.config {
            config.set(key, value);
        }
        config.set(
            "message.timeout.ms",
            self.delivery_timeout.as_millis().max(1).to_string(),
        );
        let producer: FutureProducer = config.create().map_err(KafkaError::Client)?;
        Ok(KafkaPublisher {
            inner: Arc::new(Inner {
                config,
                route: self.route,
                delivery_timeout: self.delivery_timeout,
                producer: Mutex::new(Arc::new(producer)),
            }),
        })
    }
}

/// Produces envelopes to Kafka with the idempotent producer; implements [`Publisher`] for
/// the relay. See the [module documentation](super) for the wire format and the
/// guarantees. Cheap to clone (clones share the producer).
///
/// A batch is enqueued whole (key = aggregate id), then every delivery report is awaited.
/// Connections and reconnections are librdkafka's: while the broker is unreachable,
/// messages wait in the producer queue and fail as `timeout` after the delivery timeout;
/// nothing panics.
#[derive(Clone)]
pub struct KafkaPublisher {
    inner: Arc<Inner>,
}

struct Inner {
    config: ClientConfig,
    route: Route,
    delivery_timeout: Duration,
    producer: Mutex<Arc<FutureProducer>>,
}

impl fmt::Debug for KafkaPublisher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KafkaPublisher")
            .field("route", &self.inner.route)
            .field("delivery_timeout", &self.inner.delivery_timeout)
            .finish_non_exhaustive()
    }
}

/// A message ready to enqueue.
struct Prepared {
    topic: String,
    headers: OwnedHeaders,
    body: Vec<u8>,
}

/// A message after the enqueue phase.
enum Slot {
    Done(MessageOutcome),
    Enqueued(DeliveryFuture),
}

impl KafkaPublisher {
    /// Starts configuring a publisher to the brokers `bootstrap_servers`
    /// (`host:port[,host:port…]`).
    pub fn builder(bootstrap_servers: impl Into<String>) -> KafkaPublisherBuilder {
        let mut config = BTreeMap::new();
        for (key, value) in [
            ("bootstrap.servers", bootstrap_servers.into()),
            ("enable.idempotence", "true".to_owned()),
            ("acks", "all".to_owned()),
            ("partitioner", "murmur2_random".to_owned()),
            ("client.id", "outbox-relay".to_owned()),
        ] {
            config.insert(key.to_owned(), value);
        }
        KafkaPublisherBuilder {
            route: Route::context(""),
            delivery_timeout: DEFAULT_DELIVERY_TIMEOUT,
            config,
        }
    }

    /// The route deriving topics.
    pub fn route(&self) -> &Route {
        &self.inner.route
    }

    /// Waits up to `timeout` for every enqueued message to be delivered (or to fail).
    ///
    /// # Errors
    /// librdkafka's error when messages remain after `timeout`.
    pub async fn flush(&self, timeout: Duration) -> Result<(), KafkaError> {
        let producer = self.inner.producer();
        tokio::task::spawn_blocking(move || producer.flush(timeout))
            .await
            .unwrap_or(Ok(()))
            .map_err(KafkaError::Client)
    }
}

impl Publisher for KafkaPublisher {
    async fn publish(&self, batch: &[Envelope]) -> BatchOutcome {
        self.inner.publish(batch).await
    }
}

impl Inner {
    fn producer(&self) -> Arc<FutureProducer> {
        Arc::clone(&self.producer.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Replaces `used` (unless already replaced) after a fatal error or an error that means
    /// the broker no longer accepts its producer id or epoch: the idempotent producer's
    /// state is lost and it would fail every further message.
    fn replace(&self, used: &Arc<FutureProducer>) {
        let mut current = self.producer.lock().unwrap_or_else(|p| p.into_inner());
        if !Arc::ptr_eq(&current, used) {
            return;
        }
        let fatal = used.client().fatal_error();
        match self.config.create::<FutureProducer>() {
            Ok(fresh) => {
                tracing::warn!(
                    ?fatal,
                    "Kafka producer: producer state lost, replaced by a new producer"
                );
                *current = Arc::new(fresh);
            }
            Err(error) => {
                tracing::error!(?fatal, %error, "Kafka producer: producer state lost, and no new producer");
            }
        }
    }

    fn prepare(&self, envelope: &Envelope) -> Result<Prepared, PublishError> {
        let binary = cloudevents::to_binary(envelope).map_err(|error| {
            PublishError::rejected(format!("cannot map to CloudEvents headers: {error}"))
        })?;
        let mut headers = OwnedHeaders::new_with_capacity(binary.headers.len());
        for (key, value) in &binary.headers {
            headers = headers.insert(Header {
                key,
                value: Some(value.as_str()),
            });
        }
        let topic = self.route.destination(envelope);
        if let Err(reason) = check_topic(&topic) {
            return Err(PublishError::rejected(format!(
                "invalid Kafka topic `{topic}`: {reason}"
            )));
        }
        Ok(Prepared {
            topic,
            headers,
            body: binary.body,
        })
    }

    /// Enqueues one message, waiting a little for room when the queue is full.
    async fn enqueue(
        producer: &FutureProducer,
        envelope: &Envelope,
        prepared: Prepared,
    ) -> Result<DeliveryFuture, PublishError> {
        let key = envelope.aggregate_id.as_str();
        let mut record = FutureRecord::to(&prepared.topic)
            .key(key)
            .payload(prepared.body.as_slice())
            .headers(prepared.headers);
        let give_up = Instant::now() + QUEUE_FULL_WAIT;
        loop {
            match producer.send_result(record) {
                Ok(delivery) => return Ok(delivery),
                Err((RdKafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back))
                    if Instant::now() < give_up =>
                {
                    record = back;
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                Err((error, _)) => return Err(classify(&error, &prepared.topic)),
            }
        }
    }

    async fn publish(&self, batch: &[Envelope]) -> BatchOutcome {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let producer = self.producer();

        // Enqueue phase, in batch order; an aggregate stops at its first failure.
        let mut stopped: HashSet<(&str, &str)> = HashSet::new();
        let mut slots = Vec::with_capacity(batch.len());
        for envelope in batch {
            let key = (
                envelope.aggregate_type.as_str(),
                envelope.aggregate_id.as_str(),
            );
            if stopped.contains(&key) {
                slots.push(Slot::Done(Err(PublishError::not_attempted())));
                continue;
            }
            let enqueued = match self.prepare(envelope) {
                Ok(prepared) => Self::enqueue(&producer, envelope, prepared).await,
                Err(error) => Err(error),
            };
            match enqueued {
                Ok(delivery) => slots.push(Slot::Enqueued(delivery)),
                Err(error) => {
                    stopped.insert(key);
                    slots.push(Slot::Done(Err(error)));
                }
            }
        }

        // Delivery phase: every report at once. librdkafka fails a message itself after
        // `message.timeout.ms`; the margin covers its once-a-second timeout scan.
        let deadline = Instant::now() + self.delivery_timeout + Duration::from_secs(2);
        let timeout = self.delivery_timeout;
        let route = &self.route;
        let results = join_all(slots.into_iter().zip(batch).map(|(slot, envelope)| async move {
            match slot {
                Slot::Done(outcome) => (outcome, false),
                Slot::Enqueued(delivery) => match tokio::time::timeout_at(deadline, delivery).await
                {
                    Err(_) => (
                        Err(PublishError::timeout(format!(
                            "Kafka: no delivery report within {timeout:?}"
                        ))),
                        false,
                    ),
                    Ok(Err(_canceled)) => (
                        Err(PublishError::unavailable(
                            "Kafka: the producer was dropped before reporting the delivery",
                        )),
                        false,
                    ),
                    Ok(Ok(Err((error, _message)))) => (
                        Err(classify(&error, &route.destination(envelope))),
                        producer_state_lost(&error),
                    ),
                    Ok(Ok(Ok(_delivery))) => (Ok(()), false),
                },
            }
        }))
        .await;
        let mut renew = false;
        let mut outcomes: Vec<MessageOutcome> = results
            .into_iter()
            .map(|(outcome, lost)| {
                renew |= lost;
                outcome
            })
            .collect();
        if renew || producer.client().fatal_error().is_some() {
            self.replace(&producer);
        }
        outbox_core::publish::stop_after_failures(batch, &mut outcomes);
        Ok(outcomes)
    }
}

/// Kafka's topic name rule: 1 to 249 characters of `[a-zA-Z0-9._-]`, not `.` or `..`.
/// (Checked before sending: a broker answers an invalid name with `INVALID_TOPIC_EXCEPTION`
/// in its metadata, or, like tansu, not at all, and the message times out.)
fn check_topic(topic: &str) -> Result<(), &'static str> {
    if topic.is_empty() || topic.len() > 249 {
        return Err("a topic name has 1 to 249 characters");
    }
    if topic == "." || topic == ".." {
        return Err("`.` and `..` are not topic names");
    }
    if !topic
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return Err("a topic name has only ASCII letters, digits, `.`, `_` and `-`");
    }
    Ok(())
}

/// Whether `error` means the idempotent producer's id or epoch is no longer valid (a new
/// producer is needed).
fn producer_state_lost(error: &RdKafkaError) -> bool {
    use RDKafkaErrorCode as Code;
    matches!(
        error.rdkafka_error_code(),
        Some(
            Code::Fatal
                | Code::ProducerFenced
                | Code::InvalidProducerEpoch
                | Code::UnknownProducerId
                | Code::OutOfOrderSequenceNumber
                | Code::InvalidProducerIdMapping
        )
    )
}

/// The class of a producer error.
fn classify(error: &RdKafkaError, topic: &str) -> PublishError {
    use RDKafkaErrorCode as Code;
    let message = format!("Kafka, topic `{topic}`: {error}");
    let Some(code) = error.rdkafka_error_code() else {
        return PublishError::unavailable(message);
    };
    let kind = match code {
        Code::MessageTimedOut | Code::RequestTimedOut => return PublishError::timeout(message),
        Code::MessageSizeTooLarge | Code::MessageBatchTooLarge => {
            return PublishError::new(PublishErrorKind::TooLarge, message);
        }
        Code::InvalidTopic
        | Code::TopicAuthorizationFailed
        | Code::ClusterAuthorizationFailed
        | Code::InvalidRecord
        | Code::InvalidMessage
        | Code::InvalidMessageSize
        | Code::InvalidRequiredAcks
        | Code::UnsupportedForMessageFormat
        | Code::PolicyViolation => PublishErrorKind::Rejected,
        // Queue full, transport failures, all brokers down, unknown topic or partition
        // (not created yet), leader changes, fatal producer errors (a new producer takes
        // over), purges: the message may go through later.
        _ => PublishErrorKind::Unavailable,
    };
    PublishError::new(kind, message)
}

#[cfg(test)]
mod tests {
    use outbox_core::IntegrationEvent;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    use super::*;

    #[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
    #[integration_event(name = "unit.ordering.order-placed.v1", key = order_id)]
    struct OrderPlacedV1 {
        order_id: String,
        n: u32,
    }

    fn envelope(order: &str, n: u32) -> Envelope {
        Envelope::from_event(&OrderPlacedV1 {
            order_id: order.to_owned(),
            n,
        })
        .expect("envelope")
    }

    #[test]
    fn topic_names_follow_kafkas_rule() {
        assert!(check_topic("bookstore.ordering").is_ok());
        assert!(check_topic("t-01_x.y").is_ok());
        for bad in [
            "",
            ".",
            "..",
            "orders placed",
            "ordres/placés",
            &"x".repeat(250),
        ] {
            assert!(check_topic(bad).is_err(), "{bad:?}");
        }
        assert!(check_topic(&"x".repeat(249)).is_ok());
    }

    #[test]
    fn an_aggregate_stops_at_its_first_failure() {
        let batch = [
            envelope("a", 1),
            envelope("b", 1),
            envelope("a", 2),
            envelope("a", 3),
            envelope("b", 2),
        ];
        let mut outcomes = vec![
            Err(PublishError::timeout("no report")),
            Ok(()),
            Ok(()),
            Err(PublishError::unavailable("down")),
            Ok(()),
        ];
        outbox_core::publish::stop_after_failures(&batch, &mut outcomes);
        let kinds: Vec<Option<PublishErrorKind>> = outcomes
            .iter()
            .map(|o| o.as_ref().err().map(PublishError::kind))
            .collect();
        assert_eq!(
            kinds,
            [
                Some(PublishErrorKind::Timeout),
                None,
                Some(PublishErrorKind::NotAttempted),
                Some(PublishErrorKind::NotAttempted),
                None
            ]
        );
    }

    #[test]
    fn producer_errors_are_classified() {
        use RDKafkaErrorCode as Code;
        let kind = |code| classify(&RdKafkaError::MessageProduction(code), "t").kind();
        assert_eq!(kind(Code::MessageTimedOut), PublishErrorKind::Timeout);
        assert_eq!(kind(Code::QueueFull), PublishErrorKind::Unavailable);
        assert_eq!(
            kind(Code::BrokerTransportFailure),
            PublishErrorKind::Unavailable
        );
        assert_eq!(
            kind(Code::UnknownTopicOrPartition),
            PublishErrorKind::Unavailable
        );
        assert_eq!(kind(Code::MessageSizeTooLarge), PublishErrorKind::TooLarge);
        assert_eq!(kind(Code::InvalidTopic), PublishErrorKind::Rejected);
        assert_eq!(
            kind(Code::TopicAuthorizationFailed),
            PublishErrorKind::Rejected
        );
        assert!(producer_state_lost(&RdKafkaError::MessageProduction(
            Code::ProducerFenced
        )));
        assert!(!producer_state_lost(&RdKafkaError::MessageProduction(
            Code::QueueFull
        )));
    }
}
