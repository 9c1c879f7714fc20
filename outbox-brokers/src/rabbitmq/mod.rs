//! RabbitMQ (AMQP 0-9-1, over [lapin]): [`RabbitPublisher`] publishes the relay's batches to
//! a durable topic exchange with publisher confirms; [`RabbitConsumerRunner`] consumes a
//! durable queue bound to that exchange and hands every message to an inbox
//! [`Consumer`](outbox_seaorm::inbox::Consumer).
//!
//! ```no_run
//! use outbox_brokers::rabbitmq::{RabbitConsumerRunner, RabbitPublisher};
//! use outbox_seaorm::inbox::Consumer;
//! use outbox_seaorm::relay::Relay;
//! use outbox_seaorm::Outbox;
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn demo(
//! #     producer_db: sea_orm::DatabaseConnection,
//! #     consumer_db: sea_orm::DatabaseConnection,
//! # ) -> Result<(), Box<dyn std::error::Error>> {
//! let url = "amqp://guest:guest@127.0.0.1:5672/%2f";
//! let shutdown = CancellationToken::new();
//!
//! // Producer side: the relay publishes to the `bookstore` exchange, routing key = event type.
//! let publisher = RabbitPublisher::builder(url, "bookstore").build()?;
//! let relay = Relay::builder(producer_db, Outbox::default(), publisher).build()?;
//! tokio::spawn(relay.run(shutdown.clone()));
//!
//! // Consumer side: a durable queue bound to the Ordering events, one inbox consumer.
//! let consumer = Consumer::builder(consumer_db, Outbox::default(), "inventory.reserve-stock")
//!     .build()?;
//! let runner = RabbitConsumerRunner::builder(url, "bookstore", "inventory.reserve-stock", consumer)
//!     .bind("bookstore.ordering.#")
//!     .build()?;
//! runner.run(shutdown.clone()).await?;
//! # Ok(()) }
//! ```
//!
//! # The message on the wire
//!
//! | AMQP | value |
//! |---|---|
//! | exchange | the publisher's exchange: durable, type `topic`, declared on every connection ([`declare_exchange`]) |
//! | routing key | the [`Route`](crate::route::Route), by default [`Route::event_type("")`](crate::route::Route::event_type): `bookstore.ordering.order-placed.v1` |
//! | `message-id` property | the envelope's `message_id` |
//! | `content-type` property | `application/json` |
//! | `type` property | the event type |
//! | `timestamp` property | `occurred_at`, in seconds |
//! | `correlation-id` property | the correlation id, when there is one |
//! | `delivery-mode` property | 2 (persistent) |
//! | `headers` table | every other CloudEvents binary-mode header of [`to_binary`](outbox_core::cloudevents::to_binary) (`ce-id`, `ce-type`, `ce-source`, `ce-time`, `ce-subject` = aggregate id, …, `traceparent`), as long strings |
//! | body | the JSON payload |
//!
//! The aggregate id travels in `ce-subject`. The routing key carries the event type, not the
//! aggregate: bind queues by event type (`bookstore.ordering.#`). To spread an aggregate's
//! messages over several queues without breaking their order, route with
//! [`Route::custom`](crate::route::Route::custom) or a consistent-hash exchange hashing the
//! `ce-subject` header.
//!
//! # Guarantees
//!
//! - **Published means confirmed.** A message is reported published only when the broker
//!   confirmed it (publisher confirms): for a persistent message routed to durable queues
//!   RabbitMQ confirms once every queue accepted it. A batch is pipelined: every message is
//!   published on the confirm-mode channel, then every confirmation is awaited (within the
//!   confirm timeout).
//! - **Unroutable is a failure.** Messages are published `mandatory`: a message no queue is
//!   bound for comes back (`basic.return`, `NO_ROUTE`) and is reported as a **transient**
//!   failure (kind `unavailable`), so the relay retries it with backoff and dead-letters it
//!   after its maximum attempts instead of letting the broker drop it — the usual cause is a
//!   consumer whose queue is not declared yet. A `basic.nack` (the broker could not store the
//!   message, e.g. a queue at its length limit with `reject-publish`) is transient too. The
//!   only permanent failures are found before sending: a message over the size limit
//!   ([`RabbitPublisherBuilder::max_message_size`]) → `too large`, an envelope that cannot be
//!   mapped to headers or a routing key over 255 bytes → `rejected`. A channel or connection
//!   error is not attributable to one message and is transient.
//! - **Order.** RabbitMQ keeps the order in which one channel published messages within each
//!   queue. The relay hands an aggregate's messages in `seq` order and the publisher
//!   publishes a batch on one channel in batch order, so **a queue receives an aggregate's
//!   messages in `seq` order**, and a [`RabbitConsumerRunner`], which settles one message at
//!   a time, applies them in that order — with **one** consumer per queue (several
//!   consumers on one queue compete and interleave; set
//!   [`single_active_consumer`](RabbitConsumerRunnerBuilder::single_active_consumer) to keep
//!   a standby instead). Order is not kept across queues, nor for a message the broker
//!   nacked or returned while later messages of its aggregate in the same pipelined batch
//!   were accepted: those are reported `not attempted` and republished after the retry
//!   (the inbox skips the duplicates), so they reach the queue ahead of the retried one.
//! - **At least once.** A consumer acknowledges a message only after the inbox settled it
//!   (applied, duplicate, ignored, parked or dead-lettered, all committed); a message that could not
//!   be settled is nacked with requeue. A lost connection requeues every unacknowledged
//!   message; the inbox applies each message id once.
//!
//! # Partitioned consumption
//!
//! Several processes of one consumer keep order with [`RabbitPartitionedRunner`]
//! ([`RabbitConsumerRunnerBuilder::build_partitioned`]): the publisher routes with a
//! [`PartitionedRoute`](crate::route::PartitionedRoute) (routing key `<prefix><p>`, or
//! `<prefix><p>.<event type>`), partition `p` is the durable queue `<queue>.p<p>` with single
//! active consumer, and each process consumes the partitions it holds a lease for
//! ([`outbox_seaorm::inbox::partitioned`]). A killed owner's unacknowledged messages return
//! to the queue, in order, when its connection closes. Declare every partition queue before
//! publishing ([`RabbitPartitionedRunner::declare_topology`]).

mod partitioned;
mod publisher;
mod runner;

pub use lapin;
pub use partitioned::RabbitPartitionedRunner;
pub use publisher::{
    DEFAULT_CONFIRM_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, DEFAULT_MAX_MESSAGE_SIZE, RabbitPublisher,
    RabbitPublisherBuilder,
};
pub use runner::{
    DEFAULT_ACK_TIMEOUT, DEFAULT_PREFETCH, DEFAULT_RECONNECT_DELAY, DEFAULT_RECONNECT_DELAY_MAX,
    DEFAULT_REDELIVERY_DELAY, RabbitConsumerRunner, RabbitConsumerRunnerBuilder,
};

use lapin::options::ExchangeDeclareOptions;
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::{BasicProperties, Channel, ExchangeKind};

/// Why a RabbitMQ publisher or runner could not be built or run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RabbitError {
    /// The configuration is invalid (URI, names over 255 bytes, …).
    #[error("invalid RabbitMQ configuration: {0}")]
    Config(String),
    /// The broker refused the consumer's topology or subscription for good (e.g. a queue
    /// declared with other arguments: `PRECONDITION_FAILED`, no permission:
    /// `ACCESS_REFUSED`). Not retried.
    #[error("RabbitMQ refused {context}: {source}")]
    Refused {
        /// What was refused.
        context: String,
        /// lapin's error.
        #[source]
        source: lapin::Error,
    },
    /// The broker or the connection failed (retried by the runner).
    #[error("RabbitMQ: {context}: {source}")]
    Amqp {
        /// What failed.
        context: String,
        /// lapin's error.
        #[source]
        source: lapin::Error,
    },
    /// The broker ended the subscription (consumer cancelled, e.g. the queue was deleted)
    /// or the channel closed (retried by the runner).
    #[error("RabbitMQ: {0}")]
    Closed(String),
    /// No answer in time (retried by the runner).
    #[error("RabbitMQ: {context}: no answer within {timeout:?}")]
    Timeout {
        /// What timed out.
        context: String,
        /// The limit.
        timeout: std::time::Duration,
    },
}

