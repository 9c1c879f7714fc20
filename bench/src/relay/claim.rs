//! `relay --part claim`: the claim's cost with published rows kept vs an empty table.

use std::time::{Duration, Instant};

use outbox_seaorm::Outbox;
use outbox_seaorm::relay::Relay;
use sea_orm::DatabaseConnection;
use sea_orm::sqlx;

use super::{BoxError, Noop, RelayArgs, fill, vacuum};

pub(super) async fn claim(db: &DatabaseConnection, args: &RelayArgs) -> Result<(), BoxError> {
    let pool = db.get_postgres_connection_pool().clone();
    let empty = Outbox::builder()
        .outbox_table("empty_outbox")
        .inbox_table("empty_inbox")
        .build()?;
    let kept = Outbox::builder()
        .outbox_table("kept_outbox")
        .inbox_table("kept_inbox")
        .build()?;
    outbox_seaorm::schema::install(db, &empty).await?;
    outbox_seaorm::schema::install(db, &kept).await?;
    println!(
        "claim cost: filling kept_outbox with {} published rows…",
        args.kept
    );
    fill(&pool, "kept_outbox", args.kept, true).await?;
    const BATCH: usize = 100;
    let mut per_batch = [Duration::ZERO; 2];
    let rounds = 3;
    for round in 0..rounds {
        for (which, (outbox, table)) in [(&empty, "empty_outbox"), (&kept, "kept_outbox")]
            .into_iter()
            .enumerate()
        {
            fill(&pool, table, args.claim_rows, false).await?;
            sqlx::query(sqlx::AssertSqlSafe(format!("UPDATE {table} SET payload = payload || '{{\"claim\": true}}'::jsonb WHERE status = 'pending'")))
                .execute(&pool)
                .await?;
            vacuum(&pool, table).await?;
            // One instance id: each round's relay takes over the previous one's leases.
            let mut relay = Relay::builder(db.clone(), outbox.clone(), Noop)
                .instance_id("bench-claim")
                .batch_size(BATCH)
                .listen(false)
                .retention(None)
                .build()?;
            relay.refresh_leases().await?;
            let started = Instant::now();
            let report = relay.drain().await?;
            let took = started.elapsed();
            if report.published != args.claim_rows {
                return Err(format!(
                    "{table}: published {} of {}",
                    report.published, args.claim_rows
                )
                .into());
            }
            per_batch[which] += took / u32::try_from(report.batches.max(1))?;
            // Published claim rows go: the next round starts from the same table.
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "DELETE FROM {table} WHERE payload ? 'claim'"
            )))
            .execute(&pool)
            .await?;
        }
        let _ = round;
    }
    let (a, b) = (per_batch[0] / rounds, per_batch[1] / rounds);
    println!(
        "claim + publish + mark per batch of {BATCH}: empty table {:.3} ms, with {} published rows kept {:.3} ms",
        a.as_secs_f64() * 1000.0,
        args.kept,
        b.as_secs_f64() * 1000.0
    );
    println!(
        "claim cost: kept / empty = {:.3} (target <= 1.10)",
        b.as_secs_f64() / a.as_secs_f64()
    );
    Ok(())
}
