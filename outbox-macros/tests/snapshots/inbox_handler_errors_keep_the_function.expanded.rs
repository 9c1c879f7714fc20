::core::compile_error! {
    "invalid consumer name `Inventory_Reserve`: segment `Inventory_Reserve` must start with a lowercase ASCII letter; a consumer name is one or more lowercase kebab-case segments separated by dots, at most 255 characters, e.g. `inventory.reserve-stock`"
}
::core::compile_error! {
    "an inbox handler must be an `async fn`: `async fn(uow: &UnitOfWork<E>, event: Contract[, envelope: &Envelope]) -> Result<(), Error>`"
}
fn reserve_stock(uow: &UnitOfWork, event: OrderPlacedV1) -> Result<(), StockError> {
    Ok(())
}