/// Declares `exchange` as a durable topic exchange (idempotent; fails with
/// `PRECONDITION_FAILED` when it exists with another type or durability).
///
/// # Errors
/// The broker's or the connection's error.
pub async fn declare_exchange(channel: &Channel, exchange: &str) -> Result<(), lapin::Error> {
    channel
        .exchange_declare(
            short(exchange)?,
            ExchangeKind::Topic,
            ExchangeDeclareOptions {
                durable: true,
                ..ExchangeDeclareOptions::default()
            },
            FieldTable::default(),
        )
        .await
}

/// `value` as a short string (at most 255 bytes), or a lapin error naming the problem.
fn short(value: &str) -> Result<ShortString, lapin::Error> {
    ShortString::try_new(value).map_err(|error| {
        lapin::Error::from(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            error.to_string(),
        ))
    })
}

/// The CloudEvents headers of a received message: the `headers` table (string values, and
/// numbers / booleans as text) plus the `content-type` property.
fn received_headers(properties: &BasicProperties) -> Vec<(String, String)> {
    let mut headers = Vec::new();
    if let Some(table) = properties.headers() {
        for (name, value) in table {
            let text = match value {
                AMQPValue::LongString(s) => String::from_utf8_lossy(s.as_bytes()).into_owned(),
                AMQPValue::ShortString(s) => s.as_str().to_owned(),
                AMQPValue::Boolean(b) => b.to_string(),
                AMQPValue::ShortShortInt(n) => n.to_string(),
                AMQPValue::ShortShortUInt(n) => n.to_string(),
                AMQPValue::ShortInt(n) => n.to_string(),
                AMQPValue::ShortUInt(n) => n.to_string(),
                AMQPValue::LongInt(n) => n.to_string(),
                AMQPValue::LongUInt(n) => n.to_string(),
                AMQPValue::LongLongInt(n) => n.to_string(),
                _ => continue,
            };
            headers.push((name.as_str().to_owned(), text));
        }
    }
    let has_content_type = headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case(outbox_core::cloudevents::header::CONTENT_TYPE));
    if let (false, Some(content_type)) = (has_content_type, properties.content_type()) {
        headers.push((
            outbox_core::cloudevents::header::CONTENT_TYPE.to_owned(),
            content_type.as_str().to_owned(),
        ));
    }
    headers
}

