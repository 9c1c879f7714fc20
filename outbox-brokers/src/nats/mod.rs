//! NATS JetStream: [`NatsPublisher`] (the relay's [`Publisher`](outbox_core::Publisher)) and
//! [`NatsConsumerRunner`] (a durable pull consumer feeding an inbox
//! [`Consumer`](outbox_seaorm::inbox::Consumer)).
//!
//! ```no_run
//! use std::time::Duration;
//!
//! use outbox_brokers::nats::{self, NatsConsumerRunner, NatsPublisher, NatsStream};
//! use outbox_brokers::route::Route;
//! use outbox_seaorm::Outbox;
//! use outbox_seaorm::inbox::Consumer;
//! use outbox_seaorm::relay::Relay;
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn demo(
//! #     producer_db: sea_orm::DatabaseConnection,
//! #     consumer_db: sea_orm::DatabaseConnection,
//! # ) -> Result<(), Box<dyn std::error::Error>> {
//! let outbox = Outbox::default();
//! let client = nats::connect("nats://127.0.0.1:4222").await?;
//!
//! // The stream is the unit of ordering: one per bounded context, capturing its subjects.
//! NatsStream::new("BOOKSTORE_ORDERING", ["events.bookstore.ordering.>"])
//!     .duplicate_window(Duration::from_secs(120)) // Nats-Msg-Id deduplication
//!     .ensure(&client)
//!     .await?;
//!
//! // Producer side: the relay publishes outbox rows to `events.<event type>`.
//! let publisher = NatsPublisher::builder(client.clone())
//!     .route(Route::event_type("events."))
//!     .ack_timeout(Duration::from_secs(5))
//!     .build();
//! let relay = Relay::builder(producer_db, outbox.clone(), publisher).build()?;
//! let shutdown = CancellationToken::new();
//! let relay_task = tokio::spawn(relay.run(shutdown.clone()));
//!
//! // Consumer side: a durable pull consumer (named after the inbox consumer) on the stream.
//! let inbox = Consumer::builder(consumer_db, outbox, "inventory.reserve-stock").build()?;
//! let runner = NatsConsumerRunner::builder(client, inbox, "BOOKSTORE_ORDERING")
//!     .ack_wait(Duration::from_secs(30))
//!     .build()?;
//! let report = runner.run(shutdown.clone()).await; // until `shutdown` is cancelled
//! relay_task.await??;
//! # let _ = report;
//! # Ok(())
//! # }
//! ```
//!
//! # Mapping
//!
//! | outbox | NATS |
//! |---|---|
//! | `message_id` | `Nats-Msg-Id` header (JetStream deduplication) and `ce-id` |
//! | event type | the subject, by a [`Route`](crate::route::Route) (default `events.<event type>`, [`DEFAULT_SUBJECT_PREFIX`]) |
//! | aggregate id (the key) | `ce-subject` header (NATS has no message key; use a [`Route::custom`](crate::route::Route::custom) to put it in the subject) |
//! | other envelope fields | CloudEvents binary-mode headers ([`outbox_core::cloudevents`]) |
//! | payload | the message body (JSON) |
//!
//! The runner hands every header except the `Nats-*` ones (which belong to the broker) to the
//! inbox, so the envelope it decodes equals the one that was published.
//!
//! # Guarantees
//!
//! - **Deduplication.** JetStream drops a message whose `Nats-Msg-Id` it already stored within
//!   the stream's *duplicate window* ([`NatsStream::duplicate_window`], default 2 minutes):
//!   a relay that republishes a row (crash between publish and mark, lost acknowledgement)
//!   stores it once, as long as it republishes within the window. Beyond it the copy is
//!   stored again and the inbox absorbs it (the consumer applies each message id once).
//! - **Order at the broker.** A stream stores messages in the order the server receives them.
//!   The publisher sends each aggregate's messages of a batch in `seq` order on one
//!   connection, the next only after JetStream acknowledged the previous one, so each
//!   aggregate's messages are stored in `seq` order, in the one stream that captures their
//!   subjects — which is why the stream, not the subject, is the ordering unit: put every
//!   subject an aggregate's events go to in one stream. Once a message of an aggregate
//!   fails, the batch's later messages of that aggregate are not sent. One message in flight
//!   per aggregate matters when the connection drops: the client may lose message *k* in the
//!   dead socket yet send whatever is still in its queue after reconnecting; with *k* + 1
//!   never queued behind an unacknowledged *k*, it cannot precede *k* in the stream.
//! - **Order at the consumer.** One [`NatsConsumerRunner`] per durable consumer settles
//!   messages one at a time in stream order and acknowledges each before the next, so a
//!   handler sees each aggregate's messages in stream order: a message that must be
//!   redelivered holds back every later message of the batch (they are all nak'ed, in order,
//!   and the runner pauses until the server redelivers them first). The durable consumer
//!   hands out one delivery at a time (`max_ack_pending` 1,
//!   [`DEFAULT_MAX_ACK_PENDING`]): while a delivery is
//!   outstanding — held by a runner that died or stalls, or pending across a server
//!   restart — nothing newer is handed out, so nothing can overtake it; a second runner on
//!   the durable waits its turn instead of taking later messages. After a reconnect, or at
//!   start with a delivery left unacknowledged, the runner waits one `ack_wait` before
//!   pulling. A larger `max_ack_pending` saves a round trip per message and gives this up
//!   (the inbox still applies each message once).
//! - **At least once, applied once.** A message is acknowledged only after the inbox
//!   settled it ([`settle`](crate::settle::settle)); an acknowledgement lost with the
//!   connection means one more delivery, which the inbox recognises as a duplicate.
//!
//! # Partitioned consumption
//!
//! Several processes of one consumer keep order with [`NatsPartitionedRunner`]
//! ([`NatsConsumerRunnerBuilder::build_partitioned`]): the publisher routes with a
//! [`PartitionedRoute`](crate::route::PartitionedRoute) (subjects
//! `<prefix><p>.<event type>`), each process pulls the partitions it holds a lease for
//! ([`outbox_seaorm::inbox::partitioned`]), one durable per partition (`<durable>-p<p>`,
//! filtered by `<prefix><p>.>`, one delivery outstanding). A partition runner owns its
//! durable: deliveries left unacknowledged by a killed predecessor are restarted from the
//! durable's ack floor at once, not after an `ack_wait`. A runner that lost its lease hands
//! its batch back without delay and stops.
//!
//! # Reconnection
//!
//! [`connect`] makes a client that retries its first connection and reconnects forever with
//! backoff (at most 4 s between attempts). While the client is not connected the publisher
//! fails whole batches at once as [`Unavailable`](outbox_core::publish::PublishErrorKind::Unavailable)
//! instead of queueing them, and the runner retries its pull requests with backoff.

mod partitioned;
mod publisher;
mod runner;
mod stream;

use std::time::Duration;

pub use async_nats;
pub use partitioned::NatsPartitionedRunner;
pub use publisher::{
    DEFAULT_ACK_TIMEOUT, DEFAULT_MAX_ACK_INFLIGHT, DEFAULT_SUBJECT_PREFIX, NatsPublisher,
    NatsPublisherBuilder,
};
pub use runner::{
    DEFAULT_ACK_WAIT, DEFAULT_BATCH_SIZE, DEFAULT_FETCH_WAIT, DEFAULT_MAX_ACK_PENDING,
    NatsConsumerRunner, NatsConsumerRunnerBuilder, RunnerReport, durable_name_for,
};
pub use stream::{DEFAULT_DUPLICATE_WINDOW, NatsStream};

/// Errors of the NATS set-up calls ([`connect`], [`NatsStream::ensure`],
/// [`NatsConsumerRunnerBuilder::build`]). Publishing reports
/// [`PublishError`](outbox_core::publish::PublishError)s instead, and the runner retries
/// broker errors itself.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NatsError {
    /// The client could not connect.
    #[error("cannot connect to NATS: {0}")]
    Connect(#[from] async_nats::ConnectError),
    /// A JetStream stream could not be created, updated or read.
    #[error("JetStream stream `{stream}`: {message}")]
    Stream {
        /// The stream.
        stream: String,
        /// What failed.
        message: String,
    },
    /// The configuration is invalid.
    #[error("invalid configuration: {0}")]
    Config(String),
}

/// Connects to `url` with the options the adapters expect: the first connection is retried
/// in the background (the call returns at once, also when the server is down), reconnection
/// never gives up, connection attempts time out after 5 s, and JetStream requests after
/// 10 s.
///
/// # Errors
/// [`NatsError::Connect`] when `url` cannot be parsed.
pub async fn connect(url: &str) -> Result<async_nats::Client, NatsError> {
    Ok(async_nats::ConnectOptions::new()
        .retry_on_initial_connect()
        .connection_timeout(Duration::from_secs(5))
        .request_timeout(Some(Duration::from_secs(10)))
        .connect(url)
        .await?)
}

/// Whether `name` is a header of the broker's own (`Nats-…`), not of the envelope.
pub(crate) fn is_broker_header(name: &str) -> bool {
    name.get(..5)
        .is_some_and(|prefix| prefix.eq_ignore_ascii_case("nats-"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broker_headers_are_the_nats_ones() {
        assert!(is_broker_header("Nats-Msg-Id"));
        assert!(is_broker_header("nats-expected-stream"));
        assert!(!is_broker_header("ce-id"));
        assert!(!is_broker_header("nat"));
        assert!(!is_broker_header("natş-x"));
    }
}
