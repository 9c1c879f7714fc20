//! The broker benchmarks (issue 6, item 5), per broker, on PostgreSQL, each against
//! baselines measured in the same run:
//!
//! - **relay → broker**: N pending outbox rows (default 20 000 over 200 aggregates, an
//!   `OrderPlacedV1` payload of about 330 bytes) published to a fresh destination (stream,
//!   key, topic, queue):
//!   - (f) **framework**: `Relay::drain()` with the broker's publisher (per-aggregate mode,
//!     leases, the default batch of 500);
//!   - (d) **raw drain**: the raw claim + mark loop of the `relay` benchmark (`SELECT <every
//!     column> … ORDER BY seq LIMIT n FOR UPDATE SKIP LOCKED`, `UPDATE … = ANY($1)`,
//!     `COMMIT`) with a no-op publish;
//!   - (p) **raw publish**: the raw client publishing the same envelopes (same headers, from
//!     the shared CloudEvents mapping, same body), in batches of the same size, with the
//!     same acknowledgement mode (JetStream: every message sent, then every acknowledgement
//!     awaited; Redis: one pipeline of `XADD`s per batch; …), no database;
//!   - (r) **raw relay**: (d) with (p)'s publish in the middle of each batch — what a
//!     hand-written relay that claims, publishes and marks one batch after the other gets.
//!
//!   Printed: rows/s of each, f / min(d, p) (target ≥ 0.80) and f / r. The modes rotate
//!   between rounds; rows are reset to pending and the table vacuumed before each DB mode.
//! - **consumer**: M messages (default 5 000) published to a fresh destination, then the
//!   broker's consumer runner feeding an inbox consumer whose handler runs one business
//!   `UPDATE` on PostgreSQL, until every message is applied; messages/s. For context, the
//!   raw client reading and acknowledging the same M messages (its own consumer / group, no
//!   database, one acknowledgement per message like the runner).
//!
//! Every figure is the median of `--rounds` rounds (default 3). Each run creates and drops
//! its own database and a fresh destination per measurement.
//!
//! ```text
//! cargo run --release -p outbox-bench -- brokers --broker all
//! ```
//!
//! Adding a broker is one [`Broker`] implementation and one line in [`run`].

use std::error::Error;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bookstore_contracts::{MoneyV1, OrderPlacedV1, OrderedBookV1};
use futures_util::StreamExt as _;
use futures_util::future::join_all;
use outbox_brokers::kafka::{self, KafkaConsumerRunner, KafkaPublisher};
use outbox_brokers::nats::async_nats;
use outbox_brokers::nats::{self, NatsConsumerRunner, NatsPublisher, NatsStream};
use outbox_brokers::rabbitmq::{self, RabbitConsumerRunner, RabbitPublisher, lapin};
use outbox_brokers::redis::{
    self as redis_broker, RedisConsumerRunner, RedisPublisher, client as redis,
};
use outbox_brokers::route::Route;
use outbox_core::cloudevents;
use outbox_core::envelope::EnvelopeParts;
use outbox_core::publish::{BatchOutcome, PublishError, Publisher};
use outbox_core::{Envelope, IntegrationEvent as _};
use outbox_seaorm::inbox::Consumer;
use outbox_seaorm::relay::Relay;
use outbox_seaorm::{Outbox, UnitOfWork, inbox_handler};
use sea_orm::sqlx::{self, PgPool, Row as _};
use sea_orm::{
    ConnectOptions, ConnectionTrait, Database, DatabaseConnection, DbBackend, DbErr, Statement,
};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::measure::median;
use crate::order_rows::{self, BOOKS, Due};

type BoxError = Box<dyn Error + Send + Sync>;

/// The outbox table of the benchmark.
const OUTBOX: &str = "brk_outbox";
/// The inbox table of the benchmark.
const INBOX: &str = "brk_inbox";
/// The inbox consumer of the benchmark's handler.
const CONSUMER: &str = "bench.broker-reserve";

/// `--broker`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Which {
    /// NATS JetStream.
    Nats,
    /// Redis Streams.
    Redis,
    /// RabbitMQ.
    Rabbitmq,
    /// Kafka (tansu).
    Kafka,
    /// Every broker.
    All,
}

/// `--part`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Part {
    /// Both parts.
    All,
    /// Relay → broker.
    Publish,
    /// Consumer runner through the inbox.
    Consume,
}

/// Options of `brokers`.
#[derive(Debug, Clone, clap::Args)]
pub struct BrokersArgs {
    /// A PostgreSQL server; the benchmark creates and drops its own database on it.
    #[arg(long, default_value = "postgres://postgres@127.0.0.1:5432/postgres")]
    pub database_url: String,
    /// Which broker(s).
    #[arg(long, value_enum, default_value_t = Which::All)]
    pub broker: Which,
    /// Which part(s).
    #[arg(long, value_enum, default_value_t = Part::All)]
    pub part: Part,
    /// relay → broker: pending outbox rows.
    #[arg(long, default_value_t = 20_000)]
    pub rows: usize,
    /// relay → broker: aggregates the rows (and the consumer's messages) are spread over.
    #[arg(long, default_value_t = 200)]
    pub aggregates: usize,
    /// relay → broker: rows per batch (relay, raw loops, raw publish).
    #[arg(long, default_value_t = 500)]
    pub batch_size: usize,
    /// consumer: messages pre-published and consumed.
    #[arg(long, default_value_t = 5_000)]
    pub messages: usize,
    /// Rounds; medians are reported.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// NATS server (JetStream enabled).
    #[arg(long, default_value = "nats://127.0.0.1:4222")]
    pub nats_url: String,
    /// Redis server.
    #[arg(long, default_value = "redis://127.0.0.1:6379")]
    pub redis_url: String,
    /// RabbitMQ server.
    #[arg(long, default_value = "amqp://guest:guest@127.0.0.1:5672/%2f")]
    pub amqp_url: String,
    /// The `tansu` binary: the benchmark starts a broker of its own (memory storage) on a
    /// free loopback port and stops it at the end.
    #[arg(long, default_value = "tansu")]
    pub tansu: String,
    /// Kafka: partitions per topic.
    #[arg(long, default_value_t = 3)]
    pub kafka_partitions: u32,
    /// relay → broker: which modes to run (to profile one at a time); a ratio needs both of
    /// its modes.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = MODES)]
    pub modes: Vec<Mode>,
    /// relay → broker: whether the relays pipeline their batches (`RelayBuilder::pipeline`).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub pipeline: bool,
}

/// The business update of the consumer benchmark: messages applied since the last reset.
static APPLIED: AtomicU64 = AtomicU64::new(0);
/// The count at which the handler signals [`DONE`] (no polling loop competes with the
/// runner for the two cores).
static TARGET: AtomicU64 = AtomicU64::new(u64::MAX);
/// Signalled when [`APPLIED`] reaches [`TARGET`].
static DONE: tokio::sync::Notify = tokio::sync::Notify::const_new();
/// When the first message since the last reset was applied.
static FIRST: std::sync::Mutex<Option<Instant>> = std::sync::Mutex::new(None);

/// The consumer's handler: one business `UPDATE` (reserve the first book).
#[inbox_handler(consumer = "bench.broker-reserve")]
async fn broker_reserve(uow: &UnitOfWork, event: OrderPlacedV1) -> Result<(), DbErr> {
    let (book, quantity) = event
        .books
        .first()
        .map_or(("book-0", 1), |b| (b.book_id.as_str(), b.quantity));
    uow.execute_raw(Statement::from_sql_and_values(
        DbBackend::Postgres,
        "UPDATE bench_stock SET reserved = reserved + $1 WHERE book_id = $2",
        [i64::from(quantity).into(), book.into()],
    ))
    .await?;
    let before = APPLIED.fetch_add(1, Ordering::SeqCst);
    if before == 0
        && let Ok(mut first) = FIRST.lock()
    {
        *first = Some(Instant::now());
    }
    if before + 1 == TARGET.load(Ordering::SeqCst) {
        DONE.notify_one();
    }
    Ok(())
}

