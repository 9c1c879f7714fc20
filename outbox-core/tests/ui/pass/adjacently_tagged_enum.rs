use outbox_kernel::IntegrationEvent;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", content = "data")]
#[integration_event(name = "bookstore.catalog.copy-changed.v12", key = book_copy_id)]
pub enum CopyChangedV12 {
    Shelved { book_copy_id: u32, shelf: String },
    Lent { book_copy_id: u32 },
}

fn main() {
    assert_eq!(
        CopyChangedV12::EVENT_TYPE,
        "bookstore.catalog.copy-changed.v12"
    );
    assert_eq!(CopyChangedV12::NAME, "bookstore.catalog.copy-changed");
    assert_eq!(CopyChangedV12::VERSION, 12);
    assert_eq!(CopyChangedV12::AGGREGATE_TYPE, "book-copy");
    assert_eq!(CopyChangedV12::KEY_FIELD, "book_copy_id");
    let shelved = CopyChangedV12::Shelved {
        book_copy_id: 7,
        shelf: "A3".to_owned(),
    };
    assert_eq!(shelved.aggregate_id(), "7");
    assert_eq!(CopyChangedV12::Lent { book_copy_id: 8 }.aggregate_id(), "8");
}
