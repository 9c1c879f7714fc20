//! The grammar of versioned event types, e.g. `bookstore.ordering.order-placed.v1`, of
//! consumer names and of worker keys, and the schema `$id` derived from an event type.
//!
//! An event type is at least three lowercase kebab-case segments separated by dots (the
//! name), then a final `v<N>` segment with `N ≥ 1` and no leading zero (the version). A
//! kebab-case segment starts with a lowercase ASCII letter, holds lowercase letters, digits
//! and single hyphens, and does not end with a hyphen.
//!
//! `#[derive(IntegrationEvent)]` applies this grammar at compile time (it lives in the
//! `outbox-names` crate, shared with `outbox-macros` and re-exported here, so both sides
//! agree); [`EventType::parse`] applies it at run time to event types read from a broker or
//! a table.
//!
//! ```
//! use outbox_kernel::name::EventType;
//!
//! let parsed = EventType::parse("bookstore.ordering.order-placed.v1")?;
//! assert_eq!(parsed.name(), "bookstore.ordering.order-placed");
//! assert_eq!(parsed.version(), 1);
//! assert!(EventType::parse("Bookstore.Ordering.OrderPlaced").is_err());
//! # Ok::<(), outbox_kernel::name::EventTypeError>(())
//! ```

pub use outbox_names::{
    CONSUMER_GRAMMAR, ConsumerNameError, EventType, EventTypeError, GRAMMAR, MAX_CONSUMER_CHARS,
    MAX_WORKER_KEY_CHARS, MIN_NAME_SEGMENTS, WORKER_KEY_GRAMMAR, WorkerKeyError,
    check_consumer_name, check_worker_key,
};

/// The `$id` of a contract's JSON Schema, derived from its event type,
/// e.g. `urn:outbox:contract:bookstore.ordering.order-placed.v1`: the exported schema file
/// carries it as `$id`, a CloudEvents message as `ce-dataschema`.
pub fn schema_id(event_type: &str) -> String {
    format!("urn:outbox:contract:{event_type}")
}
