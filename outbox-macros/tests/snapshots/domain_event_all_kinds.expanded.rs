#[automatically_derived]
impl ::outbox_kernel::mapping::DomainEvent for OrderingEvent {
    fn map_contracts(
        &self,
        out: &mut ::outbox_kernel::mapping::ContractSink<'_>,
    ) -> ::core::result::Result<(), ::outbox_kernel::mapping::MapError> {
        match self {
            Self::OrderPlaced(payload) => {
                out.emit(
                    &<OrderPlacedV1 as ::core::convert::From<
                        &OrderPlaced,
                    >>::from(payload),
                )?;
                ::core::result::Result::Ok(())
            }
            Self::OrderCancelled(payload) => {
                out.emit(
                    &<OrderCancelledV1 as ::core::convert::From<
                        &OrderCancelled,
                    >>::from(payload),
                )?;
                out.emit(
                    &<crate::billing::RefundRequestedV1 as ::core::convert::From<
                        &OrderCancelled,
                    >>::from(payload),
                )?;
                ::core::result::Result::Ok(())
            }
            Self::OrderShipped(payload) => crate::mapping::map_shipped(payload, out),
            Self::NoteAdded { .. } => map_note(self, out),
            Self::PricesRecalculated { .. } => ::core::result::Result::Ok(()),
            Self::Recomputed { .. } => ::core::result::Result::Ok(()),
            Self::r#type { .. } => map_type(self, out),
        }
    }
    fn event_name(&self) -> &'static str {
        match self {
            Self::OrderPlaced { .. } => "OrderPlaced",
            Self::OrderCancelled { .. } => "OrderCancelled",
            Self::OrderShipped { .. } => "OrderShipped",
            Self::NoteAdded { .. } => "NoteAdded",
            Self::PricesRecalculated { .. } => "PricesRecalculated",
            Self::Recomputed { .. } => "Recomputed",
            Self::r#type { .. } => "type",
        }
    }
    fn is_local(&self) -> bool {
        ::core::matches!(self, Self::PricesRecalculated { .. } | Self::Recomputed { .. })
    }
}
