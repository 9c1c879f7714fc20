//! `log --part write`: commits/s of a unit of work writing one `OrderPlacedV1` envelope and
//! nothing else, in each write mode, against a raw sqlx `INSERT` of the same outbox row;
//! see the [parent module](super).

use std::sync::Arc;
use std::time::Duration;

use bookstore_contracts::OrderPlacedV1;
use chrono::Utc;
use outbox_core::IntegrationEvent as _;
use outbox_seaorm::partition::partition_of;
use outbox_seaorm::{Outbox, PostgresWakeup, WriteMode};
use sea_orm::DatabaseConnection;
use sea_orm::sqlx::{self, PgPool};
use uuid::Uuid;

use super::cpu::{Cpu, PerEvent};
use super::{BoxError, LogArgs, connect, events};
use crate::measure::median;

/// The outbox table of the write benchmark (message mode writes none).
const OUTBOX: &str = "wr_outbox";

/// The modes, in their column order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// (a) table mode.
    Table,
    /// (b) table mode, the row deleted again in the same transaction.
    Removed,
    /// (c) message mode: `pg_logical_emit_message`, no row.
    Message,
    /// (d) the outbox row of (a) inserted with raw sqlx.
    Raw,
}

const MODES: [Mode; 4] = [Mode::Table, Mode::Removed, Mode::Message, Mode::Raw];

struct Bench {
    db: DatabaseConnection,
    pool: PgPool,
    /// The outboxes of (a), (b) and (c).
    outboxes: [Outbox; 3],
}

impl Bench {
    async fn once(&self, mode: Mode) -> Result<(), BoxError> {
        match mode {
            Mode::Table => events::commit(&self.db, &self.outboxes[0], 1)
                .await
                .map(drop),
            Mode::Removed => events::commit(&self.db, &self.outboxes[1], 1)
                .await
                .map(drop),
            Mode::Message => events::commit(&self.db, &self.outboxes[2], 1)
                .await
                .map(drop),
            Mode::Raw => self.raw().await,
        }
    }

    /// (d): `BEGIN`, the row with every column the unit of work writes, `COMMIT`.
    async fn raw(&self) -> Result<(), BoxError> {
        let event = events::placed();
        let now = Utc::now();
        let aggregate_id = event.aggregate_id();
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "INSERT INTO wr_outbox (message_id, event_type, version, aggregate_type, \
             aggregate_id, partition, correlation_id, causation_id, traceparent, tracestate, \
             headers, occurred_at, payload, status, attempts, next_attempt_at, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)",
        )
        .bind(Uuid::now_v7())
        .bind(OrderPlacedV1::EVENT_TYPE)
        .bind(i32::try_from(OrderPlacedV1::VERSION).unwrap_or(i32::MAX))
        .bind(OrderPlacedV1::AGGREGATE_TYPE)
        .bind(&aggregate_id)
        .bind(i32::try_from(partition_of(&aggregate_id, 64)).unwrap_or(0))
        .bind(Uuid::now_v7())
        .bind(Option::<Uuid>::None)
        .bind(Option::<String>::None)
        .bind(Option::<String>::None)
        .bind(sqlx::types::Json(serde_json::json!({})))
        .bind(now)
        .bind(sqlx::types::Json(&event))
        .bind("pending")
        .bind(0i32)
        .bind(now)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }
}

/// `clients` tasks committing `mode` for `duration`: commits and the elapsed time.
async fn cell(
    bench: &Arc<Bench>,
    mode: Mode,
    clients: usize,
    duration: Duration,
) -> Result<(u64, Duration), BoxError> {
    let bench = Arc::clone(bench);
    crate::measure::concurrently(clients, duration, move || {
        let bench = Arc::clone(&bench);
        async move { bench.once(mode).await }
    })
    .await
}