/// One broker under test. Every measurement gets a fresh destination named after an id.
trait Broker {
    /// The framework's publisher.
    type Framework: Publisher + 'static;
    /// The raw client's publisher (same messages, same acknowledgement mode, no checks).
    type Raw: Publisher + 'static;

    /// Printed name.
    fn name(&self) -> String;
    /// Name in the summary.
    fn short_name(&self) -> &'static str;
    /// The broker server's process name on this machine (`/proc/<pid>/comm`), for the CPU
    /// split.
    fn server_process(&self) -> &'static str;
    /// Creates destination `id` (stream, key, topic or queue), so that published messages
    /// are kept for the consumers.
    async fn create(&self, id: &str) -> Result<(), BoxError>;
    /// Deletes destination `id` and everything in it.
    async fn delete(&self, id: &str) -> Result<(), BoxError>;
    /// The framework's publisher to `id`.
    async fn framework(&self, id: &str) -> Result<Self::Framework, BoxError>;
    /// The raw publisher to `id`.
    async fn raw(&self, id: &str) -> Result<Self::Raw, BoxError>;
    /// Spawns the framework's consumer runner feeding `inbox` from `id`.
    fn spawn_runner(
        &self,
        id: &str,
        inbox: Consumer,
        shutdown: CancellationToken,
    ) -> Result<JoinHandle<String>, BoxError>;
    /// Reads and acknowledges `count` messages of `id` with the raw client, one
    /// acknowledgement per message, through the consumer / group `group` of its own; with
    /// `apply`, runs its transaction for each message before acknowledging it.
    async fn raw_consume(
        &self,
        id: &str,
        group: &str,
        count: usize,
        apply: Option<&RawInbox>,
    ) -> Result<(), BoxError>;
}

/// Accepts everything at once.
struct Noop;

impl Publisher for Noop {
    async fn publish(&self, batch: &[Envelope]) -> BatchOutcome {
        Ok(vec![Ok(()); batch.len()])
    }
}

/// The consumer transaction of the raw baseline, through sqlx: `BEGIN`, the inbox row
/// (`ON CONFLICT DO NOTHING`), the same business `UPDATE` as the framework's handler on the
/// payload decoded with serde, `COMMIT`.
struct RawInbox {
    pool: PgPool,
}

/// The consumer name of the raw baseline's inbox rows.
const RAW_CONSUMER: &str = "bench.raw-reserve";

impl RawInbox {
    async fn apply(&self, message_id: &str, event_type: &str, body: &[u8]) -> Result<(), BoxError> {
        let placed: OrderPlacedV1 = serde_json::from_slice(body)?;
        let message_id = Uuid::parse_str(message_id)?;
        let mut txn = self.pool.begin().await?;
        let inserted = sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO {INBOX} (message_id, consumer, event_type, received_at, processed_at) \
             VALUES ($1, $2, $3, now(), now()) ON CONFLICT DO NOTHING"
        )))
        .bind(message_id)
        .bind(RAW_CONSUMER)
        .bind(event_type)
        .execute(&mut *txn)
        .await?
        .rows_affected();
        if inserted == 1 {
            let (book, quantity) = placed
                .books
                .first()
                .map_or(("book-0", 1), |b| (b.book_id.as_str(), b.quantity));
            sqlx::query("UPDATE bench_stock SET reserved = reserved + $1 WHERE book_id = $2")
                .bind(i64::from(quantity))
                .bind(book)
                .execute(&mut *txn)
                .await?;
        }
        txn.commit().await?;
        Ok(())
    }
}

fn unavailable(error: impl std::fmt::Display) -> PublishError {
    PublishError::unavailable(error.to_string())
}

fn fresh_id() -> String {
    Uuid::now_v7().simple().to_string()
}

// ---------------------------------------------------------------------------------------
// NATS JetStream

struct Nats {
    url: String,
    client: async_nats::Client,
}

impl Nats {
    async fn connect(url: &str) -> Result<Self, BoxError> {
        let client = nats::connect(url).await?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while client.connection_state() != async_nats::connection::State::Connected {
            if Instant::now() > deadline {
                return Err(format!("cannot connect to NATS at {url}").into());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(Self {
            url: url.to_owned(),
            client,
        })
    }

    fn stream(id: &str) -> NatsStream {
        NatsStream::new(format!("B{id}"), [format!("b{id}.>")])
    }

    fn prefix(id: &str) -> String {
        format!("b{id}.")
    }
}

/// JetStream through the raw client: every message of the batch sent (`Nats-Msg-Id` and
/// the CloudEvents headers), then every acknowledgement awaited at once.
struct RawNats {
    context: async_nats::jetstream::Context,
    prefix: String,
}

impl Publisher for RawNats {
    async fn publish(&self, batch: &[Envelope]) -> BatchOutcome {
        use async_nats::jetstream::message::PublishMessage;
        let mut acks = Vec::with_capacity(batch.len());
        for envelope in batch {
            let message = cloudevents::to_binary(envelope).map_err(unavailable)?;
            let mut headers = async_nats::HeaderMap::new();
            for (name, value) in &message.headers {
                headers.insert(name.as_ref(), value.as_str());
            }
            headers.insert("Nats-Msg-Id", envelope.message_id.to_string());
            let publish = PublishMessage::build()
                .payload(message.body.into())
                .headers(headers);
            let subject = format!("{}{}", self.prefix, envelope.event_type);
            acks.push(
                self.context
                    .send_publish(subject, publish)
                    .await
                    .map_err(unavailable)?,
            );
        }
        for ack in join_all(acks.into_iter().map(std::future::IntoFuture::into_future)).await {
            ack.map_err(unavailable)?;
        }
        Ok(vec![Ok(()); batch.len()])
    }
}

impl Broker for Nats {
    type Framework = NatsPublisher;
    type Raw = RawNats;

    fn short_name(&self) -> &'static str {
        "nats"
    }

    fn server_process(&self) -> &'static str {
        "nats-server"
    }

    fn name(&self) -> String {
        format!("NATS JetStream ({}, file storage)", self.url)
    }

    async fn create(&self, id: &str) -> Result<(), BoxError> {
        Self::stream(id).ensure(&self.client).await?;
        Ok(())
    }

    async fn delete(&self, id: &str) -> Result<(), BoxError> {
        Self::stream(id).delete(&self.client).await?;
        Ok(())
    }

    async fn framework(&self, id: &str) -> Result<NatsPublisher, BoxError> {
        Ok(NatsPublisher::builder(self.client.clone())
            .route(Route::event_type(Self::prefix(id)))
            .build())
    }

    async fn raw(&self, id: &str) -> Result<RawNats, BoxError> {
        Ok(RawNats {
            context: async_nats::jetstream::new(self.client.clone()),
            prefix: Self::prefix(id),
        })
    }

    fn spawn_runner(
        &self,
        id: &str,
        inbox: Consumer,
        shutdown: CancellationToken,
    ) -> Result<JoinHandle<String>, BoxError> {
        let runner =
            NatsConsumerRunner::builder(self.client.clone(), inbox, Self::stream(id).name())
                .build()?;
        Ok(tokio::spawn(async move {
            format!("{:?}", runner.run(shutdown).await)
        }))
    }

