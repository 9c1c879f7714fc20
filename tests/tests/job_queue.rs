//! Job-queue mode (book: The job queue) on every backend: with no broker, the relay runs
//! each outbox row as a local job by event type ([`JobDispatcher`]), restricted by worker
//! keys, honouring the per-row `retryable` flag (`failed` + alert hook instead of a retry).
//!
//! Each scenario runs on a SQLite file, SQLite in memory, PostgreSQL and MariaDB.

// Scenarios are plain async functions called by generated #[tokio::test]s, which clippy's
// `allow-unwrap-in-tests` does not see as tests.
#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicU32, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::TimeDelta;
use outbox_core::clock::ManualClock;
use outbox_core::mapping::{ContractMapper, ContractSink, MapError};
use outbox_core::name::WorkerKeyError;
use outbox_core::policy::{Backoff, DeadLetterPolicy, Ordering};
use outbox_core::{ContractRegistry, Envelope, IntegrationEvent, Raise};
use outbox_seaorm::job::{FailedJob, Job, JobDispatcher, JobDispatcherError, JobError, JobFailure};
use outbox_seaorm::ops::{Operations, OperatorActionKind};
use outbox_seaorm::record::OutboxRecord;
use outbox_seaorm::relay::{Relay, RelayBuilder, RelayConfigError};
use outbox_seaorm::schema::{self, OutboxStatus};
use outbox_seaorm::{ConfigError, Outbox, cli};
use outbox_tests::backend_tests;
use outbox_tests::db::{Backend, TestDb};
use schemars::JsonSchema;
use sea_orm::{ConnectionTrait, Statement};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

backend_tests!(
    flaky_mail_is_retried_with_backoff,
    failed_payout_is_never_retried_and_alerts_once,
    failed_payout_under_skip_policy_lets_its_aggregate_go,
    worker_keys_route_rows_to_their_relays,
    unhandled_and_undecodable_jobs_go_dead,
    fast_path_leaves_non_retryable_jobs_to_the_relay,
    a_snoozed_job_waits_without_spending_an_attempt,
    a_job_past_its_deadline_is_cancelled_and_counts_as_an_attempt,
);

// ---- contracts, domain events, mapping ------------------------------------------------

/// Send the order confirmation e-mail.
#[derive(Debug, Clone, PartialEq, IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(
    name = "jobtest.notifications.order-confirmation-requested.v1",
    key = order_id
)]
struct OrderConfirmationRequestedV1 {
    order_id: String,
    email: String,
}

/// Pay a seller (money leaves: never retried automatically).
#[derive(Debug, Clone, PartialEq, IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "jobtest.payments.payout-requested.v1", key = order_id)]
struct PayoutRequestedV1 {
    order_id: String,
    payout: String,
    amount_cents: i64,
}

/// A job type nobody handles.
#[derive(Debug, Clone, PartialEq, IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "jobtest.notifications.sms-requested.v1", key = order_id)]
struct SmsRequestedV1 {
    order_id: String,
    phone: String,
}

/// An event without a job entry: no worker key (a broker relay's row).
#[derive(Debug, Clone, PartialEq, IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "jobtest.ordering.order-noted.v1", key = order_id)]
struct OrderNotedV1 {
    order_id: String,
}

enum ShopEvent {
    Confirm { order: String, email: String },
    Payout { order: String, payout: String },
    Sms { order: String },
    Note { order: String },
}

struct ShopContracts;

impl ContractMapper<ShopEvent> for ShopContracts {
    fn map(&self, event: &ShopEvent, out: &mut ContractSink<'_>) -> Result<(), MapError> {
        match event {
            ShopEvent::Confirm { order, email } => out.emit(&OrderConfirmationRequestedV1 {
                order_id: order.clone(),
                email: email.clone(),
            }),
            ShopEvent::Payout { order, payout } => out.emit(&PayoutRequestedV1 {
                order_id: order.clone(),
                payout: payout.clone(),
                amount_cents: 1_250,
            }),
            ShopEvent::Sms { order } => out.emit(&SmsRequestedV1 {
                order_id: order.clone(),
                phone: "+90 555 000 00 00".into(),
            }),
            ShopEvent::Note { order } => out.emit(&OrderNotedV1 {
                order_id: order.clone(),
            }),
        }
    }
}

// ---- the outside world ----------------------------------------------------------------

/// A mail server that fails its first `failures` calls.
#[derive(Default)]
struct FlakyMailServer {
    failures: AtomicU32,
    calls: AtomicU32,
    delivered: Mutex<Vec<Uuid>>,
}

impl FlakyMailServer {
    fn failing(failures: u32) -> Arc<Self> {
        let server = Self::default();
        server.failures.store(failures, AtomicOrdering::SeqCst);
        Arc::new(server)
    }

    fn send(&self, idempotency_key: Uuid) -> Result<(), JobError> {
        self.calls.fetch_add(1, AtomicOrdering::SeqCst);
        let left = self.failures.load(AtomicOrdering::SeqCst);
        if left > 0 {
            self.failures.store(left - 1, AtomicOrdering::SeqCst);
            return Err(JobError::retryable(
                "mail server: 421 service not available",
            ));
        }
        self.delivered.lock().unwrap().push(idempotency_key);
        Ok(())
    }

