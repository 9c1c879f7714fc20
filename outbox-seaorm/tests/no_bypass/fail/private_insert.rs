// The row-writing code is private to the crate.
async fn forward(
    txn: &sea_orm::DatabaseTransaction,
    outbox: &outbox_seaorm::Outbox,
) -> Result<(), sea_orm::DbErr> {
    outbox_seaorm::sql::insert::insert(txn, outbox, Vec::new(), None).await?;
    Ok(())
}

fn main() {
    let _ = forward;
}
