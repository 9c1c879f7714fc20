//! The write-side benchmark (issues 3 and 17): raw SQL vs unit of work vs business-only,
//! and (e) the simplest outbox a user writes by hand: the business inserts of (a) plus one
//! row in a narrow table of its own (`id bigserial`, `aggregate_id`, `event_type`,
//! `payload jsonb`, `processed_at`, with a partial index on unprocessed rows), all raw SQL
//! on our own stack (sqlx through SeaORM's pool).

use std::error::Error;
use std::sync::Arc;
use std::time::Duration;

use bookstore_contracts::{MoneyV1, OrderPlacedV1, OrderedBookV1};
use chrono::Utc;
use outbox_core::mapping::{ContractMapper, ContractSink, MapError};
use outbox_core::{IntegrationEvent, Raise};
use outbox_seaorm::partition::partition_of;
use outbox_seaorm::{Outbox, PostgresWakeup};
use sea_orm::sqlx::{self, PgPool};
use sea_orm::{
    ConnectOptions, ConnectionTrait, Database, DatabaseConnection, EntityTrait, Set,
    TransactionTrait,
};
use uuid::Uuid;

use crate::measure::Timing;
use crate::scratch::count;

type BoxError = Box<dyn Error + Send + Sync>;

/// Options of `write`.
#[derive(Debug, Clone, clap::Args)]
pub struct WriteArgs {
    /// A PostgreSQL server; the benchmark creates and drops its own database on it.
    #[arg(long, default_value = "postgres://postgres@127.0.0.1:5432/postgres")]
    pub database_url: String,
    /// How the unit of work wakes relays up on PostgreSQL (the raw baseline never
    /// notifies). Default: the library's default.
    #[arg(long, value_enum, default_value_t = NotifyMode::library_default())]
    pub notify: NotifyMode,
    /// `min_interval` of `--notify after-commit`, in milliseconds. Default: the library's.
    #[arg(long, default_value_t = default_interval_ms())]
    pub notify_interval_ms: u64,
    /// Modes to run (for profiling one at a time); ratios need `raw` and `framework`.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = Mode::ALL)]
    pub modes: Vec<Mode>,
    #[command(flatten)]
    pub timing: Timing,
}

/// `--notify`: the library's `PostgresWakeup` modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum NotifyMode {
    /// `NOTIFY` after commit, coalesced, in the background.
    AfterCommit,
    /// `pg_notify` inside the transaction, with the last `INSERT`.
    InTransaction,
    /// No `NOTIFY`.
    Off,
}

impl NotifyMode {
    fn library_default() -> Self {
        match PostgresWakeup::default() {
            PostgresWakeup::AfterCommit { .. } => Self::AfterCommit,
            PostgresWakeup::InTransaction => Self::InTransaction,
            _ => Self::Off,
        }
    }

    fn wakeup(self, interval_ms: u64) -> PostgresWakeup {
        match self {
            Self::AfterCommit => PostgresWakeup::AfterCommit {
                min_interval: Duration::from_millis(interval_ms),
            },
            Self::InTransaction => PostgresWakeup::InTransaction,
            Self::Off => PostgresWakeup::Off,
        }
    }
}

fn default_interval_ms() -> u64 {
    u64::try_from(PostgresWakeup::DEFAULT_MIN_INTERVAL.as_millis()).unwrap_or(u64::MAX)
}

mod orders {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "orders")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: Uuid,
        #[sea_orm(unique)]
        pub checkout_id: Uuid,
        pub customer_id: Uuid,
        pub currency: String,
        pub placed_at: DateTimeUtc,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

mod order_lines {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "order_lines")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub order_id: Uuid,
        #[sea_orm(primary_key, auto_increment = false)]
        pub line_no: i32,
        pub book_id: String,
        pub quantity: i32,
        pub unit_price: String,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

/// The Ordering context's domain event.
enum OrderingEvent {
    OrderPlaced(Order),
}

