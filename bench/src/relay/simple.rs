//! The simplest loop a user writes by hand (issue 17): one transaction per batch on a
//! narrow table of its own, no per-aggregate order, no leases, no retries.
//!
//! ```sql
//! CREATE TABLE simple_outbox (id bigserial PRIMARY KEY, aggregate_id text NOT NULL,
//!     event_type text NOT NULL, payload jsonb NOT NULL, processed_at timestamptz);
//! CREATE INDEX simple_outbox_pending_idx ON simple_outbox (id) WHERE processed_at IS NULL;
//!
//! BEGIN;
//! SELECT id, aggregate_id, event_type, payload FROM simple_outbox
//!     WHERE processed_at IS NULL ORDER BY id LIMIT 500 FOR UPDATE SKIP LOCKED;
//! -- hand the batch to the publisher
//! UPDATE simple_outbox SET processed_at = now() WHERE id = ANY($1);
//! COMMIT;
//! ```
//!
//! It is not the same guarantee as the relay's; it is the loop a user compares us with.

use sea_orm::sqlx::{self, PgPool, Row};

use super::BoxError;

/// The table.
pub(super) const TABLE: &str = "simple_outbox";

/// Creates the table and its partial index.
pub(super) async fn create(pool: &PgPool) -> Result<(), BoxError> {
    sqlx::query(
        "CREATE TABLE simple_outbox (id bigserial PRIMARY KEY, aggregate_id text NOT NULL, \
         event_type text NOT NULL, payload jsonb NOT NULL, processed_at timestamptz)",
    )
    .execute(pool)
    .await?;
    sqlx::query(
        "CREATE INDEX simple_outbox_pending_idx ON simple_outbox (id) \
         WHERE processed_at IS NULL",
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// Empties the table and inserts `rows` unprocessed rows with the relay benchmark's
/// payload, spread over 1 000 aggregates.
pub(super) async fn refill(pool: &PgPool, rows: usize) -> Result<(), BoxError> {
    sqlx::query("TRUNCATE simple_outbox").execute(pool).await?;
    let mut done = 0;
    while done < rows {
        let chunk = (rows - done).min(100_000);
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO simple_outbox (aggregate_id, event_type, payload) \
             SELECT 'order-' || (i % 1000), 'bookstore.ordering.order-placed.v1', \
             jsonb_build_object('order_id', 'order-' || (i % 1000), 'n', i, 'books', \
             jsonb_build_array(jsonb_build_object('book_id', 'dune', 'quantity', 2))) \
             FROM generate_series(1, {chunk}) AS i"
        )))
        .execute(pool)
        .await?;
        done += chunk;
    }
    Ok(())
}

/// One claimed row: the four columns the loop reads.
#[allow(dead_code)]
struct SimpleRow {
    id: i64,
    aggregate_id: String,
    event_type: String,
    payload: sqlx::types::Json<Box<sea_orm::sqlx::types::JsonRawValue>>,
}

/// Runs the loop until a claim comes back empty; returns the rows processed.
pub(super) async fn drain(pool: &PgPool, batch: usize) -> Result<usize, BoxError> {
    let mut total = 0;
    let limit = i64::try_from(batch)?;
    loop {
        let mut txn = pool.begin().await?;
        let rows = sqlx::query(
            "SELECT id, aggregate_id, event_type, payload FROM simple_outbox \
             WHERE processed_at IS NULL ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED",
        )
        .bind(limit)
        .fetch_all(&mut *txn)
        .await?;
        if rows.is_empty() {
            txn.commit().await?;
            return Ok(total);
        }
        let mut ids = Vec::with_capacity(rows.len());
        let mut batch = Vec::with_capacity(rows.len());
        for row in &rows {
            let claimed = SimpleRow {
                id: row.try_get(0)?,
                aggregate_id: row.try_get(1)?,
                event_type: row.try_get(2)?,
                payload: row.try_get(3)?,
            };
            ids.push(claimed.id);
            batch.push(claimed);
        }
        // The publisher: a no-op, as for the relay.
        std::hint::black_box(&batch);
        sqlx::query("UPDATE simple_outbox SET processed_at = now() WHERE id = ANY($1)")
            .bind(&ids)
            .execute(&mut *txn)
            .await?;
        txn.commit().await?;
        total += ids.len();
    }
}
