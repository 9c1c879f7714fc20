//! A test kit for services built on the outbox (feature `testing`): run the relay and the
//! consumers until idle, assert typed on what was published, play the two classic crashes,
//! drive time.
//!
//! [`TestKit`] runs, on the service's own database and tables, a [`Relay`](crate::relay::Relay)
//! publishing to an [`InProcessBroker`](outbox_core::in_process::InProcessBroker) and the
//! [`Consumer`](crate::inbox::Consumer)s named in its builder, each receiving every message the
//! broker accepted, in order, and acknowledging a message only once it is settled (as the
//! broker runners do). Nothing runs in the background: [`TestKit::drain_until_idle`] runs
//! rounds — relay, deliveries, redeliveries — until a round does nothing, so a test asserts
//! on a state that no longer moves.
//!
//! - [`TestKit::published`]`::<C>()`: the distinct published messages of contract `C`,
//!   decoded; [`TestKit::published_envelopes`] for envelopes and headers;
//! - [`TestKit::crash`] with a [`Crash`]: the relay dies after publishing and before marking
//!   ([`Crash::AfterPublishBeforeMark`]: the batch is published twice, with the same message
//!   ids), or a consumer dies after its handler and before the inbox commit
//!   ([`Crash::AfterHandlerBeforeCommit`]: the effects roll back, the message comes again).
//!   The kit restarts what crashed and drains on; a crash that was armed but never reached
//!   fails the drain ([`TestKitError::CrashesNotReached`]), so a test cannot pass without
//!   exercising what it meant to;
//! - [`ManualClock`]: give it to the outbox ([`OutboxBuilder::clock`](crate::OutboxBuilder::clock))
//!   and a drain leaves retries in their backoff until the test advances it (to
//!   [`DrainReport::next_retry_due`]).
//!
//! Play broker outages and poison messages on [`TestKit::broker`]
//! ([`InProcessBroker::go_down`](outbox_core::in_process::InProcessBroker::go_down),
//! [`fail_messages`](outbox_core::in_process::InProcessBroker::fail_messages)).
//!
//! ```
//! use std::time::Duration;
//!
//! use outbox_core::mapping::DerivedMapping;
//! use outbox_core::{DomainEvent, IntegrationEvent, Raise};
//! use outbox_seaorm::testing::{Crash, TestKit};
//! use outbox_seaorm::{Outbox, UnitOfWork, inbox_handler, schema};
//! use sea_orm::{ConnectOptions, ConnectionTrait, Database, DbErr, Statement};
//! # use schemars::JsonSchema;
//! # use serde::{Deserialize, Serialize};
//!
//! #[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema, Debug, PartialEq)]
//! #[integration_event(name = "docs.kit.greeted.v1", key = name)]
//! pub struct GreetedV1 {
//!     pub name: String,
//! }
//!
//! impl From<&GreetedV1> for GreetedV1 {
//!     fn from(event: &GreetedV1) -> Self {
//!         GreetedV1 { name: event.name.clone() }
//!     }
//! }
//!
//! #[derive(DomainEvent)]
//! pub enum GreetingEvent {
//!     #[domain_event(contract = GreetedV1)]
//!     Greeted(GreetedV1),
//! }
//!
//! /// Counts greetings, once per message.
//! #[inbox_handler(consumer = "docs.kit.count-greetings")]
//! async fn count(uow: &UnitOfWork, _event: GreetedV1) -> Result<(), DbErr> {
//!     uow.execute_unprepared("UPDATE greetings SET n = n + 1").await?;
//!     Ok(())
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut options = ConnectOptions::new("sqlite::memory:");
//! options.max_connections(1).min_connections(1);
//! options.idle_timeout(None::<Duration>).max_lifetime(None::<Duration>);
//! let db = Database::connect(options).await?;
//! let outbox = Outbox::default();
//! schema::install(&db, &outbox).await?;
//! db.execute_unprepared("CREATE TABLE greetings (n INTEGER)").await?;
//! db.execute_unprepared("INSERT INTO greetings VALUES (0)").await?;
//!
//! let mut kit = TestKit::builder(db.clone(), outbox.clone())
//!     .consumer("docs.kit.count-greetings")
//!     .build()?;
//! let uow = outbox.begin(&db, &DerivedMapping).await?;
//! uow.raise(GreetingEvent::Greeted(GreetedV1 { name: "ada".into() }));
//! uow.commit().await?;
//!
//! kit.crash(Crash::AfterPublishBeforeMark)?; // published twice
//! kit.crash(Crash::after_handler_before_commit("docs.kit.count-greetings"))?;
//! let report = kit.drain_until_idle().await?;
//! assert_eq!(report.crashes, 2);
//! assert_eq!(kit.published::<GreetedV1>()?, [GreetedV1 { name: "ada".into() }]);
//!
//! let n = db
//!     .query_one_raw(Statement::from_string(db.get_database_backend(), "SELECT n FROM greetings"))
//!     .await?
//!     .map(|row| row.try_get::<i32>("", "n"))
//!     .transpose()?;
//! assert_eq!(n, Some(1), "applied once, through two crashes");
//! # Ok(())
//! # }
//! //! ```

mod builder;
mod crash;
mod drain;
mod error;
mod kit;
mod report;

pub use builder::{DEFAULT_MAX_ROUNDS, DEFAULT_STEP_TIMEOUT, TestKitBuilder};
pub use crash::Crash;
pub use error::TestKitError;
pub use kit::{RELAY_INSTANCE_ID, TestKit};
pub use outbox_core::clock::ManualClock;
pub use report::DrainReport;
