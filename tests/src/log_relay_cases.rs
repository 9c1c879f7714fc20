//! What the log relay must do whichever log it reads (PostgreSQL's logical decoding,
//! MariaDB's binlog), written once: each case takes the test's database, a relay builder
//! already pointed at it, and a wait for the relay to stream; `tests/log_relay.rs` and
//! `tests/log_relay_mariadb.rs` run them. Also the small tools those tests share: a running
//! relay ([`Running`]), [`eventually`], a unit of work of notes ([`note`]).

#![allow(clippy::unwrap_used)]

use std::future::Future;
use std::time::Duration;

use outbox_core::in_process::InProcessBroker;
use outbox_core::publish::PublishError;
use outbox_core::{Envelope, IntegrationEvent as _, Raise};
use outbox_seaorm::Outbox;
use outbox_seaorm::ops::Operations;
use outbox_seaorm::record::OutboxRecord;
use outbox_seaorm::record::log_dead_letter::{LogDeadLetter, LogDeadLetterStatus};
use outbox_seaorm::relay::log::{LogRelay, LogRelayBuilder, LogRelayError, LogRelayReport};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::bookstore::{OrderNotedV2, OrderingContracts, OrderingEvent};
use crate::db::TestDb;

/// A test that runs the case `$case` of this module: its database from `$open(test name)`
/// (`Option<(TestDb, Outbox)>`, `None`: skipped), a slot from `$slot()`, relays from
/// `$relay(db, outbox, broker, slot)`, and `$live(db, slot)` to wait until the relay streams.
#[macro_export]
macro_rules! log_relay_case {
    ($case:ident, open = $open:ident, slot = $slot:ident, relay = $relay:ident, live = $live:ident) => {
        #[doc = concat!("`outbox_tests::log_relay_cases::", stringify!($case), "` on this test file's database.")]
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $case() {
            let Some((db, outbox)) = $open(stringify!($case)).await else {
                return;
            };
            let slot = $slot();
            let relay = |outbox: &outbox_seaorm::Outbox,
                         broker: &outbox_core::in_process::InProcessBroker| {
                $relay(&db, outbox, broker, &slot)
            };
            $crate::log_relay_cases::$case(&db, &outbox, &slot, &relay, $live(&db, &slot)).await;
            db.close().await;
        }
    };
}

/// How long a test waits for what should happen.
pub const WAIT: Duration = Duration::from_secs(20);

/// A relay builder for `outbox` publishing to `broker`, on the test's database and slot.
pub type RelayFor<'a> = &'a dyn Fn(&Outbox, &InProcessBroker) -> LogRelayBuilder<InProcessBroker>;

/// A log relay running in a task of its own.
pub struct Running {
    shutdown: CancellationToken,
    task: JoinHandle<Result<LogRelayReport, LogRelayError>>,
}

impl Running {
    /// Starts `relay`.
    pub fn start(relay: LogRelay<InProcessBroker>) -> Self {
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(relay.run(shutdown.clone()));
        Self { shutdown, task }
    }

    /// A graceful stop; its report.
    ///
    /// # Panics
    /// When it does not stop within [`WAIT`], panics or stops with an error.
    pub async fn stop(self) -> LogRelayReport {
        self.shutdown.cancel();
        tokio::time::timeout(WAIT, self.task)
            .await
            .expect("the log relay stopped")
            .expect("the log relay did not panic")
            .expect("the log relay ran without a fatal error")
    }

    /// A crash: the task is aborted, its connections dropped, no final acknowledgement.
    pub async fn crash(self) {
        self.task.abort();
        let _ = self.task.await;
    }

    /// Whether it stopped (on its own: a fatal error, or a panic).
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// The fatal error it stops with on its own.
    ///
    /// # Panics
    /// When it does not stop within [`WAIT`], panics or stops without an error.
    pub async fn error(self) -> LogRelayError {
        tokio::time::timeout(WAIT, self.task)
            .await
            .expect("the log relay stopped on its own")
            .expect("the log relay did not panic")
            .expect_err("the log relay stopped with an error")
    }
}

