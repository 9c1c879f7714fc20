//! Scenario 3: the outbox, in the two situations of scenarios 1 and 2.
//!
//! The checkout runs the [`place_order`](crate::ordering::place_order) command handler:
//! the order and its `OrderPlacedV1` outbox row commit in one transaction. With the broker
//! down the checkout still succeeds; the double click's second order is rejected and
//! leaves no outbox row (no ghost event). The relay's first pass fails and records one
//! attempt on the row; once the broker is back (and the row's backoff has passed) the
//! relay publishes it.
//!
//! With `--relay log` the log relay plays the same outage ([`log`]).

use std::sync::Arc;

use chrono::Utc;
use outbox_core::clock::Clock as _;
use outbox_core::clock::ManualClock;
use outbox_seaorm::Outbox;
use outbox_seaorm::record::OutboxRecord;
use outbox_seaorm::schema::{self, OutboxStatus};
use sea_orm::DatabaseConnection;
use uuid::Uuid;

pub mod log;

use super::{Report, expect, outbox_error, relay};
use crate::broker::{Channel, Outage};
use crate::env::Env;
use crate::error::DemoError;
use crate::ordering::{self, PlaceOrder, PlaceOrderError};

/// The article's title.
pub const TITLE: &str = "Outbox: same two scenarios";
/// What the scenario proves.
pub const CLAIM: &str =
    "the order and its event commit together; the relay publishes once the broker is back";

/// What scenario 3 measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scenario3 {
    /// The first click's error, if any (the broker being down must not matter).
    pub click_1_error: Option<String>,
    /// The second click's error (`None` if it succeeded).
    pub click_2_error: Option<String>,
    /// Whether the second click failed on the unique `checkout_id`.
    pub click_2_duplicate_checkout: bool,
    /// Rows the relay published while the broker was down.
    pub published_while_down: usize,
    /// Attempts the relay recorded while the broker was down.
    pub retried_while_down: usize,
    /// The error the relay recorded on the row.
    pub last_error: Option<String>,
    /// Rows the relay published once the broker was back.
    pub published_after_back: usize,
    /// Orders stored.
    pub orders_in_db: u64,
    /// Outbox rows.
    pub outbox_rows: usize,
    /// The failed attempts recorded on the order's row.
    pub attempts: i32,
    /// Whether every outbox row is `published`.
    pub all_published: bool,
    /// Messages the broker holds.
    pub messages_on_broker: usize,
}

impl Report for Scenario3 {
    fn number(&self) -> u8 {
        3
    }

    fn title(&self) -> &'static str {
        TITLE
    }

    fn claim(&self) -> &'static str {
        CLAIM
    }

    fn lines(&self) -> Vec<String> {
        let mut lines =
            super::click_lines(self.click_1_error.as_deref(), self.click_2_error.as_deref());
        lines.push(format!(
            "relay while broker is down: published {}{}",
            self.published_while_down,
            self.last_error
                .as_ref()
                .map(|error| format!(" (attempt recorded: {error})"))
                .unwrap_or_default()
        ));
        lines.push(format!(
            "relay after broker is back: published {}",
            self.published_after_back
        ));
        lines.push(format!(
            "orders in db: {}, outbox rows: {}, attempts: {}, messages on broker: {}",
            self.orders_in_db, self.outbox_rows, self.attempts, self.messages_on_broker
        ));
        lines
    }

    fn deviations(&self) -> Vec<String> {
        let mut deviations = Vec::new();
        expect(&mut deviations, "click 1 error", &self.click_1_error, &None);
        expect(
            &mut deviations,
            "click 2 rejected by the unique checkout_id",
            &self.click_2_duplicate_checkout,
            &true,
        );
        expect(
            &mut deviations,
            "published while down",
            &self.published_while_down,
            &0,
        );
        expect(
            &mut deviations,
            "attempts recorded while down",
            &self.retried_while_down,
            &1,
        );
        expect(
            &mut deviations,
            "published after back",
            &self.published_after_back,
            &1,
        );
        expect(&mut deviations, "orders in db", &self.orders_in_db, &1);
        expect(&mut deviations, "outbox rows", &self.outbox_rows, &1);
        expect(&mut deviations, "attempts", &self.attempts, &1);
        expect(
            &mut deviations,
            "every row published",
            &self.all_published,
            &true,
        );
        expect(
            &mut deviations,
            "messages on broker",
            &self.messages_on_broker,
            &1,
        );
        deviations
    }
}

/// Runs scenario 3 on `env`.
///
/// # Errors
/// [`DemoError`] when the database, outbox or broker cannot be set up.
pub async fn run(env: &Env) -> Result<Scenario3, DemoError> {
    super::staged(env, 3, Outage::Playable, play).await
}

async fn play(db: &DatabaseConnection, channel: &Channel) -> Result<Scenario3, DemoError> {
    // A manual clock: the scenario moves time past the row's backoff instead of sleeping.
    let clock = Arc::new(ManualClock::starting_at(Utc::now()));
    let outbox = Outbox::builder()
        .clock(clock.clone())
        .build()
        .map_err(outbox_error)?;
    schema::install(db, &outbox).await?;
    ordering::create_tables(db).await?;
    let publisher = channel.publisher().await?;
    let mut relay = relay(db, &outbox, publisher, "relay-1")
        .build()
        .map_err(outbox_error)?;

    channel.go_down();
    let (checkout, customer) = (Uuid::now_v7(), Uuid::now_v7());
    let click_1 = ordering::place_order(db, &outbox, PlaceOrder::dune(checkout, customer, 2)).await;
    let click_2 = ordering::place_order(db, &outbox, PlaceOrder::dune(checkout, customer, 2)).await;
    let click_2_duplicate_checkout =
        matches!(&click_2, Err(PlaceOrderError::DuplicateCheckout { .. }));

    let down = relay.drain().await?;
    let rows = OutboxRecord::list(db, &outbox, 100).await?;
    let last_error = rows.first().and_then(|row| row.last_error.clone());
    let due = rows.first().map(|row| row.next_attempt_at);

    channel.come_up(relay.publisher()).await?;
    // The row waits for its backoff (1 s); move the clock there.
    if let Some(due) = due {
        clock.set(due.max(clock.now()));
    }
    let back = relay.drain().await?;

    let rows = OutboxRecord::list(db, &outbox, 100).await?;
    Ok(Scenario3 {
        click_1_error: click_1.err().map(|error| error.to_string()),
        click_2_error: click_2.err().map(|error| error.to_string()),
        click_2_duplicate_checkout,
        published_while_down: down.published,
        retried_while_down: down.retried,
        last_error,
        published_after_back: back.published,
        orders_in_db: ordering::count_orders(db).await?,
        outbox_rows: rows.len(),
        attempts: rows.first().map_or(0, |row| row.attempts),
        all_published: rows.iter().all(|row| row.status == OutboxStatus::Published),
        messages_on_broker: channel.messages().await?.len(),
    })
}