/// The aggregate.
#[derive(Clone)]
struct Order {
    id: Uuid,
    checkout_id: Uuid,
    customer_id: Uuid,
    lines: Vec<(String, u32, String)>,
}

impl Order {
    fn place(ctx: &impl Raise<OrderingEvent>) -> Order {
        let order = sample_order();
        ctx.raise(OrderingEvent::OrderPlaced(order.clone()));
        order
    }
}

fn sample_order() -> Order {
    Order {
        id: Uuid::now_v7(),
        checkout_id: Uuid::now_v7(),
        customer_id: Uuid::now_v7(),
        lines: vec![
            ("dune".into(), 2, "12.50".into()),
            ("emma".into(), 1, "8.00".into()),
            ("ulysses".into(), 1, "15.25".into()),
        ],
    }
}

fn contract(order: &Order) -> OrderPlacedV1 {
    OrderPlacedV1 {
        order_id: order.id,
        checkout_id: order.checkout_id,
        customer_id: order.customer_id,
        books: order
            .lines
            .iter()
            .map(|(book_id, quantity, price)| OrderedBookV1 {
                book_id: book_id.clone(),
                quantity: *quantity,
                unit_price: MoneyV1 {
                    amount: price.clone(),
                    currency: "EUR".into(),
                },
            })
            .collect(),
    }
}

struct OrderingContracts;

impl ContractMapper<OrderingEvent> for OrderingContracts {
    fn map(&self, event: &OrderingEvent, out: &mut ContractSink<'_>) -> Result<(), MapError> {
        match event {
            OrderingEvent::OrderPlaced(order) => out.emit(&contract(order)),
        }
    }
}

/// `--modes`: (a), (b) and (c).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// (a) raw SQL through sqlx.
    Raw,
    /// (b) the unit of work.
    Framework,
    /// (c) the SeaORM business inserts without outbox.
    BusinessOnly,
    /// (d) the business inserts of (a) in raw SQL, without outbox (not run by default):
    /// c/d is SeaORM's own cost on the business inserts, which (b) pays too.
    RawBusinessOnly,
    /// (e) the business inserts of (a) plus one row in the simplest outbox table (see the
    /// module documentation): b/e is what our outbox row costs against the hand-written one.
    Simple,
}

impl Mode {
    const ALL: [Mode; 4] = [Mode::Raw, Mode::Framework, Mode::BusinessOnly, Mode::Simple];
    const KNOWN: [Mode; 5] = [
        Mode::Raw,
        Mode::Framework,
        Mode::BusinessOnly,
        Mode::RawBusinessOnly,
        Mode::Simple,
    ];
}

struct Bench {
    db: DatabaseConnection,
    pool: PgPool,
    outbox: Outbox,
}

async fn business_rows<C: ConnectionTrait>(db: &C, order: &Order) -> Result<(), BoxError> {
    orders::Entity::insert(orders::ActiveModel {
        id: Set(order.id),
        checkout_id: Set(order.checkout_id),
        customer_id: Set(order.customer_id),
        currency: Set("EUR".into()),
        placed_at: Set(Utc::now()),
    })
    .exec_without_returning(db)
    .await?;
    order_lines::Entity::insert_many(order.lines.iter().enumerate().map(
        |(i, (book_id, quantity, price))| order_lines::ActiveModel {
            order_id: Set(order.id),
            line_no: Set(i32::try_from(i).unwrap_or(i32::MAX)),
            book_id: Set(book_id.clone()),
            quantity: Set(i32::try_from(*quantity).unwrap_or(i32::MAX)),
            unit_price: Set(price.clone()),
        },
    ))
    .exec_without_returning(db)
    .await?;
    Ok(())
}

