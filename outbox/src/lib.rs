//! # outbox
//!
//! Reliable integration events for Rust services built on SeaORM. A service commits its
//! business change and the events other services must hear about **in one transaction**
//! (the outbox); a relay publishes them to a broker afterwards, at least once, in order per
//! aggregate; a consumer applies each message **once** (the inbox). Contracts are versioned
//! Rust types whose JSON Schemas are exported for consumer teams.
//!
//! This crate is the one dependency a service needs: it re-exports the contracts and
//! envelopes (`outbox-kernel`), the derive macros, the SeaORM integration (`outbox-seaorm`)
//! and, behind features, the broker adapters (`outbox-brokers`).
//!
//! ```toml
//! [dependencies]
//! outbox = { version = "0.1", features = ["postgres", "nats"] }
//! ```
//!
//! | feature | what it adds |
//! |---|---|
//! | `postgres`, `mysql`, `sqlite` | the databases (one SQLx driver each; none by default) |
//! | `log-relay` | [`relay::log`]: publishing from PostgreSQL's write-ahead log |
//! | `log-relay-mariadb` | the same [`relay::log`] on MariaDB's binary log (GTID positions) |
//! | `migration` | `migration`: the tables as `sea-orm-migration` migrations |
//! | `nats`, `rabbitmq`, `kafka`, `redis` | `brokers`: publishers and consumer runners |
//! | `cli` | `cli`: the embeddable `outbox` operations and `schemas` command lines |
//! | `testing` | `testing`: the test kit for a service's own tests |
//! | `otel` | the W3C trace context from the current OpenTelemetry span |
//!
//! Everything is also reachable through the crates it re-exports; their documentation is
//! the reference (defaults, errors, guarantees).

// What the derives generate names this crate `::outbox` in its own tests and doc tests.
extern crate self as outbox;

pub use outbox_core::*;

pub use outbox_seaorm::{
    CommitError, CommitReport, CommitWakeup, ConfigError, MapperRef, Outbox, OutboxBuilder,
    Periodic, PostgresWakeup, ScheduleProblem, UnitOfWork, UnitOfWorkBuilder, UnitOfWorkConnection,
    UnitOfWorkError, WriteMode, config, error, inbox, inbox_handler, limits, ops, outage,
    partition, periodic, record, relay, table, trace, unit_of_work, wakeup,
};

/// Job-queue mode: no broker, the relay runs each row as a local job by event type.
pub use outbox_seaorm::job;

/// The tables (DDL, [`install`](schema::install)) and the contracts' JSON Schemas
/// ([`export`](schema::export) for consumer teams).
pub mod schema {
    pub use outbox_core::schema::*;
    pub use outbox_seaorm::schema::*;
}

/// Events due later: [`Schedule`](schedule::Schedule) and [`Due`](schedule::Due), taken by
/// [`RaiseLater`]; how rows wait and when they move is in
/// [`outbox_seaorm::schedule`].
pub mod schedule {
    pub use outbox_core::schedule::*;
}

/// The tables as `sea-orm-migration` migrations.
#[cfg(feature = "migration")]
pub use outbox_seaorm::migration;

/// The test kit: relay and consumers run until idle, typed assertions, injected crashes.
#[cfg(feature = "testing")]
pub use outbox_seaorm::testing;

/// The embeddable `outbox` operations command line, and the `schemas` one in
/// [`cli::schemas`].
#[cfg(feature = "cli")]
pub mod cli {
    pub use outbox_seaorm::cli::*;

    /// The `schemas` command line: list, export and check the contracts.
    pub use outbox_core::cli as schemas;
}

/// Broker adapters: NATS JetStream, RabbitMQ, Kafka, Redis Streams.
#[cfg(any(
    feature = "nats",
    feature = "rabbitmq",
    feature = "kafka",
    feature = "redis"
))]
pub use outbox_brokers as brokers;

// The paths the derive macros generate when a crate depends on this one.
#[doc(hidden)]
pub use outbox_core as __kernel;
#[doc(hidden)]
pub use outbox_seaorm as __seaorm;
