//! Procedural macros of the outbox framework. Use them through `outbox-kernel`, which
//! re-exports them next to the traits they implement.
//!
//! - `#[derive(IntegrationEvent)]` makes a struct or serde-tagged enum a versioned contract;
//!   its attribute syntax is documented on `outbox_kernel::IntegrationEvent`.
//! - `#[derive(DomainEvent)]` maps each variant of a domain event enum to its contracts, or
//!   marks it local; its attribute syntax is documented on `outbox_kernel::mapping::DomainEvent`.
//!
//! `#[inbox_handler]` turns an `async fn` into a consumer handler of the inbox; use it through
//! `outbox-seaorm` (`outbox_seaorm::inbox_handler`), whose `inbox` module documents the runtime.

mod domain_event;
mod inbox_handler;
mod integration_event;
mod runtime;
mod shared;
#[cfg(test)]
mod snapshot;

use proc_macro::TokenStream;

/// Derives `outbox_kernel::IntegrationEvent` for a contract struct or serde-tagged enum and
/// registers the contract in `outbox_kernel::ContractRegistry`.
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
/// identifies the aggregate), the optional `aggregate` (string literal, the aggregate type;
/// by default the key's name without `_id`, in kebab case) and the optional `crate` (the path
/// of `outbox-kernel`, `crate = "renamed_kernel"`, when the dependency is renamed in Cargo.toml or
/// reached through a re-export). The optional flag `consumed` marks a consumer's copy of another
/// team's contract (what `outbox-codegen` generates from an exported folder): it implements the
/// trait but is not registered, so the consumer's own `schemas export` does not publish it.
#[proc_macro_derive(IntegrationEvent, attributes(integration_event))]
pub fn derive_integration_event(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    integration_event::derive(&input).into()
}

/// Derives `outbox_kernel::mapping::DomainEvent` for a domain event enum: the exhaustive
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
/// without the attribute does not compile. On the enum itself, `#[domain_event(crate =
/// "renamed_kernel")]` names `outbox-kernel` when the dependency is renamed.
#[proc_macro_derive(DomainEvent, attributes(domain_event))]
pub fn derive_domain_event(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    domain_event::derive(&input).into()
}

/// Turns an `async fn` into an inbox handler: the handler of one contract for one consumer,
/// applied once per message by `outbox_seaorm::inbox::apply` and dispatched by
/// `outbox_seaorm::inbox::Consumer`.
///
/// ```ignore
/// use outbox_seaorm::{UnitOfWork, inbox_handler};
///
/// /// Reserves stock for a placed order.
/// #[inbox_handler(consumer = "inventory.reserve-stock")]
/// async fn reserve_stock(
///     uow: &UnitOfWork<InventoryEvent>,
///     event: OrderPlacedV1,
/// ) -> Result<(), StockError> {
///     // business writes through `uow`, `uow.raise(…)` for events of its own
///     Ok(())
/// }
///
/// /// The next version, also accepting v1 messages (`OrderPlacedV2: From<OrderPlacedV1>`).
/// #[inbox_handler(
///     consumer = "inventory.reserve-stock",
///     mapper = &InventoryContracts,
///     upcast(from = OrderPlacedV1),
/// )]
/// pub async fn reserve_stock_v2(
///     uow: &UnitOfWork<InventoryEvent>,
///     event: OrderPlacedV2,
///     envelope: &Envelope,
/// ) -> Result<(), StockError> {
///     Ok(())
/// }
/// ```
///
/// The function is `async fn(uow: &UnitOfWork<E>, event: Contract[, envelope: &Envelope]) ->
/// Result<(), Error>`: the consumer unit of work (its business writes, its inbox row and the
/// outbox rows of the events it raises commit together), the decoded contract by value and,
/// optionally, the envelope (message id, headers, trace context). `Error` must convert into a
/// boxed error (`Into<Box<dyn Error + Send + Sync>>`). Lifetime parameters are allowed; type
/// and const parameters, `self` and `unsafe` are not.
///
/// Attribute keys:
/// - `consumer = "…"` (required, string literal): the consumer name, the inbox's dedup scope;
///   one or more lowercase kebab-case segments separated by dots, checked at compile time.
/// - `mapper = <expression>` (optional): the mapper of the events the handler raises, anything
///   `Into<MapperRef<E>>` (`&InventoryContracts`, `&MAPPER`, `Arc::new(…)`), evaluated per
///   message. Without it, `E` must derive `DomainEvent` (the default `UnitOfWork<NoEvents>`
///   does).
/// - `upcast(from = <type>)` (optional, repeatable): an older contract the handler also
///   accepts, decoded as that type and converted with `From`.
/// - `crate = "…"` (optional): the path of `outbox-seaorm` (`crate = "renamed_seaorm"`), when
///   the dependency is renamed in Cargo.toml or reached through a re-export.
///
/// Generated, next to the function (which stays as written, callable in unit tests): a braced
/// struct of the same name (in the type namespace, so it does not clash with the function)
/// implementing `outbox_seaorm::inbox::InboxHandler` (so `inbox::apply::<reserve_stock>` works),
/// and an `inventory` registration (`HandlerRegistration`) for the contract and for each
/// `upcast`. Every mistake in the signature or the attribute is reported on its tokens, all at
/// once; type mismatches (a contract that is not an `IntegrationEvent`, a first argument that is
/// not a unit of work) point at the user's types, one error each.
#[proc_macro_attribute]
pub fn inbox_handler(args: TokenStream, item: TokenStream) -> TokenStream {
    inbox_handler::attribute(args.into(), item.into()).into()
}