    async fn raw_consume(
        &self,
        id: &str,
        group: &str,
        count: usize,
        apply: Option<&RawInbox>,
    ) -> Result<(), BoxError> {
        use async_nats::jetstream::consumer::{AckPolicy, pull};
        let context = async_nats::jetstream::new(self.client.clone());
        let stream = context.get_stream(Self::stream(id).name()).await?;
        let consumer = stream
            .create_consumer(pull::Config {
                durable_name: Some(group.into()),
                ack_policy: AckPolicy::Explicit,
                ..Default::default()
            })
            .await?;
        let mut received = 0;
        while received < count {
            let mut messages = consumer
                .batch()
                .max_messages(nats::DEFAULT_BATCH_SIZE)
                .expires(Duration::from_secs(2))
                .messages()
                .await?;
            while let Some(message) = messages.next().await {
                let message = message?;
                if let Some(apply) = apply {
                    let header = |name: &str| {
                        message
                            .headers
                            .as_ref()
                            .and_then(|h| h.get(name))
                            .map_or("", async_nats::HeaderValue::as_str)
                    };
                    apply
                        .apply(header("ce-id"), header("ce-type"), &message.payload)
                        .await?;
                }
                message.ack().await?;
                received += 1;
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// Redis Streams

struct Redis {
    url: String,
    client: redis::Client,
    connection: redis::aio::ConnectionManager,
}

impl Redis {
    async fn connect(url: &str) -> Result<Self, BoxError> {
        let client = redis_broker::open(url)?;
        let mut connection = redis_broker::connection(&client)?;
        let _: String = redis::cmd("PING").query_async(&mut connection).await?;
        Ok(Self {
            url: url.to_owned(),
            client,
            connection,
        })
    }

    fn prefix(id: &str) -> String {
        format!("bench:{id}:")
    }

    /// The stream key of every message of the benchmark (one bounded context).
    fn key(id: &str) -> String {
        format!("{}{}", Self::prefix(id), "bookstore.ordering")
    }
}

/// Redis through the raw client: one pipeline of `XADD`s per batch, same fields.
struct RawRedis {
    connection: redis::aio::ConnectionManager,
    key: String,
}

impl Publisher for RawRedis {
    async fn publish(&self, batch: &[Envelope]) -> BatchOutcome {
        let mut pipeline = redis::pipe();
        for envelope in batch {
            let message = cloudevents::to_binary(envelope).map_err(unavailable)?;
            let command = pipeline.cmd("XADD").arg(&self.key).arg("*");
            for (name, value) in &message.headers {
                command.arg(name).arg(value);
            }
            command
                .arg(redis_broker::FIELD_KEY)
                .arg(&envelope.aggregate_id)
                .arg(redis_broker::FIELD_BODY)
                .arg(message.body);
        }
        let mut connection = self.connection.clone();
        let ids: Vec<String> = pipeline
            .query_async(&mut connection)
            .await
            .map_err(unavailable)?;
        if ids.len() != batch.len() {
            return Err(unavailable("missing XADD replies"));
        }
        Ok(vec![Ok(()); batch.len()])
    }
}

impl Broker for Redis {
    type Framework = RedisPublisher;
    type Raw = RawRedis;

    fn short_name(&self) -> &'static str {
        "redis"
    }

    fn server_process(&self) -> &'static str {
        "redis-server"
    }

    fn name(&self) -> String {
        format!("Redis Streams ({})", self.url)
    }

    async fn create(&self, _id: &str) -> Result<(), BoxError> {
        // A stream exists from its first XADD; the groups read it from `0`.
        Ok(())
    }

    async fn delete(&self, id: &str) -> Result<(), BoxError> {
        let mut connection = self.connection.clone();
        let _: i64 = redis::cmd("DEL")
            .arg(Self::key(id))
            .query_async(&mut connection)
            .await?;
        Ok(())
    }

    async fn framework(&self, id: &str) -> Result<RedisPublisher, BoxError> {
        Ok(RedisPublisher::builder(self.connection.clone())
            .route(Route::context(Self::prefix(id)))
            .build())
    }

    async fn raw(&self, id: &str) -> Result<RawRedis, BoxError> {
        Ok(RawRedis {
            connection: self.connection.clone(),
            key: Self::key(id),
        })
    }

    fn spawn_runner(
        &self,
        id: &str,
        inbox: Consumer,
        shutdown: CancellationToken,
    ) -> Result<JoinHandle<String>, BoxError> {
        let runner = RedisConsumerRunner::builder(self.client.clone(), inbox, Self::key(id))
            .consumer_name("bench-1")
            .build()?;
        Ok(tokio::spawn(async move {
            format!("{:?}", runner.run(shutdown).await)
        }))
    }

    async fn raw_consume(
        &self,
        id: &str,
        group: &str,
        count: usize,
        apply: Option<&RawInbox>,
    ) -> Result<(), BoxError> {
        use redis::streams::StreamReadReply;
        let key = Self::key(id);
        let mut connection = self.client.get_multiplexed_async_connection().await?;
        let _: redis::Value = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg(&key)
            .arg(group)
            .arg("0")
            .query_async(&mut connection)
            .await?;
        let mut received = 0;
        while received < count {
            let reply: StreamReadReply = redis::cmd("XREADGROUP")
                .arg("GROUP")
                .arg(group)
                .arg("c-1")
                .arg("COUNT")
                .arg(redis_broker::DEFAULT_BATCH_SIZE)
                .arg("BLOCK")
                .arg(2_000)
                .arg("STREAMS")
                .arg(&key)
                .arg(">")
                .query_async(&mut connection)
                .await?;
            for entry in reply.keys.iter().flat_map(|k| &k.ids) {
                if let Some(apply) = apply {
                    let field = |name: &str| entry.get::<String>(name).unwrap_or_default();
                    let body: Vec<u8> = entry.get(redis_broker::FIELD_BODY).unwrap_or_default();
                    apply
                        .apply(&field("ce-id"), &field("ce-type"), &body)
                        .await?;
                }
                let _: i64 = redis::cmd("XACK")
                    .arg(&key)
                    .arg(group)
                    .arg(&entry.id)
                    .query_async(&mut connection)
                    .await?;
                received += 1;
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// RabbitMQ

struct Rabbit {
    uri: String,
    /// Kept open for `channel` (topology set-up).
    _connection: lapin::Connection,
    channel: lapin::Channel,
}

impl Rabbit {
    async fn connect(uri: &str) -> Result<Self, BoxError> {
        let connection =
            lapin::Connection::connect(uri, lapin::ConnectionProperties::default()).await?;
        let channel = connection.create_channel().await?;
        Ok(Self {
            uri: uri.to_owned(),
            _connection: connection,
            channel,
        })
    }

    /// The exchange and the (one) queue bound to it with `#`.
    fn name(id: &str) -> String {
        format!("bench.{id}")
    }
}

/// The AMQP properties the framework's publisher sets (message id, persistent, headers,
/// timestamp, type, content type), from the shared CloudEvents mapping.
fn amqp_message(envelope: &Envelope) -> Result<(lapin::BasicProperties, Vec<u8>), PublishError> {
    use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
    let binary = cloudevents::to_binary(envelope).map_err(unavailable)?;
    let mut table = FieldTable::default();
    let mut content_type = None;
    for (name, value) in binary.headers {
        if name == cloudevents::header::CONTENT_TYPE {
            content_type = Some(value);
            continue;
        }
        table.insert(
            ShortString::from(name.as_ref()),
            AMQPValue::LongString(LongString::from(value)),
        );
    }
    let mut properties = lapin::BasicProperties::default()
        .with_message_id(envelope.message_id.to_string().as_str().into())
        .with_delivery_mode(2)
        .with_headers(table)
        .with_timestamp(u64::try_from(envelope.occurred_at.timestamp()).unwrap_or(0))
        .with_type(envelope.event_type.as_str().into());
    if let Some(content_type) = content_type {
        properties = properties.with_content_type(content_type.as_str().into());
    }
    Ok((properties, binary.body))
}

/// RabbitMQ through the raw client: one confirm-mode channel, every message of the batch
/// published (`mandatory`), then every confirmation awaited at once.
struct RawRabbit {
    _connection: lapin::Connection,
    channel: lapin::Channel,
    exchange: String,
}

impl Publisher for RawRabbit {
    async fn publish(&self, batch: &[Envelope]) -> BatchOutcome {
        use lapin::options::BasicPublishOptions;
        let options = BasicPublishOptions {
            mandatory: true,
            immediate: false,
        };
        let mut confirms = Vec::with_capacity(batch.len());
        for envelope in batch {
            let (properties, body) = amqp_message(envelope)?;
            confirms.push(
                self.channel
                    .basic_publish(
                        self.exchange.as_str().into(),
                        envelope.event_type.as_str().into(),
                        options,
                        &body,
                        properties,
                    )
                    .await
                    .map_err(unavailable)?,
            );
        }
        for confirmation in join_all(confirms).await {
            match confirmation.map_err(unavailable)? {
                lapin::Confirmation::Ack(None) => {}
                other => return Err(unavailable(format!("not confirmed: {other:?}"))),
            }
        }
        Ok(vec![Ok(()); batch.len()])
    }
}

impl Broker for Rabbit {
    type Framework = RabbitPublisher;
    type Raw = RawRabbit;

    fn short_name(&self) -> &'static str {
        "rabbitmq"
    }

    fn server_process(&self) -> &'static str {
        "beam.smp"
    }

    fn name(&self) -> String {
        format!(
            "RabbitMQ ({}, durable queue, persistent messages, confirms)",
            self.uri
        )
    }

    async fn create(&self, id: &str) -> Result<(), BoxError> {
        use lapin::options::{QueueBindOptions, QueueDeclareOptions};
        use lapin::types::FieldTable;
        let name = Self::name(id);
        rabbitmq::declare_exchange(&self.channel, &name).await?;
        self.channel
            .queue_declare(
                name.as_str().into(),
                QueueDeclareOptions {
                    durable: true,
                    ..QueueDeclareOptions::default()
                },
                FieldTable::default(),
            )
            .await?;
        self.channel
            .queue_bind(
                name.as_str().into(),
                name.as_str().into(),
                "#".into(),
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await?;
        Ok(())
    }

    async fn delete(&self, id: &str) -> Result<(), BoxError> {
        use lapin::options::{ExchangeDeleteOptions, QueueDeleteOptions};
        let name = Self::name(id);
        self.channel
            .queue_delete(name.as_str().into(), QueueDeleteOptions::default())
            .await?;
        self.channel
            .exchange_delete(name.as_str().into(), ExchangeDeleteOptions::default())
            .await?;
        Ok(())
    }

    async fn framework(&self, id: &str) -> Result<RabbitPublisher, BoxError> {
        let publisher = RabbitPublisher::builder(self.uri.clone(), Self::name(id)).build()?;
        // Connected before the clock starts, like the raw client.
        publisher.connect().await?;
        Ok(publisher)
    }

    async fn raw(&self, id: &str) -> Result<RawRabbit, BoxError> {
        let connection =
            lapin::Connection::connect(&self.uri, lapin::ConnectionProperties::default()).await?;
        let channel = connection.create_channel().await?;
        channel
            .confirm_select(lapin::options::ConfirmSelectOptions::default())
            .await?;
        Ok(RawRabbit {
            _connection: connection,
            channel,
            exchange: Self::name(id),
        })
    }

    fn spawn_runner(
        &self,
        id: &str,
        inbox: Consumer,
        shutdown: CancellationToken,
    ) -> Result<JoinHandle<String>, BoxError> {
        let name = Self::name(id);
        let runner = RabbitConsumerRunner::builder(self.uri.clone(), name.clone(), name, inbox)
            .bind("#")
            .build()?;
        Ok(tokio::spawn(async move {
            format!("{:?}", runner.run(shutdown).await)
        }))
    }

    async fn raw_consume(
        &self,
        id: &str,
        group: &str,
        count: usize,
        apply: Option<&RawInbox>,
    ) -> Result<(), BoxError> {
        use lapin::options::{BasicAckOptions, BasicConsumeOptions, BasicQosOptions};
        use lapin::types::{AMQPValue, FieldTable};
        let connection =
            lapin::Connection::connect(&self.uri, lapin::ConnectionProperties::default()).await?;
        let channel = connection.create_channel().await?;
        channel
            .basic_qos(rabbitmq::DEFAULT_PREFETCH, BasicQosOptions::default())
            .await?;
        let mut deliveries = channel
            .basic_consume(
                Self::name(id).as_str().into(),
                group.into(),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await?;
        let mut received = 0;
        while received < count {
            let Some(delivery) = deliveries.next().await else {
                return Err("the subscription ended".into());
            };
            let delivery = delivery?;
            if let Some(apply) = apply {
                let header = |name: &str| {
                    delivery
                        .properties
                        .headers()
                        .as_ref()
                        .and_then(|table| table.inner().get(name))
                        .and_then(|value| match value {
                            AMQPValue::LongString(s) => {
                                Some(String::from_utf8_lossy(s.as_bytes()).into_owned())
                            }
                            _ => None,
                        })
                        .unwrap_or_default()
                };
                apply
                    .apply(&header("ce-id"), &header("ce-type"), &delivery.data)
                    .await?;
            }
            delivery.ack(BasicAckOptions::default()).await?;
            received += 1;
        }
        let _ = channel.close(200, "done".into()).await;
        let _ = connection.close(200, "done".into()).await;
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// Kafka (tansu)

/// A tansu broker started by the benchmark (memory storage), killed when dropped.
struct TansuProcess {
    child: std::process::Child,
}

impl Drop for TansuProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Kafka {
    bootstrap: String,
    /// `tansu` (for `topic create` / `topic delete`).
    binary: String,
    partitions: u32,
    _process: Option<TansuProcess>,
}

impl Kafka {
    /// Starts `tansu broker` on a free loopback port, as `tests/src/tansu.rs` does.
    async fn start(binary: &str, partitions: u32) -> Result<Self, BoxError> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let addr = format!("127.0.0.1:{port}");
        let child = std::process::Command::new(binary)
            .args(["broker", "--listener-url", &format!("tcp://{addr}")])
            .args(["--advertised-listener-url", &format!("tcp://{addr}")])
            .args(["--storage-engine", "memory://tansu/"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .map_err(|error| format!("cannot start {binary}: {error}"))?;
        let process = TansuProcess { child };
        let deadline = Instant::now() + Duration::from_secs(20);
        while tokio::net::TcpStream::connect(&addr).await.is_err() {
            if Instant::now() > deadline {
                return Err(format!("tansu did not listen on {addr} within 20 s").into());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(Self {
            bootstrap: addr,
            binary: binary.to_owned(),
            partitions,
            _process: Some(process),
        })
    }

    fn prefix(id: &str) -> String {
        format!("b{id}.")
    }

    /// The topic of every message of the benchmark (one bounded context).
    fn topic(id: &str) -> String {
        format!("{}bookstore.ordering", Self::prefix(id))
    }

    async fn tansu(&self, args: Vec<String>) -> Result<(), BoxError> {
        let binary = self.binary.clone();
        let output = tokio::task::spawn_blocking(move || {
            std::process::Command::new(binary).args(args).output()
        })
        .await??;
        if !output.status.success() {
            return Err(format!(
                "tansu: {}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            )
            .into());
        }
        Ok(())
    }

    fn config(&self) -> kafka::rdkafka::ClientConfig {
        let mut config = kafka::rdkafka::ClientConfig::new();
        config.set("bootstrap.servers", &self.bootstrap);
        config
    }
}

/// Kafka through the raw client: the framework's producer settings (idempotent, `acks=all`,
/// `murmur2_random`, key = aggregate id), every message of the batch enqueued, then every
/// delivery report awaited at once.
struct RawKafka {
    producer: kafka::rdkafka::producer::FutureProducer,
    topic: String,
}

impl Publisher for RawKafka {
    async fn publish(&self, batch: &[Envelope]) -> BatchOutcome {
        use kafka::rdkafka::message::{Header, OwnedHeaders};
        use kafka::rdkafka::producer::FutureRecord;
        let mut deliveries = Vec::with_capacity(batch.len());
        for envelope in batch {
            let binary = cloudevents::to_binary(envelope).map_err(unavailable)?;
            let mut headers = OwnedHeaders::new_with_capacity(binary.headers.len());
            for (key, value) in &binary.headers {
                headers = headers.insert(Header {
                    key,
                    value: Some(value.as_str()),
                });
            }
            let record = FutureRecord::to(&self.topic)
                .key(envelope.aggregate_id.as_str())
                .payload(binary.body.as_slice())
                .headers(headers);
            deliveries.push(
                self.producer
                    .send_result(record)
                    .map_err(|(error, _)| unavailable(error))?,
            );
        }
        for delivery in join_all(deliveries).await {
            delivery
                .map_err(unavailable)?
                .map_err(|(error, _)| unavailable(error))?;
        }
        Ok(vec![Ok(()); batch.len()])
    }
}

impl Broker for Kafka {
    type Framework = KafkaPublisher;
    type Raw = RawKafka;

    fn short_name(&self) -> &'static str {
        "kafka"
    }

    fn server_process(&self) -> &'static str {
        "tansu"
    }

    fn name(&self) -> String {
        format!(
            "Kafka wire protocol: tansu, memory storage ({}, {} partitions), idempotent producer",
            self.bootstrap, self.partitions
        )
    }

    async fn create(&self, id: &str) -> Result<(), BoxError> {
        let broker = format!("tcp://{}", self.bootstrap);
        self.tansu(
            ["topic", "create", &Self::topic(id), "--broker", &broker]
                .into_iter()
                .map(str::to_owned)
                .chain(["--partitions".to_owned(), self.partitions.to_string()])
                .collect(),
        )
        .await
    }

    async fn delete(&self, id: &str) -> Result<(), BoxError> {
        let broker = format!("tcp://{}", self.bootstrap);
        self.tansu(
            ["topic", "delete", &Self::topic(id), "--broker", &broker]
                .into_iter()
                .map(str::to_owned)
                .collect(),
        )
        .await
    }

    async fn framework(&self, id: &str) -> Result<KafkaPublisher, BoxError> {
        Ok(KafkaPublisher::builder(self.bootstrap.clone())
            .route(Route::context(Self::prefix(id)))
            .build()?)
    }

    async fn raw(&self, id: &str) -> Result<RawKafka, BoxError> {
        let mut config = self.config();
        config
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .set("partitioner", "murmur2_random")
            .set(
                "message.timeout.ms",
                kafka::DEFAULT_DELIVERY_TIMEOUT.as_millis().to_string(),
            );
        Ok(RawKafka {
            producer: config.create()?,
            topic: Self::topic(id),
        })
    }

    fn spawn_runner(
        &self,
        id: &str,
        inbox: Consumer,
        shutdown: CancellationToken,
    ) -> Result<JoinHandle<String>, BoxError> {
        let runner = KafkaConsumerRunner::builder(self.bootstrap.clone(), [Self::topic(id)], inbox)
            .group_id(format!("runner-{id}"))
            .build()?;
        Ok(tokio::spawn(async move {
            format!("{:?}", runner.run(shutdown).await)
        }))
    }

    async fn raw_consume(
        &self,
        id: &str,
        group: &str,
        count: usize,
        apply: Option<&RawInbox>,
    ) -> Result<(), BoxError> {
        use kafka::rdkafka::Message as _;
        use kafka::rdkafka::consumer::{Consumer as _, StreamConsumer};
        use kafka::rdkafka::message::Headers as _;
        let mut config = self.config();
        config
            .set("group.id", format!("{group}-{id}"))
            .set("enable.auto.commit", "true")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "earliest")
            .set("enable.partition.eof", "false");
        let consumer: StreamConsumer = config.create()?;
        let topic = Self::topic(id);
        consumer.subscribe(&[topic.as_str()])?;
        let mut received = 0;
        while received < count {
            let message = consumer.recv().await?;
            if let Some(apply) = apply {
                let header = |name: &str| {
                    message
                        .headers()
                        .and_then(|headers| {
                            headers
                                .iter()
                                .find(|h| h.key == name)
                                .and_then(|h| h.value)
                                .map(|v| String::from_utf8_lossy(v).into_owned())
                        })
                        .unwrap_or_default()
                };
                apply
                    .apply(
                        &header("ce-id"),
                        &header("ce-type"),
                        message.payload().unwrap_or_default(),
                    )
                    .await?;
            }
            consumer.store_offset(message.topic(), message.partition(), message.offset())?;
            received += 1;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// Measurements

/// The database side shared by every broker.
struct Bench {
    args: BrokersArgs,
    db: DatabaseConnection,
    pool: PgPool,
    outbox: Outbox,
    /// The outbox rows as envelopes, in `seq` order (what the raw publisher sends).
    rows: Vec<Envelope>,
    /// The consumer benchmark's messages.
    messages: Vec<Envelope>,
    /// When the runner of the last consumer measurement applied its first message.
    first_applied: std::sync::Mutex<Option<Duration>>,
}

/// Figures of one broker (medians).
struct Figures {
    broker: String,
    publish: Option<PublishRates>,
    consume: Option<[f64; 3]>,
}

async fn reset(pool: &PgPool) -> Result<(), BoxError> {
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE {OUTBOX} SET status = 'pending', published_at = NULL, attempts = 0"
    )))
    .execute(pool)
    .await?;
    sqlx::query(sqlx::AssertSqlSafe(format!("VACUUM ANALYZE {OUTBOX}")))
        .execute(pool)
        .await?;
    Ok(())
}

/// The envelope of an outbox row (the columns the relay reads).
fn envelope_of(row: &sqlx::postgres::PgRow) -> Result<Envelope, BoxError> {
    use sea_orm::sqlx::types::Json;
    let headers: Json<std::collections::BTreeMap<String, String>> = row.try_get("headers")?;
    let payload: Json<outbox_core::Payload> = row.try_get("payload")?;
    Ok(Envelope::from_parts(EnvelopeParts {
        message_id: row.try_get("message_id")?,
        event_type: row.try_get("event_type")?,
        occurred_at: row.try_get("occurred_at")?,
        correlation_id: row.try_get("correlation_id")?,
        causation_id: row.try_get("causation_id")?,
        traceparent: row.try_get("traceparent")?,
        tracestate: row.try_get("tracestate")?,
        aggregate_type: row.try_get("aggregate_type")?,
        aggregate_id: row.try_get("aggregate_id")?,
        headers: headers.0,
        payload: payload.0,
    })?)
}

const SELECT_COLUMNS: &str = "seq, message_id, event_type, version, aggregate_type, \
     aggregate_id, partition, correlation_id, causation_id, traceparent, tracestate, headers, \
     occurred_at, payload, attempts";

/// The raw loop of the `relay` benchmark (claim, read every column, the payload as validated
/// JSON text, mark, commit), with `publish` in the middle when given: the rows become envelopes and
/// are published before the mark. With `None`, the raw drain baseline, identical to
/// `relay::raw::drain`.
async fn raw_loop<P: Publisher>(
    pool: &PgPool,
    batch: usize,
    publish: Option<&P>,
) -> Result<usize, BoxError> {
    let claim = format!(
        "SELECT {SELECT_COLUMNS} FROM {OUTBOX} \
         WHERE status = 'pending' AND next_attempt_at <= now() \
         ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED"
    );
    let mark = format!(
        "UPDATE {OUTBOX} SET status = 'published', published_at = now() WHERE seq = ANY($1)"
    );
    let mut total = 0;
    loop {
        let mut txn = pool.begin().await?;
        let rows = sqlx::query(sqlx::AssertSqlSafe(claim.as_str()))
            .bind(i64::try_from(batch)?)
            .fetch_all(&mut *txn)
            .await?;
        if rows.is_empty() {
            txn.commit().await?;
            return Ok(total);
        }
        let mut seqs = Vec::with_capacity(rows.len());
        match publish {
            None => {
                for row in &rows {
                    seqs.push(row.try_get::<i64, _>("seq")?);
                    let _id: Uuid = row.try_get("message_id")?;
                    let _type: String = row.try_get("event_type")?;
                    let _aggregate: String = row.try_get("aggregate_id")?;
                    let _payload: sqlx::types::Json<Box<serde_json::value::RawValue>> =
                        row.try_get("payload")?;
                    let _headers: serde_json::Value = row.try_get("headers")?;
                }
            }
            Some(publisher) => {
                let mut envelopes = Vec::with_capacity(rows.len());
                for row in &rows {
                    seqs.push(row.try_get::<i64, _>("seq")?);
                    envelopes.push(envelope_of(row)?);
                }
                check(publisher.publish(&envelopes).await, envelopes.len())?;
            }
        }
        sqlx::query(sqlx::AssertSqlSafe(mark.as_str()))
            .bind(&seqs)
            .execute(&mut *txn)
            .await?;
        txn.commit().await?;
        total += seqs.len();
    }
}

/// Publishes one fresh message (same route as the measured ones) with `publisher` before
/// the clock starts, for the framework's publishers and the raw clients alike, so that every
/// mode is measured with a client that is ready: a Kafka idempotent producer, for one, takes
/// 0.5 to 1 s after it is created before its first delivery (connection to the partition
/// leader, then `InitProducerId` on librdkafka's 500 ms timer), as long as publishing the
/// 20 000 rows takes.
async fn warm_up<P: Publisher>(publisher: &P) -> Result<(), BoxError> {
    let message = messages(1, 1)?;
    check(publisher.publish(&message).await, message.len())
}

/// Fails unless every message of a batch of `len` was published.
fn check(outcome: BatchOutcome, len: usize) -> Result<(), BoxError> {
    let outcomes = outcome?;
    if outcomes.len() != len {
        return Err(format!("{} outcomes for {len} messages", outcomes.len()).into());
    }
    if let Some(error) = outcomes.into_iter().find_map(Result::err) {
        return Err(error.into());
    }
    Ok(())
}

/// The modes of the relay → broker part, in the order of the printed columns (`--modes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// (f) `Relay::drain` with the framework's publisher.
    Framework,
    /// (d) the raw claim + mark loop, no-op publish.
    RawDrain,
    /// (p) the raw client publishing the rows' envelopes, no database.
    RawPublish,
    /// (r) the raw loop with (p)'s publish in the middle.
    RawRelay,
    /// (q) the framework's publisher alone, no database (diagnostic).
    PublisherOnly,
    /// (f2) two relay instances draining at once, each with its half of the partitions
    /// (diagnostic: one instance's batch publishes while the other's claims and marks).
    TwoRelays,
}

const MODES: [Mode; 6] = [
    Mode::Framework,
    Mode::RawDrain,
    Mode::RawPublish,
    Mode::RawRelay,
    Mode::PublisherOnly,
    Mode::TwoRelays,
];

/// Rates of the relay → broker modes, in [`MODES`] order.
type PublishRates = [f64; MODES.len()];

/// The modes of the consumer part, in the order of the printed columns.
const CONSUME_MODES: usize = 3;

impl Bench {
    /// A relay for the benchmark: no `LISTEN`, no retention cleanup.
    fn relay<P: Publisher + 'static>(
        &self,
        publisher: P,
        instance: &str,
    ) -> Result<Relay<P>, BoxError> {
        Ok(
            Relay::builder(self.db.clone(), self.outbox.clone(), publisher)
                .instance_id(instance)
                .batch_size(self.args.batch_size)
                .listen(false)
                .retention(None)
                .pipeline(self.args.pipeline)
                .build()?,
        )
    }

    /// Stops a relay gracefully (gives up its leases, removes its instance row), so that
    /// the next measurement's relay owns every partition.
    async fn stop<P: Publisher + 'static>(relay: Relay<P>) -> Result<(), BoxError> {
        let cancelled = CancellationToken::new();
        cancelled.cancel();
        relay.run(cancelled).await?;
        Ok(())
    }

    async fn measure_publish<B: Broker>(
        &self,
        broker: &B,
        mode: Mode,
    ) -> Result<(Duration, CpuSplit), BoxError> {
        let (rows, batch) = (self.args.rows, self.args.batch_size);
        if matches!(
            mode,
            Mode::Framework | Mode::RawDrain | Mode::RawRelay | Mode::TwoRelays
        ) {
            reset(&self.pool).await?;
        }
        let id = fresh_id();
        broker.create(&id).await?;
        // Taken again once the clients are warm (see `warm_up`): a Kafka producer's second
        // of start-up would otherwise count idle server time of every process.
        let mut before = CpuSplit::now(broker.server_process());
        let (published, took) = match mode {
            Mode::Framework => {
                let publisher = broker.framework(&id).await?;
                warm_up(&publisher).await?;
                before = CpuSplit::now(broker.server_process());
                let mut relay = self.relay(publisher, "bench-brokers")?;
                relay.refresh_leases().await?;
                let started = Instant::now();
                let report = relay.drain().await?;
                let took = started.elapsed();
                Self::stop(relay).await?;
                (report.published, took)
            }
            Mode::TwoRelays => {
                let (pa, pb) = (broker.framework(&id).await?, broker.framework(&id).await?);
                warm_up(&pa).await?;
                warm_up(&pb).await?;
                before = CpuSplit::now(broker.server_process());
                let mut a = self.relay(pa, "bench-brokers-a")?;
                let mut b = self.relay(pb, "bench-brokers-b")?;
                // Both live, then each keeps only the partitions the hash gives it.
                for relay in [&mut a, &mut b] {
                    relay.refresh_leases().await?;
                }
                a.refresh_leases().await?;
                b.refresh_leases().await?;
                let started = Instant::now();
                let (ra, rb) = tokio::join!(a.drain(), b.drain());
                let took = started.elapsed();
                let published = ra?.published + rb?.published;
                Self::stop(a).await?;
                Self::stop(b).await?;
                (published, took)
            }
            Mode::RawDrain => {
                let started = Instant::now();
                let published = raw_loop::<Noop>(&self.pool, batch, None).await?;
                (published, started.elapsed())
            }
            Mode::RawPublish => {
                let raw = broker.raw(&id).await?;
                warm_up(&raw).await?;
                before = CpuSplit::now(broker.server_process());
                let started = Instant::now();
                for chunk in self.rows.chunks(batch) {
                    check(raw.publish(chunk).await, chunk.len())?;
                }
                (self.rows.len(), started.elapsed())
            }
            Mode::RawRelay => {
                let raw = broker.raw(&id).await?;
                warm_up(&raw).await?;
                before = CpuSplit::now(broker.server_process());
                let started = Instant::now();
                let published = raw_loop(&self.pool, batch, Some(&raw)).await?;
                (published, started.elapsed())
            }
            Mode::PublisherOnly => {
                let publisher = broker.framework(&id).await?;
                warm_up(&publisher).await?;
                before = CpuSplit::now(broker.server_process());
                let started = Instant::now();
                for chunk in self.rows.chunks(batch) {
                    check(publisher.publish(chunk).await, chunk.len())?;
                }
                (self.rows.len(), started.elapsed())
            }
        };
        // (Setting up and stopping the relays is counted too: small next to the rows.)
        let spent = CpuSplit::now(broker.server_process()).since(before);
        broker.delete(&id).await?;
        if published != rows {
            return Err(format!("{mode:?}: published {published} of {rows} rows").into());
        }
        Ok((took, spent))
    }

    async fn publish_part<B: Broker>(&self, broker: &B) -> Result<PublishRates, BoxError> {
        let rows = self.args.rows;
        println!(
            "relay -> broker: {rows} rows over {} aggregates, batch {}, rows/s",
            self.args.aggregates, self.args.batch_size
        );
        let line = |label: &str, r: &PublishRates| {
            println!(
                "{label:>6}  {:>9.0}  {:>9.0}  {:>9.0}  {:>9.0}  {:>9.0}  {:>9.0}  {:>8.3}  {:>6.3}  {:>6.3}  {:>7.3}",
                r[0],
                r[1],
                r[2],
                r[3],
                r[4],
                r[5],
                r[0] / r[1].min(r[2]),
                r[0] / r[3],
                r[4] / r[2],
                r[5] / r[1].min(r[2])
            );
        };
        println!(
            "{:>6}  {:>9}  {:>9}  {:>9}  {:>9}  {:>9}  {:>9}  {:>8}  {:>6}  {:>6}  {:>7}",
            "round",
            "(f)relay",
            "(d)drain",
            "(p)publ.",
            "(r)rawrel",
            "(q)publr",
            "(f2)2rel",
            "f/min",
            "f/r",
            "q/p",
            "f2/min"
        );
        let mut rates: [Vec<f64>; MODES.len()] = Default::default();
        let mut cpu = [CpuSplit::default(); MODES.len()];
        for round in 0..self.args.rounds.max(1) {
            let mut row = [0.0; MODES.len()];
            for k in 0..MODES.len() {
                let which = (k + round) % MODES.len();
                if !self.args.modes.contains(&MODES[which]) {
                    continue;
                }
                let (took, spent) = self.measure_publish(broker, MODES[which]).await?;
                row[which] = rows as f64 / took.as_secs_f64();
                cpu[which] = cpu[which].add(spent);
            }
            line(&round.to_string(), &row);
            for (all, rate) in rates.iter_mut().zip(row) {
                all.push(rate);
            }
        }
        let medians = rates.map(|mut r| median(&mut r).unwrap_or(0.0));
        line("median", &medians);
        let ratio = medians[0] / medians[1].min(medians[2]);
        println!(
            "relay / min(raw drain, raw publish) = {ratio:.3} (target >= 0.80) {}",
            if ratio >= 0.80 { "met" } else { "MISSED" }
        );
        let published = (rows * self.args.rounds.max(1)) as f64;
        println!(
            "CPU per row, µs: this process (relay or raw client) + PostgreSQL (every `postgres` \
             process) + broker server (`{}`):",
            broker.server_process()
        );
        let labels = ["(f)", "(d)", "(p)", "(r)", "(q)", "(f2)"];
        let split: Vec<String> = labels
            .iter()
            .zip(cpu)
            .map(|(label, cpu)| format!("{label} {}", cpu.per_row(published)))
            .collect();
        println!("  {}", split.join("   "));
        Ok(medians)
    }

    /// One consumer measurement; the time to consume every message of `id`.
    async fn measure_consume<B: Broker>(
        &self,
        broker: &B,
        id: &str,
        which: usize,
        inbox: &Consumer,
    ) -> Result<Duration, BoxError> {
        let count = self.messages.len();
        let started = Instant::now();
        match which {
            0 => {
                APPLIED.store(0, Ordering::SeqCst);
                if let Ok(mut first) = FIRST.lock() {
                    *first = None;
                }
                TARGET.store(count as u64, Ordering::SeqCst);
                let shutdown = CancellationToken::new();
                let mut runner = broker.spawn_runner(id, inbox.clone(), shutdown.clone())?;
                let finished = tokio::select! {
                    () = DONE.notified() => None,
                    ended = &mut runner => Some(ended?),
                    () = tokio::time::sleep(Duration::from_secs(300)) => Some("timed out".to_owned()),
                };
                let took = started.elapsed();
                TARGET.store(u64::MAX, Ordering::SeqCst);
                shutdown.cancel();
                if let Some(ended) = finished {
                    return Err(format!(
                        "the runner applied {} of {count} messages: {ended}",
                        APPLIED.load(Ordering::SeqCst)
                    )
                    .into());
                }
                runner.await?;
                let first = FIRST
                    .lock()
                    .map_err(|_| "poisoned")?
                    .map(|at| at.saturating_duration_since(started));
                *self.first_applied.lock().map_err(|_| "poisoned")? = first;
                Ok(took)
            }
            1 => {
                let raw = RawInbox {
                    pool: self.pool.clone(),
                };
                broker.raw_consume(id, "rawdb", count, Some(&raw)).await?;
                Ok(started.elapsed())
            }
            _ => {
                broker.raw_consume(id, "raw", count, None).await?;
                Ok(started.elapsed())
            }
        }
    }

    async fn consume_part<B: Broker>(&self, broker: &B) -> Result<[f64; 3], BoxError> {
        let count = self.messages.len();
        println!(
            "consumer: {count} messages; (c) runner -> inbox + 1 UPDATE on PostgreSQL per \
             message; (s) raw client + the same transaction in raw SQL; (a) raw client, read + \
             ack only; messages/s"
        );
        println!(
            "{:>6}  {:>10}  {:>10}  {:>10}  {:>6}  {:>14}",
            "round", "(c)runner", "(s)raw+sql", "(a)raw", "c/s", "(c)1st msg ms"
        );
        let inbox = Consumer::builder(self.db.clone(), self.outbox.clone(), CONSUMER).build()?;
        let mut rates: [Vec<f64>; CONSUME_MODES] = Default::default();
        for round in 0..self.args.rounds.max(1) {
            let mut row = [0.0; CONSUME_MODES];
            for k in 0..CONSUME_MODES {
                let which = (k + round) % CONSUME_MODES;
                // Each measurement: a fresh destination holding the messages, an empty inbox.
                let id = fresh_id();
                broker.create(&id).await?;
                let publisher = broker.framework(&id).await?;
                for chunk in self.messages.chunks(self.args.batch_size) {
                    check(publisher.publish(chunk).await, chunk.len())?;
                }
                drop(publisher);
                sqlx::query(sqlx::AssertSqlSafe(format!("TRUNCATE {INBOX}")))
                    .execute(&self.pool)
                    .await?;
                let took = self.measure_consume(broker, &id, which, &inbox).await?;
                row[which] = count as f64 / took.as_secs_f64();
                broker.delete(&id).await?;
                let consumer = match which {
                    0 => CONSUMER,
                    1 => RAW_CONSUMER,
                    _ => continue,
                };
                let applied: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                    "SELECT COUNT(*) FROM {INBOX} WHERE consumer = $1"
                )))
                .bind(consumer)
                .fetch_one(&self.pool)
                .await?;
                if applied != i64::try_from(count)? {
                    return Err(
                        format!("{consumer}: {applied} inbox rows for {count} messages").into(),
                    );
                }
            }
            let first = self
                .first_applied
                .lock()
                .map_err(|_| "poisoned")?
                .unwrap_or_default();
            println!(
                "{round:>6}  {:>10.0}  {:>10.0}  {:>10.0}  {:>6.3}  {:>14.0}",
                row[0],
                row[1],
                row[2],
                row[0] / row[1],
                first.as_secs_f64() * 1000.0
            );
            for (all, rate) in rates.iter_mut().zip(row) {
                all.push(rate);
            }
        }
        let medians = rates.map(|mut r| median(&mut r).unwrap_or(0.0));
        println!(
            "{:>6}  {:>10.0}  {:>10.0}  {:>10.0}  {:>6.3}",
            "median",
            medians[0],
            medians[1],
            medians[2],
            medians[0] / medians[1]
        );
        Ok(medians)
    }

    async fn broker<B: Broker>(&self, broker: &B) -> Result<Figures, BoxError> {
        let name = broker.name();
        println!("\n== {name} ==");
        let publish = if matches!(self.args.part, Part::All | Part::Publish) {
            Some(self.publish_part(broker).await?)
        } else {
            None
        };
        let consume = if matches!(self.args.part, Part::All | Part::Consume) {
            Some(self.consume_part(broker).await?)
        } else {
            None
        };
        Ok(Figures {
            broker: broker.short_name().to_owned(),
            publish,
            consume,
        })
    }
}

/// The consumer benchmark's messages: `OrderPlacedV1` with 2 books, over `aggregates` orders.
fn messages(count: usize, aggregates: usize) -> Result<Vec<Envelope>, BoxError> {
    let orders: Vec<Uuid> = (0..aggregates.max(1)).map(|_| Uuid::now_v7()).collect();
    (0..count)
        .map(|n| {
            let placed = OrderPlacedV1 {
                order_id: orders[n % orders.len()],
                checkout_id: Uuid::now_v7(),
                customer_id: Uuid::now_v7(),
                books: vec![
                    OrderedBookV1 {
                        book_id: format!("book-{}", n % BOOKS),
                        quantity: 1 + u32::try_from(n % 3)?,
                        unit_price: MoneyV1 {
                            amount: "12.50".into(),
                            currency: "EUR".into(),
                        },
                    },
                    OrderedBookV1 {
                        book_id: format!("book-{}", (n + 1) % BOOKS),
                        quantity: 1,
                        unit_price: MoneyV1 {
                            amount: "8.90".into(),
                            currency: "EUR".into(),
                        },
                    },
                ],
            };
            debug_assert_eq!(
                OrderPlacedV1::EVENT_TYPE,
                "bookstore.ordering.order-placed.v1"
            );
            Ok(Envelope::from_event(&placed)?)
        })
        .collect()
}

async fn connect(url: &str) -> Result<DatabaseConnection, BoxError> {
    let mut options = ConnectOptions::new(url.to_owned());
    options
        .max_connections(16)
        .min_connections(4)
        .sqlx_logging(false);
    Ok(Database::connect(options).await?)
}

/// Runs the benchmark in a database of its own.
///
/// Everything runs in a spawned task, on the runtime's worker threads like the consumer
/// runners (measured: the raw Kafka consumer ran ~1.4× faster inline on the `block_on`
/// thread than in a task, which skewed runner / raw).
pub async fn run(args: BrokersArgs) -> Result<(), BoxError> {
    tokio::spawn(run_in_task(args)).await?
}

async fn run_in_task(args: BrokersArgs) -> Result<(), BoxError> {
    let scratch = crate::scratch::ScratchDatabase::create(&args.database_url).await?;
    let url = scratch.url().to_owned();
    let result = async {
        let db = connect(&url).await?;
        let result = run_in(&db, args).await;
        db.close().await?;
        result
    }
    .await;
    scratch.drop().await?;
    result
}

async fn run_in(db: &DatabaseConnection, args: BrokersArgs) -> Result<(), BoxError> {
    let outbox = Outbox::builder()
        .outbox_table(OUTBOX)
        .inbox_table(INBOX)
        .build()?;
    outbox_seaorm::schema::install(db, &outbox).await?;
    let pool = db.get_postgres_connection_pool().clone();
    order_rows::insert(&pool, OUTBOX, args.rows, args.aggregates, Due::Now).await?;
    sqlx::query(
        "CREATE TABLE bench_stock (book_id TEXT PRIMARY KEY, reserved BIGINT NOT NULL DEFAULT 0)",
    )
    .execute(&pool)
    .await?;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO bench_stock (book_id) SELECT 'book-' || i FROM generate_series(0, {}) AS i",
        BOOKS - 1
    )))
    .execute(&pool)
    .await?;
    reset(&pool).await?;
    let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {SELECT_COLUMNS} FROM {OUTBOX} ORDER BY seq"
    )))
    .fetch_all(&pool)
    .await?
    .iter()
    .map(envelope_of)
    .collect::<Result<Vec<_>, _>>()?;
    let payload: f64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT AVG(octet_length(payload::text))::float8 FROM {OUTBOX}"
    )))
    .fetch_one(&pool)
    .await?;
    let messages = messages(args.messages, args.aggregates)?;
    println!(
        "brokers: {} outbox rows (payload ~{payload:.0} B as stored), {} consumer messages, \
         {} rounds, medians; PostgreSQL {}",
        rows.len(),
        messages.len(),
        args.rounds,
        args.database_url
    );
    let which = args.broker;
    let bench = Bench {
        args,
        db: db.clone(),
        pool,
        outbox,
        rows,
        messages,
        first_applied: std::sync::Mutex::default(),
    };
    let wanted = |broker: Which| which == Which::All || which == broker;
    let mut figures = Vec::new();
    if wanted(Which::Nats) {
        figures.push(
            bench
                .broker(&Nats::connect(&bench.args.nats_url).await?)
                .await?,
        );
    }
    if wanted(Which::Redis) {
        figures.push(
            bench
                .broker(&Redis::connect(&bench.args.redis_url).await?)
                .await?,
        );
    }
    if wanted(Which::Rabbitmq) {
        figures.push(
            bench
                .broker(&Rabbit::connect(&bench.args.amqp_url).await?)
                .await?,
        );
    }
    if wanted(Which::Kafka) {
        let kafka = Kafka::start(&bench.args.tansu, bench.args.kafka_partitions).await?;
        figures.push(bench.broker(&kafka).await?);
    }
    summary(&figures);
    Ok(())
}

