//! The relay on every backend (book: What it guarantees, 2–5): every committed row
//! published at least once, in order per aggregate, from several relays, never stuck on a
//! poison row.
//!
//! Each scenario runs on a SQLite file, SQLite in memory, PostgreSQL and MariaDB. The
//! numbered scenarios are those of the outbox article the Bookstore demo plays
//! (book: The demo), and print the same console lines as the article.

// Scenarios are plain async functions called by generated #[tokio::test]s, which clippy's
// `allow-unwrap-in-tests` does not see as tests.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::TimeDelta;
use outbox_core::clock::ManualClock;
use outbox_core::in_process::{AfterPublish, InProcessBroker};
use outbox_core::policy::{Backoff, DeadLetterPolicy, Ordering};
use outbox_core::publish::{BatchOutcome, PublishError, Publisher};
use outbox_core::{Envelope, IntegrationEvent, Raise};
use outbox_seaorm::ops::Operations;
use outbox_seaorm::record::OutboxRecord;
use outbox_seaorm::relay::{Relay, RelayBuilder};
use outbox_seaorm::schema::{self, OutboxStatus};
use outbox_seaorm::{Outbox, UnitOfWorkError};
use outbox_tests::backend_tests;
use outbox_tests::bookstore::{
    Order, OrderNotedV2, OrderingContracts, OrderingEvent, PlaceOrder, count_orders,
    create_business_tables,
};
use outbox_tests::db::{Backend, TestDb};
use sea_orm::{ConnectionTrait, DbBackend, DbErr, Statement};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

backend_tests!(
    scenario_3_broker_down_then_back,
    scenario_4_crash_between_publish_and_mark,
    scenario_6_two_relays_claim_disjoint_rows,
    per_aggregate_relays_own_disjoint_partitions,
    four_relays_with_concurrent_producers,
    four_unordered_relays_with_concurrent_producers,
    relay_killed_mid_batch_is_taken_over,
    poison_row_blocks_only_its_aggregate,
    unreadable_rows_are_dead_lettered,
    skip_policy_and_operator_skip,
    graceful_shutdown_finishes_the_batch,
    fast_path_publishes_right_after_commit,
    purge_and_status,
    pipelined_relay_claims_the_next_batch_while_publishing,
    failure_holds_back_rows_claimed_ahead,
    claim_ahead_gives_way_to_a_lease_takeover,
    claim_beside_a_mark_holds_back_rows_behind_a_retry,
    claim_ahead_does_not_pass_over_a_late_commit,
    published_rows_are_deleted_unless_a_retention_keeps_them,
    the_claim_goes_back_to_the_aggregate_checks_once_a_row_waits,
);

const AGGREGATE: &str = OrderNotedV2::AGGREGATE_TYPE;

/// A retention for the tests that look at published rows afterwards (the default deletes a
/// row once it is published).
const KEEP_PUBLISHED: Option<Duration> = Some(Duration::from_secs(7 * 24 * 3600));

fn t0() -> chrono::DateTime<chrono::Utc> {
    "2026-03-01T09:00:00Z".parse().unwrap()
}

/// An outbox on a manual clock.
fn manual_outbox() -> (Outbox, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::starting_at(t0()));
    let outbox = Outbox::builder().clock(clock.clone()).build().unwrap();
    (outbox, clock)
}

async fn setup(db: &TestDb, outbox: &Outbox) {
    schema::install(db.conn(), outbox).await.expect("install");
    create_business_tables(db.conn())
        .await
        .expect("business tables");
}

/// A relay with fast test timings and a deterministic backoff (1 s, 2 s, 4 s, …).
fn relay(
    db: &TestDb,
    outbox: &Outbox,
    broker: &InProcessBroker,
    id: &str,
) -> RelayBuilder<InProcessBroker> {
    Relay::builder(db.conn().clone(), outbox.clone(), broker.clone())
        .instance_id(id)
        .poll_interval(Duration::from_millis(20))
        .heartbeat_interval(Duration::from_millis(200))
        .lease_ttl(Duration::from_secs(2))
        .publish_timeout(Duration::from_millis(800))
        .backoff(Backoff::new().with_jitter(false))
}

/// Commits `count` notes `from..from + count` about `order` in one unit of work.
async fn note(db: &TestDb, outbox: &Outbox, order: &str, from: u32, count: u32) -> Vec<Uuid> {
    let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
    for n in from..from + count {
        uow.raise(OrderingEvent::Noted {
            order_id: order.to_owned(),
            n,
        });
    }
    uow.commit().await.unwrap().message_ids
}

fn note_number(envelope: &Envelope) -> u32 {
    envelope.decode::<OrderNotedV2>().unwrap().n
}

/// The note numbers the broker received for `order`, in arrival order.
fn received(broker: &InProcessBroker, order: &str) -> Vec<u32> {
    broker
        .published_for(AGGREGATE, order)
        .iter()
        .map(note_number)
        .collect()
}

async fn rows(db: &TestDb, outbox: &Outbox) -> Vec<OutboxRecord> {
    OutboxRecord::list(db.conn(), outbox, 100_000)
        .await
        .unwrap()
}

async fn row(db: &TestDb, outbox: &Outbox, id: Uuid) -> OutboxRecord {
    rows(db, outbox)
        .await
        .into_iter()
        .find(|r| r.envelope.message_id == id)
        .unwrap()
}

fn is_server(db: &TestDb) -> bool {
    matches!(db.backend(), Backend::Postgres | Backend::MariaDb)
}

async fn checkout(
    db: &TestDb,
    outbox: &Outbox,
    checkout_id: &str,
) -> Result<String, UnitOfWorkError<DbErr>> {
    outbox
        .transaction(db.conn(), &OrderingContracts, async |uow| {
            let order = Order::place(uow, PlaceOrder::sample(checkout_id));
            order.save(uow).await?;
            Ok(order.id)
        })
        .await
}

/// Scenario 3 (book: The demo): with the broker down, checkout still succeeds and the relay records
/// an attempt; once the broker is back the rows go out, in order.
async fn scenario_3_broker_down_then_back(db: &TestDb) {
    let (outbox, clock) = manual_outbox();
    setup(db, &outbox).await;
    let broker = InProcessBroker::new();
    let mut relay = relay(db, &outbox, &broker, "relay-1")
        .retention(KEEP_PUBLISHED)
        .build()
        .unwrap();
    broker.go_down();

    eprintln!("3) Outbox: same two scenarios");
    let order_id = checkout(db, &outbox, "checkout-1")
        .await
        .expect("checkout succeeds");
    let click_2 = checkout(db, &outbox, "checkout-1")
        .await
        .expect_err("double click");
    eprintln!("  click 2: {click_2}");
    // A later event of the same order, committed while the broker is down.
    note(db, &outbox, &order_id, 1, 1).await;

    let down = relay.drain().await.unwrap();
    eprintln!("  relay while broker is down: published {}", down.published);
    assert_eq!(down.published, 0);
    assert_eq!(
        down.retried, 1,
        "the order's first row failed, its second waits behind it"
    );
    let stored = rows(db, &outbox).await;
    assert_eq!(stored[0].attempts, 1);
    assert_eq!(stored[0].status, OutboxStatus::Pending);
    assert_eq!(
        stored[0].next_attempt_at,
        t0() + TimeDelta::seconds(1),
        "backoff 1 s"
    );
    assert!(stored[0].last_error.as_deref().unwrap().contains("down"));
    assert_eq!(
        stored[1].attempts, 0,
        "not attempted: behind the failed row"
    );

    broker.come_up();
    assert_eq!(
        relay.drain().await.unwrap().published,
        0,
        "still in backoff"
    );
    clock.advance(TimeDelta::seconds(1));
    let back = relay.drain().await.unwrap();
    eprintln!("  relay after broker is back: published {}", back.published);
    assert_eq!(back.published, 2);

    let stored = rows(db, &outbox).await;
    eprintln!(
        "  orders in db: {}, outbox rows: {}, attempts: {}, messages on broker: {}",
        count_orders(db.conn()).await.unwrap(),
        stored.len(),
        stored[0].attempts,
        broker.len()
    );
    assert_eq!(count_orders(db.conn()).await.unwrap(), 1);
    assert!(stored.iter().all(|r| r.status == OutboxStatus::Published));
    assert_eq!(stored[0].published_at, Some(t0() + TimeDelta::seconds(1)));
    let ids: Vec<Uuid> = broker.message_ids();
    assert_eq!(
        ids,
        stored
            .iter()
            .map(|r| r.envelope.message_id)
            .collect::<Vec<_>>(),
        "in order"
    );
}

