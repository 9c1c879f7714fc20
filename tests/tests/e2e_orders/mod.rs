//! Shared by the broker test binaries (`broker_nats` and `broker_redis`; `broker_kafka` and
//! `broker_rabbitmq` for the requeued dead letter scenario only): a small contract keyed by
//! customer (the aggregate), the inbox handler that reserves stock and records the order it
//! applied each message in, consumer-side tables, the requeued dead letter scenario, and the
//! end-to-end scenario of issue 6 item 4 — a producer on PostgreSQL, the relay, a broker
//! behind a cuttable proxy, a consumer runner on MariaDB — generic over the broker.

// Each test binary uses a part of this module.
#![allow(dead_code, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use outbox_core::mapping::DerivedMapping;
use outbox_core::policy::Backoff;
use outbox_core::{DomainEvent, Envelope, IntegrationEvent, Publisher, Raise};
use outbox_seaorm::inbox::Consumer;
use outbox_seaorm::relay::Relay;
use outbox_seaorm::{Outbox, UnitOfWork, inbox_handler, schema};
use outbox_tests::db::TestDb;
use outbox_tests::proxy::Proxy;
use schemars::JsonSchema;
use sea_orm::{
    ConnectOptions, ConnectionTrait, Database, DatabaseConnection, DbBackend, DbErr, Statement,
    Value,
};
use serde::{Deserialize, Serialize};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The inbox consumer of every broker test.
pub const CONSUMER: &str = "tests.broker-orders";

/// The books in stock.
pub const BOOKS: [&str; 5] = ["dune", "emma", "ulysses", "beloved", "solaris"];

/// Contract: a customer placed an order (the customer is the aggregate: its orders are
/// numbered 0, 1, 2, … and must be applied in that order).
#[derive(Debug, Clone, PartialEq, Eq, IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "brokertest.shop.customer-ordered.v1", key = customer_id)]
pub struct CustomerOrderedV1 {
    /// The customer.
    pub customer_id: String,
    /// The customer's order number, from 0.
    pub order_no: u32,
    /// The book.
    pub book_id: String,
    /// Copies.
    pub quantity: u32,
}

/// The producer's domain event.
pub struct Ordered(pub CustomerOrderedV1);

impl From<&Ordered> for CustomerOrderedV1 {
    fn from(event: &Ordered) -> Self {
        event.0.clone()
    }
}

/// The producer's domain events.
#[derive(DomainEvent)]
pub enum ShopEvent {
    /// Leaves the context as `CustomerOrderedV1`.
    #[domain_event(contract = CustomerOrderedV1)]
    Ordered(Ordered),
}

/// Order `n` of customer `customer` (deterministic book and quantity).
pub fn order_event(customer: usize, n: u32) -> CustomerOrderedV1 {
    CustomerOrderedV1 {
        customer_id: format!("customer-{customer:03}"),
        order_no: n,
        book_id: BOOKS[(customer + n as usize) % BOOKS.len()].to_owned(),
        quantity: 1 + n % 3,
    }
}

/// The envelope of [`order_event`].
pub fn order(customer: usize, n: u32) -> Envelope {
    Envelope::from_event(&order_event(customer, n)).unwrap()
}

/// Copies reserved per book once every order of `customers` × `per_customer` is applied.
pub fn expected_reserved(customers: usize, per_customer: u32) -> BTreeMap<String, i64> {
    let mut reserved: BTreeMap<String, i64> = BOOKS.iter().map(|b| ((*b).to_owned(), 0)).collect();
    for customer in 0..customers {
        for n in 0..per_customer {
            let event = order_event(customer, n);
            *reserved.entry(event.book_id).or_default() += i64::from(event.quantity);
        }
    }
    reserved
}

/// `sql` with `?` placeholders, numbered `$1`, `$2`, … on PostgreSQL.
fn statement(backend: DbBackend, sql: &str, values: Vec<Value>) -> Statement {
    if backend != DbBackend::Postgres {
        return Statement::from_sql_and_values(backend, sql, values);
    }
    let mut numbered = String::with_capacity(sql.len() + 8);
    let mut n = 0;
    for c in sql.chars() {
        if c == '?' {
            n += 1;
            numbered.push_str(&format!("${n}"));
        } else {
            numbered.push(c);
        }
    }
    Statement::from_sql_and_values(backend, numbered, values)
}

