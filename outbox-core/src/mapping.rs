//! The explicit, reviewed mapping from domain events to integration-event contracts.
//!
//! Aggregates raise *domain* events: internal, free to change. Other services receive
//! *contracts*: versioned, schema-checked. A mapping turns each domain event into zero or
//! more contracts, before commit, inside the business transaction. Dumping domain events to
//! JSON instead would turn every internal rename into another team's broken consumer.
//!
//! Two ways to write a mapping:
//! - `#[derive(DomainEvent)]` on the domain enum, with a `#[domain_event(...)]` on **every**
//!   variant: the contract(s) its payload converts into, a mapping function, or `local` (the
//!   event never leaves the process). A new variant without one does not compile, so no
//!   event is forgotten. Use [`DerivedMapping`] as the mapper. The attribute is described on
//!   the [`DomainEvent`] trait.
//! - A hand-written [`ContractMapper`], whose `match` without a wildcard arm gives the same
//!   exhaustiveness.
//!
//! With the derive:
//!
//! ```
//! use outbox_kernel::clock::ManualClock;
//! use outbox_kernel::mapping::{ContractMapper, ContractSink, DerivedMapping, MapError};
//! use outbox_kernel::{DomainEvent, EnvelopeConfig, IntegrationEvent};
//! use schemars::JsonSchema;
//! use serde::{Deserialize, Serialize};
//!
//! // Contracts, usually in a crate shared with the consumer teams.
//! #[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
//! #[integration_event(name = "bookstore.ordering.order-placed.v1", key = order_id)]
//! pub struct OrderPlacedV1 { pub order_id: u64, pub total_cents: i64 }
//!
//! #[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
//! #[integration_event(name = "bookstore.shipping.order-shipped.v1", key = order_id)]
//! pub struct OrderShippedV1 { pub order_id: u64, pub carrier: String }
//!
//! // Domain events: internal, free to change.
//! pub struct OrderPlaced { pub order_id: u64, pub total_cents: i64 }
//! pub struct OrderShipped { pub order_id: u64, pub carrier: Option<String> }
//!
//! #[derive(DomainEvent)]
//! pub enum OrderingEvent {
//!     /// Converted with `From<&OrderPlaced>`.
//!     #[domain_event(contract = OrderPlacedV1)]
//!     OrderPlaced(OrderPlaced),
//!     /// Mapped by a function, which may emit several contracts, or refuse the event.
//!     #[domain_event(map = map_shipped)]
//!     OrderShipped(OrderShipped),
//!     /// Never leaves the Ordering context.
//!     #[domain_event(local)]
//!     PricesRecalculated { order_id: u64 },
//! }
//!
//! // The reviewed mapping of one event: domain fields to contract fields.
//! impl From<&OrderPlaced> for OrderPlacedV1 {
//!     fn from(event: &OrderPlaced) -> Self {
//!         Self { order_id: event.order_id, total_cents: event.total_cents }
//!     }
//! }
//!
//! fn map_shipped(event: &OrderShipped, out: &mut ContractSink<'_>) -> Result<(), MapError> {
//!     let carrier = event.carrier.clone().ok_or_else(|| MapError::rejected("no carrier"))?;
//!     out.emit(&OrderShippedV1 { order_id: event.order_id, carrier })
//! }
//!
//! let config = EnvelopeConfig::default();
//! let clock = ManualClock::starting_at("2026-03-01T12:00:00Z".parse()?);
//! let mut sink = ContractSink::new(&config, &clock);
//! let events = [
//!     OrderingEvent::OrderPlaced(OrderPlaced { order_id: 7, total_cents: 1999 }),
//!     OrderingEvent::PricesRecalculated { order_id: 7 },
//!     OrderingEvent::OrderShipped(OrderShipped { order_id: 7, carrier: Some("DHL".into()) }),
//! ];
//! for event in &events {
//!     DerivedMapping.map(event, &mut sink)?;
//! }
//! let envelopes = sink.into_envelopes();
//! let types: Vec<&str> = envelopes.iter().map(|e| e.event_type.as_str()).collect();
//! assert_eq!(types, ["bookstore.ordering.order-placed.v1", "bookstore.shipping.order-shipped.v1"]);
//! assert_eq!(envelopes[0].aggregate_id, "7");
//! assert_eq!(events[1].event_name(), "PricesRecalculated");
//! assert!(events[1].is_local());
//!
//! let unshipped = OrderingEvent::OrderShipped(OrderShipped { order_id: 8, carrier: None });
//! let mut sink = ContractSink::new(&config, &clock);
//! assert!(matches!(DerivedMapping.map(&unshipped, &mut sink), Err(MapError::Rejected { .. })));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! By hand:
//!
//! ```
//! use outbox_kernel::clock::SystemClock;
//! use outbox_kernel::mapping::{ContractMapper, ContractSink, MapError};
//! use outbox_kernel::{EnvelopeConfig, IntegrationEvent};
//! # use schemars::JsonSchema;
//! # use serde::{Deserialize, Serialize};
//! # #[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
//! # #[integration_event(name = "bookstore.ordering.order-placed.v1", key = order_id)]
//! # pub struct OrderPlacedV1 { pub order_id: u64 }
//!
//! enum OrderingEvent {
//!     OrderPlaced { order_id: u64 },
//!     /// Local: recalculated prices never leave the Ordering context.
//!     PricesRecalculated,
//! }
//!
//! struct OrderingContracts;
//!
//! impl ContractMapper<OrderingEvent> for OrderingContracts {
//!     fn map(&self, event: &OrderingEvent, out: &mut ContractSink<'_>) -> Result<(), MapError> {
//!         match event {
//!             OrderingEvent::OrderPlaced { order_id } => out.emit(&OrderPlacedV1 { order_id: *order_id }),
//!             OrderingEvent::PricesRecalculated => Ok(()),
//!         }
//!     }
//! }
//!
//! let (config, clock) = (EnvelopeConfig::default(), SystemClock);
//! let mut sink = ContractSink::new(&config, &clock);
//! OrderingContracts.map(&OrderingEvent::OrderPlaced { order_id: 7 }, &mut sink)?;
//! OrderingContracts.map(&OrderingEvent::PricesRecalculated, &mut sink)?;
//! let envelopes = sink.into_envelopes();
//! assert_eq!(envelopes.len(), 1);
//! assert_eq!(envelopes[0].aggregate_id, "7");
//! # Ok::<(), MapError>(())
//! ```