fn summary(figures: &[Figures]) {
    println!("\n== summary (medians; rows/s, messages/s) ==");
    println!(
        "{:<9}  {:>8}  {:>8}  {:>8}  {:>9}  {:>8}  {:>8}  {:>11}  {:>6}  {:>7}  {:>9}  {:>10}  {:>8}",
        "broker",
        "(f)relay",
        "(d)drain",
        "(p)publ.",
        "(r)rawrel",
        "(q)publr",
        "(f2)2rel",
        "f/min(d,p)",
        "f/r",
        "f2/min",
        "(c)runner",
        "(s)raw+sql",
        "(a)raw"
    );
    for f in figures {
        let (p, c) = (f.publish.unwrap_or_default(), f.consume.unwrap_or_default());
        let ratio = p[0] / p[1].min(p[2]);
        println!(
            "{:<9}  {:>8.0}  {:>8.0}  {:>8.0}  {:>9.0}  {:>8.0}  {:>8.0}  {:>6.3} {:<4}  {:>6.3}  {:>7.3}  {:>9.0}  {:>10.0}  {:>8.0}",
            f.broker,
            p[0],
            p[1],
            p[2],
            p[3],
            p[4],
            p[5],
            ratio,
            if ratio >= 0.80 { "ok" } else { "MISS" },
            p[0] / p[3],
            p[5] / p[1].min(p[2]),
            c[0],
            c[1],
            c[2]
        );
    }
}

