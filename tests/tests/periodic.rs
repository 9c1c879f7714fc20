//! Periodic jobs (book: The job queue, Periodic jobs) on every backend: a cron schedule
//! enqueues one outbox row per period across several relays and restarts, no catch-up storm
//! after downtime unless asked, a changed schedule takes effect from now, and operators see
//! each job's next and last run (operations API and command line).
//!
//! Each scenario runs on a SQLite file, SQLite in memory, PostgreSQL and MariaDB.

// Scenarios are plain async functions called by generated #[tokio::test]s, which clippy's
// `allow-unwrap-in-tests` does not see as tests.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Timelike as _, Utc};
use outbox_core::ContractRegistry;
use outbox_core::clock::ManualClock;
use outbox_core::in_process::InProcessBroker;
use outbox_core::{Envelope, IntegrationEvent as _};
use outbox_seaorm::ops::Operations;
use outbox_seaorm::record::OutboxRecord;
use outbox_seaorm::relay::{Relay, RelayBuilder};
use outbox_seaorm::{Outbox, Periodic, cli, schema};
use outbox_tests::backend_tests;
use outbox_tests::bookstore::OrderNotedV2;
use outbox_tests::db::TestDb;

backend_tests!(
    a_periodic_job_runs_once_per_period_across_relays_and_restarts,
    missed_periods_are_caught_up_only_when_asked,
    a_changed_schedule_takes_effect_from_now,
    the_command_line_lists_periodic_jobs,
    four_relays_meeting_twenty_new_jobs_at_once_fail_nothing,
);

fn t0() -> DateTime<Utc> {
    "2026-03-01T09:00:00Z".parse().unwrap()
}

/// A report every five minutes: a note numbered by the run's minute of the day.
fn report(schedule: &str, catch_up: u32) -> Periodic {
    Periodic::new("report", schedule, |at: DateTime<Utc>| OrderNotedV2 {
        order_id: "report".into(),
        n: at.hour() * 60 + at.minute(),
    })
    .catch_up(catch_up)
}

fn outbox_with(clock: &Arc<ManualClock>, job: Periodic) -> Outbox {
    Outbox::builder()
        .clock(clock.clone())
        .periodic(job)
        .build()
        .unwrap()
}

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
}

/// The minutes of the day of the runs published, in order.
fn published(broker: &InProcessBroker) -> Vec<u32> {
    broker
        .published_for(OrderNotedV2::AGGREGATE_TYPE, "report")
        .iter()
        .map(|envelope: &Envelope| envelope.decode::<OrderNotedV2>().unwrap().n)
        .collect()
}

fn minute(at: &str) -> u32 {
    let at: DateTime<Utc> = at.parse().unwrap();
    at.hour() * 60 + at.minute()
}

