//! outbox-core and outbox-seaorm under other names (`renamed_core`, `renamed_seaorm` in
//! Cargo.toml, no `outbox_core` or `outbox_seaorm` in scope): `#[derive(IntegrationEvent)]`,
//! `#[derive(DomainEvent)]` and `#[inbox_handler]` with `crate = "…"` compile, and what they
//! generate works: constants and registrations, the mapping, a handler applied once.

use std::convert::Infallible;
use std::time::Duration;

use renamed_core::clock::SystemClock;
use renamed_core::mapping::{ContractMapper, ContractSink, DerivedMapping};
use renamed_core::{ContractRegistration, Raise};
use renamed_core::{ContractRegistry, DomainEvent, Envelope, EnvelopeConfig, IntegrationEvent};
use renamed_seaorm::inbox::{self, HandlerRegistration, InboxHandler, InboxOutcome};
use renamed_seaorm::{Outbox, UnitOfWork, inbox_handler, schema};
use schemars::JsonSchema;
use sea_orm::{ConnectOptions, ConnectionTrait, Database, Statement};
use serde::{Deserialize, Serialize};

/// An order was placed.
#[derive(Debug, PartialEq, IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(
    name = "renamed.ordering.order-placed.v1",
    key = order_id,
    crate = "renamed_core"
)]
pub struct OrderPlacedV1 {
    /// The order.
    pub order_id: String,
}

/// Stock was reserved for an order.
#[derive(Debug, PartialEq, IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(
    name = "renamed.inventory.stock-reserved.v1",
    key = order_id,
    crate = renamed_core
)]
pub struct StockReservedV1 {
    /// The order the stock is reserved for.
    pub order_id: String,
}

/// The payload of `InventoryEvent::StockReserved`.
pub struct StockReserved {
    /// The order the stock is reserved for.
    pub order_id: String,
}

impl From<&StockReserved> for StockReservedV1 {
    fn from(event: &StockReserved) -> Self {
        Self {
            order_id: event.order_id.clone(),
        }
    }
}

/// The inventory's domain events.
#[derive(DomainEvent)]
#[domain_event(crate = "renamed_core")]
pub enum InventoryEvent {
    /// Published as `StockReservedV1`.
    #[domain_event(contract = StockReservedV1)]
    StockReserved(StockReserved),
    /// Never leaves the process.
    #[domain_event(local)]
    Counted,
}

/// Reserves stock: raises `StockReserved`, which the derived mapping turns into a
/// `StockReservedV1` outbox row in the handler's transaction.
#[inbox_handler(consumer = "renamed.reserve-stock", crate = "renamed_seaorm")]
async fn reserve_stock(
    uow: &UnitOfWork<InventoryEvent>,
    event: OrderPlacedV1,
    envelope: &Envelope,
) -> Result<(), Infallible> {
    assert_eq!(envelope.event_type, OrderPlacedV1::EVENT_TYPE);
    uow.raise(InventoryEvent::StockReserved(StockReserved {
        order_id: event.order_id,
    }));
    Ok(())
}

fn registration(registry: &ContractRegistry, event_type: &str) -> &'static ContractRegistration {
    registry
        .get(event_type)
        .unwrap_or_else(|| panic!("{event_type} is registered"))
}

#[test]
fn integration_event_derives_through_the_renamed_crate() {
    assert_eq!(
        OrderPlacedV1::EVENT_TYPE,
        "renamed.ordering.order-placed.v1"
    );
    assert_eq!(OrderPlacedV1::NAME, "renamed.ordering.order-placed");
    assert_eq!(OrderPlacedV1::VERSION, 1);
    assert_eq!(OrderPlacedV1::AGGREGATE_TYPE, "order");
    assert_eq!(OrderPlacedV1::KEY_FIELD, "order_id");

    let registry = ContractRegistry::collect().expect("no duplicate event types");
    for event_type in [OrderPlacedV1::EVENT_TYPE, StockReservedV1::EVENT_TYPE] {
        let registration = registration(&registry, event_type);
        assert_eq!(registration.event_type, event_type);
        let schema = registration.json_schema().to_value();
        assert_eq!(schema["properties"]["order_id"]["type"], "string");
    }

    let event = OrderPlacedV1 {
        order_id: "order-1".to_owned(),
    };
    let envelope = Envelope::from_event(&event).expect("encodes");
    assert_eq!(envelope.aggregate_id, "order-1");
    assert_eq!(envelope.decode::<OrderPlacedV1>().expect("decodes"), event);
}

#[test]
fn domain_event_derives_through_the_renamed_crate() {
    let config = EnvelopeConfig::default();
    let mut sink = ContractSink::new(&config, &SystemClock);
    for event in [
        InventoryEvent::StockReserved(StockReserved {
            order_id: "order-2".to_owned(),
        }),
        InventoryEvent::Counted,
    ] {
        DerivedMapping.map(&event, &mut sink).expect("maps");
    }
    let envelopes = sink.into_envelopes();
    assert_eq!(envelopes.len(), 1);
    assert_eq!(envelopes[0].event_type, StockReservedV1::EVENT_TYPE);
    assert_eq!(envelopes[0].aggregate_id, "order-2");
    assert!(InventoryEvent::Counted.is_local());
    assert_eq!(InventoryEvent::Counted.event_name(), "Counted");
}

#[tokio::test(flavor = "current_thread")]
async fn inbox_handler_applies_through_the_renamed_crate() {
    assert_eq!(
        <reserve_stock as InboxHandler>::CONSUMER,
        "renamed.reserve-stock"
    );
    assert!(HandlerRegistration::all().any(|registration| {
        registration.consumer() == "renamed.reserve-stock"
            && registration.event_type() == OrderPlacedV1::EVENT_TYPE
    }));

    // One connection kept forever: each connection to `sqlite::memory:` is another database.
    let mut options = ConnectOptions::new("sqlite::memory:");
    options
        .max_connections(1)
        .min_connections(1)
        .idle_timeout(None::<Duration>)
        .max_lifetime(None::<Duration>);
    let db = Database::connect(options).await.expect("connects");
    let outbox = Outbox::default();
    schema::install(&db, &outbox).await.expect("installs");

    let message = Envelope::from_event(&OrderPlacedV1 {
        order_id: "order-3".to_owned(),
    })
    .expect("encodes");
    let applied = inbox::apply::<reserve_stock>(&db, &outbox, &message).await;
    assert_eq!(applied.expect("applies"), InboxOutcome::Applied);
    let again = inbox::apply::<reserve_stock>(&db, &outbox, &message).await;
    assert_eq!(again.expect("skips"), InboxOutcome::Duplicate);

    let rows = db
        .query_all_raw(Statement::from_string(
            db.get_database_backend(),
            "SELECT event_type, aggregate_id FROM outbox",
        ))
        .await
        .expect("reads the outbox");
    let rows: Vec<(String, String)> = rows
        .iter()
        .map(|row| {
            (
                row.try_get("", "event_type").expect("event_type"),
                row.try_get("", "aggregate_id").expect("aggregate_id"),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [(StockReservedV1::EVENT_TYPE.to_owned(), "order-3".to_owned())]
    );
}
