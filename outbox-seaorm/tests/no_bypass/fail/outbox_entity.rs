// There is no SeaORM entity (nor ActiveModel) for the outbox table.
use outbox_seaorm::entity::outbox::ActiveModel;

fn main() {
    let _ = std::mem::size_of::<ActiveModel>();
}
