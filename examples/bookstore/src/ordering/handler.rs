//! The application services of the Ordering context: place and cancel an order in a unit
//! of work, so that the order rows and the outbox rows of its events commit together.

use outbox_core::mapping::DerivedMapping;
use outbox_seaorm::{Outbox, UnitOfWork, UnitOfWorkError};
use sea_orm::{
    ActiveModelTrait as _, ColumnTrait as _, ConnectionTrait, DatabaseConnection, DbErr,
    EntityTrait as _, PaginatorTrait as _, QueryFilter as _, QuerySelect as _, Schema, Set,
};
use uuid::Uuid;

use super::entity::{order_lines, orders};
use super::{CancellationReason, Order, OrderLine, OrderStatus, OrderingError, PlaceOrder};

/// Why placing (or cancelling) an order failed. In every case nothing was stored: no order
/// row, no outbox row.
#[derive(Debug, thiserror::Error)]
pub enum PlaceOrderError {
    /// The Ordering rules refused the command.
    #[error(transparent)]
    Refused(#[from] OrderingError),
    /// The checkout already placed an order (unique `checkout_id`): a double click.
    #[error("checkout {checkout_id} already placed an order: {constraint}")]
    DuplicateCheckout {
        /// The checkout.
        checkout_id: Uuid,
        /// The database's words for it.
        constraint: String,
    },
    /// No such order.
    #[error("no order {0}")]
    UnknownOrder(Uuid),
    /// The database failed.
    #[error("database: {0}")]
    Database(#[from] DbErr),
    /// The unit of work could not begin or commit.
    #[error("{0}")]
    UnitOfWork(String),
}

impl PlaceOrderError {
    fn from_unit_of_work(error: UnitOfWorkError<PlaceOrderError>) -> Self {
        match error {
            UnitOfWorkError::Aborted(error) => error,
            other => Self::UnitOfWork(other.to_string()),
        }
    }
}

/// Creates the `orders` and `order_lines` tables.
///
/// # Errors
/// The database's error.
pub async fn create_tables<C: ConnectionTrait>(db: &C) -> Result<(), DbErr> {
    let schema = Schema::new(db.get_database_backend());
    db.execute(&schema.create_table_from_entity(orders::Entity))
        .await?;
    db.execute(&schema.create_table_from_entity(order_lines::Entity))
        .await?;
    Ok(())
}

/// Number of orders stored.
///
/// # Errors
/// The database's error.
pub async fn count_orders<C: ConnectionTrait>(db: &C) -> Result<u64, DbErr> {
    orders::Entity::find().count(db).await
}

/// Inserts `order` and its lines on `db` (a unit of work, or a plain connection for the
/// naive handlers of scenarios 1 and 2).
///
/// # Errors
/// [`PlaceOrderError::DuplicateCheckout`] on the unique `checkout_id`, else the database's
/// error.
pub async fn insert_order<C: ConnectionTrait>(
    db: &C,
    order: &Order,
) -> Result<(), PlaceOrderError> {
    let inserted = orders::ActiveModel {
        id: Set(order.id.to_string()),
        checkout_id: Set(order.checkout_id.to_string()),
        customer_id: Set(order.customer_id.to_string()),
        currency: Set(order.currency.clone()),
        status: Set(order.status.as_str().to_owned()),
    }
    .insert(db)
    .await;
    if let Err(error) = inserted {
        return Err(match error.sql_err() {
            Some(sea_orm::SqlErr::UniqueConstraintViolation(constraint)) => {
                PlaceOrderError::DuplicateCheckout {
                    checkout_id: order.checkout_id,
                    constraint,
                }
            }
            _ => PlaceOrderError::Database(error),
        });
    }
    for line in &order.lines {
        order_lines::ActiveModel {
            order_id: Set(order.id.to_string()),
            book_id: Set(line.book_id.clone()),
            quantity: Set(i32::try_from(line.quantity).unwrap_or(i32::MAX)),
            unit_price_cents: Set(line.unit_price_cents),
            ..Default::default()
        }
        .insert(db)
        .await?;
    }
    Ok(())
}

/// The PlaceOrder command handler: places the order in a unit of work; its `OrderPlaced`
/// event is mapped to `OrderPlacedV1` and written to the outbox in the same transaction.
///
/// # Errors
/// [`PlaceOrderError`]; nothing was stored then.
pub async fn place_order(
    db: &DatabaseConnection,
    outbox: &Outbox,
    command: PlaceOrder,
) -> Result<Order, PlaceOrderError> {
    outbox
        .transaction(db, &DerivedMapping, async |uow: &UnitOfWork<_>| {
            let order = Order::place(uow, command)?;
            insert_order(uow, &order).await?;
            Ok::<_, PlaceOrderError>(order)
        })
        .await
        .map_err(PlaceOrderError::from_unit_of_work)
}

/// Loads an order with its lines, locking the order's row (`SELECT … FOR UPDATE` on
/// PostgreSQL and MariaDB; SQLite has one writer at a time anyway) until the unit of work
/// ends.
///
/// The lock serialises the writes of one order: a second command on the same order waits
/// until the first has committed, so its outbox rows come after the first's in `seq` and in
/// the order the relay sees them. Without it, two units of work on one order could write
/// their rows in one order and commit in the other, and the relay publishes in the order
/// rows become visible (book: Known limits). An optimistic version column checked in the
/// `UPDATE` serialises them too (the loser retries).
async fn load<C: ConnectionTrait>(db: &C, order_id: Uuid) -> Result<Order, PlaceOrderError> {
    let row = orders::Entity::find_by_id(order_id.to_string())
        .lock_exclusive()
        .one(db)
        .await?
        .ok_or(PlaceOrderError::UnknownOrder(order_id))?;
    let lines = order_lines::Entity::find()
        .filter(order_lines::Column::OrderId.eq(row.id.clone()))
        .all(db)
        .await?
        .into_iter()
        .map(|line| OrderLine {
            book_id: line.book_id,
            quantity: u32::try_from(line.quantity).unwrap_or(0),
            unit_price_cents: line.unit_price_cents,
        })
        .collect();
    let parse = |text: &str| Uuid::parse_str(text).map_err(|e| DbErr::Type(e.to_string()));
    Ok(Order {
        id: order_id,
        checkout_id: parse(&row.checkout_id)?,
        customer_id: parse(&row.customer_id)?,
        currency: row.currency,
        lines,
        status: OrderStatus::parse(&row.status)
            .ok_or_else(|| DbErr::Type(format!("unknown order status `{}`", row.status)))?,
    })
}

/// The CancelOrder command handler: cancels the order in a unit of work; its
/// `OrderCancelled` event goes to the outbox in the same transaction.
///
/// # Errors
/// [`PlaceOrderError`]; nothing was stored then.
pub async fn cancel_order(
    db: &DatabaseConnection,
    outbox: &Outbox,
    order_id: Uuid,
    reason: CancellationReason,
) -> Result<Order, PlaceOrderError> {
    outbox
        .transaction(db, &DerivedMapping, async |uow: &UnitOfWork<_>| {
            let mut order = load(uow, order_id).await?;
            order.cancel(uow, reason)?;
            orders::ActiveModel {
                id: Set(order.id.to_string()),
                status: Set(order.status.as_str().to_owned()),
                ..Default::default()
            }
            .update(uow)
            .await?;
            Ok::<_, PlaceOrderError>(order)
        })
        .await
        .map_err(PlaceOrderError::from_unit_of_work)
}
