//! The inbox benchmark (issue 5): one consumer transaction reserving stock for an incoming
//! `OrderPlacedV1` (3 books), on PostgreSQL, at 1 / 4 / 16 concurrent clients:
//!
//! - (a) **raw SQL** through sqlx on the same pool: BEGIN; `INSERT INTO inbox (message_id,
//!   consumer, event_type, received_at, processed_at) … ON CONFLICT DO NOTHING`; 3 ×
//!   `UPDATE stock SET reserved = reserved + $1 WHERE book_id = $2`; COMMIT;
//! - (b) **framework**: `inbox::apply::<reserve_stock>` of a handler written with
//!   `#[inbox_handler(consumer = "bench.reserve-stock")]` doing the 3 updates with SeaORM
//!   (`update_many` on the stock entity) on the consumer unit of work;
//! - (c) **business only**: the same SeaORM updates in a plain SeaORM transaction, no inbox;
//! - (d) **raw business only**: the 3 raw updates through sqlx, no inbox (a − d is what the
//!   inbox row costs in raw SQL, b − c what it costs in the framework);
//! - (e) **dispatch**: `Consumer::deliver` of the same envelope (routing by event type,
//!   retries, metrics) around (b);
//! - (f) **fenced**: (e) through a partitioned consumer's partition (the lease row read
//!   share-locked in every transaction, `outbox_seaorm::inbox::partitioned`). The benchmark
//!   holds one partition per client, message `n` goes to partition `n` modulo their number
//!   (a partition runner settles one message at a time, so a lease row rarely has two
//!   lockers).
//!
//! Every mode gets a fresh envelope (new message id, built with `Envelope::from_event`) per
//! transaction, inside the timed section, and decodes its payload as `OrderPlacedV1` (the
//! framework through `EnvelopeConfig::decode`, the baselines with serde). Message `n` reserves
//! books `3n`, `3n + 1`, `3n + 2` (modulo the stock size), so concurrent clients do not wait
//! on each other's rows.
//!
//! Printed: transactions per second, b/a, b/c, a/d, e/b and f/e (from the totals of every round,
//! then the median of the per-round ratios); then the CPU time per transaction in each mode,
//! of the client (this process, every thread) and of the server (the benchmark's PostgreSQL
//! backends, when PostgreSQL runs on this machine), read from `/proc/<pid>/task/*/schedstat`.
//! The framework sends the same statements as (a) (check with `--log-statements`), so what
//! it adds shows up as CPU.
//!
//! ```text
//! cargo run --release -p outbox-bench -- inbox --database-url postgres://postgres@127.0.0.1:5432/postgres
//! ```

use std::error::Error;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bookstore_contracts::{MoneyV1, OrderPlacedV1, OrderedBookV1};
use chrono::Utc;
use outbox_core::{Envelope, IntegrationEvent};
use outbox_seaorm::inbox::{self, Consumer, Delivered, InboxOutcome};
use outbox_seaorm::{Outbox, UnitOfWork, inbox_handler};
use sea_orm::sea_query::Expr;
use sea_orm::sqlx::{self, PgPool};
use sea_orm::{
    ColumnTrait as _, ConnectOptions, ConnectionTrait, Database, DatabaseConnection, DbErr,
    EntityTrait as _, QueryFilter as _, TransactionTrait as _,
};
use uuid::Uuid;

use crate::measure::{Timing, median};
use crate::scratch::count;

type BoxError = Box<dyn Error + Send + Sync>;

/// The consumer name of the benchmark's handler.
const CONSUMER: &str = "bench.reserve-stock";

/// Options of `inbox`.
#[derive(Debug, Clone, clap::Args)]
pub struct InboxArgs {
    /// A PostgreSQL server; the benchmark creates and drops its own database on it.
    #[arg(long, default_value = "postgres://postgres@127.0.0.1:5432/postgres")]
    pub database_url: String,
    /// Rows of the stock table (a multiple of 3; message `n` reserves books `3n` to `3n + 2`
    /// modulo this).
    #[arg(long, default_value_t = 3_000)]
    pub books: u64,
    /// Modes to run (to profile some of them); a ratio needs both of its modes.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = Mode::ALL)]
    pub modes: Vec<Mode>,
    /// Log every statement of the benchmark's connections, with its duration, in the server
    /// log (`log_statement = all`, `log_duration = on`; needs a superuser): to count round
    /// trips per transaction and see where the server spends its time.
    #[arg(long)]
    pub log_statements: bool,
    #[command(flatten)]
    pub timing: Timing,
}