/// The default retention (zero): the mark deletes a published row, on the relay's path and
/// on the fast path; a retention keeps it as `published`, with its attempts and time.
async fn published_rows_are_deleted_unless_a_retention_keeps_them(db: &TestDb) {
    let (outbox, clock) = manual_outbox();
    setup(db, &outbox).await;
    let broker = InProcessBroker::new();
    broker.fail_messages(|e| {
        (note_number(e) == 1).then(|| PublishError::unavailable("once, then fixed"))
    });
    let ids = note(db, &outbox, "order-1", 0, 3).await;
    let mut deleting = relay(db, &outbox, &broker, "relay-1").build().unwrap();
    assert_eq!(deleting.config().retention, Some(Duration::ZERO));
    let first = deleting.drain().await.unwrap();
    assert_eq!((first.published, first.retried), (1, 1));
    let left: Vec<(Uuid, OutboxStatus)> = rows(db, &outbox)
        .await
        .iter()
        .map(|r| (r.envelope.message_id, r.status))
        .collect();
    assert_eq!(
        left,
        [
            (ids[1], OutboxStatus::Pending),
            (ids[2], OutboxStatus::Pending)
        ],
        "the published row is gone, the failed one and the one behind it stay"
    );
    broker.clear_failures();
    clock.advance(TimeDelta::seconds(1));
    assert_eq!(deleting.drain().await.unwrap().published, 2);
    assert!(rows(db, &outbox).await.is_empty());
    assert_eq!(received(&broker, "order-1"), [0, 1, 2]);
    // The fast path deletes too.
    let fast = deleting.fast_path();
    let ids = note(db, &outbox, "order-2", 0, 2).await;
    assert_eq!(fast.publish_committed(&ids).await.unwrap().published, 2);
    assert!(rows(db, &outbox).await.is_empty());

    // A retention keeps published rows.
    drop(deleting);
    let mut keeping = relay(db, &outbox, &broker, "relay-2")
        .retention(Some(Duration::from_secs(3600)))
        .build()
        .unwrap();
    let kept = note(db, &outbox, "order-3", 0, 2).await;
    clock.advance(TimeDelta::seconds(10));
    assert_eq!(keeping.drain().await.unwrap().published, 2);
    let stored = rows(db, &outbox).await;
    assert_eq!(
        stored
            .iter()
            .map(|r| (r.envelope.message_id, r.status, r.published_at))
            .collect::<Vec<_>>(),
        kept.iter()
            .map(|id| (
                *id,
                OutboxStatus::Published,
                Some(t0() + TimeDelta::seconds(11))
            ))
            .collect::<Vec<_>>()
    );
    let ids = note(db, &outbox, "order-4", 0, 1).await;
    assert_eq!(
        keeping
            .fast_path()
            .publish_committed(&ids)
            .await
            .unwrap()
            .published,
        1
    );
    assert_eq!(
        row(db, &outbox, ids[0]).await.status,
        OutboxStatus::Published
    );
}

/// The claim skips the per-aggregate checks while no row waits (PostgreSQL evaluates a
/// whole-table guard once per statement): the batch right after one row goes into backoff,
/// or dead, must hold back that aggregate's later rows, in the same drain and with the
/// batches claimed ahead, while every other aggregate goes on.
async fn the_claim_goes_back_to_the_aggregate_checks_once_a_row_waits(db: &TestDb) {
    let (outbox, clock) = manual_outbox();
    setup(db, &outbox).await;
    let broker = InProcessBroker::new();
    broker.fail_messages(|e| match (e.aggregate_id.as_str(), note_number(e)) {
        ("order-7", 1) => Some(PublishError::unavailable("backoff")),
        ("order-13", 0) => Some(PublishError::rejected("dead")),
        _ => None,
    });
    // 40 aggregates × 4 notes, one note of each aggregate per round: each aggregate's
    // rows are spread over the batches of 10.
    for n in 0..4 {
        for a in 0..40 {
            note(db, &outbox, &format!("order-{a}"), n, 1).await;
        }
    }
    let mut relay = relay(db, &outbox, &broker, "relay-1")
        .batch_size(10)
        .build()
        .unwrap();
    let report = relay.drain().await.unwrap();
    assert_eq!(
        (report.published, report.retried, report.dead_lettered),
        (160 - 3 - 4, 1, 1),
        "{report:?}"
    );
    for a in 0..40 {
        let order = format!("order-{a}");
        let expected: &[u32] = match a {
            7 => &[0],
            13 => &[],
            _ => &[0, 1, 2, 3],
        };
        assert_eq!(received(&broker, &order), expected, "{order}");
    }
    // After the backoff the waiting aggregate goes on in order; the dead one stays blocked
    // until an operator requeues its row.
    broker.clear_failures();
    clock.advance(TimeDelta::seconds(1));
    assert_eq!(relay.drain().await.unwrap().published, 3);
    assert_eq!(received(&broker, "order-7"), [0, 1, 2, 3]);
    assert!(received(&broker, "order-13").is_empty());
    let dead = rows(db, &outbox)
        .await
        .into_iter()
        .find(|r| r.status == OutboxStatus::Dead)
        .unwrap();
    let ops = Operations::new(db.conn().clone(), outbox.clone());
    ops.requeue(dead.envelope.message_id, "alice", None)
        .await
        .unwrap();
    assert_eq!(relay.drain().await.unwrap().published, 4);
    assert_eq!(received(&broker, "order-13"), [0, 1, 2, 3]);
}