#[cfg(test)]
mod tests {
    use lapin::types::{LongString, ShortString};

    use super::*;

    #[test]
    fn received_headers_come_from_the_table_and_the_content_type_property() {
        let mut table = FieldTable::default();
        table.insert(
            ShortString::from("ce-id"),
            AMQPValue::LongString(LongString::from("0190-…")),
        );
        table.insert(
            ShortString::from("ce-type"),
            AMQPValue::ShortString(ShortString::from("a.b.c.v1")),
        );
        table.insert(ShortString::from("x-retries"), AMQPValue::LongInt(3));
        table.insert(
            ShortString::from("x-nested"),
            AMQPValue::FieldTable(FieldTable::default()),
        );
        let properties = BasicProperties::default()
            .with_headers(table)
            .with_content_type(ShortString::from("application/json"));
        let mut headers = received_headers(&properties);
        headers.sort();
        assert_eq!(
            headers,
            [
                ("ce-id".to_owned(), "0190-…".to_owned()),
                ("ce-type".to_owned(), "a.b.c.v1".to_owned()),
                ("content-type".to_owned(), "application/json".to_owned()),
                ("x-retries".to_owned(), "3".to_owned()),
            ]
        );
    }

    #[test]
    fn a_content_type_header_wins_over_the_property() {
        let mut table = FieldTable::default();
        table.insert(
            ShortString::from("content-type"),
            AMQPValue::LongString(LongString::from("application/json; charset=utf-8")),
        );
        let properties = BasicProperties::default()
            .with_headers(table)
            .with_content_type(ShortString::from("text/plain"));
        assert_eq!(
            received_headers(&properties),
            [(
                "content-type".to_owned(),
                "application/json; charset=utf-8".to_owned()
            )]
        );
    }
}
