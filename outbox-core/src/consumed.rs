//! What a consumer reads: one [`ConsumedContract`] per contract an inbox handler takes,
//! registered by `#[inbox_handler]`, collected by [`ConsumedContracts::collect`] for
//! `schemas expect` (see [`crate::expectations`]).

use std::fmt;

/// One contract a consumer's handler decodes, as `#[inbox_handler]` registers it: the
/// contract itself, and each older contract it upcasts from.
///
/// Built only by `outbox-seaorm`'s `HandlerRegistration`; read it through
/// [`ConsumedContracts`].
#[derive(Debug)]
pub struct ConsumedContract {
    /// The consumer name (the inbox's dedup scope), e.g. `inventory.reserve-stock`.
    pub consumer: &'static str,
    /// The handler's path.
    pub handler: &'static str,
    /// The versioned event type the handler decodes.
    pub event_type: &'static str,
    /// The aggregate type the consumer's copy of the contract declares.
    pub aggregate_type: &'static str,
    /// The key field the consumer's copy declares.
    pub key_field: &'static str,
    /// Builds the JSON Schema of the type the handler decodes, in **deserialize** mode (what
    /// the consumer accepts: a field with a default is not required).
    pub schema: fn() -> schemars::Schema,
}

inventory::collect!(ConsumedContract);

/// Every [`ConsumedContract`] linked into the binary, sorted by consumer, then event type.
#[derive(Clone)]
pub struct ConsumedContracts {
    contracts: Vec<&'static ConsumedContract>,
}

impl fmt::Debug for ConsumedContracts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.contracts.iter().map(|c| (c.consumer, c.event_type)))
            .finish()
    }
}

impl ConsumedContracts {
    /// Collects every handler registration linked into this binary.
    pub fn collect() -> Self {
        Self::from_registrations(inventory::iter::<ConsumedContract>())
    }

    /// From explicit registrations (sorted like [`collect`](Self::collect)).
    pub fn from_registrations(
        registrations: impl IntoIterator<Item = &'static ConsumedContract>,
    ) -> Self {
        let mut contracts: Vec<_> = registrations.into_iter().collect();
        contracts.sort_by(|a, b| {
            (a.consumer, a.event_type, a.handler).cmp(&(b.consumer, b.event_type, b.handler))
        });
        contracts.dedup_by(|a, b| (a.consumer, a.event_type) == (b.consumer, b.event_type));
        Self { contracts }
    }

    /// The registrations, sorted by consumer, then event type.
    pub fn contracts(&self) -> &[&'static ConsumedContract] {
        &self.contracts
    }

    /// Whether no handler is linked into the binary.
    pub fn is_empty(&self) -> bool {
        self.contracts.is_empty()
    }
}
