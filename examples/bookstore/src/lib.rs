//! # The Bookstore
//!
//! The example application of the outbox framework, and its demo: the six scenarios of the
//! outbox article the project started from (book: The demo), run for real with this
//! framework on SQLite, PostgreSQL or MariaDB, with the in-process broker or a real one.
//!
//! - [`ordering`]: the Ordering context — the `Order` aggregate (raises `OrderPlaced` /
//!   `OrderCancelled`), the explicit mapping to `bookstore-contracts`, the `orders` tables
//!   (unique `checkout_id`), the PlaceOrder command handler on a unit of work;
//! - [`inventory`]: the Inventory context (the `bookstore-inventory` crate, re-exported) —
//!   `StockItem` and the `inventory.reserve-stock` consumer written with `#[inbox_handler]`,
//!   on types generated from Ordering's exported schemas (no dependency on
//!   `bookstore-contracts`);
//! - [`scenarios`]: scenarios 1–6, each `run(&Env)` returning the facts it measured (3–6
//!   also `log::run`, the same scenario with the log relay: `--relay log`);
//! - [`job_queue`]: block 7, the job-queue mode (local handlers, worker keys, a
//!   non-retryable payout that fails and alerts);
//! - [`env`](mod@env): which database (one fresh database per scenario), which broker and
//!   which relay;
//! - [`broker`]: the brokers, their outages and read-back;
//! - [`error`]: why a scenario could not run ([`DemoError`]).
//!
//! ```no_run
//! use bookstore::env::Env;
//! use bookstore::scenarios::{self, Report};
//!
//! # async fn demo() -> Result<(), bookstore::error::DemoError> {
//! let dir = std::env::temp_dir().join("bookstore-demo");
//! let report = scenarios::scenario3::run(&Env::embedded(&dir)).await?;
//! assert_eq!((report.published_while_down, report.published_after_back), (0, 1));
//! assert!(report.deviations().is_empty());
//! # Ok(()) }
//! ```

pub mod broker;
pub mod env;
pub mod error;
/// The Inventory context: the `bookstore-inventory` crate.
pub use bookstore_inventory as inventory;
pub mod job_queue;
pub mod ordering;
pub mod scenarios;
#[cfg(feature = "services")]
pub mod services;

pub use error::DemoError;