    fn calls(&self) -> u32 {
        self.calls.load(AtomicOrdering::SeqCst)
    }
}

/// A payment gateway that declines the payouts listed in `declined` (until cleared).
#[derive(Default)]
struct PaymentGateway {
    declined: Mutex<Vec<String>>,
    calls: Mutex<Vec<String>>,
}

impl PaymentGateway {
    fn pay(&self, payout: &str) -> Result<(), JobError> {
        self.calls.lock().unwrap().push(payout.to_owned());
        if self.declined.lock().unwrap().iter().any(|p| p == payout) {
            return Err(JobError::retryable("bank did not answer within 30 s"));
        }
        Ok(())
    }

    fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }
}

/// The job handlers, over a mail server and a payment gateway; `calls_by_type` counts every
/// handler call by event type (a handler that should never run shows up here).
struct World {
    mail: Arc<FlakyMailServer>,
    gateway: Arc<PaymentGateway>,
    alerts: Arc<Mutex<Vec<FailedJob>>>,
}

impl World {
    fn new(mail_failures: u32) -> Self {
        Self {
            mail: FlakyMailServer::failing(mail_failures),
            gateway: Arc::new(PaymentGateway::default()),
            alerts: Arc::new(Mutex::new(Vec::new())),
        }
    }

    fn dispatcher(&self) -> JobDispatcher {
        let mail = Arc::clone(&self.mail);
        let gateway = Arc::clone(&self.gateway);
        JobDispatcher::builder()
            .handler(
                move |job: OrderConfirmationRequestedV1, envelope: &Envelope| {
                    let mail = Arc::clone(&mail);
                    let key = envelope.message_id;
                    async move {
                        assert!(job.email.contains('@'));
                        mail.send(key)
                    }
                },
            )
            .handler(move |job: PayoutRequestedV1, _: &Envelope| {
                let gateway = Arc::clone(&gateway);
                async move { gateway.pay(&job.payout) }
            })
            .handler(|_: OrderNotedV1, _: &Envelope| async { Ok(()) })
            .build()
            .unwrap()
    }

    fn alerts(&self) -> Vec<FailedJob> {
        self.alerts.lock().unwrap().clone()
    }

    /// A relay running this world's jobs, with fast test timings and a deterministic
    /// backoff of 100 ms, 200 ms, … on the outbox's manual clock.
    fn relay(&self, db: &TestDb, outbox: &Outbox, id: &str) -> RelayBuilder<JobDispatcher> {
        self.relay_with(db, outbox, id, self.dispatcher())
    }

    /// [`relay`](Self::relay) with handlers of the test's own.
    fn relay_with(
        &self,
        db: &TestDb,
        outbox: &Outbox,
        id: &str,
        jobs: JobDispatcher,
    ) -> RelayBuilder<JobDispatcher> {
        let alerts = Arc::clone(&self.alerts);
        Relay::builder(db.conn().clone(), outbox.clone(), jobs)
            .instance_id(id)
            // Done jobs are kept: the tests read each job's row afterwards.
            .retention(Some(Duration::from_secs(7 * 24 * 3600)))
            .poll_interval(Duration::from_millis(20))
            .heartbeat_interval(Duration::from_millis(200))
            .lease_ttl(Duration::from_secs(2))
            .publish_timeout(Duration::from_millis(800))
            .batch_size(10)
            .backoff(
                Backoff::new()
                    .with_min_delay(Duration::from_millis(100))
                    .with_jitter(false),
            )
            .alert_hook(move |job: FailedJob| {
                let alerts = Arc::clone(&alerts);
                async move {
                    alerts.lock().unwrap().push(job);
                    Ok::<(), std::io::Error>(())
                }
            })
    }
}

// ---- helpers --------------------------------------------------------------------------

fn t0() -> chrono::DateTime<chrono::Utc> {
    "2026-03-01T09:00:00Z".parse().unwrap()
}

/// The job configuration of the demo's block 7 (book: The demo): e-mails to the `notifications` workers (retryable),
/// payouts to the `payments` workers (not retryable), SMS to `notifications`.
fn job_outbox() -> (Outbox, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::starting_at(t0()));
    let outbox = Outbox::builder()
        .clock(clock.clone())
        .job(Job::of::<OrderConfirmationRequestedV1>().worker_key("notifications"))
        .job(
            Job::of::<PayoutRequestedV1>()
                .worker_key("payments")
                .retryable(false),
        )
        .job(Job::of::<SmsRequestedV1>().worker_key("notifications"))
        .build()
        .unwrap();
    (outbox, clock)
}

async fn setup(db: &TestDb, outbox: &Outbox) {
    schema::install(db.conn(), outbox).await.expect("install");
}

