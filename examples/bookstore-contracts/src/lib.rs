//! Integration-event contracts of the Bookstore example: what the Ordering context tells
//! other teams. This crate is shared with consumer teams; its exported schemas are committed
//! under `schemas/` and checked for breaking changes in CI.
//!
//! ```
//! use bookstore_contracts::{MoneyV1, OrderPlacedV1, OrderedBookV1};
//! use outbox_core::{Envelope, IntegrationEvent};
//! use uuid::Uuid;
//!
//! let placed = OrderPlacedV1 {
//!     order_id: Uuid::now_v7(),
//!     checkout_id: Uuid::now_v7(),
//!     customer_id: Uuid::now_v7(),
//!     books: vec![OrderedBookV1 {
//!         book_id: "dune".into(),
//!         quantity: 2,
//!         unit_price: MoneyV1 { amount: "12.50".into(), currency: "EUR".into() },
//!     }],
//! };
//! let envelope = Envelope::from_event(&placed)?;
//! assert_eq!(envelope.event_type, OrderPlacedV1::EVENT_TYPE);
//! assert_eq!(envelope.aggregate_id, placed.order_id.to_string());
//! # Ok::<(), outbox_core::EncodeError>(())
//! ```

use outbox_core::IntegrationEvent;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

outbox_core::contracts_crate!();

/// An amount of money: a decimal amount in the currency's major unit and an ISO 4217 code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MoneyV1 {
    /// Decimal amount in the major unit, e.g. `12.50`; never a float.
    #[schemars(regex(pattern = r"^(0|[1-9][0-9]*)(\.[0-9]{1,4})?$"))]
    pub amount: String,
    /// ISO 4217 currency code, e.g. `EUR`.
    #[schemars(regex(pattern = r"^[A-Z]{3}$"))]
    pub currency: String,
}

/// One line of an order: a book, how many copies, and the price of one copy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct OrderedBookV1 {
    /// Catalogue id of the book.
    pub book_id: String,
    /// Number of copies, at least 1.
    #[schemars(range(min = 1))]
    pub quantity: u32,
    /// Price of one copy when the order was placed.
    pub unit_price: MoneyV1,
}

/// A customer placed an order: Inventory reserves stock for its books.
#[derive(Debug, Clone, PartialEq, Eq, IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "bookstore.ordering.order-placed.v1", key = order_id)]
pub struct OrderPlacedV1 {
    /// The order.
    pub order_id: Uuid,
    /// The checkout that placed it (unique per order: a double click cannot place two).
    pub checkout_id: Uuid,
    /// The customer who placed it.
    pub customer_id: Uuid,
    /// The ordered books, at least one.
    #[schemars(length(min = 1))]
    pub books: Vec<OrderedBookV1>,
}

/// Why an order was cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum CancellationReasonV1 {
    /// The customer asked for it.
    CustomerRequest,
    /// Payment was declined.
    PaymentFailed,
    /// Stock could not be reserved.
    OutOfStock,
}

/// An order was cancelled: Inventory releases the stock it reserved for it.
#[derive(Debug, Clone, PartialEq, Eq, IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "bookstore.ordering.order-cancelled.v1", key = order_id)]
pub struct OrderCancelledV1 {
    /// The order.
    pub order_id: Uuid,
    /// Why it was cancelled.
    pub reason: CancellationReasonV1,
}
