//! The function stays an ordinary function (callable in unit tests), and the struct of the
//! same name is the handler: both are used here, on an in-memory SQLite database.
#![deny(warnings)]

use outbox_core::{Envelope, IntegrationEvent};
use outbox_seaorm::inbox::{self, InboxHandler, InboxOutcome};
use outbox_seaorm::{Outbox, UnitOfWork, inbox_handler, schema};
use schemars::JsonSchema;
use sea_orm::{ConnectOptions, ConnectionTrait, Database};
use serde::{Deserialize, Serialize};

/// An order was placed.
#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "bookstore.ordering.order-placed.v1", key = order_id)]
pub struct OrderPlacedV1 {
    pub order_id: String,
    pub quantity: i64,
}

#[inbox_handler(consumer = "inventory.reserve-stock")]
async fn reserve_stock(uow: &UnitOfWork, event: OrderPlacedV1) -> Result<(), sea_orm::DbErr> {
    let sql = format!("UPDATE stock SET reserved = reserved + {}", event.quantity);
    uow.execute_unprepared(&sql).await?;
    Ok(())
}

async fn reserved(db: &sea_orm::DatabaseConnection) -> i64 {
    let row = db
        .query_one_raw(sea_orm::Statement::from_string(
            db.get_database_backend(),
            "SELECT reserved FROM stock",
        ))
        .await
        .expect("select")
        .expect("one row");
    row.try_get("", "reserved").expect("reserved")
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    const CONSUMER: &str = <reserve_stock as InboxHandler>::CONSUMER;
    assert_eq!(CONSUMER, "inventory.reserve-stock");

    let mut options = ConnectOptions::new("sqlite::memory:");
    options
        .max_connections(1)
        .min_connections(1)
        .idle_timeout(None::<std::time::Duration>)
        .max_lifetime(None::<std::time::Duration>);
    let db = Database::connect(options).await?;
    let outbox = Outbox::default();
    schema::install(&db, &outbox).await?;
    db.execute_unprepared("CREATE TABLE stock (reserved INTEGER NOT NULL)")
        .await?;
    db.execute_unprepared("INSERT INTO stock VALUES (0)")
        .await?;

    // The function, called directly.
    let uow = UnitOfWork::begin(&db, &outbox_core::mapping::DerivedMapping).await?;
    reserve_stock(
        &uow,
        OrderPlacedV1 {
            order_id: "o-0".into(),
            quantity: 1,
        },
    )
    .await?;
    uow.commit().await?;
    assert_eq!(reserved(&db).await, 1);

    // The handler, through the inbox: applied once.
    let message = Envelope::from_event(&OrderPlacedV1 {
        order_id: "o-1".into(),
        quantity: 2,
    })?;
    assert_eq!(
        inbox::apply::<reserve_stock>(&db, &outbox, &message).await?,
        InboxOutcome::Applied
    );
    assert_eq!(
        inbox::apply::<reserve_stock>(&db, &outbox, &message).await?,
        InboxOutcome::Duplicate
    );
    assert_eq!(reserved(&db).await, 3);
    Ok(())
}
