const _: () = {
    #[automatically_derived]
    impl ::outbox_kernel::IntegrationEvent for BookAddedV1 {
        const EVENT_TYPE: &'static str = "bookstore.catalog.book-added.v1";
        const NAME: &'static str = "bookstore.catalog.book-added";
        const VERSION: u32 = 1;
        const AGGREGATE_TYPE: &'static str = "isbn";
        const KEY_FIELD: &'static str = "isbn";
        fn aggregate_id(&self) -> ::std::string::String {
            <String as ::std::string::ToString>::to_string(&self.isbn)
        }
    }
    const REGISTRATION: ::outbox_kernel::ContractRegistration = ::outbox_kernel::ContractRegistration {
        event_type: "bookstore.catalog.book-added.v1",
        name: "bookstore.catalog.book-added",
        version: 1,
        aggregate_type: "isbn",
        key_field: "isbn",
        rust_type: ::core::concat!(::core::module_path!(), "::", "BookAddedV1"),
        description: "A book was added to the catalogue.\n\nConsumers index it for search; `isbn` is the ISBN-13.",
        schema: ::outbox_kernel::__private_0_1_0::schema_for::<BookAddedV1>,
    };
    ::outbox_kernel::__private_0_1_0::inventory::submit!(REGISTRATION);
};
