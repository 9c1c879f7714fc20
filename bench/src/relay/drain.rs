//! `relay --part drain`: the relay against the raw loop on our table shape and against
//! the simplest hand-written loop, with 1 or more workers of each, in alternated rounds.

use std::time::{Duration, Instant};

use outbox_core::policy::Ordering;
use outbox_core::publish::Publisher;
use outbox_seaorm::Outbox;
use outbox_seaorm::relay::Relay;
use sea_orm::DatabaseConnection;
use sea_orm::sqlx::{self, PgPool};

use super::{BoxError, DrainMode, Noop, RelayArgs, fill, raw, simple, vacuum};
use crate::measure::median;

/// The drain benchmark's own tables.
const OUTBOX: &str = "bench_outbox";
/// The table of the relays through the pooler (leases of their own).
const POOLED_OUTBOX: &str = "bench_pooled";

/// Empties the table of `mode` and fills it with the same fresh rows (see the module
/// documentation of `relay`).
async fn reset(pool: &PgPool, mode: DrainMode, rows: usize) -> Result<(), BoxError> {
    match mode {
        DrainMode::Relay | DrainMode::Raw => {
            sqlx::query("TRUNCATE bench_outbox").execute(pool).await?;
            fill(pool, OUTBOX, rows, false).await?;
            vacuum(pool, OUTBOX).await
        }
        DrainMode::Pooled => {
            sqlx::query("TRUNCATE bench_pooled").execute(pool).await?;
            fill(pool, POOLED_OUTBOX, rows, false).await?;
            vacuum(pool, POOLED_OUTBOX).await
        }
        DrainMode::Simple => {
            simple::refill(pool, rows).await?;
            vacuum(pool, simple::TABLE).await
        }
    }
}

/// Runs `workers` loops of `mode` at once; returns the rows they published together.
async fn run_mode(
    mode: DrainMode,
    relays: &mut [Relay<Noop>],
    pool: &PgPool,
    batch: usize,
    keep: bool,
) -> Result<usize, BoxError> {
    let workers = relays.len();
    match mode {
        DrainMode::Relay | DrainMode::Pooled => {
            let drains = relays.iter_mut().map(|relay| relay.drain());
            let reports = futures_util::future::try_join_all(drains).await?;
            Ok(reports.iter().map(|report| report.published).sum())
        }
        DrainMode::Raw => {
            let loops = (0..workers).map(|_| raw::drain(pool, batch, keep));
            Ok(futures_util::future::try_join_all(loops)
                .await?
                .iter()
                .sum())
        }
        DrainMode::Simple => {
            let loops = (0..workers).map(|_| simple::drain(pool, batch));
            Ok(futures_util::future::try_join_all(loops)
                .await?
                .iter()
                .sum())
        }
    }
}

/// Builds `--workers` relays publishing to `publisher` (instance ids `<prefix>-<n>`) and lets
/// them settle their leases, so that each drain starts with the partitions shared out.
pub(super) async fn relays<P: Publisher + Clone + 'static>(
    db: &DatabaseConnection,
    outbox: &Outbox,
    args: &RelayArgs,
    publisher: P,
    prefix: &str,
    worker_key: Option<&str>,
) -> Result<Vec<Relay<P>>, BoxError> {
    let mut relays = Vec::new();
    for worker in 0..args.workers.max(1) {
        let mut builder = Relay::builder(db.clone(), outbox.clone(), publisher.clone());
        if let Some(key) = worker_key {
            builder = builder.worker_keys([key]);
        }
        relays.push(
            builder
                .instance_id(format!("{prefix}-{worker}"))
                .ordering(args.ordering.into())
                .batch_size(args.batch_size)
                .pipeline(args.pipeline)
                .listen(false)
                .retention(if args.keep_published {
                    None
                } else {
                    Some(Duration::ZERO)
                })
                .build()?,
        );
    }
    // Three passes: in the first, the first relay takes every lease before the others are
    // alive; in the second it gives up the others' shares, which they take in the third.
    for _ in 0..3 {
        for relay in &mut relays {
            relay.refresh_leases().await?;
        }
    }
    Ok(relays)
}