mod stock {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "stock")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub book_id: String,
        pub on_hand: i32,
        pub reserved: i32,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

/// The business statements of (b) and (c): one SeaORM `UPDATE` per ordered book.
async fn reserve<C: ConnectionTrait>(db: &C, placed: &OrderPlacedV1) -> Result<(), DbErr> {
    use sea_orm::sea_query::ExprTrait as _;
    for book in &placed.books {
        stock::Entity::update_many()
            .col_expr(
                stock::Column::Reserved,
                Expr::col(stock::Column::Reserved).add(i32::try_from(book.quantity).unwrap_or(0)),
            )
            .filter(stock::Column::BookId.eq(book.book_id.as_str()))
            .exec(db)
            .await?;
    }
    Ok(())
}

/// (b): the consumer handler.
#[inbox_handler(consumer = "bench.reserve-stock")]
async fn reserve_stock(uow: &UnitOfWork, event: OrderPlacedV1) -> Result<(), DbErr> {
    reserve(uow, &event).await
}

/// `--modes`: (a) to (e).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// (a) raw SQL through sqlx, inbox row included.
    Raw,
    /// (b) `inbox::apply` of the `#[inbox_handler]`.
    Framework,
    /// (c) the SeaORM updates in a plain transaction, no inbox.
    BusinessOnly,
    /// (d) the raw updates through sqlx, no inbox.
    RawBusinessOnly,
    /// (e) `Consumer::deliver`.
    Deliver,
    /// (f) `Consumer::deliver` fenced by a partition lease.
    Fenced,
}

impl Mode {
    const ALL: [Mode; 6] = [
        Mode::Raw,
        Mode::Framework,
        Mode::BusinessOnly,
        Mode::RawBusinessOnly,
        Mode::Deliver,
        Mode::Fenced,
    ];
}

struct Bench {
    db: DatabaseConnection,
    pool: PgPool,
    outbox: Outbox,
    consumer: Consumer,
    /// One fenced consumer per partition held.
    fenced: Vec<Consumer>,
    books: u64,
    next: AtomicU64,
}

fn book_id(n: u64) -> String {
    format!("book-{n:05}")
}

const RAW_INBOX_INSERT: &str = "INSERT INTO inbox (message_id, consumer, event_type, \
                                received_at, processed_at) VALUES ($1, $2, $3, $4, $5) \
                                ON CONFLICT DO NOTHING";
const RAW_UPDATE: &str = "UPDATE stock SET reserved = reserved + $1 WHERE book_id = $2";