async fn raise(db: &TestDb, outbox: &Outbox, events: Vec<ShopEvent>) -> Vec<Uuid> {
    let uow = outbox.begin(db.conn(), &ShopContracts).await.unwrap();
    for event in events {
        uow.raise(event);
    }
    uow.commit().await.unwrap().message_ids
}

async fn row(db: &TestDb, outbox: &Outbox, id: Uuid) -> OutboxRecord {
    Operations::new(db.conn().clone(), outbox.clone())
        .find(id)
        .await
        .unwrap()
        .unwrap()
}

fn confirm(order: &str) -> ShopEvent {
    ShopEvent::Confirm {
        order: order.into(),
        email: format!("{order}@example.com"),
    }
}

fn payout(order: &str, payout: &str) -> ShopEvent {
    ShopEvent::Payout {
        order: order.into(),
        payout: payout.into(),
    }
}

fn is_server(db: &TestDb) -> bool {
    matches!(db.backend(), Backend::Postgres | Backend::MariaDb)
}

// ---- scenarios ------------------------------------------------------------------------

/// (a) An order-confirmation e-mail against a mail server that fails twice, then accepts:
/// the relay retries it after its backoff (nothing earlier), the row ends `published` with
/// its two failed attempts recorded and the last failure kept in `last_error`; the handler
/// ran three times, always with the row's message id.
async fn flaky_mail_is_retried_with_backoff(db: &TestDb) {
    let (outbox, clock) = job_outbox();
    setup(db, &outbox).await;
    let world = World::new(2);
    let ids = raise(db, &outbox, vec![confirm("o-1")]).await;
    let stored = row(db, &outbox, ids[0]).await;
    assert_eq!(stored.worker_key.as_deref(), Some("notifications"));
    assert!(stored.retryable);

    let mut relay = world
        .relay(db, &outbox, "mailer-1")
        .worker_keys(["notifications"])
        .build()
        .unwrap();
    let first = relay.drain().await.unwrap();
    assert_eq!((first.published, first.retried), (0, 1), "{first:?}");
    let stored = row(db, &outbox, ids[0]).await;
    assert_eq!(stored.status, OutboxStatus::Pending);
    assert_eq!(stored.attempts, 1);
    assert_eq!(
        stored.next_attempt_at,
        t0() + TimeDelta::milliseconds(100),
        "backoff 100 ms"
    );
    assert!(stored.last_error.unwrap().contains("421"));

    // Still in backoff: not run again.
    assert_eq!(relay.drain().await.unwrap().retried, 0);
    assert_eq!(world.mail.calls(), 1);

    clock.advance(TimeDelta::milliseconds(100));
    let second = relay.drain().await.unwrap();
    assert_eq!(second.retried, 1, "{second:?}");
    let stored = row(db, &outbox, ids[0]).await;
    assert_eq!(stored.attempts, 2);
    assert_eq!(
        stored.next_attempt_at,
        clock_now(&clock) + TimeDelta::milliseconds(200),
        "backoff doubles"
    );

    clock.advance(TimeDelta::milliseconds(200));
    let third = relay.drain().await.unwrap();
    assert_eq!(third.published, 1, "{third:?}");
    assert_eq!(world.mail.calls(), 3);
    assert_eq!(*world.mail.delivered.lock().unwrap(), [ids[0]]);
    let stored = row(db, &outbox, ids[0]).await;
    assert_eq!(stored.status, OutboxStatus::Published);
    assert_eq!(stored.attempts, 2, "failed attempts stay recorded");
    assert!(
        stored.last_error.unwrap().contains("421"),
        "the last failure is kept as history"
    );
    assert!(stored.published_at.is_some());
    assert!(world.alerts().is_empty(), "retryable jobs never alert");

    // Nothing left: the handler does not run again.
    relay.drain().await.unwrap();
    assert_eq!(world.mail.calls(), 3);
}

fn clock_now(clock: &ManualClock) -> chrono::DateTime<chrono::Utc> {
    use outbox_core::clock::Clock as _;
    clock.now()
}

