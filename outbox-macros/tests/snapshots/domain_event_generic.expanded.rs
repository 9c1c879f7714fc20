#[automatically_derived]
impl<T: Clone, const N: usize> ::outbox_kernel::mapping::DomainEvent for Changed<T, N>
where
    T: Default,
    T: ::core::marker::Send + 'static,
{
    fn map_contracts(
        &self,
        out: &mut ::outbox_kernel::mapping::ContractSink<'_>,
    ) -> ::core::result::Result<(), ::outbox_kernel::mapping::MapError> {
        match self {
            Self::Changed(payload) => {
                out.emit(
                    &<ChangedV1 as ::core::convert::From<&Change<T>>>::from(payload),
                )?;
                ::core::result::Result::Ok(())
            }
            Self::Batch(payload) => map_batch::<T, N>(payload, out),
            Self::Nothing { .. } => ::core::result::Result::Ok(()),
        }
    }
    fn event_name(&self) -> &'static str {
        match self {
            Self::Changed { .. } => "Changed",
            Self::Batch { .. } => "Batch",
            Self::Nothing { .. } => "Nothing",
        }
    }
    fn is_local(&self) -> bool {
        ::core::matches!(self, Self::Nothing { .. })
    }
}
