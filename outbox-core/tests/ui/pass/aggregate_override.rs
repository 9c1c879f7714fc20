use outbox_kernel::IntegrationEvent;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(
    name = "bookstore.lending.loan-opened.v1",
    key = "copy_id",
    aggregate = "book-copy"
)]
pub struct LoanOpenedV1 {
    pub copy_id: String,
    pub member_id: u64,
}

// A key without `_id` is its own aggregate type.
#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "bookstore.catalog.book-priced.v2", key = isbn)]
pub struct BookPricedV2 {
    pub isbn: String,
    pub price_cents: u32,
}

fn main() {
    assert_eq!(LoanOpenedV1::AGGREGATE_TYPE, "book-copy");
    assert_eq!(LoanOpenedV1::KEY_FIELD, "copy_id");
    let event = LoanOpenedV1 {
        copy_id: "c-9".to_owned(),
        member_id: 3,
    };
    assert_eq!(event.aggregate_id(), "c-9");

    assert_eq!(BookPricedV2::AGGREGATE_TYPE, "isbn");
    assert_eq!(BookPricedV2::VERSION, 2);
    let event = BookPricedV2 {
        isbn: "978-0441013593".to_owned(),
        price_cents: 999,
    };
    assert_eq!(event.aggregate_id(), "978-0441013593");
}
