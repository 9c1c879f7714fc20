//! The inbox: each `(message_id, consumer)` has its effect once.
//!
//! A consumer handler runs in a consumer [`UnitOfWork`] whose first statement inserts the
//! inbox row `(message_id, consumer)`; the handler's business writes and the outbox rows of
//! the events it raises commit **in the same transaction**. A redelivered message finds the
//! row and is skipped ([`InboxOutcome::Duplicate`]); a handler that fails rolls back, inbox
//! row included, so redelivery retries it.
//!
//! Write handlers with [`#[inbox_handler]`](crate::inbox_handler):
//!
// The example runs on in-memory SQLite: without the `sqlite` feature it only compiles.
#![cfg_attr(feature = "sqlite", doc = "```")]
#![cfg_attr(not(feature = "sqlite"), doc = "```no_run")]
//! use outbox_core::{Envelope, IntegrationEvent};
//! use outbox_seaorm::inbox::{self, InboxOutcome};
//! use outbox_seaorm::{Outbox, UnitOfWork, inbox_handler, schema};
//! use sea_orm::{ConnectOptions, ConnectionTrait, Database};
//! # use schemars::JsonSchema;
//! # use serde::{Deserialize, Serialize};
//!
//! #[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
//! #[integration_event(name = "bookstore.ordering.order-placed.v1", key = order_id)]
//! pub struct OrderPlacedV1 {
//!     pub order_id: String,
//!     pub quantity: i64,
//! }
//!
//! #[derive(Debug, thiserror::Error)]
//! #[error("out of stock")]
//! pub struct OutOfStock;
//!
//! /// Reserves stock for a placed order. Still an ordinary function: call it in unit tests.
//! #[inbox_handler(consumer = "inventory.reserve-stock")]
//! async fn reserve_stock(uow: &UnitOfWork, event: OrderPlacedV1) -> Result<(), OutOfStock> {
//!     let sql = format!("UPDATE stock SET reserved = reserved + {}", event.quantity);
//!     uow.execute_unprepared(&sql).await.map_err(|_| OutOfStock)?;
//!     Ok(())
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let mut options = ConnectOptions::new("sqlite::memory:");
//! # options.max_connections(1).min_connections(1)
//! #     .idle_timeout(None::<std::time::Duration>).max_lifetime(None::<std::time::Duration>);
//! let db = Database::connect(options).await?;
//! let outbox = Outbox::default();
//! schema::install(&db, &outbox).await?;
//! db.execute_unprepared("CREATE TABLE stock (reserved INTEGER NOT NULL)").await?;
//! db.execute_unprepared("INSERT INTO stock VALUES (0)").await?;
//!
//! let message = Envelope::from_event(&OrderPlacedV1 { order_id: "o-1".into(), quantity: 2 })?;
//! // The generated wrapper, called twice with the same message: applied once.
//! assert_eq!(inbox::apply::<reserve_stock>(&db, &outbox, &message).await?, InboxOutcome::Applied);
//! assert_eq!(inbox::apply::<reserve_stock>(&db, &outbox, &message).await?, InboxOutcome::Duplicate);
//! # Ok(())
//! # }
//! ```
//!
//! [`Consumer`] dispatches envelopes by event type to every handler registered for a
//! consumer name, retries failed handlers with backoff, and moves what cannot be handled to
//! the consumer's dead-letter table ([`dead_letter`]).

mod consumer;
#[cfg(feature = "testing")]
pub(crate) mod crash_point;
pub mod dead_letter;
mod hold;
pub mod parked;
pub mod partitioned;
mod registration;
mod row;

use std::error::Error as StdError;
use std::future::Future;

use outbox_core::mapping::DomainEvent;
use outbox_core::{DecodeError, Envelope, IntegrationEvent};
use sea_orm::{DatabaseConnection, DbErr};

