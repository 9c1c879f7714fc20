//! The write side on every backend: a unit of work commits business rows and outbox rows
//! together or not at all (book: What it guarantees, 1).
//!
//! Each scenario runs four times — SQLite file, SQLite in memory, PostgreSQL, MariaDB — in a
//! database of its own (see `outbox_tests::db`).

// Scenarios are plain async functions called by generated #[tokio::test]s, which clippy's
// `allow-unwrap-in-tests` does not see as tests.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use futures_util::StreamExt as _;
use outbox_core::clock::ManualClock;
use outbox_core::mapping::MapError;
use outbox_core::{Envelope, IntegrationEvent, Raise, RecordedEvents};
use outbox_seaorm::partition::partition_of;
use outbox_seaorm::record::OutboxRecord;
use outbox_seaorm::schema::{self, OutboxStatus};
use outbox_seaorm::table::ColumnNaming;
use outbox_seaorm::trace::TraceContext;
use outbox_seaorm::{CommitError, CommitWakeup, Outbox, UnitOfWork, UnitOfWorkError, migration};
use outbox_tests::backend_tests;
use outbox_tests::bookstore::{
    Order, OrderNotedV2, OrderPlacedV1, OrderedBookV1, OrderingContracts, OrderingEvent,
    PlaceOrder, count_lines, count_orders, create_business_tables, orders,
};
use outbox_tests::db::{Backend, TestDb};
use sea_orm::sea_query::{Alias, Query};
use sea_orm::{
    ConnectionTrait, DbBackend, DbErr, EntityTrait as _, QueryResult, SqlErr, Statement,
    TransactionTrait,
};
use sea_orm_migration::{MigrationTrait, MigratorTrait};
use uuid::Uuid;

backend_tests!(
    commits_business_and_outbox_rows_together,
    rollback_writes_nothing,
    mapper_error_writes_nothing,
    panic_in_closure_writes_nothing,
    double_click_checkout_leaves_one_order_and_one_event,
    a_caught_statement_error_refuses_the_commit,
    ten_thousand_events_in_one_transaction,
    concurrent_units_of_work,
    every_envelope_field_is_stored,
    single_connection_does_not_deadlock,
    debezium_column_naming,
    queries_streams_and_savepoints_run_on_the_unit_of_work,
    migrations_create_and_drop_each_configuration,
    derived_and_shared_mappers,
);

async fn setup(db: &TestDb, outbox: &Outbox) {
    schema::install(db.conn(), outbox).await.expect("install");
    // Idempotent.
    schema::install(db.conn(), outbox)
        .await
        .expect("install again");
    create_business_tables(db.conn())
        .await
        .expect("business tables");
}

async fn outbox_rows(db: &TestDb, outbox: &Outbox) -> u64 {
    OutboxRecord::count(db.conn(), outbox)
        .await
        .expect("count outbox rows")
}

/// Places an order through the closure form; returns the order id.
async fn checkout(
    conn: &sea_orm::DatabaseConnection,
    outbox: &Outbox,
    checkout_id: &str,
) -> Result<String, UnitOfWorkError<DbErr>> {
    outbox
        .transaction(conn, &OrderingContracts, async |uow| {
            let order = Order::place(uow, PlaceOrder::sample(checkout_id));
            order.save(uow).await?;
            Ok(order.id)
        })
        .await
}

async fn commits_business_and_outbox_rows_together(db: &TestDb) {
    let outbox = Outbox::default();
    setup(db, &outbox).await;

    let uow = outbox
        .begin(db.conn(), &OrderingContracts)
        .await
        .expect("begin");
    let order = Order::place(&uow, PlaceOrder::sample("checkout-1"));
    order.save(&uow).await.expect("save order");
    assert_eq!(uow.pending_events(), 2);
    let report = uow.commit().await.expect("commit");
    assert_eq!(
        report.events, 2,
        "OrderPlaced + the local PricesRecalculated"
    );
    assert_eq!(report.rows, 1, "the local event maps to no contract");
    assert_eq!(report.chunks, 1);
    // The default wake-up: after commit, on PostgreSQL only.
    let wakeup = if db.backend() == Backend::Postgres {
        CommitWakeup::AfterCommit
    } else {
        CommitWakeup::None
    };
    assert_eq!(report.wakeup, wakeup);

    assert_eq!(count_orders(db.conn()).await.unwrap(), 1);
    assert_eq!(count_lines(db.conn()).await.unwrap(), 2);
    let records = OutboxRecord::list(db.conn(), &outbox, 10).await.unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].envelope.message_id, report.message_ids[0]);
    let placed: OrderPlacedV1 = records[0].envelope.decode().expect("decode");
    assert_eq!(placed.order_id, order.id);
    assert_eq!(placed.checkout_id, "checkout-1");

    // The closure form and the default-configuration constructor commit the same way.
    let second = checkout(db.conn(), &outbox, "checkout-2")
        .await
        .expect("closure form");
    let uow = UnitOfWork::begin(db.conn(), &OrderingContracts)
        .await
        .unwrap();
    Order::place(&uow, PlaceOrder::sample("checkout-3"))
        .save(&uow)
        .await
        .unwrap();
    uow.commit().await.unwrap();
    assert_eq!(count_orders(db.conn()).await.unwrap(), 3);
    let records = OutboxRecord::list(db.conn(), &outbox, 10).await.unwrap();
    assert_eq!(records.len(), 3);
    assert_eq!(records[1].envelope.aggregate_id, second);
    assert!(records.windows(2).all(|w| w[0].seq < w[1].seq));
}

