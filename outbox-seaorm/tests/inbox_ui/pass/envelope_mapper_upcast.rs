//! A three-argument handler with an explicit mapper and an upcast from the previous version.
#![deny(warnings)]

use outbox_core::mapping::{ContractMapper, ContractSink, MapError};
use outbox_core::{Envelope, IntegrationEvent};
use outbox_seaorm::inbox::{HandlerRegistration, InboxHandler};
use outbox_seaorm::{UnitOfWork, inbox_handler};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// An order was placed (first version).
#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "bookstore.ordering.order-placed.v1", key = order_id)]
pub struct OrderPlacedV1 {
    pub order_id: String,
}

/// An order was placed.
#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "bookstore.ordering.order-placed.v2", key = order_id)]
pub struct OrderPlacedV2 {
    pub order_id: String,
    pub express: bool,
}

impl From<OrderPlacedV1> for OrderPlacedV2 {
    fn from(v1: OrderPlacedV1) -> Self {
        Self {
            order_id: v1.order_id,
            express: false,
        }
    }
}

/// Domain events mapped by hand.
pub enum InventoryEvent {
    Reserved,
}

/// The hand-written mapper.
pub struct InventoryContracts;

impl ContractMapper<InventoryEvent> for InventoryContracts {
    fn map(&self, _event: &InventoryEvent, _out: &mut ContractSink<'_>) -> Result<(), MapError> {
        Ok(())
    }
}

static MAPPER: InventoryContracts = InventoryContracts;

#[inbox_handler(
    consumer = "inventory.reserve-stock",
    mapper = &InventoryContracts,
    upcast(from = OrderPlacedV1),
)]
pub async fn reserve_stock(
    _uow: &UnitOfWork<InventoryEvent>,
    event: OrderPlacedV2,
    envelope: &Envelope,
) -> Result<(), anyhow_like::Error> {
    if event.order_id.is_empty() || envelope.event_type.is_empty() {
        return Err(anyhow_like::Error);
    }
    Ok(())
}

/// The mapper as a `static`, and a boxed error.
#[inbox_handler(consumer = "inventory.release-stock", mapper = &MAPPER)]
async fn release_stock(
    _uow: &UnitOfWork<InventoryEvent>,
    _event: OrderPlacedV2,
    _: &Envelope,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    Ok(())
}

mod anyhow_like {
    /// A handler error.
    #[derive(Debug, thiserror::Error)]
    #[error("failed")]
    pub struct Error;
}

fn main() {
    let _ = <reserve_stock as InboxHandler>::mapper();
    let _ = <release_stock as InboxHandler>::mapper();
    let mut routes: Vec<_> = HandlerRegistration::all()
        .map(|r| (r.consumer(), r.event_type(), r.contract(), r.is_upcast()))
        .collect();
    routes.sort();
    assert_eq!(
        routes,
        [
            (
                "inventory.release-stock",
                OrderPlacedV2::EVENT_TYPE,
                OrderPlacedV2::EVENT_TYPE,
                false
            ),
            (
                "inventory.reserve-stock",
                OrderPlacedV1::EVENT_TYPE,
                OrderPlacedV2::EVENT_TYPE,
                true
            ),
            (
                "inventory.reserve-stock",
                OrderPlacedV2::EVENT_TYPE,
                OrderPlacedV2::EVENT_TYPE,
                false
            ),
        ]
    );
}
