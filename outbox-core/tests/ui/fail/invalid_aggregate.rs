use outbox_kernel::IntegrationEvent;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "bookstore.ordering.order-placed.v1", key = order_id, aggregate = "Order")]
pub struct OrderPlacedV1 {
    pub order_id: u64,
}

#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "bookstore.lending.loan-opened.v1", key = copy_id, aggregate = "book_copy")]
pub struct LoanOpenedV1 {
    pub copy_id: u64,
}

// The default aggregate type of a key that is not snake case is not kebab case.
#[allow(non_snake_case)]
#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "bookstore.lending.loan-closed.v1", key = copyId)]
pub struct LoanClosedV1 {
    pub copyId: u64,
}

fn main() {}
