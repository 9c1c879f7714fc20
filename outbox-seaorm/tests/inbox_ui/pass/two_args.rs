//! Two-argument handlers: with the default unit of work (raises nothing) and with a domain
//! event enum that derives `DomainEvent` (no `mapper` needed).
#![deny(warnings)]

use outbox_core::{DomainEvent, IntegrationEvent, Raise};
use outbox_seaorm::inbox::{HandlerRegistration, InboxHandler};
use outbox_seaorm::{UnitOfWork, inbox_handler};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// An order was placed.
#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "bookstore.ordering.order-placed.v1", key = order_id)]
pub struct OrderPlacedV1 {
    pub order_id: String,
}

/// Stock was reserved.
#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "bookstore.inventory.stock-reserved.v1", key = order_id)]
pub struct StockReservedV1 {
    pub order_id: String,
}

/// The payload of `InventoryEvent::StockReserved`.
pub struct StockReserved {
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
pub enum InventoryEvent {
    #[domain_event(contract = StockReservedV1)]
    StockReserved(StockReserved),
}

#[derive(Debug, thiserror::Error)]
#[error("out of stock")]
pub struct OutOfStock;

/// Only business writes: the default `UnitOfWork<NoEvents>`.
#[inbox_handler(consumer = "inventory.count-orders")]
async fn count_orders(_uow: &UnitOfWork, _event: OrderPlacedV1) -> Result<(), OutOfStock> {
    Ok(())
}

/// Raises an event of its own, mapped by the derive.
#[inbox_handler(consumer = "inventory.reserve-stock")]
pub async fn reserve_stock(
    uow: &UnitOfWork<InventoryEvent>,
    OrderPlacedV1 { order_id }: OrderPlacedV1,
) -> Result<(), OutOfStock> {
    uow.raise(InventoryEvent::StockReserved(StockReserved { order_id }));
    Ok(())
}

/// Private, and never named: only its registration uses it (no dead-code warning).
#[inbox_handler(consumer = "inventory.log-orders")]
async fn log_orders(_uow: &UnitOfWork, _event: OrderPlacedV1) -> Result<(), OutOfStock> {
    Ok(())
}

mod nested {
    use super::{OrderPlacedV1, OutOfStock};
    use outbox_seaorm::{UnitOfWork, inbox_handler};

    /// A raw identifier, in a module, with a named lifetime.
    #[inbox_handler(consumer = "inventory.audit")]
    pub(crate) async fn r#type<'u>(
        _uow: &'u UnitOfWork,
        _event: OrderPlacedV1,
    ) -> Result<(), OutOfStock> {
        Ok(())
    }
}

fn main() {
    let path = |name: &str| format!("{}::{name}", module_path!());
    assert_eq!(
        <count_orders as InboxHandler>::CONSUMER,
        "inventory.count-orders"
    );
    assert_eq!(
        <reserve_stock as InboxHandler>::CONSUMER,
        "inventory.reserve-stock"
    );
    assert_eq!(
        <reserve_stock as InboxHandler>::HANDLER,
        path("reserve_stock")
    );
    assert_eq!(
        <nested::r#type as InboxHandler>::HANDLER,
        path("nested::type")
    );
    let mut routes: Vec<_> = HandlerRegistration::all()
        .map(|r| {
            (
                r.consumer(),
                r.handler().to_owned(),
                r.event_type(),
                r.is_upcast(),
            )
        })
        .collect();
    routes.sort();
    let placed = OrderPlacedV1::EVENT_TYPE;
    assert_eq!(
        routes,
        [
            ("inventory.audit", path("nested::type"), placed, false),
            (
                "inventory.count-orders",
                path("count_orders"),
                placed,
                false
            ),
            ("inventory.log-orders", path("log_orders"), placed, false),
            (
                "inventory.reserve-stock",
                path("reserve_stock"),
                placed,
                false
            ),
        ]
    );
}
