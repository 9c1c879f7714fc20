//! The inbox on every backend (book: What it guarantees, 6): each `(message_id, consumer)` is applied once,
//! also under concurrent duplicate delivery; a failed handler leaves no inbox row and is
//! retried; malformed, unknown and wrong-version messages get a typed outcome and a dead
//! letter instead of an endless retry loop; the outbox rows a handler raises commit with
//! its inbox row.
//!
//! Handler registrations are global (`inventory`): every scenario uses a consumer name of
//! its own (`tests.…`), so a `Consumer` only sees that scenario's handlers. Business state
//! lives in the scenario's database; the only global state is a per-message "knob" (keyed
//! by message id, so unique per test) that counts handler calls and injects failures.

// Scenarios are plain async functions called by generated #[tokio::test]s, which clippy's
// `allow-unwrap-in-tests` does not see as tests.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, Once};
use std::time::{Duration, Instant};

use chrono::TimeDelta;
use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};
use outbox_core::clock::ManualClock;
use outbox_core::cloudevents;
use outbox_core::envelope::EnvelopeParts;
use outbox_core::in_process::{AfterPublish, InProcessBroker};
use outbox_core::policy::Backoff;
use outbox_core::{DomainEvent, Envelope, IntegrationEvent, Raise};
use outbox_seaorm::inbox::dead_letter::{DeadLetterStatus, StoredMessage};
use outbox_seaorm::inbox::{
    self, Consumer, ConsumerConfigError, DeadLetterReason, Delivered, InboxError, InboxOutcome,
    ParkReason, UnknownEvents, metric,
};
use outbox_seaorm::ops::Operations;
use outbox_seaorm::record::OutboxRecord;
use outbox_seaorm::relay::Relay;
use outbox_seaorm::{Outbox, UnitOfWork, inbox_handler, schema};
use outbox_tests::backend_tests;
use outbox_tests::bookstore::{
    Order, OrderNotedV2, OrderPlacedV1, OrderedBookV1, OrderingContracts, PlaceOrder,
    create_business_tables,
};
use outbox_tests::db::{Backend, TestDb, run_scenario};
use schemars::JsonSchema;
use sea_orm::{ConnectionTrait, DbBackend, DbErr, QueryResult, Statement, Value};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

backend_tests!(
    scenario_4_same_message_twice_is_applied_once,
    failing_handler_leaves_no_inbox_row_and_is_retried,
    malformed_wrong_version_and_unknown_messages_are_settled_at_once,
    raised_events_commit_if_and_only_if_the_inbox_row_does,
    upcast_routes_old_and_new_versions_to_one_handler,
    purge_inbox_deletes_only_rows_past_retention,
    a_retrying_message_holds_its_aggregate_and_skip_applies_past_a_dead_letter,
    oversized_messages_are_dead_lettered_bounded,
);

// ---------------------------------------------------------------------------------------
// Per-message knobs and a counting metrics recorder
// ---------------------------------------------------------------------------------------

/// Handler calls and injected failures, keyed by message id (unique per test).
mod knob {
    use std::collections::HashMap;
    use std::sync::{LazyLock, Mutex};

    use uuid::Uuid;

    #[derive(Default)]
    struct Knob {
        fail_left: u32,
        calls: u32,
    }

    static KNOBS: LazyLock<Mutex<HashMap<Uuid, Knob>>> = LazyLock::new(Default::default);

    fn with<T>(id: Uuid, f: impl FnOnce(&mut Knob) -> T) -> T {
        let mut knobs = KNOBS.lock().unwrap_or_else(|p| p.into_inner());
        f(knobs.entry(id).or_default())
    }

    /// The handler of message `id` fails its next `times` calls.
    pub fn fail_next(id: Uuid, times: u32) {
        with(id, |k| k.fail_left = times);
    }

    /// Handler calls for message `id` so far.
    pub fn calls(id: Uuid) -> u32 {
        with(id, |k| k.calls)
    }

    /// Records a handler call for message `id`; `Some(call number)` when it must fail.
    pub fn call(id: Uuid) -> Option<u32> {
        with(id, |k| {
            k.calls += 1;
            (k.fail_left > 0).then(|| {
                k.fail_left -= 1;
                k.calls
            })
        })
    }
}

/// Counters by `name{label=value,…}` (gauges and histograms are dropped).
static COUNTERS: LazyLock<Mutex<BTreeMap<String, Arc<AtomicU64>>>> =
    LazyLock::new(Default::default);

struct CountingRecorder;

fn render(key: &Key) -> String {
    let labels: Vec<String> = key
        .labels()
        .map(|l| format!("{}={}", l.key(), l.value()))
        .collect();
    format!("{}{{{}}}", key.name(), labels.join(","))
}

impl Recorder for CountingRecorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(
            COUNTERS
                .lock()
                .unwrap()
                .entry(render(key))
                .or_default()
                .clone(),
        )
    }
    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }
    fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::noop()
    }
}

/// Installs [`CountingRecorder`] as this test binary's global recorder (once).
fn count_metrics() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| metrics::set_global_recorder(CountingRecorder).unwrap());
}

/// A consumer counter (`consumer` label only).
fn consumer_counter(name: &str, consumer: &str) -> u64 {
    COUNTERS
        .lock()
        .unwrap()
        .get(&format!("{name}{{consumer={consumer}}}"))
        .map_or(0, |c| c.load(Ordering::Relaxed))
}

// ---------------------------------------------------------------------------------------
// Contracts, domain events and the business tables of the consumers
// ---------------------------------------------------------------------------------------

/// Contract: stock was reserved for an order (raised by a consumer handler).
#[derive(Debug, Clone, PartialEq, Eq, IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "inboxtest.inventory.stock-reserved.v1", key = order_id)]
struct StockReservedV1 {
    /// The order.
    order_id: String,
    /// Copies reserved, all books together.
    copies: u32,
}

/// Domain event of the Inventory context.
struct StockReserved {
    order_id: String,
    copies: u32,
}

impl From<&StockReserved> for StockReservedV1 {
    fn from(event: &StockReserved) -> Self {
        Self {
            order_id: event.order_id.clone(),
            copies: event.copies,
        }
    }
}

/// The Inventory context's domain events.
#[derive(DomainEvent)]
enum InventoryEvent {
    /// Leaves the context as `StockReservedV1`.
    #[domain_event(contract = StockReservedV1)]
    StockReserved(StockReserved),
}

/// Contract, first version: a book was added to the catalog.
#[derive(Debug, Clone, PartialEq, Eq, IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "inboxtest.catalog.book-added.v1", key = book_id)]
struct BookAddedV1 {
    /// The book.
    book_id: String,
    /// Its title.
    title: String,
}

/// Contract, second version: with the ISBN.
#[derive(Debug, Clone, PartialEq, Eq, IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "inboxtest.catalog.book-added.v2", key = book_id)]
struct BookAddedV2 {
    /// The book.
    book_id: String,
    /// Its title.
    title: String,
    /// Its ISBN.
    isbn: String,
}

/// The upcaster: a v1 message has no ISBN.
impl From<BookAddedV1> for BookAddedV2 {
    fn from(v1: BookAddedV1) -> Self {
        Self {
            book_id: v1.book_id,
            title: v1.title,
            isbn: "unknown".to_owned(),
        }
    }
}

/// `sql` with `?` placeholders, numbered (`$1`, …) on PostgreSQL.
fn statement(backend: DbBackend, sql: &str, values: Vec<Value>) -> Statement {
    let sql = if backend == DbBackend::Postgres {
        let mut numbered = String::new();
        let mut n = 0;
        for c in sql.chars() {
            if c == '?' {
                n += 1;
                numbered.push_str(&format!("${n}"));
            } else {
                numbered.push(c);
            }
        }
        numbered
    } else {
        sql.to_owned()
    };
    Statement::from_sql_and_values(backend, sql, values)
}

