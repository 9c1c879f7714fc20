//! Redis Streams: [`RedisPublisher`] (the relay's [`Publisher`](outbox_core::Publisher), `XADD`)
//! and [`RedisConsumerRunner`] (a consumer group feeding an inbox
//! [`Consumer`](outbox_seaorm::inbox::Consumer), `XREADGROUP` / `XACK` / `XAUTOCLAIM`).
//!
//! ```no_run
//! use std::time::Duration;
//!
//! use outbox_brokers::redis::{self, RedisConsumerRunner, RedisPublisher};
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
//! let client = redis::open("redis://127.0.0.1:6379")?;
//!
//! // Producer side: every event of a bounded context goes to one stream,
//! // `outbox:bookstore.ordering` (the default route).
//! let publisher = RedisPublisher::builder(redis::connection(&client)?)
//!     .route(Route::context("outbox:"))
//!     .build();
//! let relay = Relay::builder(producer_db, outbox.clone(), publisher).build()?;
//! let shutdown = CancellationToken::new();
//! let relay_task = tokio::spawn(relay.run(shutdown.clone()));
//!
//! // Consumer side: the consumer group is named after the inbox consumer; the consumer
//! // name identifies this instance (keep it stable across restarts).
//! let inbox = Consumer::builder(consumer_db, outbox, "inventory.reserve-stock").build()?;
//! let runner = RedisConsumerRunner::builder(client, inbox, "outbox:bookstore.ordering")
//!     .consumer_name("inventory-1")
//!     .claim_min_idle(Duration::from_secs(60))
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
//! An outbox envelope becomes one stream entry (`XADD <stream> * field value …`):
//!
//! | outbox | stream entry |
//! |---|---|
//! | every CloudEvents binary-mode header ([`outbox_core::cloudevents`]) | a field of the same name (`ce-id` = `message_id`, `ce-type`, `ce-subject`, …) |
//! | aggregate id (the key) | field `key` ([`FIELD_KEY`]) |
//! | payload | field `body` ([`FIELD_BODY`]), JSON |
//! | destination | the stream key, by a [`Route`](crate::route::Route) (default `outbox:<context>`, e.g. `outbox:bookstore.ordering`) |
//!
//! Redis assigns the entry id (`<milliseconds>-<sequence>`); the message id travels in
//! `ce-id`. An envelope header named `key` or `body` cannot travel (its message is rejected).
//!
//! # Guarantees
//!
//! - **No broker-side deduplication.** `XADD` appends whatever it is given: a relay that
//!   republishes a row (crash between publish and mark, lost reply) appends a second entry
//!   with the same `ce-id`. Deduplication is the inbox's job: the consumer applies each
//!   message id once.
//! - **Order at the broker.** A stream is totally ordered by entry id. The publisher sends a
//!   batch as one pipeline on one connection, executed in order, so each aggregate's
//!   messages are appended in `seq` order to their stream — when every message of an
//!   aggregate goes to the same stream key, which the default route (one stream per bounded
//!   context) ensures. Once a message of an aggregate fails (a per-command error such as
//!   `OOM`), the batch's later messages of that aggregate are reported as failed even when
//!   they were appended (they are appended again later; the inbox skips the copies) and a
//!   warning names them: that aggregate's order is then broken at the broker. A connection
//!   lost mid-pipeline fails the whole batch; entries appended before the loss are appended
//!   again by the retry, after the originals, so the first copies stay in order and the
//!   inbox skips the later ones.
//! - **Order at the consumer.** One consumer (one [`RedisConsumerRunner`], one consumer name)
//!   reading a group settles entries one at a time in stream order and acknowledges each
//!   (`XACK`) before the next: a handler sees each aggregate's messages in stream order. An
//!   entry the inbox could not settle stays pending and holds back the rest of the batch;
//!   after a pause the runner reads its own pending entries first (`XREADGROUP … 0`), in
//!   order, before new ones (`>`); it does the same at start and after every connection
//!   error, so replies lost with a connection are recovered in order. Several consumers in
//!   one group share the entries and give up this order, and so do entries claimed from a
//!   dead consumer (`XAUTOCLAIM`), which are processed after newer entries this consumer
//!   already handled. The inbox applies each message once in every case.
//! - **At least once.** An entry is acknowledged only after the inbox settled it; until
//!   then it stays in the group's pending entries list, where this consumer finds it again,
//!   or another consumer claims it once it has been idle for the claim's minimum idle time.
//!
//! # Partitioned consumption
//!
//! Several processes of one consumer keep order with [`RedisPartitionedRunner`]
//! ([`RedisConsumerRunnerBuilder::build_partitioned`]): the publisher routes with a
//! [`PartitionedRoute`](crate::route::PartitionedRoute) (stream `<prefix><p>` per
//! partition), each process reads the partitions it holds a lease for
//! ([`outbox_seaorm::inbox::partitioned`]) under the consumer name `partition-<p>`, the same
//! for every owner: a new owner reads what its predecessor left pending first, in order,
//! without claims.
//!
//! # Reconnection
//!
//! [`connection`] gives a [`ConnectionManager`](::redis::aio::ConnectionManager) that connects
//! lazily and reconnects after a connection error (the failed command returns its error).
//! The publisher classifies connection errors as transient; the runner keeps its own
//! connection (its `XREADGROUP … BLOCK` would hold a shared one) and retries with backoff.