/// (b) A payout that is not retryable fails once: the row goes `failed` (attempt recorded),
/// the alert hook fires exactly once with its message id, no later drain runs it again —
/// nor the same order's later payout, held back under `Block`. Status, `failed_jobs` and
/// the command line report it. An operator's requeue (recorded) runs it again; then the
/// held-back payout goes too.
async fn failed_payout_is_never_retried_and_alerts_once(db: &TestDb) {
    let (outbox, clock) = job_outbox();
    setup(db, &outbox).await;
    let world = World::new(0);
    world.gateway.declined.lock().unwrap().push("p-1".into());
    let first = raise(db, &outbox, vec![payout("o-1", "p-1")]).await[0];
    let later = raise(db, &outbox, vec![payout("o-1", "p-2")]).await[0];
    let stored = row(db, &outbox, first).await;
    assert_eq!(stored.worker_key.as_deref(), Some("payments"));
    assert!(!stored.retryable, "the flag is stored on the row");

    let mut relay = world
        .relay(db, &outbox, "payer-1")
        .worker_keys(["payments"])
        .build()
        .unwrap();
    let report = relay.drain().await.unwrap();
    assert_eq!((report.failed, report.published), (1, 0), "{report:?}");
    assert_eq!(world.gateway.calls(), ["p-1"], "p-2 waits behind p-1");
    let stored = row(db, &outbox, first).await;
    assert_eq!(stored.status, OutboxStatus::Failed);
    assert_eq!(stored.attempts, 1);
    assert!(stored.last_error.unwrap().contains("bank did not answer"));
    assert_eq!(row(db, &outbox, later).await.status, OutboxStatus::Pending);

    let alerts = world.alerts();
    assert_eq!(alerts.len(), 1, "the alert hook fires once");
    assert_eq!(alerts[0].envelope.message_id, first);
    assert_eq!(alerts[0].worker_key.as_deref(), Some("payments"));
    assert_eq!(alerts[0].attempts, 1);
    assert_eq!(alerts[0].relay, "payer-1");
    assert!(matches!(
        std::error::Error::source(&alerts[0].error)
            .and_then(|source| source.downcast_ref::<JobFailure>()),
        Some(JobFailure::Handler(_))
    ));

    // Time passes, the bank is back: nothing runs again by itself.
    world.gateway.declined.lock().unwrap().clear();
    for _ in 0..3 {
        clock.advance(TimeDelta::minutes(10));
        let report = relay.drain().await.unwrap();
        assert_eq!(report.published + report.failed, 0, "{report:?}");
    }
    assert_eq!(world.gateway.calls(), ["p-1"]);
    assert_eq!(world.alerts().len(), 1);

    // Operations see it.
    let ops = Operations::new(db.conn().clone(), outbox.clone());
    let status = ops.status().await.unwrap();
    assert_eq!(status.failed(), 1);
    assert_eq!(status.dead(), 0);
    assert_eq!(
        status.failed_by_event_type[PayoutRequestedV1::EVENT_TYPE],
        1
    );
    assert_eq!(status.pending, 1, "p-2");
    assert_eq!(status.pending_by_worker_key["payments"].pending, 1);
    let failed = ops.failed_jobs(None, 10).await.unwrap();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].envelope.message_id, first);
    assert!(ops.dead_letters(None, 10).await.unwrap().is_empty());
    let (code, out) = run_cli(db, &outbox, &["outbox", "status"]).await;
    assert_eq!(code, 0);
    assert!(out.contains("failed:            1"), "{out}");
    assert!(out.contains("payments  1"), "{out}");
    let (code, _) = run_cli(db, &outbox, &["outbox", "status", "--fail-on-dead"]).await;
    assert_eq!(code, 1, "failed rows need a person too");
    let (_, out) = run_cli(
        db,
        &outbox,
        &["outbox", "dead", "list", "--status", "failed"],
    )
    .await;
    assert!(out.contains(&first.to_string()), "{out}");
    assert!(out.ends_with("1 failed row(s)\n"), "{out}");
    let (_, out) = run_cli(db, &outbox, &["outbox", "dead", "list"]).await;
    assert!(out.ends_with("0 dead row(s)\n"), "{out}");
    // `requeue --all-dead` never touches failed rows.
    assert!(
        ops.requeue_dead(None, "bot", None)
            .await
            .unwrap()
            .is_empty()
    );

    // A person checked with the bank: not paid. Requeue (recorded) runs it again.
    let action = ops
        .requeue(first, "carol", Some("bank confirms p-1 was not paid"))
        .await
        .unwrap();
    assert_eq!(action.action, OperatorActionKind::Requeue);
    assert_eq!(action.previous_status, "failed");
    let log = ops.operator_log(Some(first)).await.unwrap();
    assert_eq!(log.len(), 1);
    assert!(log[0].last_error.as_deref().unwrap().contains("bank"));
    let report = relay.drain().await.unwrap();
    assert_eq!(report.published, 2, "p-1, then p-2 behind it: {report:?}");
    assert_eq!(world.gateway.calls(), ["p-1", "p-1", "p-2"]);
    assert_eq!(
        row(db, &outbox, first).await.status,
        OutboxStatus::Published
    );
    assert_eq!(
        row(db, &outbox, later).await.status,
        OutboxStatus::Published
    );
    assert_eq!(world.alerts().len(), 1);
    assert_eq!(ops.status().await.unwrap().failed(), 0);
}

async fn run_cli(db: &TestDb, outbox: &Outbox, args: &[&str]) -> (u8, String) {
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
    (code, String::from_utf8(out).unwrap())
}