/// Three relays look at the same moments, at once: a new job is first due at its next time
/// (nothing at once), then each period's run is enqueued once — by one of them — with the
/// run's time as `occurred_at`; relays built again (a restart) enqueue nothing more; an hour
/// of downtime (twelve periods) enqueues one run, for the latest time; the relay publishes
/// each run once, in order.
async fn a_periodic_job_runs_once_per_period_across_relays_and_restarts(db: &TestDb) {
    let clock = Arc::new(ManualClock::starting_at(t0() + TimeDelta::seconds(30)));
    let outbox = outbox_with(&clock, report("*/5 * * * *", 0));
    schema::install(db.conn(), &outbox).await.unwrap();
    let broker = InProcessBroker::new();
    let ops = Operations::new(db.conn().clone(), outbox.clone());
    let relays = || {
        ["periodic-1", "periodic-2", "periodic-3"]
            .map(|id| relay(db, &outbox, &broker, id).build().unwrap())
    };
    let look = async |relays: &mut [Relay<InProcessBroker>; 3]| {
        let [a, b, c] = relays;
        let (a, b, c) = tokio::join!(
            a.enqueue_periodic(),
            b.enqueue_periodic(),
            c.enqueue_periodic()
        );
        a.unwrap() + b.unwrap() + c.unwrap()
    };
    let mut three = relays();
    assert_eq!(look(&mut three).await, 0, "a new job is not due at once");
    let jobs = ops.periodic().await.unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(
        (jobs[0].name.as_str(), jobs[0].schedule.as_str()),
        ("report", "*/5 * * * *")
    );
    assert_eq!(jobs[0].next_run_at, t0() + TimeDelta::minutes(5));
    assert_eq!((jobs[0].last_run_at, jobs[0].last_message_id), (None, None));

    clock.advance(TimeDelta::minutes(5));
    assert_eq!(
        look(&mut three).await,
        1,
        "one run for the period, whichever relay"
    );
    assert_eq!(look(&mut three).await, 0);
    let rows = OutboxRecord::list(db.conn(), &outbox, 10).await.unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(
        rows[0].envelope.occurred_at,
        t0() + TimeDelta::minutes(5),
        "the run's time"
    );
    let jobs = ops.periodic().await.unwrap();
    assert_eq!(jobs[0].last_run_at, Some(t0() + TimeDelta::minutes(5)));
    assert_eq!(jobs[0].last_message_id, Some(rows[0].envelope.message_id));
    assert_eq!(jobs[0].next_run_at, t0() + TimeDelta::minutes(10));

    // A restart: new relays, the same state.
    let mut three = relays();
    assert_eq!(look(&mut three).await, 0);
    clock.advance(TimeDelta::minutes(5));
    assert_eq!(look(&mut three).await, 1);

    // An hour down: one run, for the latest time; the schedule goes on from now.
    clock.advance(TimeDelta::minutes(62));
    assert_eq!(look(&mut three).await, 1, "no catch-up storm");
    let jobs = ops.periodic().await.unwrap();
    assert_eq!(jobs[0].last_run_at, Some(t0() + TimeDelta::minutes(70)));
    assert_eq!(jobs[0].next_run_at, t0() + TimeDelta::minutes(75));
    three[0].drain().await.unwrap();
    assert_eq!(
        published(&broker),
        [
            minute("2026-03-01T09:05:00Z"),
            minute("2026-03-01T09:10:00Z"),
            minute("2026-03-01T10:10:00Z")
        ]
    );
}

/// `catch_up(3)`: after an hour down, the latest four missed times are enqueued, oldest
/// first, and published in that order; never more.
async fn missed_periods_are_caught_up_only_when_asked(db: &TestDb) {
    let clock = Arc::new(ManualClock::starting_at(t0()));
    let outbox = outbox_with(&clock, report("*/5 * * * *", 3));
    schema::install(db.conn(), &outbox).await.unwrap();
    let broker = InProcessBroker::new();
    let mut relay = relay(db, &outbox, &broker, "periodic-1").build().unwrap();
    assert_eq!(relay.enqueue_periodic().await.unwrap(), 0);
    clock.advance(TimeDelta::minutes(61));
    assert_eq!(relay.enqueue_periodic().await.unwrap(), 4);
    assert_eq!(relay.enqueue_periodic().await.unwrap(), 0);
    relay.drain().await.unwrap();
    assert_eq!(
        published(&broker),
        [
            minute("2026-03-01T09:45:00Z"),
            minute("2026-03-01T09:50:00Z"),
            minute("2026-03-01T09:55:00Z"),
            minute("2026-03-01T10:00:00Z"),
        ]
    );
}

/// A deployment that changes the schedule (every five minutes → on the hour): the next run
/// is computed again from now, nothing is enqueued for the old schedule, and the new one
/// holds; the drain's look does it too.
async fn a_changed_schedule_takes_effect_from_now(db: &TestDb) {
    let clock = Arc::new(ManualClock::starting_at(t0()));
    let before = outbox_with(&clock, report("*/5 * * * *", 0));
    schema::install(db.conn(), &before).await.unwrap();
    let broker = InProcessBroker::new();
    relay(db, &before, &broker, "periodic-1")
        .build()
        .unwrap()
        .enqueue_periodic()
        .await
        .unwrap();
    clock.advance(TimeDelta::minutes(7));
    let after = outbox_with(&clock, report("0 * * * *", 0));
    let ops = Operations::new(db.conn().clone(), after.clone());
    let mut relay = relay(db, &after, &broker, "periodic-2").build().unwrap();
    relay.drain().await.unwrap();
    assert!(broker.is_empty(), "nothing for the old schedule's due run");
    let jobs = ops.periodic().await.unwrap();
    assert_eq!(jobs[0].schedule, "0 * * * *");
    assert_eq!(jobs[0].next_run_at, t0() + TimeDelta::hours(1));
    clock.advance(TimeDelta::minutes(53));
    relay.drain().await.unwrap();
    assert_eq!(published(&broker), [minute("2026-03-01T10:00:00Z")]);
}

