//! `relay --part jobs` (issue 36): jobs per second through a relay whose publisher is a
//! [`JobDispatcher`] with a no-op handler, against the simplest hand-written `SKIP LOCKED`
//! job loop on the same database, with `--workers` loops of each at once, in alternated
//! rounds.
//!
//! Both decode each job's arguments into the same struct and await the same no-op handler,
//! one job after the other. The simplest job loop, on a narrow table of its own:
//!
//! ```sql
//! BEGIN;
//! SELECT id, args FROM simple_jobs WHERE finished_at IS NULL ORDER BY id LIMIT 500
//!     FOR UPDATE SKIP LOCKED;
//! -- for each row: decode args, await the handler
//! UPDATE simple_jobs SET finished_at = now() WHERE id = ANY($1);
//! COMMIT;
//! ```
//!
//! No order, no leases, no retries, no dead letters, no worker keys: the loop a team writes
//! in an afternoon. The relay does all of that (its ordering per `--ordering`), deletes done
//! jobs (retention zero) unless `--keep-published`.
//!
//! `--priorities`: every job under one worker key, one in ten at priority 0 and the others
//! at 5; the relays (keyed) claim by `(priority, seq)`, the simple loop `ORDER BY priority,
//! id` through a partial index on `(priority, id)`.

use std::time::Instant;

use outbox_core::{Envelope, IntegrationEvent};
use outbox_seaorm::Outbox;
use outbox_seaorm::job::{Job, JobDispatcher, JobError};
use sea_orm::DatabaseConnection;
use sea_orm::sqlx::{self, PgPool, Row};
use serde::{Deserialize, Serialize};

use super::{BoxError, RelayArgs, drain, vacuum};
use crate::measure::median;

/// The relay's table.
const OUTBOX: &str = "bench_jobs";

/// A job's arguments: an order to confirm by e-mail.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema, IntegrationEvent)]
#[integration_event(name = "bench.jobs.confirmation-requested.v1", key = order_id)]
struct ConfirmationRequestedV1 {
    order_id: String,
    n: i64,
    books: Vec<Book>,
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct Book {
    book_id: String,
    quantity: i64,
}

/// The handler both run: nothing, awaited.
async fn handle(job: ConfirmationRequestedV1) -> Result<(), JobError> {
    std::hint::black_box(&job);
    Ok(())
}

/// The arguments' JSON, as `generate_series` row `i` builds it.
const ARGS: &str = "jsonb_build_object('order_id', 'order-' || (i % 1000), 'n', i, 'books', \
                    jsonb_build_array(jsonb_build_object('book_id', 'dune', 'quantity', 2)))";

/// The worker key of `--priorities`.
const WORKER_KEY: &str = "bench";

/// A job's priority under `--priorities`, as `generate_series` row `i` gets it: one in ten
/// urgent (0), the others 5.
const PRIORITY: &str = "CASE WHEN i % 10 = 0 THEN 0 ELSE 5 END";

/// Empties the relay's table and inserts `rows` pending jobs in the framework's format
/// (under `WORKER_KEY` with priorities when `priorities`).
async fn refill_outbox(pool: &PgPool, rows: usize, priorities: bool) -> Result<(), BoxError> {
    let (key, priority) = if priorities {
        (format!("'{WORKER_KEY}'"), PRIORITY)
    } else {
        ("NULL".to_owned(), "0")
    };
    sqlx::query(sqlx::AssertSqlSafe(format!("TRUNCATE {OUTBOX}")))
        .execute(pool)
        .await?;
    let mut done = 0;
    while done < rows {
        let chunk = (rows - done).min(100_000);
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO {OUTBOX} (message_id, event_type, version, aggregate_type, aggregate_id, \
             partition, headers, occurred_at, payload, status, attempts, next_attempt_at, \
             created_at, worker_key, priority) \
             SELECT gen_random_uuid(), '{}', 1, 'order', 'order-' || (i % 1000), \
             (i % 1000) % 64, '{{}}'::jsonb, now(), {ARGS}, 'pending', 0, now(), now(), \
             {key}, {priority} FROM generate_series({}, {}) AS i",
            ConfirmationRequestedV1::EVENT_TYPE,
            done + 1,
            done + chunk
        )))
        .execute(pool)
        .await?;
        done += chunk;
    }
    vacuum(pool, OUTBOX).await
}

/// Creates the simple loop's table and its partial index (on `(priority, id)` when
/// `priorities`).
async fn create_simple(pool: &PgPool, priorities: bool) -> Result<(), BoxError> {
    sqlx::query(
        "CREATE TABLE simple_jobs (id bigserial PRIMARY KEY, args jsonb NOT NULL, \
         priority int NOT NULL DEFAULT 0, finished_at timestamptz)",
    )
    .execute(pool)
    .await?;
    let columns = if priorities { "priority, id" } else { "id" };
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "CREATE INDEX simple_jobs_todo_idx ON simple_jobs ({columns}) WHERE finished_at IS NULL"
    )))
    .execute(pool)
    .await?;
    Ok(())
}