/// Inventory's business write: reserves the copies of every ordered book.
async fn reserve<E: Send + Sync + 'static>(
    uow: &UnitOfWork<E>,
    event: &OrderPlacedV1,
) -> Result<(), DbErr> {
    let backend = uow.get_database_backend();
    for book in &event.books {
        let copies = i32::try_from(book.quantity).map_err(|e| DbErr::Custom(e.to_string()))?;
        let updated = uow
            .execute_raw(statement(
                backend,
                "UPDATE stock SET reserved = reserved + ? WHERE book_id = ?",
                vec![copies.into(), book.book_id.clone().into()],
            ))
            .await?;
        if updated.rows_affected() != 1 {
            return Err(DbErr::Custom(format!(
                "no stock row for `{}`",
                book.book_id
            )));
        }
    }
    Ok(())
}

/// Counts the call on the message's knob; fails when the knob says so.
fn injected_failure(envelope: &Envelope) -> Result<(), DbErr> {
    match knob::call(envelope.message_id) {
        Some(call) => Err(DbErr::Custom(format!(
            "induced failure on call {call} of {}",
            envelope.message_id
        ))),
        None => Ok(()),
    }
}

// ---------------------------------------------------------------------------------------
// Handlers: one consumer name per scenario
// ---------------------------------------------------------------------------------------

/// Scenario 4 of the demo (book: The demo): Inventory reserves stock when an order is placed.
#[inbox_handler(consumer = "tests.scenario-four")]
async fn reserve_stock_scenario_four(
    uow: &UnitOfWork,
    event: OrderPlacedV1,
    envelope: &Envelope,
) -> Result<(), DbErr> {
    knob::call(envelope.message_id);
    reserve(uow, &event).await
}

/// Writes the reservation, then fails as often as the message's knob says (so a failure
/// has a business write to roll back).
#[inbox_handler(consumer = "tests.flaky")]
async fn reserve_stock_flaky(
    uow: &UnitOfWork,
    event: OrderPlacedV1,
    envelope: &Envelope,
) -> Result<(), DbErr> {
    reserve(uow, &event).await?;
    injected_failure(envelope)
}

/// Counts its calls: must never run for a message that cannot be decoded.
#[inbox_handler(consumer = "tests.malformed")]
async fn reserve_stock_malformed(
    uow: &UnitOfWork,
    event: OrderPlacedV1,
    envelope: &Envelope,
) -> Result<(), DbErr> {
    knob::call(envelope.message_id);
    reserve(uow, &event).await
}

/// Reserves stock and raises `StockReserved`, then fails when the knob says so.
#[inbox_handler(consumer = "tests.raises-events")]
async fn reserve_stock_and_announce(
    uow: &UnitOfWork<InventoryEvent>,
    event: OrderPlacedV1,
    envelope: &Envelope,
) -> Result<(), DbErr> {
    reserve(uow, &event).await?;
    uow.raise(InventoryEvent::StockReserved(StockReserved {
        order_id: event.order_id.clone(),
        copies: event.books.iter().map(|b| b.quantity).sum(),
    }));
    injected_failure(envelope)
}

/// The v2 handler of the catalog, also fed v1 messages through the upcaster.
#[inbox_handler(consumer = "tests.upcast", upcast(from = BookAddedV1))]
async fn add_book_v2(uow: &UnitOfWork, event: BookAddedV2) -> Result<(), DbErr> {
    uow.execute_raw(statement(
        uow.get_database_backend(),
        "INSERT INTO catalog (book_id, title, isbn) VALUES (?, ?, ?)",
        vec![event.book_id.into(), event.title.into(), event.isbn.into()],
    ))
    .await?;
    Ok(())
}

/// For the retention scenario.
#[inbox_handler(consumer = "tests.retention")]
async fn reserve_stock_retention(uow: &UnitOfWork, event: OrderPlacedV1) -> Result<(), DbErr> {
    reserve(uow, &event).await
}

/// Holds its transaction a while, so the concurrent deliveries pile up on the inbox row.
async fn reserve_slowly(
    uow: &UnitOfWork,
    event: &OrderPlacedV1,
    envelope: &Envelope,
) -> Result<(), DbErr> {
    knob::call(envelope.message_id);
    reserve(uow, event).await?;
    tokio::time::sleep(Duration::from_millis(200)).await;
    Ok(())
}

/// Concurrent deliveries on PostgreSQL.
#[inbox_handler(consumer = "tests.concurrent-postgres")]
async fn reserve_stock_concurrent_postgres(
    uow: &UnitOfWork,
    event: OrderPlacedV1,
    envelope: &Envelope,
) -> Result<(), DbErr> {
    reserve_slowly(uow, &event, envelope).await
}

/// Concurrent deliveries on MariaDB.
#[inbox_handler(consumer = "tests.concurrent-mariadb")]
async fn reserve_stock_concurrent_mariadb(
    uow: &UnitOfWork,
    event: OrderPlacedV1,
    envelope: &Envelope,
) -> Result<(), DbErr> {
    reserve_slowly(uow, &event, envelope).await
}

/// The consumer of the end-to-end scenario.
#[inbox_handler(consumer = "tests.end-to-end")]
async fn reserve_stock_end_to_end(
    uow: &UnitOfWork,
    event: OrderPlacedV1,
    envelope: &Envelope,
) -> Result<(), DbErr> {
    knob::call(envelope.message_id);
    reserve(uow, &event).await
}

/// One of two handlers of one event type for one consumer: `DuplicateRoute`.
#[inbox_handler(consumer = "tests.duplicate-route")]
async fn duplicate_route_a(_uow: &UnitOfWork, _event: OrderPlacedV1) -> Result<(), DbErr> {
    Ok(())
}

/// The other one.
#[inbox_handler(consumer = "tests.duplicate-route")]
async fn duplicate_route_b(_uow: &UnitOfWork, _event: OrderPlacedV1) -> Result<(), DbErr> {
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

fn t0() -> chrono::DateTime<chrono::Utc> {
    "2026-03-01T09:00:00Z".parse().unwrap()
}

/// An outbox on a manual clock.
fn manual_outbox() -> (Outbox, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::starting_at(t0()));
    let outbox = Outbox::builder().clock(clock.clone()).build().unwrap();
    (outbox, clock)
}

/// Installs the outbox and inbox tables and a `stock` table with `books` (id, on hand).
async fn setup(db: &TestDb, outbox: &Outbox, books: &[(&str, i32)]) {
    schema::install(db.conn(), outbox).await.expect("install");
    db.conn()
        .execute_unprepared(
            "CREATE TABLE stock (book_id varchar(64) NOT NULL PRIMARY KEY, \
             on_hand integer NOT NULL, reserved integer NOT NULL)",
        )
        .await
        .expect("stock table");
    for (book, on_hand) in books {
        db.conn()
            .execute_unprepared(&format!(
                "INSERT INTO stock (book_id, on_hand, reserved) VALUES ('{book}', {on_hand}, 0)"
            ))
            .await
            .unwrap();
    }
}

/// (on hand, reserved) of `book`.
async fn stock(db: &TestDb, book: &str) -> (i32, i32) {
    let row = db
        .conn()
        .query_one_raw(Statement::from_string(
            db.conn().get_database_backend(),
            format!("SELECT on_hand, reserved FROM stock WHERE book_id = '{book}'"),
        ))
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("no stock row for {book}"));
    (
        row.try_get("", "on_hand").unwrap(),
        row.try_get("", "reserved").unwrap(),
    )
}