pub use consumer::builder::{
    ConsumerBuilder, ConsumerConfigError, DEFAULT_INBOX_RETENTION, DEFAULT_INLINE_ATTEMPTS,
    DEFAULT_MAX_ATTEMPTS, DEFAULT_REDELIVERY_WINDOW, DEFAULT_REQUEUE_POLL,
};
pub use consumer::outcome::{
    ConsumerError, DeadLetterReason, Delivered, ParkReason, UnknownEvents, metric,
};
pub use consumer::{Consumer, ParkedReport, RedeliveryReport};
pub use registration::HandlerRegistration;

use crate::config::Outbox;
use crate::error::CommitError;
use crate::unit_of_work::{MapperRef, UnitOfWork};

/// A boxed handler error, as the [`Consumer`] sees every handler's error.
pub type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// A consumer handler, implemented by `#[inbox_handler]` on a type named after the handler
/// function (a braced struct, so it lives in the type namespace and the function stays
/// callable).
///
/// Implement it by hand only to wrap a handler the macro cannot express; the macro also
/// registers the handler for [`Consumer`].
pub trait InboxHandler: Send + Sync + 'static {
    /// The contract the handler consumes.
    type Contract: IntegrationEvent;
    /// The domain events the handler may raise on its unit of work.
    type Event: Send + Sync + 'static;
    /// The handler's error.
    type Error: Into<BoxError> + Send + 'static;

    /// The consumer name: the inbox's dedup scope (`inventory.reserve-stock`).
    const CONSUMER: &'static str;
    /// The handler's path, for logs and errors (`my_crate::inventory::reserve_stock`).
    const HANDLER: &'static str;

    /// The mapper of the events the handler raises.
    fn mapper() -> MapperRef<Self::Event>;

    /// Runs the handler on an open consumer unit of work.
    fn handle<'a>(
        uow: &'a UnitOfWork<Self::Event>,
        event: Self::Contract,
        envelope: &'a Envelope,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'a;
}

/// Names the domain-event type of a `&UnitOfWork<E>` handler argument; lets
/// `#[inbox_handler]` read `E` through type aliases.
#[diagnostic::on_unimplemented(
    message = "the first argument of an inbox handler must be `&UnitOfWork<E>`, found `&{Self}`",
    label = "not a unit of work",
    note = "an inbox handler is `async fn(uow: &UnitOfWork<E>, event: Contract[, envelope: &Envelope]) -> Result<(), Error>`"
)]
pub trait UnitOfWorkArg {
    /// The domain events of the unit of work.
    type Event: Send + Sync + 'static;
}

impl<E: Send + Sync + 'static> UnitOfWorkArg for UnitOfWork<E> {
    type Event = E;
}

/// The mapper of a handler whose unit of work raises derived domain events (the default of
/// `#[inbox_handler]` without `mapper = …`).
pub fn derived_mapper<E: DomainEvent>() -> MapperRef<E> {
    MapperRef::from(&outbox_core::mapping::DerivedMapping)
}

/// What handling one message did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum InboxOutcome {
    /// The handler ran and its transaction (inbox row included) committed.
    Applied,
    /// The inbox already had `(message_id, consumer)`: the handler did not run.
    Duplicate,
}

