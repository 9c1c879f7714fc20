//! The relay role: one relay — polling, or the log relay on MariaDB's binary log (one of
//! the relay processes streams, the others stand by on the slot's lease) — publishing
//! the outbox to the soak's broker, each
//! message on its share's subject (NATS, and RabbitMQ's routing key:
//! `<prefix>.s<share>.<event type>`), stream (Redis: `<prefix>:s<share>`) or topic (Kafka:
//! `<prefix>.s<share>`, keyed by the aggregate). It runs until it is killed; its PostgreSQL
//! connections carry `application_name=soak-relay-<n>`, which is how the conductor finds
//! the backends it terminates.

use std::time::Duration;

use outbox_brokers::kafka::KafkaPublisher;
use outbox_brokers::nats::{self, NatsPublisher};
use outbox_brokers::rabbitmq::RabbitPublisher;
use outbox_brokers::redis::{self as redis_streams, RedisPublisher};
use outbox_brokers::route::Route;
use outbox_core::policy::Backoff;
use outbox_core::publish::Publisher;
use outbox_seaorm::Outbox;
use outbox_seaorm::relay::Relay;
use outbox_seaorm::relay::log::LogRelay;
use tokio_util::sync::CancellationToken;

use crate::databases::connect;
use crate::error::SoakError;
use crate::plan::{Broker, Plan, RelayMethod};

/// The start of every relay's `application_name` (the conductor matches it).
pub const APPLICATION_NAME_PREFIX: &str = "soak-relay-";

/// The `application_name` of relay `instance`'s connections.
pub fn application_name(instance: u32) -> String {
    format!("{APPLICATION_NAME_PREFIX}{instance}")
}

/// Runs relay `instance` until killed (or until it fails: the conductor restarts it).
///
/// # Errors
/// When the relay cannot be built or stops with an error.
pub async fn run(plan: &Plan, instance: u32) -> Result<(), SoakError> {
    let url = match plan.relay {
        RelayMethod::Polling => format!(
            "{}?application_name={}",
            plan.producer_url,
            application_name(instance)
        ),
        RelayMethod::Log => plan.producer_url.clone(),
    };
    let db = connect(&url, 3).await?;
    let method = (plan.relay, url);
    let outbox = Outbox::default();
    let partitions = outbox.partitions();
    let share = {
        let plan = plan.clone();
        move |envelope: &outbox_core::Envelope| plan.share_of(&envelope.aggregate_id, partitions)
    };
    match plan.broker {
        Broker::Nats => {
            let client = nats::connect(&plan.broker_url)
                .await
                .map_err(|error| SoakError::Broker(error.to_string()))?;
            let route = if plan.partitions > 0 {
                Route::partitioned(plan.partitioned_route())
            } else {
                let plan = plan.clone();
                Route::custom(move |envelope| {
                    plan.share_subject(share(envelope), &envelope.event_type)
                })
            };
            let publisher = NatsPublisher::builder(client)
                .route(route)
                .ack_timeout(Duration::from_secs(1))
                .build();
            relay(db, outbox, publisher, instance, method).await
        }
        Broker::Redis => {
            let client = redis_streams::open(&plan.broker_url)
                .map_err(|error| SoakError::Broker(error.to_string()))?;
            let connection = redis_streams::connection(&client)
                .map_err(|error| SoakError::Broker(error.to_string()))?;
            let route = if plan.partitions > 0 {
                Route::partitioned(plan.partitioned_route())
            } else {
                let plan = plan.clone();
                Route::custom(move |envelope| plan.share_stream(share(envelope)))
            };
            let publisher = RedisPublisher::builder(connection).route(route).build();
            relay(db, outbox, publisher, instance, method).await
        }
        Broker::Rabbitmq => {
            let exchange = plan.subject_prefix.clone();
            let url = plan.broker_url.clone();
            let route = if plan.partitions > 0 {
                Route::partitioned(plan.partitioned_route())
            } else {
                let plan = plan.clone();
                Route::custom(move |envelope| {
                    plan.share_subject(share(envelope), &envelope.event_type)
                })
            };
            let publisher = RabbitPublisher::builder(url, exchange)
                .route(route)
                .confirm_timeout(Duration::from_secs(1))
                .connect_timeout(Duration::from_secs(1))
                .connection_name(application_name(instance))
                .build()
                .map_err(|error| SoakError::Broker(error.to_string()))?;
            relay(db, outbox, publisher, instance, method).await
        }
        Broker::Kafka => {
            let url = plan.broker_url.clone();
            let route = if plan.partitions > 0 {
                Route::fixed(plan.partitioned_queue())
            } else {
                let plan = plan.clone();
                Route::custom(move |envelope| plan.share_name(share(envelope)))
            };
            // One record per record batch: tansu 0.6 answers a fetch from an offset inside
            // a batch with the batches after it, so a consumer resuming mid-batch would
            // skip the rest of it (see `outbox_brokers::kafka`).
            let publisher = KafkaPublisher::builder(url)
                .route(route)
                .delivery_timeout(Duration::from_secs(1))
                .set("batch.num.messages", "1")
                // tansu 0.6's SQLite storage panics on the idempotent producer's sequence
                // check (and then answers nothing): the soak's producer is not idempotent.
                // One request in flight keeps each partition's order across retries; a
                // retried duplicate is the inbox's to skip.
                .set("enable.idempotence", "false")
                .set("max.in.flight.requests.per.connection", "1")
                .set("client.id", application_name(instance))
                .build()
                .map_err(|error| SoakError::Broker(error.to_string()))?;
            relay(db, outbox, publisher, instance, method).await
        }
    }
}

