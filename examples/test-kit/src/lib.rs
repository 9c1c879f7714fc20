//! A small ordering service, as its team writes it, and its own tests in `tests/`, written
//! with the test kit (book: The test kit): [`place_order`] writes an order and its
//! [`OrderPlacedV1`] in one unit of work; [`reserve_stock()`], the handler of consumer
//! `inventory.reserve-stock`, reserves each ordered book once per message.
//!
//! ```text
//! cargo test -p example-test-kit   # SQLite in memory, and PostgreSQL (TestDb)
//! ```

use outbox::mapping::DerivedMapping;
use outbox::{CommitError, DomainEvent, IntegrationEvent, Outbox, Raise, UnitOfWork};
use outbox::{inbox_handler, schema};
use sea_orm::sea_query::{Expr, ExprTrait as _, Query};
use sea_orm::{ConnectionTrait, DatabaseConnection, DbErr};
use serde::{Deserialize, Serialize};

/// The contract the inventory service consumes.
#[derive(IntegrationEvent, Serialize, Deserialize, schemars::JsonSchema, Debug, PartialEq)]
#[integration_event(name = "shop.ordering.order-placed.v1", key = order_id)]
pub struct OrderPlacedV1 {
    /// The order.
    pub order_id: String,
    /// The books ordered, one copy each.
    pub books: Vec<String>,
}

/// The ordering service's domain events.
#[derive(DomainEvent)]
pub enum OrderingEvent {
    /// Other services hear of it as [`OrderPlacedV1`].
    #[domain_event(contract = OrderPlacedV1)]
    OrderPlaced(OrderPlaced),
}

/// An order was placed.
pub struct OrderPlaced {
    /// The order.
    pub order_id: String,
    /// The books ordered.
    pub books: Vec<String>,
}

impl From<&OrderPlaced> for OrderPlacedV1 {
    fn from(placed: &OrderPlaced) -> Self {
        let (order_id, books) = (placed.order_id.clone(), placed.books.clone());
        Self { order_id, books }
    }
}

/// Why an order was not placed (nothing was written).
#[derive(Debug, thiserror::Error)]
pub enum PlaceOrderError {
    /// An order needs a book.
    #[error("an order needs at least one book")]
    NoBooks,
    /// The database refused the order row (e.g. a known order id).
    #[error(transparent)]
    Database(#[from] DbErr),
    /// The commit failed.
    #[error(transparent)]
    Commit(#[from] CommitError),
}

/// Creates the outbox's tables and the service's (`orders`, `stock`) unless they exist.
///
/// # Errors
/// The database's.
pub async fn install(db: &DatabaseConnection, outbox: &Outbox) -> Result<(), DbErr> {
    schema::install(db, outbox).await?;
    db.execute_unprepared("CREATE TABLE IF NOT EXISTS orders (id VARCHAR(64) PRIMARY KEY)")
        .await?;
    let stock = "CREATE TABLE IF NOT EXISTS stock (book VARCHAR(64) PRIMARY KEY, reserved INTEGER)";
    db.execute_unprepared(stock).await?;
    Ok(())
}

/// Places an order: the `orders` row and its [`OrderPlacedV1`] commit together, or neither.
///
/// # Errors
/// [`PlaceOrderError`]; nothing is written then.
pub async fn place_order(
    db: &DatabaseConnection,
    outbox: &Outbox,
    order_id: &str,
    books: &[&str],
) -> Result<(), PlaceOrderError> {
    if books.is_empty() {
        return Err(PlaceOrderError::NoBooks);
    }
    let uow = outbox.begin(db, &DerivedMapping).await?;
    let insert = Query::insert()
        .into_table("orders")
        .columns(["id"])
        .values([order_id.into()])
        .map_err(|error| DbErr::Custom(error.to_string()))?
        .to_owned();
    uow.execute(&insert).await?;
    let books = books.iter().map(|book| (*book).to_owned()).collect();
    let order_id = order_id.to_owned();
    uow.raise(OrderingEvent::OrderPlaced(OrderPlaced { order_id, books }));
    uow.commit().await?;
    Ok(())
}

/// Reserves a copy of each ordered book, once per message (the inbox's transaction).
#[inbox_handler(consumer = "inventory.reserve-stock")]
pub async fn reserve_stock(uow: &UnitOfWork, event: OrderPlacedV1) -> Result<(), DbErr> {
    for book in &event.books {
        let reserve = Query::update()
            .table("stock")
            .value("reserved", Expr::col("reserved").add(1))
            .and_where(Expr::col("book").eq(book.as_str()))
            .to_owned();
        uow.execute(&reserve).await?;
    }
    Ok(())
}

/// Copies of `book` reserved, `None` for a book not in stock.
///
/// # Errors
/// The database's.
pub async fn reserved(db: &DatabaseConnection, book: &str) -> Result<Option<i32>, DbErr> {
    let select = Query::select()
        .column("reserved")
        .from("stock")
        .and_where(Expr::col("book").eq(book))
        .to_owned();
    let row = db.query_one(&select).await?;
    row.map(|row| row.try_get::<i32>("", "reserved"))
        .transpose()
}
