//! Job-queue mode (book: The job queue): no broker — the outbox table is the queue and the relay runs
//! each row as a local job chosen by its event type.
//!
//! The checkout writes the order and two jobs in **one** unit of work: an order-confirmation
//! e-mail (worker key `notifications`, retryable) and a payout to the seller (worker key
//! `payments`, **not** retryable: money leaving). Two relays play two servers,
//! each restricted to its worker key:
//!
//! - the e-mail goes to a flaky mail server that fails twice, then accepts: the relay
//!   retries it after its backoff (with jitter) and the row ends `published`, its two
//!   failed attempts recorded;
//! - the payout goes to a bank that does not confirm the transfer: the row goes `failed`
//!   after one attempt, the alert hook tells the payments team once, and no later relay
//!   pass runs it again — a person decides (`outbox dead list --status failed`, then
//!   `outbox requeue` or `outbox skip`, both recorded).
//!
//! The tables are `jobs_outbox` / `jobs_inbox` (and the relay's `jobs_outbox_*` tables) plus
//! a `jobs_demo_orders` business table, created on the given database if missing. Every run
//! uses fresh order and payout ids and counts only its own jobs, so it can run again on the
//! same database; the relays have fixed instance ids, so a re-run takes their worker-key
//! leases over at once.
//!
//! ```no_run
//! # async fn demo(db: sea_orm::DatabaseConnection) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let report = bookstore::job_queue::run(&db).await?;
//! for line in report.lines() {
//!     println!("{line}");
//! }
//! assert!(report.deviations().is_empty());
//! # Ok(()) }
//! ```

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use outbox_core::mapping::{ContractMapper, ContractSink, MapError};
use outbox_core::policy::Backoff;
use outbox_core::{Envelope, IntegrationEvent, Raise};
use outbox_seaorm::Outbox;
use outbox_seaorm::job::{FailedJob, Job, JobDispatcher, JobError};
use outbox_seaorm::ops::Operations;
use outbox_seaorm::relay::{Relay, RelayBuilder};
use outbox_seaorm::schema::{self, OutboxStatus};
use schemars::JsonSchema;
use sea_orm::sea_query::{Alias, Expr, ExprTrait as _, Func, Query};
use sea_orm::{ConnectionTrait, DatabaseConnection};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The block's title.
pub const TITLE: &str = "Job-queue mode (no broker: the outbox is the queue)";
/// What the block proves.
pub const CLAIM: &str = "without a broker the relay runs outbox rows as local jobs: a flaky \
                         e-mail is retried with backoff, a payout that must not run twice goes \
                         to `failed` and alerts a person instead";
/// The outbox table of this demo.
pub const OUTBOX_TABLE: &str = "jobs_outbox";
/// The inbox table of this demo (unused, but an outbox configuration names one).
pub const INBOX_TABLE: &str = "jobs_inbox";
/// The worker key of e-mails and other notifications.
pub const NOTIFICATIONS: &str = "notifications";
/// The worker key of payouts.
pub const PAYMENTS: &str = "payments";
/// How many times the mail server fails a message before accepting it.
pub const MAIL_FAILURES: u32 = 2;
/// First retry delay of the demo's relays (then doubling, plus jitter).
pub const FIRST_RETRY_DELAY: Duration = Duration::from_millis(50);

/// How long the job relays keep done jobs: the demo reads each job's row afterwards.
const KEEP_DONE_JOBS: Duration = Duration::from_secs(7 * 24 * 3600);
/// How long the demo waits for the e-mail's retries before reporting what it has.
const PATIENCE: Duration = Duration::from_secs(20);

/// Job: send the order confirmation e-mail.
#[derive(Debug, Clone, PartialEq, Eq, IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(
    name = "bookstore.notifications.order-confirmation-requested.v1",
    key = order_id
)]
pub struct OrderConfirmationRequestedV1 {
    /// The order.
    pub order_id: String,
    /// Where to send the confirmation.
    pub email: String,
}

/// Job: pay the seller of an order (money leaves: never retried automatically).
#[derive(Debug, Clone, PartialEq, Eq, IntegrationEvent, Serialize, Deserialize, JsonSchema)]
#[integration_event(name = "bookstore.payments.payout-requested.v1", key = payout_id)]
pub struct PayoutRequestedV1 {
    /// The payout (the bank transfer's reference).
    pub payout_id: String,
    /// The order it pays for.
    pub order_id: String,
    /// Decimal amount in the major unit, e.g. `12.50`.
    pub amount: String,
    /// ISO 4217 currency code.
    pub currency: String,
}