/// The benchmark.
pub(super) async fn drain(
    db: &DatabaseConnection,
    pooled: Option<&DatabaseConnection>,
    args: &RelayArgs,
) -> Result<(), BoxError> {
    let outbox = Outbox::builder()
        .outbox_table(OUTBOX)
        .inbox_table("bench_inbox")
        .build()?;
    outbox_seaorm::schema::install(db, &outbox).await?;
    let pool = db.get_postgres_connection_pool().clone();
    simple::create(&pool).await?;
    // The same relays through the pooler, on a table of their own.
    let mut pooled_relays = match pooled {
        Some(pooled) => {
            let outbox = Outbox::builder()
                .outbox_table(POOLED_OUTBOX)
                .inbox_table("bench_pooled_inbox")
                .transaction_pooling(true)
                .build()?;
            outbox_seaorm::schema::install(db, &outbox).await?; // directly, as migrations run
            relays(pooled, &outbox, args, Noop, "bench-pooled", None).await?
        }
        None => Vec::new(),
    };
    let mut relays = relays(db, &outbox, args, Noop, "bench-relay", None).await?;
    let ordering: Ordering = args.ordering.into();
    println!(
        "drain {} pending rows, batch {}, {} worker(s) of each, relay ordering {}, pipeline {}, \
         synchronous_commit {}, published rows {}, no-op publisher, PostgreSQL",
        args.rows,
        args.batch_size,
        relays.len(),
        ordering.as_str(),
        args.pipeline,
        if args.synchronous_commit { "on" } else { "off" },
        if args.keep_published {
            "kept (UPDATE)"
        } else {
            "deleted"
        },
    );
    println!(
        "{:>6}  {:>14}  {:>14}  {:>14}  {:>10}  {:>13}  {:>15}  {:>12}",
        "round",
        "relay rows/s",
        "raw rows/s",
        "simple rows/s",
        "relay/raw",
        "relay/simple",
        "pooled rows/s",
        "pooled/relay"
    );
    const MODES: [DrainMode; 4] = [
        DrainMode::Relay,
        DrainMode::Raw,
        DrainMode::Simple,
        DrainMode::Pooled,
    ];
    let (mut vs_raw, mut vs_simple, mut vs_direct) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..args.rounds.max(1) {
        let mut rates = [f64::NAN; 4];
        // Each round starts with another mode: each runs first, second and third in turn.
        for step in 0..MODES.len() {
            let which = (round + step) % MODES.len();
            let mode = MODES[which];
            let pooled = mode == DrainMode::Pooled;
            if (pooled && pooled_relays.is_empty())
                || (!pooled && !args.drain_modes.contains(&mode))
            {
                continue;
            }
            reset(&pool, mode, args.rows).await?;
            let started = Instant::now();
            let published = run_mode(
                mode,
                if pooled {
                    &mut pooled_relays
                } else {
                    &mut relays
                },
                &pool,
                args.batch_size,
                args.keep_published,
            )
            .await?;
            let took: Duration = started.elapsed();
            if published != args.rows {
                return Err(
                    format!("{mode:?}: published {published} of {} rows", args.rows).into(),
                );
            }
            rates[which] = args.rows as f64 / took.as_secs_f64();
        }
        let (relay, raw, simple, pooled) = (rates[0], rates[1], rates[2], rates[3]);
        vs_raw.push(relay / raw);
        vs_simple.push(relay / simple);
        vs_direct.push(pooled / relay);
        println!(
            "{round:>6}  {relay:>14.0}  {raw:>14.0}  {simple:>14.0}  {:>10.3}  {:>13.3}  {pooled:>15.0}  {:>12.3}",
            relay / raw,
            relay / simple,
            pooled / relay
        );
    }
    println!(
        "drain: median relay / raw = {:.3}, median relay / simple = {:.3}, median pooled / relay = {:.3} over {} rounds",
        median(&mut vs_raw).unwrap_or(f64::NAN),
        median(&mut vs_simple).unwrap_or(f64::NAN),
        median(&mut vs_direct).unwrap_or(f64::NAN),
        args.rounds.max(1)
    );
    Ok(())
}
