#[automatically_derived]
impl ::outbox_kernel::mapping::DomainEvent for Internal {
    fn map_contracts(
        &self,
        _: &mut ::outbox_kernel::mapping::ContractSink<'_>,
    ) -> ::core::result::Result<(), ::outbox_kernel::mapping::MapError> {
        match self {
            Self::Ticked { .. } => ::core::result::Result::Ok(()),
            Self::Tocked { .. } => ::core::result::Result::Ok(()),
        }
    }
    fn event_name(&self) -> &'static str {
        match self {
            Self::Ticked { .. } => "Ticked",
            Self::Tocked { .. } => "Tocked",
        }
    }
    fn is_local(&self) -> bool {
        ::core::matches!(self, Self::Ticked { .. } | Self::Tocked { .. })
    }
}
