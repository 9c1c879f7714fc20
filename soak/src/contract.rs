//! The soak's contract and domain event: a customer placed its order number *n* (the
//! customer is the aggregate; its orders must be applied as 0, 1, 2, …).

use outbox_core::{DomainEvent, IntegrationEvent};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A customer placed an order.
#[derive(Debug, Clone, PartialEq, Eq, IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "soak.shop.customer-ordered.v1", key = customer_id)]
pub struct CustomerOrderedV1 {
    /// The customer (the aggregate).
    pub customer_id: String,
    /// The customer's order number, from 0.
    pub order_no: u32,
}

/// The producer's domain event.
pub struct Ordered(pub CustomerOrderedV1);

impl From<&Ordered> for CustomerOrderedV1 {
    fn from(event: &Ordered) -> Self {
        event.0.clone()
    }
}

/// The producer's domain events.
#[derive(DomainEvent)]
pub enum ShopEvent {
    /// Leaves the context as `CustomerOrderedV1`.
    #[domain_event(contract = CustomerOrderedV1)]
    Ordered(Ordered),
}
