//! The producer role: places orders on PostgreSQL, one unit of work each (the order row
//! and its event commit together), round-robin over the customers, at most `rate` per
//! second, until `orders` are placed.
//!
//! It resumes after its own crash without placing an order twice: where it stopped is
//! read back from its table (the next order number of every customer), and an order whose
//! `COMMIT` answer was lost is found by the primary key when it is placed again.

use std::time::Duration;

use outbox_core::Raise as _;
use outbox_core::mapping::DerivedMapping;
use outbox_seaorm::{Outbox, UnitOfWorkError};
use sea_orm::{ConnectionTrait as _, DbBackend, DbErr, SqlErr, Statement};

use crate::contract::{CustomerOrderedV1, Ordered, ShopEvent};
use crate::databases::connect;
use crate::error::SoakError;
use crate::plan::{Plan, customer};

/// Places the plan's orders; returns when all are placed.
///
/// # Errors
/// When the database cannot be reached at start.
pub async fn run(plan: &Plan) -> Result<(), SoakError> {
    let db = connect(&plan.producer_url, 2).await?;
    let backend = db.get_database_backend();
    // The next order number per customer, as a BIGINT on either server.
    let next_numbers = if backend == DbBackend::MySql {
        "SELECT customer_id, CAST(MAX(order_no) + 1 AS SIGNED) AS next FROM soak_orders \
         GROUP BY customer_id"
    } else {
        "SELECT customer_id, CAST(MAX(order_no) + 1 AS BIGINT) AS next FROM soak_orders \
         GROUP BY customer_id"
    };
    let outbox = Outbox::default();
    let customers = plan.customers.max(1);
    let mut next = vec![0u32; customers as usize];
    for row in db
        .query_all_raw(Statement::from_string(backend, next_numbers))
        .await?
    {
        let id: String = row.try_get("", "customer_id")?;
        let following: i64 = row.try_get("", "next")?;
        if let Some(slot) = (0..customers).find(|n| customer(*n) == id) {
            next[slot as usize] = u32::try_from(following).unwrap_or(0);
        }
    }
    let mut placed: u64 = next.iter().map(|n| u64::from(*n)).sum();
    tracing::info!(placed, "producer resumes");

    let mut pace = tokio::time::interval(Duration::from_secs(1) / plan.rate.max(1));
    pace.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while placed < plan.orders {
        pace.tick().await;
        // Round-robin: after a restart, the customer after the last one placed.
        let slot = usize::try_from(placed % u64::from(customers)).unwrap_or(0);
        let event = CustomerOrderedV1 {
            customer_id: customer(u32::try_from(slot).unwrap_or(0)),
            order_no: next[slot],
        };
        place(&db, &outbox, &event).await;
        next[slot] += 1;
        placed += 1;
    }
    tracing::info!(placed, "producer done");
    Ok(())
}

/// Places one order, retrying until it is committed (or found committed).
async fn place(db: &sea_orm::DatabaseConnection, outbox: &Outbox, event: &CustomerOrderedV1) {
    loop {
        let placed = outbox
            .transaction(db, &DerivedMapping, async |uow| {
                let backend = db.get_database_backend();
                let insert = if backend == DbBackend::MySql {
                    "INSERT INTO soak_orders (customer_id, order_no) VALUES (?, ?)"
                } else {
                    "INSERT INTO soak_orders (customer_id, order_no) VALUES ($1, $2)"
                };
                uow.execute_raw(Statement::from_sql_and_values(
                    backend,
                    insert,
                    [
                        event.customer_id.clone().into(),
                        i32::try_from(event.order_no).unwrap_or(i32::MAX).into(),
                    ],
                ))
                .await?;
                uow.raise(ShopEvent::Ordered(Ordered(event.clone())));
                Ok::<_, DbErr>(())
            })
            .await;
        match placed {
            Ok(()) => return,
            Err(UnitOfWorkError::Aborted(error))
                if matches!(error.sql_err(), Some(SqlErr::UniqueConstraintViolation(_))) =>
            {
                // Committed before; the answer was lost (or the process died after it).
                return;
            }
            Err(error) => {
                tracing::warn!(%error, customer = %event.customer_id, order = event.order_no, "order not placed; again");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}