impl Bench {
    /// A new incoming message: fresh message id, the next 3 books.
    fn message(&self) -> Result<Envelope, BoxError> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let first = (3 * n) % self.books;
        let placed = OrderPlacedV1 {
            order_id: Uuid::now_v7(),
            checkout_id: Uuid::now_v7(),
            customer_id: Uuid::now_v7(),
            books: (first..first + 3)
                .map(|book| OrderedBookV1 {
                    book_id: book_id(book),
                    quantity: 1 + u32::try_from(book % 2).unwrap_or(0),
                    unit_price: MoneyV1 {
                        amount: "12.50".into(),
                        currency: "EUR".into(),
                    },
                })
                .collect(),
        };
        Ok(Envelope::from_event(&placed)?)
    }

    /// The baselines' decode: the payload as the contract, with serde.
    fn decode(envelope: &Envelope) -> Result<OrderPlacedV1, BoxError> {
        if envelope.event_type != OrderPlacedV1::EVENT_TYPE {
            return Err("unexpected event type".into());
        }
        Ok(envelope.payload.deserialize_as::<OrderPlacedV1>()?)
    }

    async fn raw_updates(
        tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
        placed: &OrderPlacedV1,
    ) -> Result<(), BoxError> {
        for book in &placed.books {
            sqlx::query(RAW_UPDATE)
                .bind(i32::try_from(book.quantity).unwrap_or(0))
                .bind(&book.book_id)
                .execute(&mut **tx)
                .await?;
        }
        Ok(())
    }

    async fn raw(&self) -> Result<(), BoxError> {
        let envelope = self.message()?;
        let placed = Self::decode(&envelope)?;
        let now = Utc::now();
        let mut tx = self.pool.begin().await?;
        let inserted = sqlx::query(RAW_INBOX_INSERT)
            .bind(envelope.message_id)
            .bind(CONSUMER)
            .bind(&envelope.event_type)
            .bind(now)
            .bind(now)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if inserted == 0 {
            tx.rollback().await?;
            return Err("raw: unexpected duplicate".into());
        }
        Self::raw_updates(&mut tx, &placed).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn raw_business_only(&self) -> Result<(), BoxError> {
        let envelope = self.message()?;
        let placed = Self::decode(&envelope)?;
        let mut tx = self.pool.begin().await?;
        Self::raw_updates(&mut tx, &placed).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn framework(&self) -> Result<(), BoxError> {
        let envelope = self.message()?;
        match inbox::apply::<reserve_stock>(&self.db, &self.outbox, &envelope).await? {
            InboxOutcome::Applied => Ok(()),
            other => Err(format!("framework: {other:?}").into()),
        }
    }

    async fn business_only(&self) -> Result<(), BoxError> {
        let envelope = self.message()?;
        let placed = Self::decode(&envelope)?;
        let txn = self.db.begin().await?;
        reserve(&txn, &placed).await?;
        txn.commit().await?;
        Ok(())
    }

    async fn deliver(&self) -> Result<(), BoxError> {
        let envelope = self.message()?;
        match self.consumer.deliver(&envelope).await? {
            Delivered::Applied { attempts: 1 } => Ok(()),
            other => Err(format!("deliver: {other:?}").into()),
        }
    }

    async fn fenced(&self) -> Result<(), BoxError> {
        let envelope = self.message()?;
        let n = self.next.load(Ordering::Relaxed);
        let partition = usize::try_from(n).unwrap_or(0) % self.fenced.len().max(1);
        let consumer = self.fenced.get(partition).ok_or("no partition held")?;
        match consumer.deliver(&envelope).await? {
            Delivered::Applied { attempts: 1 } => Ok(()),
            other => Err(format!("fenced deliver: {other:?}").into()),
        }
    }

    async fn once(&self, mode: Mode) -> Result<(), BoxError> {
        match mode {
            Mode::Raw => self.raw().await,
            Mode::Framework => self.framework().await,
            Mode::BusinessOnly => self.business_only().await,
            Mode::RawBusinessOnly => self.raw_business_only().await,
            Mode::Deliver => self.deliver().await,
            Mode::Fenced => self.fenced().await,
        }
    }
}

/// CPU time so far of this process (every thread: the Tokio workers run the clients) and of
/// the benchmark's PostgreSQL backends, from `/proc/<pid>/task/*/schedstat` (nanoseconds).
/// The server side is measured only when PostgreSQL runs on this machine (its backends'
/// processes are visible and named `postgres`).
struct CpuClocks {
    backends: Vec<u32>,
}

impl CpuClocks {
    async fn new(pool: &PgPool) -> Result<Self, BoxError> {
        let pids: Vec<i32> = sqlx::query_scalar(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()",
        )
        .fetch_all(pool)
        .await?;
        let local = |pid: &u32| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|comm| comm.trim() == "postgres")
        };
        let backends: Vec<u32> = pids
            .into_iter()
            .filter_map(|pid| u32::try_from(pid).ok())
            .collect();
        Ok(Self {
            backends: if backends.iter().all(local) {
                backends
            } else {
                Vec::new()
            },
        })
    }

    fn client(&self) -> Option<Duration> {
        crate::measure::task_cpu("self")
    }

    fn server(&self) -> Option<Duration> {
        if self.backends.is_empty() {
            return None;
        }
        self.backends
            .iter()
            .map(|pid| crate::measure::task_cpu(&pid.to_string()))
            .sum()
    }
}