/// What the checkout raises (domain events of this demo).
#[derive(Debug, Clone)]
enum CheckoutEvent {
    OrderConfirmed {
        order_id: String,
        email: String,
    },
    PayoutRequested {
        payout_id: String,
        order_id: String,
        amount: String,
    },
}

/// The explicit mapping of the checkout's events to job contracts.
struct CheckoutJobs;

impl ContractMapper<CheckoutEvent> for CheckoutJobs {
    fn map(&self, event: &CheckoutEvent, out: &mut ContractSink<'_>) -> Result<(), MapError> {
        match event {
            CheckoutEvent::OrderConfirmed { order_id, email } => {
                out.emit(&OrderConfirmationRequestedV1 {
                    order_id: order_id.clone(),
                    email: email.clone(),
                })
            }
            CheckoutEvent::PayoutRequested {
                payout_id,
                order_id,
                amount,
            } => out.emit(&PayoutRequestedV1 {
                payout_id: payout_id.clone(),
                order_id: order_id.clone(),
                amount: amount.clone(),
                currency: "EUR".into(),
            }),
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Counters only: a poisoned lock still holds usable numbers.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A mail server that answers `421` to the first [`MAIL_FAILURES`] sends of each message.
#[derive(Debug, Default)]
struct FlakyMailServer {
    sends: Mutex<BTreeMap<Uuid, u32>>,
}

impl FlakyMailServer {
    fn send(&self, message_id: Uuid, to: &str) -> Result<(), JobError> {
        let mut sends = lock(&self.sends);
        let count = sends.entry(message_id).or_default();
        *count += 1;
        if *count <= MAIL_FAILURES {
            return Err(JobError::retryable(format!(
                "mail server: 421 4.7.0 try again later (sending to {to})"
            )));
        }
        tracing::info!(%message_id, to, "order confirmation sent");
        Ok(())
    }

    fn sends(&self, message_id: Uuid) -> u32 {
        lock(&self.sends).get(&message_id).copied().unwrap_or(0)
    }
}

/// A bank whose first transfer of each payout times out: the money may or may not have
/// left.
#[derive(Debug, Default)]
struct Bank {
    transfers: Mutex<BTreeMap<String, u32>>,
}

impl Bank {
    fn transfer(&self, payout: &PayoutRequestedV1) -> Result<(), JobError> {
        let mut transfers = lock(&self.transfers);
        let count = transfers.entry(payout.payout_id.clone()).or_default();
        *count += 1;
        if *count == 1 {
            return Err(JobError::retryable(format!(
                "bank: no confirmation for transfer {} of {} {} within 30 s",
                payout.payout_id, payout.amount, payout.currency
            )));
        }
        Ok(())
    }

    fn transfers(&self, payout_id: &str) -> u32 {
        lock(&self.transfers).get(payout_id).copied().unwrap_or(0)
    }
}

/// What the job-queue demo measured.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobQueueReport {
    /// The demo's outbox table.
    pub outbox_table: String,
    /// The order of this run.
    pub order_id: String,
    /// The payout of this run.
    pub payout_id: String,
    /// Orders of this run stored with their jobs (one transaction).
    pub orders_stored: u64,
    /// The e-mail job's message id.
    pub mail_message_id: Uuid,
    /// The e-mail row's worker key.
    pub mail_worker_key: Option<String>,
    /// How many times the e-mail handler ran (the mail server was called).
    pub mail_attempts: u32,
    /// Failed attempts recorded on the e-mail row.
    pub mail_failed_attempts: i32,
    /// The e-mail row's final status.
    pub mail_status: OutboxStatus,
    /// Relay passes that retried the e-mail.
    pub mail_retries: usize,
    /// The payout job's message id.
    pub payout_message_id: Uuid,
    /// The payout row's worker key.
    pub payout_worker_key: Option<String>,
    /// Whether the payout row may be retried (`false`: money leaving).
    pub payout_retryable: bool,
    /// How many times the payout handler ran (the bank was called), after every pass.
    pub payout_attempts: u32,
    /// Attempts recorded on the payout row.
    pub payout_recorded_attempts: i32,
    /// The payout row's final status.
    pub payout_status: OutboxStatus,
    /// The payout row's `last_error`.
    pub payout_error: Option<String>,
    /// Relay passes made after the payout failed (none ran it again).
    pub passes_after_failure: usize,
    /// Alerts the hook raised for this run's payout.
    pub alerts_fired: usize,
    /// The alert messages (to the payments team).
    pub alerts: Vec<String>,
    /// Failed rows `outbox status` counts in the table (this run's and earlier runs').
    pub failed_rows_in_status: u64,
}

impl JobQueueReport {
    /// The block's title.
    pub fn title(&self) -> &'static str {
        TITLE
    }

    /// What the block proves.
    pub fn claim(&self) -> &'static str {
        CLAIM
    }

