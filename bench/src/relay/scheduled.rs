//! `relay --part scheduled` (issue 36): draining rows that fell due from the scheduled table,
//! with 1 000 000 rows waiting for next month beside them, against the same drain with none
//! waiting — and, for scale, the same rows written pending (never scheduled).
//!
//! Each round and case: N rows (`--due-rows`, default 100 000) go to the case's scheduled
//! table due one second ago (written with plain SQL, as a commit writes them), the tables are
//! vacuumed and analyzed, then one relay's `drain()` moves them into the outbox table
//! (`promote_scheduled`, `--batch-size` rows per transaction) and publishes them to a no-op
//! publisher. Timed: the move, the publishing, both. The cases alternate within a round.
//!
//! Then a **steady flow**: `--flow-rows` rows (default 20 000) fall due evenly over
//! `--flow-seconds` (default 10 s) while a relay runs (`run()`, schedule interval 100 ms,
//! poll interval 50 ms), beside the 1 000 000 waiting rows and beside none. Printed: how
//! late each row went out after its due time (p50, p99, max), and whether every row went.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use outbox_core::Envelope;
use outbox_core::publish::{BatchOutcome, Publisher};
use outbox_seaorm::Outbox;
use outbox_seaorm::relay::Relay;
use sea_orm::DatabaseConnection;
use sea_orm::sqlx::{self, PgPool};
use tokio_util::sync::CancellationToken;

use super::{BoxError, Noop, RelayArgs, fill, vacuum};
use crate::measure::median;
use crate::measure::percentile;

/// The outbox columns a commit writes, but `status`, `attempts` and `next_attempt_at`.
const COLUMNS: &str = "message_id, event_type, version, aggregate_type, aggregate_id, \
                       partition, correlation_id, causation_id, traceparent, tracestate, \
                       headers, occurred_at, payload, created_at, worker_key, retryable";

/// Moves every row of `table` into its scheduled table, due at `due` (an SQL expression).
async fn schedule_all(pool: &PgPool, table: &str, due: &str) -> Result<(), BoxError> {
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO {table}_scheduled ({COLUMNS}, status, attempts, next_attempt_at) \
         SELECT {COLUMNS}, 'scheduled', 0, {due} FROM {table} ORDER BY seq"
    )))
    .execute(pool)
    .await?;
    sqlx::query(sqlx::AssertSqlSafe(format!("TRUNCATE {table}")))
        .execute(pool)
        .await?;
    Ok(())
}

/// One case: its outbox, whether its rows go through the scheduled table.
struct Case {
    name: &'static str,
    table: &'static str,
    scheduled: bool,
}

pub(super) async fn scheduled(db: &DatabaseConnection, args: &RelayArgs) -> Result<(), BoxError> {
    let pool = db.get_postgres_connection_pool().clone();
    let cases = [
        Case {
            name: "pending rows, never scheduled",
            table: "direct_outbox",
            scheduled: false,
        },
        Case {
            name: "due rows, nothing else waiting",
            table: "due_outbox",
            scheduled: true,
        },
        Case {
            name: "due rows, 1 M waiting for next month",
            table: "future_outbox",
            scheduled: true,
        },
    ];
    let mut outboxes = Vec::new();
    for case in &cases {
        let outbox = Outbox::builder()
            .outbox_table(case.table)
            .inbox_table(format!("{}_inbox", case.table))
            .build()?;
        outbox_seaorm::schema::install(db, &outbox).await?;
        outboxes.push(outbox);
    }
    println!(
        "scheduled: writing {} rows due next month into future_outbox_scheduled…",
        args.future_rows
    );
    fill(&pool, "future_outbox", args.future_rows, false).await?;
    schedule_all(&pool, "future_outbox", "now() + interval '30 days'").await?;
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); cases.len()];
    let mut moves: Vec<Vec<Duration>> = vec![Vec::new(); cases.len()];
    for round in 0..args.rounds {
        for (index, (case, outbox)) in cases.iter().zip(&outboxes).enumerate() {
            fill(&pool, case.table, args.due_rows, false).await?;
            if case.scheduled {
                schedule_all(&pool, case.table, "now() - interval '1 second'").await?;
            }
            if !args.no_vacuum {
                vacuum(&pool, case.table).await?;
                vacuum(&pool, &format!("{}_scheduled", case.table)).await?;
            }
            let mut relay = Relay::builder(db.clone(), outbox.clone(), Noop)
                .instance_id("bench-scheduled")
                .batch_size(args.batch_size)
                .listen(false)
                .build()?;
            relay.refresh_leases().await?;
            let started = Instant::now();
            let moved = relay.promote_scheduled().await?;
            let moving = started.elapsed();
            let report = relay.drain().await?;
            let took = started.elapsed();
            let expected = if case.scheduled { args.due_rows } else { 0 };
            if moved != expected as u64 || report.published != args.due_rows {
                return Err(format!(
                    "{}: moved {moved}, published {} of {}",
                    case.table, report.published, args.due_rows
                )
                .into());
            }
            let rate = args.due_rows as f64 / took.as_secs_f64();
            println!(
                "round {round}: {:<40} {rate:>9.0} rows/s (move {:.0} ms, publish {:.0} ms)",
                case.name,
                moving.as_secs_f64() * 1000.0,
                (took - moving).as_secs_f64() * 1000.0
            );
            rates[index].push(rate);
            moves[index].push(moving);
        }
        println!(
            "round {round}: with 1 M waiting / nothing waiting = {:.3}",
            rates[2][round] / rates[1][round]
        );
    }
    let medians: Vec<f64> = rates
        .iter_mut()
        .map(|rates| median(rates).unwrap_or(f64::NAN))
        .collect();
    for (case, (rate, moving)) in cases.iter().zip(medians.iter().zip(&moves)) {
        let mut moving = moving.clone();
        moving.sort();
        println!(
            "median: {:<40} {rate:>9.0} rows/s (move {:.0} ms)",
            case.name,
            moving[moving.len() / 2].as_secs_f64() * 1000.0
        );
    }
    println!(
        "scheduled drain: with 1 M waiting / nothing waiting = {:.3} (target >= 0.90); \
         scheduled / never scheduled = {:.3}",
        medians[2] / medians[1],
        medians[1] / medians[0]
    );
    for (case, outbox) in cases.iter().zip(&outboxes).skip(1) {
        flow(db, &pool, case, outbox, args).await?;
    }
    Ok(())
}

