//! The codegen round trip: producer contracts ([`producer`]) using every construct the
//! `IntegrationEvent` derive exports, their committed export (`schemas/`), and the consumer's
//! types generated from that export by `outbox-codegen` in this crate's build script
//! ([`consumer`]). The tests send producer values through the envelope and decode them with the
//! generated types, field for field.

pub mod producer;

/// The consumer's side: the types `outbox-codegen` generated from `schemas/` (build script,
/// `OUT_DIR`), as a consumer team in another repository would have them.
pub mod consumer {
    include!(concat!(env!("OUT_DIR"), "/consumer.rs"));
}