    /// The block, one human-readable line each, title first.
    pub fn lines(&self) -> Vec<String> {
        let key = |key: &Option<String>| key.clone().unwrap_or_else(|| "-".to_owned());
        let mut lines = vec![
            TITLE.to_owned(),
            format!("  claim: {CLAIM}"),
            format!(
                "  checkout: order {} and its 2 jobs committed in one transaction ({} order(s), table {})",
                self.order_id, self.orders_stored, self.outbox_table
            ),
            format!(
                "  e-mail (worker key {}, retryable): mail server called {}×, failed {}× and \
                 retried after backoff with jitter → {} ({} failed attempt(s) recorded)",
                key(&self.mail_worker_key),
                self.mail_attempts,
                self.mail_retries,
                self.mail_status,
                self.mail_failed_attempts
            ),
            format!(
                "  payout {} (worker key {}, retryable: {}): bank called {}× → {} after {} \
                 attempt(s), not run again in {} later relay pass(es)",
                self.payout_id,
                key(&self.payout_worker_key),
                self.payout_retryable,
                self.payout_attempts,
                self.payout_status,
                self.payout_recorded_attempts,
                self.passes_after_failure
            ),
        ];
        if let Some(error) = &self.payout_error {
            lines.push(format!("    last error: {error}"));
        }
        lines.push(format!("  alert hook fired {}×", self.alerts_fired));
        for alert in &self.alerts {
            lines.push(format!("    {alert}"));
        }
        lines.push(format!(
            "  outbox status: {} failed row(s) waiting for a person — `outbox dead list \
             --status failed`, then `outbox requeue` or `outbox skip` (recorded)",
            self.failed_rows_in_status
        ));
        lines
    }

    /// Every way the run differs from the story told in the module documentation (empty:
    /// the same facts).
    pub fn deviations(&self) -> Vec<String> {
        let mut deviations = Vec::new();
        let mut expect = |ok: bool, what: String| {
            if !ok {
                deviations.push(what);
            }
        };
        expect(
            self.orders_stored == 1,
            format!("expected the order stored, found {}", self.orders_stored),
        );
        expect(
            self.mail_attempts == MAIL_FAILURES + 1,
            format!(
                "expected the mail server called {}×, found {}",
                MAIL_FAILURES + 1,
                self.mail_attempts
            ),
        );
        expect(
            self.mail_status == OutboxStatus::Published,
            format!("expected the e-mail published, found {}", self.mail_status),
        );
        expect(
            i64::from(self.mail_failed_attempts) == i64::from(MAIL_FAILURES),
            format!(
                "expected {MAIL_FAILURES} failed e-mail attempts recorded, found {}",
                self.mail_failed_attempts
            ),
        );
        expect(
            self.payout_attempts == 1,
            format!(
                "expected the bank called once, found {}",
                self.payout_attempts
            ),
        );
        expect(
            self.payout_status == OutboxStatus::Failed,
            format!("expected the payout failed, found {}", self.payout_status),
        );
        expect(
            self.alerts_fired == 1,
            format!("expected one alert, found {}", self.alerts_fired),
        );
        deviations
    }
}

/// The alerts of the payments team, in order.
type Alerts = Arc<Mutex<Vec<FailedJob>>>;

