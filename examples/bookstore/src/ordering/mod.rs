//! The Ordering context: the [`Order`] aggregate, its domain events, the explicit mapping of
//! those events to the published contracts, the `orders` / `order_lines` tables and the
//! [`PlaceOrder`] command handler.
//!
//! The aggregate is pure domain code: it takes `&impl Raise<OrderingEvent>` and never names
//! SeaORM, the outbox or a broker. Which contract each domain event becomes is decided by
//! `#[derive(DomainEvent)]` on [`OrderingEvent`] and the `From` impls below — one reviewed
//! place where domain fields become contract fields.

pub mod entity;
mod handler;

use bookstore_contracts::{
    CancellationReasonV1, MoneyV1, OrderCancelledV1, OrderPlacedV1, OrderedBookV1,
};
use outbox_core::{DomainEvent, Raise};
use uuid::Uuid;

pub use handler::{
    PlaceOrderError, cancel_order, count_orders, create_tables, insert_order, place_order,
};

/// One line of a checkout: a book, how many copies, the price of one copy in cents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderLine {
    /// Catalogue id of the book (`dune`).
    pub book_id: String,
    /// Copies, at least one.
    pub quantity: u32,
    /// Price of one copy in the currency's minor unit (cents).
    pub unit_price_cents: i64,
}

/// The command a checkout sends: place an order for these books.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlaceOrder {
    /// The checkout submitting it; a second submission of the same checkout (a double
    /// click) must not place a second order.
    pub checkout_id: Uuid,
    /// The customer.
    pub customer_id: Uuid,
    /// What is ordered, at least one line.
    pub lines: Vec<OrderLine>,
    /// ISO 4217 currency of the prices (`EUR`).
    pub currency: String,
}

impl PlaceOrder {
    /// A checkout of `copies` copies of Dune at 12.50 EUR, by `customer_id`.
    pub fn dune(checkout_id: Uuid, customer_id: Uuid, copies: u32) -> Self {
        Self {
            checkout_id,
            customer_id,
            lines: vec![OrderLine {
                book_id: "dune".to_owned(),
                quantity: copies,
                unit_price_cents: 1250,
            }],
            currency: "EUR".to_owned(),
        }
    }
}

/// Where an order stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrderStatus {
    /// Placed, stock not yet known.
    Placed,
    /// Cancelled; nothing more happens to it.
    Cancelled,
}

impl OrderStatus {
    /// The value stored in `orders.status`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Placed => "placed",
            Self::Cancelled => "cancelled",
        }
    }

    /// The status stored as `value`, if it is one.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "placed" => Some(Self::Placed),
            "cancelled" => Some(Self::Cancelled),
            _ => None,
        }
    }
}

/// Why an order was cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancellationReason {
    /// The customer asked for it.
    CustomerRequest,
    /// Payment was declined.
    PaymentFailed,
    /// Stock could not be reserved.
    OutOfStock,
}

/// What the Ordering rules refuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OrderingError {
    /// A checkout without books.
    #[error("an order needs at least one book")]
    NoBooks,
    /// A line with zero copies.
    #[error("book `{book_id}`: at least one copy must be ordered")]
    NoCopies {
        /// The book.
        book_id: String,
    },
    /// A negative price.
    #[error("book `{book_id}`: a price cannot be negative")]
    NegativePrice {
        /// The book.
        book_id: String,
    },
    /// Cancelling twice.
    #[error("order {order_id} is already cancelled")]
    AlreadyCancelled {
        /// The order.
        order_id: Uuid,
    },
}

/// The order aggregate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Order {
    /// UUIDv7, chosen when the order is placed.
    pub id: Uuid,
    /// The checkout that placed it (unique).
    pub checkout_id: Uuid,
    /// The customer.
    pub customer_id: Uuid,
    /// ISO 4217 currency of the prices.
    pub currency: String,
    /// The ordered books.
    pub lines: Vec<OrderLine>,
    /// Where it stands.
    pub status: OrderStatus,
}

impl Order {
    /// Places an order for the checkout and raises [`OrderPlaced`].
    ///
    /// # Errors
    /// [`OrderingError`] when the checkout has no books, a line has no copies, or a price
    /// is negative; nothing is raised then.
    pub fn place(
        ctx: &impl Raise<OrderingEvent>,
        command: PlaceOrder,
    ) -> Result<Order, OrderingError> {
        if command.lines.is_empty() {
            return Err(OrderingError::NoBooks);
        }
        for line in &command.lines {
            if line.quantity == 0 {
                return Err(OrderingError::NoCopies {
                    book_id: line.book_id.clone(),
                });
            }
            if line.unit_price_cents < 0 {
                return Err(OrderingError::NegativePrice {
                    book_id: line.book_id.clone(),
                });
            }
        }
        let order = Order {
            id: Uuid::now_v7(),
            checkout_id: command.checkout_id,
            customer_id: command.customer_id,
            currency: command.currency,
            lines: command.lines,
            status: OrderStatus::Placed,
        };
        ctx.raise(OrderingEvent::OrderPlaced(OrderPlaced {
            order_id: order.id,
            checkout_id: order.checkout_id,
            customer_id: order.customer_id,
            currency: order.currency.clone(),
            lines: order.lines.clone(),
        }));
        Ok(order)
    }

