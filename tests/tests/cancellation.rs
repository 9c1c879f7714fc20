//! Cancellation safety of users' transactions (issue 18, item 4): a unit of work, and the
//! inbox's transaction around a handler, whose future is dropped at any point — mid-`BEGIN`,
//! mid-statement, mid-`COMMIT` — hand the pooled connection back clean, and leave the
//! business rows and the outbox (or inbox) rows all written or none.
//!
//! Each flow runs on a pool of exactly one connection, so the next user of the pool gets the
//! connection the cancelled future held. The flow is cancelled after its first suspension,
//! then after its second, and so on until it completes; after every cancellation the next
//! user writes a probe row outside any transaction of its own, and a second pool must see it
//! at once. A connection handed back inside a transaction nobody owns keeps that probe
//! uncommitted (and its locks held) until the connection is next reset. SQLite in memory
//! has one pool of one connection: there the probe is read on it, and the check that the
//! connection is in no transaction does the work.

// Scenarios are plain async functions called by #[tokio::test]s, which clippy's
// `allow-unwrap-in-tests` does not see as tests.
#![allow(clippy::unwrap_used)]

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use outbox_core::Envelope;
use outbox_seaorm::inbox::{self, InboxOutcome};
use outbox_seaorm::record::OutboxRecord;
use outbox_seaorm::{Outbox, UnitOfWork, inbox_handler, schema};
use outbox_tests::backend_tests;
use outbox_tests::bookstore::{
    Order, OrderPlacedV1, OrderingContracts, PlaceOrder, count_orders, create_business_tables,
};
use outbox_tests::db::{Backend, TestDb};
use sea_orm::{ConnectionTrait, DatabaseConnection, DbErr, Statement};

/// Polls a future until it has suspended `suspensions` times, then drops it: `None` when it
/// was cancelled, `Some(output)` when it completed first.
struct CancelAfter<F: Future> {
    future: Option<Pin<Box<F>>>,
    suspensions: usize,
}

impl<F: Future> CancelAfter<F> {
    fn new(future: F, suspensions: usize) -> Self {
        Self {
            future: Some(Box::pin(future)),
            suspensions,
        }
    }
}

impl<F: Future> Future for CancelAfter<F> {
    type Output = Option<F::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let Some(future) = this.future.as_mut() else {
            return Poll::Ready(None);
        };
        match future.as_mut().poll(cx) {
            Poll::Ready(output) => Poll::Ready(Some(output)),
            Poll::Pending => {
                this.suspensions -= 1;
                if this.suspensions == 0 {
                    // Dropped here, at the await point where it is suspended.
                    this.future = None;
                    Poll::Ready(None)
                } else {
                    Poll::Pending
                }
            }
        }
    }
}

async fn count(db: &DatabaseConnection, sql: &str) -> i64 {
    let row = db
        .query_one_raw(Statement::from_string(db.get_database_backend(), sql))
        .await
        .unwrap()
        .unwrap();
    row.try_get_by_index::<i64>(0).unwrap()
}

/// The next user of `single` writes probe `n` without a transaction of its own; `other` (a
/// different pool) must see it committed. Also: `single`'s connection is in no transaction.
async fn assert_clean_connection(
    single: &DatabaseConnection,
    other: &DatabaseConnection,
    n: usize,
) {
    // A connection whose return to the pool hangs (MariaDB, cancelled mid-prepare) makes
    // this acquire time out.
    single
        .execute_unprepared(&format!("INSERT INTO probes (n) VALUES ({n})"))
        .await
        .unwrap_or_else(|error| {
            panic!("cancelled after {n} suspensions: the pool's only connection did not come back: {error}")
        });
    let seen = count(other, &format!("SELECT COUNT(*) FROM probes WHERE n = {n}")).await;
    assert_eq!(
        seen, 1,
        "cancelled after {n} suspensions: the next user's autocommit write is not visible \
         to another connection, so the pool handed out a connection inside a transaction \
         nobody owns"
    );
    let open = match single.get_database_backend() {
        sea_orm::DbBackend::MySql => count(single, "SELECT CAST(@@in_transaction AS SIGNED)").await,
        // Two statements outside a transaction get two transaction ids; inside one, the same.
        sea_orm::DbBackend::Postgres => {
            let first = count(single, "SELECT pg_current_xact_id()::text::bigint").await;
            let second = count(single, "SELECT pg_current_xact_id()::text::bigint").await;
            i64::from(first == second)
        }
        // SQLite refuses BEGIN inside a transaction.
        _ => match single.execute_unprepared("BEGIN").await {
            Ok(_) => {
                single.execute_unprepared("ROLLBACK").await.unwrap();
                0
            }
            Err(_) => 1,
        },
    };
    assert_eq!(
        open, 0,
        "cancelled after {n} suspensions: connection left in a transaction"
    );
}

/// In each of [`ROUNDS`] rounds, cancels `flow(probe_base + i)` after i = 1, 2, …
/// suspensions until it completes, checking the pool and `invariant` after each. Returns
/// how many times it was cancelled in all.
async fn cancel_at_every_suspension<F, Fut>(
    single: &DatabaseConnection,
    other: &DatabaseConnection,
    mut flow: F,
    mut invariant: impl AsyncFnMut(usize),
) -> usize
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = ()>,
{
    let mut cancelled = 0;
    'rounds: for round in 0..ROUNDS {
        let probe_base = round * 1000;
        for suspensions in 1..=500 {
            let completed = CancelAfter::new(flow(probe_base + suspensions), suspensions)
                .await
                .is_some();
            assert_clean_connection(single, other, probe_base + suspensions).await;
            invariant(suspensions).await;
            if completed {
                cancelled += suspensions - 1;
                continue 'rounds;
            }
        }
        panic!("the flow did not complete within 500 suspensions");
    }
    cancelled
}