/// Reserves the stock of the order and records that it was applied (same transaction as
/// the inbox row: the `applied` table is the handler's exact history).
#[inbox_handler(consumer = "tests.broker-orders")]
async fn record_order(
    uow: &UnitOfWork,
    event: CustomerOrderedV1,
    envelope: &Envelope,
) -> Result<(), DbErr> {
    let backend = uow.get_database_backend();
    let updated = uow
        .execute_raw(statement(
            backend,
            "UPDATE stock SET reserved = reserved + ? WHERE book_id = ?",
            vec![
                i64::from(event.quantity).into(),
                event.book_id.clone().into(),
            ],
        ))
        .await?;
    if updated.rows_affected() != 1 {
        return Err(DbErr::Custom(format!(
            "no stock row for `{}`",
            event.book_id
        )));
    }
    uow.execute_raw(statement(
        backend,
        "INSERT INTO applied (customer_id, order_no, message_id) VALUES (?, ?, ?)",
        vec![
            event.customer_id.into(),
            i64::from(event.order_no).into(),
            envelope.message_id.to_string().into(),
        ],
    ))
    .await?;
    Ok(())
}

/// Installs the outbox/inbox tables and the consumer's `stock` and `applied` tables.
pub async fn consumer_tables(db: &DatabaseConnection, outbox: &Outbox) {
    schema::install(db, outbox).await.unwrap();
    let applied = match db.get_database_backend() {
        DbBackend::Sqlite => {
            "CREATE TABLE applied (id INTEGER PRIMARY KEY AUTOINCREMENT, \
             customer_id VARCHAR(64) NOT NULL, order_no INTEGER NOT NULL, \
             message_id VARCHAR(36) NOT NULL)"
        }
        DbBackend::Postgres => {
            "CREATE TABLE applied (id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, \
             customer_id VARCHAR(64) NOT NULL, order_no INTEGER NOT NULL, \
             message_id VARCHAR(36) NOT NULL)"
        }
        _ => {
            "CREATE TABLE applied (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, \
             customer_id VARCHAR(64) NOT NULL, order_no INTEGER NOT NULL, \
             message_id VARCHAR(36) NOT NULL)"
        }
    };
    db.execute_unprepared(applied).await.unwrap();
    db.execute_unprepared(
        "CREATE TABLE stock (book_id VARCHAR(64) NOT NULL PRIMARY KEY, reserved BIGINT NOT NULL)",
    )
    .await
    .unwrap();
    for book in BOOKS {
        db.execute_unprepared(&format!(
            "INSERT INTO stock (book_id, reserved) VALUES ('{book}', 0)"
        ))
        .await
        .unwrap();
    }
}

/// One applied message, in the order the handler committed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The customer.
    pub customer_id: String,
    /// The order number.
    pub order_no: u32,
    /// The message id.
    pub message_id: String,
}

/// Every applied message, in application order.
pub async fn applied(db: &DatabaseConnection) -> Vec<Applied> {
    db.query_all_raw(Statement::from_string(
        db.get_database_backend(),
        "SELECT customer_id, order_no, message_id FROM applied ORDER BY id",
    ))
    .await
    .unwrap()
    .iter()
    .map(|row| Applied {
        customer_id: row.try_get("", "customer_id").unwrap(),
        order_no: u32::try_from(row.try_get::<i32>("", "order_no").unwrap()).unwrap(),
        message_id: row.try_get("", "message_id").unwrap(),
    })
    .collect()
}

/// `SELECT COUNT(*) …` of `sql`.
pub async fn count(db: &DatabaseConnection, sql: &str) -> i64 {
    let row = db
        .query_one_raw(Statement::from_string(db.get_database_backend(), sql))
        .await
        .unwrap()
        .unwrap();
    row.try_get_by_index::<i64>(0).unwrap()
}

/// Copies reserved per book.
pub async fn reserved(db: &DatabaseConnection) -> BTreeMap<String, i64> {
    db.query_all_raw(Statement::from_string(
        db.get_database_backend(),
        "SELECT book_id, reserved FROM stock",
    ))
    .await
    .unwrap()
    .iter()
    .map(|row| {
        (
            row.try_get("", "book_id").unwrap(),
            row.try_get("", "reserved").unwrap(),
        )
    })
    .collect()
}

