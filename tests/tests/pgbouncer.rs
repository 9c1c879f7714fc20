//! The outbox behind PgBouncer in transaction pooling mode
//! (book: Many tenants § Behind PgBouncer): a PgBouncer of the test's own (Debian's 1.18, `pool_mode = transaction`,
//! `server_reset_query = DEALLOCATE ALL`, `server_reset_query_always = 1`, two server
//! connections) in front of the tests' PostgreSQL, and an outbox with
//! `transaction_pooling(true)` reached through it with sqlx's statement cache off.
//!
//! First the fact the design rests on: behind such a pooler a SeaORM statement with
//! parameters fails outside a transaction and works inside one. Then units of work from
//! several tasks, two polling relays, an inbox consumer (every message delivered twice) and
//! the operations, all through the pooler: everything published once and applied once,
//! never more than two server connections. And the same relay without
//! `transaction_pooling` fails; the log relay refuses a replication connection through the
//! pooler.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use outbox_core::Raise;
use outbox_core::in_process::InProcessBroker;
use outbox_seaorm::inbox::{Consumer, Delivered};
use outbox_seaorm::ops::Operations;
use outbox_seaorm::relay::Relay;
use outbox_seaorm::relay::log::{LogRelay, LogRelayError};
use outbox_seaorm::{Outbox, UnitOfWork, inbox_handler, schema};
use outbox_tests::bookstore::{OrderNotedV2, OrderingContracts, OrderingEvent};
use outbox_tests::db::TestDb;
use outbox_tests::pgbouncer::PgBouncer;
use sea_orm::{
    ConnectOptions, ConnectionTrait, Database, DatabaseConnection, DbBackend, DbErr, Statement,
    TransactionTrait,
};
use tokio_util::sync::CancellationToken;

/// Server connections PgBouncer may open to the test's database.
const POOL_SIZE: u32 = 2;

/// The test database's name, from its URL.
fn database_name(db: &TestDb) -> String {
    db.url().rsplit('/').next().unwrap().to_owned()
}

/// The port of the server holding `db` (127.0.0.1), from its URL.
fn server_port(db: &TestDb) -> u16 {
    db.url()
        .rsplit_once(':')
        .and_then(|(_, rest)| rest.split('/').next())
        .and_then(|port| port.parse().ok())
        .unwrap_or_else(|| panic!("no port in {}", db.url()))
}

/// A SeaORM pool through `bouncer` to `db`'s database, with sqlx's statement cache off.
async fn through(bouncer: &PgBouncer, db: &TestDb, connections: u32) -> DatabaseConnection {
    let url = format!(
        "{}?statement-cache-capacity=0",
        bouncer.url(&database_name(db))
    );
    let mut options = ConnectOptions::new(url);
    options
        .max_connections(connections)
        .sqlx_logging(false)
        .connect_timeout(Duration::from_secs(10));
    Database::connect(options).await.unwrap()
}

/// The test's PgBouncer in front of the tests' PostgreSQL, and a fresh database on it.
async fn setup(test: &str) -> Option<(PgBouncer, TestDb)> {
    let db = TestDb::postgres(test).await?;
    let bouncer = PgBouncer::start(test, server_port(&db), POOL_SIZE).await?;
    Some((bouncer, db))
}

async fn count(db: &TestDb, sql: &str) -> i64 {
    db.conn()
        .query_one_raw(Statement::from_string(DbBackend::Postgres, sql))
        .await
        .unwrap()
        .unwrap()
        .try_get_by_index(0)
        .unwrap()
}