/// `outbox periodic` lists each job's schedule, next run and last run (human and JSON).
async fn the_command_line_lists_periodic_jobs(db: &TestDb) {
    let clock = Arc::new(ManualClock::starting_at(t0()));
    let outbox = outbox_with(&clock, report("*/5 * * * *", 0));
    schema::install(db.conn(), &outbox).await.unwrap();
    let broker = InProcessBroker::new();
    let mut relay = relay(db, &outbox, &broker, "periodic-1").build().unwrap();
    relay.enqueue_periodic().await.unwrap();
    clock.advance(TimeDelta::minutes(5));
    relay.enqueue_periodic().await.unwrap();
    let run = async |args: &[&str]| {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = cli::run_with(
            std::iter::once("ops").chain(args.iter().copied()),
            db.conn().clone(),
            outbox.clone(),
            || ContractRegistry::from_registrations([]),
            &mut out,
            &mut err,
        )
        .await;
        assert_eq!(code, 0, "{}", String::from_utf8_lossy(&err));
        String::from_utf8(out).unwrap()
    };
    let human = run(&["outbox", "periodic"]).await;
    assert!(
        human.starts_with("NAME\tSCHEDULE\tNEXT RUN\tLAST RUN\tLAST MESSAGE ID\n"),
        "{human}"
    );
    assert!(
        human.contains(
            "report\t*/5 * * * *\t2026-03-01T09:10:00+00:00\t2026-03-01T09:05:00+00:00\t"
        ),
        "{human}"
    );
    assert!(human.ends_with("1 periodic job(s)\n"), "{human}");
    let json: serde_json::Value =
        serde_json::from_str(&run(&["outbox", "periodic", "--format", "json"]).await).unwrap();
    assert_eq!(json[0]["name"], "report");
    assert_eq!(json[0]["next_run_at"], "2026-03-01T09:10:00Z");
}

/// Four relays look at once at twenty jobs none of them has seen, twice (the rows created,
/// then the runs due): no look fails — on MariaDB, locking reads of rows that did not exist
/// yet held their gaps and the relays' inserts deadlocked (CI caught it with three relays) —
/// and each job's run is enqueued once.
async fn four_relays_meeting_twenty_new_jobs_at_once_fail_nothing(db: &TestDb) {
    let clock = Arc::new(ManualClock::starting_at(t0()));
    let mut builder = Outbox::builder().clock(clock.clone());
    for n in 0..20 {
        builder = builder.periodic(Periodic::new(
            format!("job-{n}"),
            "*/5 * * * *",
            |_: DateTime<Utc>| OrderNotedV2 {
                order_id: "report".into(),
                n: 0,
            },
        ));
    }
    let outbox = builder.build().unwrap();
    schema::install(db.conn(), &outbox).await.unwrap();
    let broker = InProcessBroker::new();
    let mut relays: Vec<_> = (0..4)
        .map(|n| {
            relay(db, &outbox, &broker, &format!("periodic-{n}"))
                .build()
                .unwrap()
        })
        .collect();
    for expected in [0, 20] {
        let looks = relays.iter_mut().map(|relay| relay.enqueue_periodic());
        let runs: Vec<u64> = futures_util::future::join_all(looks)
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(runs.iter().sum::<u64>(), expected, "{runs:?}");
        clock.advance(TimeDelta::minutes(5));
    }
    assert_eq!(OutboxRecord::count(db.conn(), &outbox).await.unwrap(), 20);
}
