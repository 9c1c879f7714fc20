//! Partitioned consumers on every backend (book: Scaling consumers): instances of one
//! consumer split its partitions by rendezvous hashing over partition leases in the
//! consumer's database, hand partitions over when an instance joins or leaves, take a
//! killed instance's partitions over once its leases expired, never run one partition in two
//! places at once, and a runner that lost its lease cannot commit (the fence).

// Scenarios are plain async functions called by generated #[tokio::test]s, which clippy's
// `allow-unwrap-in-tests` does not see as tests.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use outbox_core::Envelope;
use outbox_seaorm::inbox::partitioned::{Partition, PartitionedConsumer, PartitionedReport};
use outbox_seaorm::inbox::{Consumer, ConsumerError, Delivered};
use outbox_seaorm::{Outbox, UnitOfWork, inbox_handler, schema};
use outbox_tests::backend_tests;
use outbox_tests::bookstore::{OrderPlacedV1, OrderedBookV1};
use outbox_tests::db::TestDb;
use outbox_tests::proxy::Proxy;
use sea_orm::{ConnectionTrait, DbErr, Statement};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

backend_tests!(
    a_runner_that_lost_its_lease_cannot_commit,
    instances_split_hand_over_and_take_over_partitions,
    two_consumers_of_one_process_may_share_an_instance_id,
);

/// Cut from its database, an instance cannot renew its leases: its runners are told to stop
/// and stop reading (`LeaseHeld`) before the leases expire, so they are gone before another
/// instance could take the partitions over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_cut_from_its_database_stops_its_runners_before_the_leases_expire() {
    let test = "an_instance_cut_from_its_database_stops_its_runners_before_the_leases_expire";
    let Some(db) = TestDb::postgres(test).await else {
        return;
    };
    let outbox = Outbox::default();
    setup(&db, &outbox).await;
    let proxy = Proxy::start("127.0.0.1:5432").await.unwrap();
    let url = db
        .url()
        .replace("127.0.0.1:5432", &proxy.addr().to_string());
    assert_ne!(url, db.url(), "the test database is not on 127.0.0.1:5432");
    let mut options = sea_orm::ConnectOptions::new(url);
    options
        .max_connections(2)
        .min_connections(0)
        .acquire_timeout(Duration::from_millis(500))
        .connect_timeout(Duration::from_millis(500))
        .sqlx_logging(false);
    let cut_db = sea_orm::Database::connect(options).await.unwrap();
    let inbox = Consumer::builder(cut_db, outbox.clone(), "tests.partitioned-split")
        .build()
        .unwrap();
    let partitioned = PartitionedConsumer::builder(inbox, 2)
        .instance_id("cut")
        .lease_ttl(TTL)
        .heartbeat_interval(HEARTBEAT)
        .build()
        .unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel::<(Partition, Instant)>();
    let stopped: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let record = Arc::clone(&stopped);
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(
        partitioned.run(shutdown.clone(), move |partition: Partition| {
            let tx = tx.clone();
            let record = Arc::clone(&record);
            async move {
                let stop = partition.stop().clone();
                tx.send((partition, Instant::now())).unwrap();
                stop.cancelled().await;
                record.lock().unwrap().push(Instant::now());
            }
        }),
    );
    let mut partitions = Vec::new();
    for _ in 0..2 {
        let (partition, _) = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .unwrap()
            .unwrap();
        assert!(partition.held().holds());
        partitions.push(partition);
    }
    proxy.cut();
    let cut = Instant::now();
    until(TTL, "the runners are told to stop before the TTL", || {
        stopped.lock().unwrap().len() == 2
    })
    .await;
    let after = cut.elapsed();
    assert!(
        partitions.iter().all(|p| !p.held().holds()),
        "no runner may read any more"
    );
    assert!(
        after < TTL,
        "stopped {after:?} after the cut, the TTL is {TTL:?}"
    );
    eprintln!("runners stopped {after:?} after the cut");
    shutdown.cancel();
    proxy.restore();
    let report = run.await.unwrap();
    assert!(report.failed_heartbeats > 0, "{report:?}");
    assert_eq!(report.lost, 2, "{report:?}");
    db.close().await;
}

const PARTITIONS: u32 = 8;
const TTL: Duration = Duration::from_millis(2000);
const HEARTBEAT: Duration = Duration::from_millis(250);