/// Scenario 4 (book: The demo): the relay crashes after the broker took the message and before
/// the row was marked; the restarted relay publishes it again with the same message id.
async fn scenario_4_crash_between_publish_and_mark(db: &TestDb) {
    let (outbox, clock) = manual_outbox();
    setup(db, &outbox).await;
    let broker = InProcessBroker::new();
    checkout(db, &outbox, "checkout-1").await.unwrap();

    eprintln!("4) Relay crashes between publish and mark; consumer has an inbox");
    broker.crash_after_next_publish(AfterPublish::Hang);
    let mut first = relay(db, &outbox, &broker, "relay-1").build().unwrap();
    let crashed = tokio::spawn(async move { first.drain().await });
    assert!(broker.wait_for_published(1, Duration::from_secs(10)).await);
    crashed.abort();
    assert!(crashed.await.unwrap_err().is_cancelled());
    eprintln!("  relay #1: Process crashed (simulated)");
    assert_eq!(
        rows(db, &outbox).await[0].status,
        OutboxStatus::Pending,
        "not marked"
    );

    // The crashed relay's leases expire; the restarted relay takes over.
    clock.advance(TimeDelta::seconds(3));
    let mut second = relay(db, &outbox, &broker, "relay-2")
        .retention(KEEP_PUBLISHED)
        .build()
        .unwrap();
    let report = second.drain().await.unwrap();
    eprintln!("  relay #2 (restart): published {}", report.published);
    assert_eq!(report.published, 1);
    let ids = broker.message_ids();
    let distinct: HashSet<Uuid> = ids.iter().copied().collect();
    eprintln!(
        "  on broker: {} messages, distinct ids: {}",
        ids.len(),
        distinct.len()
    );
    assert_eq!((ids.len(), distinct.len()), (2, 1));
    let stored = rows(db, &outbox).await;
    assert_eq!(stored[0].status, OutboxStatus::Published);
    assert_eq!(stored[0].envelope.message_id, ids[0]);
}

/// Scenario 6 (book: The demo): two relays claim disjoint batches (`SKIP LOCKED` on PostgreSQL and
/// MariaDB; on SQLite the second relay gets nothing while the first holds the relay lease).
async fn scenario_6_two_relays_claim_disjoint_rows(db: &TestDb) {
    let outbox = Outbox::default();
    setup(db, &outbox).await;
    for i in 1..=6 {
        note(db, &outbox, &format!("order-{i}"), 0, 1).await;
    }
    let seq_of: BTreeMap<Uuid, i64> = rows(db, &outbox)
        .await
        .iter()
        .map(|r| (r.envelope.message_id, r.seq))
        .collect();
    let (broker_a, broker_b) = (InProcessBroker::new(), InProcessBroker::new());
    broker_a.pause();
    broker_b.pause();
    let build = |broker: &InProcessBroker, id: &str| {
        relay(db, &outbox, broker, id)
            .ordering(Ordering::Unordered)
            .batch_size(3)
            .build()
            .unwrap()
    };
    let mut relay_a = build(&broker_a, "relay-a");
    let mut relay_b = build(&broker_b, "relay-b");
    let a = tokio::spawn(async move { relay_a.run_batch().await });
    assert!(broker_a.wait_for_waiting(1, Duration::from_secs(10)).await);
    let b = tokio::spawn(async move { relay_b.run_batch().await });
    if is_server(db) {
        assert!(broker_b.wait_for_waiting(1, Duration::from_secs(10)).await);
    }
    broker_a.resume();
    broker_b.resume();
    let (a, b) = (a.await.unwrap().unwrap(), b.await.unwrap().unwrap());
    let claimed = |broker: &InProcessBroker| -> Vec<i64> {
        broker.message_ids().iter().map(|id| seq_of[id]).collect()
    };
    eprintln!("6) Two relay instances with FOR UPDATE SKIP LOCKED");
    eprintln!(
        "  relay A claimed {:?}, relay B claimed {:?}",
        claimed(&broker_a),
        claimed(&broker_b)
    );
    let first: Vec<i64> = seq_of.values().copied().collect();
    assert_eq!(claimed(&broker_a), first[..3]);
    if is_server(db) {
        assert_eq!(claimed(&broker_b), first[3..]);
        assert_eq!((a.published, b.published), (3, 3));
    } else {
        assert!(claimed(&broker_b).is_empty(), "one SQLite relay at a time");
        assert_eq!(b.claimed, 0);
    }
}

/// `PerAggregate`: two relays split the partitions through leases; every aggregate is
/// published by exactly one of them, in order.
async fn per_aggregate_relays_own_disjoint_partitions(db: &TestDb) {
    let outbox = Outbox::builder().partitions(8).build().unwrap();
    setup(db, &outbox).await;
    for i in 0..20 {
        note(db, &outbox, &format!("order-{i}"), 0, 3).await;
    }
    let (broker_a, broker_b) = (InProcessBroker::new(), InProcessBroker::new());
    let mut relay_a = relay(db, &outbox, &broker_a, "relay-a").build().unwrap();
    let mut relay_b = relay(db, &outbox, &broker_b, "relay-b").build().unwrap();
    // A first takes everything, then B joins: A hands over B's share, B takes it.
    let alone = relay_a.refresh_leases().await.unwrap();
    relay_b.refresh_leases().await.unwrap();
    let a = relay_a.refresh_leases().await.unwrap();
    let b = relay_b.refresh_leases().await.unwrap();
    let both: HashSet<&String> = a.owned.iter().chain(&b.owned).collect();
    if is_server(db) {
        assert_eq!(alone.owned.len(), 8);
        assert_eq!(a.live_instances, ["relay-a", "relay-b"]);
        assert!(!a.owned.is_empty() && !b.owned.is_empty(), "{a:?} {b:?}");
        assert_eq!(both.len(), 8, "disjoint and complete: {a:?} {b:?}");
        assert_eq!(a.owned.len() + b.owned.len(), 8);
    } else {
        assert_eq!(
            a.owned.len() + b.owned.len(),
            1,
            "the single SQLite relay lease"
        );
    }
    let (ra, rb) = (
        relay_a.drain().await.unwrap(),
        relay_b.drain().await.unwrap(),
    );
    assert_eq!(ra.published + rb.published, 60);
    for i in 0..20 {
        let order = format!("order-{i}");
        let (from_a, from_b) = (received(&broker_a, &order), received(&broker_b, &order));
        assert!(
            from_a.is_empty() || from_b.is_empty(),
            "{order} published by one relay"
        );
        assert_eq!([from_a, from_b].concat(), [0, 1, 2], "{order} in order");
    }
}

/// 4 relays × 200 aggregates × 50 events, with 4 producers committing concurrently: every
/// event published once, in order per aggregate.
async fn four_relays_with_concurrent_producers(db: &TestDb) {
    many_relays(db, Ordering::PerAggregate, 200, 50).await;
}

/// The same with `Unordered` relays (`SKIP LOCKED` only, no leases on PostgreSQL and
/// MariaDB): every event published once.
async fn four_unordered_relays_with_concurrent_producers(db: &TestDb) {
    many_relays(db, Ordering::Unordered, 100, 20).await;
}