/// The fact: PgBouncer lends a server connection for one exchange outside a transaction,
/// sqlx sends a statement with parameters as two (`Parse`, then `Bind`/`Execute`), and the
/// pooler drops the prepared statement in between; inside a transaction the statement
/// works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_with_parameters_needs_a_transaction_behind_the_pooler() {
    let test = "a_statement_with_parameters_needs_a_transaction_behind_the_pooler";
    let Some((bouncer, db)) = setup(test).await else {
        return;
    };
    let statement =
        || Statement::from_sql_and_values(DbBackend::Postgres, "SELECT $1::int + 1", [41.into()]);
    let pooled = through(&bouncer, &db, 1).await;
    let txn = pooled.begin().await.unwrap();
    let row = txn.query_one_raw(statement()).await.unwrap().unwrap();
    txn.commit().await.unwrap();
    assert_eq!(row.try_get_by_index::<i32>(0).unwrap(), 42);
    pooled.close().await.unwrap();

    let pooled = through(&bouncer, &db, 1).await;
    let outside = pooled.query_one_raw(statement()).await;
    let error = outside.expect_err("outside a transaction the statement is lost");
    assert!(
        error.to_string().contains("does not exist"),
        "the pooler dropped the prepared statement between Parse and Bind: {error}"
    );
    // That connection is out of step with the server now (PgBouncer: "got packet 'E' from
    // server when not linked"): the pool is dropped, not closed.
    drop(pooled);
    db.close().await;
}

/// The consumer of the pooled scenario: notes each order once.
#[inbox_handler(consumer = "tests.behind-the-pooler")]
async fn note_order(uow: &UnitOfWork, event: OrderNotedV2) -> Result<(), DbErr> {
    uow.execute_raw(Statement::from_sql_and_values(
        DbBackend::Postgres,
        "INSERT INTO noted (order_id, n) VALUES ($1, $2)",
        [event.order_id.into(), i64::from(event.n).into()],
    ))
    .await?;
    Ok(())
}

const WRITERS: u32 = 4;
const ORDERS_PER_WRITER: u32 = 25;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn units_of_work_relays_inbox_and_operations_work_behind_the_pooler() {
    let test = "units_of_work_relays_inbox_and_operations_work_behind_the_pooler";
    let Some((bouncer, db)) = setup(test).await else {
        return;
    };
    let outbox = Outbox::builder().transaction_pooling(true).build().unwrap();
    // Migrations run on a direct connection, as a deployment runs them.
    schema::install(db.conn(), &outbox).await.unwrap();
    db.conn()
        .execute_unprepared("CREATE TABLE noted (order_id TEXT, n BIGINT)")
        .await
        .unwrap();
    let pooled = through(&bouncer, &db, 8).await;

    // Writers: units of work from several tasks at once.
    let mut writers = tokio::task::JoinSet::new();
    for writer in 0..WRITERS {
        let (pooled, outbox) = (pooled.clone(), outbox.clone());
        writers.spawn(async move {
            for n in 0..ORDERS_PER_WRITER {
                let uow = outbox.begin(&pooled, &OrderingContracts).await.unwrap();
                uow.raise(OrderingEvent::Noted {
                    order_id: format!("order-{writer}-{n}"),
                    n,
                });
                uow.commit().await.unwrap();
            }
        });
    }
    // Two relays share the partitions through their leases, through the pooler.
    let broker = InProcessBroker::new();
    let shutdown = CancellationToken::new();
    let mut relays = Vec::new();
    for instance in ["relay-a", "relay-b"] {
        let relay = Relay::builder(pooled.clone(), outbox.clone(), broker.clone())
            .instance_id(instance)
            .poll_interval(Duration::from_millis(50))
            .build()
            .unwrap();
        relays.push(tokio::spawn(relay.run(shutdown.clone())));
    }
    while let Some(written) = writers.join_next().await {
        written.unwrap();
    }
    let total = (WRITERS * ORDERS_PER_WRITER) as usize;
    let all = broker
        .wait_for_published(total, Duration::from_secs(60))
        .await;
    assert!(all, "{} of {total} published", broker.len());
    shutdown.cancel();
    for relay in relays {
        relay.await.unwrap().unwrap();
    }
    let published = broker.published();
    let mut ids: Vec<_> = published
        .iter()
        .map(|envelope| envelope.message_id)
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), total, "every row published once");
    assert_eq!(published.len(), total, "nothing published twice");

    // The inbox: every message delivered twice, applied once.
    let consumer = Consumer::builder(pooled.clone(), outbox.clone(), "tests.behind-the-pooler")
        .build()
        .unwrap();
    let mut deliveries = tokio::task::JoinSet::new();
    for envelope in published.iter().chain(&published) {
        let (consumer, envelope) = (consumer.clone(), envelope.clone());
        deliveries.spawn(async move { consumer.deliver(&envelope).await });
    }
    let (mut applied, mut duplicates) = (0, 0);
    while let Some(delivered) = deliveries.join_next().await {
        match delivered.unwrap().unwrap() {
            Delivered::Applied { .. } => applied += 1,
            Delivered::Duplicate => duplicates += 1,
            other => panic!("a delivery through the pooler failed: {other:?}"),
        }
    }
    assert_eq!((applied, duplicates), (total, total));
    assert_eq!(count(&db, "SELECT count(*) FROM noted").await, total as i64);

    // The operations: the status, a dead letter retried.
    let operations = Operations::new(pooled.clone(), outbox.clone());
    let status = operations.status().await.unwrap();
    assert_eq!(status.pending, 0, "{status:?}");
    assert!(status.dead_by_event_type.is_empty(), "{status:?}");
    assert_eq!(
        status.live_relays.len(),
        0,
        "both relays deregistered: {status:?}"
    );

    assert!(
        bouncer.server_connections(&database_name(&db)) <= POOL_SIZE as usize,
        "PgBouncer never opens more than its pool"
    );
    pooled.close().await.unwrap();
    db.close().await;
}

