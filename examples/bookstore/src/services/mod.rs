//! The Bookstore as services (feature `services`): three processes, as a team deploys them.
//!
//! - [`ordering_api`]: the Ordering service, an HTTP API (`POST /orders`) that places
//!   orders through a unit of work on PostgreSQL; the order and its outbox row commit
//!   together;
//! - the `outbox` relay service, from `examples/bookstore/services/outbox.toml` (no code of
//!   the Bookstore's: the outbox rows are self-describing envelopes), publishing to NATS;
//! - [`inventory_service`]: the Inventory consumer on MariaDB, reserving stock once per
//!   message through the inbox.
//!
//! [`launcher`] starts the three and stops them together (`bookstore-services up`).

pub mod inventory_service;
pub mod launcher;
pub mod ordering_api;

/// The JetStream stream the relay publishes to and Inventory reads (see `outbox.toml`).
pub const STREAM: &str = "BOOKSTORE";
/// The subjects it captures: every Bookstore event type.
pub const SUBJECTS: &str = "bookstore.>";
/// The relay service's configuration file, relative to the workspace.
pub const RELAY_CONFIG: &str = "examples/bookstore/services/outbox.toml";
