//! The raw claim + mark loop on the framework's own table shape, through sqlx on SeaORM's
//! pool: what any relay must do to publish a row of our table (every envelope column
//! decoded, headers parsed as JSON, the payload read as validated JSON text).

use sea_orm::sqlx::{self, PgPool, Row};
use uuid::Uuid;

use super::BoxError;

/// The columns of one row as the raw loop decodes them: what a relay needs to publish it.
#[allow(dead_code)]
struct RawRow {
    seq: i64,
    message_id: Uuid,
    event_type: String,
    version: i32,
    aggregate_type: String,
    aggregate_id: String,
    correlation_id: Option<Uuid>,
    causation_id: Option<Uuid>,
    traceparent: Option<String>,
    tracestate: Option<String>,
    headers: serde_json::Value,
    occurred_at: chrono::DateTime<chrono::Utc>,
    payload: sqlx::types::Json<Box<serde_json::value::RawValue>>,
    attempts: i32,
}

/// The raw loop: claim, decode every column of the envelope (headers parsed, the payload
/// read as JSON text and validated), mark, commit.
///
/// The mark follows the relay's layout: `UPDATE … SET status = 'published'` when published
/// rows are kept (`keep`), `DELETE` otherwise.
pub(super) async fn drain(pool: &PgPool, batch: usize, keep: bool) -> Result<usize, BoxError> {
    let mut total = 0;
    loop {
        let mut txn = pool.begin().await?;
        let rows = sqlx::query(
            "SELECT seq, message_id, event_type, version, aggregate_type, aggregate_id, \
             correlation_id, causation_id, traceparent, tracestate, headers, \
             occurred_at, payload, attempts FROM bench_outbox \
             WHERE status = 'pending' AND next_attempt_at <= now() \
             ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED",
        )
        .bind(i64::try_from(batch)?)
        .fetch_all(&mut *txn)
        .await?;
        if rows.is_empty() {
            txn.commit().await?;
            return Ok(total);
        }
        let mut seqs = Vec::with_capacity(rows.len());
        let mut decoded = Vec::with_capacity(rows.len());
        for row in &rows {
            let raw = RawRow {
                seq: row.try_get(0)?,
                message_id: row.try_get(1)?,
                event_type: row.try_get(2)?,
                version: row.try_get(3)?,
                aggregate_type: row.try_get(4)?,
                aggregate_id: row.try_get(5)?,
                correlation_id: row.try_get(6)?,
                causation_id: row.try_get(7)?,
                traceparent: row.try_get(8)?,
                tracestate: row.try_get(9)?,
                headers: row.try_get(10)?,
                occurred_at: row.try_get(11)?,
                payload: row.try_get(12)?,
                attempts: row.try_get(13)?,
            };
            seqs.push(raw.seq);
            decoded.push(raw);
        }
        sqlx::query(if keep {
            "UPDATE bench_outbox SET status = 'published', published_at = now() \
             WHERE seq = ANY($1)"
        } else {
            "DELETE FROM bench_outbox WHERE seq = ANY($1)"
        })
        .bind(&seqs)
        .execute(&mut *txn)
        .await?;
        txn.commit().await?;
        total += seqs.len();
    }
}