/// An `OrderPlacedV1` message.
fn order_placed(order_id: &str, books: &[(&str, u32)]) -> Envelope {
    Envelope::from_event(&OrderPlacedV1 {
        order_id: order_id.to_owned(),
        checkout_id: format!("checkout-{order_id}"),
        customer: "ada".to_owned(),
        books: books
            .iter()
            .map(|(book_id, quantity)| OrderedBookV1 {
                book_id: (*book_id).to_owned(),
                quantity: *quantity,
            })
            .collect(),
    })
    .unwrap()
}

/// A copy of `envelope` with another id and event type (the version follows the type).
fn retyped(envelope: &Envelope, event_type: &str) -> Envelope {
    Envelope::from_parts(EnvelopeParts {
        message_id: Uuid::now_v7(),
        event_type: event_type.to_owned(),
        occurred_at: envelope.occurred_at,
        correlation_id: envelope.correlation_id,
        causation_id: envelope.causation_id,
        traceparent: envelope.traceparent.clone(),
        tracestate: envelope.tracestate.clone(),
        aggregate_type: envelope.aggregate_type.clone(),
        aggregate_id: envelope.aggregate_id.clone(),
        headers: envelope.headers.clone(),
        payload: envelope.payload.clone(),
    })
    .unwrap()
}

/// One row of the inbox table.
#[derive(Debug, Clone, PartialEq, Eq)]
struct InboxRow {
    message_id: Uuid,
    consumer: String,
    event_type: String,
}

fn read_uuid(row: &QueryResult, column: &str) -> Uuid {
    match row.try_get::<String>("", column) {
        Ok(text) => Uuid::parse_str(&text).unwrap(),
        Err(_) => row.try_get::<Uuid>("", column).unwrap(),
    }
}

/// Every inbox row, by message id (UUIDv7: creation order).
async fn inbox_rows(db: &TestDb, outbox: &Outbox) -> Vec<InboxRow> {
    let rows = db
        .conn()
        .query_all_raw(Statement::from_string(
            db.conn().get_database_backend(),
            format!(
                "SELECT message_id, consumer, event_type FROM {}",
                outbox.inbox_table()
            ),
        ))
        .await
        .unwrap();
    let mut rows: Vec<InboxRow> = rows
        .iter()
        .map(|row| InboxRow {
            message_id: read_uuid(row, "message_id"),
            consumer: row.try_get("", "consumer").unwrap(),
            event_type: row.try_get("", "event_type").unwrap(),
        })
        .collect();
    rows.sort_by_key(|r| (r.message_id, r.consumer.clone()));
    rows
}

/// Whether the inbox has `(message_id, consumer)`.
async fn in_inbox(db: &TestDb, outbox: &Outbox, message_id: Uuid, consumer: &str) -> bool {
    inbox_rows(db, outbox)
        .await
        .iter()
        .any(|r| r.message_id == message_id && r.consumer == consumer)
}

async fn outbox_rows(db: &TestDb, outbox: &Outbox) -> Vec<OutboxRecord> {
    OutboxRecord::list(db.conn(), outbox, 1000).await.unwrap()
}

fn operations(db: &TestDb, outbox: &Outbox) -> Operations {
    Operations::new(db.conn().clone(), outbox.clone())
}

/// A backoff that does not slow the tests down: 1 ms, 2 ms, 4 ms, …
fn tiny_backoff() -> Backoff {
    Backoff::new()
        .with_min_delay(Duration::from_millis(1))
        .with_jitter(false)
}

// ---------------------------------------------------------------------------------------
// Scenarios on every backend
// ---------------------------------------------------------------------------------------

/// Scenario 4 (book: The demo), consumer side: the same OrderPlaced delivered twice is applied
/// once and skipped once; Dune stays at on hand 5, reserved 2 (not 4).
async fn scenario_4_same_message_twice_is_applied_once(db: &TestDb) {
    const CONSUMER: &str = "tests.scenario-four";
    let outbox = Outbox::default();
    setup(db, &outbox, &[("dune", 5)]).await;
    let consumer = Consumer::builder(db.conn().clone(), outbox.clone(), CONSUMER)
        .build()
        .unwrap();
    assert_eq!(consumer.name(), CONSUMER);
    assert_eq!(consumer.event_types(), [OrderPlacedV1::EVENT_TYPE]);

    let message = order_placed("o-1", &[("dune", 2)]);
    let first = consumer.deliver(&message).await.unwrap();
    eprintln!("  consumer: {} {first:?}", message.event_type);
    assert_eq!(first, Delivered::Applied { attempts: 1 });
    let second = consumer.deliver(&message).await.unwrap();
    eprintln!("  consumer: {} {second:?}", message.event_type);
    assert_eq!(second, Delivered::Duplicate);

    let (on_hand, reserved) = stock(db, "dune").await;
    eprintln!("  Dune: on hand {on_hand}, reserved {reserved}");
    assert_eq!((on_hand, reserved), (5, 2), "reserved 2, not 4");
    assert_eq!(knob::calls(message.message_id), 1, "the handler ran once");
    assert_eq!(
        inbox_rows(db, &outbox).await,
        [InboxRow {
            message_id: message.message_id,
            consumer: CONSUMER.to_owned(),
            event_type: OrderPlacedV1::EVENT_TYPE.to_owned(),
        }]
    );
    assert!(
        operations(db, &outbox)
            .consumer_dead_letters(None, None, 10)
            .await
            .unwrap()
            .is_empty()
    );
}

