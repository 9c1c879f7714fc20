//! # outbox-brokers
//!
//! Broker adapters of the outbox framework, one cargo feature per broker, so that
//! `outbox-core` never pulls a broker client:
//!
//! | feature | publisher | consumer runner |
//! |---|---|---|
//! | `nats` | [`nats::NatsPublisher`] (JetStream, `Nats-Msg-Id` = message id) | [`nats::NatsConsumerRunner`] (durable pull consumer); [`nats::NatsPartitionedRunner`] (a durable per partition) |
//! | `rabbitmq` | [`rabbitmq::RabbitPublisher`] (publisher confirms, `message-id`) | [`rabbitmq::RabbitConsumerRunner`] (durable queue); [`rabbitmq::RabbitPartitionedRunner`] (a queue per partition) |
//! | `kafka` | [`kafka::KafkaPublisher`] (idempotent producer, key = aggregate id) | [`kafka::KafkaConsumerRunner`] (consumer group: several processes share its partitions) |
//! | `redis` | [`redis::RedisPublisher`] (`XADD`) | [`redis::RedisConsumerRunner`] (consumer group, `XACK`); [`redis::RedisPartitionedRunner`] (a stream per partition) |
//!
//! Every publisher implements [`outbox_core::Publisher`] for the relay: CloudEvents
//! binary-mode headers from the shared mapping ([`outbox_core::cloudevents`]), the broker's
//! message id = the envelope's `message_id`, the destination from a [`route::Route`], the
//! aggregate id as the key, acknowledgements awaited but pipelined, errors classified as
//! transient or permanent. Every runner hands messages to an inbox
//! [`Consumer`](outbox_seaorm::inbox::Consumer) and acknowledges a message only once it is
//! settled ([`settle::settle`]).
//!
//! # Modules
//! - [`route`]: subject / routing key / topic / stream from the event type;
//! - [`settle`]: the runners' shared settle-then-acknowledge step;
//! - [`partitioned`]: what the partitioned runners share (one runner per partition lease
//!   held, see [`outbox_seaorm::inbox::partitioned`]);
//! - `testing` (feature `testing`): a loopback TCP proxy that cuts and restores connections,
//!   to play a broker outage in tests and demos.

pub mod partitioned;
pub mod route;
pub mod settle;

#[cfg(feature = "nats")]
pub mod nats;

#[cfg(feature = "rabbitmq")]
pub mod rabbitmq;

#[cfg(feature = "kafka")]
pub mod kafka;

#[cfg(feature = "redis")]
pub mod redis;

#[cfg(feature = "testing")]
pub mod testing;