async fn many_relays(db: &TestDb, ordering: Ordering, aggregates: u32, events: u32) {
    const PER_COMMIT: u32 = 5;
    let outbox = Outbox::default();
    setup(db, &outbox).await;
    let broker = InProcessBroker::new();
    let shutdown = CancellationToken::new();
    let mut relays = Vec::new();
    for r in 0..4 {
        let relay = relay(db, &outbox, &broker, &format!("relay-{r}"))
            .ordering(ordering)
            .batch_size(200)
            .build()
            .unwrap();
        relays.push(tokio::spawn(relay.run(shutdown.clone())));
    }
    let started = Instant::now();
    let mut producers = Vec::new();
    for p in 0..4u32 {
        let conn = db.conn().clone();
        let outbox = outbox.clone();
        producers.push(tokio::spawn(async move {
            for round in 0..events / PER_COMMIT {
                for a in (p..aggregates).step_by(4) {
                    let uow = outbox.begin(&conn, &OrderingContracts).await.unwrap();
                    for k in 0..PER_COMMIT {
                        uow.raise(OrderingEvent::Noted {
                            order_id: format!("order-{a}"),
                            n: round * PER_COMMIT + k,
                        });
                    }
                    uow.commit().await.unwrap();
                }
            }
        }));
    }
    for producer in producers {
        producer.await.unwrap();
    }
    let total = (aggregates * events) as usize;
    let produced = started.elapsed();
    let all = broker
        .wait_for_published(total, Duration::from_secs(120))
        .await;
    let published = started.elapsed();
    shutdown.cancel();
    let mut reports = Vec::new();
    for relay in relays {
        reports.push(relay.await.unwrap().unwrap());
    }
    eprintln!(
        "  {total} events: produced in {produced:?}, all published after {published:?}; per relay: {:?}",
        reports
            .iter()
            .map(|r| (r.published, r.errors))
            .collect::<Vec<_>>()
    );
    assert!(all, "only {} of {total} published", broker.len());
    assert!(reports.iter().all(|r| r.errors == 0), "{reports:?}");
    assert_eq!(
        broker.len(),
        total,
        "no duplicates without an injected crash"
    );
    let distinct: HashSet<Uuid> = broker.message_ids().into_iter().collect();
    assert_eq!(distinct.len(), total);
    for a in 0..aggregates {
        let mut numbers = received(&broker, &format!("order-{a}"));
        if ordering == Ordering::Unordered {
            numbers.sort_unstable();
        }
        assert_eq!(
            numbers,
            (0..events).collect::<Vec<_>>(),
            "order-{a} in order"
        );
    }
    assert!(
        rows(db, &outbox).await.is_empty(),
        "every row published and deleted"
    );
    if is_server(db) {
        assert!(
            reports.iter().filter(|r| r.published > 0).count() >= 2,
            "the work was shared: {reports:?}"
        );
    }
}

/// A relay killed in the middle of a batch: its leases expire, another relay resumes and
/// nothing is lost.
async fn relay_killed_mid_batch_is_taken_over(db: &TestDb) {
    let outbox = Outbox::default();
    setup(db, &outbox).await;
    let broker = InProcessBroker::new();
    let ids = note(db, &outbox, "order-1", 0, 5).await;
    broker.pause();
    let shutdown = CancellationToken::new();
    let killed = tokio::spawn(
        relay(db, &outbox, &broker, "relay-killed")
            .lease_ttl(Duration::from_secs(1))
            .heartbeat_interval(Duration::from_millis(100))
            .publish_timeout(Duration::from_millis(400))
            .build()
            .unwrap()
            .run(shutdown.clone()),
    );
    assert!(
        broker.wait_for_waiting(1, Duration::from_secs(10)).await,
        "mid-batch"
    );
    killed.abort();
    assert!(killed.await.unwrap_err().is_cancelled());
    broker.resume();
    let started = Instant::now();
    let survivor = tokio::spawn(
        relay(db, &outbox, &broker, "relay-survivor")
            .lease_ttl(Duration::from_secs(1))
            .heartbeat_interval(Duration::from_millis(100))
            .publish_timeout(Duration::from_millis(400))
            .build()
            .unwrap()
            .run(shutdown.clone()),
    );
    assert!(broker.wait_for_published(5, Duration::from_secs(20)).await);
    eprintln!("  taken over and published after {:?}", started.elapsed());
    shutdown.cancel();
    survivor.await.unwrap().unwrap();
    assert_eq!(received(&broker, "order-1"), [0, 1, 2, 3, 4]);
    assert_eq!(broker.message_ids(), ids);
}

/// A poison row goes dead after `max_attempts`; under `Block` it holds back its own
/// aggregate only; an operator requeue publishes it and what waited behind it, in order.
async fn poison_row_blocks_only_its_aggregate(db: &TestDb) {
    let (outbox, clock) = manual_outbox();
    setup(db, &outbox).await;
    let broker = InProcessBroker::new();
    broker.fail_messages(|e| {
        (e.aggregate_id == "poison")
            .then(|| PublishError::unavailable("poison is unroutable today"))
    });
    let mut relay = relay(db, &outbox, &broker, "relay-1")
        .max_attempts(3)
        .build()
        .unwrap();
    let poison = note(db, &outbox, "poison", 0, 2).await;
    note(db, &outbox, "healthy", 0, 2).await;

    let first = relay.drain().await.unwrap();
    assert_eq!((first.published, first.retried), (2, 1));
    assert_eq!(received(&broker, "healthy"), [0, 1]);
    for attempt in 2..=3 {
        clock.advance(TimeDelta::seconds(10));
        // Other aggregates keep flowing while the poison row is retried.
        note(db, &outbox, "healthy", attempt, 1).await;
        let report = relay.drain().await.unwrap();
        assert_eq!(report.published, 1, "attempt {attempt}");
    }
    let dead = row(db, &outbox, poison[0]).await;
    assert_eq!((dead.status, dead.attempts), (OutboxStatus::Dead, 3));
    assert!(dead.last_error.unwrap().contains("unroutable"));
    let behind = row(db, &outbox, poison[1]).await;
    assert_eq!(
        (behind.status, behind.attempts),
        (OutboxStatus::Pending, 0),
        "blocked"
    );
    clock.advance(TimeDelta::seconds(60));
    note(db, &outbox, "healthy", 4, 1).await;
    assert_eq!(
        relay.drain().await.unwrap().published,
        1,
        "only the healthy row"
    );
    assert_eq!(received(&broker, "healthy"), [0, 1, 2, 3, 4]);
    assert!(received(&broker, "poison").is_empty());

    let ops = Operations::new(db.conn().clone(), outbox.clone());
    let status = ops.status().await.unwrap();
    assert_eq!(status.pending, 1);
    assert_eq!(status.dead_by_event_type[OrderNotedV2::EVENT_TYPE], 1);
    let letters = ops.dead_letters(None, 10).await.unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].envelope.message_id, poison[0]);

    broker.clear_failures();
    let action = ops
        .requeue(poison[0], "alice", Some("route fixed"))
        .await
        .unwrap();
    assert_eq!(action.previous_status, "dead");
    let report = relay.drain().await.unwrap();
    assert_eq!(report.published, 2);
    assert_eq!(
        received(&broker, "poison"),
        [0, 1],
        "the requeued row first"
    );
    let log = ops.operator_log(Some(poison[0])).await.unwrap();
    assert_eq!(log.len(), 1);
    assert_eq!(
        (log[0].actor.as_str(), log[0].reason.as_deref()),
        ("alice", Some("route fixed"))
    );
    assert!(log[0].last_error.as_deref().unwrap().contains("unroutable"));
    // Published, the row is gone (the default retention): nothing to requeue.
    assert!(matches!(
        ops.requeue(poison[0], "alice", None).await,
        Err(outbox_seaorm::ops::OpsError::NotFound { .. })
    ));
}