/// A failing handler rolls back (no inbox row, no business write) and a retry applies it;
/// the consumer retries with backoff; a handler that always fails is dead-lettered, and a
/// requeued dead letter is applied once when the handler works again.
async fn failing_handler_leaves_no_inbox_row_and_is_retried(db: &TestDb) {
    const CONSUMER: &str = "tests.flaky";
    let outbox = Outbox::default();
    setup(db, &outbox, &[("dune", 100)]).await;

    // The generated wrapper, directly: failure, then success.
    let message = order_placed("o-1", &[("dune", 2)]);
    knob::fail_next(message.message_id, 1);
    let error = inbox::apply::<reserve_stock_flaky>(db.conn(), &outbox, &message)
        .await
        .expect_err("the handler fails");
    assert!(
        matches!(&error, InboxError::Handler(DbErr::Custom(m)) if m.starts_with("induced failure on call 1")),
        "{error:?}"
    );
    assert!(error.is_retryable());
    assert!(inbox_rows(db, &outbox).await.is_empty(), "no inbox row");
    assert_eq!(
        stock(db, "dune").await,
        (100, 0),
        "business write rolled back"
    );
    let retried = inbox::apply::<reserve_stock_flaky>(db.conn(), &outbox, &message)
        .await
        .unwrap();
    assert_eq!(retried, InboxOutcome::Applied);
    assert_eq!(knob::calls(message.message_id), 2);
    assert!(in_inbox(db, &outbox, message.message_id, CONSUMER).await);
    assert_eq!(stock(db, "dune").await, (100, 2));

    // Through a consumer: two failures, applied on the third attempt.
    let consumer = Consumer::builder(db.conn().clone(), outbox.clone(), CONSUMER)
        .max_attempts(3)
        .inline_attempts(3)
        .backoff(tiny_backoff())
        .build()
        .unwrap();
    let flaky = order_placed("o-2", &[("dune", 3)]);
    knob::fail_next(flaky.message_id, 2);
    assert_eq!(
        consumer.deliver(&flaky).await.unwrap(),
        Delivered::Applied { attempts: 3 }
    );
    assert_eq!(knob::calls(flaky.message_id), 3);
    assert_eq!(stock(db, "dune").await, (100, 5), "applied once");
    assert_eq!(inbox_rows(db, &outbox).await.len(), 2);

    // Always failing: dead-lettered after 3 attempts.
    let poison = order_placed("o-3", &[("dune", 7)]);
    knob::fail_next(poison.message_id, u32::MAX);
    let delivered = consumer.deliver(&poison).await.unwrap();
    let Delivered::DeadLettered {
        id,
        reason: DeadLetterReason::HandlerFailed { attempts, error },
    } = &delivered
    else {
        panic!("expected a handler_failed dead letter, got {delivered:?}");
    };
    assert_eq!(*attempts, 3);
    assert!(error.contains("induced failure on call 3"), "{error}");
    assert_eq!(
        knob::calls(poison.message_id),
        3,
        "exactly max_attempts calls"
    );
    assert!(!in_inbox(db, &outbox, poison.message_id, CONSUMER).await);
    assert_eq!(stock(db, "dune").await, (100, 5), "nothing reserved for it");

    let ops = operations(db, &outbox);
    let letters = ops
        .consumer_dead_letters(Some(CONSUMER), None, 10)
        .await
        .unwrap();
    assert_eq!(letters.len(), 1);
    let letter = &letters[0];
    assert_eq!(letter.id, *id);
    assert_eq!(letter.message_id, Some(poison.message_id));
    assert_eq!(letter.consumer, CONSUMER);
    assert_eq!(
        letter.event_type.as_deref(),
        Some(OrderPlacedV1::EVENT_TYPE)
    );
    assert_eq!(letter.reason, "handler_failed");
    assert_eq!(letter.attempts, 3);
    assert_eq!(letter.status, DeadLetterStatus::Dead);
    assert!(letter.error.contains("induced failure"), "{}", letter.error);
    assert_eq!(
        letter.message,
        StoredMessage::Envelope(Box::new(poison.clone()))
    );

    // Not requeued yet: nothing to redeliver.
    let report = consumer.redeliver_requeued(10).await.unwrap();
    assert_eq!((report.resolved, report.failed), (0, 0));
    assert_eq!(knob::calls(poison.message_id), 3);

    // The operator requeues it, the handler is fixed: applied once, resolved.
    assert!(
        ops.requeue_consumer_dead_letter(*id, "alice")
            .await
            .unwrap()
    );
    assert!(
        !ops.requeue_consumer_dead_letter(*id, "bob").await.unwrap(),
        "only a dead letter in state dead can be requeued"
    );
    knob::fail_next(poison.message_id, 0);
    let report = consumer.redeliver_requeued(10).await.unwrap();
    assert_eq!((report.resolved, report.failed), (1, 0));
    assert_eq!(knob::calls(poison.message_id), 4);
    assert_eq!(stock(db, "dune").await, (100, 12));
    assert!(in_inbox(db, &outbox, poison.message_id, CONSUMER).await);
    let letter = ops.consumer_dead_letter(*id).await.unwrap().unwrap();
    assert_eq!(letter.status, DeadLetterStatus::Resolved);
    assert_eq!(letter.requeued_by.as_deref(), Some("alice"));
    assert!(letter.requeued_at.is_some() && letter.resolved_at.is_some());
    let report = consumer.redeliver_requeued(10).await.unwrap();
    assert_eq!(
        (report.resolved, report.failed),
        (0, 0),
        "resolved stays resolved"
    );
    assert_eq!(knob::calls(poison.message_id), 4);
    assert_eq!(stock(db, "dune").await, (100, 12));
}

/// A payload missing a field, a body that is not JSON, an unsupported version and an
/// unknown type: each settles at once with a typed outcome, never reaching the handler.
async fn malformed_wrong_version_and_unknown_messages_are_settled_at_once(db: &TestDb) {
    const CONSUMER: &str = "tests.malformed";
    let outbox = Outbox::default();
    setup(db, &outbox, &[("dune", 5)]).await;
    // A retry would sleep ≥ 10 s: the elapsed time shows there was none.
    let consumer = || {
        Consumer::builder(db.conn().clone(), outbox.clone(), CONSUMER)
            .max_attempts(5)
            .backoff(
                Backoff::new()
                    .with_min_delay(Duration::from_secs(10))
                    .with_jitter(false),
            )
    };
    let ignoring = consumer().build().unwrap();
    let strict = consumer()
        .unknown_events(UnknownEvents::DeadLetter)
        .build()
        .unwrap();
    let ops = operations(db, &outbox);
    let started = Instant::now();

    // The right event type, a payload without `customer`.
    let mut malformed = order_placed("o-1", &[("dune", 1)]);
    let mut payload = malformed.payload.to_value().unwrap();
    payload.as_object_mut().unwrap().remove("customer").unwrap();
    malformed.payload = payload.into();
    let delivered = ignoring.deliver(&malformed).await.unwrap();
    let Delivered::DeadLettered {
        id,
        reason: DeadLetterReason::Malformed { error },
    } = &delivered
    else {
        panic!("expected a malformed dead letter, got {delivered:?}");
    };
    assert!(
        error.contains("customer"),
        "names the missing field: {error}"
    );
    assert_eq!(
        knob::calls(malformed.message_id),
        0,
        "the handler never ran"
    );
    let letter = ops.consumer_dead_letter(*id).await.unwrap().unwrap();
    assert_eq!(
        (letter.reason.as_str(), letter.attempts, letter.status),
        ("malformed", 0, DeadLetterStatus::Dead)
    );
    assert_eq!(letter.message_id, Some(malformed.message_id));
    assert_eq!(
        letter.message,
        StoredMessage::Envelope(Box::new(malformed.clone()))
    );

    // Binary mode: valid headers, a body that is not JSON.
    let good = order_placed("o-2", &[("dune", 2)]);
    let binary = cloudevents::to_binary(&good).unwrap();
    let delivered = ignoring
        .deliver_binary(&binary.headers, b"this is { not json")
        .await
        .unwrap();
    let Delivered::DeadLettered {
        id,
        reason: DeadLetterReason::Malformed { .. },
    } = &delivered
    else {
        panic!("expected a malformed dead letter, got {delivered:?}");
    };
    let letter = ops.consumer_dead_letter(*id).await.unwrap().unwrap();
    let StoredMessage::Binary(raw) = &letter.message else {
        panic!("format binary: {:?}", letter.message);
    };
    assert_eq!(
        raw.headers,
        binary
            .headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect::<Vec<_>>(),
        "headers kept"
    );
    assert_eq!(raw.body, "this is { not json", "raw body kept");
    assert_eq!((raw.body_bytes, raw.truncated), (18, false));
    assert_eq!(
        raw.body_sha256,
        "9ecf762a4283d3e18e90fd5eab5032f24b5801a32180904ec68ce623210e6cde"
    );
    assert_eq!(letter.message_id, Some(good.message_id), "read from ce-id");
    assert_eq!(
        letter.event_type.as_deref(),
        Some(OrderPlacedV1::EVENT_TYPE)
    );
    assert_eq!((letter.reason.as_str(), letter.attempts), ("malformed", 0));
    assert_eq!(knob::calls(good.message_id), 0);
    // The same headers with the real body: the dead letter holds its aggregate (`Block`),
    // so the message is parked behind it; once an operator skips the dead letter, the
    // consumer applies it (the decoding path works).
    assert_eq!(
        ignoring
            .deliver_binary(&binary.headers, &binary.body)
            .await
            .unwrap(),
        Delivered::Parked {
            reason: ParkReason::Behind
        }
    );
    assert_eq!(
        ignoring.redeliver_parked().await.unwrap().applied,
        0,
        "held by the dead letter"
    );
    assert_eq!(knob::calls(good.message_id), 0);
    assert!(
        ops.skip_consumer_dead_letter(*id, "alice", "garbled by a proxy")
            .await
            .unwrap()
    );
    assert_eq!(ignoring.redeliver_parked().await.unwrap().applied, 1);
    assert_eq!(knob::calls(good.message_id), 1);
    assert_eq!(stock(db, "dune").await, (5, 2));

    // A version the consumer has no handler for.
    let v9 = retyped(&good, "outboxtest.ordering.order-placed.v9");
    assert_eq!(v9.version, 9);
    let delivered = ignoring.deliver(&v9).await.unwrap();
    let Delivered::DeadLettered { id, reason } = &delivered else {
        panic!("expected a dead letter, got {delivered:?}");
    };
    assert_eq!(
        *reason,
        DeadLetterReason::UnsupportedVersion {
            event_type: "outboxtest.ordering.order-placed.v9".to_owned(),
            handled: vec![OrderPlacedV1::EVENT_TYPE.to_owned()],
        }
    );
    let letter = ops.consumer_dead_letter(*id).await.unwrap().unwrap();
    assert_eq!(letter.reason, "unsupported_version");
    assert_eq!(letter.event_type.as_deref(), Some(v9.event_type.as_str()));
    assert_eq!(knob::calls(v9.message_id), 0);

    // An unknown event type: ignored by default, dead-lettered on request.
    let noted = Envelope::from_event(&OrderNotedV2 {
        order_id: "o-1".to_owned(),
        n: 1,
    })
    .unwrap();
    assert_eq!(
        ignoring.deliver(&noted).await.unwrap(),
        Delivered::Ignored {
            event_type: OrderNotedV2::EVENT_TYPE.to_owned()
        }
    );
    assert_eq!(
        ops.consumer_dead_letters(Some(CONSUMER), None, 100)
            .await
            .unwrap()
            .len(),
        3,
        "ignoring writes no dead letter"
    );
    let delivered = strict.deliver(&noted).await.unwrap();
    let Delivered::DeadLettered { id, reason } = &delivered else {
        panic!("expected a dead letter, got {delivered:?}");
    };
    assert_eq!(
        *reason,
        DeadLetterReason::UnknownEventType {
            event_type: OrderNotedV2::EVENT_TYPE.to_owned()
        }
    );
    let letter = ops.consumer_dead_letter(*id).await.unwrap().unwrap();
    assert_eq!(
        (letter.reason.as_str(), letter.message_id),
        ("unknown_event_type", Some(noted.message_id))
    );

    let elapsed = started.elapsed();
    assert!(
        elapsed < Duration::from_secs(8),
        "no retry loop: {elapsed:?}"
    );
    let reasons: Vec<String> = ops
        .consumer_dead_letters(Some(CONSUMER), None, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|l| l.reason)
        .collect();
    assert_eq!(
        reasons,
        [
            "malformed",
            "malformed",
            "unsupported_version",
            "unknown_event_type"
        ]
    );
    assert_eq!(
        inbox_rows(db, &outbox).await.len(),
        1,
        "only the applied binary message"
    );
}