mod partitioned;
mod publisher;
mod runner;

use std::time::Duration;

pub use ::redis as client;
pub use partitioned::RedisPartitionedRunner;
pub use publisher::{
    DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_STREAM_PREFIX, RedisPublisher, RedisPublisherBuilder,
};
pub use runner::{
    DEFAULT_BATCH_SIZE, DEFAULT_BLOCK, DEFAULT_CLAIM_INTERVAL, DEFAULT_CLAIM_MIN_IDLE,
    RedisConsumerRunner, RedisConsumerRunnerBuilder, RunnerReport,
};

/// The field holding the JSON payload.
pub const FIELD_BODY: &str = "body";
/// The field holding the aggregate id.
pub const FIELD_KEY: &str = "key";

/// Default response timeout of [`connection`]: 5 s.
pub const DEFAULT_RESPONSE_TIMEOUT: Duration = Duration::from_secs(5);

/// Errors of the Redis set-up calls ([`open`], [`connection`],
/// [`RedisConsumerRunnerBuilder::build`]). Publishing reports
/// [`PublishError`](outbox_core::publish::PublishError)s instead, and the runner retries
/// broker errors itself.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RedisError {
    /// The client failed (invalid URL, connection refused, …).
    #[error("redis: {0}")]
    Client(#[from] ::redis::RedisError),
    /// The configuration is invalid.
    #[error("invalid configuration: {0}")]
    Config(String),
}

/// Opens a client for `url` (`redis://host:port/db`); nothing is connected yet.
///
/// # Errors
/// [`RedisError::Client`] when the URL is invalid.
pub fn open(url: &str) -> Result<::redis::Client, RedisError> {
    Ok(::redis::Client::open(url)?)
}

/// The connection settings of [`connection`]: connection attempts time out after 2 s, a
/// reply after `response_timeout`, and a lost connection is re-established in the
/// background with up to 3 quick retries (100 ms doubling, at most 1 s), then again on the
/// next command.
pub fn connection_config(response_timeout: Duration) -> ::redis::aio::ConnectionManagerConfig {
    ::redis::aio::ConnectionManagerConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(2)))
        .set_response_timeout(Some(response_timeout))
        .set_number_of_retries(3)
        .set_min_delay(Duration::from_millis(100))
        .set_max_delay(Duration::from_secs(1))
}

/// A lazily connecting, reconnecting connection for the publisher ([`connection_config`]
/// with a response timeout of 5 s, [`DEFAULT_RESPONSE_TIMEOUT`]). Works while Redis is
/// down: commands fail until it is back.
///
/// # Errors
/// [`RedisError::Client`] for an invalid client configuration.
pub fn connection(client: &::redis::Client) -> Result<::redis::aio::ConnectionManager, RedisError> {
    Ok(client.get_connection_manager_lazy(connection_config(DEFAULT_RESPONSE_TIMEOUT))?)
}
