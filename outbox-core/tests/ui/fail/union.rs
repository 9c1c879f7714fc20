use outbox_kernel::IntegrationEvent;

#[derive(IntegrationEvent)]
#[integration_event(name = "bookstore.ordering.order-placed.v1", key = order_id)]
pub union OrderPlacedV1 {
    pub order_id: u64,
    pub legacy_id: i64,
}

fn main() {}