/// A row whose envelope cannot be read (written by another tool: a version that disagrees
/// with its event type, an invalid event type) is dead-lettered at once and, under `Block`,
/// holds back its own aggregate only; readable rows of the same event type around it go
/// out.
async fn unreadable_rows_are_dead_lettered(db: &TestDb) {
    let (outbox, _clock) = manual_outbox();
    setup(db, &outbox).await;
    let broker = InProcessBroker::new();
    let a = note(db, &outbox, "a", 0, 3).await;
    let b = note(db, &outbox, "b", 0, 1).await;
    let c = note(db, &outbox, "c", 0, 1).await;
    let seq_of = |records: &[OutboxRecord], id: Uuid| {
        records
            .iter()
            .find(|r| r.envelope.message_id == id)
            .unwrap()
            .seq
    };
    let stored = rows(db, &outbox).await;
    let (a0, a1, a2, b0, c0) = (
        seq_of(&stored, a[0]),
        seq_of(&stored, a[1]),
        seq_of(&stored, a[2]),
        seq_of(&stored, b[0]),
        seq_of(&stored, c[0]),
    );
    let backend = db.conn().get_database_backend();
    for sql in [
        format!("UPDATE outbox SET version = 7 WHERE seq = {a1}"),
        format!("UPDATE outbox SET event_type = 'Not An Event Type' WHERE seq = {b0}"),
    ] {
        db.conn()
            .execute_raw(Statement::from_string(backend, sql))
            .await
            .unwrap();
    }
    let mut relay = relay(db, &outbox, &broker, "relay-1").build().unwrap();
    let report = relay.drain().await.unwrap();
    assert_eq!(report.published, 2, "{report:?}");
    assert_eq!(report.dead_lettered, 2, "{report:?}");
    assert_eq!(received(&broker, "a"), [0]);
    assert!(received(&broker, "b").is_empty());
    assert_eq!(received(&broker, "c"), [0]);
    let row_of = async |seq: i64| {
        db.conn()
            .query_one_raw(Statement::from_string(
                backend,
                format!("SELECT status, last_error FROM outbox WHERE seq = {seq}"),
            ))
            .await
            .unwrap()
    };
    let state = async |seq: i64| {
        let row = row_of(seq).await.unwrap();
        (
            row.try_get::<String>("", "status").unwrap(),
            row.try_get::<Option<String>>("", "last_error").unwrap(),
        )
    };
    for seq in [a0, c0] {
        assert!(row_of(seq).await.is_none(), "published and deleted");
    }
    for seq in [a1, b0] {
        let (status, error) = state(seq).await;
        assert_eq!(status, "dead");
        assert!(error.unwrap().starts_with("unreadable row"));
    }
    assert_eq!(
        state(a2).await,
        ("pending".to_owned(), None),
        "blocked behind its aggregate's dead row"
    );
}

/// `Skip`: a dead row does not hold its aggregate back; a permanent error dead-letters at
/// once; an operator `skip` (recorded) releases an aggregate blocked under `Block`.
async fn skip_policy_and_operator_skip(db: &TestDb) {
    let (outbox, clock) = manual_outbox();
    setup(db, &outbox).await;
    let broker = InProcessBroker::new();
    broker.fail_messages(|e| {
        (note_number(e) == 0).then(|| PublishError::rejected("schema violation"))
    });
    let rejected = note(db, &outbox, "order-skip", 0, 3).await;
    let mut skipping = relay(db, &outbox, &broker, "relay-skip")
        .dead_letter_policy(DeadLetterPolicy::Skip)
        .build()
        .unwrap();
    let report = skipping.drain().await.unwrap();
    assert_eq!(
        report.dead_lettered, 1,
        "a permanent error dead-letters at once"
    );
    assert_eq!(report.published, 2, "Skip: the later rows go on");
    let dead = row(db, &outbox, rejected[0]).await;
    assert_eq!((dead.status, dead.attempts), (OutboxStatus::Dead, 1));
    assert_eq!(received(&broker, "order-skip"), [1, 2]);
    drop(skipping);
    // The dropped relay's leases expire.
    clock.advance(TimeDelta::seconds(3));

    let blocked = note(db, &outbox, "order-block", 0, 2).await;
    let mut blocking = relay(db, &outbox, &broker, "relay-block").build().unwrap();
    let report = blocking.drain().await.unwrap();
    assert_eq!((report.dead_lettered, report.published), (1, 0));
    let ops = Operations::new(db.conn().clone(), outbox.clone());
    assert!(matches!(
        ops.skip(blocked[0], "bob", " ").await,
        Err(outbox_seaorm::ops::OpsError::MissingReason)
    ));
    let action = ops
        .skip(blocked[0], "bob", "superseded by v3")
        .await
        .unwrap();
    assert_eq!(action.previous_status, "dead");
    assert_eq!(blocking.drain().await.unwrap().published, 1);
    assert_eq!(received(&broker, "order-block"), [1]);
    let skipped = row(db, &outbox, blocked[0]).await;
    assert_eq!(skipped.status, OutboxStatus::Skipped);
    let status = ops.status().await.unwrap();
    assert_eq!(status.skipped, 1);
    assert_eq!(status.dead(), 1, "order-skip's row stays dead");
    let log = ops.operator_log(None).await.unwrap();
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].action, outbox_seaorm::ops::OperatorActionKind::Skip);
    assert_eq!(log[0].actor, "bob");
    assert_eq!(log[0].reason.as_deref(), Some("superseded by v3"));
    // The latest entries, oldest first, read without the whole log: the skip, then a
    // requeue and a second skip of the same row.
    ops.requeue(blocked[0], "ann", Some("one more try"))
        .await
        .unwrap();
    ops.skip(blocked[0], "cy", "gone for good").await.unwrap();
    let latest: Vec<(String, Option<String>)> = ops
        .latest_operator_actions(2)
        .await
        .unwrap()
        .into_iter()
        .map(|action| (action.actor, action.reason))
        .collect();
    assert_eq!(
        latest,
        [
            ("ann".to_owned(), Some("one more try".to_owned())),
            ("cy".to_owned(), Some("gone for good".to_owned()))
        ]
    );
    assert_eq!(ops.latest_operator_actions(10).await.unwrap().len(), 3);
}

/// Cancelling `run` while a batch is in flight: the batch finishes and is marked, then the
/// relay releases its leases and removes its instance row.
async fn graceful_shutdown_finishes_the_batch(db: &TestDb) {
    let outbox = Outbox::default();
    setup(db, &outbox).await;
    let broker = InProcessBroker::new();
    note(db, &outbox, "order-1", 0, 3).await;
    broker.pause();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(
        relay(db, &outbox, &broker, "relay-1")
            .build()
            .unwrap()
            .run(shutdown.clone()),
    );
    assert!(broker.wait_for_waiting(1, Duration::from_secs(10)).await);
    shutdown.cancel();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!running.is_finished(), "waits for the batch in flight");
    broker.resume();
    let report = tokio::time::timeout(Duration::from_secs(10), running)
        .await
        .expect("stops after the batch")
        .unwrap()
        .unwrap();
    assert_eq!(report.published, 3);
    assert!(
        rows(db, &outbox)
            .await
            .iter()
            .all(|r| r.status == OutboxStatus::Published)
    );
    let status = Operations::new(db.conn().clone(), outbox.clone())
        .status()
        .await
        .unwrap();
    assert!(status.live_relays.is_empty(), "instance row removed");
    let owners = db
        .conn()
        .query_all_raw(Statement::from_string(
            db.backend().db_backend(),
            "SELECT name FROM outbox_relay_leases WHERE owner IS NOT NULL",
        ))
        .await
        .unwrap();
    assert!(owners.is_empty(), "leases released");
}

