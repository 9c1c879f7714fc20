//! Procedural macros of the outbox framework. Use them through `outbox-core`, which
//! re-exports them next to the traits they implement.
//!
//! The only macro is `#[derive(IntegrationEvent)]`; its attribute syntax is documented on
//! `outbox_core::IntegrationEvent`.

// The event-type grammar, shared with `outbox-core` so that the derive and the runtime agree
// on what a valid event type is. Only part of it is used here; its unit tests run here too.
#[allow(dead_code)]
#[path = "../../outbox-core/src/name.rs"]
mod name;

mod integration_event;

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