/// Empties the simple loop's table and inserts `rows` jobs with the same arguments.
async fn refill_simple(pool: &PgPool, rows: usize, priorities: bool) -> Result<(), BoxError> {
    sqlx::query("TRUNCATE simple_jobs").execute(pool).await?;
    let priority = if priorities { PRIORITY } else { "0" };
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO simple_jobs (args, priority) SELECT {ARGS}, {priority} \
         FROM generate_series(1, {rows}) AS i"
    )))
    .execute(pool)
    .await?;
    vacuum(pool, "simple_jobs").await
}

/// The simplest job loop, until a claim comes back empty; returns the jobs run.
async fn simple_loop(pool: &PgPool, batch: usize, priorities: bool) -> Result<usize, BoxError> {
    let limit = i64::try_from(batch)?;
    let order = if priorities { "priority, id" } else { "id" };
    let claim = format!(
        "SELECT id, args FROM simple_jobs WHERE finished_at IS NULL ORDER BY {order} LIMIT $1 \
         FOR UPDATE SKIP LOCKED"
    );
    let mut total = 0;
    loop {
        let mut txn = pool.begin().await?;
        let rows = sqlx::query(sqlx::AssertSqlSafe(claim.as_str()))
            .bind(limit)
            .fetch_all(&mut *txn)
            .await?;
        if rows.is_empty() {
            txn.commit().await?;
            return Ok(total);
        }
        let mut ids = Vec::with_capacity(rows.len());
        for row in &rows {
            ids.push(row.try_get::<i64, _>(0)?);
            let args: sqlx::types::Json<ConfirmationRequestedV1> = row.try_get(1)?;
            handle(args.0).await?;
        }
        sqlx::query("UPDATE simple_jobs SET finished_at = now() WHERE id = ANY($1)")
            .bind(&ids)
            .execute(&mut *txn)
            .await?;
        txn.commit().await?;
        total += ids.len();
    }
}

/// The benchmark.
pub(super) async fn jobs(db: &DatabaseConnection, args: &RelayArgs) -> Result<(), BoxError> {
    let mut builder = Outbox::builder()
        .outbox_table(OUTBOX)
        .inbox_table("bench_jobs_inbox");
    if args.priorities {
        // The rows' worker key and priorities are written by the refill; the entry makes
        // the relays claim by priority.
        builder = builder.job(
            Job::of::<ConfirmationRequestedV1>()
                .worker_key(WORKER_KEY)
                .priority(5),
        );
    }
    let outbox = builder.build()?;
    outbox_seaorm::schema::install(db, &outbox).await?;
    let pool = db.get_postgres_connection_pool().clone();
    create_simple(&pool, args.priorities).await?;
    let jobs = JobDispatcher::builder()
        .handler(|job: ConfirmationRequestedV1, _: &Envelope| handle(job))
        .build()?;
    let key = args.priorities.then_some(WORKER_KEY);
    let mut relays = drain::relays(db, &outbox, args, jobs, "bench-jobs", key).await?;
    let workers = relays.len();
    println!(
        "jobs: {} jobs, batch {}, {workers} worker(s) of each, relay ordering {:?}, pipeline {}, \
         priorities {}, no-op handler (arguments decoded), PostgreSQL",
        args.rows, args.batch_size, args.ordering, args.pipeline, args.priorities,
    );
    println!(
        "{:>6}  {:>14}  {:>14}  {:>13}",
        "round", "relay jobs/s", "simple jobs/s", "relay/simple"
    );
    let mut ratios = Vec::new();
    for round in 0..args.rounds.max(1) {
        let mut rates = [f64::NAN; 2];
        for step in 0..2 {
            let which = (round + step) % 2;
            let started;
            let ran = if which == 0 {
                refill_outbox(&pool, args.rows, args.priorities).await?;
                started = Instant::now();
                let drains = relays.iter_mut().map(|relay| relay.drain());
                let reports = futures_util::future::try_join_all(drains).await?;
                reports.iter().map(|report| report.published).sum::<usize>()
            } else {
                refill_simple(&pool, args.rows, args.priorities).await?;
                started = Instant::now();
                let loops =
                    (0..workers).map(|_| simple_loop(&pool, args.batch_size, args.priorities));
                futures_util::future::try_join_all(loops)
                    .await?
                    .iter()
                    .sum::<usize>()
            };
            let took = started.elapsed();
            if ran != args.rows {
                return Err(format!("ran {ran} of {} jobs", args.rows).into());
            }
            rates[which] = args.rows as f64 / took.as_secs_f64();
        }
        ratios.push(rates[0] / rates[1]);
        println!(
            "{round:>6}  {:>14.0}  {:>14.0}  {:>13.3}",
            rates[0],
            rates[1],
            rates[0] / rates[1]
        );
    }
    println!(
        "jobs: median relay / simple = {:.3} over {} rounds, {workers} worker(s)",
        median(&mut ratios).unwrap_or(f64::NAN),
        args.rounds.max(1)
    );
    Ok(())
}