/// The fast path publishes committed rows at once and marks them; what it cannot publish
/// (broker down, an earlier row of the aggregate pending) stays for the relay.
async fn fast_path_publishes_right_after_commit(db: &TestDb) {
    let outbox = Outbox::default();
    setup(db, &outbox).await;
    let broker = InProcessBroker::new();
    let mut relay = relay(db, &outbox, &broker, "relay-1")
        .check_head(true)
        .build()
        .unwrap();
    let fast_path = relay.fast_path();

    let ids = note(db, &outbox, "order-1", 0, 2).await;
    let report = fast_path.publish_committed(&ids).await.unwrap();
    assert_eq!((report.published, report.left_to_relay), (2, 0));
    assert_eq!(received(&broker, "order-1"), [0, 1]);
    assert_eq!(
        relay.drain().await.unwrap().published,
        0,
        "nothing left for the relay"
    );

    broker.go_down();
    let missed = note(db, &outbox, "order-2", 0, 1).await;
    assert_eq!(
        fast_path
            .publish_committed(&missed)
            .await
            .unwrap()
            .left_to_relay,
        1
    );
    assert_eq!(
        row(db, &outbox, missed[0]).await.attempts,
        0,
        "no attempt counted"
    );
    broker.come_up();
    let later = note(db, &outbox, "order-2", 1, 1).await;
    let report = fast_path.publish_committed(&later).await.unwrap();
    assert_eq!(report.published, 0, "an earlier row of order-2 is pending");
    assert_eq!(relay.drain().await.unwrap().published, 2);
    assert_eq!(received(&broker, "order-2"), [0, 1]);
}

/// Status, and retention cleanup of published outbox rows and old inbox rows in bounded
/// batches under a lease.
async fn purge_and_status(db: &TestDb) {
    let (outbox, clock) = manual_outbox();
    setup(db, &outbox).await;
    let broker = InProcessBroker::new();
    let mut relay = relay(db, &outbox, &broker, "relay-1")
        .retention(KEEP_PUBLISHED)
        .build()
        .unwrap();
    for i in 0..25 {
        note(db, &outbox, &format!("order-{i}"), 0, 1).await;
    }
    assert_eq!(relay.drain().await.unwrap().published, 25);
    clock.advance(TimeDelta::hours(2));
    note(db, &outbox, "order-late", 0, 1).await;
    clock.advance(TimeDelta::seconds(30));
    relay.refresh_leases().await.unwrap();
    let ops = Operations::new(db.conn().clone(), outbox.clone());
    let status = ops.status().await.unwrap();
    assert_eq!(status.pending, 1);
    assert_eq!(status.oldest_claimable_age, Some(Duration::from_secs(30)));
    assert_eq!(status.live_relays, ["relay-1"]);
    // The overview's relays: heartbeat and the leases each holds (every partition, or
    // the SQLite relay lease).
    let instances = ops.relay_instances().await.unwrap();
    assert_eq!(instances.len(), 1);
    assert_eq!(instances[0].instance_id, "relay-1");
    assert_eq!(instances[0].heartbeat_at, outbox.clock().now());
    assert!(instances[0].expires_at > instances[0].heartbeat_at);
    assert_eq!(instances[0].worker_keys, None);
    let expected_leases = match db.backend().db_backend() {
        DbBackend::Sqlite => 1,
        _ => usize::try_from(outbox.partitions()).unwrap(),
    };
    assert_eq!(
        instances[0].leases.len(),
        expected_leases,
        "{:?}",
        instances[0].leases
    );

    // The inbox: two old rows, one recent.
    let backend = db.backend().db_backend();
    for (i, at) in [
        "2026-03-01 08:00:00",
        "2026-03-01 08:30:00",
        "2026-03-01 11:00:00",
    ]
    .iter()
    .enumerate()
    {
        let at = match backend {
            DbBackend::Sqlite => format!("'{}.000000Z'", at.replace(' ', "T")),
            DbBackend::Postgres => format!("'{at}+00'"),
            _ => format!("'{at}'"),
        };
        let id = match backend {
            DbBackend::Postgres => format!("'{}'::uuid", Uuid::now_v7()),
            _ => format!("'{}'", Uuid::now_v7()),
        };
        db.conn()
            .execute_unprepared(&format!(
                "INSERT INTO inbox (message_id, consumer, event_type, received_at) VALUES ({id}, 'c{i}', 'x.y.z.v1', {at})"
            ))
            .await
            .unwrap();
    }
    // Another instance holds the cleanup lease: this one backs off.
    let leases = outbox_seaorm::relay::RelayTables::of(&outbox).leases;
    let far = match backend {
        DbBackend::Sqlite => "'2099-01-01T00:00:00.000000Z'",
        _ => "'2099-01-01 00:00:00'",
    };
    db.conn()
        .execute_unprepared(&format!(
            "INSERT INTO {leases} (name, owner, token, expires_at) VALUES ('cleanup/outbox', 'elsewhere', 1, {far})"
        ))
        .await
        .unwrap();
    assert_eq!(
        ops.purge(Duration::from_secs(3600), 10).await.unwrap(),
        None
    );
    db.conn()
        .execute_unprepared(&format!(
            "UPDATE {leases} SET owner = NULL WHERE name = 'cleanup/outbox'"
        ))
        .await
        .unwrap();
    assert_eq!(
        ops.purge(Duration::from_secs(3600), 10).await.unwrap(),
        Some(25),
        "3 batches"
    );
    let left = rows(db, &outbox).await;
    assert_eq!(left.len(), 1, "the pending row stays");
    assert_eq!(left[0].status, OutboxStatus::Pending);
    // now = 11:00:30; keep 2 h of inbox: the 08:00 and 08:30 rows go.
    assert_eq!(
        ops.purge_inbox(Duration::from_secs(7200), 1).await.unwrap(),
        Some(2)
    );
}

/// Pipelining (PostgreSQL, MariaDB): while a batch is being published, the next one is
/// already claimed on a second connection — its rows are locked, so another claimer skips
/// both batches. Everything is published once, in order per aggregate.
async fn pipelined_relay_claims_the_next_batch_while_publishing(db: &TestDb) {
    let (broker, draining, deadline) = drain_with_a_batch_at_the_broker(db).await;
    if db.conn().get_database_backend() != DbBackend::Sqlite {
        // 20 − batch in flight − batch claimed ahead.
        wait_for_claimable(db, 12, deadline).await;
    }
    broker.resume();
    let report = draining.await.unwrap().unwrap();
    assert_eq!(report.published, 20, "{report:?}");
    assert_eq!(received(&broker, "a"), (0..10).collect::<Vec<_>>());
    assert_eq!(received(&broker, "b"), (0..10).collect::<Vec<_>>());
    assert_eq!(broker.len(), 20, "no duplicate");
}

/// Notes 0..10 about orders `a` and `b`, then a pipelined relay (batches of 4) draining
/// them into a paused broker; returns once its first batch waits at the broker, with a
/// deadline 10 s from the start of the drain.
async fn drain_with_a_batch_at_the_broker(
    db: &TestDb,
) -> (
    InProcessBroker,
    tokio::task::JoinHandle<
        Result<outbox_seaorm::relay::RelayReport, outbox_seaorm::relay::RelayError>,
    >,
    Instant,
) {
    let (outbox, _clock) = manual_outbox();
    setup(db, &outbox).await;
    note(db, &outbox, "a", 0, 10).await;
    note(db, &outbox, "b", 0, 10).await;
    drain_into_a_paused_broker(db, &outbox, 4).await
}

