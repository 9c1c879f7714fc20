//! # outbox-seaorm
//!
//! The transactional outbox on SeaORM, for SQLite, PostgreSQL and MySQL / MariaDB.
//!
//! Aggregates raise domain events through [`Raise`](outbox_core::Raise); a [`UnitOfWork`]
//! — a SeaORM transaction with an event buffer — collects them while business code writes
//! its rows *on the unit of work*; [`UnitOfWork::commit`] maps the events to versioned
//! contracts, writes them as outbox rows **in the same transaction**, and commits. Either
//! the business change and its events are both stored, or neither is.
//!
// The example runs on in-memory SQLite: without the `sqlite` feature it only compiles.
#![cfg_attr(feature = "sqlite", doc = "```")]
#![cfg_attr(not(feature = "sqlite"), doc = "```no_run")]
//! use std::time::Duration;
//!
//! use outbox_core::mapping::{ContractMapper, ContractSink, MapError};
//! use outbox_core::{IntegrationEvent, Raise};
//! use outbox_seaorm::record::OutboxRecord;
//! use outbox_seaorm::{Outbox, schema};
//! use sea_orm::{ConnectOptions, ConnectionTrait, Database, EntityTrait, Set};
//! # use schemars::JsonSchema;
//! # use serde::{Deserialize, Serialize};
//!
//! // A contract other services consume.
//! #[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
//! #[integration_event(name = "bookstore.ordering.order-placed.v1", key = order_id)]
//! pub struct OrderPlacedV1 {
//!     pub order_id: String,
//! }
//!
//! // Domain events, and the explicit mapping to contracts (a `match` without wildcard).
//! pub enum OrderingEvent {
//!     OrderPlaced { order_id: String },
//! }
//!
//! pub struct OrderingContracts;
//!
//! impl ContractMapper<OrderingEvent> for OrderingContracts {
//!     fn map(&self, event: &OrderingEvent, out: &mut ContractSink<'_>) -> Result<(), MapError> {
//!         match event {
//!             OrderingEvent::OrderPlaced { order_id } => {
//!                 out.emit(&OrderPlacedV1 { order_id: order_id.clone() })
//!             }
//!         }
//!     }
//! }
//!
//! // The aggregate: pure domain code, no SeaORM.
//! fn place_order(ctx: &impl Raise<OrderingEvent>, order_id: &str) -> String {
//!     ctx.raise(OrderingEvent::OrderPlaced { order_id: order_id.to_owned() });
//!     order_id.to_owned()
//! }
//!
//! // A business table.
//! mod order {
//!     use sea_orm::entity::prelude::*;
//!
//!     #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
//!     #[sea_orm(table_name = "orders")]
//!     pub struct Model {
//!         #[sea_orm(primary_key, auto_increment = false)]
//!         pub id: String,
//!     }
//!
//!     #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
//!     pub enum Relation {}
//!
//!     impl ActiveModelBehavior for ActiveModel {}
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // In-memory SQLite lives on its only connection: keep exactly one, forever.
//! let mut options = ConnectOptions::new("sqlite::memory:");
//! options
//!     .max_connections(1)
//!     .min_connections(1)
//!     .idle_timeout(None::<Duration>)
//!     .max_lifetime(None::<Duration>);
//! let db = Database::connect(options).await?;
//!
//! let outbox = Outbox::default();
//! schema::install(&db, &outbox).await?;
//! db.execute_unprepared("CREATE TABLE orders (id TEXT PRIMARY KEY)").await?;
//!
//! // The application service.
//! let uow = outbox.begin(&db, &OrderingContracts).await?;
//! let id = place_order(&uow, "order-42");
//! order::Entity::insert(order::ActiveModel { id: Set(id) }).exec(&uow).await?;
//! let report = uow.commit().await?;
//! assert_eq!(report.rows, 1);
//!
//! assert_eq!(OutboxRecord::count(&db, &outbox).await?, 1);
//! let stored = OutboxRecord::list(&db, &outbox, 10).await?;
//! assert_eq!(stored[0].envelope.event_type, "bookstore.ordering.order-placed.v1");
//! assert_eq!(stored[0].envelope.aggregate_id, "order-42");
//! # Ok(())
//! # }
//! ```
//!
//! The closure form commits when the closure returns `Ok` and rolls back on `Err`:
//! `outbox.transaction(&db, &OrderingContracts, async |uow| { … }).await`.
//!
//! # Modules
//!
//! - [`config`]: [`Outbox`], the shared configuration, and its builder (table names, column
//!   naming, partitions, chunk sizes, clock, `NOTIFY` channel, trace hook);
//! - [`unit_of_work`]: [`UnitOfWork`], the before-commit hook, the closure form;
//! - [`schema`]: the tables on each backend, [`schema::install`]; [`migration`]: the same as
//!   `sea-orm-migration` migrations;
//! - [`table`]: validated table names and the Debezium column naming;
//! - [`partition`]: the partition function (FNV-1a), spelled out for other languages;
//! - [`record`]: reading outbox rows back;
//! - [`relay`]: the [`Relay`](relay::Relay) that publishes the rows (claiming, leases,
//!   retries, dead letters, `NOTIFY` wake-up) and the [fast path](relay::fast_path);
//! - [`job`]: job-queue mode — no broker, the relay runs each row as a local job by event
//!   type ([`JobDispatcher`](job::JobDispatcher)), restricted by worker keys, with a
//!   per-row `retryable` flag, `failed` rows and an alert hook;
//! - [`inbox`]: consumer handlers (`#[inbox_handler]`), each `(message_id, consumer)`
//!   applied once in the handler's own transaction; the [`Consumer`](inbox::Consumer)
//!   dispatcher with retries and the consumer dead-letter table;
//! - [`ops`]: status, dead letters, requeue / skip, retention cleanup (and the `cli`
//!   feature's command line, module `cli`);
//! - [`outage`]: how every long-running loop backs off and what it logs while its database
//!   keeps failing ([`outage::DatabaseOutage`]);
//! - [`trace`]: W3C trace context (the `otel` feature reads the current span's);
//! - [`wakeup`]: how a commit on PostgreSQL wakes up listening relays ([`PostgresWakeup`]:
//!   after commit, coalesced — the default —, in the transaction, or off);
//! - [`error`]: [`CommitError`], [`UnitOfWorkError`];
//! - `testing` (feature `testing`): the test kit — relay and consumers run until idle,
//!   typed assertions on what was published, injected crashes, a manual clock.
//!
//! # No bypass
//!
//! No public API writes an outbox row except [`UnitOfWork::commit`], which writes on the
//! unit of work's own transaction: the row-writing code is private, there is no outbox
//! entity or `ActiveModel`, and [`OutboxRecord`](record::OutboxRecord) can be read but not
//! built outside this crate. Reading is public:
//!
//! ```
//! # async fn relay(txn: &sea_orm::DatabaseTransaction, outbox: &outbox_seaorm::Outbox) -> Result<(), sea_orm::DbErr> {
//! let pending = outbox_seaorm::record::OutboxRecord::list(txn, outbox, 100).await?;
//! # let _ = pending; Ok(()) }
//! ```
//!
//! Writing rows directly does not compile — neither through the private insert code:
//!
//! ```compile_fail
//! # async fn relay(txn: &sea_orm::DatabaseTransaction, outbox: &outbox_seaorm::Outbox) -> Result<(), sea_orm::DbErr> {
//! outbox_seaorm::sql::insert::insert(txn, outbox, Vec::new(), None).await?;
//! # Ok(()) }
//! ```
//!
//! nor by building a row to insert:
//!
//! ```compile_fail
//! # fn forge(record: &outbox_seaorm::record::OutboxRecord) -> outbox_seaorm::record::OutboxRecord {
//! outbox_seaorm::record::OutboxRecord { seq: 0, ..record.clone() }
//! # }
//! ```
//!
//! while the same function that only reads the record compiles:
//!
//! ```
//! # fn forge(record: &outbox_seaorm::record::OutboxRecord) -> outbox_seaorm::record::OutboxRecord {
//! outbox_seaorm::record::OutboxRecord::clone(record)
//! # }
//! ```
//!
//! nor through an outbox entity, because there is none:
//!
//! ```compile_fail
//! use outbox_seaorm::entity::outbox::ActiveModel;
//! ```
//!
//! # Cargo features
//!
//! - `postgres`, `mysql` (MySQL and MariaDB), `sqlite`: the backends, one SQLx driver each;
//!   none is on by default (like SeaORM's own `sqlx-*` features), so a service compiles only
//!   the drivers of the databases it uses.
//! - `migration`: the `sea-orm-migration` migrations of the tables (module `migration`).
//! - `cli`: the embeddable `outbox` operations command line (`status`, `dead list|show`,
//!   `requeue`, `skip`, `purge`, `purge-inbox`), with clap.
//! - `testing`: the test kit of module `testing`, for a service's own integration tests
//!   (add it under `[dev-dependencies]`).
//! - `otel`: `trace::current_span_context` reads the OpenTelemetry context of the current
//!   `tracing` span (through `tracing-opentelemetry`) and becomes the default trace hook.

