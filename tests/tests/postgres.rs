//! PostgreSQL specifics: how commits wake up listening relays ([`PostgresWakeup`]: after
//! commit and coalesced — the default —, in the transaction, or off), and schema-qualified
//! table names.

// Scenarios are plain async functions called by generated #[tokio::test]s, which clippy's
// `allow-unwrap-in-tests` does not see as tests.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use outbox_seaorm::record::OutboxRecord;
use outbox_seaorm::wakeup::WakeupStats;
use outbox_seaorm::{CommitError, CommitReport, CommitWakeup, Outbox, PostgresWakeup, schema};
use outbox_tests::bookstore::{
    Order, OrderingContracts, PlaceOrder, count_orders, create_business_tables,
};
use outbox_tests::db::{Backend, TestDb, run_scenario};
use sea_orm::sqlx::postgres::{PgListener, PgNotification};
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, DbErr, Statement, TransactionTrait};

const CHANNEL: &str = "ordering_outbox";

/// How long "no notification" is watched for.
const QUIET: Duration = Duration::from_millis(300);
/// How long a notification that must come may take.
const PATIENCE: Duration = Duration::from_secs(5);

fn outbox_with(wakeup: PostgresWakeup) -> Outbox {
    Outbox::builder()
        .notify_channel(Some(CHANNEL))
        .postgres_wakeup(wakeup)
        .build()
        .unwrap()
}

fn after_commit(min_interval: Duration) -> PostgresWakeup {
    PostgresWakeup::AfterCommit { min_interval }
}

async fn setup(conn: &DatabaseConnection, outbox: &Outbox) {
    schema::install(conn, outbox).await.unwrap();
    create_business_tables(conn).await.unwrap();
}

async fn listen(conn: &DatabaseConnection) -> PgListener {
    let mut listener = PgListener::connect_with(conn.get_postgres_connection_pool())
        .await
        .unwrap();
    listener.listen(CHANNEL).await.unwrap();
    listener
}

/// The next notification, if one arrives within `wait`.
async fn next(listener: &mut PgListener, wait: Duration) -> Option<PgNotification> {
    tokio::time::timeout(wait, listener.recv())
        .await
        .ok()
        .map(|received| received.unwrap())
}

async fn expect_notification(listener: &mut PgListener, why: &str) {
    let notification = next(listener, PATIENCE)
        .await
        .unwrap_or_else(|| panic!("no notification: {why}"));
    assert_eq!(notification.channel(), CHANNEL);
    assert_eq!(notification.payload(), "");
}

async fn expect_quiet(listener: &mut PgListener, why: &str) {
    if let Some(notification) = next(listener, QUIET).await {
        panic!("unexpected notification {notification:?}: {why}");
    }
}

/// Places one order in a unit of work and commits it.
async fn place(conn: &DatabaseConnection, outbox: &Outbox, checkout: &str) -> CommitReport {
    let uow = outbox.begin(conn, &OrderingContracts).await.unwrap();
    Order::place(&uow, PlaceOrder::sample(checkout))
        .save(&uow)
        .await
        .unwrap();
    uow.commit().await.unwrap()
}

/// A constraint checked at COMMIT, to make a commit fail after the outbox rows were written.
async fn create_guard_table(conn: &DatabaseConnection) {
    conn.execute_unprepared(
        "CREATE TABLE guard (id integer, \
         CONSTRAINT guard_once UNIQUE (id) DEFERRABLE INITIALLY DEFERRED)",
    )
    .await
    .unwrap();
}