/// A pipelined relay (batches of `batch_size`) draining `outbox` into a paused broker;
/// returns once its first batch waits at the broker, with a deadline 10 s from the start of
/// the drain.
async fn drain_into_a_paused_broker(
    db: &TestDb,
    outbox: &Outbox,
    batch_size: usize,
) -> (
    InProcessBroker,
    tokio::task::JoinHandle<
        Result<outbox_seaorm::relay::RelayReport, outbox_seaorm::relay::RelayError>,
    >,
    Instant,
) {
    let broker = InProcessBroker::new();
    broker.pause();
    let mut relay = relay(db, outbox, &broker, "relay-1")
        .batch_size(batch_size)
        // The broker stays paused while the test looks at the locks: no timeout meanwhile
        // (and a lease that outlives it), no heartbeat (which ends a pipelined run).
        .heartbeat_interval(Duration::from_secs(60))
        .lease_ttl(Duration::from_secs(150))
        .publish_timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let draining = tokio::spawn(async move { relay.drain().await });
    let deadline = Instant::now() + Duration::from_secs(10);
    while broker.waiting() == 0 {
        assert!(Instant::now() < deadline, "no batch reached the broker");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    (broker, draining, deadline)
}

/// Waits until exactly `expected` pending rows can be locked by another claimer. A probe
/// that locked many rows while the claim ahead ran would make it skip them, claim nothing
/// and end the pipelined run (seen under load). On PostgreSQL the probe first waits for
/// the relay to have two transactions open (its batch in flight and its claim ahead). On
/// MariaDB `information_schema.innodb_trx` did not show both transactions reliably, so
/// there the probe tries one row per transaction: it never holds more than one row, and
/// the claim ahead reads three times the batch size of candidates.
async fn wait_for_claimable(db: &TestDb, expected: usize, deadline: Instant) {
    wait_for_claimable_beside(db, expected, deadline, 0).await;
}

/// [`wait_for_claimable`] while the test itself keeps `open` transactions open (on
/// PostgreSQL the probe then waits for `2 + open` transactions).
async fn wait_for_claimable_beside(
    db: &TestDb,
    expected: usize,
    deadline: Instant,
    test_open: i64,
) {
    let backend = db.conn().get_database_backend();
    if backend == DbBackend::Postgres {
        loop {
            let open = db
                .conn()
                .query_one_raw(Statement::from_string(
                    backend,
                    "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() \
                     AND state = 'idle in transaction' AND pid <> pg_backend_pid()",
                ))
                .await
                .unwrap()
                .unwrap()
                .try_get::<i64>("", "n")
                .unwrap();
            let relay_open = open - test_open;
            if relay_open >= 2 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the next batch was not claimed ahead: {relay_open} transactions open, not 2"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    // MariaDB: through the primary key, where the relay's locks are.
    let index = if backend == DbBackend::MySql {
        " FORCE INDEX (PRIMARY)"
    } else {
        ""
    };
    loop {
        let rows = if backend == DbBackend::MySql {
            let pending = db
                .conn()
                .query_all_raw(Statement::from_string(
                    backend,
                    "SELECT seq FROM outbox WHERE status = 'pending'",
                ))
                .await
                .unwrap();
            let mut lockable = 0;
            for row in pending {
                let seq: i64 = row.try_get("", "seq").unwrap();
                lockable += lock_and_release(
                    db,
                    &format!(
                        "SELECT seq FROM outbox{index} WHERE seq = {seq} \
                         AND status = 'pending' FOR UPDATE SKIP LOCKED"
                    ),
                )
                .await;
            }
            lockable
        } else {
            lock_and_release(
                db,
                &format!(
                    "SELECT seq FROM outbox{index} WHERE status = 'pending' FOR UPDATE SKIP LOCKED"
                ),
            )
            .await
        };
        if rows == expected {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the next batch was not claimed ahead: {rows} rows claimable, not {expected}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Runs the locking `select` in a transaction of its own, rolls it back and returns how
/// many rows it locked.
async fn lock_and_release(db: &TestDb, select: &str) -> usize {
    use sea_orm::TransactionTrait as _;
    let txn = db.conn().begin().await.unwrap();
    let rows = txn
        .query_all_raw(Statement::from_string(
            db.conn().get_database_backend(),
            select,
        ))
        .await
        .unwrap()
        .len();
    txn.rollback().await.unwrap();
    rows
}

/// Another relay taking a lease over while a pipelined relay has a batch in flight does
/// not stall either. On MariaDB a share lock requested behind the takeover's waiting
/// exclusive lock waits for it, and the takeover waits for the share lock of the batch in
/// flight, which the relay marks only once its claim ahead returns: a cycle the database
/// does not see, which ended in `innodb_lock_wait_timeout` (50 s) under load in CI. The
/// claim ahead gives way instead (`NOWAIT`).
async fn claim_ahead_gives_way_to_a_lease_takeover(db: &TestDb) {
    let backend = db.conn().get_database_backend();
    if backend == DbBackend::Sqlite {
        // No pipelining on SQLite: nothing to give way to.
        return;
    }
    let (broker, draining, deadline) = drain_with_a_batch_at_the_broker(db).await;
    // Batch 1 at the broker, batch 2 claimed ahead: both share-lock the relay's leases.
    wait_for_claimable(db, 12, deadline).await;
    let conn = db.conn().clone();
    let takeover = tokio::spawn(async move {
        conn.execute_raw(Statement::from_string(
            backend,
            "UPDATE outbox_relay_leases SET expires_at = expires_at WHERE owner = 'relay-1'",
        ))
        .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !takeover.is_finished(),
        "the takeover waits for the batches' share locks"
    );
    broker.resume();
    // The relay marks batch 1 and gives way with its claim of batch 3, so batch 2 is
    // marked next and the takeover goes through.
    tokio::time::timeout(Duration::from_secs(20), takeover)
        .await
        .expect("the takeover went through: no stall")
        .unwrap()
        .unwrap();
    let report = tokio::time::timeout(Duration::from_secs(20), draining)
        .await
        .expect("the drain finished")
        .unwrap()
        .unwrap();
    assert_eq!(report.published, 20, "{report:?}");
    assert_eq!(report.errors, 0, "{report:?}");
    assert_eq!(received(&broker, "a"), (0..10).collect::<Vec<_>>());
    assert_eq!(received(&broker, "b"), (0..10).collect::<Vec<_>>());
    assert_eq!(broker.len(), 20, "no duplicate");
}

/// A transient failure in one batch holds back the later rows of its aggregate that the
/// next batch already claimed (pipelining claims it while the failing batch is in flight);
/// other aggregates go on; after the backoff everything arrives in order.
async fn failure_holds_back_rows_claimed_ahead(db: &TestDb) {
    let (outbox, clock) = manual_outbox();
    setup(db, &outbox).await;
    let broker = InProcessBroker::new();
    // a0 b0 a1 b1 …: batches of 3 mix both aggregates.
    for n in 0..12 {
        note(db, &outbox, "a", n, 1).await;
        note(db, &outbox, "b", n, 1).await;
    }
    let failed_once = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = Arc::clone(&failed_once);
    broker.fail_messages(move |e| {
        (e.aggregate_id == "a"
            && note_number(e) == 2
            && !flag.swap(true, std::sync::atomic::Ordering::SeqCst))
        .then(|| PublishError::unavailable("a2 bounced"))
    });
    let mut relay = relay(db, &outbox, &broker, "relay-1")
        .batch_size(3)
        .build()
        .unwrap();
    let first = relay.drain().await.unwrap();
    assert!(failed_once.load(std::sync::atomic::Ordering::SeqCst));
    assert_eq!((first.published, first.retried), (14, 1), "{first:?}");
    assert_eq!(received(&broker, "a"), [0, 1], "nothing of a after a2");
    assert_eq!(received(&broker, "b"), (0..12).collect::<Vec<_>>());
    clock.advance(TimeDelta::seconds(10));
    let second = relay.drain().await.unwrap();
    assert_eq!(second.published, 10, "{second:?}");
    assert_eq!(received(&broker, "a"), (0..12).collect::<Vec<_>>());
    assert_eq!(broker.len(), 24, "no duplicate");
}

/// The in-process broker, 40 ms per batch: publishing takes long enough next to the
/// database work that a pipelined relay keeps claiming ahead.
#[derive(Clone)]
struct SlowBroker(InProcessBroker);

impl Publisher for SlowBroker {
    async fn publish(&self, batch: &[Envelope]) -> BatchOutcome {
        tokio::time::sleep(Duration::from_millis(40)).await;
        self.0.publish(batch).await
    }
}

/// A pipelined relay with a slow broker marks batch *n − 1* beside the claim of batch
/// *n + 1* (PostgreSQL, MariaDB). A trigger makes every mark take about 100 ms, so the claim
/// of batch 3 returns before batch 1's mark commits: it sees `a0` locked, not in backoff,
/// and claims `a1`. The transient failure of `a0` in batch 1 must still hold `a1` back (the
/// relay remembers what did not get through in both batches before the claim). After the
/// backoff everything arrives in order, once.
async fn claim_beside_a_mark_holds_back_rows_behind_a_retry(db: &TestDb) {
    if db.conn().get_database_backend() == DbBackend::Sqlite {
        // No pipelining on SQLite.
        return;
    }
    let (outbox, clock) = manual_outbox();
    setup(db, &outbox).await;
    slow_marks(db).await;
    let broker = InProcessBroker::new();
    // Batches of 2: [a0 b0] [b1 b2] [a1 b3] [a2 b4] [b5 b6].
    for (order, n) in [
        ("a", 0),
        ("b", 0),
        ("b", 1),
        ("b", 2),
        ("a", 1),
        ("b", 3),
        ("a", 2),
        ("b", 4),
        ("b", 5),
        ("b", 6),
    ] {
        note(db, &outbox, order, n, 1).await;
    }
    let failed_once = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = Arc::clone(&failed_once);
    broker.fail_messages(move |e| {
        (e.aggregate_id == "a"
            && note_number(e) == 0
            && !flag.swap(true, std::sync::atomic::Ordering::SeqCst))
        .then(|| PublishError::unavailable("a0 bounced"))
    });
    let mut relay = Relay::builder(
        db.conn().clone(),
        outbox.clone(),
        SlowBroker(broker.clone()),
    )
    .instance_id("relay-1")
    .batch_size(2)
    .heartbeat_interval(Duration::from_secs(60))
    .lease_ttl(Duration::from_secs(150))
    .backoff(Backoff::new().with_jitter(false))
    .build()
    .unwrap();
    let first = relay.drain().await.unwrap();
    assert!(failed_once.load(std::sync::atomic::Ordering::SeqCst));
    assert_eq!((first.published, first.retried), (7, 1), "{first:?}");
    assert_eq!(
        received(&broker, "a"),
        Vec::<u32>::new(),
        "nothing of a after a0"
    );
    assert_eq!(received(&broker, "b"), (0..7).collect::<Vec<_>>());
    clock.advance(TimeDelta::seconds(10));
    let second = relay.drain().await.unwrap();
    assert_eq!(second.published, 3, "{second:?}");
    assert_eq!(received(&broker, "a"), [0, 1, 2]);
    assert_eq!(broker.len(), 10, "no duplicate");
}

/// Makes every `UPDATE` of the outbox table wait about 100 ms (PostgreSQL: once per
/// statement; MariaDB: 50 ms per row, and the test's batches have 2 rows).
async fn slow_marks(db: &TestDb) {
    let backend = db.conn().get_database_backend();
    let statements: &[&str] = if backend == DbBackend::Postgres {
        &[
            "CREATE FUNCTION slow_mark() RETURNS trigger LANGUAGE plpgsql AS \
             $$ BEGIN PERFORM pg_sleep(0.1); RETURN NULL; END $$",
            "CREATE TRIGGER slow_mark BEFORE UPDATE ON outbox \
             FOR EACH STATEMENT EXECUTE FUNCTION slow_mark()",
        ]
    } else {
        &["CREATE TRIGGER slow_mark BEFORE UPDATE ON outbox FOR EACH ROW SET @slept = SLEEP(0.05)"]
    };
    for statement in statements {
        db.conn()
            .execute_unprepared(statement)
            .await
            .unwrap_or_else(|error| panic!("{statement}: {error}"));
    }
}

/// A claim ahead must not pass over a row committed late below the batches in flight
/// (producers take `seq`s in one order and commit in another): on PostgreSQL the claim
/// ahead starts past those batches only when it counts no such row. Here `a0` (seq 1) is
/// inserted, uncommitted, before the relay starts; batch 1 [b0 b1] waits at the broker and
/// batch 2 [b2 b3] is claimed ahead; then `a0` commits, and `a1` (seq 6) after it. The
/// claim of batch 3, past batch 2, would take [a1 b4] and publish `a1` before `a0`; it must
/// see `a0` and claim from the start: [a0 a1].
async fn claim_ahead_does_not_pass_over_a_late_commit(db: &TestDb) {
    use sea_orm::TransactionTrait as _;
    let backend = db.conn().get_database_backend();
    if backend == DbBackend::Sqlite {
        // No pipelining on SQLite.
        return;
    }
    let (outbox, _clock) = manual_outbox();
    setup(db, &outbox).await;
    // seq 1: a0, 2–5: b0–b3, 6: a1, 7–8: b4 b5. The rows of `a` are then set aside and
    // inserted again, with their `seq`s, when the test wants them to commit.
    note(db, &outbox, "a", 0, 1).await;
    note(db, &outbox, "b", 0, 4).await;
    note(db, &outbox, "a", 1, 1).await;
    note(db, &outbox, "b", 4, 2).await;
    for statement in [
        "CREATE TABLE late_rows AS SELECT * FROM outbox WHERE aggregate_id = 'a'",
        "DELETE FROM outbox WHERE aggregate_id = 'a'",
    ] {
        db.conn().execute_unprepared(statement).await.unwrap();
    }
    let seq_of = async |n: u32| -> i64 {
        let rows = db
            .conn()
            .query_all_raw(Statement::from_string(
                backend,
                "SELECT seq FROM late_rows ORDER BY seq",
            ))
            .await
            .unwrap();
        rows[usize::try_from(n).unwrap()]
            .try_get::<i64>("", "seq")
            .unwrap()
    };
    let (a0, a1) = (seq_of(0).await, seq_of(1).await);
    assert!(a0 < a1, "a0 {a0}, a1 {a1}");
    let late = db.conn().begin().await.unwrap();
    late.execute_unprepared(&format!(
        "INSERT INTO outbox SELECT * FROM late_rows WHERE seq = {a0}"
    ))
    .await
    .unwrap();

    let (broker, draining, deadline) = drain_into_a_paused_broker(db, &outbox, 2).await;
    // Batch 1 at the broker, batch 2 claimed ahead: b4 and b5 are left.
    wait_for_claimable_beside(db, 2, deadline, 1).await;
    late.commit().await.unwrap();
    db.conn()
        .execute_unprepared(&format!(
            "INSERT INTO outbox SELECT * FROM late_rows WHERE seq = {a1}"
        ))
        .await
        .unwrap();
    broker.resume();
    let report = tokio::time::timeout(Duration::from_secs(20), draining)
        .await
        .expect("the drain finished")
        .unwrap()
        .unwrap();
    assert_eq!(report.published, 8, "{report:?}");
    assert_eq!(received(&broker, "a"), [0, 1], "a0 before a1");
    assert_eq!(received(&broker, "b"), (0..6).collect::<Vec<_>>());
    assert_eq!(broker.len(), 8, "no duplicate");
}