/// Why [`apply`] did not apply a message. Nothing was committed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InboxError<E> {
    /// The payload is not the handler's contract (wrong type or version, missing or invalid
    /// field, malformed). Detected before `BEGIN`: retrying cannot help.
    #[error("message {message_id} cannot be decoded: {source}")]
    Decode {
        /// The message.
        message_id: uuid::Uuid,
        /// Why.
        #[source]
        source: DecodeError,
    },
    /// The consumer name is not valid (a hand-written [`InboxHandler`]).
    #[error("invalid consumer name `{name}`: {reason}")]
    InvalidConsumer {
        /// The name.
        name: &'static str,
        /// Why.
        reason: outbox_core::name::ConsumerNameError,
    },
    /// `BEGIN` or the inbox insert failed; retry.
    #[error("inbox transaction failed: {0}")]
    Database(#[source] DbErr),
    /// The handler failed; its transaction was rolled back (no inbox row), retry.
    #[error("handler failed: {0}")]
    Handler(#[source] E),
    /// The before-commit hook or `COMMIT` failed; retry.
    #[error(transparent)]
    Commit(#[from] CommitError),
    /// A [`partitioned`] consumer no longer holds the lease of the message's
    /// partition: the handler did not run, nothing was committed, the message is the new
    /// owner's to apply.
    #[error("partition lease `{lease}` lost: the message is left to its new owner")]
    LeaseLost {
        /// The lease.
        lease: String,
    },
}

impl<E> InboxError<E> {
    /// Whether redelivering the same message can succeed (everything but a decode error or
    /// an invalid consumer name).
    pub fn is_retryable(&self) -> bool {
        !matches!(self, Self::Decode { .. } | Self::InvalidConsumer { .. })
    }
}

/// The generated wrapper of handler `H`: decodes `envelope` as `H::Contract` (before any
/// transaction), begins a consumer unit of work caused by `envelope`, inserts the inbox row
/// (`ON CONFLICT DO NOTHING`; on conflict: rollback, [`InboxOutcome::Duplicate`]), runs the
/// handler and commits ([`InboxOutcome::Applied`]). The handler runs in a span continuing
/// the envelope's `traceparent`.
///
/// # Errors
/// An [`InboxError`]; nothing was committed.
pub async fn apply<H: InboxHandler>(
    db: &DatabaseConnection,
    outbox: &Outbox,
    envelope: &Envelope,
) -> Result<InboxOutcome, InboxError<H::Error>> {
    let event = decode_for::<H>(outbox, envelope)?;
    apply_decoded::<H>(db, outbox, envelope, event, None).await
}

/// Checks `H`'s consumer name and decodes `envelope` as its contract.
pub(crate) fn decode_for<H: InboxHandler>(
    outbox: &Outbox,
    envelope: &Envelope,
) -> Result<H::Contract, InboxError<H::Error>> {
    if let Err(reason) = outbox_core::name::check_consumer_name(H::CONSUMER) {
        return Err(InboxError::InvalidConsumer {
            name: H::CONSUMER,
            reason,
        });
    }
    outbox
        .envelope_config()
        .decode::<H::Contract>(envelope)
        .map_err(|source| InboxError::Decode {
            message_id: envelope.message_id,
            source,
        })
}

/// [`apply`] for an already decoded (or upcast) contract; under `fence` (a partitioned
/// consumer), the transaction goes on only while the partition lease is held, checked right
/// after the inbox row is inserted (the lease row stays share-locked until the commit).
pub(crate) async fn apply_decoded<H: InboxHandler>(
    db: &DatabaseConnection,
    outbox: &Outbox,
    envelope: &Envelope,
    event: H::Contract,
    fence: Option<&partitioned::Fence>,
) -> Result<InboxOutcome, InboxError<H::Error>> {
    use tracing::Instrument as _;

    let span = row::handler_span(H::CONSUMER, H::HANDLER, envelope);
    async {
        let uow = outbox
            .unit_of_work(H::mapper())
            .caused_by(envelope)
            .begin(db)
            .await
            .map_err(InboxError::Database)?;
        if !row::insert(&uow, outbox, H::CONSUMER, envelope)
            .await
            .map_err(InboxError::Database)?
        {
            if let Err(error) = uow.rollback().await {
                tracing::warn!(%error, "rollback after a duplicate failed");
            }
            tracing::debug!("duplicate: already applied");
            return Ok(InboxOutcome::Duplicate);
        }
        if let Some(fence) = fence
            && !fence.check(&uow).await.map_err(InboxError::Database)?
        {
            if let Err(error) = uow.rollback().await {
                tracing::warn!(%error, "rollback after a lost lease failed");
            }
            return Err(InboxError::LeaseLost {
                lease: fence.lease().to_owned(),
            });
        }
        match H::handle(&uow, event, envelope).await {
            Ok(()) => {
                #[cfg(feature = "testing")]
                crash_point::before_commit().await;
                uow.commit().await?;
                Ok(InboxOutcome::Applied)
            }
            Err(error) => {
                if let Err(rollback) = uow.rollback().await {
                    tracing::warn!(error = %rollback, "rollback after a handler error failed");
                }
                Err(InboxError::Handler(error))
            }
        }
    }
    .instrument(span)
    .await
}
