//! Priorities within a worker key and per-worker-key concurrency limits on every backend
//! (book: The job queue, Priorities and concurrency limits).
//!
//! Each scenario runs on a SQLite file, SQLite in memory, PostgreSQL and MariaDB.

// Scenarios are plain async functions called by generated #[tokio::test]s, which clippy's
// `allow-unwrap-in-tests` does not see as tests.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use outbox_core::mapping::{ContractMapper, ContractSink, MapError};
use outbox_core::policy::Ordering;
use outbox_core::{Envelope, IntegrationEvent, Raise};
use outbox_seaorm::job::{Job, JobDispatcher, JobError};
use outbox_seaorm::relay::{Relay, RelayBuilder};
use outbox_seaorm::{ConfigError, Outbox, schema};
use outbox_tests::backend_tests;
use outbox_tests::db::{Backend, TestDb};
use schemars::JsonSchema;
use sea_orm::{ConnectionTrait, Statement};
use serde::{Deserialize, Serialize};

backend_tests!(
    urgent_jobs_overtake_a_backlog_of_their_worker_key,
    each_of_a_relays_keys_keeps_its_priorities_and_its_share,
    a_priority_never_reorders_an_aggregate,
    a_worker_keys_limit_holds_across_relays,
);

// ---- contracts ------------------------------------------------------------------------

/// A newsletter e-mail (bulk: priority 7).
#[derive(Debug, Clone, PartialEq, IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "priotest.mail.newsletter-requested.v1", key = customer_id)]
struct NewsletterRequestedV1 {
    customer_id: String,
}

/// A password-reset e-mail (urgent: priority 0).
#[derive(Debug, Clone, PartialEq, IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "priotest.mail.password-reset-requested.v1", key = customer_id)]
struct PasswordResetRequestedV1 {
    customer_id: String,
}

/// A thumbnail to render (worker key `render`, no limit).
#[derive(Debug, Clone, PartialEq, IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "priotest.media.thumbnail-requested.v1", key = image_id)]
struct ThumbnailRequestedV1 {
    image_id: String,
}

enum Work {
    Newsletter(String),
    Reset(String),
    Thumbnail(String),
}

struct WorkContracts;

impl ContractMapper<Work> for WorkContracts {
    fn map(&self, event: &Work, out: &mut ContractSink<'_>) -> Result<(), MapError> {
        match event {
            Work::Newsletter(id) => out.emit(&NewsletterRequestedV1 {
                customer_id: id.clone(),
            }),
            Work::Reset(id) => out.emit(&PasswordResetRequestedV1 {
                customer_id: id.clone(),
            }),
            Work::Thumbnail(id) => out.emit(&ThumbnailRequestedV1 {
                image_id: id.clone(),
            }),
        }
    }
}

// ---- helpers --------------------------------------------------------------------------

fn mail_outbox() -> Outbox {
    Outbox::builder()
        .job(
            Job::of::<NewsletterRequestedV1>()
                .worker_key("mail")
                .priority(7),
        )
        .job(Job::of::<PasswordResetRequestedV1>().worker_key("mail"))
        .job(Job::of::<ThumbnailRequestedV1>().worker_key("render"))
        .build()
        .unwrap()
}

async fn commit(db: &TestDb, outbox: &Outbox, work: Vec<Work>) {
    let uow = outbox.begin(db.conn(), &WorkContracts).await.unwrap();
    for item in work {
        uow.raise(item);
    }
    uow.commit().await.unwrap();
}

/// A boxed job future.
type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Every job run, in order: `reset:<customer>`, `newsletter:<customer>`,
/// `thumbnail:<image>`.
type Runs = Arc<Mutex<Vec<String>>>;

/// A handler of contract `C` that records `<label>:<aggregate id>` in `runs`.
fn record<C: IntegrationEvent>(
    runs: &Runs,
    label: &'static str,
) -> impl Fn(C, &Envelope) -> std::future::Ready<Result<(), JobError>> + Send + Sync + 'static {
    let runs = Arc::clone(runs);
    move |_: C, envelope: &Envelope| {
        let run = format!("{label}:{}", envelope.aggregate_id);
        runs.lock().unwrap().push(run);
        std::future::ready(Ok(()))
    }
}