/// What one cell (or the sum of a mode's cells) measured.
#[derive(Debug, Clone, Copy)]
struct Measured {
    transactions: u64,
    elapsed: Duration,
    /// CPU time of this process, when measurable.
    client_cpu: Option<Duration>,
    /// CPU time of the benchmark's PostgreSQL backends, when measurable.
    server_cpu: Option<Duration>,
}

impl std::ops::Add for Measured {
    type Output = Self;

    fn add(self, other: Self) -> Self {
        let sum = |a: Option<Duration>, b: Option<Duration>| a.zip(b).map(|(a, b)| a + b);
        Self {
            transactions: self.transactions + other.transactions,
            elapsed: self.elapsed + other.elapsed,
            client_cpu: sum(self.client_cpu, other.client_cpu),
            server_cpu: sum(self.server_cpu, other.server_cpu),
        }
    }
}

impl Measured {
    fn rate(&self) -> f64 {
        self.transactions as f64 / self.elapsed.as_secs_f64()
    }

    /// Client and server CPU microseconds per transaction, as `client+server`.
    fn cpu_per_transaction(&self) -> String {
        let per = |cpu: Option<Duration>| {
            cpu.map_or_else(
                || "-".to_owned(),
                |cpu| {
                    let us = cpu.as_secs_f64() * 1e6 / self.transactions.max(1) as f64;
                    format!("{us:.0}")
                },
            )
        };
        format!("{}+{}", per(self.client_cpu), per(self.server_cpu))
    }
}

/// Runs `clients` tasks doing `mode` transactions for `duration`.
async fn cell(
    bench: &Arc<Bench>,
    clocks: &CpuClocks,
    mode: Mode,
    clients: usize,
    duration: Duration,
) -> Result<Measured, BoxError> {
    let (client_before, server_before) = (clocks.client(), clocks.server());
    let start = Instant::now();
    let deadline = start + duration;
    let mut tasks = Vec::with_capacity(clients);
    for _ in 0..clients {
        let bench = Arc::clone(bench);
        tasks.push(tokio::spawn(async move {
            let mut done = 0u64;
            while Instant::now() < deadline {
                bench.once(mode).await?;
                done += 1;
            }
            Ok::<u64, BoxError>(done)
        }));
    }
    let mut transactions = 0;
    for task in tasks {
        transactions += task.await??;
    }
    let elapsed = start.elapsed();
    let spent = |after: Option<Duration>, before: Option<Duration>| {
        after.zip(before).map(|(a, b)| a.saturating_sub(b))
    };
    Ok(Measured {
        transactions,
        elapsed,
        client_cpu: spent(clocks.client(), client_before),
        server_cpu: spent(clocks.server(), server_before),
    })
}

/// Runs the benchmark.
pub async fn run(args: InboxArgs) -> Result<(), BoxError> {
    if args.books < 3 || !args.books.is_multiple_of(3) {
        return Err("--books must be a positive multiple of 3".into());
    }
    let scratch = crate::scratch::ScratchDatabase::create(&args.database_url).await?;
    let url = scratch.url().to_owned();
    let result = run_on(&url, &args).await;
    scratch.drop().await?;
    result
}

