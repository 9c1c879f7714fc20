//! JSON Schema (draft 2020-12) and AsyncAPI 3.0 export of the registered contracts.

/// A fresh schema generator configured the way every contract schema is built:
/// draft 2020-12, serialize mode (the shape consumers receive).
pub fn generator() -> schemars::SchemaGenerator {
    schemars::generate::SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator()
}

/// The `$id` of a contract's schema, derived from its event type,
/// e.g. `urn:outbox:contract:bookstore.ordering.order-placed.v1`.
pub fn schema_id(event_type: &str) -> String {
    format!("urn:outbox:contract:{event_type}")
}