use std::error::Error as StdError;

use crate::clock::Clock;
use crate::envelope::{EncodeError, Envelope, EnvelopeConfig};
use crate::event::IntegrationEvent;
use crate::schedule::Schedule;

/// Maps domain events of type `E` to contracts. Runs before commit, on the business
/// transaction: an error rolls the whole unit of work back.
pub trait ContractMapper<E>: Send + Sync {
    /// Emits the contracts `event` maps to into `out` (none for a local event).
    ///
    /// # Errors
    /// A [`MapError`]; the unit of work is rolled back and nothing is written.
    fn map(&self, event: &E, out: &mut ContractSink<'_>) -> Result<(), MapError>;
}

/// A domain event type that carries its own mapping to contracts. Implement it with
/// `#[derive(DomainEvent)]` (re-exported from this crate under the same name) and map it with
/// [`DerivedMapping`]; the [module documentation](crate::mapping) has a complete example.
///
/// # The derive
/// It applies to an enum. Each variant carries exactly one `#[domain_event(...)]` holding one
/// of:
/// - `contract = C`, repeatable, on a newtype variant `V(Payload)`: each contract `C` (an
///   [`IntegrationEvent`]) is built with `From<&Payload>`, the reviewed place where domain
///   fields become contract fields, and emitted in the order written. A contract that is not
///   an `IntegrationEvent` or lacks the `From` impl is reported on `C`.
/// - `map = path::to::function`: the function emits the contracts itself (any number,
///   through [`ContractSink::emit`]) or refuses the event with [`MapError::rejected`]. It
///   receives the payload of a newtype variant,
///   `fn(&Payload, &mut ContractSink<'_>) -> Result<(), MapError>`, and the whole event for
///   unit, struct and other tuple variants, `fn(&Self, &mut ContractSink<'_>) -> Result<(),
///   MapError>`.
/// - `local`: the event never leaves the process and emits nothing.
///
/// `contract` and `map` do not combine: a mapping function can emit every contract itself,
/// and one place per variant keeps the mapping reviewable. A variant without the attribute,
/// an empty attribute, `local` together with a mapping and `contract` on a variant that is
/// not a newtype are compile errors. Generic enums are accepted (each type parameter must
/// be `Send + 'static`); lifetime parameters are not, as a domain event is `'static`.
///
/// `event_name` returns the variant's name and `is_local` whether it is marked `local`.
///
/// The only attribute on the enum itself is `#[domain_event(crate = "renamed_core")]`, for
/// code that names this crate by another path (a renamed dependency, a re-export).
///
/// A variant that does not say what becomes of it does not compile:
///
/// ```compile_fail
/// use outbox_kernel::DomainEvent;
///
/// #[derive(DomainEvent)]
/// enum OrderingEvent {
///     #[domain_event(local)]
///     PricesRecalculated { order_id: u64 },
///     // error: variant `OrderArchived` is neither mapped nor local
///     OrderArchived { order_id: u64 },
/// }
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not derive `DomainEvent`",
    label = "no derived mapping to contracts",
    note = "derive `DomainEvent` on it, or give the unit of work a mapper (for `#[inbox_handler]`: `mapper = &MyContracts`)"
)]
pub trait DomainEvent: Send + 'static {
    /// Emits the contracts this event maps to into `out` (none for a local event).
    ///
    /// # Errors
    /// A [`MapError`] from a mapping function or from encoding a contract.
    fn map_contracts(&self, out: &mut ContractSink<'_>) -> Result<(), MapError>;

    /// The variant's name, for logs and traces.
    fn event_name(&self) -> &'static str;

    /// Whether this event never leaves the process (marked `local`).
    fn is_local(&self) -> bool;
}

