#[automatically_derived]
impl ::outbox_core::mapping::DomainEvent for NothingHappens {
    fn map_contracts(
        &self,
        _: &mut ::outbox_core::mapping::ContractSink<'_>,
    ) -> ::core::result::Result<(), ::outbox_core::mapping::MapError> {
        match *self {}
    }
    fn event_name(&self) -> &'static str {
        match *self {}
    }
    fn is_local(&self) -> bool {
        false
    }
}
