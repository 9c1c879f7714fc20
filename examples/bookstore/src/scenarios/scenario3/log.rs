//! Scenario 3 with the log relay (`--relay log`, PostgreSQL with `wal_level = logical`).
//!
//! The log relay streams from the scenario's slot before the checkout. With the broker
//! down the checkout still succeeds and the double click's second order leaves no outbox
//! row, as with the polling relay. The relay reads the order's commit from the log at once
//! and tries to publish it: the broker refuses, the relay acknowledges nothing and retries
//! after its backoff; once the broker is back the retry publishes the event. Nothing is
//! lost, and the row stays `pending`: the log relay reads the log and never marks rows.

use outbox_seaorm::Outbox;
use outbox_seaorm::record::OutboxRecord;
use outbox_seaorm::schema::{self, OutboxStatus};
use uuid::Uuid;

use super::{CLAIM, TITLE};
use crate::broker::Outage;
use crate::env::Env;
use crate::error::DemoError;
use crate::ordering::{self, PlaceOrder, PlaceOrderError};
use crate::scenarios::log_relay::{self, LogStage, WAIT};
use crate::scenarios::{Report, expect};

/// What scenario 3 measured with the log relay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scenario3Log {
    /// The first click's error, if any (the broker being down must not matter).
    pub click_1_error: Option<String>,
    /// The second click's error (`None` if it succeeded).
    pub click_2_error: Option<String>,
    /// Whether the second click failed on the unique `checkout_id`.
    pub click_2_duplicate_checkout: bool,
    /// Events the broker confirmed while it was down.
    pub published_while_down: usize,
    /// Attempts the broker refused while it was down (at least the first one).
    pub refused_while_down: usize,
    /// The broker's last refusal.
    pub last_error: Option<String>,
    /// Events the broker confirmed once it was back.
    pub published_after_back: usize,
    /// The relay's report: events published.
    pub relay_published: u64,
    /// The relay's report: failed attempts it retried.
    pub relay_retried: u64,
    /// The relay's report: events given up on.
    pub relay_dead_lettered: u64,
    /// Orders stored.
    pub orders_in_db: u64,
    /// Outbox rows.
    pub outbox_rows: usize,
    /// Whether every outbox row is still `pending` (the log relay does not mark rows).
    pub rows_pending: bool,
    /// Messages the broker holds.
    pub messages_on_broker: usize,
}

impl Report for Scenario3Log {
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
        let mut lines = crate::scenarios::click_lines(
            self.click_1_error.as_deref(),
            self.click_2_error.as_deref(),
        );
        lines.push(format!(
            "log relay while broker is down: published {}, refused {}{}",
            self.published_while_down,
            self.refused_while_down,
            self.last_error
                .as_ref()
                .map(|error| format!(" ({error}), nothing acknowledged"))
                .unwrap_or_default()
        ));
        lines.push(format!(
            "log relay after broker is back: published {} (the retry; retried {}, \
             dead-lettered {})",
            self.published_after_back, self.relay_retried, self.relay_dead_lettered
        ));
        lines.push(format!(
            "orders in db: {}, outbox rows: {} ({}), messages on broker: {}",
            self.orders_in_db,
            self.outbox_rows,
            if self.rows_pending {
                "pending: the log relay reads the log, it does not mark rows"
            } else {
                "not all pending"
            },
            self.messages_on_broker
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
            "refused while down (at least once)",
            &(self.refused_while_down >= 1),
            &true,
        );
        expect(
            &mut deviations,
            "published after back",
            &self.published_after_back,
            &1,
        );
        expect(
            &mut deviations,
            "the relay retried the refused event",
            &(self.relay_retried >= 1),
            &true,
        );
        expect(
            &mut deviations,
            "relay published",
            &self.relay_published,
            &1,
        );
        expect(
            &mut deviations,
            "relay dead-lettered",
            &self.relay_dead_lettered,
            &0,
        );
        expect(&mut deviations, "orders in db", &self.orders_in_db, &1);
        expect(&mut deviations, "outbox rows", &self.outbox_rows, &1);
        expect(
            &mut deviations,
            "rows left pending",
            &self.rows_pending,
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

/// Runs scenario 3 on `env` with the log relay.
///
/// # Errors
/// [`DemoError::Skipped`] when the log relay cannot run there (its error says what is
/// missing); else [`DemoError`] when something cannot be set up or does not happen in time.
pub async fn run(env: &Env) -> Result<Scenario3Log, DemoError> {
    log_relay::staged(env, 3, Outage::Playable, play).await
}

async fn play(stage: &LogStage<'_>) -> Result<Scenario3Log, DemoError> {
    let db = stage.db;
    let outbox = Outbox::default();
    schema::install(db, &outbox).await?;
    ordering::create_tables(db).await?;
    let (publisher, relay) = stage.streaming_relay(&outbox, "relay-1").await?;

    stage.channel.go_down();
    let (checkout, customer) = (Uuid::now_v7(), Uuid::now_v7());
    let click_1 = ordering::place_order(db, &outbox, PlaceOrder::dune(checkout, customer, 2)).await;
    let click_2 = ordering::place_order(db, &outbox, PlaceOrder::dune(checkout, customer, 2)).await;
    let click_2_duplicate_checkout =
        matches!(&click_2, Err(PlaceOrderError::DuplicateCheckout { .. }));

    // The relay reads the commit from the log and tries at once: the broker refuses.
    if !publisher.wait_until(WAIT, |_, refused| refused >= 1).await {
        return Err(DemoError::Timeout(format!(
            "the log relay did not try to publish within {WAIT:?}"
        )));
    }
    let published_while_down = publisher.confirmed().len();
    let refused_while_down = publisher.refused();
    let last_error = publisher.last_error();

    stage.channel.come_up(publisher.inner()).await?;
    // Its retry, after the backoff, goes through.
    if !publisher
        .wait_until(WAIT, |confirmed, _| confirmed > published_while_down)
        .await
    {
        return Err(DemoError::Timeout(format!(
            "the log relay did not publish within {WAIT:?} of the broker's return"
        )));
    }
    let report = relay.stop().await?;

    let rows = OutboxRecord::list(db, &outbox, 100).await?;
    Ok(Scenario3Log {
        click_1_error: click_1.err().map(|error| error.to_string()),
        click_2_error: click_2.err().map(|error| error.to_string()),
        click_2_duplicate_checkout,
        published_while_down,
        refused_while_down,
        last_error,
        published_after_back: publisher.confirmed().len() - published_while_down,
        relay_published: report.published,
        relay_retried: report.retried,
        relay_dead_lettered: report.dead_lettered,
        orders_in_db: ordering::count_orders(db).await?,
        outbox_rows: rows.len(),
        rows_pending: rows.iter().all(|row| row.status == OutboxStatus::Pending),
        messages_on_broker: stage.channel.messages().await?.len(),
    })
}
