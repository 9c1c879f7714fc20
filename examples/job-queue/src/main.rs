//! The outbox as a job queue (book: The job queue): no broker; a relay whose publisher is a
//! `JobDispatcher` runs each committed row as a local job, chosen by its event type. A
//! receipt e-mail fails once and is retried after the backoff; a payout is not retryable:
//! it fails, its row goes `failed` for a person to requeue or skip, and the alert hook fires
//! once. Needs PostgreSQL:
//!
//! ```text
//! DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres cargo run -p example-job-queue
//! ```
#![allow(clippy::print_stdout)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use outbox::job::{FailedJob, Job, JobDispatcher, JobError};
use outbox::mapping::{ContractMapper, ContractSink, MapError};
use outbox::policy::Backoff;
use outbox::relay::Relay;
use outbox::{Envelope, IntegrationEvent, Outbox, Raise, record::OutboxRecord, schema};
use sea_orm::Database;
use serde::{Deserialize, Serialize};

/// Send the receipt of an order (retryable: an e-mail may go twice, its key dedups it).
#[derive(IntegrationEvent, Serialize, Deserialize, schemars::JsonSchema)]
#[integration_event(name = "shop.notifications.receipt-requested.v1", key = order_id)]
struct ReceiptRequestedV1 {
    order_id: String,
}

/// Pay a seller: money leaves, so a failure goes to a person, never retried by itself.
#[derive(IntegrationEvent, Serialize, Deserialize, schemars::JsonSchema)]
#[integration_event(name = "shop.payments.payout-requested.v1", key = seller_id)]
struct PayoutRequestedV1 {
    seller_id: String,
    cents: i64,
}

/// The jobs the service enqueues, and their contracts.
enum Enqueue {
    Receipt(&'static str),
    Payout(&'static str, i64),
}

struct Jobs;

impl ContractMapper<Enqueue> for Jobs {
    fn map(&self, job: &Enqueue, out: &mut ContractSink<'_>) -> Result<(), MapError> {
        match *job {
            Enqueue::Receipt(order_id) => out.emit(&ReceiptRequestedV1 {
                order_id: order_id.into(),
            }),
            Enqueue::Payout(seller_id, cents) => out.emit(&PayoutRequestedV1 {
                seller_id: seller_id.into(),
                cents,
            }),
        }
    }
}

/// The mail server refuses order-1's first receipt.
static MAIL_SERVER_BUSY: AtomicBool = AtomicBool::new(true);

async fn send_receipt(receipt: ReceiptRequestedV1, key: String) -> Result<(), JobError> {
    if receipt.order_id == "order-1" && MAIL_SERVER_BUSY.swap(false, Ordering::SeqCst) {
        return Err(JobError::retryable("mail server: 421 try again later"));
    }
    println!("sent the receipt of {} (key {key})", receipt.order_id);
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("DATABASE_URL").map_err(|_| "DATABASE_URL is not set")?;
    let db = Database::connect(url).await?;
    // Each job type's worker key and retryable flag are written on its rows at commit.
    let outbox = Outbox::builder()
        .job(Job::of::<ReceiptRequestedV1>().worker_key("notifications"))
        .job(
            Job::of::<PayoutRequestedV1>()
                .worker_key("payments")
                .retryable(false),
        )
        .build()?;
    schema::install(&db, &outbox).await?;

    let uow = outbox.begin(&db, &Jobs).await?;
    uow.raise(Enqueue::Receipt("order-1"));
    uow.raise(Enqueue::Receipt("order-2"));
    uow.raise(Enqueue::Payout("seller-7", 12_00));
    uow.commit().await?;

    let jobs = JobDispatcher::builder()
        .handler(|receipt: ReceiptRequestedV1, envelope: &Envelope| {
            send_receipt(receipt, envelope.message_id.to_string())
        })
        .handler(|_: PayoutRequestedV1, _: &Envelope| async {
            // Did the money leave? Nobody knows: a person decides, the relay does not retry.
            Err::<(), _>(JobError::retryable("bank timed out"))
        })
        .build()?;
    // Each worker key is a lease: another relay with the same keys stands by.
    let mut relay = Relay::builder(db.clone(), outbox.clone(), jobs)
        .worker_keys(["notifications", "payments"])
        .backoff(Backoff::new().with_min_delay(Duration::from_millis(200)))
        .retention(Some(Duration::from_secs(7 * 24 * 3600))) // keep done jobs for operators
        .alert_hook(|job: FailedJob| async move {
            let (id, attempts) = (job.envelope.message_id, job.attempts);
            println!(
                "ALERT {id} failed after {attempts} attempt(s): {}",
                job.error
            );
            Ok::<(), std::io::Error>(())
        })
        .build()?;

    // Run until both receipts are sent and the payout failed (the retry waits its backoff).
    let (mut done, mut failed) = (0, 0);
    for _ in 0..100 {
        let report = relay.drain().await?;
        (done, failed) = (done + report.published, failed + report.failed);
        if (done, failed) == (2, 1) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for row in OutboxRecord::list(&db, &outbox, 10).await? {
        let (job, status, attempts) = (&row.envelope.aggregate_id, row.status, row.attempts);
        println!("{job}: {}, {attempts} failed attempt(s)", status.as_str());
    }
    if (done, failed) != (2, 1) {
        return Err(format!("{done} jobs done and {failed} failed, expected 2 and 1").into());
    }
    Ok(())
}