/// The business inserts of (a) and (d): the order, then its 3 lines in one statement.
async fn raw_business_rows(
    tx: &mut sqlx::PgConnection,
    order: &Order,
    now: chrono::DateTime<Utc>,
) -> Result<(), BoxError> {
    sqlx::query(
        "INSERT INTO orders (id, checkout_id, customer_id, currency, placed_at) \
         VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(order.id)
    .bind(order.checkout_id)
    .bind(order.customer_id)
    .bind("EUR")
    .bind(now)
    .execute(&mut *tx)
    .await?;
    let mut lines = sqlx::QueryBuilder::new(
        "INSERT INTO order_lines (order_id, line_no, book_id, quantity, unit_price) ",
    );
    lines.push_values(
        order.lines.iter().enumerate(),
        |mut row, (i, (book_id, quantity, price))| {
            row.push_bind(order.id)
                .push_bind(i32::try_from(i).unwrap_or(i32::MAX))
                .push_bind(book_id)
                .push_bind(i32::try_from(*quantity).unwrap_or(i32::MAX))
                .push_bind(price);
        },
    );
    lines.build().execute(&mut *tx).await?;
    Ok(())
}

impl Bench {
    async fn framework(&self) -> Result<(), BoxError> {
        let uow = self.outbox.begin(&self.db, &OrderingContracts).await?;
        let order = Order::place(&uow);
        business_rows(&uow, &order).await?;
        uow.commit().await?;
        Ok(())
    }

    async fn business_only(&self) -> Result<(), BoxError> {
        let txn = self.db.begin().await?;
        let order = sample_order();
        business_rows(&txn, &order).await?;
        txn.commit().await?;
        Ok(())
    }

    async fn raw(&self) -> Result<(), BoxError> {
        let order = sample_order();
        let now = Utc::now();
        let mut tx = self.pool.begin().await?;
        raw_business_rows(&mut tx, &order, now).await?;
        let event = contract(&order);
        let aggregate_id = event.aggregate_id();
        sqlx::query(
            "INSERT INTO outbox (message_id, event_type, version, aggregate_type, aggregate_id, \
             partition, correlation_id, causation_id, traceparent, tracestate, headers, \
             occurred_at, payload, status, attempts, next_attempt_at, created_at) \
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
        // Serialized once, straight into the bind buffer.
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

    async fn raw_business_only(&self) -> Result<(), BoxError> {
        let order = sample_order();
        let mut tx = self.pool.begin().await?;
        raw_business_rows(&mut tx, &order, Utc::now()).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn simple(&self) -> Result<(), BoxError> {
        let order = sample_order();
        let mut tx = self.pool.begin().await?;
        raw_business_rows(&mut tx, &order, Utc::now()).await?;
        let event = contract(&order);
        sqlx::query(
            "INSERT INTO simple_outbox (aggregate_id, event_type, payload) VALUES ($1, $2, $3)",
        )
        .bind(event.aggregate_id())
        .bind(OrderPlacedV1::EVENT_TYPE)
        .bind(sqlx::types::Json(&event))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn once(&self, mode: Mode) -> Result<(), BoxError> {
        match mode {
            Mode::Raw => self.raw().await,
            Mode::Framework => self.framework().await,
            Mode::BusinessOnly => self.business_only().await,
            Mode::RawBusinessOnly => self.raw_business_only().await,
            Mode::Simple => self.simple().await,
        }
    }
}

/// Runs `clients` tasks doing `mode` transactions for `duration`; returns transactions done
/// and the elapsed time.
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

/// Runs the benchmark.
pub async fn run(args: WriteArgs) -> Result<(), BoxError> {
    let scratch = crate::scratch::ScratchDatabase::create(&args.database_url).await?;
    let url = scratch.url().to_owned();
    let wakeup = args.notify.wakeup(args.notify_interval_ms);
    let result = run_on(&url, &args.timing, wakeup, &args.modes).await;
    scratch.drop().await?;
    result
}

async fn run_on(
    url: &str,
    timing: &Timing,
    wakeup: PostgresWakeup,
    modes: &[Mode],
) -> Result<(), BoxError> {
    let max_clients = timing.clients.iter().copied().max().unwrap_or(1);
    let pool_size = u32::try_from(max_clients + 2).unwrap_or(u32::MAX);
    let mut options = ConnectOptions::new(url.to_owned());
    options
        .max_connections(pool_size)
        .min_connections(pool_size)
        .sqlx_logging(false);
    let db = Database::connect(options).await?;
    let schema = sea_orm::Schema::new(db.get_database_backend());
    db.execute(&schema.create_table_from_entity(orders::Entity))
        .await?;
    db.execute(&schema.create_table_from_entity(order_lines::Entity))
        .await?;
    let outbox = Outbox::builder().postgres_wakeup(wakeup).build()?;
    outbox_seaorm::schema::install(&db, &outbox).await?;
    db.execute_unprepared(
        "CREATE TABLE simple_outbox (id bigserial PRIMARY KEY, aggregate_id text NOT NULL, \
         event_type text NOT NULL, payload jsonb NOT NULL, processed_at timestamptz)",
    )
    .await?;
    db.execute_unprepared(
        "CREATE INDEX simple_outbox_pending_idx ON simple_outbox (id) WHERE processed_at IS NULL",
    )
    .await?;
    let pool = db.get_postgres_connection_pool().clone();
    let bench = Arc::new(Bench { db, pool, outbox });

    // Warm up every mode (connections, prepared statements).
    for &mode in modes {
        cell(&bench, mode, max_clients, Duration::from_millis(500)).await?;
    }

    println!(
        "write side on PostgreSQL: order + 3 lines (+ 1 outbox row), {} s x {} rounds per cell",
        timing.seconds, timing.rounds
    );
    println!("unit of work wake-up: {wakeup:?} (raw SQL: none)");
    println!(
        "{:>7}  {:>12}  {:>14}  {:>14}  {:>15}  {:>6}  {:>6}  {:>6}",
        "clients",
        "(a) raw tx/s",
        "(b) uow tx/s",
        "(c) biz tx/s",
        "(e) simple tx/s",
        "b/a",
        "b/c",
        "b/e"
    );
    for &clients in &timing.clients {
        let mut totals = [(0u64, Duration::ZERO); Mode::KNOWN.len()];
        for round in 0..timing.rounds {
            for k in 0..Mode::KNOWN.len() {
                let index = (round + k) % Mode::KNOWN.len();
                if !modes.contains(&Mode::KNOWN[index]) {
                    continue;
                }
                let (done, took) = cell(&bench, Mode::KNOWN[index], clients, timing.cell()).await?;
                totals[index].0 += done;
                totals[index].1 += took;
            }
        }
        let rate = |(done, took): (u64, Duration)| {
            if took.is_zero() {
                f64::NAN
            } else {
                done as f64 / took.as_secs_f64()
            }
        };
        let (a, b, c, e) = (
            rate(totals[0]),
            rate(totals[1]),
            rate(totals[2]),
            rate(totals[4]),
        );
        println!(
            "{clients:>7}  {a:>12.0}  {b:>14.0}  {c:>14.0}  {e:>15.0}  {:>6.3}  {:>6.3}  {:>6.3}",
            b / a,
            b / c,
            b / e
        );
        if modes.contains(&Mode::RawBusinessOnly) {
            let d = rate(totals[3]);
            println!(
                "{:>7}  (d) raw business-only {d:.0} tx/s, c/d = {:.3} (SeaORM's cost on the \
                 business inserts), a/d = {:.3} (the outbox row in raw SQL)",
                "",
                c / d,
                a / d
            );
        }
    }

    // The work was real: every framework and raw transaction left one outbox row.
    let outbox_rows = count(&bench.pool, "SELECT count(*) FROM outbox").await?;
    let simple_rows = count(&bench.pool, "SELECT count(*) FROM simple_outbox").await?;
    let orders = count(&bench.pool, "SELECT count(*) FROM orders").await?;
    println!(
        "checked: {orders} orders, {outbox_rows} outbox rows and {simple_rows} simple outbox rows written"
    );
    let stats = bench.outbox.wakeup_stats();
    println!(
        "after-commit notifier: {} wake-ups requested, {} NOTIFY sent, {} failed",
        stats.requested, stats.sent, stats.failed
    );
    Ok(())
}