async fn rollback_writes_nothing(db: &TestDb) {
    let outbox = Outbox::default();
    setup(db, &outbox).await;

    // Explicit rollback.
    let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
    Order::place(&uow, PlaceOrder::sample("c-1"))
        .save(&uow)
        .await
        .unwrap();
    uow.rollback().await.expect("rollback");

    // Dropped without commit.
    {
        let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
        Order::place(&uow, PlaceOrder::sample("c-2"))
            .save(&uow)
            .await
            .unwrap();
    }

    // The closure returns an error.
    let error = outbox
        .transaction(db.conn(), &OrderingContracts, async |uow| {
            Order::place(uow, PlaceOrder::sample("c-3"))
                .save(uow)
                .await?;
            Err::<(), _>(DbErr::Custom("payment declined".into()))
        })
        .await
        .expect_err("aborted");
    assert!(
        matches!(&error, UnitOfWorkError::Aborted(DbErr::Custom(m)) if m == "payment declined"),
        "{error:?}"
    );

    assert_eq!(count_orders(db.conn()).await.unwrap(), 0);
    assert_eq!(count_lines(db.conn()).await.unwrap(), 0);
    assert_eq!(outbox_rows(db, &outbox).await, 0);
}

async fn mapper_error_writes_nothing(db: &TestDb) {
    let outbox = Outbox::default();
    setup(db, &outbox).await;

    let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
    Order::place(&uow, PlaceOrder::sample("c-1"))
        .save(&uow)
        .await
        .unwrap();
    uow.raise(OrderingEvent::Poison {
        reason: "no contract for this".into(),
    });
    let error = uow.commit().await.expect_err("mapping fails");
    match &error {
        CommitError::Map {
            index,
            event_type,
            source: MapError::Rejected { reason },
        } => {
            assert_eq!(*index, 2);
            assert!(event_type.ends_with("OrderingEvent"), "{event_type}");
            assert_eq!(reason, "no contract for this");
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(error.to_string().contains("#2"), "{error}");

    // The same through the closure form.
    let error = outbox
        .transaction(db.conn(), &OrderingContracts, async |uow| {
            Order::place(uow, PlaceOrder::sample("c-2"))
                .save(uow)
                .await?;
            uow.raise(OrderingEvent::Poison { reason: "x".into() });
            Ok::<_, DbErr>(())
        })
        .await
        .expect_err("mapping fails");
    assert!(
        matches!(error, UnitOfWorkError::Commit(CommitError::Map { .. })),
        "{error:?}"
    );

    // A key longer than its column is refused before anything is written (MariaDB in a
    // non-strict mode would silently truncate it).
    let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
    Order::place(&uow, PlaceOrder::sample("c-3"))
        .save(&uow)
        .await
        .unwrap();
    uow.raise(OrderingEvent::Noted {
        order_id: "x".repeat(256),
        n: 1,
    });
    let error = uow.commit().await.expect_err("key too long");
    assert!(
        matches!(
            error,
            CommitError::FieldTooLong {
                field: "aggregate_id",
                length: 256,
                max: 255,
                ..
            }
        ),
        "{error:?}"
    );

    assert_eq!(count_orders(db.conn()).await.unwrap(), 0);
    assert_eq!(outbox_rows(db, &outbox).await, 0);
}

async fn panic_in_closure_writes_nothing(db: &TestDb) {
    let outbox = Outbox::default();
    setup(db, &outbox).await;

    let conn = db.conn().clone();
    let spawned_outbox = outbox.clone();
    // Spawning also proves the future of `transaction` is `Send`.
    let handle = tokio::spawn(async move {
        spawned_outbox
            .transaction(&conn, &OrderingContracts, async |uow| {
                let order = Order::place(uow, PlaceOrder::sample("c-1"));
                order.save(uow).await?;
                if !order.lines.is_empty() {
                    panic!("the handler panicked after writing");
                }
                Ok::<_, DbErr>(())
            })
            .await
    });
    let error = handle.await.expect_err("the task panicked");
    assert!(error.is_panic());

    assert_eq!(count_orders(db.conn()).await.unwrap(), 0);
    assert_eq!(count_lines(db.conn()).await.unwrap(), 0);
    assert_eq!(outbox_rows(db, &outbox).await, 0);

    // The connection is usable afterwards.
    let conn = db.conn().clone();
    let spawned_outbox = outbox.clone();
    tokio::spawn(async move { checkout(&conn, &spawned_outbox, "c-2").await })
        .await
        .expect("no panic")
        .expect("committed");
    assert_eq!(outbox_rows(db, &outbox).await, 1);
}

/// The double click of the demo's scenario 2 (book: The demo), with the outbox as in
/// block 3: the same checkout submitted twice; the unique `checkout_id` rejects the second,
/// and no ghost event is left behind.
async fn double_click_checkout_leaves_one_order_and_one_event(db: &TestDb) {
    let outbox = Outbox::default();
    setup(db, &outbox).await;

    checkout(db.conn(), &outbox, "checkout-42")
        .await
        .expect("click 1");
    let error = checkout(db.conn(), &outbox, "checkout-42")
        .await
        .expect_err("click 2 is rejected");
    let UnitOfWorkError::Aborted(db_error) = &error else {
        panic!("unexpected {error:?}");
    };
    assert!(
        matches!(
            db_error.sql_err(),
            Some(SqlErr::UniqueConstraintViolation(_))
        ),
        "click 2: {db_error}"
    );
    eprintln!("  click 2: {db_error}");

    let orders = count_orders(db.conn()).await.unwrap();
    let rows = outbox_rows(db, &outbox).await;
    eprintln!("  orders in db: {orders}, outbox rows: {rows}");
    assert_eq!((orders, rows), (1, 1));
    assert_eq!(count_lines(db.conn()).await.unwrap(), 2);
}

/// Guarantee 1 when the caller swallows the error: a unique violation is caught, and the
/// caller still commits. PostgreSQL refuses an aborted transaction by itself; on MariaDB and
/// SQLite the other order and its events would be committed without the unit of work's
/// refusal. A statement that may fail on purpose runs in a savepoint instead.
async fn a_caught_statement_error_refuses_the_commit(db: &TestDb) {
    let outbox = Outbox::default();
    setup(db, &outbox).await;
    checkout(db.conn(), &outbox, "checkout-7").await.unwrap();

    let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
    let other = Order::place(&uow, PlaceOrder::sample("checkout-8"));
    other.save(&uow).await.unwrap();
    let again = Order::place(&uow, PlaceOrder::sample("checkout-7"));
    let caught = again.save(&uow).await.expect_err("checkout-7 exists");
    assert!(
        matches!(caught.sql_err(), Some(SqlErr::UniqueConstraintViolation(_))),
        "{caught}"
    );
    assert!(uow.has_failed_statement());
    let error = uow.commit().await.expect_err("refused");
    assert!(
        matches!(error, CommitError::StatementFailed { .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("rolled back"), "{error}");
    assert_eq!(
        count_orders(db.conn()).await.unwrap(),
        1,
        "checkout-8 rolled back"
    );
    assert_eq!(outbox_rows(db, &outbox).await, 1, "no event of checkout-8");

    // The same work with the statement that may fail in a savepoint commits the rest.
    let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
    let other = Order::place(&uow, PlaceOrder::sample("checkout-8"));
    other.save(&uow).await.unwrap();
    let savepoint = uow.begin().await.unwrap();
    // Built aside: its events are not the unit of work's.
    let duplicate = Order::place(&RecordedEvents::new(), PlaceOrder::sample("checkout-7"));
    duplicate
        .save(&savepoint)
        .await
        .expect_err("checkout-7 exists");
    savepoint.rollback().await.unwrap();
    assert!(!uow.has_failed_statement());
    uow.commit().await.unwrap();
    assert_eq!(count_orders(db.conn()).await.unwrap(), 2);
    assert_eq!(outbox_rows(db, &outbox).await, 2, "checkout-8's event");
}

async fn ten_thousand_events_in_one_transaction(db: &TestDb) {
    let outbox = Outbox::default();
    setup(db, &outbox).await;

    let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
    for n in 0..10_000 {
        uow.raise(OrderingEvent::Noted {
            order_id: format!("order-{}", n % 97),
            n,
        });
    }
    let report = uow.commit().await.expect("commit 10 000 events");
    assert_eq!(report.rows, 10_000);
    assert_eq!(report.chunks, 10, "1 000 rows per INSERT by default");
    assert_eq!(outbox_rows(db, &outbox).await, 10_000);

    let records = OutboxRecord::list(db.conn(), &outbox, 20_000)
        .await
        .unwrap();
    assert_eq!(records.len(), 10_000);
    for (index, record) in records.iter().enumerate() {
        let noted: OrderNotedV2 = record.envelope.decode().unwrap();
        assert_eq!(noted.n as usize, index, "seq order is raise order");
        assert_eq!(record.envelope.message_id, report.message_ids[index]);
    }

    // The byte budget splits too: ~64 KiB per statement.
    let small = Outbox::builder()
        .outbox_table("outbox_small_chunks")
        .inbox_table("inbox_small_chunks")
        .chunk_bytes(64 * 1024)
        .build()
        .unwrap();
    schema::install(db.conn(), &small).await.unwrap();
    let uow = small.begin(db.conn(), &OrderingContracts).await.unwrap();
    for n in 0..2_000 {
        uow.raise(OrderingEvent::Noted {
            order_id: format!("order-{n}"),
            n,
        });
    }
    let report = uow.commit().await.unwrap();
    assert_eq!(report.rows, 2_000);
    assert!(
        report.chunks > 2,
        "a byte budget of 64 KiB needs more than the 2 row-bounded INSERTs, got {}",
        report.chunks
    );
    assert_eq!(outbox_rows(db, &small).await, 2_000);
}

async fn concurrent_units_of_work(db: &TestDb) {
    let outbox = Outbox::default();
    setup(db, &outbox).await;

    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..32 {
        let conn = db.conn().clone();
        let outbox = outbox.clone();
        tasks.spawn(async move { checkout(&conn, &outbox, &format!("checkout-{i}")).await });
    }
    let mut ids = HashSet::new();
    while let Some(result) = tasks.join_next().await {
        let id = result.expect("no panic").expect("committed");
        assert!(ids.insert(id));
    }
    assert_eq!(count_orders(db.conn()).await.unwrap(), 32);
    assert_eq!(count_lines(db.conn()).await.unwrap(), 64);
    let records = OutboxRecord::list(db.conn(), &outbox, 100).await.unwrap();
    assert_eq!(records.len(), 32);
    let aggregates: HashSet<_> = records
        .iter()
        .map(|r| r.envelope.aggregate_id.clone())
        .collect();
    assert_eq!(aggregates, ids);
    let message_ids: HashSet<_> = records.iter().map(|r| r.envelope.message_id).collect();
    assert_eq!(message_ids.len(), 32);
}

async fn every_envelope_field_is_stored(db: &TestDb) {
    let raised_at: DateTime<Utc> = "2026-03-04T05:06:07.123456Z".parse().unwrap();
    let clock = Arc::new(ManualClock::starting_at(raised_at));
    let outbox = Outbox::builder()
        .clock(clock.clone())
        .partitions(16)
        .build()
        .unwrap();
    setup(db, &outbox).await;

    // A consumer handling an incoming message.
    let incoming_correlation = Uuid::now_v7();
    let incoming = Envelope::from_event(&OrderNotedV2 {
        order_id: "o-1".into(),
        n: 1,
    })
    .unwrap()
    .with_correlation_id(incoming_correlation)
    .with_trace_context(
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into(),
        None,
    );
    let trace = TraceContext::new(
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        Some("congo=t61rcWkgMzE,rojo=00f067aa0ba902b7".into()),
    )
    .unwrap();
    let uow = outbox
        .unit_of_work(&OrderingContracts)
        .caused_by(&incoming)
        .trace_context(Some(trace.clone()))
        .header("tenant", "acme")
        .begin(db.conn())
        .await
        .unwrap();
    assert_eq!(uow.correlation_id(), incoming_correlation);
    assert_eq!(uow.causation_id(), Some(incoming.message_id));
    let order = Order::place(&uow, PlaceOrder::sample("c-1"));
    order.save(&uow).await.unwrap();
    // Commit later: occurred_at is when the event was raised, created_at when it was written.
    clock.advance(TimeDelta::seconds(5));
    let report = uow.commit().await.unwrap();

    let records = OutboxRecord::list(db.conn(), &outbox, 10).await.unwrap();
    assert_eq!(records.len(), 1);
    let record = &records[0];
    let expected_payload = OrderPlacedV1 {
        order_id: order.id.clone(),
        checkout_id: "c-1".into(),
        customer: "ada".into(),
        books: vec![
            OrderedBookV1 {
                book_id: "dune".into(),
                quantity: 2,
            },
            OrderedBookV1 {
                book_id: "emma".into(),
                quantity: 1,
            },
        ],
    };
    let e = &record.envelope;
    assert_eq!(e.message_id, report.message_ids[0]);
    assert_eq!(e.message_id.get_version_num(), 7);
    assert_eq!(e.event_type, OrderPlacedV1::EVENT_TYPE);
    assert_eq!(e.version, 1);
    assert_eq!(e.aggregate_type, "order");
    assert_eq!(e.aggregate_id, order.id);
    assert_eq!(
        record.partition,
        i32::try_from(partition_of(&order.id, 16)).unwrap()
    );
    assert_eq!(e.correlation_id, Some(incoming_correlation));
    assert_eq!(e.causation_id, Some(incoming.message_id));
    assert_eq!(e.traceparent.as_deref(), Some(trace.traceparent()));
    assert_eq!(e.tracestate.as_deref(), trace.tracestate());
    assert_eq!(e.occurred_at, raised_at);
    assert_eq!(
        e.headers,
        BTreeMap::from([("tenant".to_owned(), "acme".to_owned())])
    );
    assert_eq!(e.payload, serde_json::to_value(&expected_payload).unwrap());
    assert_eq!(e.decode::<OrderPlacedV1>().unwrap(), expected_payload);
    assert_eq!(record.status, OutboxStatus::Pending);
    assert_eq!(record.attempts, 0);
    assert_eq!(record.last_error, None);
    assert_eq!(record.published_at, None);
    assert_eq!(record.created_at, raised_at + TimeDelta::seconds(5));
    assert_eq!(record.next_attempt_at, record.created_at);
    assert!(record.seq >= 1);

    // The whole envelope, as a value.
    let mut expected = Envelope::from_event(&expected_payload)
        .unwrap()
        .with_occurred_at(raised_at)
        .with_correlation_id(incoming_correlation)
        .with_causation_id(incoming.message_id)
        .with_trace_context(
            trace.traceparent().to_owned(),
            trace.tracestate().map(str::to_owned),
        )
        .with_header("tenant", "acme");
    expected.message_id = e.message_id;
    assert_eq!(*e, expected);

    // Defaults: a fresh UUIDv7 correlation id per unit of work, no causation; a consumer
    // without a current trace context inherits the incoming one.
    let a = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
    let a_correlation = a.correlation_id();
    assert_eq!(a_correlation.get_version_num(), 7);
    assert_eq!(a.causation_id(), None);
    assert_eq!(a.trace_context(), None, "no OpenTelemetry layer installed");
    a.rollback().await.unwrap();
    let b = outbox
        .begin_caused_by(
            db.conn(),
            &OrderingContracts,
            &incoming.clone().with_correlation_id(Uuid::nil()),
        )
        .await
        .unwrap();
    assert_ne!(b.correlation_id(), a_correlation);
    assert_eq!(
        b.trace_context().map(TraceContext::traceparent),
        incoming.traceparent.as_deref()
    );
    b.rollback().await.unwrap();
    let mut uncorrelated = incoming.clone();
    uncorrelated.correlation_id = None;
    let c = outbox
        .begin_caused_by(db.conn(), &OrderingContracts, &uncorrelated)
        .await
        .unwrap();
    assert_eq!(c.correlation_id(), uncorrelated.message_id);
    c.rollback().await.unwrap();
}

/// Everything inside a unit of work goes through it, so a pool of one connection (SQLite's
/// default) does not deadlock; and touching the pool instead times out, it does not hang.
async fn single_connection_does_not_deadlock(db: &TestDb) {
    let outbox = Outbox::default();
    setup(db, &outbox).await;
    // The in-memory database lives on its only connection: use that pool. Elsewhere open a
    // second pool of one connection to the same database.
    let own_pool = db.backend() != Backend::SqliteMemory;
    let single = db.single_connection_pool(Duration::from_millis(500)).await;

    let work = async {
        let uow = outbox.begin(&single, &OrderingContracts).await?;
        let order = Order::place(&uow, PlaceOrder::sample("c-1"));
        order.save(&uow).await?;
        assert_eq!(count_orders(&uow).await?, 1);
        assert_eq!(orders::Entity::find().all(&uow).await?.len(), 1);
        if own_pool {
            // The only connection is the unit of work's: the pool cannot hand out another.
            let error = count_orders(&single)
                .await
                .expect_err("pool exhausted while the unit of work is open");
            assert!(matches!(error, DbErr::ConnectionAcquire(_)), "{error:?}");
        }
        uow.commit()
            .await
            .map_err(|e| DbErr::Custom(e.to_string()))?;
        assert_eq!(count_orders(&single).await?, 1);
        Ok::<_, DbErr>(())
    };
    tokio::time::timeout(Duration::from_secs(20), work)
        .await
        .expect("no deadlock")
        .expect("work");
    assert_eq!(outbox_rows(db, &outbox).await, 1);
    if own_pool {
        single.close().await.unwrap();
    }
}

fn uuid_column(row: &QueryResult, column: &str) -> Uuid {
    match row.try_get::<String>("", column) {
        Ok(text) => Uuid::parse_str(&text).unwrap(),
        Err(_) => row.try_get::<Uuid>("", column).unwrap(),
    }
}

fn json_column(row: &QueryResult, column: &str) -> serde_json::Value {
    match row.try_get::<String>("", column) {
        Ok(text) => serde_json::from_str(&text).unwrap(),
        Err(_) => row.try_get::<serde_json::Value>("", column).unwrap(),
    }
}

/// With Debezium's column names, the Outbox Event Router's default columns hold the
/// envelope, and the table name is used verbatim (mixed case, quoted).
async fn debezium_column_naming(db: &TestDb) {
    let outbox = Outbox::builder()
        .outbox_table("Outbox_Debezium")
        .inbox_table("Inbox_Debezium")
        .column_naming(ColumnNaming::Debezium)
        .build()
        .unwrap();
    setup(db, &outbox).await;
    let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
    let order = Order::place(&uow, PlaceOrder::sample("c-1"));
    order.save(&uow).await.unwrap();
    let report = uow.commit().await.unwrap();

    let mut select = Query::select();
    select
        .columns(["id", "aggregatetype", "aggregateid", "type", "payload"].map(Alias::new))
        .from(Alias::new("Outbox_Debezium"));
    let row = db
        .conn()
        .query_one(&select)
        .await
        .expect("Debezium columns")
        .expect("one row");
    assert_eq!(uuid_column(&row, "id"), report.message_ids[0]);
    assert_eq!(row.try_get::<String>("", "aggregatetype").unwrap(), "order");
    assert_eq!(row.try_get::<String>("", "aggregateid").unwrap(), order.id);
    assert_eq!(
        row.try_get::<String>("", "type").unwrap(),
        OrderPlacedV1::EVENT_TYPE
    );
    let payload: OrderPlacedV1 = serde_json::from_value(json_column(&row, "payload")).unwrap();
    assert_eq!(payload.order_id, order.id);

    // The standard names do not exist in that table. (SQLite reads an unknown double-quoted
    // identifier as a string literal, so ask its catalogue instead.)
    if db.backend().db_backend() == DbBackend::Sqlite {
        let columns: Vec<String> = db
            .conn()
            .query_all_raw(Statement::from_string(
                DbBackend::Sqlite,
                "SELECT name FROM pragma_table_info('Outbox_Debezium')",
            ))
            .await
            .unwrap()
            .iter()
            .map(|row| row.try_get::<String>("", "name").unwrap())
            .collect();
        assert!(columns.contains(&"id".to_owned()), "{columns:?}");
        assert!(!columns.contains(&"message_id".to_owned()), "{columns:?}");
    } else {
        let mut standard = Query::select();
        standard
            .column(Alias::new("message_id"))
            .from(Alias::new("Outbox_Debezium"));
        assert!(db.conn().query_one(&standard).await.is_err());
    }

    // And the reader maps them back.
    let records = OutboxRecord::list(db.conn(), &outbox, 10).await.unwrap();
    assert_eq!(records[0].envelope.message_id, report.message_ids[0]);
    assert_eq!(records[0].envelope.event_type, OrderPlacedV1::EVENT_TYPE);
}

async fn queries_streams_and_savepoints_run_on_the_unit_of_work(db: &TestDb) {
    let outbox = Outbox::default();
    setup(db, &outbox).await;
    let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
    let order = Order::place(&uow, PlaceOrder::sample("c-1"));
    order.save(&uow).await.unwrap();

    // Entity queries, raw statements and streams see the uncommitted rows.
    let found = orders::Entity::find_by_id(order.id.clone())
        .one(&uow)
        .await
        .unwrap()
        .expect("visible inside the unit of work");
    assert_eq!(found.checkout_id, "c-1");
    let backend = ConnectionTrait::get_database_backend(&uow);
    let row = uow
        .query_one_raw(Statement::from_string(
            backend,
            "SELECT COUNT(*) AS n FROM order_lines",
        ))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.try_get::<i64>("", "n").unwrap(), 2);
    let streamed: Vec<_> = orders::Entity::find()
        .stream(&uow)
        .await
        .unwrap()
        .collect()
        .await;
    assert_eq!(streamed.len(), 1);
    uow.execute_unprepared("UPDATE orders SET customer = 'grace'")
        .await
        .unwrap();

    // A savepoint rolled back undoes its statements only.
    let savepoint = TransactionTrait::begin(&uow).await.unwrap();
    Order::place(
        &outbox_core::RecordedEvents::new(),
        PlaceOrder::sample("c-2"),
    )
    .save(&savepoint)
    .await
    .unwrap();
    assert_eq!(count_orders(&savepoint).await.unwrap(), 2);
    savepoint.rollback().await.unwrap();
    assert_eq!(count_orders(&uow).await.unwrap(), 1);

    uow.commit().await.unwrap();
    let orders = orders::Entity::find().all(db.conn()).await.unwrap();
    assert_eq!(orders.len(), 1);
    assert_eq!(orders[0].customer, "grace");
    assert_eq!(outbox_rows(db, &outbox).await, 1);
}

fn ordering_outbox() -> Outbox {
    Outbox::builder()
        .outbox_table("ordering_outbox")
        .inbox_table("ordering_inbox")
        .build()
        .unwrap()
}

fn billing_outbox() -> Outbox {
    Outbox::builder()
        .outbox_table("billing_outbox")
        .inbox_table("billing_inbox")
        .build()
        .unwrap()
}

struct Migrator;

impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        let mut migrations = migration::migrations(&ordering_outbox());
        migrations.extend(migration::migrations(&billing_outbox()));
        migrations
    }
}

/// Two configurations' migrations live side by side in one migrator.
async fn migrations_create_and_drop_each_configuration(db: &TestDb) {
    Migrator::up(db.conn(), None).await.expect("migrate up");
    let applied = Migrator::get_applied_migrations(db.conn())
        .await
        .unwrap()
        .len();
    assert_eq!(
        applied, 22,
        "outbox, inbox, relay, consumer dead-letter, consumer lease and log relay tables \
         (PostgreSQL's, MariaDB's), scheduled, periodic, unique and worker slots tables of \
         two configurations"
    );
    // The log relay's tables exist on PostgreSQL and MariaDB.
    let backend = db.backend().db_backend();
    let log_slots = match backend {
        DbBackend::Postgres => Some(
            "SELECT 1 FROM information_schema.tables WHERE table_name = 'billing_outbox_log_slots'",
        ),
        DbBackend::MySql => Some(
            "SELECT 1 FROM information_schema.tables WHERE table_schema = DATABASE() \
             AND table_name = 'billing_outbox_log_slots'",
        ),
        _ => None,
    };
    if let Some(query) = log_slots {
        let found = db
            .conn()
            .query_one_raw(Statement::from_string(backend, query))
            .await
            .unwrap();
        assert!(found.is_some(), "log relay slot table created");
    }
    create_business_tables(db.conn()).await.unwrap();
    for outbox in [ordering_outbox(), billing_outbox()] {
        checkout(db.conn(), &outbox, &format!("c-{}", outbox.outbox_table()))
            .await
            .unwrap();
        assert_eq!(outbox_rows(db, &outbox).await, 1);
    }
    Migrator::down(db.conn(), None).await.expect("migrate down");
    assert!(
        OutboxRecord::count(db.conn(), &ordering_outbox())
            .await
            .is_err(),
        "table dropped"
    );
    let has_inbox = match db.backend().db_backend() {
        DbBackend::Postgres => {
            "SELECT 1 FROM information_schema.tables WHERE table_name = 'billing_inbox'"
        }
        DbBackend::MySql => {
            "SELECT 1 FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = 'billing_inbox'"
        }
        _ => "SELECT 1 FROM sqlite_master WHERE name = 'billing_inbox'",
    };
    let found = db
        .conn()
        .query_one_raw(Statement::from_string(db.backend().db_backend(), has_inbox))
        .await
        .unwrap();
    assert!(found.is_none(), "inbox table dropped");
    if let Some(query) = log_slots {
        let found = db
            .conn()
            .query_one_raw(Statement::from_string(DbBackend::Postgres, query))
            .await
            .unwrap();
        assert!(found.is_none(), "log relay slot table dropped");
    }
    let dead_letters = outbox_seaorm::inbox::dead_letter::table(&billing_outbox());
    let has_dead_letters = has_inbox.replace("billing_inbox", dead_letters.table());
    let found = db
        .conn()
        .query_one_raw(Statement::from_string(
            db.backend().db_backend(),
            has_dead_letters,
        ))
        .await
        .unwrap();
    assert!(found.is_none(), "consumer dead-letter table dropped");
    let has_leases = has_inbox.replace("billing_inbox", "billing_inbox_consumer_leases");
    let found = db
        .conn()
        .query_one_raw(Statement::from_string(
            db.backend().db_backend(),
            has_leases,
        ))
        .await
        .unwrap();
    assert!(found.is_none(), "consumer lease table dropped");
}

/// A domain enum with `#[derive(DomainEvent)]`, mapped by `DerivedMapping`.
#[derive(outbox_core::DomainEvent)]
enum CatalogEvent {
    #[domain_event(contract = OrderNotedV2)]
    Noted(Noted),
    #[domain_event(local)]
    Touched,
}

struct Noted {
    order_id: String,
    n: u32,
}

impl From<&Noted> for OrderNotedV2 {
    fn from(noted: &Noted) -> Self {
        Self {
            order_id: noted.order_id.clone(),
            n: noted.n,
        }
    }
}

/// A mapper built at run time (not `Clone`, not `'static`): shared through an `Arc`.
struct NumberedContracts {
    offset: u32,
}

impl outbox_core::mapping::ContractMapper<OrderingEvent> for NumberedContracts {
    fn map(
        &self,
        event: &OrderingEvent,
        out: &mut outbox_core::mapping::ContractSink<'_>,
    ) -> Result<(), MapError> {
        match event {
            OrderingEvent::Noted { order_id, n } => out.emit(&OrderNotedV2 {
                order_id: order_id.clone(),
                n: n + self.offset,
            }),
            _ => Ok(()),
        }
    }
}

async fn derived_and_shared_mappers(db: &TestDb) {
    let outbox = Outbox::default();
    setup(db, &outbox).await;

    let uow = outbox
        .begin(db.conn(), &outbox_core::mapping::DerivedMapping)
        .await
        .unwrap();
    uow.raise(CatalogEvent::Noted(Noted {
        order_id: "o-1".into(),
        n: 1,
    }));
    uow.raise(CatalogEvent::Touched);
    let report = uow.commit().await.unwrap();
    assert_eq!((report.events, report.rows), (2, 1));

    let mapper = Arc::new(NumberedContracts { offset: 100 });
    let uow = outbox.begin(db.conn(), mapper.clone()).await.unwrap();
    uow.raise(OrderingEvent::Noted {
        order_id: "o-1".into(),
        n: 1,
    });
    uow.commit().await.unwrap();

    let records = OutboxRecord::list(db.conn(), &outbox, 10).await.unwrap();
    let numbers: Vec<u32> = records
        .iter()
        .map(|r| r.envelope.decode::<OrderNotedV2>().unwrap().n)
        .collect();
    assert_eq!(numbers, [1, 101]);
}

/// Per-aggregate order under late commits (issue 15, item 6). Publication follows the order
/// in which rows become visible: a unit of work that wrote its rows first (lower `seq`) but
/// commits second is published second. Serialising the aggregate's writes — each unit of
/// work locks the aggregate's row (`SELECT … FOR UPDATE`) before it writes — makes that order
/// the `seq` order: the second waits for the first to commit.
async fn late_commits_and_serialised_aggregates(db: &TestDb) {
    use outbox_core::in_process::InProcessBroker;
    use outbox_seaorm::relay::Relay;
    use outbox_tests::bookstore::orders as order_rows;
    use sea_orm::QuerySelect as _;

    let outbox = Outbox::default();
    setup(db, &outbox).await;
    let order_id = checkout(db.conn(), &outbox, "checkout-late").await.unwrap();
    let broker = InProcessBroker::new();
    // Kept after publication: the test compares the published rows' `seq`s.
    let mut relay = Relay::builder(db.conn().clone(), outbox.clone(), broker.clone())
        .retention(Some(Duration::from_secs(3600)))
        .build()
        .unwrap();
    relay.drain().await.unwrap();
    let noted = |broker: &InProcessBroker| -> Vec<i64> {
        broker
            .published()
            .iter()
            .filter(|e| e.event_type == OrderNotedV2::EVENT_TYPE)
            .map(|e| e.payload.to_value().unwrap()["n"].as_i64().unwrap())
            .collect()
    };
    let note = |n: u32| OrderingEvent::Noted {
        order_id: order_id.clone(),
        n,
    };

    // Not serialised: A writes its rows (in the transaction around its unit of work), B
    // writes and commits, then A commits.
    let a = db.conn().begin().await.unwrap();
    let uow = outbox.begin(&a, &OrderingContracts).await.unwrap();
    uow.raise(note(1));
    uow.commit().await.unwrap();
    let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
    uow.raise(note(2));
    uow.commit().await.unwrap();
    relay.drain().await.unwrap();
    a.commit().await.unwrap();
    relay.drain().await.unwrap();
    assert_eq!(noted(&broker), [2, 1], "in the order they became visible");
    let rows = OutboxRecord::list(db.conn(), &outbox, 100).await.unwrap();
    let seq_of = |n: i64| {
        rows.iter()
            .find(|r| r.envelope.payload.to_value().unwrap()["n"] == n)
            .map(|r| r.seq)
            .unwrap()
    };
    assert!(seq_of(1) < seq_of(2), "though 1 has the lower seq");

    // Serialised: both lock the order's row first.
    let lock = async |conn: &UnitOfWork<OrderingEvent>| {
        order_rows::Entity::find_by_id(order_id.clone())
            .lock_exclusive()
            .one(conn)
            .await
            .unwrap()
            .unwrap()
    };
    let a = db.conn().begin().await.unwrap();
    let uow = outbox.begin(&a, &OrderingContracts).await.unwrap();
    lock(&uow).await;
    uow.raise(note(3));
    uow.commit().await.unwrap();
    let (conn, config, second) = (db.conn().clone(), outbox.clone(), note(4));
    let b = tokio::spawn(async move {
        let uow = config.begin(&conn, &OrderingContracts).await.unwrap();
        order_rows::Entity::find_by_id(order_id_of(&second))
            .lock_exclusive()
            .one(&uow)
            .await
            .unwrap()
            .unwrap();
        uow.raise(second);
        uow.commit().await.unwrap();
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!b.is_finished(), "B waits for A's lock");
    relay.drain().await.unwrap();
    a.commit().await.unwrap();
    b.await.unwrap();
    relay.drain().await.unwrap();
    assert_eq!(noted(&broker), [2, 1, 3, 4], "3 and 4 in seq order");
}

fn order_id_of(event: &OrderingEvent) -> String {
    match event {
        OrderingEvent::Noted { order_id, .. } => order_id.clone(),
        _ => unreachable!("a note"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_commits_and_serialised_aggregates_postgres() {
    outbox_tests::db::run_scenario(
        Backend::Postgres,
        "late_commits_and_serialised_aggregates_postgres",
        late_commits_and_serialised_aggregates,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_commits_and_serialised_aggregates_mariadb() {
    outbox_tests::db::run_scenario(
        Backend::MariaDb,
        "late_commits_and_serialised_aggregates_mariadb",
        late_commits_and_serialised_aggregates,
    )
    .await;
}
