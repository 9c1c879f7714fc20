#[automatically_derived]
impl ::outbox_kernel::mapping::DomainEvent for NothingHappens {
    fn map_contracts(
        &self,
        _: &mut ::outbox_kernel::mapping::ContractSink<'_>,
    ) -> ::core::result::Result<(), ::outbox_kernel::mapping::MapError> {
        match *self {}
    }
    fn event_name(&self) -> &'static str {
        match *self {}
    }
    fn is_local(&self) -> bool {
        false
    }
}
