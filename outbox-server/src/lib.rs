//! # outbox-server
//!
//! The outbox relay service: the `outbox` binary runs the relays a TOML file describes —
//! polling or log relays, for one or many databases (a relay per tenant database, each
//! with its own leases, metrics label and failures) — with no code of the user's, since
//! outbox rows are self-describing envelopes.
//!
//! ```text
//! outbox run outbox.toml            runs the relays and the HTTP endpoints until SIGTERM
//! outbox check-config outbox.toml   checks a file: every problem, with its key path
//! ```
//!
//! HTTP: `/healthz` (the process), `/readyz` (every relay's database and broker answer
//! and its relay runs; JSON, 503 otherwise), `/metrics` (Prometheus exposition format:
//! every metric of the relays, labelled `relay = <name>`).
//!
//! # Modules, from the bottom up
//! - [`config`]: the file, its environment overrides and its checks;
//! - [`broker`]: the publisher a relay's `[relay.broker]` describes, and its probe;
//! - [`relay`]: one relay, supervised on its own;
//! - [`fleet`]: the relays running now, kept matching the file and its tenant sources;
//! - [`http`]: the operations routes and the Prometheus recorder;
//! - [`console`]: the operator console;
//! - [`service`]: all of it, from start to a graceful stop;
//! - [`cli`]: the `outbox` command line.

pub mod broker;
pub mod cli;
pub mod config;
pub mod console;
pub mod fleet;
pub mod http;
pub mod relay;
pub mod service;

pub use config::{ConfigError, ServerConfig};
pub use service::{Service, ServiceError};