/// The flow was cancelled at least once over the rounds, on PostgreSQL and MariaDB. How many
/// await points a flow suspends at depends on the machine's load (a reply that arrived
/// before the caller read it does not suspend), so the sweep is repeated ([`ROUNDS`]) rather
/// than a count asserted. SQLite's worker thread often answers before the caller is polled
/// again, so a whole SQLite flow may complete without suspending: there the rounds cancel
/// what they can, and nothing is asserted about how much.
fn assert_cancelled(db: &TestDb, cancelled: usize) {
    if !matches!(db.backend(), Backend::SqliteFile | Backend::SqliteMemory) {
        assert!(cancelled >= 1, "the flow completed without ever suspending");
    }
}

/// Sweeps per scenario.
const ROUNDS: usize = 3;

/// A unit of work placing an order (a business row and its outbox row), cancelled at every
/// suspension of begin, the business statements and the commit.
async fn unit_of_work_cancelled_anywhere(db: &TestDb) {
    let outbox = Outbox::default();
    schema::install(db.conn(), &outbox).await.unwrap();
    create_business_tables(db.conn()).await.unwrap();
    db.conn()
        .execute_unprepared("CREATE TABLE probes (n INTEGER NOT NULL)")
        .await
        .unwrap();
    let single = db.single_connection_pool(Duration::from_secs(30)).await;

    let total = cancel_at_every_suspension(
        &single,
        db.conn(),
        |i| {
            let (single, outbox) = (&single, &outbox);
            async move {
                let uow = outbox.begin(single, &OrderingContracts).await.unwrap();
                let order = Order::place(&uow, PlaceOrder::sample(&format!("checkout-{i}")));
                order.save(&uow).await.unwrap();
                uow.commit().await.unwrap();
            }
        },
        async |n| {
            let orders = count_orders(db.conn()).await.unwrap();
            let rows = OutboxRecord::count(db.conn(), &outbox).await.unwrap();
            assert_eq!(
                orders, rows,
                "cancelled after {n} suspensions: an order without its outbox row or the reverse"
            );
        },
    )
    .await;
    assert_cancelled(db, total);
    // The last run completed: at least its order is there.
    assert!(count_orders(db.conn()).await.unwrap() >= 1);
    if db.backend() != Backend::SqliteMemory {
        single.close().await.unwrap();
    }
}

/// The inbox's consumer: records one effect per order.
#[inbox_handler(consumer = "tests.cancellation")]
async fn record_effect(uow: &UnitOfWork, event: OrderPlacedV1) -> Result<(), DbErr> {
    uow.execute_raw(Statement::from_sql_and_values(
        uow.get_database_backend(),
        match uow.get_database_backend() {
            sea_orm::DbBackend::Postgres => "INSERT INTO effects (order_id) VALUES ($1)",
            _ => "INSERT INTO effects (order_id) VALUES (?)",
        },
        [event.order_id.into()],
    ))
    .await?;
    Ok(())
}

/// The inbox's transaction around a handler (the inbox row and the handler's effect),
/// cancelled at every suspension.
async fn inbox_cancelled_anywhere(db: &TestDb) {
    let outbox = Outbox::default();
    schema::install(db.conn(), &outbox).await.unwrap();
    db.conn()
        .execute_unprepared("CREATE TABLE probes (n INTEGER NOT NULL)")
        .await
        .unwrap();
    db.conn()
        .execute_unprepared("CREATE TABLE effects (order_id VARCHAR(64) NOT NULL)")
        .await
        .unwrap();
    let single = db.single_connection_pool(Duration::from_secs(30)).await;
    let inbox_count = format!(
        "SELECT COUNT(*) FROM {} WHERE consumer = 'tests.cancellation'",
        outbox.inbox_table()
    );

    let total = cancel_at_every_suspension(
        &single,
        db.conn(),
        |i| {
            let (single, outbox) = (&single, &outbox);
            async move {
                let placed = OrderPlacedV1 {
                    order_id: format!("order-{i}"),
                    checkout_id: format!("checkout-{i}"),
                    customer: "ada".to_owned(),
                    books: Vec::new(),
                };
                let message = Envelope::from_event(&placed).unwrap();
                let outcome = inbox::apply::<record_effect>(single, outbox, &message)
                    .await
                    .unwrap();
                assert_eq!(outcome, InboxOutcome::Applied);
            }
        },
        async |n| {
            let effects = count(db.conn(), "SELECT COUNT(*) FROM effects").await;
            let inbox_rows = count(db.conn(), &inbox_count).await;
            assert_eq!(
                effects, inbox_rows,
                "cancelled after {n} suspensions: an effect without its inbox row or the reverse"
            );
        },
    )
    .await;
    assert_cancelled(db, total);
    assert!(count(db.conn(), "SELECT COUNT(*) FROM effects").await >= 1);
    if db.backend() != Backend::SqliteMemory {
        single.close().await.unwrap();
    }
}

backend_tests!(unit_of_work_cancelled_anywhere, inbox_cancelled_anywhere);