// A build with some of the backends leaves the others' code unused (the `LISTEN` task, the
// positional PostgreSQL decoder, the migrations' `DROP` statements): not worth a warning.
#![cfg_attr(
    not(all(
        feature = "postgres",
        feature = "mysql",
        feature = "sqlite",
        feature = "migration"
    )),
    allow(dead_code, unused_imports)
)]

mod backend;
pub mod budget;
pub mod config;
pub mod error;
#[cfg(feature = "log-relay-mariadb")]
mod gtid;
pub mod inbox;
pub mod job;
mod lease;
pub mod limits;
#[cfg(feature = "migration")]
pub mod migration;
pub mod ops;
pub mod outage;
pub mod partition;
pub mod periodic;
pub mod record;
pub mod relay;
mod retention;
pub mod schedule;
pub mod schema;
mod sql;
mod status;
mod status_report;
pub mod table;
#[cfg(feature = "testing")]
pub mod testing;
pub mod trace;
pub(crate) mod transaction;
pub mod unit_of_work;
pub mod wakeup;

#[cfg(feature = "cli")]
pub mod cli;

pub use config::{ConfigError, Outbox, OutboxBuilder, Periodic, WriteMode};
pub use error::{CommitError, ScheduleProblem, UnitOfWorkError};
pub use outbox_core as core;
pub use unit_of_work::{
    AlreadyEnqueued, CommitReport, CommitWakeup, MapperRef, UnitOfWork, UnitOfWorkBuilder,
    UnitOfWorkConnection,
};
pub use wakeup::PostgresWakeup;

/// Turns an `async fn(uow: &UnitOfWork<E>, event: Contract[, envelope: &Envelope]) ->
/// Result<(), Error>` into an inbox handler of a consumer: see [`inbox`] and
/// [`inbox::InboxHandler`].
pub use outbox_macros::inbox_handler;

// Support for the code `#[inbox_handler]` generates, under a name carrying the version (as
// `outbox_core::__private_0_1_0`): a macros crate of another version fails to compile.
#[doc(hidden)]
#[path = "__private.rs"]
pub mod __private_0_1_0;