/// Inbox rows and consumer dead letters.
pub async fn inbox_and_dead_letters(db: &DatabaseConnection, outbox: &Outbox) -> (i64, i64) {
    let inbox = count(
        db,
        &format!("SELECT COUNT(*) FROM {}", outbox.inbox_table()),
    )
    .await;
    let dead = count(
        db,
        &format!(
            "SELECT COUNT(*) FROM {}",
            outbox_seaorm::inbox::dead_letter::table(outbox)
        ),
    )
    .await;
    (inbox, dead)
}

/// Polls `condition` every 50 ms until it holds or `timeout` passes; whether it held.
pub async fn eventually<F>(timeout: Duration, mut condition: F) -> bool
where
    F: AsyncFnMut() -> bool,
{
    let deadline = Instant::now() + timeout;
    loop {
        if condition().await {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Asserts per-aggregate order: each customer's orders were applied as 0, 1, 2, … with no
/// gap and no repeat.
pub fn assert_in_order(applied: &[Applied], per_customer: u32) {
    let mut by_customer: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
    for row in applied {
        by_customer
            .entry(&row.customer_id)
            .or_default()
            .push(row.order_no);
    }
    let expected: Vec<u32> = (0..per_customer).collect();
    for (customer, numbers) in by_customer {
        assert_eq!(
            numbers, expected,
            "orders of {customer} applied out of order or twice"
        );
    }
}

/// A consumer database pool reached through `proxy` (the same database as `db`), with short
/// timeouts so that a cut shows up as errors within a second.
pub async fn through_proxy(db: &TestDb, proxy: &Proxy) -> DatabaseConnection {
    let url = db
        .url()
        .replace("127.0.0.1:3306", &proxy.addr().to_string());
    assert_ne!(url, db.url(), "the test database is not on 127.0.0.1:3306");
    let mut options = ConnectOptions::new(url);
    options
        .max_connections(2)
        .min_connections(0)
        .acquire_timeout(Duration::from_millis(800))
        .connect_timeout(Duration::from_millis(800))
        .sqlx_logging(false);
    Database::connect(options).await.unwrap()
}

/// The inbox consumer of the tests: in-process retries kept short.
pub fn inbox_consumer(db: &DatabaseConnection, outbox: &Outbox, max_attempts: u32) -> Consumer {
    Consumer::builder(db.clone(), outbox.clone(), CONSUMER)
        .max_attempts(max_attempts)
        .backoff(
            Backoff::new()
                .with_min_delay(Duration::from_millis(20))
                .with_max_delay(Duration::from_millis(200)),
        )
        .build()
        .unwrap()
}

/// Places `per_customer` orders for each of `customers` customers on `db`, one unit of work
/// each, round-robin over the customers (so aggregates interleave in `seq`); counts them in
/// `placed`.
pub async fn place_orders(
    db: DatabaseConnection,
    outbox: Outbox,
    customers: usize,
    per_customer: u32,
    placed: Arc<AtomicUsize>,
) {
    for n in 0..per_customer {
        for customer in 0..customers {
            outbox
                .transaction(&db, &DerivedMapping, async |uow| {
                    uow.raise(ShopEvent::Ordered(Ordered(order_event(customer, n))));
                    Ok::<_, DbErr>(())
                })
                .await
                .unwrap();
            placed.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// A relay tuned for the scenario: short leases (an aborted relay's partitions move within
/// 3 s), a publish timeout above the publishers' acknowledgement timeouts (1 s), fast
/// retries and no dead letters.
pub fn relay<P: Publisher + 'static>(
    db: &DatabaseConnection,
    outbox: &Outbox,
    publisher: P,
    instance: &str,
) -> Relay<P> {
    Relay::builder(db.clone(), outbox.clone(), publisher)
        .instance_id(instance)
        .poll_interval(Duration::from_millis(50))
        .heartbeat_interval(Duration::from_millis(300))
        .lease_ttl(Duration::from_secs(3))
        .publish_timeout(Duration::from_millis(1_500))
        .max_attempts(1_000)
        .backoff(
            Backoff::new()
                .with_min_delay(Duration::from_millis(100))
                .with_max_delay(Duration::from_millis(800)),
        )
        .build()
        .unwrap()
}

/// The end-to-end scenario (issue 6, item 4): `customers` × `per_customer` orders placed on
/// PostgreSQL → relay → broker (through `broker`, a proxy both the publishers and the runner
/// connect through) → runner → inbox on MariaDB. Midway the proxy is cut for 2 s, and the
/// relay task is aborted meanwhile and replaced by a new relay with a new publisher. At the
/// end every order is applied exactly once, in order per customer, and the stock is exact.
///
/// `make_publisher` connects a publisher through the proxy; `start_runner` spawns the
/// broker's consumer runner for the inbox consumer (returning its report, printed).
pub async fn end_to_end<P, MakePublisher, StartRunner>(
    test: &str,
    broker: &Proxy,
    customers: usize,
    per_customer: u32,
    make_publisher: MakePublisher,
    start_runner: StartRunner,
) where
    P: Publisher + 'static,
    MakePublisher: AsyncFn() -> P,
    StartRunner: FnOnce(Consumer, CancellationToken) -> JoinHandle<String>,
{
    let Some(producer) = TestDb::postgres(test).await else {
        return;
    };
    let Some(consumer_db) = TestDb::mariadb(test).await else {
        return;
    };
    let started = Instant::now();
    let total = customers * usize::try_from(per_customer).unwrap();
    let outbox = Outbox::default();
    schema::install(producer.conn(), &outbox).await.unwrap();
    consumer_tables(consumer_db.conn(), &outbox).await;

    let shutdown = CancellationToken::new();
    let runner = start_runner(
        inbox_consumer(consumer_db.conn(), &outbox, 5),
        shutdown.clone(),
    );
    let relays = CancellationToken::new();
    let first = tokio::spawn(
        relay(producer.conn(), &outbox, make_publisher().await, "relay-1").run(relays.clone()),
    );
    let placed = Arc::new(AtomicUsize::new(0));
    let producing = tokio::spawn(place_orders(
        producer.conn().clone(),
        outbox.clone(),
        customers,
        per_customer,
        placed.clone(),
    ));

    // Midway: the broker becomes unreachable, the relay task dies, a new one starts.
    assert!(
        eventually(Duration::from_secs(30), async || placed
            .load(Ordering::SeqCst)
            >= total / 2)
        .await,
        "the producer is too slow"
    );
    let applied_before_cut = applied(consumer_db.conn()).await.len();
    eprintln!(
        "  {:?}: cut at {} placed, {applied_before_cut} applied",
        started.elapsed(),
        placed.load(Ordering::SeqCst)
    );
    broker.cut();
    tokio::time::sleep(Duration::from_secs(1)).await;
    first.abort();
    assert!(first.await.unwrap_err().is_cancelled());
    tokio::time::sleep(Duration::from_secs(1)).await;
    broker.restore();
    eprintln!("  {:?}: restored; relay-2 starts", started.elapsed());
    let second = tokio::spawn(
        relay(producer.conn(), &outbox, make_publisher().await, "relay-2").run(relays.clone()),
    );
    producing.await.unwrap();
    eprintln!("  {:?}: {total} orders placed", started.elapsed());

    let all_applied = eventually(Duration::from_secs(40), async || {
        applied(consumer_db.conn()).await.len() >= total
    })
    .await;
    // Let late duplicates show up, if any.
    tokio::time::sleep(Duration::from_millis(500)).await;
    eprintln!(
        "  {:?}: consumer caught up: {all_applied}",
        started.elapsed()
    );
    shutdown.cancel();
    relays.cancel();
    let runner_report = runner.await.unwrap();
    let relay_report = second.await.unwrap().unwrap();
    eprintln!("  runner: {runner_report}\n  relay-2: {relay_report:?}");

    let rows = applied(consumer_db.conn()).await;
    assert!(all_applied, "only {} of {total} orders applied", rows.len());
    assert_eq!(rows.len(), total, "every order applied exactly once");
    let distinct: std::collections::BTreeSet<&str> =
        rows.iter().map(|r| r.message_id.as_str()).collect();
    assert_eq!(distinct.len(), total, "no message applied twice");
    assert_in_order(&rows, per_customer);
    assert_eq!(
        reserved(consumer_db.conn()).await,
        expected_reserved(customers, per_customer),
        "stock counters exact"
    );
    assert_eq!(
        inbox_and_dead_letters(consumer_db.conn(), &outbox).await,
        (i64::try_from(total).unwrap(), 0),
        "inbox rows = orders, no dead letter"
    );
    let unpublished = count(
        producer.conn(),
        "SELECT COUNT(*)::bigint FROM outbox WHERE status <> 'published'",
    )
    .await;
    assert_eq!(unpublished, 0, "every outbox row published, none dead");
    eprintln!("{test}: {:?}", started.elapsed());
    consumer_db.close().await;
    producer.close().await;
}

/// `envelope` with another payload (e.g. one over a broker's size limit).
pub fn with_payload(envelope: &Envelope, payload: serde_json::Value) -> Envelope {
    Envelope::from_parts(outbox_core::envelope::EnvelopeParts {
        message_id: envelope.message_id,
        event_type: envelope.event_type.clone(),
        occurred_at: envelope.occurred_at,
        correlation_id: envelope.correlation_id,
        causation_id: envelope.causation_id,
        traceparent: envelope.traceparent.clone(),
        tracestate: envelope.tracestate.clone(),
        aggregate_type: envelope.aggregate_type.clone(),
        aggregate_id: envelope.aggregate_id.clone(),
        headers: envelope.headers.clone(),
        payload: payload.into(),
    })
    .unwrap()
}

/// A loopback port nothing listens on.
pub async fn closed_port() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap().port()
}

/// A consumer for [`a_requeued_dead_letter_is_redelivered`]: one attempt, then dead; looks
/// for requeued dead letters every 100 ms.
pub fn requeue_consumer(db: &DatabaseConnection, outbox: &Outbox) -> Consumer {
    Consumer::builder(db.clone(), outbox.clone(), CONSUMER)
        .max_attempts(1)
        .requeue_poll(Duration::from_millis(100))
        .build()
        .unwrap()
}

/// A broker runner keeps redelivering requeued dead letters while it runs: order 0 of
/// customer 0 fails (its book has no stock row) and is dead-lettered; the stock row is put
/// back and an operator requeues the dead letter; the running runner applies it and the dead
/// letter is resolved. `publisher` sends the message to the broker; `start` spawns the
/// runner with the consumer it is given. Returns what the runner returned.
pub async fn a_requeued_dead_letter_is_redelivered<T>(
    db: &DatabaseConnection,
    outbox: &Outbox,
    publisher: &impl Publisher,
    start: impl FnOnce(Consumer, CancellationToken) -> JoinHandle<T>,
) -> T {
    consumer_tables(db, outbox).await;
    let message = order(0, 0);
    let book = order_event(0, 0).book_id;
    db.execute_unprepared(&format!("DELETE FROM stock WHERE book_id = '{book}'"))
        .await
        .unwrap();
    let shutdown = CancellationToken::new();
    let running = start(requeue_consumer(db, outbox), shutdown.clone());
    let outcomes = publisher
        .publish(std::slice::from_ref(&message))
        .await
        .unwrap();
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    let table = outbox_seaorm::inbox::dead_letter::table(outbox);
    let with_status = async |status: &str| {
        count(
            db,
            &format!("SELECT COUNT(*) FROM {table} WHERE status = '{status}'"),
        )
        .await
    };
    assert!(
        eventually(Duration::from_secs(15), async || with_status("dead").await
            == 1)
        .await,
        "the failing message is dead-lettered"
    );
    let id = count(db, &format!("SELECT id FROM {table}")).await;
    // Nothing redelivers a dead letter that nobody requeued.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(applied(db).await.is_empty());

    db.execute_unprepared(&format!(
        "INSERT INTO stock (book_id, reserved) VALUES ('{book}', 0)"
    ))
    .await
    .unwrap();
    let ops = outbox_seaorm::ops::Operations::new(db.clone(), outbox.clone());
    assert!(ops.requeue_consumer_dead_letter(id, "test").await.unwrap());
    assert!(
        eventually(Duration::from_secs(15), async || applied(db).await.len()
            == 1)
        .await,
        "the runner redelivers the requeued dead letter"
    );
    assert_eq!(
        applied(db).await[0].message_id,
        message.message_id.to_string()
    );
    assert!(
        eventually(Duration::from_secs(5), async || with_status("resolved")
            .await
            == 1)
        .await,
        "the dead letter is resolved"
    );
    shutdown.cancel();
    running.await.unwrap()
}

/// The consumer of [`a_dead_letter_holds_its_aggregate_across_a_crash`]: 2 attempts, the
/// second 3 s after the first (parked meanwhile), requeued dead letters looked for every
/// 100 ms, `Block` (the default).
pub fn holding_consumer(db: &DatabaseConnection, outbox: &Outbox) -> Consumer {
    Consumer::builder(db.clone(), outbox.clone(), CONSUMER)
        .max_attempts(2)
        .backoff(
            Backoff::new()
                .with_min_delay(Duration::from_secs(3))
                .with_jitter(false),
        )
        .requeue_poll(Duration::from_millis(100))
        .build()
        .unwrap()
}

/// Orders of one customer as applied, in application order.
async fn applied_of(db: &DatabaseConnection, customer: usize) -> Vec<u32> {
    let customer = format!("customer-{customer:03}");
    applied(db)
        .await
        .into_iter()
        .filter(|row| row.customer_id == customer)
        .map(|row| row.order_no)
        .collect()
}

/// Issue 15 item 10 through a broker runner: a consumer dead letter holds the later
/// messages of its aggregate (parked in the consumer's database, acknowledged at the
/// broker), a message waiting for its next attempt does not stall the other aggregates, a
/// consumer crash loses nothing parked, and once the dead letter is requeued and applied
/// the parked messages follow in order.
///
/// Customer 0's order 1 needs `emma`, whose stock row is missing: it fails, is parked for
/// its second attempt 3 s later, and is dead-lettered. Customer 2's orders (none needs
/// `emma`) are applied meanwhile. The runner is aborted (a crash), a second one starts, an
/// operator puts the stock row back and requeues.
pub async fn a_dead_letter_holds_its_aggregate_across_a_crash<T: Send + 'static>(
    db: &DatabaseConnection,
    outbox: &Outbox,
    publisher: &impl Publisher,
    start: impl Fn(Consumer, CancellationToken) -> JoinHandle<T>,
) {
    consumer_tables(db, outbox).await;
    db.execute_unprepared("DELETE FROM stock WHERE book_id = 'emma'")
        .await
        .unwrap();
    let parked_table = outbox_seaorm::inbox::parked::table(outbox);
    let dead_table = outbox_seaorm::inbox::dead_letter::table(outbox);
    let parked = async || count(db, &format!("SELECT COUNT(*) FROM {parked_table}")).await;
    let dead = async |status: &str| {
        count(
            db,
            &format!("SELECT COUNT(*) FROM {dead_table} WHERE status = '{status}'"),
        )
        .await
    };
    let publish = async |messages: &[Envelope]| {
        let outcomes = publisher.publish(messages).await.unwrap();
        assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    };

    let shutdown = CancellationToken::new();
    let first = start(holding_consumer(db, outbox), shutdown.clone());
    let batch: Vec<Envelope> = (0..4).flat_map(|n| [order(0, n), order(2, n)]).collect();
    publish(&batch).await;
    assert!(
        eventually(Duration::from_secs(20), async || applied_of(db, 2)
            .await
            .len()
            == 4)
        .await,
        "customer 2 is applied"
    );
    // Customer 2 went on while customer 0's order 1 waits for its second attempt (3 s):
    // it has not been dead-lettered yet, and orders 2 and 3 wait behind it.
    assert_eq!(dead("dead").await, 0, "order 1 is still retrying");
    assert_eq!(parked().await, 3, "order 1 (retrying), 2 and 3 (behind it)");
    assert_eq!(applied_of(db, 0).await, [0]);
    assert!(
        eventually(Duration::from_secs(20), async || dead("dead").await == 1).await,
        "order 1 is dead-lettered after its second attempt"
    );
    assert_eq!(parked().await, 2, "orders 2 and 3 stay parked behind it");

    // A crash: the runner is gone without shutting down; a new one starts.
    first.abort();
    let _ = first.await;
    let second = start(holding_consumer(db, outbox), shutdown.clone());
    publish(&[order(0, 4), order(3, 0)]).await;
    assert!(
        eventually(Duration::from_secs(20), async || applied_of(db, 3).await
            == [0])
        .await,
        "another customer is applied after the crash"
    );
    assert!(
        eventually(Duration::from_secs(20), async || parked().await == 3).await,
        "customer 0's order 4 is parked behind the dead letter"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        applied_of(db, 0).await,
        [0],
        "nothing of customer 0 passed the dead letter"
    );

    // The fix goes in; an operator requeues the dead letter.
    db.execute_unprepared("INSERT INTO stock (book_id, reserved) VALUES ('emma', 0)")
        .await
        .unwrap();
    let id = count(db, &format!("SELECT id FROM {dead_table}")).await;
    let ops = outbox_seaorm::ops::Operations::new(db.clone(), outbox.clone());
    assert!(ops.requeue_consumer_dead_letter(id, "test").await.unwrap());
    assert!(
        eventually(Duration::from_secs(20), async || applied_of(db, 0)
            .await
            .len()
            == 5)
        .await,
        "the requeued message and the parked ones are applied"
    );
    assert_eq!(applied_of(db, 0).await, [0, 1, 2, 3, 4], "in order");
    assert_eq!(applied_of(db, 2).await, [0, 1, 2, 3]);
    assert_eq!(dead("resolved").await, 1);
    assert!(eventually(Duration::from_secs(5), async || parked().await == 0).await);
    shutdown.cancel();
    let _ = second.await;
}

/// The partitioned consumer instance `id` of the broker tests on `db`: the tests' inbox
/// consumer spread over `partitions` partitions, short leases (a killed instance's
/// partitions move within 2 s).
pub fn partitioned_consumer(
    db: &DatabaseConnection,
    outbox: &Outbox,
    partitions: u32,
    id: &str,
) -> (
    Consumer,
    outbox_seaorm::inbox::partitioned::PartitionedConsumer,
) {
    let inbox = inbox_consumer(db, outbox, 3);
    let partitioned =
        outbox_seaorm::inbox::partitioned::PartitionedConsumer::builder(inbox.clone(), partitions)
            .instance_id(id)
            .lease_ttl(Duration::from_secs(2))
            .heartbeat_interval(Duration::from_millis(250))
            .build()
            .unwrap();
    (inbox, partitioned)
}

/// The partitioned scenario of every broker: three processes of one consumer share the
/// partitions (`start(id)` runs instance `id` until `shutdown`); while 40 customers place
/// 15 orders each (published straight through `publisher`, batch by batch), one process is
/// killed (its task aborted: its partition runners die with it, deliveries unacknowledged,
/// leases left to expire) and replaced three times, and a fourth joins mid-stream. Every
/// order is applied once, each customer's in order.
pub async fn partitioned_kills_and_a_join<P, S>(
    db: &DatabaseConnection,
    outbox: &Outbox,
    publisher: P,
    shutdown: &CancellationToken,
    mut start: S,
) where
    P: Publisher + 'static,
    S: FnMut(&str) -> JoinHandle<()>,
{
    const CUSTOMERS: usize = 40;
    const ORDERS: u32 = 15;
    let a = start("a");
    let b = start("b");
    let mut victim = start("c-0");
    let producing = tokio::spawn(async move {
        for n in 0..ORDERS {
            let batch: Vec<Envelope> = (0..CUSTOMERS).map(|customer| order(customer, n)).collect();
            let results = publisher.publish(&batch).await.unwrap();
            assert!(results.iter().all(Result::is_ok), "{results:?}");
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    });
    for round in 1..=3 {
        tokio::time::sleep(Duration::from_millis(900)).await;
        victim.abort();
        assert!(victim.await.unwrap_err().is_cancelled());
        tokio::time::sleep(Duration::from_millis(300)).await;
        victim = start(&format!("c-{round}"));
    }
    let d = start("d");
    producing.await.unwrap();
    let total = CUSTOMERS * ORDERS as usize;
    if !eventually(Duration::from_secs(60), async || {
        applied(db).await.len() >= total
    })
    .await
    {
        // Which customers stalled, and where: a partition whose queue stopped, or single
        // aggregates held back.
        let rows = applied(db).await;
        let mut by_customer: BTreeMap<String, u32> = BTreeMap::new();
        for row in &rows {
            *by_customer.entry(row.customer_id.clone()).or_default() += 1;
        }
        let behind: Vec<String> = (0..CUSTOMERS)
            .map(|c| format!("customer-{c:03}"))
            .filter_map(|c| {
                let got = by_customer.get(&c).copied().unwrap_or(0);
                (got < ORDERS).then(|| format!("{c}: {got}"))
            })
            .collect();
        panic!(
            "{} of {total} applied; customers behind: {behind:?}; (inbox, dead letters) {:?}",
            rows.len(),
            inbox_and_dead_letters(db, outbox).await
        );
    }
    // Quiet for a while: nothing more is applied (no duplicate effect arrives late).
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rows = applied(db).await;
    assert_eq!(rows.len(), total);
    assert_in_order(&rows, ORDERS);
    assert_eq!(
        inbox_and_dead_letters(db, outbox).await,
        (i64::try_from(total).unwrap(), 0)
    );
    shutdown.cancel();
    for run in [a, b, victim, d] {
        run.await.unwrap();
    }
}