/// A relay of one worker key, with the demo's timings.
fn worker(
    db: &DatabaseConnection,
    outbox: &Outbox,
    key: &str,
    jobs: JobDispatcher,
    alerts: &Alerts,
) -> RelayBuilder<JobDispatcher> {
    let alerts = Arc::clone(alerts);
    Relay::builder(db.clone(), outbox.clone(), jobs)
        .instance_id(format!("bookstore-jobs-{key}"))
        .worker_keys([key])
        .batch_size(10)
        .listen(false)
        .backoff(Backoff::new().with_min_delay(FIRST_RETRY_DELAY))
        // The demo shows each job's row afterwards: keep done jobs (the default deletes
        // a row once it is published).
        .retention(Some(KEEP_DONE_JOBS))
        .alert_hook(move |job: FailedJob| {
            let alerts = Arc::clone(&alerts);
            async move {
                tracing::error!(
                    message_id = %job.envelope.message_id,
                    error = %job.error,
                    "payments team alerted: a payout failed and will not be retried"
                );
                lock(&alerts).push(job);
                Ok::<(), std::convert::Infallible>(())
            }
        })
}

/// Runs the demo on `db`; see the [module documentation](self).
///
/// # Errors
/// A database error, or a configuration error (none with this module's constants).
pub async fn run(
    db: &DatabaseConnection,
) -> Result<JobQueueReport, Box<dyn std::error::Error + Send + Sync>> {
    let outbox = Outbox::builder()
        .outbox_table(OUTBOX_TABLE)
        .inbox_table(INBOX_TABLE)
        .job(Job::of::<OrderConfirmationRequestedV1>().worker_key(NOTIFICATIONS))
        .job(
            Job::of::<PayoutRequestedV1>()
                .worker_key(PAYMENTS)
                .retryable(false),
        )
        .build()?;
    schema::install(db, &outbox).await?;
    db.execute_unprepared(
        "CREATE TABLE IF NOT EXISTS jobs_demo_orders \
         (id VARCHAR(64) NOT NULL PRIMARY KEY, email VARCHAR(255) NOT NULL)",
    )
    .await?;

    // The checkout: the order and its two jobs in one transaction.
    let order_id = format!("order-{}", Uuid::now_v7().simple());
    let payout_id = format!("payout-{}", Uuid::now_v7().simple());
    let email = "ada@example.com".to_owned();
    let uow = outbox.begin(db, &CheckoutJobs).await?;
    let mut insert = Query::insert();
    insert
        .into_table(Alias::new("jobs_demo_orders"))
        .columns([Alias::new("id"), Alias::new("email")])
        .values([order_id.clone().into(), email.clone().into()])?;
    uow.execute(&insert).await?;
    uow.raise(CheckoutEvent::OrderConfirmed {
        order_id: order_id.clone(),
        email,
    });
    uow.raise(CheckoutEvent::PayoutRequested {
        payout_id: payout_id.clone(),
        order_id: order_id.clone(),
        amount: "42.00".into(),
    });
    let committed = uow.commit().await?;
    let (mail_message_id, payout_message_id) = match committed.message_ids.as_slice() {
        [mail, payout] => (*mail, *payout),
        other => {
            return Err(format!("expected 2 jobs committed, found {}", other.len()).into());
        }
    };

    // The two servers of the story: one relay per worker key, each with its own handlers.
    let mail_server = Arc::new(FlakyMailServer::default());
    let bank = Arc::new(Bank::default());
    let alerts: Alerts = Arc::new(Mutex::new(Vec::new()));
    let mail_jobs = {
        let mail_server = Arc::clone(&mail_server);
        JobDispatcher::builder()
            .handler(
                move |job: OrderConfirmationRequestedV1, envelope: &Envelope| {
                    let mail_server = Arc::clone(&mail_server);
                    // The message id is the mail's idempotency key.
                    let message_id = envelope.message_id;
                    async move { mail_server.send(message_id, &job.email) }
                },
            )
            .build()?
    };
    let payout_jobs = {
        let bank = Arc::clone(&bank);
        JobDispatcher::builder()
            .handler(move |job: PayoutRequestedV1, _: &Envelope| {
                let bank = Arc::clone(&bank);
                async move { bank.transfer(&job) }
            })
            .build()?
    };
    let mut notifications = worker(db, &outbox, NOTIFICATIONS, mail_jobs, &alerts).build()?;
    let mut payments = worker(db, &outbox, PAYMENTS, payout_jobs, &alerts).build()?;
    let ops = Operations::new(db.clone(), outbox.clone());

    // Relay passes until the e-mail is through (its retries wait for their backoff).
    let started = Instant::now();
    let mut mail_retries = 0;
    let mut passes_after_failure = 0;
    let mut payout_failed = false;
    loop {
        let mail_pass = notifications.drain().await?;
        mail_retries += mail_pass.retried;
        payments.drain().await?;
        if payout_failed {
            passes_after_failure += 1;
        }
        payout_failed |= row_status(&ops, payout_message_id).await? == Some(OutboxStatus::Failed);
        let mail_done = row_status(&ops, mail_message_id).await? != Some(OutboxStatus::Pending);
        if (mail_done && passes_after_failure >= 2) || started.elapsed() > PATIENCE {
            break;
        }
        tokio::time::sleep(FIRST_RETRY_DELAY / 2).await;
    }

    let mail_row = ops.find(mail_message_id).await?;
    let payout_row = ops.find(payout_message_id).await?;
    let (Some(mail_row), Some(payout_row)) = (mail_row, payout_row) else {
        return Err("the committed jobs are missing from the outbox".into());
    };
    let alerts: Vec<FailedJob> = lock(&alerts)
        .iter()
        .filter(|job| job.envelope.message_id == payout_message_id)
        .cloned()
        .collect();
    let orders_stored = count_order(db, &order_id).await?;
    let status = ops.status().await?;
    Ok(JobQueueReport {
        outbox_table: outbox.outbox_table().to_string(),
        order_id,
        orders_stored,
        mail_message_id,
        mail_worker_key: mail_row.worker_key.clone(),
        mail_attempts: mail_server.sends(mail_message_id),
        mail_failed_attempts: mail_row.attempts,
        mail_status: mail_row.status,
        mail_retries,
        payout_message_id,
        payout_worker_key: payout_row.worker_key.clone(),
        payout_retryable: payout_row.retryable,
        payout_attempts: bank.transfers(&payout_id),
        payout_recorded_attempts: payout_row.attempts,
        payout_status: payout_row.status,
        payout_error: payout_row.last_error.clone(),
        passes_after_failure,
        alerts_fired: alerts.len(),
        alerts: alerts
            .iter()
            .map(|job| {
                format!(
                    "to the payments team: payout {payout_id} (message {}, worker key {}) \
                     failed after {} attempt(s) and will not be retried: {}",
                    job.envelope.message_id,
                    job.worker_key.as_deref().unwrap_or("-"),
                    job.attempts,
                    job.error
                )
            })
            .collect(),
        failed_rows_in_status: status.failed(),
        payout_id,
    })
}

