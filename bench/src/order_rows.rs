//! Outbox rows of `OrderPlacedV1` events written with plain SQL (a fast set-up), for the
//! benchmarks that drain a table: the `brokers` and `service` benchmarks.

use sea_orm::sqlx::{self, PgPool};

/// Books the rows order; row `i` orders book `i % BOOKS` (and the next one).
pub const BOOKS: usize = 100;

/// When the inserted rows are due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// At once: a relay claims them as soon as it runs.
    Now,
    /// Parked in backoff for an hour (one failed attempt): no relay claims them until an
    /// `UPDATE` makes them due.
    Parked,
}

/// Inserts `rows` rows into `table` in the framework's format, spread over `aggregates`
/// aggregates (order ids), payload an `OrderPlacedV1` of 2 books.
///
/// # Errors
/// The database's error.
pub async fn insert(
    pool: &PgPool,
    table: &str,
    rows: usize,
    aggregates: usize,
    due: Due,
) -> Result<(), sqlx::Error> {
    let (attempts, next_attempt_at) = match due {
        Due::Now => (0, "now() - interval '1 second'"),
        Due::Parked => (1, "now() + interval '1 hour'"),
    };
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO {table} (message_id, event_type, version, aggregate_type, aggregate_id, \
         partition, headers, occurred_at, payload, status, attempts, next_attempt_at, \
         published_at, created_at) \
         SELECT gen_random_uuid(), 'bookstore.ordering.order-placed.v1', 1, 'order', \
         md5('order-' || (i % {aggregates}))::uuid::text, (i % {aggregates}) % 64, '{{}}'::jsonb, \
         now(), jsonb_build_object('order_id', md5('order-' || (i % {aggregates}))::uuid, \
         'checkout_id', gen_random_uuid(), 'customer_id', md5('customer-' || (i % 97))::uuid, \
         'books', jsonb_build_array( \
           jsonb_build_object('book_id', 'book-' || (i % {BOOKS}), 'quantity', 1 + i % 3, \
             'unit_price', jsonb_build_object('amount', '12.50', 'currency', 'EUR')), \
           jsonb_build_object('book_id', 'book-' || ((i + 1) % {BOOKS}), 'quantity', 1, \
             'unit_price', jsonb_build_object('amount', '8.90', 'currency', 'EUR')))), \
         'pending', {attempts}, {next_attempt_at}, NULL, now() \
         FROM generate_series(1, {rows}) AS i"
    )))
    .execute(pool)
    .await?;
    Ok(())
}
