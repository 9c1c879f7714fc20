//! The consumer role: a consumer feeding the inbox on MariaDB, whose `#[inbox_handler]`
//! records each effect in `soak_effects` (in the order it committed them: the verifier
//! reads that order back). With `--partitions` (NATS, Redis, RabbitMQ) it is an instance of
//! the partitioned consumer, with one durable, stream or queue per partition it holds a
//! lease for on Kafka, a member of one consumer group on a partitioned topic. Otherwise it
//! consumes one share's messages. NATS: a durable consumer of the
//! share's subjects; Redis: the consumer group `soak` on the share's stream, under a
//! consumer name that survives restarts; RabbitMQ: the share's durable queue with a single
//! active consumer; Kafka: a consumer group of its own on the share's topic. It runs until
//! it is killed.

use std::time::Duration;

use outbox_brokers::kafka::KafkaConsumerRunner;
use outbox_brokers::nats::{self, NatsConsumerRunner};
use outbox_brokers::rabbitmq::RabbitConsumerRunner;
use outbox_brokers::redis::{self as redis_streams, RedisConsumerRunner};
use outbox_core::Envelope;
use outbox_core::policy::Backoff;
use outbox_seaorm::inbox::Consumer;
use outbox_seaorm::inbox::partitioned::PartitionedConsumer;
use outbox_seaorm::{Outbox, UnitOfWork, inbox_handler};
use sea_orm::{ConnectionTrait as _, DbBackend, DbErr, Statement};
use tokio_util::sync::CancellationToken;

use crate::contract::CustomerOrderedV1;
use crate::databases::connect;
use crate::error::SoakError;
use crate::plan::{Broker, CONSUMER, Plan, consumer_instance};

/// Applies an order: one effect row, in the inbox's transaction.
#[inbox_handler(consumer = "soak.orders")]
async fn apply_order(
    uow: &UnitOfWork,
    event: CustomerOrderedV1,
    envelope: &Envelope,
) -> Result<(), DbErr> {
    uow.execute_raw(Statement::from_sql_and_values(
        DbBackend::MySql,
        "INSERT INTO soak_effects (customer_id, order_no, message_id) VALUES (?, ?, ?)",
        [
            event.customer_id.into(),
            i32::try_from(event.order_no).unwrap_or(i32::MAX).into(),
            envelope.message_id.to_string().into(),
        ],
    ))
    .await?;
    Ok(())
}

/// How long a runner waits before it reads an unsettled message again: 200 ms doubling up
/// to 1 s (the soak's faults are short).
fn redelivery_backoff() -> Backoff {
    Backoff::new()
        .with_min_delay(Duration::from_millis(200))
        .with_max_delay(Duration::from_secs(1))
}
/// How long a runner waits before it reconnects: 100 ms doubling up to 1 s.
fn retry_backoff() -> Backoff {
    Backoff::new()
        .with_min_delay(Duration::from_millis(100))
        .with_max_delay(Duration::from_secs(1))
}

/// The durable consumer (NATS), consumer name (Redis), connection name (RabbitMQ) or
/// consumer group (Kafka) of `share`.
pub fn durable(share: u32) -> String {
    format!("soak-share-{share}")
}

/// The partitioned mode's instance of `consumer` in this process: short leases (3 s, a
/// heartbeat every 500 ms), so that a killed process's partitions move within seconds.
fn partitioned(plan: &Plan, consumer: Consumer) -> Result<PartitionedConsumer, SoakError> {
    PartitionedConsumer::builder(consumer, plan.partitions)
        .instance_id(consumer_instance(std::process::id()))
        .lease_ttl(PARTITION_LEASE_TTL)
        .heartbeat_interval(Duration::from_millis(500))
        .build()
        .map_err(|error| SoakError::Setup(error.to_string()))
}

/// The lease TTL of the partitioned mode's consumers.
pub const PARTITION_LEASE_TTL: Duration = Duration::from_secs(3);