    /// Cancels the order and raises [`OrderCancelled`].
    ///
    /// # Errors
    /// [`OrderingError::AlreadyCancelled`]; nothing is raised then.
    pub fn cancel(
        &mut self,
        ctx: &impl Raise<OrderingEvent>,
        reason: CancellationReason,
    ) -> Result<(), OrderingError> {
        if self.status == OrderStatus::Cancelled {
            return Err(OrderingError::AlreadyCancelled { order_id: self.id });
        }
        self.status = OrderStatus::Cancelled;
        ctx.raise(OrderingEvent::OrderCancelled(OrderCancelled {
            order_id: self.id,
            reason,
        }));
        Ok(())
    }
}

/// Domain event: an order was placed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderPlaced {
    /// The order.
    pub order_id: Uuid,
    /// The checkout.
    pub checkout_id: Uuid,
    /// The customer.
    pub customer_id: Uuid,
    /// Currency of the prices.
    pub currency: String,
    /// The ordered books.
    pub lines: Vec<OrderLine>,
}

/// Domain event: an order was cancelled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderCancelled {
    /// The order.
    pub order_id: Uuid,
    /// Why.
    pub reason: CancellationReason,
}

/// The domain events of the Ordering context. Every variant says which contract it becomes
/// (a new variant that says nothing does not compile).
#[derive(Debug, Clone, PartialEq, Eq, DomainEvent)]
pub enum OrderingEvent {
    /// Leaves the context as `bookstore.ordering.order-placed.v1`.
    #[domain_event(contract = OrderPlacedV1)]
    OrderPlaced(OrderPlaced),
    /// Leaves the context as `bookstore.ordering.order-cancelled.v1`.
    #[domain_event(contract = OrderCancelledV1)]
    OrderCancelled(OrderCancelled),
}

/// `1250` cents → `"12.50"`: the contract carries decimal strings, never floats.
pub fn format_cents(cents: i64) -> String {
    let sign = if cents < 0 { "-" } else { "" };
    let cents = cents.unsigned_abs();
    format!("{sign}{}.{:02}", cents / 100, cents % 100)
}

/// The reviewed mapping of a placed order to its contract.
impl From<&OrderPlaced> for OrderPlacedV1 {
    fn from(event: &OrderPlaced) -> Self {
        OrderPlacedV1 {
            order_id: event.order_id,
            checkout_id: event.checkout_id,
            customer_id: event.customer_id,
            books: event
                .lines
                .iter()
                .map(|line| OrderedBookV1 {
                    book_id: line.book_id.clone(),
                    quantity: line.quantity,
                    unit_price: MoneyV1 {
                        amount: format_cents(line.unit_price_cents),
                        currency: event.currency.clone(),
                    },
                })
                .collect(),
        }
    }
}

/// The reviewed mapping of a cancellation to its contract.
impl From<&OrderCancelled> for OrderCancelledV1 {
    fn from(event: &OrderCancelled) -> Self {
        OrderCancelledV1 {
            order_id: event.order_id,
            reason: match event.reason {
                CancellationReason::CustomerRequest => CancellationReasonV1::CustomerRequest,
                CancellationReason::PaymentFailed => CancellationReasonV1::PaymentFailed,
                CancellationReason::OutOfStock => CancellationReasonV1::OutOfStock,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use outbox_core::RecordedEvents;

    use super::*;

    #[test]
    fn placing_raises_order_placed_and_cancelling_raises_order_cancelled() {
        let events = RecordedEvents::new();
        let mut order = Order::place(&events, PlaceOrder::dune(Uuid::now_v7(), Uuid::now_v7(), 2))
            .expect("valid checkout");
        order
            .cancel(&events, CancellationReason::CustomerRequest)
            .expect("placed orders can be cancelled");
        assert_eq!(
            order.cancel(&events, CancellationReason::CustomerRequest),
            Err(OrderingError::AlreadyCancelled { order_id: order.id })
        );
        let events = events.take();
        assert_eq!(events.len(), 2);
        let OrderingEvent::OrderPlaced(placed) = &events[0] else {
            panic!("first event: {:?}", events[0]);
        };
        let contract = OrderPlacedV1::from(placed);
        assert_eq!(contract.order_id, order.id);
        assert_eq!(contract.books[0].unit_price.amount, "12.50");
        assert!(matches!(events[1], OrderingEvent::OrderCancelled(_)));
    }

    #[test]
    fn invalid_checkouts_raise_nothing() {
        let events = RecordedEvents::new();
        let mut empty = PlaceOrder::dune(Uuid::now_v7(), Uuid::now_v7(), 1);
        empty.lines.clear();
        assert_eq!(Order::place(&events, empty), Err(OrderingError::NoBooks));
        let zero = PlaceOrder::dune(Uuid::now_v7(), Uuid::now_v7(), 0);
        assert!(matches!(
            Order::place(&events, zero),
            Err(OrderingError::NoCopies { .. })
        ));
        assert!(events.take().is_empty());
    }

    #[test]
    fn cents_are_formatted_as_decimals() {
        assert_eq!(format_cents(1250), "12.50");
        assert_eq!(format_cents(5), "0.05");
        assert_eq!(format_cents(-1999), "-19.99");
    }
}