/// A handler raising an event: its outbox row (causation = the incoming message, same
/// correlation) commits with the inbox row; a duplicate or a failure writes none.
async fn raised_events_commit_if_and_only_if_the_inbox_row_does(db: &TestDb) {
    const CONSUMER: &str = "tests.raises-events";
    let outbox = Outbox::default();
    setup(db, &outbox, &[("dune", 10), ("emma", 10)]).await;
    let consumer = Consumer::builder(db.conn().clone(), outbox.clone(), CONSUMER)
        .max_attempts(2)
        .inline_attempts(2)
        .backoff(tiny_backoff())
        .build()
        .unwrap();

    let correlation = Uuid::now_v7();
    let placed = order_placed("o-1", &[("dune", 2), ("emma", 1)]).with_correlation_id(correlation);
    assert_eq!(
        consumer.deliver(&placed).await.unwrap(),
        Delivered::Applied { attempts: 1 }
    );
    let rows = outbox_rows(db, &outbox).await;
    assert_eq!(rows.len(), 1);
    let raised = &rows[0].envelope;
    assert_eq!(raised.event_type, StockReservedV1::EVENT_TYPE);
    assert_eq!(raised.causation_id, Some(placed.message_id));
    assert_eq!(raised.correlation_id, Some(correlation));
    assert_ne!(raised.message_id, placed.message_id);
    assert_eq!(
        raised.decode::<StockReservedV1>().unwrap(),
        StockReservedV1 {
            order_id: "o-1".to_owned(),
            copies: 3
        }
    );

    // A duplicate: no second outbox row.
    assert_eq!(
        consumer.deliver(&placed).await.unwrap(),
        Delivered::Duplicate
    );
    assert_eq!(outbox_rows(db, &outbox).await.len(), 1);

    // A failure: neither row; the retry writes both. Without a correlation id on the
    // incoming message, the outgoing one is correlated by the incoming message id.
    let second = order_placed("o-2", &[("dune", 1)]);
    assert_eq!(second.correlation_id, None);
    knob::fail_next(second.message_id, 1);
    let error = inbox::apply::<reserve_stock_and_announce>(db.conn(), &outbox, &second)
        .await
        .expect_err("fails once");
    assert!(matches!(error, InboxError::Handler(_)), "{error:?}");
    assert!(!in_inbox(db, &outbox, second.message_id, CONSUMER).await);
    assert_eq!(outbox_rows(db, &outbox).await.len(), 1, "no outbox row");
    assert_eq!(stock(db, "dune").await, (10, 2));
    assert_eq!(
        consumer.deliver(&second).await.unwrap(),
        Delivered::Applied { attempts: 1 }
    );
    let rows = outbox_rows(db, &outbox).await;
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[1].envelope.causation_id, Some(second.message_id));
    assert_eq!(rows[1].envelope.correlation_id, Some(second.message_id));

    // Always failing: dead-lettered, and still neither row.
    let third = order_placed("o-3", &[("emma", 1)]);
    knob::fail_next(third.message_id, u32::MAX);
    assert!(matches!(
        consumer.deliver(&third).await.unwrap(),
        Delivered::DeadLettered {
            reason: DeadLetterReason::HandlerFailed { attempts: 2, .. },
            ..
        }
    ));
    assert_eq!(knob::calls(third.message_id), 2);

    // The outbox row of a message exists iff its inbox row does.
    let rows = outbox_rows(db, &outbox).await;
    for message in [&placed, &second, &third] {
        let inbox_row = in_inbox(db, &outbox, message.message_id, CONSUMER).await;
        let outbox_row = rows
            .iter()
            .filter(|r| r.envelope.causation_id == Some(message.message_id))
            .count();
        assert_eq!(
            (inbox_row, outbox_row),
            if message.message_id == third.message_id {
                (false, 0)
            } else {
                (true, 1)
            },
            "message {}",
            message.aggregate_id
        );
    }
    assert_eq!(stock(db, "dune").await, (10, 3));
    assert_eq!(stock(db, "emma").await, (10, 1));
}

