// The same shapes as the failing cases, reading instead of writing.
async fn forward(
    txn: &sea_orm::DatabaseTransaction,
    outbox: &outbox_seaorm::Outbox,
) -> Result<(), sea_orm::DbErr> {
    outbox_seaorm::record::OutboxRecord::list(txn, outbox, 100).await?;
    Ok(())
}

fn forge(record: &outbox_seaorm::record::OutboxRecord) -> outbox_seaorm::record::OutboxRecord {
    outbox_seaorm::record::OutboxRecord::clone(record)
}

use outbox_seaorm::record::OutboxRecord as ReadModel;

fn main() {
    let _ = forward;
    let _ = forge;
    let _ = std::mem::size_of::<ReadModel>();
}
