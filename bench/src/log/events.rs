//! The event every log benchmark writes: one `OrderPlacedV1` (one book line) per order,
//! raised on a unit of work and mapped by the bookstore contract.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bookstore_contracts::{MoneyV1, OrderPlacedV1, OrderedBookV1};
use outbox_core::Raise as _;
use outbox_core::mapping::{ContractMapper, ContractSink, MapError};
use outbox_seaorm::Outbox;
use sea_orm::DatabaseConnection;
use uuid::Uuid;

use super::BoxError;

/// The domain event.
pub(crate) enum BenchEvent {
    /// An order was placed.
    Placed(OrderPlacedV1),
}

/// Maps [`BenchEvent`] to its contract.
pub(crate) struct BenchContracts;

impl ContractMapper<BenchEvent> for BenchContracts {
    fn map(&self, event: &BenchEvent, out: &mut ContractSink<'_>) -> Result<(), MapError> {
        match event {
            BenchEvent::Placed(placed) => out.emit(placed),
        }
    }
}

/// A new order's `OrderPlacedV1` (a fresh aggregate each time).
pub(crate) fn placed() -> OrderPlacedV1 {
    OrderPlacedV1 {
        order_id: Uuid::now_v7(),
        checkout_id: Uuid::now_v7(),
        customer_id: Uuid::now_v7(),
        books: vec![OrderedBookV1 {
            book_id: "dune".into(),
            quantity: 2,
            unit_price: MoneyV1 {
                amount: "12.50".into(),
                currency: "EUR".into(),
            },
        }],
    }
}

/// One unit of work raising `events` orders; returns the message ids.
pub(crate) async fn commit(
    db: &DatabaseConnection,
    outbox: &Outbox,
    events: usize,
) -> Result<Vec<Uuid>, BoxError> {
    let uow = outbox.begin(db, &BenchContracts).await?;
    for _ in 0..events {
        uow.raise(BenchEvent::Placed(placed()));
    }
    Ok(uow.commit().await?.message_ids)
}

/// Commits `total` events through units of work of `per_commit` events each, with
/// `clients` writers at once.
pub(crate) async fn write(
    db: &DatabaseConnection,
    outbox: &Outbox,
    total: usize,
    clients: usize,
    per_commit: usize,
) -> Result<(), BoxError> {
    let per_commit = per_commit.max(1);
    let left = Arc::new(AtomicUsize::new(total));
    let mut writers = Vec::new();
    for _ in 0..clients.max(1) {
        let (db, outbox, left) = (db.clone(), outbox.clone(), Arc::clone(&left));
        writers.push(tokio::spawn(async move {
            loop {
                let taken = left.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                    (left > 0).then(|| left - left.min(per_commit))
                });
                let Ok(before) = taken else {
                    return Ok::<_, BoxError>(());
                };
                commit(&db, &outbox, before.min(per_commit)).await?;
            }
        }));
    }
    for writer in writers {
        writer.await??;
    }
    Ok(())
}