fn recording(runs: &Runs) -> JobDispatcher {
    JobDispatcher::builder()
        .handler(record::<ThumbnailRequestedV1>(runs, "thumbnail"))
        .handler(record::<NewsletterRequestedV1>(runs, "newsletter"))
        .handler(record::<PasswordResetRequestedV1>(runs, "reset"))
        .build()
        .unwrap()
}

fn relay(
    db: &TestDb,
    outbox: &Outbox,
    id: &str,
    jobs: JobDispatcher,
) -> RelayBuilder<JobDispatcher> {
    Relay::builder(db.conn().clone(), outbox.clone(), jobs)
        .instance_id(id)
        .poll_interval(Duration::from_millis(20))
        .heartbeat_interval(Duration::from_millis(200))
        .lease_ttl(Duration::from_secs(10))
        .publish_timeout(Duration::from_secs(5))
}

// ---- scenarios ------------------------------------------------------------------------

/// Thirty newsletters (priority 7) wait for the `mail` workers; then three password resets
/// (priority 0) commit. The relay's first batch of five runs the three resets first, then
/// the two oldest newsletters; the rows carry their priority.
async fn urgent_jobs_overtake_a_backlog_of_their_worker_key(db: &TestDb) {
    let outbox = mail_outbox();
    assert!(outbox.has_priorities());
    schema::install(db.conn(), &outbox).await.unwrap();
    commit(
        db,
        &outbox,
        (0..30)
            .map(|n| Work::Newsletter(format!("c-{n:02}")))
            .collect(),
    )
    .await;
    commit(
        db,
        &outbox,
        (0..3).map(|n| Work::Reset(format!("r-{n}"))).collect(),
    )
    .await;
    let stored = db
        .conn()
        .query_all_raw(Statement::from_string(
            db.conn().get_database_backend(),
            "SELECT event_type, priority FROM outbox ORDER BY seq",
        ))
        .await
        .unwrap();
    let priority = |row: &sea_orm::QueryResult| -> i32 { row.try_get("", "priority").unwrap() };
    assert_eq!(priority(&stored[0]), 7);
    assert_eq!(priority(&stored[32]), 0);

    let runs: Runs = Arc::default();
    let mut relay = relay(db, &outbox, "mail-1", recording(&runs))
        .worker_keys(["mail"])
        .batch_size(5)
        .build()
        .unwrap();
    assert_eq!(relay.drain().await.unwrap().published, 33);
    let runs = runs.lock().unwrap().clone();
    assert_eq!(
        runs[..5],
        [
            "reset:r-0",
            "reset:r-1",
            "reset:r-2",
            "newsletter:c-00",
            "newsletter:c-01"
        ],
        "{runs:?}"
    );
    assert_eq!(runs[32], "newsletter:c-29");
}

/// A relay of two keys: ten thumbnails (`render`, priority 0) wait, then twenty newsletters
/// (`mail`, priority 7), then two password resets (`mail`, priority 0). Each batch of four
/// gives each key its share: the first runs the two resets (not the older newsletters), then
/// two thumbnails (one statement over both keys by priority would have run four thumbnails,
/// committed first at priority 0).
async fn each_of_a_relays_keys_keeps_its_priorities_and_its_share(db: &TestDb) {
    let outbox = mail_outbox();
    schema::install(db.conn(), &outbox).await.unwrap();
    commit(
        db,
        &outbox,
        (0..10).map(|n| Work::Thumbnail(format!("i-{n}"))).collect(),
    )
    .await;
    commit(
        db,
        &outbox,
        (0..20)
            .map(|n| Work::Newsletter(format!("c-{n:02}")))
            .collect(),
    )
    .await;
    commit(
        db,
        &outbox,
        (0..2).map(|n| Work::Reset(format!("r-{n}"))).collect(),
    )
    .await;
    let runs: Runs = Arc::default();
    let mut relay = relay(db, &outbox, "jobs-1", recording(&runs))
        .worker_keys(["mail", "render"])
        .batch_size(4)
        .build()
        .unwrap();
    assert_eq!(relay.drain().await.unwrap().published, 32);
    let runs = runs.lock().unwrap().clone();
    assert_eq!(
        runs[..4],
        ["reset:r-0", "reset:r-1", "thumbnail:i-0", "thumbnail:i-1"],
        "{runs:?}"
    );
}

