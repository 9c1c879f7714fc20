//! The Inventory context: stock per book, and the `inventory.reserve-stock` consumer that
//! reserves stock when an order is placed — once per message, through the inbox.

use bookstore_contracts::OrderPlacedV1;
use outbox_seaorm::inbox::{Consumer, ConsumerConfigError};
use outbox_seaorm::{Outbox, UnitOfWork, inbox_handler};
use sea_orm::sea_query::{Expr, ExprTrait as _};
use sea_orm::{
    ActiveModelTrait as _, ColumnTrait as _, ConnectionTrait, DatabaseConnection, DbErr,
    EntityTrait as _, QueryFilter as _, Schema, Set,
};

/// The consumer name: the inbox's dedup scope.
pub const RESERVE_STOCK: &str = "inventory.reserve-stock";

/// The `stock_items` table.
pub mod stock_items {
    use sea_orm::entity::prelude::*;

    /// Stock of one book.
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "stock_items")]
    pub struct Model {
        /// Catalogue id of the book.
        #[sea_orm(primary_key, auto_increment = false)]
        pub book_id: String,
        /// Title, for people.
        pub title: String,
        /// Copies on the shelf.
        pub on_hand: i32,
        /// Copies reserved for placed orders (at most `on_hand`).
        pub reserved: i32,
    }

    /// No relations.
    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

/// The stock of one book, as Inventory sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StockItem {
    /// Catalogue id of the book.
    pub book_id: String,
    /// Title.
    pub title: String,
    /// Copies on the shelf.
    pub on_hand: u32,
    /// Copies reserved for placed orders.
    pub reserved: u32,
}

impl StockItem {
    /// Copies that can still be reserved.
    pub fn available(&self) -> u32 {
        self.on_hand.saturating_sub(self.reserved)
    }
}

impl From<stock_items::Model> for StockItem {
    fn from(row: stock_items::Model) -> Self {
        Self {
            book_id: row.book_id,
            title: row.title,
            on_hand: u32::try_from(row.on_hand).unwrap_or(0),
            reserved: u32::try_from(row.reserved).unwrap_or(0),
        }
    }
}

/// Why stock could not be reserved. The handler's transaction rolls back (inbox row
/// included), so the consumer retries the message, then dead-letters it.
#[derive(Debug, thiserror::Error)]
pub enum StockError {
    /// The book is not in the catalogue.
    #[error("book `{book_id}` is not stocked")]
    UnknownBook {
        /// The book.
        book_id: String,
    },
    /// Not enough copies left.
    #[error("book `{book_id}`: {requested} copies requested, {available} available")]
    Insufficient {
        /// The book.
        book_id: String,
        /// Copies ordered.
        requested: u32,
        /// Copies that could still be reserved.
        available: u32,
    },
    /// The database failed.
    #[error("database: {0}")]
    Database(#[from] DbErr),
}

/// Creates the `stock_items` table.
///
/// # Errors
/// The database's error.
pub async fn create_tables<C: ConnectionTrait>(db: &C) -> Result<(), DbErr> {
    let schema = Schema::new(db.get_database_backend());
    db.execute(&schema.create_table_from_entity(stock_items::Entity))
        .await?;
    Ok(())
}

/// Puts `on_hand` copies of a book on the shelf, none reserved.
///
/// # Errors
/// The database's error.
pub async fn stock_book<C: ConnectionTrait>(
    db: &C,
    book_id: &str,
    title: &str,
    on_hand: u32,
) -> Result<(), DbErr> {
    stock_items::ActiveModel {
        book_id: Set(book_id.to_owned()),
        title: Set(title.to_owned()),
        on_hand: Set(i32::try_from(on_hand).unwrap_or(i32::MAX)),
        reserved: Set(0),
    }
    .insert(db)
    .await?;
    Ok(())
}

/// The stock of one book, if stocked.
///
/// # Errors
/// The database's error.
pub async fn stock_of<C: ConnectionTrait>(
    db: &C,
    book_id: &str,
) -> Result<Option<StockItem>, DbErr> {
    Ok(stock_items::Entity::find_by_id(book_id.to_owned())
        .one(db)
        .await?
        .map(StockItem::from))
}

/// Reserves `quantity` copies of `book_id` with one conditional `UPDATE` (`reserved +
/// quantity <= on_hand`), so concurrent reservations cannot oversell.
///
/// # Errors
/// [`StockError`].
pub async fn reserve<C: ConnectionTrait>(
    db: &C,
    book_id: &str,
    quantity: u32,
) -> Result<(), StockError> {
    let wanted = i32::try_from(quantity).unwrap_or(i32::MAX);
    let updated = stock_items::Entity::update_many()
        .col_expr(
            stock_items::Column::Reserved,
            Expr::col(stock_items::Column::Reserved).add(wanted),
        )
        .filter(stock_items::Column::BookId.eq(book_id))
        .filter(
            Expr::col(stock_items::Column::Reserved)
                .add(wanted)
                .lte(Expr::col(stock_items::Column::OnHand)),
        )
        .exec(db)
        .await?;
    if updated.rows_affected == 1 {
        return Ok(());
    }
    match stock_of(db, book_id).await? {
        None => Err(StockError::UnknownBook {
            book_id: book_id.to_owned(),
        }),
        Some(item) => Err(StockError::Insufficient {
            book_id: book_id.to_owned(),
            requested: quantity,
            available: item.available(),
        }),
    }
}

/// The `inventory.reserve-stock` consumer's handler: reserves the ordered copies of every
/// book. `#[inbox_handler]` runs it in a unit of work whose first statement records
/// `(message_id, "inventory.reserve-stock")` in the inbox: a redelivered message is
/// skipped, and a failure rolls back the reservation and the inbox row together.
#[inbox_handler(consumer = "inventory.reserve-stock")]
pub async fn reserve_stock(uow: &UnitOfWork, event: OrderPlacedV1) -> Result<(), StockError> {
    for book in &event.books {
        reserve(uow, &book.book_id, book.quantity).await?;
    }
    Ok(())
}

/// The `inventory.reserve-stock` consumer on `db`: every `#[inbox_handler]` registered for
/// it, routed by event type (here: `OrderPlacedV1` to [`reserve_stock()`]).
///
/// # Errors
/// [`ConsumerConfigError`] when the settings are inconsistent.
pub fn reserve_stock_consumer(
    db: &DatabaseConnection,
    outbox: &Outbox,
) -> Result<Consumer, ConsumerConfigError> {
    Consumer::builder(db.clone(), outbox.clone(), RESERVE_STOCK)
        .max_attempts(3)
        .build()
}
