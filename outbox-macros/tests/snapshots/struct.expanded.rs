const _: () = {
    #[automatically_derived]
    impl ::outbox_kernel::IntegrationEvent for OrderPlacedV1 {
        const EVENT_TYPE: &'static str = "bookstore.ordering.order-placed.v1";
        const NAME: &'static str = "bookstore.ordering.order-placed";
        const VERSION: u32 = 1;
        const AGGREGATE_TYPE: &'static str = "order";
        const KEY_FIELD: &'static str = "order_id";
        fn aggregate_id(&self) -> ::std::string::String {
            <u64 as ::std::string::ToString>::to_string(&self.order_id)
        }
    }
    const REGISTRATION: ::outbox_kernel::ContractRegistration = ::outbox_kernel::ContractRegistration {
        event_type: "bookstore.ordering.order-placed.v1",
        name: "bookstore.ordering.order-placed",
        version: 1,
        aggregate_type: "order",
        key_field: "order_id",
        rust_type: ::core::concat!(::core::module_path!(), "::", "OrderPlacedV1"),
        description: "",
        schema: ::outbox_kernel::__private_0_1_0::schema_for::<OrderPlacedV1>,
    };
    ::outbox_kernel::__private_0_1_0::inventory::submit!(REGISTRATION);
};