/// Notes each applied order.
#[inbox_handler(consumer = "tests.partitioned-fence")]
async fn note_order(uow: &UnitOfWork, event: OrderPlacedV1) -> Result<(), DbErr> {
    let backend = uow.get_database_backend();
    uow.execute_raw(Statement::from_sql_and_values(
        backend,
        match backend {
            sea_orm::DbBackend::Postgres => "INSERT INTO applied (order_id) VALUES ($1)",
            _ => "INSERT INTO applied (order_id) VALUES (?)",
        },
        [event.order_id.into()],
    ))
    .await?;
    Ok(())
}

/// The rebalancing scenario's consumer (its runners apply nothing).
#[inbox_handler(consumer = "tests.partitioned-split")]
async fn ignore_order(_uow: &UnitOfWork, _event: OrderPlacedV1) -> Result<(), DbErr> {
    Ok(())
}

async fn setup(db: &TestDb, outbox: &Outbox) {
    schema::install(db.conn(), outbox).await.unwrap();
    db.conn()
        .execute_unprepared("CREATE TABLE applied (order_id varchar(64) NOT NULL PRIMARY KEY)")
        .await
        .unwrap();
}

fn order(order_id: &str) -> Envelope {
    Envelope::from_event(&OrderPlacedV1 {
        order_id: order_id.to_owned(),
        checkout_id: format!("checkout-{order_id}"),
        customer: "ada".to_owned(),
        books: vec![OrderedBookV1 {
            book_id: "b-1".to_owned(),
            quantity: 1,
        }],
    })
    .unwrap()
}

async fn count(db: &TestDb, sql: &str) -> i64 {
    let row = db
        .conn()
        .query_one_raw(Statement::from_string(
            db.conn().get_database_backend(),
            sql,
        ))
        .await
        .unwrap()
        .unwrap();
    row.try_get_by_index::<i64>(0).unwrap()
}

fn instance(db: &TestDb, outbox: &Outbox, consumer: &str, id: &str) -> PartitionedConsumer {
    let inbox = Consumer::builder(db.conn().clone(), outbox.clone(), consumer)
        .build()
        .unwrap();
    PartitionedConsumer::builder(inbox, PARTITIONS)
        .instance_id(id)
        .lease_ttl(TTL)
        .heartbeat_interval(HEARTBEAT)
        .build()
        .unwrap()
}

/// A runner applies under its lease; once the lease is another instance's, the next
/// message's transaction rolls back (no effect, no inbox row), the consumer reports
/// `LeaseLost` (the runner leaves the message unacknowledged) and the runner is told to stop.
async fn a_runner_that_lost_its_lease_cannot_commit(db: &TestDb) {
    let outbox = Outbox::default();
    setup(db, &outbox).await;
    let inbox = Consumer::builder(db.conn().clone(), outbox.clone(), "tests.partitioned-fence")
        .build()
        .unwrap();
    let partitioned = PartitionedConsumer::builder(inbox, 1)
        .instance_id("instance-a")
        .lease_ttl(TTL)
        .heartbeat_interval(HEARTBEAT)
        .build()
        .unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel::<Partition>();
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<()>();
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(
        partitioned.run(shutdown.clone(), move |partition: Partition| {
            let tx = tx.clone();
            let done = done_tx.clone();
            async move {
                let stop = partition.stop().clone();
                tx.send(partition).unwrap();
                stop.cancelled().await;
                done.send(()).ok();
            }
        }),
    );
    let partition = tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("the only instance takes the only partition")
        .unwrap();
    assert_eq!(partition.number(), 0);
    let delivered = partition.consumer().deliver(&order("o-1")).await.unwrap();
    assert!(
        matches!(delivered, Delivered::Applied { .. }),
        "{delivered:?}"
    );

    // Another instance takes the lease over (as it would once this one's expired).
    let taken = db
        .conn()
        .execute_unprepared(
            "UPDATE inbox_consumer_leases SET owner = 'instance-b', token = token + 1 \
             WHERE name = 'tests.partitioned-fence/partition/0'",
        )
        .await
        .unwrap();
    assert_eq!(taken.rows_affected(), 1);
    let error = partition
        .consumer()
        .deliver(&order("o-2"))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, ConsumerError::LeaseLost { lease, .. } if lease == "tests.partitioned-fence/partition/0"),
        "{error:?}"
    );
    assert!(
        partition.stop().is_cancelled(),
        "the runner is told to stop"
    );
    tokio::time::timeout(Duration::from_secs(5), done_rx.recv())
        .await
        .unwrap();
    assert_eq!(count(db, "SELECT COUNT(*) FROM applied").await, 1);
    assert_eq!(
        count(db, "SELECT COUNT(*) FROM inbox").await,
        1,
        "no inbox row for o-2"
    );

    // The supervisor does not restart a partition another instance holds.
    tokio::time::sleep(HEARTBEAT * 3).await;
    assert!(
        rx.try_recv().is_err(),
        "no runner started without the lease"
    );
    shutdown.cancel();
    let report = run.await.unwrap();
    assert_eq!(report.started, 1, "{report:?}");
}