/// Polls `condition` every 50 ms until it holds.
///
/// # Panics
/// With `what` after [`WAIT`].
pub async fn eventually(what: &str, mut condition: impl AsyncFnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !condition().await {
        assert!(tokio::time::Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Commits one unit of work that notes `count` events of order `order`, numbered from
/// `from`; their message ids.
pub async fn note(db: &TestDb, outbox: &Outbox, order: &str, from: u32, count: u32) -> Vec<Uuid> {
    let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
    for n in from..from + count {
        uow.raise(OrderingEvent::Noted {
            order_id: order.to_owned(),
            n,
        });
    }
    uow.commit().await.unwrap().message_ids
}

/// The order and number of each noted envelope.
pub fn notes(envelopes: &[Envelope]) -> Vec<(String, u32)> {
    envelopes
        .iter()
        .map(|envelope| {
            (
                envelope.aggregate_id.clone(),
                envelope.decode::<OrderNotedV2>().unwrap().n,
            )
        })
        .collect()
}

/// Waits until `broker` holds `count` messages.
///
/// # Panics
/// After [`WAIT`], with what it holds.
pub async fn wait_for(broker: &InProcessBroker, count: usize) {
    assert!(
        broker.wait_for_published(count, WAIT).await,
        "expected {count} messages, the broker has {}: {:?}",
        broker.len(),
        notes(&broker.published())
    );
}

/// The numbers published for order `order`, in order.
fn published_notes(broker: &InProcessBroker, order: &str) -> Vec<u32> {
    notes(&broker.published_for(OrderNotedV2::AGGREGATE_TYPE, order))
        .into_iter()
        .map(|(_, n)| n)
        .collect()
}

/// `remove_after_insert` on `outbox`'s table: each row is deleted in its own transaction,
/// the table stays empty, and the log relay still publishes every insert, in order.
pub async fn remove_after_insert_keeps_the_table_empty(
    db: &TestDb,
    outbox: &Outbox,
    _slot: &str,
    relay: RelayFor<'_>,
    live: impl Future<Output = ()>,
) {
    let outbox = Outbox::builder()
        .outbox_table(outbox.outbox_table().to_string())
        .write_mode(outbox_seaorm::WriteMode::table_removed_after_insert())
        .build()
        .unwrap();
    let broker = InProcessBroker::new();
    let running = Running::start(relay(&outbox, &broker).build().unwrap());
    live.await;
    let ids = note(db, &outbox, "a", 0, 4).await;
    let more = note(db, &outbox, "b", 0, 2).await;
    wait_for(&broker, 6).await;
    assert_eq!(
        OutboxRecord::count(db.conn(), &outbox).await.unwrap(),
        0,
        "the rows were removed again"
    );
    let expected: Vec<Uuid> = ids.into_iter().chain(more).collect();
    assert_eq!(broker.message_ids(), expected);
    let report = running.stop().await;
    assert_eq!(report.published, 6, "{report:?}");
}

/// Events due later and the log relay: the log sees the scheduled row's insert into the
/// scheduled table at commit, which it does not publish; the relay moves the row into the
/// outbox table at its time, and publishes that insert then. A relay that crashes while a
/// row waits loses nothing: the next one moves and publishes it, once.
pub async fn scheduled_events_go_out_at_their_time_not_at_commit(
    db: &TestDb,
    outbox: &Outbox,
    _slot: &str,
    relay: RelayFor<'_>,
    live: impl Future<Output = ()>,
) {
    use outbox_core::RaiseLater as _;
    let broker = InProcessBroker::new();
    let start = |broker: &InProcessBroker| {
        Running::start(
            relay(outbox, broker)
                .schedule_interval(Duration::from_millis(100))
                .build()
                .unwrap(),
        )
    };
    let running = start(&broker);
    live.await;
    let noted = |n: u32| OrderingEvent::Noted {
        order_id: "s".to_owned(),
        n,
    };
    let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
    uow.raise(noted(0));
    uow.raise_after(noted(1), Duration::from_secs(2));
    uow.raise(noted(2));
    let committed = tokio::time::Instant::now();
    let report = uow.commit().await.unwrap();
    assert_eq!(report.scheduled.len(), 1);
    wait_for(&broker, 2).await;
    tokio::time::sleep_until(committed + Duration::from_millis(1_500)).await;
    assert_eq!(published_notes(&broker, "s"), [0, 2], "nothing early");
    wait_for(&broker, 3).await;
    assert!(committed.elapsed() >= Duration::from_secs(2));
    assert_eq!(published_notes(&broker, "s"), [0, 2, 1]);
    assert_eq!(broker.published()[2].message_id, report.scheduled[0]);

    // A crash while a row waits: the next relay moves and publishes it.
    let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
    uow.raise_after(noted(3), Duration::from_secs(1));
    uow.commit().await.unwrap();
    running.crash().await;
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let running = start(&broker);
    wait_for(&broker, 4).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(published_notes(&broker, "s"), [0, 2, 1, 3], "once each");
    running.stop().await;
}

/// A job that snoozes under the log relay ("try again in a minute"): the relay writes it to
/// the scheduled table before it acknowledges the batch, due a minute later; its
/// aggregate's later event goes on; it is not published while it waits; made due by an
/// operator, the mover brings it back, published then with its own message id; the report
/// counts the snooze, and no row is left waiting. (A snooze of 2 s, awaited, raced the
/// check on a loaded CI machine: the mover had brought the job back before the test looked
/// at the scheduled table.)
pub async fn a_snoozed_job_waits_in_the_scheduled_table(
    db: &TestDb,
    outbox: &Outbox,
    _slot: &str,
    relay: RelayFor<'_>,
    live: impl Future<Output = ()>,
) {
    use std::collections::HashSet;
    use std::sync::{Arc, Mutex};

    use outbox_core::schedule::Due;
    use outbox_seaorm::ops::ScheduledTarget;
    let broker = InProcessBroker::new();
    let snoozed = Arc::new(Mutex::new(HashSet::new()));
    let seen = Arc::clone(&snoozed);
    broker.fail_messages(move |envelope| {
        let n = envelope.decode::<OrderNotedV2>().ok()?.n;
        let first = seen.lock().unwrap().insert(envelope.message_id);
        (n == 1 && first).then(|| PublishError::snoozed(Due::After(Duration::from_secs(60))))
    });
    let running = Running::start(
        relay(outbox, &broker)
            .schedule_interval(Duration::from_millis(100))
            .build()
            .unwrap(),
    );
    live.await;
    let ids = note(db, outbox, "z", 0, 3).await;
    let snoozed_at = chrono::Utc::now();
    wait_for(&broker, 2).await;
    assert_eq!(
        published_notes(&broker, "z"),
        [0, 2],
        "the snoozed job waits"
    );
    let ops = Operations::new(db.conn().clone(), outbox.clone());
    eventually("the snoozed job waits in the scheduled table", async || {
        ops.find_scheduled(ids[1]).await.unwrap().is_some()
    })
    .await;
    let waiting = ops.find_scheduled(ids[1]).await.unwrap().unwrap();
    assert!(
        waiting.due_at() >= snoozed_at + chrono::TimeDelta::seconds(59),
        "due a minute after the snooze: {}",
        waiting.due_at()
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(broker.len(), 2, "not published while it waits");
    ops.run_scheduled_now(&ScheduledTarget::MessageId(ids[1]), "test", None)
        .await
        .unwrap();
    wait_for(&broker, 3).await;
    assert_eq!(published_notes(&broker, "z"), [0, 2, 1]);
    assert_eq!(broker.published()[2].message_id, ids[1]);
    assert!(ops.find_scheduled(ids[1]).await.unwrap().is_none());
    let report = running.stop().await;
    assert_eq!(report.snoozed, 1, "{report:?}");
    assert_eq!(report.dead_lettered, 0, "{report:?}");
}

/// Under `Block`, an event the broker refuses goes dead and parks the later events of its
/// aggregate only (streamed ones too); an operator requeues one dead event (it is published,
/// then the parked ones, in order) and skips another (never published; the parked ones
/// released); the aggregates are free again and the operator log has both actions.
pub async fn a_poison_event_parks_only_its_aggregate_until_requeued_or_skipped(
    db: &TestDb,
    outbox: &Outbox,
    slot: &str,
    relay: RelayFor<'_>,
    live: impl Future<Output = ()>,
) {
    use LogDeadLetterStatus::{Dead, Parked, Published, Skipped};
    let broker = InProcessBroker::new();
    broker.fail_messages(|envelope| {
        let n = envelope.decode::<OrderNotedV2>().ok()?.n;
        (envelope.aggregate_id.starts_with("poison") && n == 1)
            .then(|| PublishError::rejected("the broker refuses note 1"))
    });
    let running = Running::start(
        relay(outbox, &broker)
            .max_attempts(2)
            .backoff(
                outbox_core::policy::Backoff::new()
                    .with_min_delay(Duration::from_millis(10))
                    .with_jitter(false),
            )
            .build()
            .unwrap(),
    );
    live.await;
    let ops = Operations::new(db.conn().clone(), outbox.clone());
    note(db, outbox, "poison-a", 0, 4).await;
    note(db, outbox, "poison-b", 0, 3).await;
    note(db, outbox, "fine", 0, 3).await;
    // Streamed after the aggregate is held: parked as well.
    wait_for(&broker, 5).await;
    note(db, outbox, "poison-a", 4, 1).await;
    note(db, outbox, "fine", 3, 1).await;
    wait_for(&broker, 6).await;
    let entries = async || {
        ops.log_dead_letters(Some(slot), None, None, 100)
            .await
            .unwrap()
    };
    eventually("two dead and four parked entries", async || {
        entries().await.len() >= 6
    })
    .await;
    let summary = |entries: &[LogDeadLetter]| {
        let mut summary = entries
            .iter()
            .map(|e| {
                let n = e
                    .envelope
                    .as_ref()
                    .map(|env| env.decode::<OrderNotedV2>().unwrap().n);
                (e.aggregate_id.clone(), n, e.status)
            })
            .collect::<Vec<_>>();
        summary.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
        summary
    };
    assert_eq!(
        summary(&entries().await),
        [
            ("poison-a".into(), Some(1), Dead),
            ("poison-a".into(), Some(2), Parked),
            ("poison-a".into(), Some(3), Parked),
            ("poison-a".into(), Some(4), Parked),
            ("poison-b".into(), Some(1), Dead),
            ("poison-b".into(), Some(2), Parked),
        ]
    );
    assert_eq!(
        notes(&broker.published()),
        [
            ("poison-a".into(), 0),
            ("poison-b".into(), 0),
            ("fine".into(), 0),
            ("fine".into(), 1),
            ("fine".into(), 2),
            ("fine".into(), 3),
        ],
        "only the poisoned aggregates wait"
    );

    // Requeue poison-a's dead note (the broker accepts it now); skip poison-b's.
    broker.clear_failures();
    let dead = ops
        .log_dead_letters(Some(slot), None, Some(Dead), 10)
        .await
        .unwrap();
    let id_of = |aggregate: &str| {
        dead.iter()
            .find(|e| e.aggregate_id == aggregate)
            .map(|e| e.id)
            .unwrap()
    };
    let (dead_a, dead_b) = (id_of("poison-a"), id_of("poison-b"));
    assert!(
        ops.skip_log_dead_letter(dead_b, "ops@example", " ")
            .await
            .is_err(),
        "a reason is required"
    );
    assert!(
        ops.requeue_log_dead_letter(dead_a, "ops@example")
            .await
            .unwrap()
    );
    assert!(
        ops.skip_log_dead_letter(dead_b, "ops@example", "note 1 was a test")
            .await
            .unwrap()
    );
    assert!(
        !ops.requeue_log_dead_letter(dead_b, "ops@example")
            .await
            .unwrap(),
        "not dead any more"
    );
    wait_for(&broker, 11).await;
    assert_eq!(
        published_notes(&broker, "poison-a"),
        [0, 1, 2, 3, 4],
        "requeued, then the parked ones, in order"
    );
    assert_eq!(
        published_notes(&broker, "poison-b"),
        [0, 2],
        "skipped: never published; the parked one released"
    );
    // The broker has them before their entries are marked.
    eventually("every held entry released", async || {
        !entries().await.iter().any(|e| e.status.holds_aggregate())
    })
    .await;
    assert_eq!(
        summary(&entries().await)
            .iter()
            .map(|e| e.2)
            .collect::<Vec<_>>(),
        [
            Published, Published, Published, Published, Skipped, Published
        ]
    );
    // The aggregate is free again: its next event goes straight out.
    note(db, outbox, "poison-a", 5, 1).await;
    wait_for(&broker, 12).await;
    let log = ops.operator_log(None).await.unwrap();
    assert_eq!(log.len(), 2, "{log:?}");
    assert!(
        log.iter()
            .any(|a| a.actor == "ops@example" && a.reason.as_deref() == Some("note 1 was a test"))
    );
    let report = running.stop().await;
    assert_eq!(report.dead_lettered, 2, "{report:?}");
    assert_eq!(report.parked, 4, "{report:?}");
    assert_eq!(report.released, 5, "{report:?}");
}

/// The command line shows the write mode and the log relay's slot in `status`, lists and
/// shows its dead letters (the envelope pretty-printed, JSON on request), requeues one (the
/// relay publishes it) and refuses to requeue it twice.
pub async fn the_command_line_shows_and_requeues_log_dead_letters(
    db: &TestDb,
    outbox: &Outbox,
    slot: &str,
    relay: RelayFor<'_>,
    live: impl Future<Output = ()>,
) {
    let broker = InProcessBroker::new();
    broker.fail_messages(|envelope| {
        (envelope.aggregate_id == "poison").then(|| PublishError::rejected("no <b>way</b>"))
    });
    let running = Running::start(relay(outbox, &broker).build().unwrap());
    live.await;
    note(db, outbox, "poison", 0, 1).await;
    note(db, outbox, "fine", 0, 1).await;
    wait_for(&broker, 1).await;
    let cli = async |args: &[&str]| crate::ops_cli::run(db, outbox, args).await;
    let deadline = tokio::time::Instant::now() + WAIT;
    let listed = loop {
        let (code, out, err) = cli(&["outbox", "log-dead", "list"]).await;
        assert_eq!(code, 0, "{err}");
        if out.contains("\tdead\t") {
            break out;
        }
        assert!(tokio::time::Instant::now() < deadline, "{out}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        listed.contains("outboxtest.ordering.order-noted.v2"),
        "{listed}"
    );
    assert!(listed.ends_with("1 entry\n"), "{listed}");
    let id = listed
        .lines()
        .nth(1)
        .unwrap()
        .split('\t')
        .next()
        .unwrap()
        .to_owned();
    let (code, shown, _) = cli(&["outbox", "log-dead", "show", &id]).await;
    assert_eq!(code, 0);
    assert!(shown.contains("status:       dead"), "{shown}");
    assert!(shown.contains("rejected"), "{shown}");
    assert!(shown.contains("\"aggregate_id\": \"poison\""), "{shown}");
    let (code, json, _) = cli(&["outbox", "log-dead", "show", &id, "--format", "json"]).await;
    assert_eq!(code, 0);
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(value["status"], "dead", "{json}");

    let (code, status, _) = cli(&["outbox", "status"]).await;
    assert_eq!(code, 0);
    assert!(status.contains("write mode:        table"), "{status}");
    assert!(
        status.contains(&format!("  {slot}  active relay: log-relay-")),
        "{status}"
    );
    assert!(
        status.contains("log dead letters:  1 dead, 0 parked"),
        "{status}"
    );

    broker.clear_failures();
    let (code, out, err) = cli(&["outbox", "log-dead", "requeue", &id, "--actor", "ada"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("requeued by ada"), "{out}");
    let (code, _, err) = cli(&["outbox", "log-dead", "requeue", &id]).await;
    assert_eq!(code, 2, "a second requeue is refused");
    assert!(
        err.contains("is requeued") || err.contains("is published"),
        "{err}"
    );
    wait_for(&broker, 2).await;
    assert!(
        broker
            .published()
            .iter()
            .any(|e| e.aggregate_id == "poison")
    );
    let (code, _, err) = cli(&["outbox", "log-dead", "show", "999999"]).await;
    assert_eq!(code, 2);
    assert!(err.contains("999999"), "{err}");
    running.stop().await;
}
