use outbox_kernel::{ContractRegistry, IntegrationEvent};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A book was added to the catalogue.
///
/// Consumers index it for search.
#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "bookstore.catalog.book-added.v1", key = book_id)]
pub struct BookAddedV1 {
    /// The catalogue id of the book.
    pub book_id: String,
}

#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "bookstore.catalog.book-removed.v1", key = book_id)]
pub struct BookRemovedV1 {
    pub book_id: String,
}

fn main() {
    let registry = ContractRegistry::collect().unwrap();
    let added = registry.get(BookAddedV1::EVENT_TYPE).unwrap();
    assert_eq!(
        added.description,
        "A book was added to the catalogue.\n\nConsumers index it for search."
    );
    assert_eq!(
        added.json_schema().to_value()["description"],
        added.description
    );
    assert!(
        added.rust_type.ends_with("::BookAddedV1"),
        "{}",
        added.rust_type
    );

    let removed = registry.get(BookRemovedV1::EVENT_TYPE).unwrap();
    assert_eq!(removed.description, "");
    assert_eq!(removed.aggregate_type, "book");
}
