//! Procedural macros of the outbox framework. Use them through `outbox-core`, which
//! re-exports them next to the traits they implement.
//!
//! - `#[derive(IntegrationEvent)]` makes a struct or serde-tagged enum a versioned contract;
//!   its attribute syntax is documented on `outbox_core::IntegrationEvent`.
//! - `#[derive(DomainEvent)]` maps each variant of a domain event enum to its contracts, or
//!   marks it local; its attribute syntax is documented on `outbox_core::mapping::DomainEvent`.

// The event-type grammar, shared with `outbox-core` so that the derive and the runtime agree
// on what a valid event type is. Only part of it is used here; its unit tests run here too.
#[allow(dead_code)]
#[path = "../../outbox-core/src/name.rs"]
mod name;

mod domain_event;
mod integration_event;
mod shared;
#[cfg(test)]
mod snapshot;

use proc_macro::TokenStream;

/// Derives `outbox_core::IntegrationEvent` for a contract struct or serde-tagged enum and
/// registers the contract in `outbox_core::ContractRegistry`.
///
/// ```ignore
/// /// An order was placed.
/// #[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
/// #[integration_event(name = "bookstore.ordering.order-placed.v1", key = order_id)]
/// pub struct OrderPlacedV1 {
///     pub order_id: u64,
/// }
/// ```
///
/// Attribute keys: `name` (string literal, the versioned event type), `key` (the field that
/// identifies the aggregate) and the optional `aggregate` (string literal, the aggregate type;
/// by default the key's name without `_id`, in kebab case).
#[proc_macro_derive(IntegrationEvent, attributes(integration_event))]
pub fn derive_integration_event(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    integration_event::derive(&input).into()
}

/// Derives `outbox_core::mapping::DomainEvent` for a domain event enum: the exhaustive
/// mapping of its variants to integration-event contracts.
///
/// ```ignore
/// #[derive(DomainEvent)]
/// pub enum OrderingEvent {
///     /// One contract, built with `From<&OrderPlaced>`.
///     #[domain_event(contract = OrderPlacedV1)]
///     OrderPlaced(OrderPlaced),
///     /// Several contracts, in this order.
///     #[domain_event(contract = OrderCancelledV1, contract = RefundRequestedV1)]
///     OrderCancelled(OrderCancelled),
///     /// A mapping function.
///     #[domain_event(map = crate::mapping::map_shipped)]
///     OrderShipped(Shipped),
///     /// Never leaves the process.
///     #[domain_event(local)]
///     PricesRecalculated { order_id: u64 },
/// }
/// ```
///
/// Every variant carries exactly one `#[domain_event(...)]` with either one or more
/// `contract = <type>` (newtype variants only), one `map = <function>`, or `local`. A variant
/// without the attribute does not compile.
#[proc_macro_derive(DomainEvent, attributes(domain_event))]
pub fn derive_domain_event(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    domain_event::derive(&input).into()
}