async fn row_status(
    ops: &Operations,
    message_id: Uuid,
) -> Result<Option<OutboxStatus>, sea_orm::DbErr> {
    Ok(ops.find(message_id).await?.map(|row| row.status))
}

async fn count_order(db: &DatabaseConnection, order_id: &str) -> Result<u64, sea_orm::DbErr> {
    let mut select = Query::select();
    select
        .expr_as(Func::count(Expr::col(Alias::new("id"))), Alias::new("n"))
        .from(Alias::new("jobs_demo_orders"))
        .and_where(Expr::col(Alias::new("id")).eq(order_id));
    let count: i64 = match db.query_one(&select).await? {
        Some(row) => row.try_get("", "n")?,
        None => 0,
    };
    Ok(u64::try_from(count).unwrap_or(0))
}

impl crate::scenarios::Report for JobQueueReport {
    fn number(&self) -> u8 {
        7
    }

    fn title(&self) -> &'static str {
        TITLE
    }

    fn claim(&self) -> &'static str {
        CLAIM
    }

    fn lines(&self) -> Vec<String> {
        // The inherent `lines` starts with the title and the claim, indented for a block of
        // its own; the demo prints those itself.
        JobQueueReport::lines(self)
            .into_iter()
            .skip(2)
            .map(|line| line.strip_prefix("  ").map(str::to_owned).unwrap_or(line))
            .collect()
    }

    fn deviations(&self) -> Vec<String> {
        JobQueueReport::deviations(self)
    }
}

/// Block 7 of the demo: [`run`] on a fresh database of the demo's (any backend; the broker
/// is not used: the outbox table is the queue).
///
/// # Errors
/// [`DemoError`](crate::error::DemoError) when the database cannot be set up or the run fails.
pub async fn run_in(env: &crate::env::Env) -> Result<JobQueueReport, crate::error::DemoError> {
    let db = env.open_database(7).await?;
    let result = run(db.conn()).await;
    db.close().await;
    result.map_err(|error| crate::error::DemoError::Outbox(error.to_string()))
}
