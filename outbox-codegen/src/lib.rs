//! # outbox-codegen
//!
//! Rust types for a **consumer** team, generated from the folder a producer team writes with
//! `schemas export` — no dependency on the producer's Rust crate, so the two teams release on
//! their own schedules, and the types cannot drift from the schema because they are made from
//! it. Built on [typify](https://docs.rs/typify) (JSON Schema to Rust).
//!
//! Each contract becomes a module named after its event type holding the contract type (the
//! schema's `title`) and every type it contains, with doc comments from the schema's
//! descriptions. The contract type derives `IntegrationEvent` with the producer's event type,
//! key and aggregate type and the flag `consumed` (it is not exported again as the consumer's
//! own contract), so `#[inbox_handler]` takes it like a hand-written one.
//!
//! Two ways to use it; the consumer team chooses:
//!
//! * **Checked in**: `outbox-schemas generate --from ordering-schemas --out src/ordering.rs`
//!   (the `cli` feature's binary) writes a formatted file to commit and review;
//!   `--check` fails when the file is not what the folder generates (for CI).
//! * **At build time**: [`build_script::generate_into_out_dir`] in `build.rs` writes to
//!   `OUT_DIR`, for `include!`.
//!
//! ```
//! # let dir = tempfile::tempdir()?;
//! # let schemas = dir.path().join("schemas");
//! # std::fs::create_dir_all(&schemas)?;
//! # std::fs::write(dir.path().join("index.json"), r#"{"format_version": 1, "contracts": [
//! #   {"event_type": "shop.ordering.order-paid.v1", "name": "shop.ordering.order-paid",
//! #    "version": 1, "aggregate_type": "order", "key_field": "order_id",
//! #    "rust_type": "shop::OrderPaidV1", "schema": "schemas/shop.ordering.order-paid.v1.json"}]}"#)?;
//! # std::fs::write(schemas.join("shop.ordering.order-paid.v1.json"), r#"{
//! #   "title": "OrderPaidV1", "type": "object", "x-event-type": "shop.ordering.order-paid.v1",
//! #   "description": "An order was paid for.",
//! #   "properties": {"order_id": {"type": "string", "format": "uuid"},
//! #                  "amount_cents": {"type": "integer", "format": "int64"}},
//! #   "required": ["order_id", "amount_cents"]}"#)?;
//! use outbox_codegen::{CodegenConfig, generate};
//!
//! let config = CodegenConfig::builder().kernel_path("outbox_core").build();
//! let code = generate(dir.path(), &config)?;
//! assert!(code.source.contains("pub struct OrderPaidV1"));
//! assert!(code.source.contains("name = \"shop.ordering.order-paid.v1\""));
//! assert!(code.source.contains("/// An order was paid for."));
//! assert_eq!(code.contracts[0].module, "shop_ordering_order_paid_v1");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The generated code names `serde`, `schemars` and, when the schemas use them, `uuid`
//! (`format: uuid`), `chrono` (`format: date-time`) and `regress` (`pattern`): the consumer's
//! crate depends on them.
//!
//! | feature | default | what it adds |
//! |---|---|---|
//! | `cli` | yes | the `outbox-schemas` binary (clap); a build script uses `default-features = false` |
//!
//! The book's "Contracts and schemas" chapter walks through the consumer side end to end.

pub mod build_script;
mod config;
mod contract_type;
mod draft07;
mod error;
pub mod export_folder;
mod generate;

pub use config::{CodegenConfig, CodegenConfigBuilder};
pub use error::GenerateError;
pub use generate::{GeneratedCode, GeneratedContract, generate};