/// A v2 handler with `upcast(from = BookAddedV1)` receives both versions.
async fn upcast_routes_old_and_new_versions_to_one_handler(db: &TestDb) {
    const CONSUMER: &str = "tests.upcast";
    let outbox = Outbox::default();
    setup(db, &outbox, &[]).await;
    db.conn()
        .execute_unprepared(
            "CREATE TABLE catalog (book_id varchar(64) NOT NULL PRIMARY KEY, \
             title varchar(255) NOT NULL, isbn varchar(64) NOT NULL)",
        )
        .await
        .unwrap();
    let consumer = Consumer::builder(db.conn().clone(), outbox.clone(), CONSUMER)
        .build()
        .unwrap();
    assert_eq!(
        consumer.event_types(),
        [BookAddedV1::EVENT_TYPE, BookAddedV2::EVENT_TYPE]
    );

    let v1 = Envelope::from_event(&BookAddedV1 {
        book_id: "dune".to_owned(),
        title: "Dune".to_owned(),
    })
    .unwrap();
    let v2 = Envelope::from_event(&BookAddedV2 {
        book_id: "emma".to_owned(),
        title: "Emma".to_owned(),
        isbn: "978-0141439587".to_owned(),
    })
    .unwrap();
    assert_eq!(
        consumer.deliver(&v1).await.unwrap(),
        Delivered::Applied { attempts: 1 }
    );
    assert_eq!(
        consumer.deliver(&v2).await.unwrap(),
        Delivered::Applied { attempts: 1 }
    );
    assert_eq!(consumer.deliver(&v1).await.unwrap(), Delivered::Duplicate);
    // Upcasting is the consumer's routing: `apply::<add_book_v2>` decodes its own
    // contract only, so a v1 message is a (non-retryable) decode error there.
    let error = inbox::apply::<add_book_v2>(db.conn(), &outbox, &v1)
        .await
        .expect_err("apply decodes the handler's own contract");
    assert!(
        matches!(error, InboxError::Decode { .. }) && !error.is_retryable(),
        "{error:?}"
    );

    let rows = db
        .conn()
        .query_all_raw(Statement::from_string(
            db.conn().get_database_backend(),
            "SELECT book_id, title, isbn FROM catalog ORDER BY book_id",
        ))
        .await
        .unwrap();
    let books: Vec<(String, String, String)> = rows
        .iter()
        .map(|r| {
            (
                r.try_get("", "book_id").unwrap(),
                r.try_get("", "title").unwrap(),
                r.try_get("", "isbn").unwrap(),
            )
        })
        .collect();
    assert_eq!(
        books,
        [
            ("dune".into(), "Dune".into(), "unknown".into()),
            ("emma".into(), "Emma".into(), "978-0141439587".into()),
        ]
    );
    let inbox: Vec<(Uuid, String)> = inbox_rows(db, &outbox)
        .await
        .into_iter()
        .map(|r| (r.message_id, r.event_type))
        .collect();
    assert_eq!(
        inbox,
        [
            (v1.message_id, BookAddedV1::EVENT_TYPE.to_owned()),
            (v2.message_id, BookAddedV2::EVENT_TYPE.to_owned()),
        ]
    );

    // A third version is not handled: both handled versions are named.
    let v3 = retyped(&v2, "inboxtest.catalog.book-added.v3");
    let delivered = consumer.deliver(&v3).await.unwrap();
    assert!(
        matches!(
            &delivered,
            Delivered::DeadLettered {
                reason: DeadLetterReason::UnsupportedVersion { handled, .. },
                ..
            } if *handled == [BookAddedV1::EVENT_TYPE, BookAddedV2::EVENT_TYPE]
        ),
        "{delivered:?}"
    );
}

/// `purge_inbox` deletes rows received longer ago than the retention, in batches, and
/// nothing newer.
async fn purge_inbox_deletes_only_rows_past_retention(db: &TestDb) {
    const CONSUMER: &str = "tests.retention";
    let (outbox, clock) = manual_outbox();
    setup(db, &outbox, &[("dune", 100)]).await;
    let consumer = Consumer::builder(db.conn().clone(), outbox.clone(), CONSUMER)
        .inbox_retention(Duration::from_secs(14 * 24 * 3600))
        .build()
        .unwrap();

    let old: Vec<Envelope> = (1..=3)
        .map(|n| order_placed(&format!("old-{n}"), &[("dune", 1)]))
        .collect();
    for message in &old {
        assert_eq!(
            consumer.deliver(message).await.unwrap(),
            Delivered::Applied { attempts: 1 }
        );
    }
    clock.advance(TimeDelta::days(10));
    let recent = order_placed("recent", &[("dune", 1)]);
    assert_eq!(
        consumer.deliver(&recent).await.unwrap(),
        Delivered::Applied { attempts: 1 }
    );
    assert_eq!(inbox_rows(db, &outbox).await.len(), 4);

    // Day 13: nothing is 14 days old yet.
    clock.advance(TimeDelta::days(3));
    assert_eq!(consumer.purge_inbox(2).await.unwrap(), Some(0));
    assert_eq!(inbox_rows(db, &outbox).await.len(), 4);

    // Day 15: the three old rows go, in batches of 2; the recent one stays.
    clock.advance(TimeDelta::days(2));
    assert_eq!(consumer.purge_inbox(2).await.unwrap(), Some(3));
    let left: Vec<Uuid> = inbox_rows(db, &outbox)
        .await
        .into_iter()
        .map(|r| r.message_id)
        .collect();
    assert_eq!(left, [recent.message_id]);
    assert_eq!(consumer.purge_inbox(2).await.unwrap(), Some(0));

    // Day 25: the recent row is 15 days old.
    clock.advance(TimeDelta::days(10));
    assert_eq!(consumer.purge_inbox(2).await.unwrap(), Some(1));
    assert!(inbox_rows(db, &outbox).await.is_empty());
    assert_eq!(
        stock(db, "dune").await,
        (100, 4),
        "purging is not un-applying"
    );
}

// ---------------------------------------------------------------------------------------
// Concurrent deliveries (PostgreSQL and MariaDB)
// ---------------------------------------------------------------------------------------

mod concurrent_deliveries_of_one_message {
    use super::{Backend, run_scenario};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres() {
        run_scenario(
            Backend::Postgres,
            "concurrent_deliveries_of_one_message::postgres",
            async |db| super::concurrent_deliveries(db, "tests.concurrent-postgres").await,
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mariadb() {
        run_scenario(
            Backend::MariaDb,
            "concurrent_deliveries_of_one_message::mariadb",
            async |db| super::concurrent_deliveries(db, "tests.concurrent-mariadb").await,
        )
        .await;
    }
}

/// 8 tasks deliver the same message at once: exactly one applies it.
async fn concurrent_deliveries(db: &TestDb, consumer_name: &str) {
    count_metrics();
    let outbox = Outbox::default();
    setup(db, &outbox, &[("dune", 100)]).await;
    let consumer = Consumer::builder(db.conn().clone(), outbox.clone(), consumer_name)
        .backoff(tiny_backoff())
        .build()
        .unwrap();
    let message = order_placed("o-1", &[("dune", 2)]);
    let failures_before = consumer_counter(metric::HANDLER_FAILURES, consumer_name);
    let barrier = Arc::new(tokio::sync::Barrier::new(8));
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (consumer, message, barrier) = (consumer.clone(), message.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                let started = Instant::now();
                let delivered = consumer.deliver(&message).await;
                (delivered, started, Instant::now())
            })
        })
        .collect();
    let mut outcomes = Vec::new();
    let mut spans = Vec::new();
    for task in tasks {
        let (delivered, started, finished) = task.await.unwrap();
        let delivered = delivered.unwrap();
        spans.push((
            matches!(delivered, Delivered::Applied { .. }),
            started,
            finished,
        ));
        outcomes.push(delivered);
    }
    // They really overlapped: every delivery began before the applying one committed
    // (which took ≥ 200 ms), so the duplicates met the uncommitted inbox row.
    let applied_finished = spans.iter().find(|s| s.0).map(|s| s.2).unwrap();
    assert!(
        spans.iter().all(|s| s.1 < applied_finished),
        "deliveries did not overlap"
    );
    let failures = consumer_counter(metric::HANDLER_FAILURES, consumer_name) - failures_before;
    eprintln!(
        "  {consumer_name}: outcomes {outcomes:?}; failed attempts (retried): {failures}; \
         handler calls: {}",
        knob::calls(message.message_id)
    );
    let applied: Vec<&Delivered> = outcomes
        .iter()
        .filter(|d| matches!(d, Delivered::Applied { .. }))
        .collect();
    assert_eq!(applied.len(), 1, "exactly one Applied: {outcomes:?}");
    assert_eq!(
        outcomes
            .iter()
            .filter(|d| **d == Delivered::Duplicate)
            .count(),
        7,
        "{outcomes:?}"
    );
    assert_eq!(
        knob::calls(message.message_id),
        1,
        "the handler committed once"
    );
    assert_eq!(stock(db, "dune").await, (100, 2));
    assert_eq!(inbox_rows(db, &outbox).await.len(), 1);
    assert!(
        operations(db, &outbox)
            .consumer_dead_letters(None, None, 10)
            .await
            .unwrap()
            .is_empty()
    );
}

