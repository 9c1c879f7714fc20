#[automatically_derived]
impl renamed_kernel::mapping::DomainEvent for OrderingEvent {
    fn map_contracts(
        &self,
        out: &mut renamed_kernel::mapping::ContractSink<'_>,
    ) -> ::core::result::Result<(), renamed_kernel::mapping::MapError> {
        match self {
            Self::OrderPlaced(payload) => {
                out.emit(
                    &<OrderPlacedV1 as ::core::convert::From<
                        &OrderPlaced,
                    >>::from(payload),
                )?;
                ::core::result::Result::Ok(())
            }
            Self::PricesRecalculated { .. } => ::core::result::Result::Ok(()),
        }
    }
    fn event_name(&self) -> &'static str {
        match self {
            Self::OrderPlaced { .. } => "OrderPlaced",
            Self::PricesRecalculated { .. } => "PricesRecalculated",
        }
    }
    fn is_local(&self) -> bool {
        ::core::matches!(self, Self::PricesRecalculated { .. })
    }
}