/// Which instance runs which partition, checking that no partition ever runs twice.
#[derive(Default)]
struct Tracker {
    running: BTreeMap<u32, &'static str>,
    overlaps: Vec<String>,
}

type Shared = Arc<Mutex<Tracker>>;

fn held_by(tracker: &Shared, instance: &str) -> Vec<u32> {
    let tracker = tracker.lock().unwrap();
    tracker
        .running
        .iter()
        .filter(|(_, who)| **who == instance)
        .map(|(p, _)| *p)
        .collect()
}

/// A runner's entry in the tracker, removed when the runner ends — also when its task is
/// aborted with its supervisor (a killed process), which drops the future.
struct Running {
    tracker: Shared,
    number: u32,
    name: &'static str,
}

impl Drop for Running {
    fn drop(&mut self) {
        let mut t = self.tracker.lock().unwrap_or_else(|p| p.into_inner());
        if t.running.get(&self.number) == Some(&self.name) {
            t.running.remove(&self.number);
        }
    }
}

/// Starts `partitioned` as `name`: its runners note themselves in `tracker` and end on their
/// stop token; aborting the returned task kills them (their supervisor's future is dropped,
/// as a killed process's runners die with it).
fn spawn(
    partitioned: PartitionedConsumer,
    name: &'static str,
    tracker: &Shared,
    shutdown: &CancellationToken,
) -> JoinHandle<PartitionedReport> {
    let tracker = Arc::clone(tracker);
    tokio::spawn(
        partitioned.run(shutdown.clone(), move |partition: Partition| {
            let tracker = Arc::clone(&tracker);
            async move {
                let number = partition.number();
                {
                    let mut t = tracker.lock().unwrap();
                    if let Some(other) = t.running.insert(number, name) {
                        t.overlaps.push(format!(
                            "partition {number}: {name} started while {other} ran it"
                        ));
                    }
                }
                let _running = Running {
                    tracker,
                    number,
                    name,
                };
                partition.stop().cancelled().await;
            }
        }),
    )
}

