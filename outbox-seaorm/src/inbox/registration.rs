//! Handler registrations, collected with `inventory` for [`Consumer`](super::Consumer).

use std::future::Future;
use std::pin::Pin;

use outbox_core::consumed::ConsumedContract;
use outbox_core::{Envelope, IntegrationEvent};
use sea_orm::DatabaseConnection;

use super::partitioned::Fence;
use super::{BoxError, InboxError, InboxHandler, InboxOutcome, apply_decoded, decode_for};
use crate::config::Outbox;

type Applied<'a> =
    Pin<Box<dyn Future<Output = Result<InboxOutcome, InboxError<BoxError>>> + Send + 'a>>;
type ApplyFn =
    for<'a> fn(&'a DatabaseConnection, &'a Outbox, &'a Envelope, Option<&'a Fence>) -> Applied<'a>;

/// One route of a consumer: messages of `event_type` go to `handler`. Submitted by
/// `#[inbox_handler]` (one per handled event type: the contract, plus each
/// `upcast(from = …)` version), collected by [`Consumer`](super::Consumer).
#[derive(Debug)]
pub struct HandlerRegistration {
    consumer: &'static str,
    handler: &'static str,
    event_type: &'static str,
    contract: &'static str,
    apply: ApplyFn,
}

inventory::collect!(HandlerRegistration);

impl<E> InboxError<E> {
    /// Maps the handler error.
    pub fn map_handler<F>(self, map: impl FnOnce(E) -> F) -> InboxError<F> {
        match self {
            Self::Decode { message_id, source } => InboxError::Decode { message_id, source },
            Self::InvalidConsumer { name, reason } => InboxError::InvalidConsumer { name, reason },
            Self::Database(error) => InboxError::Database(error),
            Self::Handler(error) => InboxError::Handler(map(error)),
            Self::Commit(error) => InboxError::Commit(error),
            Self::LeaseLost { lease } => InboxError::LeaseLost { lease },
        }
    }
}

fn apply_erased<'a, H: InboxHandler>(
    db: &'a DatabaseConnection,
    outbox: &'a Outbox,
    envelope: &'a Envelope,
    fence: Option<&'a Fence>,
) -> Applied<'a> {
    Box::pin(async move {
        let event =
            decode_for::<H>(outbox, envelope).map_err(|error| error.map_handler(Into::into))?;
        apply_decoded::<H>(db, outbox, envelope, event, fence)
            .await
            .map_err(|error| error.map_handler(Into::into))
    })
}

fn apply_upcast<'a, H, F>(
    db: &'a DatabaseConnection,
    outbox: &'a Outbox,
    envelope: &'a Envelope,
    fence: Option<&'a Fence>,
) -> Applied<'a>
where
    H: InboxHandler,
    F: IntegrationEvent,
    H::Contract: From<F>,
{
    Box::pin(async move {
        let old = outbox
            .envelope_config()
            .decode::<F>(envelope)
            .map_err(|source| InboxError::Decode {
                message_id: envelope.message_id,
                source,
            })?;
        apply_decoded::<H>(db, outbox, envelope, H::Contract::from(old), fence)
            .await
            .map_err(|error| error.map_handler(Into::into))
    })
}

impl HandlerRegistration {
    /// The route of `H` for its own contract.
    pub const fn of<H: InboxHandler>() -> Self {
        Self {
            consumer: H::CONSUMER,
            handler: H::HANDLER,
            event_type: <H::Contract as IntegrationEvent>::EVENT_TYPE,
            contract: <H::Contract as IntegrationEvent>::EVENT_TYPE,
            apply: apply_erased::<H>,
        }
    }

    /// The route of `H` for an older contract `F`, upcast with `From<F>` before the handler
    /// runs (`#[inbox_handler(…, upcast(from = F))]`).
    pub const fn upcast<H, F>() -> Self
    where
        H: InboxHandler,
        F: IntegrationEvent,
        H::Contract: From<F>,
    {
        Self {
            consumer: H::CONSUMER,
            handler: H::HANDLER,
            event_type: F::EVENT_TYPE,
            contract: <H::Contract as IntegrationEvent>::EVENT_TYPE,
            apply: apply_upcast::<H, F>,
        }
    }

    /// What the handler `H` reads, for `schemas expect` (submitted by `#[inbox_handler]`
    /// beside [`of`](Self::of)).
    pub const fn consumed<H: InboxHandler>() -> ConsumedContract {
        ConsumedContract {
            consumer: H::CONSUMER,
            handler: H::HANDLER,
            event_type: <H::Contract as IntegrationEvent>::EVENT_TYPE,
            aggregate_type: <H::Contract as IntegrationEvent>::AGGREGATE_TYPE,
            key_field: <H::Contract as IntegrationEvent>::KEY_FIELD,
            schema: outbox_core::__private::reading_schema_for::<H::Contract>,
        }
    }

    /// What the handler `H` reads of the older contract `F` it upcasts from (submitted beside
    /// [`upcast`](Self::upcast), which alone requires `H::Contract: From<F>`: a missing `From`
    /// is reported once).
    pub const fn consumed_upcast<H, F>() -> ConsumedContract
    where
        H: InboxHandler,
        F: IntegrationEvent,
    {
        ConsumedContract {
            consumer: H::CONSUMER,
            handler: H::HANDLER,
            event_type: F::EVENT_TYPE,
            aggregate_type: F::AGGREGATE_TYPE,
            key_field: F::KEY_FIELD,
            schema: outbox_core::__private::reading_schema_for::<F>,
        }
    }

    /// Every registration linked into the program, in no particular order.
    pub fn all() -> impl Iterator<Item = &'static HandlerRegistration> {
        inventory::iter::<HandlerRegistration>.into_iter()
    }

    /// The consumer name.
    pub fn consumer(&self) -> &'static str {
        self.consumer
    }

    /// The handler's path.
    pub fn handler(&self) -> &'static str {
        self.handler
    }

    /// The event type routed to the handler.
    pub fn event_type(&self) -> &'static str {
        self.event_type
    }

    /// The contract the handler takes: [`event_type`](Self::event_type), or the newer
    /// contract an upcast route converts to.
    pub fn contract(&self) -> &'static str {
        self.contract
    }

    /// Whether this route upcasts an older contract.
    pub fn is_upcast(&self) -> bool {
        self.event_type != self.contract
    }

    /// Applies `envelope` through the inbox; under `fence`, only while the partition lease
    /// is held.
    pub(crate) async fn apply(
        &self,
        db: &DatabaseConnection,
        outbox: &Outbox,
        envelope: &Envelope,
        fence: Option<&Fence>,
    ) -> Result<InboxOutcome, InboxError<BoxError>> {
        (self.apply)(db, outbox, envelope, fence).await
    }
}
