//! The log relay (book: The log relay): outbox rows published to NATS JetStream from
//! PostgreSQL's write-ahead log (logical decoding, `pgoutput`), with no polling. Writes three
//! events, runs the relay until the stream holds them, then stops it. Needs PostgreSQL with
//! `wal_level = logical` and a role allowed to replicate, and NATS with JetStream:
//!
//! ```text
//! DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres cargo run -p example-log-relay
//! ```
//!
//! Optional: `NATS_URL` (default `nats://127.0.0.1:4222`), `STREAM` (default `SHOP`; events go
//! to subjects `<STREAM>.<event type>`), `SLOT` (the replication slot and publication,
//! default `shop_outbox`).
#![allow(clippy::print_stdout)]

use std::time::{Duration, Instant};

use outbox::brokers::nats::{self, NatsPublisher, NatsStream, async_nats::jetstream};
use outbox::brokers::route::Route;
use outbox::mapping::DerivedMapping;
use outbox::relay::log::LogRelay;
use outbox::{DomainEvent, IntegrationEvent, Outbox, Raise, schema};
use sea_orm::Database;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

/// The contract other services consume.
#[derive(IntegrationEvent, Serialize, Deserialize, schemars::JsonSchema)]
#[integration_event(name = "shop.ordering.order-placed.v1", key = order_id)]
struct OrderPlacedV1 {
    order_id: String,
}

#[derive(DomainEvent)]
enum OrderingEvent {
    #[domain_event(contract = OrderPlacedV1)]
    OrderPlaced(OrderPlaced),
}

struct OrderPlaced(String);

impl From<&OrderPlaced> for OrderPlacedV1 {
    fn from(placed: &OrderPlaced) -> Self {
        Self {
            order_id: placed.0.clone(),
        }
    }
}

fn var(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("DATABASE_URL").map_err(|_| "DATABASE_URL is not set")?;
    let db = Database::connect(url).await?;
    let outbox = Outbox::default();
    schema::install(&db, &outbox).await?; // the outbox, inbox and relay tables

    let (stream, slot) = (var("STREAM", "SHOP"), var("SLOT", "shop_outbox"));
    let client = nats::connect(&var("NATS_URL", "nats://127.0.0.1:4222")).await?;
    NatsStream::new(&stream, [format!("{stream}.>")])
        .ensure(&client)
        .await?;
    let publisher = NatsPublisher::builder(client.clone())
        .route(Route::event_type(format!("{stream}.")))
        .build();

    // At its first start the relay creates the publication and the slot, publishes the rows
    // pending when the slot was made (the backfill), then streams each commit as it happens.
    let relay = LogRelay::builder(db.clone(), outbox.clone(), publisher)
        .slot(&slot)
        .build()?;
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(relay.run(shutdown.clone()));

    // Two transactions: order-1 and order-2, then order-3.
    for orders in [vec!["order-1", "order-2"], vec!["order-3"]] {
        let uow = outbox.begin(&db, &DerivedMapping).await?;
        for order_id in orders {
            uow.raise(OrderingEvent::OrderPlaced(OrderPlaced(order_id.into())));
        }
        uow.commit().await?; // the relay reads the rows from the log at this commit
    }

    // A service runs the relay until it stops; this example stops once NATS has the events.
    let mut nats_stream = jetstream::new(client).get_stream(&stream).await?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while nats_stream.info().await?.state.messages < 3 {
        if Instant::now() > deadline || running.is_finished() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    shutdown.cancel(); // publishes what it read, acknowledges it, releases the slot's lease
    let report = running.await??;
    let published = report.published;
    println!("published {published} events to stream {stream} from slot {slot}");
    if published != 3 {
        return Err(format!("published {published} events, not 3").into());
    }
    Ok(())
}