/// Waits until `check` holds, up to `limit`; the time it took.
async fn until(limit: Duration, what: &str, mut check: impl FnMut() -> bool) -> Duration {
    let started = Instant::now();
    while !check() {
        assert!(started.elapsed() < limit, "not within {limit:?}: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    started.elapsed()
}

/// One instance takes every partition; a second joining gets about half, handed over
/// without overlap; killed, its partitions come back to the first once its leases expired
/// (not before); a third joining and shutting down gracefully hands back at once.
async fn instances_split_hand_over_and_take_over_partitions(db: &TestDb) {
    let outbox = Outbox::default();
    setup(db, &outbox).await;
    let consumer = "tests.partitioned-split";
    let tracker = Shared::default();
    let shutdown_a = CancellationToken::new();
    let a = spawn(
        instance(db, &outbox, consumer, "a"),
        "a",
        &tracker,
        &shutdown_a,
    );
    until(Duration::from_secs(10), "a holds every partition", || {
        held_by(&tracker, "a").len() == PARTITIONS as usize
    })
    .await;

    // b joins: the partitions split, each handed over after a's runner stopped.
    let shutdown_b = CancellationToken::new();
    let b = spawn(
        instance(db, &outbox, consumer, "b"),
        "b",
        &tracker,
        &shutdown_b,
    );
    let split = until(
        Duration::from_secs(10),
        "a and b split the partitions",
        || {
            let (a, b) = (held_by(&tracker, "a").len(), held_by(&tracker, "b").len());
            a > 0 && b > 0 && a + b == PARTITIONS as usize
        },
    )
    .await;
    // Stable: nothing moves over further heartbeats.
    let b_held = held_by(&tracker, "b");
    tokio::time::sleep(HEARTBEAT * 4).await;
    assert_eq!(held_by(&tracker, "b"), b_held);

    // b is killed: its leases stay until they expire, then a takes them.
    b.abort();
    let killed = Instant::now();
    until(Duration::from_secs(2), "b's runners die with it", || {
        held_by(&tracker, "b").is_empty()
    })
    .await;
    until(TTL + HEARTBEAT * 4, "a takes b's partitions over", || {
        held_by(&tracker, "a").len() == PARTITIONS as usize
    })
    .await;
    let takeover = killed.elapsed();
    assert!(
        takeover >= TTL - HEARTBEAT * 2,
        "taken over after {takeover:?}, before b's leases (TTL {TTL:?}) expired"
    );

    // c joins, then leaves gracefully: its partitions come back within heartbeats.
    let shutdown_c = CancellationToken::new();
    let c = spawn(
        instance(db, &outbox, consumer, "c"),
        "c",
        &tracker,
        &shutdown_c,
    );
    until(Duration::from_secs(10), "c gets partitions", || {
        !held_by(&tracker, "c").is_empty()
    })
    .await;
    let left = Instant::now();
    shutdown_c.cancel();
    let report_c = c.await.unwrap();
    until(
        HEARTBEAT * 6,
        "a takes c's partitions back without waiting for a TTL",
        || held_by(&tracker, "a").len() == PARTITIONS as usize,
    )
    .await;
    let handback = left.elapsed();
    eprintln!(
        "split in {split:?}, takeover after kill {takeover:?}, hand-back after leave {handback:?}"
    );
    assert!(report_c.started > 0, "{report_c:?}");

    shutdown_a.cancel();
    let report_a = a.await.unwrap();
    assert!(
        report_a.handed_over > 0,
        "a handed partitions to b and c: {report_a:?}"
    );
    {
        let tracker = tracker.lock().unwrap();
        assert!(tracker.overlaps.is_empty(), "{:?}", tracker.overlaps);
        assert!(
            tracker.running.is_empty(),
            "every runner stopped at shutdown"
        );
    }
    let leases = count(
        db,
        "SELECT COUNT(*) FROM inbox_consumer_leases WHERE owner IS NOT NULL",
    )
    .await;
    assert_eq!(leases, 0, "a graceful shutdown releases every lease");
}

/// Two consumers in one process with one instance id (a pod name): each holds its own
/// partitions (owners `<consumer>/<id>`), and shutting one down releases its leases only.
async fn two_consumers_of_one_process_may_share_an_instance_id(db: &TestDb) {
    let outbox = Outbox::default();
    setup(db, &outbox).await;
    let tracker = Shared::default();
    let (shutdown_a, shutdown_b) = (CancellationToken::new(), CancellationToken::new());
    let a = spawn(
        instance(db, &outbox, "tests.partitioned-fence", "pod-1"),
        "fence",
        &Shared::default(),
        &shutdown_a,
    );
    let b = spawn(
        instance(db, &outbox, "tests.partitioned-split", "pod-1"),
        "split",
        &tracker,
        &shutdown_b,
    );
    until(
        Duration::from_secs(10),
        "both consumers hold all their partitions",
        || held_by(&tracker, "split").len() == PARTITIONS as usize,
    )
    .await;
    let held = |consumer: &str| {
        format!(
            "SELECT COUNT(*) FROM inbox_consumer_leases WHERE owner = '{consumer}/pod-1' \
             AND name LIKE '{consumer}/%'"
        )
    };
    assert_eq!(
        count(db, &held("tests.partitioned-split")).await,
        i64::from(PARTITIONS)
    );
    shutdown_a.cancel();
    a.await.unwrap();
    assert_eq!(
        count(db, &held("tests.partitioned-fence")).await,
        0,
        "released"
    );
    assert_eq!(
        count(db, &held("tests.partitioned-split")).await,
        i64::from(PARTITIONS),
        "the other consumer's leases are still held"
    );
    assert_eq!(held_by(&tracker, "split").len(), PARTITIONS as usize);
    shutdown_b.cancel();
    b.await.unwrap();
}
