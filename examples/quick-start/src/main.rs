//! Write, publish and consume one event: SQLite in memory and the in-process broker.
use outbox::inbox::{Consumer, Delivered};
use outbox::{DomainEvent, IntegrationEvent, Outbox, Raise, UnitOfWork, inbox_handler, schema};
use outbox::{in_process::InProcessBroker, mapping::DerivedMapping, relay::Relay};
use sea_orm::{Database, DbErr};

/// The contract other services consume: versioned, with a JSON Schema.
#[derive(IntegrationEvent, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[integration_event(name = "bookstore.ordering.order-placed.v1", key = order_id)]
struct OrderPlacedV1 {
    order_id: String,
}

/// What the aggregate raises; mapped to the contract before commit.
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

/// Runs once per message id, in the consumer's own transaction.
#[inbox_handler(consumer = "inventory.reserve-stock")]
async fn reserve_stock(_uow: &UnitOfWork, event: OrderPlacedV1) -> Result<(), DbErr> {
    tracing::info!(order = %event.order_id, "reserving its books");
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let db = Database::connect("sqlite::memory:").await?; // one connection: one database
    let outbox = Outbox::default();
    schema::install(&db, &outbox).await?;

    // Write: the event commits with the business change, or neither does.
    let uow = outbox.begin(&db, &DerivedMapping).await?;
    uow.raise(OrderingEvent::OrderPlaced(OrderPlaced("order-42".into())));
    uow.commit().await?;

    // Publish: the relay sends every committed row at least once.
    let broker = InProcessBroker::new();
    let mut relay = Relay::builder(db.clone(), outbox.clone(), broker.clone()).build()?;
    assert_eq!(relay.drain().await?.published, 1);

    // Consume: the inbox applies a message once; a redelivery has no effect.
    let consumer = Consumer::builder(db, outbox, "inventory.reserve-stock").build()?;
    let message = &broker.published()[0];
    let applied = Delivered::Applied { attempts: 1 };
    assert_eq!(consumer.deliver(message).await?, applied);
    assert_eq!(consumer.deliver(message).await?, Delivered::Duplicate);
    Ok(())
}