/// Without `transaction_pooling` the relay's statements outside a transaction fail behind
/// the pooler, and nothing is published: the setting is what makes the relay work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_transaction_pooling_the_relay_fails_behind_the_pooler() {
    let test = "without_transaction_pooling_the_relay_fails_behind_the_pooler";
    let Some((bouncer, db)) = setup(test).await else {
        return;
    };
    let outbox = Outbox::default();
    schema::install(db.conn(), &outbox).await.unwrap();
    let pooled = through(&bouncer, &db, 4).await;
    let uow = outbox.begin(&pooled, &OrderingContracts).await.unwrap();
    uow.raise(OrderingEvent::Noted {
        order_id: "order-1".to_owned(),
        n: 1,
    });
    uow.commit().await.unwrap();
    let broker = InProcessBroker::new();
    let relay = Relay::builder(pooled.clone(), outbox.clone(), broker.clone())
        .build()
        .unwrap();
    let outage = relay.database_outage();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(relay.run(shutdown.clone()));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while outage.failing().is_none() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the relay should fail behind the pooler without transaction_pooling"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let failure = outage.failing().unwrap();
    assert!(
        format!("{failure:?}").contains("does not exist"),
        "{failure:?}"
    );
    assert!(broker.is_empty(), "nothing published");
    shutdown.cancel();
    let _ = running.await;
    pooled.close().await.unwrap();
    db.close().await;
}

/// The log relay's replication connection cannot go through the pooler: it stops at start
/// with an error that says to give it a URL straight to PostgreSQL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_relay_refuses_a_replication_connection_through_the_pooler() {
    let test = "the_log_relay_refuses_a_replication_connection_through_the_pooler";
    let Some(db) = TestDb::logical_postgres(test).await else {
        return;
    };
    let Some(bouncer) = PgBouncer::start(test, server_port(&db), POOL_SIZE).await else {
        return;
    };
    let outbox = Outbox::default();
    schema::install(db.conn(), &outbox).await.unwrap();
    let relay = LogRelay::builder(db.conn().clone(), outbox, InProcessBroker::new())
        .slot(format!("s_{}", uuid::Uuid::now_v7().simple()))
        .connection_url(bouncer.url(&database_name(&db)))
        .build()
        .unwrap();
    let result = tokio::time::timeout(Duration::from_secs(30), relay.run(CancellationToken::new()))
        .await
        .expect("a refused start returns at once");
    let error = result.unwrap_err();
    assert!(
        matches!(&error, LogRelayError::ThroughPooler { .. }),
        "{error}"
    );
    assert!(
        error.to_string().contains("straight to PostgreSQL"),
        "{error}"
    );
    db.close().await;
}