/// Under `DeadLetterPolicy::Skip` a failed row does not hold its aggregate back; `skip`
/// gives it up for good (recorded).
async fn failed_payout_under_skip_policy_lets_its_aggregate_go(db: &TestDb) {
    let (outbox, _clock) = job_outbox();
    setup(db, &outbox).await;
    let world = World::new(0);
    world.gateway.declined.lock().unwrap().push("p-1".into());
    let first = raise(db, &outbox, vec![payout("o-1", "p-1")]).await[0];
    let later = raise(db, &outbox, vec![payout("o-1", "p-2")]).await[0];
    let mut relay = world
        .relay(db, &outbox, "payer-1")
        .worker_keys(["payments"])
        .dead_letter_policy(DeadLetterPolicy::Skip)
        .build()
        .unwrap();
    let report = relay.drain().await.unwrap();
    assert_eq!((report.failed, report.published), (1, 1), "{report:?}");
    assert_eq!(world.gateway.calls(), ["p-1", "p-2"]);
    assert_eq!(row(db, &outbox, first).await.status, OutboxStatus::Failed);
    assert_eq!(
        row(db, &outbox, later).await.status,
        OutboxStatus::Published
    );
    assert_eq!(world.alerts().len(), 1);

    let ops = Operations::new(db.conn().clone(), outbox.clone());
    let skipped = ops
        .skip(first, "carol", "paid by hand from the bank's portal")
        .await
        .unwrap();
    assert_eq!(skipped.previous_status, "failed");
    assert_eq!(row(db, &outbox, first).await.status, OutboxStatus::Skipped);
    relay.drain().await.unwrap();
    assert_eq!(
        world.gateway.calls(),
        ["p-1", "p-2"],
        "skipped: never run again"
    );
}

/// (c) Worker keys: a `notifications` relay never claims `payments` rows nor rows without a
/// key; a `payments` relay does; a second `payments` relay is a standby while the first
/// holds the key's lease; a relay without worker keys still gets every partition (keyed
/// relays are not counted when partitions are spread) and claims the unkeyed row. On
/// PostgreSQL / MariaDB an unordered keyed relay needs no lease.
async fn worker_keys_route_rows_to_their_relays(db: &TestDb) {
    let (outbox, _clock) = job_outbox();
    setup(db, &outbox).await;
    let world = World::new(0);
    let ids = raise(
        db,
        &outbox,
        vec![
            payout("o-1", "p-1"),
            confirm("o-1"),
            ShopEvent::Note {
                order: "o-1".into(),
            },
        ],
    )
    .await;
    let (payout_id, mail_id, note_id) = (ids[0], ids[1], ids[2]);
    assert_eq!(row(db, &outbox, note_id).await.worker_key, None);
    assert!(row(db, &outbox, note_id).await.retryable);

    let mut notifications = world
        .relay(db, &outbox, "notifications-1")
        .worker_keys(["notifications"])
        .build()
        .unwrap();
    let report = notifications.drain().await.unwrap();
    assert_eq!(report.published, 1, "{report:?}");
    assert_eq!(world.mail.calls(), 1);
    assert!(world.gateway.calls().is_empty(), "never a payments row");
    assert_eq!(
        row(db, &outbox, mail_id).await.status,
        OutboxStatus::Published
    );
    assert_eq!(
        row(db, &outbox, payout_id).await.status,
        OutboxStatus::Pending
    );
    assert_eq!(
        row(db, &outbox, note_id).await.status,
        OutboxStatus::Pending
    );
    assert_eq!(
        notifications.owned_leases(),
        ["worker/notifications"],
        "one lease per worker key"
    );

    let mut payments = world
        .relay(db, &outbox, "payments-1")
        .worker_keys(["payments"])
        .build()
        .unwrap();
    assert_eq!(payments.drain().await.unwrap().published, 1);
    assert_eq!(world.gateway.calls(), ["p-1"]);
    assert_eq!(
        row(db, &outbox, note_id).await.status,
        OutboxStatus::Pending
    );

    // A second relay with the same key waits while the first holds the lease.
    let standby_row = raise(db, &outbox, vec![payout("o-2", "p-2")]).await[0];
    let mut standby = world
        .relay(db, &outbox, "payments-2")
        .worker_keys(["payments"])
        .build()
        .unwrap();
    let report = standby.drain().await.unwrap();
    assert_eq!(report.published + report.failed, 0, "standby: {report:?}");
    assert!(world.gateway.calls().len() == 1, "the standby ran nothing");
    assert!(standby.owned_leases().is_empty());
    assert_eq!(payments.drain().await.unwrap().published, 1);
    assert_eq!(
        row(db, &outbox, standby_row).await.status,
        OutboxStatus::Published
    );

    // Pending rows per worker key: none left for the keys.
    let status = Operations::new(db.conn().clone(), outbox.clone())
        .status()
        .await
        .unwrap();
    assert!(status.pending_by_worker_key.is_empty(), "{status:?}");
    assert_eq!(status.pending, 1, "the unkeyed row");
    assert_eq!(status.live_relays.len(), 3);

    // A relay without worker keys: partitions are not handed to keyed relays.
    let mut everything = world.relay(db, &outbox, "all-1").build().unwrap();
    let leases = everything.refresh_leases().await.unwrap();
    assert_eq!(leases.live_instances, ["all-1"]);
    assert_eq!(
        everything.drain().await.unwrap().published,
        1,
        "the unkeyed row"
    );
    assert_eq!(
        row(db, &outbox, note_id).await.status,
        OutboxStatus::Published
    );

    if is_server(db) {
        // Unordered keyed relays share a key through SKIP LOCKED, without a lease.
        let shared = raise(db, &outbox, vec![confirm("o-3")]).await[0];
        let mut unordered = world
            .relay(db, &outbox, "notifications-2")
            .worker_keys(["notifications"])
            .ordering(Ordering::Unordered)
            .build()
            .unwrap();
        assert_eq!(unordered.drain().await.unwrap().published, 1);
        assert!(unordered.owned_leases().is_empty());
        assert_eq!(
            row(db, &outbox, shared).await.status,
            OutboxStatus::Published
        );
    }
    assert!(world.alerts().is_empty());
}

