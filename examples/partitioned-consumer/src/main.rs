//! A partitioned consumer (book: Scaling consumers): the relay puts each order in one of 8
//! partitions of a NATS stream, and the instances of the consumer split the partitions by
//! leases in the consumer's database, so each event is applied once and each order's events
//! in order, however many processes run. Writes 6 orders of 3 steps each, relays them,
//! consumes until all 18 are applied, and exits. Needs PostgreSQL (a database of its own) and
//! NATS with JetStream:
//!
//! ```text
//! DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres cargo run -p example-partitioned-consumer
//! ```
//!
//! Optional: `NATS_URL` (default `nats://127.0.0.1:4222`), `STREAM` (default `SHOP`; subjects
//! `<STREAM>.p<partition>.<event type>`), `WRITE=0` for a second instance that only consumes
//! (start it while the first one runs: the partitions are split between them), `INSTANCE`
//! to name the instance (default a new UUID; the partitions go to instances by a hash of
//! their names, so fixed names give a fixed split).
#![allow(clippy::print_stdout)]

use std::time::{Duration, Instant};

use outbox::brokers::nats::{self, NatsConsumerRunner, NatsPublisher, NatsStream};
use outbox::brokers::route::{PartitionedRoute, Route};
use outbox::inbox::{Consumer, partitioned::PartitionedConsumer};
use outbox::{DomainEvent, IntegrationEvent, Outbox, Raise, UnitOfWork, inbox_handler, schema};
use outbox::{mapping::DerivedMapping, relay::Relay};
use sea_orm::{ConnectionTrait, Database, DatabaseBackend::Postgres, DbErr, Statement};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

const PARTITIONS: u32 = 8;
const ORDERS: u32 = 6;
const STEPS: u32 = 3; // placed, paid, shipped

#[derive(IntegrationEvent, Serialize, Deserialize, schemars::JsonSchema)]
#[integration_event(name = "shop.ordering.order-progressed.v1", key = order_id)]
struct OrderProgressedV1 {
    order_id: String,
    step: u32,
}

#[derive(DomainEvent)]
enum OrderingEvent {
    #[domain_event(contract = OrderProgressedV1)]
    Progressed(Progress),
}

/// Order number, step.
struct Progress(u32, u32);

impl From<&Progress> for OrderProgressedV1 {
    fn from(&Progress(order, step): &Progress) -> Self {
        Self {
            order_id: format!("order-{order}"),
            step,
        }
    }
}

/// Notes each step, in the inbox's transaction: once per message, in order per order.
#[inbox_handler(consumer = "shipping.track-orders")]
async fn track_order(uow: &UnitOfWork, event: OrderProgressedV1) -> Result<(), DbErr> {
    let insert = "INSERT INTO applied (order_id, step) VALUES ($1, $2)";
    let values = [event.order_id.into(), event.step.into()];
    uow.execute_raw(Statement::from_sql_and_values(Postgres, insert, values))
        .await?;
    Ok(())
}

fn var(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("DATABASE_URL").map_err(|_| "DATABASE_URL is not set")?;
    let db = Database::connect(url).await?;
    let outbox = Outbox::default();
    schema::install(&db, &outbox).await?; // the outbox and the consumer's inbox and leases
    let applied =
        "CREATE TABLE IF NOT EXISTS applied (seq BIGSERIAL PRIMARY KEY, order_id TEXT, step INT)";
    db.execute_unprepared(applied).await?;

    let stream = var("STREAM", "SHOP");
    let client = nats::connect(&var("NATS_URL", "nats://127.0.0.1:4222")).await?;
    let subjects = [format!("{stream}.>")];
    NatsStream::new(&stream, subjects).ensure(&client).await?;
    // Publisher and consumers agree on the layout: partition p is `<STREAM>.p<p>.<event type>`.
    let route = PartitionedRoute::new(format!("{stream}.p"), PARTITIONS).with_event_type();
    let (shutdown, total) = (CancellationToken::new(), i64::from(ORDERS * STEPS));

    let mut relaying = None;
    if var("WRITE", "1") != "0" {
        for step in 1..=STEPS {
            let uow = outbox.begin(&db, &DerivedMapping).await?;
            for order in 1..=ORDERS {
                uow.raise(OrderingEvent::Progressed(Progress(order, step)));
            }
            uow.commit().await?;
        }
        println!("wrote {total} events");
        let publisher = NatsPublisher::builder(client.clone())
            .route(Route::partitioned(route.clone()))
            .build();
        let relay = Relay::builder(db.clone(), outbox.clone(), publisher).build()?;
        relaying = Some(tokio::spawn(relay.run(shutdown.clone())));
    }

    // This instance heartbeats, takes the partition leases hashed to it, runs one NATS
    // durable per partition it holds, and hands partitions over when another instance joins.
    let inbox = Consumer::builder(db.clone(), outbox, "shipping.track-orders").build()?;
    let mut partitioned = PartitionedConsumer::builder(inbox.clone(), PARTITIONS);
    if let Ok(instance) = std::env::var("INSTANCE") {
        partitioned = partitioned.instance_id(instance);
    }
    let partitioned = partitioned.build()?;
    let runner = NatsConsumerRunner::builder(client, inbox, &stream)
        .build_partitioned(partitioned, route)?;
    let running = tokio::spawn(runner.run(shutdown.clone()));

    let count = Statement::from_string(Postgres, "SELECT count(*) FROM applied");
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut done = 0;
    while done < total && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let row = db.query_one_raw(count.clone()).await?.ok_or("no count")?;
        done = row.try_get_by_index::<i64>(0)?;
    }
    shutdown.cancel(); // the runners finish their message, the leases are released
    let report = running.await?;
    if let Some(relay) = relaying {
        relay.await??;
    }
    let (acked, partitions) = (report.runners.acked, report.partitions.started);
    println!("{done} events applied; {acked} acknowledged here, {partitions} partition runs");
    if done != total {
        return Err(format!("{done} of {total} events applied").into());
    }
    Ok(())
}
