//! The Ordering context's tables, as SeaORM entities. Ids are stored as their hyphenated
//! text, the same on every backend.

/// The `orders` table: one row per order, `checkout_id` unique (a double click cannot
/// place two orders).
pub mod orders {
    use sea_orm::entity::prelude::*;

    /// An order.
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "orders")]
    pub struct Model {
        /// The order id (UUIDv7).
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        /// The checkout that placed it.
        #[sea_orm(unique)]
        pub checkout_id: String,
        /// The customer.
        pub customer_id: String,
        /// ISO 4217 currency of the prices.
        pub currency: String,
        /// `placed` or `cancelled`.
        pub status: String,
    }

    /// Lines are read with their own entity.
    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

/// The `order_lines` table: the books of each order.
pub mod order_lines {
    use sea_orm::entity::prelude::*;

    /// One line of an order.
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "order_lines")]
    pub struct Model {
        /// Autoincrement id.
        #[sea_orm(primary_key)]
        pub id: i64,
        /// The order.
        pub order_id: String,
        /// The book.
        pub book_id: String,
        /// Copies.
        pub quantity: i32,
        /// Price of one copy in cents.
        pub unit_price_cents: i64,
    }

    /// Read by `order_id`.
    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}
