//! Kafka (over [rdkafka] and its bundled librdkafka): [`KafkaPublisher`] produces the
//! relay's batches with the idempotent producer; [`KafkaConsumerRunner`] consumes topics in
//! a consumer group and hands every message to an inbox
//! [`Consumer`](outbox_seaorm::inbox::Consumer).
//!
//! ```no_run
//! use outbox_brokers::kafka::{KafkaConsumerRunner, KafkaPublisher};
//! use outbox_seaorm::inbox::Consumer;
//! use outbox_seaorm::relay::Relay;
//! use outbox_seaorm::Outbox;
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn demo(
//! #     producer_db: sea_orm::DatabaseConnection,
//! #     consumer_db: sea_orm::DatabaseConnection,
//! # ) -> Result<(), Box<dyn std::error::Error>> {
//! let shutdown = CancellationToken::new();
//!
//! // Producer side: one topic per bounded context (`bookstore.ordering`), key = aggregate id.
//! let publisher = KafkaPublisher::builder("127.0.0.1:9092").build()?;
//! let relay = Relay::builder(producer_db, Outbox::default(), publisher).build()?;
//! tokio::spawn(relay.run(shutdown.clone()));
//!
//! // Consumer side: the consumer group `inventory.reserve-stock` on that topic.
//! let consumer = Consumer::builder(consumer_db, Outbox::default(), "inventory.reserve-stock")
//!     .build()?;
//! let runner = KafkaConsumerRunner::builder("127.0.0.1:9092", ["bookstore.ordering"], consumer)
//!     .build()?;
//! runner.run(shutdown.clone()).await?;
//! # Ok(()) }
//! ```
//!
//! # The message on the wire
//!
//! | Kafka | value |
//! |---|---|
//! | topic | the [`Route`](crate::route::Route), by default [`Route::context("")`](crate::route::Route::context): `bookstore.ordering` for `bookstore.ordering.order-placed.v1` (every event of a context in one topic, so an aggregate's events of different types stay in one partition) |
//! | key | the aggregate id (`ce-subject`) |
//! | partition | librdkafka's `murmur2_random` partitioner by default: the Java client's mapping of a key to a partition |
//! | headers | every CloudEvents binary-mode header of [`to_binary`](outbox_core::cloudevents::to_binary): `ce-id` = message id, `ce-type`, `ce-source`, `ce-time`, `ce-subject`, …, `content-type`, `traceparent` |
//! | value | the JSON payload |
//!
//! The topics must exist (or the broker must create them on first use): a message to a
//! topic the broker does not know fails as a transient error after the delivery timeout.
//!
//! A new producer delivers nothing for its first 0.5 to 1 s: librdkafka connects to the
//! partition leader, then asks for the idempotent producer's id on a 500 ms timer (seen
//! with `tshark` against tansu). Build the publisher once, at start-up, and keep it: the
//! relay's first batch waits that long, later batches do not.
//!
//! # Guarantees
//!
//! - **Published means acknowledged by all in-sync replicas.** The producer is idempotent
//!   (`enable.idempotence=true`, `acks=all`): librdkafka retries internally without
//!   duplicating or reordering within its session. A batch is pipelined: every message is
//!   enqueued, then every delivery report awaited. A message not acknowledged within the
//!   delivery timeout (`message.timeout.ms`) is reported `timeout`; queue full, broker
//!   transport failures and unknown topics or partitions are transient; a message over
//!   `message.max.bytes` (client) or the broker's limit is `too large`; an invalid topic
//!   name (checked before sending: 1 to 249 characters of `[a-zA-Z0-9._-]`), a record the
//!   broker calls invalid and a missing authorisation are `rejected` (permanent). After a
//!   fatal producer error, or an error saying that the broker no longer accepts the
//!   producer's id or epoch (`PRODUCER_FENCED`, `UNKNOWN_PRODUCER_ID`, …), the next batch
//!   uses a new producer.
//! - **Order: per partition.** Kafka keeps the order within a partition. The key is the
//!   aggregate id, so an aggregate's messages of one topic share a partition and arrive in
//!   `seq` order (the relay hands them in `seq` order; the idempotent producer keeps the
//!   order of what it enqueued, retries included). A [`KafkaConsumerRunner`] settles one
//!   message at a time and never moves past a message of a partition before it is settled,
//!   so **an aggregate's messages are applied in `seq` order** — as long as the route keeps
//!   them in one topic and the topic's partition count does not change. After a failure
//!   within a pipelined batch, the aggregate's later messages are reported `not attempted`
//!   and republished after the failed one; the inbox skips the duplicates, but a later
//!   message the broker had already written is then applied before the retried earlier
//!   one. With the idempotent producer that takes an individual failure in the middle of a
//!   partition's series: a broker rejecting one record (permanent, dead-lettered anyway),
//!   or messages timing out in the producer queue while the broker comes back between the
//!   timeouts of two messages of one batch (librdkafka's "message timeout
//!   considerations": the batch is enqueued within milliseconds, timeouts are scanned once
//!   a second). A broken connection alone does not reorder.
//! - **At least once.** The runner stores a message's offset only after the inbox settled
//!   it (applied, duplicate, ignored, parked or dead-lettered, all committed); stored offsets are
//!   committed every `auto.commit.interval.ms` (1 s), on rebalance and on shutdown. A
//!   message that could not be settled is consumed again (the runner seeks its partition
//!   back to it). After a crash or a rebalance, the messages after the last committed offset
//!   are delivered again; the inbox applies each message id once.
//!
//! # Partitioned consumption
//!
//! Kafka partitions by itself: run several processes with one `group_id` and the group's
//! assignment gives each topic partition to one member; a member that leaves or dies (after
//! the session timeout) has its partitions reassigned, and the new owner resumes at the
//! committed offset, so what the old owner applied but had not committed comes again and the
//! inbox skips it. No consumer leases are involved. (A member paused past its session
//! timeout may still apply a message it had fetched after its partitions moved: each message
//! is still applied once, through the inbox, but that one message can land after a later
//! one of its aggregate that the new owner applied. NATS, RabbitMQ and Redis partition
//! runners are fenced by their lease against this.)
//!
//! # Tested against
//!
//! The integration tests run against [tansu](https://crates.io/crates/tansu) 0.6 (the Kafka
//! wire protocol, memory storage) with the bundled librdkafka 2.12. Two tansu 0.6
//! shortcomings show up there and not with Apache Kafka: a fetch from an offset inside a
//! record batch returns only the batches *after* it (a consumer positioned mid-batch, after
//! a seek or at a committed offset, skips the rest of that batch), and after messages time
//! out librdkafka bumps the idempotent producer's epoch, which tansu does not know: it
//! answers every later produce request of that producer with `PRODUCER_FENCED`. The
//! publisher survives the latter by starting a new producer (see the guarantees above).

mod publisher;
mod runner;

pub use publisher::{DEFAULT_DELIVERY_TIMEOUT, KafkaPublisher, KafkaPublisherBuilder};
pub use rdkafka;
pub use runner::{
    DEFAULT_COMMIT_INTERVAL, DEFAULT_REDELIVERY_DELAY, KafkaConsumerRunner,
    KafkaConsumerRunnerBuilder,
};

/// Why a Kafka publisher or runner could not be built or run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KafkaError {
    /// librdkafka refused the configuration or could not create the client.
    #[error("Kafka client: {0}")]
    Client(#[source] rdkafka::error::KafkaError),
    /// The subscription failed (e.g. an invalid topic name).
    #[error("Kafka subscription to {topics:?}: {source}")]
    Subscribe {
        /// The topics.
        topics: Vec<String>,
        /// librdkafka's error.
        #[source]
        source: rdkafka::error::KafkaError,
    },
}
