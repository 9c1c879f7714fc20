//! Operations on an outbox: status, dead letters, requeue and skip (recorded in the
//! operator log: who, when, why), and retention cleanup of the outbox and inbox tables.
//! The `cli` feature wraps them in embeddable subcommands ([`crate::cli`]).
//!
// The example runs on in-memory SQLite: without the `sqlite` feature it only compiles.
#![cfg_attr(feature = "sqlite", doc = "```")]
#![cfg_attr(not(feature = "sqlite"), doc = "```no_run")]
//! use std::time::Duration;
//!
//! use outbox_seaorm::ops::Operations;
//! use outbox_seaorm::{Outbox, schema};
//! use sea_orm::{ConnectOptions, Database};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let mut options = ConnectOptions::new("sqlite::memory:");
//! # options.max_connections(1).min_connections(1).idle_timeout(None::<Duration>).max_lifetime(None::<Duration>);
//! let db = Database::connect(options).await?;
//! let outbox = Outbox::default();
//! schema::install(&db, &outbox).await?;
//!
//! let ops = Operations::new(db, outbox);
//! let status = ops.status().await?;
//! assert_eq!(status.pending, 0);
//! assert_eq!(status.oldest_claimable_age, None);
//! assert!(ops.dead_letters(None, 50).await?.is_empty());
//! // Deletes published rows older than a week, 1 000 per statement, one instance at a time.
//! assert_eq!(ops.purge(Duration::from_secs(7 * 86_400), 1_000).await?, Some(0));
//! # Ok(())
//! # }
//! ```
//!
//! # Requeue and skip
//!
//! - **requeue** (`dead`, `failed` or `skipped` → `pending`): `attempts` back to 0, due at
//!   once; the relay publishes it with its original message id. `last_error` is kept until
//!   the next attempt. For a `failed` row (a non-retryable job, see [`crate::job`]) this is
//!   the operator's decision to run it again — after checking that it did not happen; there
//!   is deliberately no bulk requeue of failed rows.
//! - **skip** (`dead`, `failed` or `pending` → `skipped`): the row is never published (the
//!   job never run again) and no longer holds its aggregate back under
//!   [`DeadLetterPolicy::Block`]; a reason is required.
//!
//! Both write a row to the operator log (`<outbox>_operator_log`: `seq`, `message_id`,
//! `event_type`, `action`, `previous_status`, `actor`, `reason`, `last_error`, `at`) in
//! the same transaction as the change, and count in [`metric::OPERATOR_ACTIONS`].
//!
//! [`DeadLetterPolicy::Block`]: outbox_core::policy::DeadLetterPolicy::Block

mod action;
mod consumer;
mod error;
mod instances;
#[cfg(log_relay)]
mod log;
mod operations;
mod periodic;
mod purge;
mod scheduled;
mod status;
mod unique;

pub use crate::record::log_slot::{LogRelayStatus, LogSlotStatus};
pub use crate::status_report::{StatusReport, WorkerKeyStatus};
pub use error::OpsError;
pub use instances::RelayInstance;
pub use operations::Operations;
pub use scheduled::{MAX_COUNTED, MAX_ROWS_PER_KEY, ScheduledSummary, ScheduledTarget};
pub use unique::MAX_UNIQUE_KEYS;

pub use crate::record::operator_action::{OperatorAction, OperatorActionKind};

#[cfg(doc)]
use outbox_core::metric;
