::core::compile_error! {
    "variant `Forgotten` is neither mapped nor local: add `#[domain_event(contract = …)]`, `#[domain_event(map = …)]` or `#[domain_event(local)]`; every variant of a domain event enum says which contracts it becomes, so that no event is forgotten"
}
#[automatically_derived]
impl<T> ::outbox_kernel::mapping::DomainEvent for OrderingEvent<T>
where
    T: ::core::marker::Send + 'static,
{
    fn map_contracts(
        &self,
        _: &mut ::outbox_kernel::mapping::ContractSink<'_>,
    ) -> ::core::result::Result<(), ::outbox_kernel::mapping::MapError> {
        ::core::result::Result::Ok(())
    }
    fn event_name(&self) -> &'static str {
        ""
    }
    fn is_local(&self) -> bool {
        false
    }
}