/// A unit of work whose COMMIT fails (deferred unique constraint); nothing is stored.
async fn failed_commit(conn: &DatabaseConnection, outbox: &Outbox) {
    let uow = outbox.begin(conn, &OrderingContracts).await.unwrap();
    Order::place(&uow, PlaceOrder::sample("doomed"))
        .save(&uow)
        .await
        .unwrap();
    uow.execute_unprepared("INSERT INTO guard VALUES (1), (1)")
        .await
        .unwrap();
    let error = uow.commit().await.expect_err("COMMIT fails");
    assert!(matches!(error, CommitError::Commit(_)), "{error:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_transaction_notify_is_delivered_on_commit_only() {
    run_scenario(
        Backend::Postgres,
        "in_transaction_notify_is_delivered_on_commit_only",
        async |db: &TestDb| {
            let outbox = outbox_with(PostgresWakeup::InTransaction);
            setup(db.conn(), &outbox).await;
            create_guard_table(db.conn()).await;
            let mut listener = listen(db.conn()).await;

            // The NOTIFY runs inside the transaction, then COMMIT fails: nothing delivered.
            failed_commit(db.conn(), &outbox).await;
            expect_quiet(&mut listener, "a transaction that did not commit").await;
            assert_eq!(count_orders(db.conn()).await.unwrap(), 0);
            assert_eq!(OutboxRecord::count(db.conn(), &outbox).await.unwrap(), 0);

            // Rolled back: nothing.
            let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
            Order::place(&uow, PlaceOrder::sample("c-0"))
                .save(&uow)
                .await
                .unwrap();
            uow.rollback().await.unwrap();
            expect_quiet(&mut listener, "a rolled-back unit of work").await;

            // Open and not yet committed: nothing either.
            let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
            Order::place(&uow, PlaceOrder::sample("c-1"))
                .save(&uow)
                .await
                .unwrap();
            expect_quiet(&mut listener, "an open unit of work").await;
            let report = uow.commit().await.unwrap();
            assert_eq!(report.wakeup, CommitWakeup::InTransaction);
            assert_eq!(report.chunks, 1, "the NOTIFY rides on the INSERT");
            expect_notification(&mut listener, "committed").await;
            // By the time the relay wakes up, the row is visible.
            assert_eq!(OutboxRecord::count(db.conn(), &outbox).await.unwrap(), 1);
            expect_quiet(&mut listener, "one notification per commit").await;

            // Several chunks: as many statements as without NOTIFY, every row written (the
            // data-modifying WITH runs although the SELECT does not read it), one
            // notification.
            let chunked = Outbox::builder()
                .notify_channel(Some(CHANNEL))
                .postgres_wakeup(PostgresWakeup::InTransaction)
                .chunk_rows(2)
                .build()
                .unwrap();
            let uow = chunked.begin(db.conn(), &OrderingContracts).await.unwrap();
            for n in 0..5 {
                Order::place(&uow, PlaceOrder::sample(&format!("c-chunk-{n}")))
                    .save(&uow)
                    .await
                    .unwrap();
            }
            let report = uow.commit().await.unwrap();
            assert_eq!((report.rows, report.chunks), (5, 3));
            assert_eq!(report.wakeup, CommitWakeup::InTransaction);
            expect_notification(&mut listener, "chunked commit").await;
            expect_quiet(&mut listener, "one notification per commit").await;
            assert_eq!(OutboxRecord::count(db.conn(), &outbox).await.unwrap(), 6);
            let stored = OutboxRecord::list(db.conn(), &outbox, 10).await.unwrap();
            for id in &report.message_ids {
                assert!(stored.iter().any(|r| r.envelope.message_id == *id));
            }

            // No channel, no NOTIFY.
            let silent = Outbox::builder()
                .notify_channel(None)
                .postgres_wakeup(PostgresWakeup::InTransaction)
                .build()
                .unwrap();
            let report = place(db.conn(), &silent, "c-3").await;
            assert_eq!(report.wakeup, CommitWakeup::None);
            assert_eq!(report.chunks, 1);
            expect_quiet(&mut listener, "no channel").await;
            // The in-transaction mode never uses the after-commit notifier.
            assert_eq!(outbox.wakeup_stats(), WakeupStats::default());
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_commit_notifies_once_committed() {
    run_scenario(
        Backend::Postgres,
        "after_commit_notifies_once_committed",
        async |db: &TestDb| {
            // The default wake-up, on our channel.
            let outbox = Outbox::builder()
                .notify_channel(Some(CHANNEL))
                .build()
                .unwrap();
            assert_eq!(outbox.postgres_wakeup(), PostgresWakeup::after_commit());
            setup(db.conn(), &outbox).await;
            create_guard_table(db.conn()).await;
            let mut listener = listen(db.conn()).await;

            // Open: nothing until COMMIT.
            let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
            Order::place(&uow, PlaceOrder::sample("c-1"))
                .save(&uow)
                .await
                .unwrap();
            expect_quiet(&mut listener, "an open unit of work").await;
            let report = uow.commit().await.unwrap();
            assert_eq!(report.wakeup, CommitWakeup::AfterCommit);
            assert_eq!(report.chunks, 1);
            expect_notification(&mut listener, "committed").await;
            assert_eq!(OutboxRecord::count(db.conn(), &outbox).await.unwrap(), 1);
            expect_quiet(&mut listener, "one commit, one notification").await;

            // Rolled back, explicitly or by the closure form: nothing.
            let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
            Order::place(&uow, PlaceOrder::sample("c-2"))
                .save(&uow)
                .await
                .unwrap();
            uow.rollback().await.unwrap();
            let aborted = outbox
                .transaction(db.conn(), &OrderingContracts, async |uow| {
                    Order::place(uow, PlaceOrder::sample("c-3"))
                        .save(uow)
                        .await?;
                    Err::<(), _>(DbErr::Custom("changed my mind".into()))
                })
                .await;
            assert!(aborted.unwrap_err().aborted().is_some());
            // COMMIT fails: nothing either.
            failed_commit(db.conn(), &outbox).await;
            // Nothing written, nothing to wake up for.
            let empty = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
            assert_eq!(empty.commit().await.unwrap().wakeup, CommitWakeup::None);
            expect_quiet(&mut listener, "nothing committed to the outbox").await;
            assert_eq!(OutboxRecord::count(db.conn(), &outbox).await.unwrap(), 1);

            // The closure form notifies too.
            outbox
                .transaction(db.conn(), &OrderingContracts, async |uow| {
                    Order::place(uow, PlaceOrder::sample("c-4")).save(uow).await
                })
                .await
                .unwrap();
            expect_notification(&mut listener, "closure form committed").await;
            expect_quiet(&mut listener, "one commit, one notification").await;

            let stats = outbox.wakeup_stats();
            assert_eq!((stats.requested, stats.sent, stats.failed), (2, 2, 0));
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_commit_coalesces_bursts() {
    run_scenario(
        Backend::Postgres,
        "after_commit_coalesces_bursts",
        async |db: &TestDb| {
            // Two quick commits: one notification at once (leading edge), one more at the
            // end of the interval (trailing edge), none in between or after.
            let slow = outbox_with(after_commit(Duration::from_millis(400)));
            setup(db.conn(), &slow).await;
            let mut listener = listen(db.conn()).await;
            place(db.conn(), &slow, "c-a").await;
            place(db.conn(), &slow, "c-b").await;
            expect_notification(&mut listener, "leading edge").await;
            let leading = Instant::now();
            expect_notification(&mut listener, "trailing edge").await;
            let gap = leading.elapsed();
            assert!(
                gap >= Duration::from_millis(300),
                "at most one notification per min_interval, got two {gap:?} apart"
            );
            expect_quiet(&mut listener, "two commits, two notifications").await;
            assert_eq!(slow.wakeup_stats().sent, 2);

            // A burst: 200 commits from 8 tasks.
            let min_interval = Duration::from_millis(20);
            let outbox = outbox_with(after_commit(min_interval));
            let done = Arc::new(AtomicBool::new(false));
            let collector = {
                let done = Arc::clone(&done);
                tokio::spawn(async move {
                    let mut arrivals = Vec::new();
                    loop {
                        match next(&mut listener, Duration::from_secs(1)).await {
                            Some(_) => arrivals.push(Instant::now()),
                            None if done.load(Ordering::Acquire) => return arrivals,
                            None => {}
                        }
                    }
                })
            };
            let started = Instant::now();
            let mut tasks = Vec::new();
            for task in 0..8 {
                let conn = db.conn().clone();
                let outbox = outbox.clone();
                tasks.push(tokio::spawn(async move {
                    for n in 0..25 {
                        let report = place(&conn, &outbox, &format!("burst-{task}-{n}")).await;
                        assert_eq!(report.wakeup, CommitWakeup::AfterCommit);
                    }
                    // When this task's last commit returned (not when the test joined it:
                    // under load the join comes after the notification that follows it).
                    Instant::now()
                }));
            }
            let mut last_commit = started;
            for task in tasks {
                last_commit = last_commit.max(task.await.unwrap());
            }
            done.store(true, Ordering::Release);
            let arrivals = collector.await.unwrap();
            let elapsed = last_commit - started;
            let bound = elapsed.as_millis() / min_interval.as_millis() + 2;
            let count = arrivals.len();
            let after_last = arrivals.iter().filter(|at| **at >= last_commit).count();
            eprintln!(
                "burst: 200 commits in {elapsed:?}, {count} notifications \
                 ({after_last} after the last commit), bound {bound}"
            );
            assert!(
                u128::try_from(count).unwrap() <= bound,
                "{count} notifications for a {elapsed:?} burst, over the {bound} allowed"
            );
            assert!(
                count < 200,
                "coalesced: {count} notifications for 200 commits"
            );
            assert!(
                after_last >= 1,
                "a notification follows the last commit of a burst"
            );
            let stats = outbox.wakeup_stats();
            assert_eq!(stats.requested, 200);
            assert_eq!(stats.failed, 0);
            assert_eq!(stats.sent, u64::try_from(count).unwrap());
            assert_eq!(OutboxRecord::count(db.conn(), &outbox).await.unwrap(), 202);
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_commit_notifies_every_database() {
    run_scenario(
        Backend::Postgres,
        "after_commit_notifies_every_database",
        async |db: &TestDb| {
            // A long interval: were both databases sharing one rate limit, the second
            // notification would wait for it (or go to the first database).
            let outbox = outbox_with(after_commit(Duration::from_secs(2)));
            let other = TestDb::postgres("after_commit_notifies_every_database (second)")
                .await
                .expect("PostgreSQL is reachable");
            setup(db.conn(), &outbox).await;
            setup(other.conn(), &outbox).await;
            let mut first = listen(db.conn()).await;
            let mut second = listen(other.conn()).await;

            let started = Instant::now();
            place(db.conn(), &outbox, "c-1").await;
            place(other.conn(), &outbox, "c-1").await;
            expect_notification(&mut first, "first database").await;
            expect_notification(&mut second, "second database").await;
            assert!(
                started.elapsed() < Duration::from_secs(1),
                "each database has its own notifier: {:?}",
                started.elapsed()
            );
            expect_quiet(&mut first, "one commit each").await;
            expect_quiet(&mut second, "one commit each").await;
            assert_eq!(outbox.wakeup_stats().sent, 2);
            drop((first, second));
            other.close().await;
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_units_of_work_wake_up_after_the_outer_commit() {
    run_scenario(
        Backend::Postgres,
        "nested_units_of_work_wake_up_after_the_outer_commit",
        async |db: &TestDb| {
            let outbox = outbox_with(PostgresWakeup::after_commit());
            setup(db.conn(), &outbox).await;
            let mut listener = listen(db.conn()).await;

            // Nested in a unit of work: releasing the savepoint is no commit.
            let outer = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
            let inner = outbox.begin(&outer, &OrderingContracts).await.unwrap();
            Order::place(&inner, PlaceOrder::sample("c-1"))
                .save(&inner)
                .await
                .unwrap();
            assert_eq!(
                inner.commit().await.unwrap().wakeup,
                CommitWakeup::Enclosing
            );
            expect_quiet(&mut listener, "the outer unit of work is open").await;
            // The outer unit of work raised nothing itself, but wakes the relays up for the
            // rows of the nested one.
            let report = outer.commit().await.unwrap();
            assert_eq!((report.rows, report.wakeup), (0, CommitWakeup::AfterCommit));
            expect_notification(&mut listener, "outer commit").await;

            // Nested in a plain transaction: the caller commits, nothing is sent.
            let txn = db.conn().begin().await.unwrap();
            let uow = outbox.begin(&txn, &OrderingContracts).await.unwrap();
            Order::place(&uow, PlaceOrder::sample("c-2"))
                .save(&uow)
                .await
                .unwrap();
            assert_eq!(uow.commit().await.unwrap().wakeup, CommitWakeup::None);
            txn.commit().await.unwrap();
            expect_quiet(&mut listener, "a plain transaction committed").await;
            assert_eq!(OutboxRecord::count(db.conn(), &outbox).await.unwrap(), 2);
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn off_sends_no_notification() {
    run_scenario(
        Backend::Postgres,
        "off_sends_no_notification",
        async |db: &TestDb| {
            let outbox = outbox_with(PostgresWakeup::Off);
            setup(db.conn(), &outbox).await;
            let mut listener = listen(db.conn()).await;
            let report = place(db.conn(), &outbox, "c-1").await;
            assert_eq!(report.wakeup, CommitWakeup::None);
            assert!(!report.wakeup.is_requested());
            // No channel: the same, whatever the mode.
            let silent = Outbox::builder().notify_channel(None).build().unwrap();
            let report = place(db.conn(), &silent, "c-2").await;
            assert_eq!(report.wakeup, CommitWakeup::None);
            expect_quiet(&mut listener, "notifications are off").await;
            assert_eq!(OutboxRecord::count(db.conn(), &outbox).await.unwrap(), 2);
            assert_eq!(outbox.wakeup_stats(), WakeupStats::default());
            assert_eq!(silent.wakeup_stats(), WakeupStats::default());
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schema_qualified_tables() {
    run_scenario(
        Backend::Postgres,
        "schema_qualified_tables",
        async |db: &TestDb| {
            db.conn()
                .execute_unprepared("CREATE SCHEMA billing")
                .await
                .unwrap();
            let outbox = Outbox::builder()
                .outbox_table("billing.outbox")
                .inbox_table("billing.inbox")
                .build()
                .unwrap();
            schema::install(db.conn(), &outbox).await.unwrap();
            create_business_tables(db.conn()).await.unwrap();
            let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
            Order::place(&uow, PlaceOrder::sample("c-1"))
                .save(&uow)
                .await
                .unwrap();
            uow.commit().await.unwrap();
            assert_eq!(OutboxRecord::count(db.conn(), &outbox).await.unwrap(), 1);
            let tables = db
                .conn()
                .query_all_raw(Statement::from_string(
                    DbBackend::Postgres,
                    "SELECT table_name FROM information_schema.tables \
                     WHERE table_schema = 'billing' ORDER BY table_name",
                ))
                .await
                .unwrap()
                .iter()
                .map(|row| row.try_get::<String>("", "table_name").unwrap())
                .collect::<Vec<_>>();
            // The relay's tables (the log relay's slots and dead letters included), the
            // scheduled rows, the periodic jobs and the unique keys live next to the outbox, and the consumer's dead letters, parked messages and
            // partition leases next to the inbox, in their schema.
            assert_eq!(
                tables,
                [
                    "inbox",
                    "inbox_consumer_instances",
                    "inbox_consumer_leases",
                    "inbox_dead_letters",
                    "inbox_parked",
                    "outbox",
                    "outbox_log_dead_letters",
                    "outbox_log_slots",
                    "outbox_operator_log",
                    "outbox_periodic",
                    "outbox_relay_instances",
                    "outbox_relay_leases",
                    "outbox_scheduled",
                    "outbox_unique",
                    "outbox_worker_slots"
                ]
            );
            let indexes = db
                .conn()
                .query_all_raw(Statement::from_string(
                    DbBackend::Postgres,
                    "SELECT indexname, indexdef FROM pg_indexes \
                     WHERE schemaname = 'billing' AND tablename = 'outbox' ORDER BY indexname",
                ))
                .await
                .unwrap();
            let partial = indexes
                .iter()
                .map(|row| row.try_get::<String>("", "indexdef").unwrap())
                .filter(|def| def.contains("WHERE ((status)::text = 'pending'::text)"))
                .count();
            assert_eq!(partial, 3, "three partial indexes on pending rows");
        },
    )
    .await;
}