/// (d) A job nobody handles goes `dead` at once with a typed reason instead of being
/// retried; so does one whose payload does not decode to its contract.
async fn unhandled_and_undecodable_jobs_go_dead(db: &TestDb) {
    let (outbox, _clock) = job_outbox();
    setup(db, &outbox).await;
    let world = World::new(0);
    let sms = raise(
        db,
        &outbox,
        vec![ShopEvent::Sms {
            order: "o-1".into(),
        }],
    )
    .await[0];
    let broken = raise(db, &outbox, vec![confirm("o-2")]).await[0];
    let seq = row(db, &outbox, broken).await.seq;
    let backend = db.conn().get_database_backend();
    db.conn()
        .execute_raw(Statement::from_string(
            backend,
            format!("UPDATE outbox SET payload = '{{\"order_id\": \"o-2\"}}' WHERE seq = {seq}"),
        ))
        .await
        .unwrap();

    let mut relay = world
        .relay(db, &outbox, "notifications-1")
        .worker_keys(["notifications"])
        .build()
        .unwrap();
    let report = relay.drain().await.unwrap();
    assert_eq!(report.dead_lettered, 2, "{report:?}");
    assert_eq!(report.retried, 0);
    assert_eq!(world.mail.calls(), 0);

    let stored = row(db, &outbox, sms).await;
    assert_eq!(stored.status, OutboxStatus::Dead);
    assert_eq!(stored.attempts, 1, "dead at once");
    let error = stored.last_error.unwrap();
    assert!(
        error.contains("no handler for event type `jobtest.notifications.sms-requested.v1`"),
        "{error}"
    );
    let stored = row(db, &outbox, broken).await;
    assert_eq!(stored.status, OutboxStatus::Dead);
    let error = stored.last_error.unwrap();
    assert!(
        error.contains("cannot decode the job") && error.contains("missing field `email`"),
        "{error}"
    );
    let status = Operations::new(db.conn().clone(), outbox.clone())
        .status()
        .await
        .unwrap();
    assert_eq!(status.dead(), 2);
    assert_eq!(status.failed(), 0);
    assert!(world.alerts().is_empty(), "dead rows are not failed jobs");
}

/// The fast path runs retryable jobs right after the commit but leaves non-retryable ones
/// to the relay: only the relay marks them `failed` and raises the alert, so a failure on
/// the fast path can never make a payout run twice.
async fn fast_path_leaves_non_retryable_jobs_to_the_relay(db: &TestDb) {
    let (outbox, _clock) = job_outbox();
    setup(db, &outbox).await;
    let world = World::new(0);
    let mut relay = world
        .relay(db, &outbox, "worker-1")
        .worker_keys(["notifications", "payments"])
        .check_head(true)
        .build()
        .unwrap();
    let ids = raise(db, &outbox, vec![confirm("o-1"), payout("o-2", "p-1")]).await;
    let report = relay.fast_path().publish_committed(&ids).await.unwrap();
    assert_eq!(
        (report.published, report.left_to_relay),
        (1, 1),
        "{report:?}"
    );
    assert_eq!(world.mail.calls(), 1);
    assert!(
        world.gateway.calls().is_empty(),
        "the payout is the relay's"
    );
    assert_eq!(row(db, &outbox, ids[1]).await.status, OutboxStatus::Pending);
    assert_eq!(relay.drain().await.unwrap().published, 1);
    assert_eq!(world.gateway.calls(), ["p-1"]);
    assert_eq!(
        row(db, &outbox, ids[1]).await.status,
        OutboxStatus::Published
    );
}

// ---- (e) configuration errors ---------------------------------------------------------

