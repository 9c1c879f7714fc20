::core::compile_error! {
    "invalid event type `Bookstore.Ordering.OrderPlaced`: the last segment `OrderPlaced` is not a version `v<N>` (N >= 1, no leading zero); an event type is at least three lowercase kebab-case segments separated by dots, then a version segment `v<N>` (N >= 1, no leading zero), e.g. `bookstore.ordering.order-placed.v1`"
}
::core::compile_error! {
    "no field `order_id` in `OrderPlaced`: the key must name one of its fields; its fields are `id`"
}
#[automatically_derived]
impl ::outbox_kernel::IntegrationEvent for OrderPlaced {
    const EVENT_TYPE: &'static str = "";
    const NAME: &'static str = "";
    const VERSION: u32 = 0;
    const AGGREGATE_TYPE: &'static str = "";
    const KEY_FIELD: &'static str = "";
    fn aggregate_id(&self) -> ::std::string::String {
        ::std::string::String::new()
    }
}