/// Runs the relay of `instance` over `publisher` until it stops: a polling relay, or a
/// log relay on the slot `soak` (its dump connection on `url`).
async fn relay<P: Publisher + 'static>(
    db: sea_orm::DatabaseConnection,
    outbox: Outbox,
    publisher: P,
    instance: u32,
    (method, url): (RelayMethod, String),
) -> Result<(), SoakError> {
    let instance_id = format!("relay-{instance}");
    let lease_ttl = Duration::from_secs(3);
    let publish_timeout = Duration::from_millis(1_500);
    let backoff = Backoff::new()
        .with_min_delay(Duration::from_millis(100))
        .with_max_delay(Duration::from_millis(800));
    let setup = |error: &dyn std::fmt::Display| SoakError::Setup(error.to_string());
    let stopped = |error: &dyn std::fmt::Display| {
        SoakError::Setup(format!("relay {instance} stopped: {error}"))
    };
    let report = if method == RelayMethod::Log {
        let relay = LogRelay::builder(db, outbox, publisher)
            .slot("soak")
            .connection_url(url)
            .instance_id(instance_id)
            .lease_ttl(lease_ttl)
            .feedback_interval(Duration::from_millis(100))
            .publish_timeout(publish_timeout)
            .max_attempts(10_000)
            .backoff(backoff)
            .build()
            .map_err(|error| setup(&error))?;
        let report = relay
            .run(CancellationToken::new())
            .await
            .map_err(|error| stopped(&error))?;
        format!("{report:?}")
    } else {
        let relay = Relay::builder(db, outbox, publisher)
            .instance_id(instance_id)
            .poll_interval(Duration::from_millis(50))
            .heartbeat_interval(Duration::from_millis(300))
            .lease_ttl(lease_ttl)
            .publish_timeout(publish_timeout)
            .max_attempts(10_000)
            .backoff(backoff)
            .build()
            .map_err(|error| setup(&error))?;
        let report = relay
            .run(CancellationToken::new())
            .await
            .map_err(|error| stopped(&error))?;
        format!("{report:?}")
    };
    Err(SoakError::Setup(format!(
        "relay {instance} stopped without being asked: {report}"
    )))
}
