//! The test kit (`outbox_seaorm::testing`, feature `testing`) on every backend: it drains
//! chains of events until idle, plays the two classic crashes (relay after publish before
//! mark, consumer after its handler before commit) so that effects stay once, fails a drain
//! whose armed crash was never reached, holds retries until a manual clock is advanced,
//! and stops handlers that raise events forever.
//!
//! Handler registrations are global (`inventory`): each consumer name here (`tests.kit.…`)
//! belongs to this file. Handlers count their calls per order id (unique per test) and can
//! be told to fail.

// Scenarios are plain async functions called by generated #[tokio::test]s, which clippy's
// `allow-unwrap-in-tests` does not see as tests.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use chrono::TimeDelta;
use outbox_core::clock::Clock as _;
use outbox_core::mapping::DerivedMapping;
use outbox_core::{DomainEvent, IntegrationEvent, Raise};
use outbox_seaorm::testing::{Crash, ManualClock, TestKit, TestKitError};
use outbox_seaorm::{Outbox, UnitOfWork, inbox_handler, schema};
use outbox_tests::backend_tests;
use outbox_tests::db::TestDb;
use schemars::JsonSchema;
use sea_orm::{ConnectionTrait, DbErr, Statement};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

backend_tests!(
    a_chain_of_events_is_drained_until_idle,
    a_relay_crash_after_publish_publishes_twice_and_applies_once,
    a_consumer_crash_before_commit_rolls_back_and_is_delivered_again,
    an_armed_crash_that_is_never_reached_fails_the_drain,
    a_manual_clock_holds_retries_until_it_is_advanced,
    handlers_raising_events_forever_are_stopped,
    a_consumer_service_with_its_own_database_applies_there,
);

const RESERVE: &str = "tests.kit.reserve-stock";
const NOTIFY: &str = "tests.kit.notify-customer";
const ECHO: &str = "tests.kit.echo";

#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema, Debug, Clone, PartialEq)]
#[integration_event(name = "tests.kit.order-placed.v1", key = order_id)]
/// An order was placed.
pub struct OrderPlacedV1 {
    /// The order.
    pub order_id: String,
}

#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema, Debug, Clone, PartialEq)]
#[integration_event(name = "tests.kit.stock-reserved.v1", key = order_id)]
/// Stock was reserved for an order (raised by the reserving handler).
pub struct StockReservedV1 {
    /// The order.
    pub order_id: String,
}

#[derive(IntegrationEvent, Serialize, Deserialize, JsonSchema, Debug, Clone, PartialEq)]
#[integration_event(name = "tests.kit.echoed.v1", key = chain)]
/// One more echo of a chain that never ends.
pub struct EchoedV1 {
    /// The chain.
    pub chain: String,
    /// Its place in the chain.
    pub n: u32,
}

// A contract raised as it is: the mapping is a copy.
macro_rules! maps_to_itself {
    ($($contract:ty),*) => {
        $(impl From<&$contract> for $contract {
            fn from(event: &$contract) -> Self {
                event.clone()
            }
        })*
    };
}
maps_to_itself!(OrderPlacedV1, StockReservedV1, EchoedV1);

#[derive(DomainEvent)]
/// The domain events of these tests: the contracts themselves.
pub enum KitEvent {
    /// See [`OrderPlacedV1`].
    #[domain_event(contract = OrderPlacedV1)]
    OrderPlaced(OrderPlacedV1),
    /// See [`StockReservedV1`].
    #[domain_event(contract = StockReservedV1)]
    StockReserved(StockReservedV1),
    /// See [`EchoedV1`].
    #[domain_event(contract = EchoedV1)]
    Echoed(EchoedV1),
}

