const _: () = {
    #[automatically_derived]
    impl ::outbox_kernel::IntegrationEvent for OrderPlacedV1 {
        const EVENT_TYPE: &'static str = "bookstore.ordering.order-placed.v1";
        const NAME: &'static str = "bookstore.ordering.order-placed";
        const VERSION: u32 = 1;
        const AGGREGATE_TYPE: &'static str = "order";
        const KEY_FIELD: &'static str = "order_id";
        fn aggregate_id(&self) -> ::std::string::String {
            <::uuid::Uuid as ::std::string::ToString>::to_string(&self.order_id)
        }
    }
};