/// The mapper of domain events that derive [`DomainEvent`].
#[derive(Debug, Default, Clone, Copy)]
pub struct DerivedMapping;

impl<E: DomainEvent> ContractMapper<E> for DerivedMapping {
    fn map(&self, event: &E, out: &mut ContractSink<'_>) -> Result<(), MapError> {
        event.map_contracts(out)
    }
}

/// The domain events of a unit of work that raises none, e.g. a consumer handler that only
/// writes business rows. It has no values, so nothing can be raised; it is the default of
/// `outbox_seaorm::UnitOfWork<E = NoEvents>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NoEvents {}

impl DomainEvent for NoEvents {
    fn map_contracts(&self, _out: &mut ContractSink<'_>) -> Result<(), MapError> {
        match *self {}
    }

    fn event_name(&self) -> &'static str {
        match *self {}
    }

    fn is_local(&self) -> bool {
        match *self {}
    }
}

/// Why mapping a domain event failed. The unit of work rolls back.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MapError {
    /// A contract could not be encoded (too large, not serializable).
    #[error(transparent)]
    Encode(#[from] EncodeError),
    /// The mapping refused the event.
    #[error("the mapping rejected the event: {reason}")]
    Rejected {
        /// Why.
        reason: String,
    },
    /// Any other failure of a mapping function.
    #[error("the mapping failed: {0}")]
    Other(#[source] Box<dyn StdError + Send + Sync>),
}

impl MapError {
    /// A mapping refusing an event, with the reason.
    pub fn rejected(reason: impl Into<String>) -> Self {
        Self::Rejected {
            reason: reason.into(),
        }
    }

    /// Wraps any error of a mapping function.
    pub fn other(error: impl StdError + Send + Sync + 'static) -> Self {
        Self::Other(Box::new(error))
    }
}

/// Collects the contracts a mapping emits, as envelopes stamped by the unit of work's clock
/// and checked against its payload limit.
#[derive(Debug)]
pub struct ContractSink<'a> {
    config: &'a EnvelopeConfig,
    clock: &'a dyn Clock,
    envelopes: Vec<Envelope>,
    /// The schedule of each envelope emitted by [`emit_scheduled`](Self::emit_scheduled),
    /// by its position in `envelopes`.
    schedules: Vec<(usize, Schedule)>,
}

impl<'a> ContractSink<'a> {
    /// An empty sink encoding with `config`, stamping `occurred_at` from `clock`.
    pub fn new(config: &'a EnvelopeConfig, clock: &'a dyn Clock) -> Self {
        Self {
            config,
            clock,
            envelopes: Vec::new(),
            schedules: Vec::new(),
        }
    }

    /// Emits one contract.
    ///
    /// # Errors
    /// [`MapError::Encode`] when the contract is over the payload limit or cannot be
    /// serialized.
    pub fn emit<C: IntegrationEvent>(&mut self, contract: &C) -> Result<(), MapError> {
        let envelope = self.config.encode_at(contract, self.clock.now())?;
        self.envelopes.push(envelope);
        Ok(())
    }

    /// Emits one contract due later: for a domain event that carries its own time ("the
    /// payment deadline is 18:00"), the mapping says when its contract is due. A schedule
    /// given here wins over the one the event was raised with
    /// ([`RaiseLater`](crate::raise::RaiseLater)).
    ///
    /// # Errors
    /// As [`emit`](Self::emit).
    pub fn emit_scheduled<C: IntegrationEvent>(
        &mut self,
        contract: &C,
        schedule: Schedule,
    ) -> Result<(), MapError> {
        self.emit(contract)?;
        self.schedules.push((self.envelopes.len() - 1, schedule));
        Ok(())
    }

    /// Number of contracts emitted so far.
    pub fn len(&self) -> usize {
        self.envelopes.len()
    }

    /// Whether nothing was emitted.
    pub fn is_empty(&self) -> bool {
        self.envelopes.is_empty()
    }

    /// The emitted envelopes, in emission order (schedules dropped: see
    /// [`into_scheduled_envelopes`](Self::into_scheduled_envelopes)).
    pub fn into_envelopes(self) -> Vec<Envelope> {
        self.envelopes
    }

    /// The emitted envelopes in emission order, each with the schedule
    /// [`emit_scheduled`](Self::emit_scheduled) gave it.
    pub fn into_scheduled_envelopes(self) -> Vec<(Envelope, Option<Schedule>)> {
        let mut schedules = self.schedules.into_iter().peekable();
        self.envelopes
            .into_iter()
            .enumerate()
            .map(|(index, envelope)| {
                let schedule = schedules.next_if(|(at, _)| *at == index).map(|(_, s)| s);
                (envelope, schedule)
            })
            .collect()
    }
}
