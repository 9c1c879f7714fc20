use outbox_kernel::DomainEvent;

pub struct OrderPlaced {
    pub order_id: u64,
}

/// Has the `From` impl, but is not an integration event.
pub struct OrderPlacedDto {
    pub order_id: u64,
}

impl From<&OrderPlaced> for OrderPlacedDto {
    fn from(event: &OrderPlaced) -> Self {
        Self {
            order_id: event.order_id,
        }
    }
}

#[derive(DomainEvent)]
pub enum OrderingEvent {
    #[domain_event(contract = OrderPlacedDto)]
    OrderPlaced(OrderPlaced),
}

fn main() {}
