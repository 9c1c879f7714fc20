const _: () = {
    #[automatically_derived]
    impl ::outbox_kernel::IntegrationEvent for CopyShelvedV2 {
        const EVENT_TYPE: &'static str = "bookstore.catalog.copy-shelved.v2";
        const NAME: &'static str = "bookstore.catalog.copy-shelved";
        const VERSION: u32 = 2;
        const AGGREGATE_TYPE: &'static str = "book-copy";
        const KEY_FIELD: &'static str = "copy_id";
        fn aggregate_id(&self) -> ::std::string::String {
            <String as ::std::string::ToString>::to_string(&self.copy_id)
        }
    }
    const REGISTRATION: ::outbox_kernel::ContractRegistration = ::outbox_kernel::ContractRegistration {
        event_type: "bookstore.catalog.copy-shelved.v2",
        name: "bookstore.catalog.copy-shelved",
        version: 2,
        aggregate_type: "book-copy",
        key_field: "copy_id",
        rust_type: ::core::concat!(::core::module_path!(), "::", "CopyShelvedV2"),
        description: "",
        schema: ::outbox_kernel::__private_0_1_0::schema_for::<CopyShelvedV2>,
    };
    ::outbox_kernel::__private_0_1_0::inventory::submit!(REGISTRATION);
};
