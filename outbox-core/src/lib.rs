//! # outbox-core
//!
//! Versioned integration-event contracts and everything about them that does not touch a
//! database: the [`IntegrationEvent`] trait and its derive, the explicit [`mapping`] from
//! domain events to contracts (with the [`DomainEvent`](trait@DomainEvent) derive), the
//! [`Envelope`] that carries an event with its metadata, the CloudEvents 1.0 binary-mode
//! header mapping every broker adapter shares, the contract [`registry`], JSON Schema /
//! AsyncAPI [`schema`] export and the breaking-change [`compat`] check.
//!
//! For relays and brokers: the [`Publisher`] contract with its classified
//! [`PublishError`] ([`publish`]), an [`in_process`] broker for tests and demos, the relay
//! [`policy`] types (ordering, dead-letter policy, backoff with jitter) and the [`metric`]
//! names. Without a broker, the [`job`] dispatcher is the publisher: it runs each row as a
//! local job by event type (job-queue mode).
//!
//! ```
//! use outbox_kernel::{Envelope, IntegrationEvent};
//! use schemars::JsonSchema;
//! use serde::{Deserialize, Serialize};
//!
//! /// A book was added to the catalogue.
//! #[derive(Debug, PartialEq, IntegrationEvent, Serialize, Deserialize, JsonSchema)]
//! #[integration_event(name = "bookstore.catalog.book-added.v1", key = book_id)]
//! pub struct BookAddedV1 {
//!     pub book_id: String,
//!     pub title: String,
//! }
//!
//! let event = BookAddedV1 { book_id: "dune".into(), title: "Dune".into() };
//! let envelope = Envelope::from_event(&event)?;
//! assert_eq!(envelope.event_type, "bookstore.catalog.book-added.v1");
//! assert_eq!(envelope.aggregate_type, "book");
//! assert_eq!(envelope.aggregate_id, "dune");
//!
//! let back: BookAddedV1 = envelope.decode()?;
//! assert_eq!(back, event);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod clock;
pub mod cloudevents;
pub mod compat;
pub mod consumed;
pub mod envelope;
mod event;
pub mod expectations;
pub mod in_process;
pub mod job;
pub mod mapping;
pub mod metric;
pub mod name;
pub mod payload;
pub mod policy;
pub mod publish;
pub mod registry;
pub mod schedule;
pub mod schema;

#[cfg(feature = "cli")]
pub mod cli;

// Support for the code `outbox-macros` generates, which names it by this versioned name
// (`__private_` and the crate version, see `outbox-macros/src/runtime.rs`): a macros crate of
// another version finds no such module and fails to compile, instead of calling support code
// written for another version. A version bump renames it (the test in `private.rs` says so).
#[doc(hidden)]
#[path = "private.rs"]
pub mod __private_0_1_0;

// The same module under a stable name, for code built with this very version of the crate:
// `contracts_crate!`, outbox-seaorm's runtime and the tests. Generated code never uses it.
#[doc(hidden)]
pub use self::__private_0_1_0 as __private;

pub use envelope::{DecodeError, EncodeError, Envelope, EnvelopeConfig};
pub use event::IntegrationEvent;
pub use mapping::DomainEvent;
pub use payload::Payload;
pub use publish::{PublishError, Publisher};
pub use registry::{ContractRegistration, ContractRegistry, RegistryError};

/// Derives [`IntegrationEvent`](trait@IntegrationEvent) for a contract struct or serde-tagged
/// enum. See the trait's documentation for the attribute syntax.
pub use outbox_macros::IntegrationEvent;

/// Derives [`DomainEvent`](trait@DomainEvent) for a domain event enum: the exhaustive mapping
/// of its variants to contracts. See the trait's documentation for the attribute syntax.
pub use outbox_macros::DomainEvent;

pub mod raise;
pub use raise::{Raise, RaiseLater, RecordedEvents};