// ---------------------------------------------------------------------------------------
// Configuration errors (no database needed beyond a connection)
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn consumer_configuration_errors() {
    let db = TestDb::sqlite_memory().await;
    let outbox = Outbox::default();
    let builder = |name: &str| Consumer::builder(db.conn().clone(), outbox.clone(), name);

    let error = builder("tests.nobody").build().unwrap_err();
    let ConsumerConfigError::NoHandlers {
        consumer,
        registered,
    } = &error
    else {
        panic!("expected NoHandlers, got {error:?}");
    };
    assert_eq!(consumer, "tests.nobody");
    for name in [
        "tests.scenario-four",
        "tests.upcast",
        "tests.duplicate-route",
    ] {
        assert!(registered.iter().any(|r| r == name), "{registered:?}");
    }
    assert!(!registered.iter().any(|r| r == "tests.nobody"));
    assert!(error.to_string().contains("tests.scenario-four"), "{error}");

    let error = builder("Tests.Bad Name").build().unwrap_err();
    assert!(
        matches!(&error, ConsumerConfigError::InvalidName { name, .. } if name == "Tests.Bad Name"),
        "{error:?}"
    );

    let error = builder("tests.scenario-four")
        .inbox_retention(Duration::from_secs(24 * 3600))
        .build()
        .unwrap_err();
    let ConsumerConfigError::RetentionTooShort {
        retention,
        redelivery_window,
        ..
    } = &error
    else {
        panic!("expected RetentionTooShort, got {error:?}");
    };
    assert_eq!(*retention, Duration::from_secs(24 * 3600));
    assert_eq!(*redelivery_window, Duration::from_secs(7 * 24 * 3600));
    let message = error.to_string();
    assert!(
        message.contains("86400s") && message.contains("604800s"),
        "names both durations: {message}"
    );
    // Long enough: builds.
    builder("tests.scenario-four")
        .inbox_retention(Duration::from_secs(8 * 24 * 3600))
        .build()
        .unwrap();

    let error = builder("tests.duplicate-route").build().unwrap_err();
    let ConsumerConfigError::DuplicateRoute {
        consumer,
        event_type,
        first,
        second,
    } = &error
    else {
        panic!("expected DuplicateRoute, got {error:?}");
    };
    assert_eq!(consumer, "tests.duplicate-route");
    assert_eq!(event_type, OrderPlacedV1::EVENT_TYPE);
    assert!(first.ends_with("::duplicate_route_a"), "{first}");
    assert!(second.ends_with("::duplicate_route_b"), "{second}");

    let error = builder("tests.scenario-four")
        .max_attempts(0)
        .build()
        .unwrap_err();
    assert!(
        matches!(error, ConsumerConfigError::NoAttempts { .. }),
        "{error:?}"
    );
    db.close().await;
}

// ---------------------------------------------------------------------------------------
// End to end: producer, relay, in-process broker, consumer (SQLite file)
// ---------------------------------------------------------------------------------------

/// Scenario 4 (book: The demo) end to end: the relay crashes between publish and mark, publishes
/// the same message id again after the restart; the consumer applies it once and skips the
/// duplicate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn end_to_end_relay_crash_yields_one_applied_one_duplicate() {
    const CONSUMER: &str = "tests.end-to-end";
    count_metrics();
    let db = TestDb::sqlite_file().await;
    let (outbox, clock) = manual_outbox();
    setup(&db, &outbox, &[("dune", 5), ("emma", 3)]).await;
    create_business_tables(db.conn()).await.unwrap();

    let broker = InProcessBroker::new();
    let consumer = Consumer::builder(db.conn().clone(), outbox.clone(), CONSUMER)
        .build()
        .unwrap();
    let shutdown = CancellationToken::new();
    // Subscribe before anything is published.
    let running = tokio::spawn({
        let (consumer, messages, shutdown) =
            (consumer.clone(), broker.subscribe(), shutdown.clone());
        async move { consumer.run_in_process(messages, shutdown).await }
    });

    // The producer: a checkout commits the order and its OrderPlaced together.
    let order_id = outbox
        .transaction(db.conn(), &OrderingContracts, async |uow| {
            let order = Order::place(uow, PlaceOrder::sample("checkout-1"));
            order.save(uow).await?;
            Ok::<_, DbErr>(order.id)
        })
        .await
        .unwrap();

    let relay = |id: &str| {
        Relay::builder(db.conn().clone(), outbox.clone(), broker.clone())
            .instance_id(id)
            .poll_interval(Duration::from_millis(20))
            .heartbeat_interval(Duration::from_millis(200))
            .lease_ttl(Duration::from_secs(2))
            .publish_timeout(Duration::from_millis(800))
            .backoff(Backoff::new().with_jitter(false))
            .build()
            .unwrap()
    };
    broker.crash_after_next_publish(AfterPublish::Hang);
    let mut first = relay("relay-1");
    let crashed = tokio::spawn(async move { first.drain().await });
    assert!(broker.wait_for_published(1, Duration::from_secs(10)).await);
    crashed.abort();
    assert!(crashed.await.unwrap_err().is_cancelled());
    clock.advance(TimeDelta::seconds(3));
    let mut second = relay("relay-2");
    assert_eq!(second.drain().await.unwrap().published, 1);
    let ids = broker.message_ids();
    assert_eq!(ids.len(), 2);
    assert_eq!(ids[0], ids[1], "the same message id twice");
    let message_id = ids[0];

    // Wait until the consumer settled both deliveries.
    let applied = || consumer_counter(metric::APPLIED, CONSUMER);
    let duplicates = || consumer_counter(metric::DUPLICATES, CONSUMER);
    let deadline = Instant::now() + Duration::from_secs(20);
    while applied() + duplicates() < 2 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    shutdown.cancel();
    running.await.unwrap().unwrap();
    eprintln!(
        "  consumer: applied {}, duplicates {}",
        applied(),
        duplicates()
    );
    assert_eq!((applied(), duplicates()), (1, 1));
    assert_eq!(knob::calls(message_id), 1);
    assert_eq!(stock(&db, "dune").await, (5, 2), "Dune: reserved 2, not 4");
    assert_eq!(stock(&db, "emma").await, (3, 1));
    let inbox = inbox_rows(&db, &outbox).await;
    assert_eq!(inbox.len(), 1);
    assert_eq!(inbox[0].message_id, message_id);
    let published: HashSet<String> = broker
        .published()
        .iter()
        .map(|e| e.aggregate_id.clone())
        .collect();
    assert_eq!(published, HashSet::from([order_id]));
    db.close().await;
}

