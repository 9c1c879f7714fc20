const _: () = {
    #[automatically_derived]
    impl ::outbox_kernel::IntegrationEvent for ShipmentChangedV3 {
        const EVENT_TYPE: &'static str = "bookstore.shipping.shipment-changed.v3";
        const NAME: &'static str = "bookstore.shipping.shipment-changed";
        const VERSION: u32 = 3;
        const AGGREGATE_TYPE: &'static str = "shipment";
        const KEY_FIELD: &'static str = "shipment_id";
        fn aggregate_id(&self) -> ::std::string::String {
            match self {
                Self::Dispatched { shipment_id, .. } => {
                    <Uuid as ::std::string::ToString>::to_string(shipment_id)
                }
                Self::Delivered { shipment_id, .. } => {
                    <Uuid as ::std::string::ToString>::to_string(shipment_id)
                }
            }
        }
    }
    const REGISTRATION: ::outbox_kernel::ContractRegistration = ::outbox_kernel::ContractRegistration {
        event_type: "bookstore.shipping.shipment-changed.v3",
        name: "bookstore.shipping.shipment-changed",
        version: 3,
        aggregate_type: "shipment",
        key_field: "shipment_id",
        rust_type: ::core::concat!(::core::module_path!(), "::", "ShipmentChangedV3"),
        description: "",
        schema: ::outbox_kernel::__private_0_1_0::schema_for::<ShipmentChangedV3>,
    };
    ::outbox_kernel::__private_0_1_0::inventory::submit!(REGISTRATION);
};