/// Under per-aggregate order a priority never lets a job pass an earlier job of its
/// aggregate: customer `c-1`'s reset (priority 0) waits for its newsletter (priority 7),
/// committed first, even when both are claimed in one batch (the batch runs `c-1`'s rows in
/// `seq` order in the places they were claimed at); customer `c-2`'s reset still runs
/// before customer `c-0`'s newsletter.
async fn a_priority_never_reorders_an_aggregate(db: &TestDb) {
    let outbox = mail_outbox();
    schema::install(db.conn(), &outbox).await.unwrap();
    commit(
        db,
        &outbox,
        vec![
            Work::Newsletter("c-0".into()),
            Work::Newsletter("c-1".into()),
        ],
    )
    .await;
    commit(
        db,
        &outbox,
        vec![Work::Reset("c-1".into()), Work::Reset("c-2".into())],
    )
    .await;
    let runs: Runs = Arc::default();
    let mut relay = relay(db, &outbox, "mail-1", recording(&runs))
        .worker_keys(["mail"])
        .ordering(Ordering::PerAggregate)
        .batch_size(10)
        .build()
        .unwrap();
    assert_eq!(relay.drain().await.unwrap().published, 4);
    let runs = runs.lock().unwrap().clone();
    let at = |run: &str| runs.iter().position(|r| r == run).unwrap();
    assert!(
        at("newsletter:c-1") < at("reset:c-1"),
        "c-1's reset ran before its newsletter: {runs:?}"
    );
    assert!(
        at("reset:c-2") < at("newsletter:c-0"),
        "other aggregates keep their priority order: {runs:?}"
    );
}

/// Jobs running now, and the most seen at once, by worker key.
#[derive(Default)]
struct Concurrency {
    running: Mutex<BTreeMap<&'static str, usize>>,
    most: Mutex<BTreeMap<&'static str, usize>>,
    done: AtomicUsize,
}

impl Concurrency {
    async fn run(&self, key: &'static str) {
        {
            let mut running = self.running.lock().unwrap();
            let now = running.entry(key).or_default();
            *now += 1;
            let mut most = self.most.lock().unwrap();
            let seen = most.entry(key).or_default();
            *seen = (*seen).max(*now);
        }
        // Long enough that four relays' drains overlap on a loaded machine (at 60 ms, CI
        // once saw MariaDB's four drains run `render` at most two at once).
        tokio::time::sleep(Duration::from_millis(150)).await;
        *self.running.lock().unwrap().entry(key).or_default() -= 1;
        self.done.fetch_add(1, AtomicOrdering::SeqCst);
    }

    fn most(&self, key: &str) -> usize {
        self.most.lock().unwrap().get(key).copied().unwrap_or(0)
    }
}

/// A handler of contract `C` that runs as a job of worker key `key` in `concurrency`.
fn counted<C: IntegrationEvent>(
    concurrency: &Arc<Concurrency>,
    key: &'static str,
) -> impl Fn(C, &Envelope) -> BoxFuture<'static, Result<(), JobError>> + Send + Sync + 'static {
    let concurrency = Arc::clone(concurrency);
    move |_: C, _: &Envelope| {
        let concurrency = Arc::clone(&concurrency);
        Box::pin(async move {
            concurrency.run(key).await;
            Ok(())
        })
    }
}

fn concurrent(concurrency: &Arc<Concurrency>) -> JobDispatcher {
    JobDispatcher::builder()
        .handler(counted::<NewsletterRequestedV1>(concurrency, "mail"))
        .handler(counted::<PasswordResetRequestedV1>(concurrency, "mail"))
        .handler(counted::<ThumbnailRequestedV1>(concurrency, "render"))
        .build()
        .unwrap()
}