/// The benchmark.
pub(super) async fn write(args: &LogArgs, url: &str) -> Result<(), BoxError> {
    let max_clients = args.clients.iter().copied().max().unwrap_or(1);
    let db = connect(url, u32::try_from(max_clients + 2)?).await?;
    let pool = db.get_postgres_connection_pool().clone();
    let outbox = |mode: WriteMode| {
        Outbox::builder()
            .outbox_table(OUTBOX)
            .inbox_table("wr_inbox")
            .postgres_wakeup(PostgresWakeup::Off)
            .write_mode(mode)
            .build()
    };
    let outboxes = [
        outbox(WriteMode::table())?,
        outbox(WriteMode::table_removed_after_insert())?,
        outbox(WriteMode::message())?,
    ];
    outbox_seaorm::schema::install(&db, &outboxes[0]).await?;
    let cpu = Cpu::of(&pool).await?;
    let bench = Arc::new(Bench { db, pool, outboxes });
    let seconds = args.seconds.max(0.05);
    for mode in MODES {
        cell(&bench, mode, max_clients, Duration::from_millis(500)).await?;
    }
    println!(
        "write side: one OrderPlacedV1 envelope per transaction and nothing else, {seconds} s \
         x {} rounds per cell, modes rotating; no NOTIFY (PostgresWakeup::Off), no relay \
         running; the table is emptied before each cell",
        args.rounds
    );
    println!(
        "{:>7}  {:>10}  {:>10}  {:>10}  {:>10}  {:>6}  {:>6}  {:>6}   CPU µs/commit client+server a | b | c | d",
        "clients", "(a) table", "(b) remove", "(c) msg", "(d) raw", "c/a", "b/a", "a/d"
    );
    for &clients in &args.clients {
        let mut rates: [Vec<f64>; 4] = Default::default();
        let mut cpu_us: [Vec<PerEvent>; 4] = Default::default();
        let mut ratios: [Vec<f64>; 3] = Default::default();
        for round in 0..args.rounds.max(1) {
            let mut rate = [f64::NAN; 4];
            for step in 0..MODES.len() {
                let which = (round + step) % MODES.len();
                sqlx::query("TRUNCATE wr_outbox")
                    .execute(&bench.pool)
                    .await?;
                let before = cpu.sample();
                let (done, took) = cell(
                    &bench,
                    MODES[which],
                    clients,
                    Duration::from_secs_f64(seconds),
                )
                .await?;
                let after = cpu.sample();
                rate[which] = done as f64 / took.as_secs_f64();
                rates[which].push(rate[which]);
                cpu_us[which].push(after.per_event(&before, usize::try_from(done)?));
            }
            let [a, b, c, d] = rate;
            ratios[0].push(c / a);
            ratios[1].push(b / a);
            ratios[2].push(a / d);
        }
        let [a, b, c, d] = rates.map(|mut values| median(&mut values).unwrap_or(f64::NAN));
        let [ca, ba, ad] = ratios.map(|mut values| median(&mut values).unwrap_or(f64::NAN));
        let cpu = cpu_us.map(|values| {
            let med = |field: fn(&PerEvent) -> f64| {
                median(&mut values.iter().map(field).collect::<Vec<_>>()).unwrap_or(f64::NAN)
            };
            (med(|cpu| cpu.client), med(|cpu| cpu.server))
        });
        println!(
            "{clients:>7}  {a:>10.0}  {b:>10.0}  {c:>10.0}  {d:>10.0}  {ca:>6.3}  {ba:>6.3}  {ad:>6.3}   {}",
            cpu.iter()
                .map(|(client, server)| format!("{client:.0}+{server:.0}"))
                .collect::<Vec<_>>()
                .join(" | ")
        );
    }
    println!(
        "write: rates are medians of the rounds, ratios medians of the per-round ratios; \
         targets c/a >= 1.05"
    );
    let rows = crate::scratch::count(&bench.pool, "SELECT count(*) FROM wr_outbox").await?;
    println!("checked: {rows} rows left in wr_outbox by the last cell");
    Ok(())
}