/// (g) Snoozing: an e-mail whose handler says "try again in 5 minutes" waits in the
/// scheduled table until then, with no attempt counted and no error recorded; it left its
/// aggregate's order, so the same order's next e-mail goes on; nothing runs early, and it
/// runs again at its time, published with its message id. A non-retryable payout may snooze
/// too (not `failed`, no alert). A snooze into the past is due at once: it ends the drain
/// (no loop) and runs at the next one.
async fn a_snoozed_job_waits_without_spending_an_attempt(db: &TestDb) {
    let (outbox, clock) = job_outbox();
    setup(db, &outbox).await;
    let world = World::new(0);
    let calls = Arc::new(Mutex::new(Vec::<(String, Uuid)>::new()));
    let (log, payouts) = (Arc::clone(&calls), Arc::clone(&calls));
    let snooze_until = t0() + TimeDelta::hours(1);
    let jobs = JobDispatcher::builder()
        .handler(
            move |job: OrderConfirmationRequestedV1, envelope: &Envelope| {
                let log = Arc::clone(&log);
                let id = envelope.message_id;
                async move {
                    let mut calls = log.lock().unwrap();
                    let first = !calls.iter().any(|(_, seen)| *seen == id);
                    calls.push((job.email.clone(), id));
                    match job.email.as_str() {
                        "later@example.com" if first => {
                            Err(JobError::snooze_for(Duration::from_secs(300)))
                        }
                        "past@example.com" if first => {
                            Err(JobError::snooze_until(t0() - TimeDelta::days(1)))
                        }
                        _ => Ok(()),
                    }
                }
            },
        )
        .handler(move |job: PayoutRequestedV1, envelope: &Envelope| {
            let log = Arc::clone(&payouts);
            let id = envelope.message_id;
            async move {
                let mut calls = log.lock().unwrap();
                let first = !calls.iter().any(|(_, seen)| *seen == id);
                calls.push((job.payout.clone(), id));
                if first {
                    Err(JobError::snooze_until(snooze_until))
                } else {
                    Ok(())
                }
            }
        })
        .build()
        .unwrap();
    let confirm_to = |order: &str, email: &str| ShopEvent::Confirm {
        order: order.into(),
        email: email.into(),
    };
    let ids = raise(
        db,
        &outbox,
        vec![
            confirm_to("o-1", "later@example.com"),
            confirm_to("o-1", "next@example.com"),
            payout("o-2", "p-1"),
        ],
    )
    .await;
    let mut relay = world
        .relay_with(db, &outbox, "jobs-1", jobs)
        .worker_keys(["notifications", "payments"])
        .build()
        .unwrap();
    let ops = Operations::new(db.conn().clone(), outbox.clone());
    let first = relay.drain().await.unwrap();
    assert_eq!(
        (first.snoozed, first.published, first.retried, first.failed),
        (2, 0, 0, 0),
        "{first:?}"
    );
    let waiting = ops.find_scheduled(ids[0]).await.unwrap().unwrap();
    assert_eq!(waiting.due_at(), t0() + TimeDelta::minutes(5));
    assert_eq!(waiting.record.attempts, 0, "a snooze is not an attempt");
    assert_eq!(waiting.record.last_error, None);
    assert!(
        ops.find(ids[0]).await.unwrap().is_none(),
        "out of the outbox table"
    );
    let payout_row = ops.find_scheduled(ids[2]).await.unwrap().unwrap();
    assert_eq!(payout_row.due_at(), snooze_until, "snoozing is not failing");
    assert_eq!(payout_row.record.attempts, 0);
    assert!(world.alerts().is_empty());
    let ran = |calls: &Arc<Mutex<Vec<(String, Uuid)>>>| {
        calls
            .lock()
            .unwrap()
            .iter()
            .map(|(what, _)| what.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(ran(&calls), ["later@example.com", "p-1"]);

    // The same order's next e-mail goes on: the snoozed one left the order.
    clock.advance(TimeDelta::minutes(4));
    assert_eq!(relay.drain().await.unwrap().published, 1);
    assert_eq!(
        ran(&calls),
        ["later@example.com", "p-1", "next@example.com"],
        "nothing early"
    );

    clock.advance(TimeDelta::minutes(1));
    let due = relay.drain().await.unwrap();
    assert_eq!(due.published, 1, "{due:?}");
    assert_eq!(ran(&calls)[3], "later@example.com");
    let done = row(db, &outbox, ids[0]).await;
    assert_eq!((done.status, done.attempts), (OutboxStatus::Published, 0));

    clock.advance(TimeDelta::hours(1));
    assert_eq!(relay.drain().await.unwrap().published, 1);
    let paid = row(db, &outbox, ids[2]).await;
    assert_eq!((paid.status, paid.attempts), (OutboxStatus::Published, 0));
    assert!(world.alerts().is_empty());

    // A snooze into the past: due at once, run again by the next drain, not in a loop.
    let past = raise(db, &outbox, vec![confirm_to("o-3", "past@example.com")]).await;
    let snoozed = relay.drain().await.unwrap();
    assert_eq!((snoozed.snoozed, snoozed.published), (1, 0), "{snoozed:?}");
    let waiting = ops.find_scheduled(past[0]).await.unwrap().unwrap();
    assert_eq!(waiting.due_at(), clock_now(&clock), "due at once");
    assert_eq!(relay.drain().await.unwrap().published, 1);
    assert_eq!(ran(&calls).len(), 7);
}

/// (h) Deadlines: a job still running at its deadline is cancelled — its future dropped,
/// its side effect after the await never happens — and counts as a failed attempt (a
/// timeout, retried after the backoff); a non-retryable job past its deadline goes `failed`
/// and alerts once. Jobs of other types keep the default deadline.
async fn a_job_past_its_deadline_is_cancelled_and_counts_as_an_attempt(db: &TestDb) {
    let (outbox, _clock) = job_outbox();
    setup(db, &outbox).await;
    let world = World::new(0);
    let finished = Arc::new(AtomicU32::new(0));
    let (mails, payouts) = (Arc::clone(&finished), Arc::clone(&finished));
    let jobs = JobDispatcher::builder()
        .handler(move |job: OrderConfirmationRequestedV1, _: &Envelope| {
            let finished = Arc::clone(&mails);
            async move {
                if job.email.starts_with("slow") {
                    tokio::time::sleep(Duration::from_secs(30)).await;
                }
                finished.fetch_add(1, AtomicOrdering::SeqCst);
                Ok(())
            }
        })
        .handler(move |_: PayoutRequestedV1, _: &Envelope| {
            let finished = Arc::clone(&payouts);
            async move {
                tokio::time::sleep(Duration::from_secs(30)).await;
                finished.fetch_add(1, AtomicOrdering::SeqCst);
                Ok(())
            }
        })
        .deadline(Duration::from_millis(150))
        .deadline_for::<OrderConfirmationRequestedV1>(Duration::from_millis(100))
        .build()
        .unwrap();
    let ids = raise(
        db,
        &outbox,
        vec![
            ShopEvent::Confirm {
                order: "o-1".into(),
                email: "slow@example.com".into(),
            },
            confirm("o-2"),
            payout("o-3", "p-1"),
        ],
    )
    .await;
    let mut relay = world
        .relay_with(db, &outbox, "jobs-1", jobs)
        .worker_keys(["notifications", "payments"])
        .build()
        .unwrap();
    let started = std::time::Instant::now();
    let report = relay.drain().await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "cancelled, not waited for"
    );
    assert_eq!(
        (report.published, report.retried, report.failed),
        (1, 1, 1),
        "{report:?}"
    );
    assert_eq!(
        finished.load(AtomicOrdering::SeqCst),
        1,
        "only the quick job finished"
    );
    let slow = row(db, &outbox, ids[0]).await;
    assert_eq!((slow.status, slow.attempts), (OutboxStatus::Pending, 1));
    let error = slow.last_error.unwrap();
    assert!(error.contains("deadline of 100ms"), "{error}");
    let payout_row = row(db, &outbox, ids[2]).await;
    assert_eq!(
        (payout_row.status, payout_row.attempts),
        (OutboxStatus::Failed, 1)
    );
    assert!(payout_row.last_error.unwrap().contains("deadline of 150ms"));
    let alerts = world.alerts();
    assert_eq!(alerts.len(), 1);
    assert_eq!(alerts[0].envelope.message_id, ids[2]);
}

#[test]
fn job_configuration_is_validated() {
    let bad_key = Outbox::builder()
        .job(Job::of::<PayoutRequestedV1>().worker_key("Payments Team"))
        .build()
        .unwrap_err();
    assert!(
        matches!(
            &bad_key,
            ConfigError::WorkerKey { key, reason: WorkerKeyError::InvalidStart { character: 'P' }, .. }
                if key == "Payments Team"
        ),
        "{bad_key:?}"
    );
    let duplicate = Outbox::builder()
        .job(Job::of::<PayoutRequestedV1>().worker_key("payments"))
        .job(Job::of::<PayoutRequestedV1>().retryable(false))
        .build()
        .unwrap_err();
    assert_eq!(
        duplicate,
        ConfigError::DuplicateJob {
            event_type: PayoutRequestedV1::EVENT_TYPE.into()
        }
    );
    let bad_type = Outbox::builder()
        .job(Job::new("payout").worker_key("payments"))
        .build()
        .unwrap_err();
    assert!(
        matches!(&bad_type, ConfigError::JobEventType { event_type, .. } if event_type == "payout"),
        "{bad_type:?}"
    );
    assert!(bad_type.to_string().contains("invalid job event type"));

    let twice = JobDispatcher::builder()
        .handler(|_: PayoutRequestedV1, _: &Envelope| async { Ok(()) })
        .handler(|_: PayoutRequestedV1, _: &Envelope| async { Ok(()) })
        .build()
        .unwrap_err();
    assert_eq!(
        twice,
        JobDispatcherError::DuplicateHandler {
            event_type: PayoutRequestedV1::EVENT_TYPE
        }
    );
}

#[tokio::test]
async fn relay_worker_keys_are_validated() {
    let db = TestDb::sqlite_memory().await;
    let outbox = Outbox::default();
    let world = World::new(0);
    let error = world
        .relay(&db, &outbox, "r")
        .worker_keys(Vec::<String>::new())
        .build()
        .unwrap_err();
    assert_eq!(error, RelayConfigError::NoWorkerKeys);
    let error = world
        .relay(&db, &outbox, "r")
        .worker_keys(["payments", "pay ments"])
        .build()
        .unwrap_err();
    assert!(
        matches!(&error, RelayConfigError::WorkerKey { key, .. } if key == "pay ments"),
        "{error:?}"
    );
    assert!(
        world
            .relay(&db, &outbox, "r")
            .worker_keys(["payments", "notifications.mail"])
            .build()
            .is_ok()
    );
    db.close().await;
}