/// `mail` is limited to two jobs at once, `render` is not. On PostgreSQL and MariaDB four
/// unordered relays (four connection pools, as four processes would have) share both keys'
/// rows: `render` runs on up to four relays at once, `mail` never on more than two, and
/// every job runs once. On SQLite one relay at a time holds a worker key's lease: the
/// limit caps its claims (batches of at most two `mail` rows).
async fn a_worker_keys_limit_holds_across_relays(db: &TestDb) {
    let outbox = Outbox::builder()
        .job(Job::of::<NewsletterRequestedV1>().worker_key("mail"))
        .job(Job::of::<PasswordResetRequestedV1>().worker_key("mail"))
        .job(Job::of::<ThumbnailRequestedV1>().worker_key("render"))
        .worker_key_limit("mail", 2)
        .build()
        .unwrap();
    assert_eq!(outbox.worker_key_limit("mail"), Some(2));
    schema::install(db.conn(), &outbox).await.unwrap();
    let mut work: Vec<Work> = Vec::new();
    for n in 0..16 {
        work.push(Work::Newsletter(format!("c-{n}")));
        work.push(Work::Thumbnail(format!("i-{n}")));
    }
    work.push(Work::Reset("c-99".into()));
    commit(db, &outbox, work).await;

    let concurrency = Arc::new(Concurrency::default());
    if !matches!(db.backend(), Backend::Postgres | Backend::MariaDb) {
        let mut relay = relay(db, &outbox, "jobs-1", concurrent(&concurrency))
            .worker_keys(["mail", "render"])
            .batch_size(10)
            .build()
            .unwrap();
        let report = relay.drain().await.unwrap();
        assert_eq!(report.published, 33);
        // 17 mail rows two at a time: at least nine batches hold mail rows.
        assert!(report.batches >= 9, "{report:?}");
        assert_eq!(concurrency.most("mail"), 1);
        return;
    }
    let mut relays = Vec::new();
    for n in 0..4 {
        let pool = sea_orm::Database::connect(db.url()).await.unwrap();
        let relay = Relay::builder(pool, outbox.clone(), concurrent(&concurrency))
            .instance_id(format!("jobs-{n}"))
            .worker_keys(["mail", "render"])
            .ordering(Ordering::Unordered)
            .batch_size(3)
            .poll_interval(Duration::from_millis(20))
            .heartbeat_interval(Duration::from_millis(200))
            .lease_ttl(Duration::from_secs(10))
            .publish_timeout(Duration::from_secs(5))
            .build()
            .unwrap();
        relays.push(relay);
    }
    let runs = relays.into_iter().map(|mut relay| {
        tokio::spawn(async move { relay.drain().await.map(|report| report.published) })
    });
    let mut published = 0;
    for run in runs.collect::<Vec<_>>() {
        published += run.await.unwrap().unwrap();
    }
    // A relay's drain ends on an empty claim, which a relay finds while the others hold
    // every `mail` slot: the last drains finish what is left.
    let mut last = relay(db, &outbox, "jobs-last", concurrent(&concurrency))
        .worker_keys(["mail", "render"])
        .ordering(Ordering::Unordered)
        .build()
        .unwrap();
    published += last.drain().await.unwrap().published;
    assert_eq!(published, 33);
    assert_eq!(concurrency.done.load(AtomicOrdering::SeqCst), 33);
    assert!(
        concurrency.most("mail") <= 2,
        "mail ran {} at once",
        concurrency.most("mail")
    );
    assert!(
        concurrency.most("render") >= 3,
        "render ran at most {} at once: the relays did not overlap",
        concurrency.most("render")
    );
}

/// Bad settings are typed errors at build.
#[test]
fn bad_priorities_and_limits_are_refused() {
    assert_eq!(
        Outbox::builder()
            .job(
                Job::of::<NewsletterRequestedV1>()
                    .worker_key("mail")
                    .priority(10)
            )
            .build()
            .unwrap_err(),
        ConfigError::Priority {
            event_type: NewsletterRequestedV1::EVENT_TYPE.into(),
            priority: 10
        }
    );
    assert!(matches!(
        Outbox::builder()
            .job(Job::of::<NewsletterRequestedV1>().priority(3))
            .build(),
        Err(ConfigError::PriorityWithoutWorkerKey { .. })
    ));
    for limit in [0, 1_001] {
        let error = Outbox::builder()
            .worker_key_limit("mail", limit)
            .build()
            .unwrap_err();
        assert_eq!(
            error,
            ConfigError::WorkerKeyLimit {
                key: "mail".into(),
                limit
            }
        );
        assert!(error.to_string().contains("1..=1000"), "{error}");
    }
    assert!(matches!(
        Outbox::builder().worker_key_limit("Mail!", 2).build(),
        Err(ConfigError::LimitWorkerKey { .. })
    ));
    assert!(matches!(
        Outbox::builder()
            .worker_key_limit("mail", 2)
            .write_mode(outbox_seaorm::WriteMode::message())
            .build(),
        Err(ConfigError::LimitInMessageMode { .. })
    ));
    assert!(!mail_outbox_without_priorities().has_priorities());
}

fn mail_outbox_without_priorities() -> Outbox {
    Outbox::builder()
        .job(Job::of::<NewsletterRequestedV1>().worker_key("mail"))
        .build()
        .unwrap()
}
