//! Handlers whose unit of work is written through type aliases: the macro cannot see through
//! an alias, so it reads the events from the type (`UnitOfWorkArg`), not from the tokens.
#![deny(warnings)]

use std::marker::PhantomData;

use outbox_core::mapping::NoEvents;
use outbox_core::{DomainEvent, Envelope, IntegrationEvent, Raise};
use outbox_seaorm::inbox::{self, HandlerRegistration, InboxHandler};
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

impl From<&String> for StockReservedV1 {
    fn from(order_id: &String) -> Self {
        Self {
            order_id: order_id.clone(),
        }
    }
}

/// The inventory's domain events.
#[derive(DomainEvent)]
pub enum InventoryEvent {
    #[domain_event(contract = StockReservedV1)]
    StockReserved(String),
}

#[derive(Debug, thiserror::Error)]
#[error("out of stock")]
pub struct OutOfStock;

/// An alias naming the events.
type InventoryUow = UnitOfWork<InventoryEvent>;

/// A generic alias with a default.
type Uow<E = NoEvents> = UnitOfWork<E>;

mod db {
    /// An alias in another module.
    pub type Plain = outbox_seaorm::UnitOfWork;
}

#[inbox_handler(consumer = "inventory.reserve-stock")]
async fn reserve_stock(uow: &InventoryUow, event: OrderPlacedV1) -> Result<(), OutOfStock> {
    uow.raise(InventoryEvent::StockReserved(event.order_id));
    Ok(())
}

#[inbox_handler(consumer = "inventory.count-orders")]
async fn count_orders(_uow: &Uow, _event: OrderPlacedV1) -> Result<(), OutOfStock> {
    Ok(())
}

#[inbox_handler(consumer = "inventory.release-stock")]
async fn release_stock(_uow: &Uow<InventoryEvent>, _event: OrderPlacedV1) -> Result<(), OutOfStock> {
    Ok(())
}

#[inbox_handler(consumer = "inventory.audit")]
async fn audit<'u>(
    _uow: &'u db::Plain,
    _event: OrderPlacedV1,
    _envelope: &'u Envelope,
) -> Result<(), OutOfStock> {
    Ok(())
}

/// Compiles only when both are the same type.
fn same<T>(_: PhantomData<T>, _: PhantomData<T>) {}

fn main() {
    same(
        PhantomData::<<reserve_stock as InboxHandler>::Event>,
        PhantomData::<InventoryEvent>,
    );
    same(
        PhantomData::<<count_orders as InboxHandler>::Event>,
        PhantomData::<NoEvents>,
    );
    same(
        PhantomData::<<release_stock as InboxHandler>::Event>,
        PhantomData::<InventoryEvent>,
    );
    same(
        PhantomData::<<audit as InboxHandler>::Event>,
        PhantomData::<NoEvents>,
    );
    let _ = <reserve_stock as InboxHandler>::mapper();
    let _ = <audit as InboxHandler>::mapper();
    let _ = inbox::apply::<reserve_stock>;
    let _ = inbox::apply::<audit>;
    let mut consumers: Vec<_> = HandlerRegistration::all().map(|r| r.consumer()).collect();
    consumers.sort_unstable();
    assert_eq!(
        consumers,
        [
            "inventory.audit",
            "inventory.count-orders",
            "inventory.release-stock",
            "inventory.reserve-stock"
        ]
    );
}