/// Handler calls and failures to inject, per `(consumer, order id)`.
static CALLS: LazyLock<Mutex<HashMap<(&'static str, String), u32>>> =
    LazyLock::new(Default::default);
static FAILURES: LazyLock<Mutex<HashMap<(&'static str, String), u32>>> =
    LazyLock::new(Default::default);

fn called(consumer: &'static str, order_id: &str) -> u32 {
    let mut calls = CALLS.lock().unwrap();
    let count = calls.entry((consumer, order_id.to_owned())).or_default();
    *count += 1;
    *count
}

fn calls(consumer: &'static str, order_id: &str) -> u32 {
    let calls = CALLS.lock().unwrap();
    calls
        .get(&(consumer, order_id.to_owned()))
        .copied()
        .unwrap_or(0)
}

fn fail_next(consumer: &'static str, order_id: &str, times: u32) {
    FAILURES
        .lock()
        .unwrap()
        .insert((consumer, order_id.to_owned()), times);
}

fn should_fail(consumer: &'static str, order_id: &str) -> bool {
    let mut failures = FAILURES.lock().unwrap();
    match failures.get_mut(&(consumer, order_id.to_owned())) {
        Some(left) if *left > 0 => {
            *left -= 1;
            true
        }
        _ => false,
    }
}

async fn record_effect(
    uow: &UnitOfWork<KitEvent>,
    consumer: &str,
    order_id: &str,
) -> Result<(), DbErr> {
    // Ids are the tests' own (uuids), never user input.
    uow.execute_unprepared(&format!(
        "INSERT INTO kit_effects (consumer, order_id) VALUES ('{consumer}', '{order_id}')"
    ))
    .await?;
    Ok(())
}

/// Reserves stock for an order and says so (a second event, published in the next round).
#[inbox_handler(consumer = "tests.kit.reserve-stock")]
async fn reserve_stock(uow: &UnitOfWork<KitEvent>, event: OrderPlacedV1) -> Result<(), DbErr> {
    called(RESERVE, &event.order_id);
    if should_fail(RESERVE, &event.order_id) {
        return Err(DbErr::Custom("injected handler failure".into()));
    }
    record_effect(uow, RESERVE, &event.order_id).await?;
    uow.raise(KitEvent::StockReserved(StockReservedV1 {
        order_id: event.order_id,
    }));
    Ok(())
}

/// Tells the customer, once per reservation.
#[inbox_handler(consumer = "tests.kit.notify-customer")]
async fn notify_customer(uow: &UnitOfWork<KitEvent>, event: StockReservedV1) -> Result<(), DbErr> {
    called(NOTIFY, &event.order_id);
    record_effect(uow, NOTIFY, &event.order_id).await
}

/// Answers every echo with the next one: never idle.
#[inbox_handler(consumer = "tests.kit.echo")]
async fn echo(uow: &UnitOfWork<KitEvent>, event: EchoedV1) -> Result<(), DbErr> {
    called(ECHO, &event.chain);
    uow.raise(KitEvent::Echoed(EchoedV1 {
        chain: event.chain,
        n: event.n + 1,
    }));
    Ok(())
}

async fn setup(db: &TestDb, outbox: &Outbox) {
    schema::install(db.conn(), outbox).await.unwrap();
    db.conn()
        .execute_unprepared("CREATE TABLE kit_effects (consumer VARCHAR(64), order_id VARCHAR(64))")
        .await
        .unwrap();
}

/// Places orders, one unit of work each; returns their ids.
async fn place_orders(db: &TestDb, outbox: &Outbox, count: usize) -> Vec<String> {
    let mut ids = Vec::with_capacity(count);
    for _ in 0..count {
        let order_id = Uuid::now_v7().to_string();
        let uow = outbox.begin(db.conn(), &DerivedMapping).await.unwrap();
        uow.raise(KitEvent::OrderPlaced(OrderPlacedV1 {
            order_id: order_id.clone(),
        }));
        uow.commit().await.unwrap();
        ids.push(order_id);
    }
    ids
}

/// Effects `consumer` applied for `order_id`.
async fn effects(db: &TestDb, consumer: &str, order_id: &str) -> i64 {
    let sql = format!(
        "SELECT COUNT(*) AS n FROM kit_effects WHERE consumer = '{consumer}' AND order_id = '{order_id}'"
    );
    let row = db
        .conn()
        .query_one_raw(Statement::from_string(
            db.conn().get_database_backend(),
            sql,
        ))
        .await
        .unwrap()
        .unwrap();
    row.try_get::<i64>("", "n").unwrap()
}

/// Something about an order.
trait AboutAnOrder: IntegrationEvent {
    fn order_id(self) -> String;
}

impl AboutAnOrder for OrderPlacedV1 {
    fn order_id(self) -> String {
        self.order_id
    }
}

impl AboutAnOrder for StockReservedV1 {
    fn order_id(self) -> String {
        self.order_id
    }
}

/// The orders of the distinct published `C`s, in publish order.
fn published_orders<C: AboutAnOrder>(kit: &TestKit) -> Vec<String> {
    let published = kit.published::<C>().unwrap();
    published.into_iter().map(C::order_id).collect()
}

fn kit(db: &TestDb, outbox: &Outbox) -> TestKit {
    TestKit::builder(db.conn().clone(), outbox.clone())
        .consumer(RESERVE)
        .consumer(NOTIFY)
        .build()
        .unwrap()
}

async fn a_chain_of_events_is_drained_until_idle(db: &TestDb) {
    let outbox = Outbox::default();
    setup(db, &outbox).await;
    let mut kit = kit(db, &outbox);
    let orders = place_orders(db, &outbox, 3).await;

    let report = kit.drain_until_idle().await.unwrap();
    eprintln!("  {report:?}");
    // Round 1 publishes the orders and reserves, round 2 publishes the reservations and
    // notifies, round 3 finds nothing.
    assert_eq!(report.rounds, 3);
    assert_eq!(report.published, 6);
    assert_eq!(report.crashes, 0);
    let placed = published_orders::<OrderPlacedV1>(&kit);
    let reserved = published_orders::<StockReservedV1>(&kit);
    assert_eq!(placed, orders);
    assert_eq!(reserved, orders);
    for order in &orders {
        assert_eq!(effects(db, RESERVE, order).await, 1);
        assert_eq!(effects(db, NOTIFY, order).await, 1);
    }
    // Each consumer received all 6 messages and handled its 3.
    assert_eq!(report.deliveries, 12);
    assert_eq!(report.applied, 6);
    assert_eq!(report.ignored, 6);

    // Idle means idle: a second drain does nothing.
    let again = kit.drain_until_idle().await.unwrap();
    assert_eq!((again.rounds, again.published, again.deliveries), (1, 0, 0));
}

async fn a_relay_crash_after_publish_publishes_twice_and_applies_once(db: &TestDb) {
    let outbox = Outbox::default();
    setup(db, &outbox).await;
    let mut kit = kit(db, &outbox);
    let orders = place_orders(db, &outbox, 4).await;

    kit.crash(Crash::AfterPublishBeforeMark).unwrap();
    assert_eq!(kit.armed_crashes(), [Crash::AfterPublishBeforeMark]);
    let report = kit.drain_until_idle().await.unwrap();
    eprintln!("  {report:?}");
    assert_eq!(report.crashes, 1);
    assert!(kit.armed_crashes().is_empty());

    // The crashed batch reached the broker and was published again by the restarted relay,
    // with the same message ids.
    let accepted = kit.broker().published();
    let distinct = kit.published_envelopes();
    assert_eq!(distinct.len(), 8, "4 orders, 4 reservations");
    assert!(
        accepted.len() > distinct.len(),
        "the crashed batch came twice: {} accepted",
        accepted.len()
    );
    assert!(report.duplicates > 0, "the inbox skipped the second copies");
    let placed = published_orders::<OrderPlacedV1>(&kit);
    assert_eq!(placed, orders);
    for order in &orders {
        assert_eq!(effects(db, RESERVE, order).await, 1, "reserved once");
        assert_eq!(effects(db, NOTIFY, order).await, 1, "notified once");
    }
}

async fn a_consumer_crash_before_commit_rolls_back_and_is_delivered_again(db: &TestDb) {
    let outbox = Outbox::default();
    setup(db, &outbox).await;
    let mut kit = kit(db, &outbox);
    let orders = place_orders(db, &outbox, 2).await;

    kit.crash(Crash::after_handler_before_commit(RESERVE))
        .unwrap();
    kit.crash(Crash::after_handler_before_commit(RESERVE))
        .unwrap();
    let report = kit.drain_until_idle().await.unwrap();
    eprintln!("  {report:?}");
    assert_eq!(report.crashes, 2);

    // Both crashes hit the first order: its handler ran three times, its effect (and the
    // reservation it raised) committed once.
    assert_eq!(calls(RESERVE, &orders[0]), 3);
    assert_eq!(calls(RESERVE, &orders[1]), 1);
    for order in &orders {
        assert_eq!(effects(db, RESERVE, order).await, 1);
        assert_eq!(effects(db, NOTIFY, order).await, 1);
    }
    let reserved = published_orders::<StockReservedV1>(&kit);
    assert_eq!(reserved, orders, "the rolled-back attempts raised nothing");
    assert_eq!(kit.broker().published().len(), 4, "nothing published twice");
}

async fn an_armed_crash_that_is_never_reached_fails_the_drain(db: &TestDb) {
    let outbox = Outbox::default();
    setup(db, &outbox).await;
    let mut kit = kit(db, &outbox);

    let unknown = kit.crash(Crash::after_handler_before_commit("tests.kit.nobody"));
    assert!(
        matches!(unknown, Err(TestKitError::UnknownConsumer { ref name, .. }) if name == "tests.kit.nobody"),
        "{unknown:?}"
    );

    // Nothing to publish: neither crash can happen.
    kit.crash(Crash::AfterPublishBeforeMark).unwrap();
    kit.crash(Crash::after_handler_before_commit(NOTIFY))
        .unwrap();
    match kit.drain_until_idle().await {
        Err(TestKitError::CrashesNotReached { crashes, report }) => {
            assert_eq!(
                crashes,
                [
                    Crash::AfterPublishBeforeMark,
                    Crash::after_handler_before_commit(NOTIFY)
                ]
            );
            assert_eq!(report.crashes, 0);
        }
        other => panic!("expected CrashesNotReached, got {other:?}"),
    }

    // They stay armed and are played once there is something to crash.
    let orders = place_orders(db, &outbox, 1).await;
    let report = kit.drain_until_idle().await.unwrap();
    assert_eq!(report.crashes, 2);
    assert_eq!(effects(db, NOTIFY, &orders[0]).await, 1);
    assert_eq!(calls(NOTIFY, &orders[0]), 2);
}

async fn a_manual_clock_holds_retries_until_it_is_advanced(db: &TestDb) {
    let clock = Arc::new(ManualClock::starting_at(
        "2026-06-01T12:00:00Z".parse().unwrap(),
    ));
    let outbox = Outbox::builder().clock(clock.clone()).build().unwrap();
    setup(db, &outbox).await;
    let mut kit = kit(db, &outbox);
    let orders = place_orders(db, &outbox, 1).await;
    fail_next(RESERVE, &orders[0], 1);

    // The handler fails: the message is parked for its next attempt, which the frozen
    // clock never reaches.
    let report = kit.drain_until_idle().await.unwrap();
    eprintln!("  {report:?}");
    assert_eq!(report.parked, 1);
    assert_eq!(effects(db, RESERVE, &orders[0]).await, 0);
    let due = report.next_retry_due.expect("a retry is due later");
    assert!(due > clock.now());
    let still = kit.drain_until_idle().await.unwrap();
    assert_eq!((still.applied, still.next_retry_due), (0, Some(due)));

    clock.set(due);
    let report = kit.drain_until_idle().await.unwrap();
    eprintln!("  {report:?}");
    assert_eq!(
        report.applied, 2,
        "the retry, then the reservation it raised"
    );
    assert_eq!(effects(db, RESERVE, &orders[0]).await, 1);
    assert_eq!(effects(db, NOTIFY, &orders[0]).await, 1);
    assert_eq!(calls(RESERVE, &orders[0]), 2);

    // A broker outage: the relay's retry waits for the clock too.
    let orders = place_orders(db, &outbox, 1).await;
    kit.broker().go_down();
    let report = kit.drain_until_idle().await.unwrap();
    assert_eq!((report.published, report.relay_retried), (0, 1));
    kit.broker().come_up();
    assert_eq!(
        kit.drain_until_idle().await.unwrap().published,
        0,
        "still in backoff"
    );
    clock.advance(TimeDelta::hours(1));
    let report = kit.drain_until_idle().await.unwrap();
    assert_eq!(report.published, 2);
    assert_eq!(effects(db, NOTIFY, &orders[0]).await, 1);
}

async fn handlers_raising_events_forever_are_stopped(db: &TestDb) {
    let outbox = Outbox::default();
    setup(db, &outbox).await;
    let mut kit = TestKit::builder(db.conn().clone(), outbox.clone())
        .consumer(ECHO)
        .max_rounds(5)
        .build()
        .unwrap();
    let chain = Uuid::now_v7().to_string();
    let uow = outbox.begin(db.conn(), &DerivedMapping).await.unwrap();
    uow.raise(KitEvent::Echoed(EchoedV1 {
        chain: chain.clone(),
        n: 0,
    }));
    uow.commit().await.unwrap();

    match kit.drain_until_idle().await {
        Err(TestKitError::NotIdle { rounds, report }) => {
            assert_eq!((rounds, report.rounds), (5, 5));
            assert_eq!(report.applied, 5);
        }
        other => panic!("expected NotIdle, got {other:?}"),
    }
    assert_eq!(calls(ECHO, &chain), 5);
    let echoes: Vec<u32> = kit
        .published::<EchoedV1>()
        .unwrap()
        .into_iter()
        .map(|e| e.n)
        .collect();
    assert_eq!(echoes, [0, 1, 2, 3, 4]);
}

async fn a_consumer_service_with_its_own_database_applies_there(db: &TestDb) {
    let outbox = Outbox::default();
    setup(db, &outbox).await;
    let service = TestDb::open(db.backend(), "test_kit::consumer_service")
        .await
        .expect("a second database on the same backend");
    let service_outbox = Outbox::default();
    setup(&service, &service_outbox).await;
    let mut kit = TestKit::builder(db.conn().clone(), outbox.clone())
        .consumer_in(
            service.conn().clone(),
            service_outbox.clone(),
            RESERVE,
            |c| c,
        )
        .build()
        .unwrap();
    let orders = place_orders(db, &outbox, 2).await;
    kit.crash(Crash::after_handler_before_commit(RESERVE))
        .unwrap();

    let report = kit.drain_until_idle().await.unwrap();
    eprintln!("  {report:?}");
    assert_eq!((report.published, report.crashes), (2, 1));
    for order in &orders {
        assert_eq!(
            effects(&service, RESERVE, order).await,
            1,
            "applied in the service's database"
        );
        assert_eq!(
            effects(db, RESERVE, order).await,
            0,
            "not in the producer's"
        );
    }
    // What the service's handler raised waits in the service's own outbox.
    assert!(kit.published::<StockReservedV1>().unwrap().is_empty());
    let pending = outbox_seaorm::record::OutboxRecord::count(service.conn(), &service_outbox)
        .await
        .unwrap();
    assert_eq!(pending, 2);
    service.close().await;
}