/// CPU time of this process, of every local PostgreSQL process and of the broker server's
/// processes, from `/proc/<pid>/task/*/schedstat`: where a relay's time goes when the
/// database, the broker and the relay share the machine's cores.
#[derive(Debug, Clone, Copy, Default)]
struct CpuSplit {
    client: Duration,
    database: Duration,
    broker: Duration,
}

impl CpuSplit {
    fn now(broker_process: &str) -> Self {
        Self {
            client: crate::measure::task_cpu("self").unwrap_or_default(),
            database: processes_cpu("postgres"),
            broker: processes_cpu(broker_process),
        }
    }

    fn since(self, before: Self) -> Self {
        Self {
            client: self.client.saturating_sub(before.client),
            database: self.database.saturating_sub(before.database),
            broker: self.broker.saturating_sub(before.broker),
        }
    }

    fn add(self, other: Self) -> Self {
        Self {
            client: self.client + other.client,
            database: self.database + other.database,
            broker: self.broker + other.broker,
        }
    }

    /// `client+database+broker` in microseconds per row.
    fn per_row(self, rows: f64) -> String {
        let us = |cpu: Duration| cpu.as_secs_f64() * 1e6 / rows.max(1.0);
        format!(
            "{:.1}+{:.1}+{:.1}",
            us(self.client),
            us(self.database),
            us(self.broker)
        )
    }
}

/// CPU time of every process named `name` (a process that ended meanwhile drops out, which
/// the short-lived ones here do not).
fn processes_cpu(name: &str) -> Duration {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Duration::ZERO;
    };
    entries
        .filter_map(Result::ok)
        .filter(|entry| {
            entry
                .file_name()
                .to_str()
                .is_some_and(|pid| pid.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter(|entry| {
            std::fs::read_to_string(entry.path().join("comm")).is_ok_and(|comm| comm.trim() == name)
        })
        .filter_map(|entry| {
            entry
                .file_name()
                .to_str()
                .and_then(crate::measure::task_cpu)
        })
        .sum()
}
