// An outbox row can be read, not built.
fn forge(record: &outbox_seaorm::record::OutboxRecord) -> outbox_seaorm::record::OutboxRecord {
    outbox_seaorm::record::OutboxRecord {
        seq: 0,
        ..record.clone()
    }
}

fn main() {
    let _ = forge;
}
