//! The [`IntegrationEvent`] trait: what a contract is.

use serde::Serialize;
use serde::de::DeserializeOwned;

/// A versioned integration-event contract: the message other services see.
///
/// Implement it with `#[derive(IntegrationEvent)]` (re-exported from this crate under the
/// same name), never by hand: the derive validates the contract name at compile time and
/// registers the contract in the [`registry`](crate::registry) so that its schema can be
/// exported for consumer teams.
///
/// The attribute takes `name = "…"` (the versioned event type), `key = field` (the field that
/// identifies the aggregate), optionally `aggregate = "…"` (the aggregate type, by default
/// the key's name without `_id`, in kebab case) and, when this crate is a renamed dependency
/// (`renamed_core = { package = "outbox-core", … }`) or reached through a re-export, `crate =
/// "renamed_core"`: the path the generated code names it by.
///
/// A **consumer** team's copy of another team's contract (generated from the producer's
/// exported schemas by `outbox-codegen`, or written by hand) adds the flag `consumed`: the
/// type implements the trait with the producer's name, key and version, so `#[inbox_handler]`
/// takes it, but it is not registered, so the consumer's own `schemas export` does not
/// publish it as one of its contracts.
///
/// ```
/// use outbox_kernel::IntegrationEvent;
/// use schemars::JsonSchema;
/// use serde::{Deserialize, Serialize};
///
/// /// An order was paid for and must be shipped.
/// #[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema)]
/// #[integration_event(name = "shop.ordering.order-paid.v2", key = order_id)]
/// pub struct OrderPaidV2 {
///     pub order_id: u64,
///     pub amount_cents: i64,
/// }
///
/// assert_eq!(OrderPaidV2::EVENT_TYPE, "shop.ordering.order-paid.v2");
/// assert_eq!(OrderPaidV2::NAME, "shop.ordering.order-paid");
/// assert_eq!(OrderPaidV2::VERSION, 2);
/// assert_eq!(OrderPaidV2::AGGREGATE_TYPE, "order");
/// let paid = OrderPaidV2 { order_id: 42, amount_cents: 1999 };
/// assert_eq!(paid.aggregate_id(), "42");
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an integration event contract",
    label = "derive `IntegrationEvent` on this type"
)]
pub trait IntegrationEvent:
    Serialize + DeserializeOwned + schemars::JsonSchema + Send + Sync + 'static
{
    /// The full versioned event type, e.g. `bookstore.ordering.order-placed.v1`.
    ///
    /// Grammar (checked by the derive): at least three lowercase kebab-case segments separated
    /// by dots, then a final `v<N>` segment with `N ≥ 1` and no leading zero.
    const EVENT_TYPE: &'static str;
    /// The event type without its version segment, e.g. `bookstore.ordering.order-placed`.
    const NAME: &'static str;
    /// The contract version: the `N` of the final `v<N>` segment.
    const VERSION: u32;
    /// The type of aggregate the key identifies, e.g. `order`.
    ///
    /// Set with `aggregate = "…"` in the attribute; by default the key field's name without
    /// a trailing `_id`, in kebab case (`order_id` → `order`).
    const AGGREGATE_TYPE: &'static str;
    /// The name of the field that identifies the aggregate (the `key` of the attribute).
    const KEY_FIELD: &'static str;

    /// The id of the aggregate this event is about: the value of the key field, rendered with
    /// `Display`. It becomes the partition / routing key and the unit of ordering.
    fn aggregate_id(&self) -> String;
}