async fn run_on(url: &str, args: &InboxArgs) -> Result<(), BoxError> {
    let timing = &args.timing;
    let max_clients = timing.clients.iter().copied().max().unwrap_or(1);
    let pool_size = u32::try_from(max_clients + 2).unwrap_or(u32::MAX);
    let mut options = ConnectOptions::new(url.to_owned());
    options
        .max_connections(pool_size)
        .min_connections(pool_size)
        .sqlx_logging(false);
    if args.log_statements {
        options.map_sqlx_postgres_opts(|opts| {
            opts.options([("log_statement", "all"), ("log_duration", "on")])
        });
    }
    let db = Database::connect(options).await?;
    let schema = sea_orm::Schema::new(db.get_database_backend());
    db.execute(&schema.create_table_from_entity(stock::Entity))
        .await?;
    db.execute_unprepared(&format!(
        "INSERT INTO stock (book_id, on_hand, reserved) \
         SELECT 'book-' || lpad(n::text, 5, '0'), 1000000, 0 FROM generate_series(0, {}) AS n",
        args.books - 1
    ))
    .await?;
    let outbox = Outbox::default();
    outbox_seaorm::schema::install(&db, &outbox).await?;
    let consumer = Consumer::builder(db.clone(), outbox.clone(), CONSUMER).build()?;
    let (fenced, leases) = hold_partitions(&consumer, max_clients).await?;
    let pool = db.get_postgres_connection_pool().clone();
    let bench = Arc::new(Bench {
        db,
        pool,
        outbox,
        consumer,
        fenced,
        books: args.books,
        next: AtomicU64::new(0),
    });

    // Warm up every mode (connections, prepared statements).
    let clocks = CpuClocks::new(&bench.pool).await?;
    for &mode in &args.modes {
        cell(
            &bench,
            &clocks,
            mode,
            max_clients,
            Duration::from_millis(500),
        )
        .await?;
    }

    println!(
        "inbox on PostgreSQL: consumer transaction = inbox row + 3 stock updates, {} s x {} \
         rounds per cell, {} books",
        timing.seconds, timing.rounds, args.books
    );
    println!(
        "(a) raw sqlx  (b) inbox::apply  (c) SeaORM business only  (d) raw business only  \
         (e) Consumer::deliver  (f) fenced deliver"
    );
    println!(
        "{:>7}  {:>9}  {:>9}  {:>9}  {:>9}  {:>9}  {:>9}  {:>6}  {:>6}  {:>6}  {:>6}  {:>6}",
        "clients",
        "(a) tx/s",
        "(b) tx/s",
        "(c) tx/s",
        "(d) tx/s",
        "(e) tx/s",
        "(f) tx/s",
        "b/a",
        "b/c",
        "a/d",
        "e/b",
        "f/e"
    );
    // (numerator, denominator) of each printed ratio: b/a, b/c, a/d, e/b, f/e.
    const RATIOS: [(usize, usize); 5] = [(1, 0), (1, 2), (0, 3), (4, 1), (5, 4)];
    let number = |value: Option<f64>, width: usize, decimals: usize| {
        value.map_or_else(
            || format!("{:>width$}", "-"),
            |value| format!("{value:>width$.decimals$}"),
        )
    };
    let mut median_lines = Vec::new();
    let mut spread_lines = Vec::new();
    let mut cpu_lines = Vec::new();
    for &clients in &timing.clients {
        let mut totals: [Option<Measured>; Mode::ALL.len()] = [None; Mode::ALL.len()];
        let mut rounds = Vec::with_capacity(timing.rounds);
        for round in 0..timing.rounds {
            let mut rates: [Option<f64>; Mode::ALL.len()] = [None; Mode::ALL.len()];
            for k in 0..Mode::ALL.len() {
                let index = (round + k) % Mode::ALL.len();
                let mode = Mode::ALL[index];
                if !args.modes.contains(&mode) {
                    continue;
                }
                let measured = cell(&bench, &clocks, mode, clients, timing.cell()).await?;
                rates[index] = Some(measured.rate());
                totals[index] = Some(match totals[index] {
                    Some(total) => total + measured,
                    None => measured,
                });
            }
            rounds.push(rates);
        }
        let rate = totals.map(|total| total.map(|m| m.rate()));
        let mut line = format!("{clients:>7}");
        for value in rate {
            line.push_str(&format!("  {}", number(value, 9, 0)));
        }
        let mut medians = format!("{clients:>7}");
        let mut spreads = format!("{clients:>7}");
        for (x, y) in RATIOS {
            let ratio = rate[x].zip(rate[y]).map(|(x, y)| x / y);
            line.push_str(&format!("  {}", number(ratio, 6, 3)));
            let mut per_round: Vec<f64> = rounds
                .iter()
                .filter_map(|rates| rates[x].zip(rates[y]).map(|(x, y)| x / y))
                .collect();
            let spread = per_round
                .iter()
                .copied()
                .fold(None, |range: Option<(f64, f64)>, r| {
                    Some(range.map_or((r, r), |(lo, hi)| (lo.min(r), hi.max(r))))
                });
            let median = median(&mut per_round);
            medians.push_str(&format!("  {}", number(median, 6, 3)));
            spreads.push_str(&format!(
                "  {:>13}",
                spread.map_or_else(|| "-".to_owned(), |(lo, hi)| format!("{lo:.3}-{hi:.3}"))
            ));
        }
        println!("{line}");
        median_lines.push(medians);
        spread_lines.push(spreads);
        let mut cpu = format!("{clients:>7}");
        for total in totals {
            let text = total.map_or_else(|| "-".to_owned(), |m| m.cpu_per_transaction());
            cpu.push_str(&format!("  {text:>11}"));
        }
        cpu_lines.push(cpu);
    }
    println!(
        "median of the per-round ratios (each round runs every mode once; less sensitive to \
         bursts of load from other processes than the ratios of the totals above):"
    );
    println!(
        "{:>7}  {:>6}  {:>6}  {:>6}  {:>6}  {:>6}",
        "clients", "b/a", "b/c", "a/d", "e/b", "f/e"
    );
    for line in median_lines {
        println!("{line}");
    }
    println!("lowest-highest per-round ratio:");
    println!(
        "{:>7}  {:>13}  {:>13}  {:>13}  {:>13}  {:>13}",
        "clients", "b/a", "b/c", "a/d", "e/b", "f/e"
    );
    for line in spread_lines {
        println!("{line}");
    }
    println!(
        "CPU per transaction, µs: client (this process, every thread) + server (the \
         benchmark's PostgreSQL backends; `-` when PostgreSQL is not local)"
    );
    println!(
        "{:>7}  {:>11}  {:>11}  {:>11}  {:>11}  {:>11}  {:>11}",
        "clients", "(a)", "(b)", "(c)", "(d)", "(e)", "(f)"
    );
    for line in cpu_lines {
        println!("{line}");
    }

    // The work was real: one inbox row per raw, framework and dispatched transaction.
    let inbox_rows = count(&bench.pool, "SELECT count(*) FROM inbox").await?;
    let reserved = count(
        &bench.pool,
        "SELECT coalesce(sum(reserved), 0)::bigint FROM stock",
    )
    .await?;
    println!(
        "checked: {inbox_rows} inbox rows, {reserved} copies reserved over {} messages",
        bench.next.load(Ordering::Relaxed)
    );
    leases.cancel();
    Ok(())
}

