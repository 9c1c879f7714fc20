//! SeaORM integration of the outbox framework.
//!
//! This crate will hold the unit of work (`ctx.raise` and the before-commit hook that writes
//! outbox rows on the business transaction), the outbox and inbox tables, and the relay.
//! For now it only re-exports [`outbox_core`] so that downstream code can already depend on it.
//!
//! ```
//! use outbox_seaorm::core::IntegrationEvent as _;
//! ```

pub use outbox_core as core;