/// A row's payload number `n` and when it was published.
type Arrival = (i64, chrono::DateTime<chrono::Utc>);

/// Records when each row's payload number `n` was published.
#[derive(Clone, Default)]
struct Arrivals(Arc<Mutex<Vec<Arrival>>>);

impl Publisher for Arrivals {
    async fn publish(&self, batch: &[Envelope]) -> BatchOutcome {
        let now = chrono::Utc::now();
        let mut arrivals = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        for envelope in batch {
            let n = envelope
                .payload
                .to_value()
                .ok()
                .and_then(|payload| payload["n"].as_i64())
                .unwrap_or(-1);
            arrivals.push((n, now));
        }
        Ok(vec![Ok(()); batch.len()])
    }
}

/// The steady flow of one case: rows due evenly over the next seconds, a running relay,
/// how late each went out.
async fn flow(
    db: &DatabaseConnection,
    pool: &PgPool,
    case: &Case,
    outbox: &Outbox,
    args: &RelayArgs,
) -> Result<(), BoxError> {
    let rows = args.flow_rows;
    let step = args.flow_seconds / rows as f64;
    let start = chrono::Utc::now() + chrono::TimeDelta::seconds(2);
    fill(pool, case.table, rows, false).await?;
    // Row n (its payload's `n`, from 1) due at start + (n - 1) * step.
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO {table}_scheduled ({COLUMNS}, status, attempts, next_attempt_at) \
         SELECT {COLUMNS}, 'scheduled', 0, $1::timestamptz + ((payload->>'n')::bigint - 1) \
         * make_interval(secs => {step}) FROM {table} ORDER BY seq",
        table = case.table
    )))
    .bind(start)
    .execute(pool)
    .await?;
    sqlx::query(sqlx::AssertSqlSafe(format!("TRUNCATE {}", case.table)))
        .execute(pool)
        .await?;
    vacuum(pool, &format!("{}_scheduled", case.table)).await?;
    let arrivals = Arrivals::default();
    let relay = Relay::builder(db.clone(), outbox.clone(), arrivals.clone())
        // The drains' instance id: it takes their partition leases over at once.
        .instance_id("bench-scheduled")
        .batch_size(args.batch_size)
        .listen(false)
        .poll_interval(Duration::from_millis(50))
        .schedule_interval(Duration::from_millis(100))
        .build()?;
    let stop = CancellationToken::new();
    let running = tokio::spawn(relay.run(stop.clone()));
    let deadline = Instant::now() + Duration::from_secs_f64(args.flow_seconds + 30.0);
    loop {
        let published = arrivals.0.lock().map(|a| a.len()).unwrap_or(0);
        if published >= rows || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop.cancel();
    running.await??;
    let arrivals = arrivals.0.lock().map(|a| a.clone()).unwrap_or_default();
    let mut late: Vec<Duration> = arrivals
        .iter()
        .map(|(n, at)| {
            let due = start + chrono::TimeDelta::microseconds(((n - 1) as f64 * step * 1e6) as i64);
            (*at - due).to_std().unwrap_or(Duration::ZERO)
        })
        .collect();
    let early = arrivals
        .iter()
        .filter(|(n, at)| {
            *at < start + chrono::TimeDelta::microseconds(((n - 1) as f64 * step * 1e6) as i64)
        })
        .count();
    late.sort();
    println!(
        "steady flow, {:<36} {} of {rows} rows due over {:.0} s: late by p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms; {early} early",
        case.name,
        arrivals.len(),
        args.flow_seconds,
        percentile(&late, 0.5).as_secs_f64() * 1000.0,
        percentile(&late, 0.99).as_secs_f64() * 1000.0,
        late.last().copied().unwrap_or_default().as_secs_f64() * 1000.0,
    );
    Ok(())
}