/// Takes `partitions` partitions of the benchmark's consumer (a partitioned consumer of
/// its own, the only instance, long leases) and returns their fenced consumers, with the
/// token that stops the partitioned consumer.
async fn hold_partitions(
    consumer: &Consumer,
    partitions: usize,
) -> Result<(Vec<Consumer>, tokio_util::sync::CancellationToken), BoxError> {
    use outbox_seaorm::inbox::partitioned::{Partition, PartitionedConsumer};

    let count = u32::try_from(partitions.max(1))?;
    let partitioned = PartitionedConsumer::builder(consumer.clone(), count)
        .instance_id("bench")
        .lease_ttl(Duration::from_secs(600))
        .heartbeat_interval(Duration::from_secs(5))
        .build()?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let shutdown = tokio_util::sync::CancellationToken::new();
    tokio::spawn(
        partitioned.run(shutdown.clone(), move |partition: Partition| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(partition.consumer().clone());
                partition.stop().cancelled().await;
            }
        }),
    );
    let mut fenced = Vec::with_capacity(partitions);
    while fenced.len() < partitions.max(1) {
        let consumer = tokio::time::timeout(Duration::from_secs(30), rx.recv())
            .await?
            .ok_or("the partitioned consumer stopped")?;
        fenced.push(consumer);
    }
    Ok((fenced, shutdown))
}