/// Runs the consumer of `share` until killed (or until its runner stops: the conductor
/// restarts it).
///
/// # Errors
/// When the consumer cannot be built or its runner stops.
pub async fn run(plan: &Plan, share: u32) -> Result<(), SoakError> {
    let db = connect(&plan.mariadb_url, 3).await?;
    let consumer = Consumer::builder(db, Outbox::default(), CONSUMER)
        .max_attempts(1_000)
        .backoff(
            Backoff::new()
                .with_min_delay(Duration::from_millis(20))
                .with_max_delay(Duration::from_millis(500)),
        )
        .build()
        .map_err(|error| SoakError::Setup(error.to_string()))?;
    let broker = |error: &dyn std::fmt::Display| SoakError::Broker(error.to_string());
    let shutdown = CancellationToken::new();
    let stopped = match plan.broker {
        Broker::Nats => {
            let client = nats::connect(&plan.broker_url)
                .await
                .map_err(|error| broker(&error))?;
            let builder = NatsConsumerRunner::builder(client, consumer.clone(), &plan.stream)
                .ack_wait(Duration::from_secs(2))
                .fetch_wait(Duration::from_millis(500))
                .redelivery_backoff(redelivery_backoff())
                .retry_backoff(retry_backoff());
            if plan.partitions > 0 {
                let runner = builder
                    .durable_name("soak-partitioned")
                    .build_partitioned(partitioned(plan, consumer)?, plan.partitioned_route())
                    .map_err(|error| broker(&error))?;
                format!("{:?}", runner.run(shutdown).await)
            } else {
                let runner = builder
                    .durable_name(durable(share))
                    .filter_subject(plan.share_filter(share))
                    .build()
                    .map_err(|error| broker(&error))?;
                format!("{:?}", runner.run(shutdown).await)
            }
        }
        Broker::Redis => {
            let client = redis_streams::open(&plan.broker_url).map_err(|error| broker(&error))?;
            let stream = if plan.partitions > 0 {
                plan.partitioned_stream()
            } else {
                plan.share_stream(share)
            };
            let builder = RedisConsumerRunner::builder(client, consumer.clone(), stream)
                .group("soak")
                .block(Duration::from_millis(500))
                .redelivery_backoff(redelivery_backoff())
                .retry_backoff(retry_backoff());
            if plan.partitions > 0 {
                let runner = builder
                    .build_partitioned(partitioned(plan, consumer)?, plan.partitioned_route())
                    .map_err(|error| broker(&error))?;
                format!("{:?}", runner.run(shutdown).await)
            } else {
                let runner = builder
                    .consumer_name(durable(share))
                    .build()
                    .map_err(|error| broker(&error))?;
                format!("{:?}", runner.run(shutdown).await)
            }
        }
        Broker::Rabbitmq => {
            let queue = if plan.partitions > 0 {
                plan.partitioned_queue()
            } else {
                plan.share_name(share)
            };
            let builder = RabbitConsumerRunner::builder(
                plan.broker_url.clone(),
                plan.subject_prefix.clone(),
                queue,
                consumer.clone(),
            )
            .reconnect_delay(Duration::from_millis(200), Duration::from_secs(1))
            .redelivery_delay(Duration::from_millis(200))
            .connect_timeout(Duration::from_secs(1))
            .ack_timeout(Duration::from_secs(2))
            .connection_name(durable(share));
            if plan.partitions > 0 {
                let runner = builder
                    .build_partitioned(partitioned(plan, consumer)?, plan.partitioned_route())
                    .map_err(|error| broker(&error))?;
                format!("{:?}", runner.run(shutdown).await)
            } else {
                let runner = builder
                    .bind(format!("{}.#", plan.share_name(share)))
                    .single_active_consumer(true)
                    .build()
                    .map_err(|error| broker(&error))?;
                format!("{:?}", runner.run(shutdown).await)
            }
        }
        Broker::Kafka => {
            // A short session timeout lets the broker forget a killed member within
            // seconds.
            // Partitioned: every consumer in one group on the partitioned topic, the
            // group's assignment spreading its partitions.
            let (topic, group) = if plan.partitions > 0 {
                (plan.partitioned_queue(), "soak-partitioned".to_owned())
            } else {
                (plan.share_name(share), durable(share))
            };
            let runner = KafkaConsumerRunner::builder(plan.broker_url.clone(), [topic], consumer)
                .group_id(group)
                .set("client.id", durable(share))
                .commit_interval(Duration::from_millis(200))
                .redelivery_delay(Duration::from_millis(200))
                .set("session.timeout.ms", "6000")
                .set("heartbeat.interval.ms", "500")
                .build()
                .map_err(|error| broker(&error))?;
            format!("{:?}", runner.run(shutdown).await)
        }
    };
    Err(SoakError::Broker(format!(
        "the runner of share {share} stopped: {stopped}"
    )))
}