/// A message waiting for its next attempt holds the later messages of its aggregate under
/// either policy; under `DeadLetterPolicy::Skip` its dead letter then holds nothing: the
/// aggregate goes on (with a gap), and the requeued message is applied late.
async fn a_retrying_message_holds_its_aggregate_and_skip_applies_past_a_dead_letter(db: &TestDb) {
    use outbox_core::policy::DeadLetterPolicy;
    const CONSUMER: &str = "tests.flaky";

    let outbox = Outbox::default();
    setup(db, &outbox, &[("dune", 100)]).await;
    let consumer = Consumer::builder(db.conn().clone(), outbox.clone(), CONSUMER)
        .max_attempts(2)
        .backoff(tiny_backoff())
        .dead_letter_policy(DeadLetterPolicy::Skip)
        .build()
        .unwrap();
    let first = order_placed("o-1", &[("dune", 1)]);
    let second = order_placed("o-1", &[("dune", 2)]);
    let other = order_placed("o-2", &[("dune", 4)]);
    knob::fail_next(first.message_id, u32::MAX);
    let Delivered::Parked {
        reason: ParkReason::Retrying { attempts: 1, .. },
    } = consumer.deliver(&first).await.unwrap()
    else {
        panic!("a failed message is parked for its next attempt");
    };
    assert_eq!(
        consumer.deliver(&second).await.unwrap(),
        Delivered::Parked {
            reason: ParkReason::Behind
        }
    );
    assert_eq!(
        consumer.deliver(&other).await.unwrap(),
        Delivered::Applied { attempts: 1 },
        "another aggregate is not held"
    );
    assert_eq!(knob::calls(second.message_id), 0);
    let ops = operations(db, &outbox);
    assert_eq!(
        ops.consumer_parked(Some(CONSUMER), 10).await.unwrap().len(),
        2
    );

    tokio::time::sleep(Duration::from_millis(20)).await;
    let report = consumer.redeliver_parked().await.unwrap();
    assert_eq!((report.dead_lettered, report.applied), (1, 1), "{report:?}");
    assert_eq!(knob::calls(first.message_id), 2);
    assert_eq!(
        stock(db, "dune").await,
        (100, 6),
        "o-1's second and o-2 applied"
    );
    assert!(ops.consumer_parked(None, 10).await.unwrap().is_empty());

    // The requeued message is applied late: `Skip` gives up the order for a dead letter.
    let letter = &ops
        .consumer_dead_letters(Some(CONSUMER), None, 10)
        .await
        .unwrap()[0];
    assert_eq!(
        letter.aggregate,
        Some(("order".to_owned(), "o-1".to_owned()))
    );
    knob::fail_next(first.message_id, 0);
    assert!(
        ops.requeue_consumer_dead_letter(letter.id, "alice")
            .await
            .unwrap()
    );
    assert_eq!(consumer.redeliver_requeued(10).await.unwrap().resolved, 1);
    assert_eq!(stock(db, "dune").await, (100, 7));
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// A dead letter is always writable (issue 15, item 1): bodies of 10 and 20 MiB, a 10 MiB
/// body of `"` (20 MiB once JSON-escaped), a 1 MiB header and 200 headers go over MariaDB's
/// `max_allowed_packet` (16 MiB) if stored whole; they are dead-lettered as `malformed` with
/// a bounded prefix, their full size and digest — and the next message applies. The same
/// through `Consumer::deliver` with an envelope over the payload limit.
async fn oversized_messages_are_dead_lettered_bounded(db: &TestDb) {
    use outbox_seaorm::inbox::dead_letter::RawMessage;
    use outbox_seaorm::limits::{MAX_STORED_BODY_BYTES, MAX_STORED_HEADERS};
    const CONSUMER: &str = "tests.flaky";
    const MIB: usize = 1024 * 1024;

    let outbox = Outbox::default();
    setup(db, &outbox, &[("dune", 100)]).await;
    let consumer = Consumer::builder(db.conn().clone(), outbox.clone(), CONSUMER)
        .build()
        .unwrap();
    let ops = operations(db, &outbox);
    let stored = async |delivered: Delivered| -> (RawMessage, String) {
        let Delivered::DeadLettered {
            id,
            reason: DeadLetterReason::Malformed { error },
        } = delivered
        else {
            panic!("expected a malformed dead letter, got {delivered:?}");
        };
        let letter = ops.consumer_dead_letter(id).await.unwrap().unwrap();
        let StoredMessage::Binary(raw) = letter.message else {
            panic!("stored as binary: {:?}", letter.message);
        };
        (raw, error)
    };
    let good = order_placed("o-big", &[("dune", 1)]);
    let binary = cloudevents::to_binary(&good).unwrap();
    let headers: Vec<(String, String)> = binary
        .headers
        .iter()
        .map(|(name, value)| (name.to_string(), value.clone()))
        .collect();
    let bodies = [
        vec![b'x'; 10 * MIB],
        vec![b'x'; 20 * MIB],
        vec![b'"'; 10 * MIB],
    ];
    for body in &bodies {
        let delivered = consumer.deliver_binary(&headers, body).await.unwrap();
        let (raw, error) = stored(delivered).await;
        assert!(error.contains("over the limit"), "{error}");
        assert!(raw.truncated);
        assert_eq!(raw.body_bytes, body.len() as u64);
        assert_eq!(raw.body.len(), MAX_STORED_BODY_BYTES);
        assert_eq!(raw.body_sha256, sha256_hex(body));
        assert_eq!(raw.headers, headers);
    }

    // Headers over the metadata limit: one of 1 MiB, then 200 small ones.
    let mut huge = headers.clone();
    huge.push(("x-trace".to_owned(), "t".repeat(MIB)));
    let (raw, error) = stored(consumer.deliver_binary(&huge, &binary.body).await.unwrap()).await;
    assert!(error.contains("metadata"), "{error}");
    assert!(raw.truncated);
    assert!(
        raw.headers.last().unwrap().1.len() < 2_000,
        "the long value is cut"
    );
    let mut many = headers.clone();
    many.extend((0..200).map(|n| (format!("x-h{n}"), "v".repeat(400))));
    let (raw, _) = stored(consumer.deliver_binary(&many, &binary.body).await.unwrap()).await;
    assert_eq!(raw.headers.len(), MAX_STORED_HEADERS);
    assert_eq!(raw.headers_dropped, many.len() - MAX_STORED_HEADERS);

    // An envelope over the payload limit, handed over directly.
    let mut oversized = order_placed("o-env", &[("dune", 1)]);
    oversized.payload =
        serde_json::json!({ "order_id": "o-env", "padding": "p".repeat(10 * MIB) }).into();
    assert!(matches!(
        inbox::apply::<reserve_stock_flaky>(db.conn(), &outbox, &oversized).await,
        Err(InboxError::Decode {
            source: outbox_core::DecodeError::PayloadTooLarge { .. },
            ..
        })
    ));
    let (raw, error) = stored(consumer.deliver(&oversized).await.unwrap()).await;
    assert!(error.contains("over the limit"), "{error}");
    assert!(raw.truncated);
    assert_eq!(raw.body_bytes, oversized.payload.len() as u64);

    // Nothing is stuck: the next message applies.
    assert_eq!(
        consumer
            .deliver_binary(&headers, &binary.body)
            .await
            .unwrap(),
        Delivered::Parked {
            reason: ParkReason::Behind
        },
        "o-big waits behind its own dead letters (Block)"
    );
    let next = order_placed("o-next", &[("dune", 3)]);
    assert_eq!(
        consumer.deliver(&next).await.unwrap(),
        Delivered::Applied { attempts: 1 }
    );
    assert_eq!(stock(db, "dune").await, (100, 3));
}
