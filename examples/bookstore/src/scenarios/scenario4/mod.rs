//! Scenario 4: the relay crashes between publish and mark; the consumer has an inbox.
//!
//! Relay #1 publishes the order's row and "dies" before it can mark it published (its task
//! is aborted while the broker call hangs). The row is still `pending`, so relay #2 —
//! started once relay #1's lease has expired — publishes it again, **with the same message
//! id**. Inventory's `inventory.reserve-stock` consumer receives both deliveries; its inbox
//! applies the first and skips the second, so Dune's reservation is 2, not 4.
//!
//! With `--relay log` the log relay crashes after the broker confirmed but before its
//! acknowledgement reached the server ([`log`]): the same report, the same facts.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use chrono::{TimeDelta, Utc};
use outbox_core::clock::ManualClock;
use outbox_core::in_process::AfterPublish;
use outbox_core::publish::Publisher;
use outbox_seaorm::inbox::Delivered;
use outbox_seaorm::relay::Relay;
use outbox_seaorm::schema::{self, OutboxStatus};
use outbox_seaorm::{Outbox, record::OutboxRecord};
use sea_orm::DatabaseConnection;
use uuid::Uuid;

pub mod log;

use super::{Report, expect, outbox_error, relay};
use crate::broker::{Channel, CrashAfterPublish, Outage};
use crate::env::{Env, RelayChoice};
use crate::error::DemoError;
use crate::inventory::{self, StockItem};
use crate::ordering::{self, PlaceOrder};

/// The article's title.
pub const TITLE: &str = "Relay crashes between publish and mark; consumer has an inbox";
/// The title with the log relay (it acknowledges a position of the log; it marks no row).
pub const LOG_TITLE: &str =
    "Relay crashes between publish and acknowledgement; consumer has an inbox";
/// What the scenario proves.
pub const CLAIM: &str =
    "a crash republishes the same message id (never a loss); the inbox applies it once";

/// How long to wait for relay #1 to publish.
const PUBLISH_WAIT: Duration = Duration::from_secs(20);

/// One delivery to the consumer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The message's event type.
    pub event_type: String,
    /// What the inbox did: `applied`, `duplicate, skipped`, or another outcome.
    pub outcome: String,
}

/// What scenario 4 measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scenario4 {
    /// The relay that crashed and restarted.
    pub relay: RelayChoice,
    /// What happened to relay #1.
    pub relay_1: String,
    /// Whether the order's event was still to be published after relay #1 died: its row
    /// `pending` (polling relay), or the slot's confirmed position unchanged, the order's
    /// commit not acknowledged (log relay).
    pub pending_after_crash: bool,
    /// The slot's confirmed position after the crash (log relay).
    pub slot_position: Option<String>,
    /// Rows relay #2 published.
    pub relay_2_published: usize,
    /// Messages the broker holds.
    pub messages_on_broker: usize,
    /// Distinct message ids among them.
    pub distinct_ids: usize,
    /// The consumer's deliveries, in order.
    pub deliveries: Vec<Delivery>,
    /// Dune's stock at the end.
    pub dune: StockItem,
    /// The broker's own duplicate window, when it has one (NATS JetStream): relay #2 was
    /// started after it, so the copy reached the consumer.
    pub broker_duplicate_window: Option<Duration>,
}

impl Scenario4 {
    fn count(&self, outcome: &str) -> usize {
        self.deliveries
            .iter()
            .filter(|delivery| delivery.outcome == outcome)
            .count()
    }

    /// Deliveries the inbox applied.
    pub fn applied(&self) -> usize {
        self.count(APPLIED)
    }

    /// Deliveries the inbox skipped as duplicates.
    pub fn duplicates(&self) -> usize {
        self.count(DUPLICATE)
    }
}

const APPLIED: &str = "applied";
const DUPLICATE: &str = "duplicate, skipped";

impl Report for Scenario4 {
    fn number(&self) -> u8 {
        4
    }

    fn title(&self) -> &'static str {
        match self.relay {
            RelayChoice::Polling => TITLE,
            RelayChoice::Log => LOG_TITLE,
        }
    }

    fn claim(&self) -> &'static str {
        CLAIM
    }

    fn lines(&self) -> Vec<String> {
        let mut lines = vec![format!("relay #1: {}", self.relay_1)];
        if self.relay == RelayChoice::Log {
            lines.push(format!(
                "slot after the crash: {} (confirmed position {})",
                if self.pending_after_crash {
                    "the order's commit not acknowledged"
                } else {
                    "the order's commit acknowledged"
                },
                self.slot_position.as_deref().unwrap_or("unknown")
            ));
        }
        if let Some(window) = self.broker_duplicate_window {
            lines.push(format!(
                "(the broker drops a repeated message id within its duplicate window, {window:?} \
                 here; relay #2 restarts after it, as after any real outage)"
            ));
        }
        lines.extend([
            format!("relay #2 (restart): published {}", self.relay_2_published),
            format!(
                "on broker: {} messages, distinct ids: {}",
                self.messages_on_broker, self.distinct_ids
            ),
        ]);
        lines.extend(
            self.deliveries
                .iter()
                .map(|delivery| format!("consumer: {} {}", delivery.event_type, delivery.outcome)),
        );
        lines.push(format!(
            "{}: on hand {}, reserved {}",
            self.dune.title, self.dune.on_hand, self.dune.reserved
        ));
        lines
    }

    fn deviations(&self) -> Vec<String> {
        let mut deviations = Vec::new();
        let still_due = match self.relay {
            RelayChoice::Polling => "row pending after the crash",
            RelayChoice::Log => "commit not acknowledged after the crash",
        };
        expect(&mut deviations, still_due, &self.pending_after_crash, &true);
        expect(
            &mut deviations,
            "relay #2 published",
            &self.relay_2_published,
            &1,
        );
        expect(
            &mut deviations,
            "messages on broker",
            &self.messages_on_broker,
            &2,
        );
        expect(&mut deviations, "distinct ids", &self.distinct_ids, &1);
        let outcomes: Vec<&str> = self.deliveries.iter().map(|d| d.outcome.as_str()).collect();
        expect(
            &mut deviations,
            "consumer outcomes",
            &outcomes,
            &vec![APPLIED, DUPLICATE],
        );
        expect(
            &mut deviations,
            "Dune (on hand, reserved)",
            &(self.dune.on_hand, self.dune.reserved),
            &(5, 2),
        );
        deviations
    }
}

/// Runs scenario 4 on `env`.
///
/// # Errors
/// [`DemoError`] when the database, outbox or broker cannot be set up, or relay #1 never
/// publishes.
pub async fn run(env: &Env) -> Result<Scenario4, DemoError> {
    super::staged(env, 4, Outage::None, play).await
}

/// Runs `relay` until `published` says the broker took the batch, then aborts it: the
/// process died between publish and mark.
async fn crash<P: Publisher + 'static>(
    mut relay: Relay<P>,
    published: impl Future<Output = bool>,
) -> Result<String, DemoError> {
    let running = tokio::spawn(async move { relay.drain().await });
    if !published.await {
        running.abort();
        return Err(DemoError::Timeout(format!(
            "relay #1 did not publish within {PUBLISH_WAIT:?}"
        )));
    }
    running.abort();
    match running.await {
        Err(error) if error.is_cancelled() => Ok("Process crashed (simulated)".to_owned()),
        Err(error) => Err(DemoError::Relay(
            outbox_seaorm::relay::RelayError::Database(sea_orm::DbErr::Custom(error.to_string())),
        )),
        Ok(report) => Ok(format!("finished before the crash: {report:?}")),
    }
}

async fn play(db: &DatabaseConnection, channel: &Channel) -> Result<Scenario4, DemoError> {
    let clock = Arc::new(ManualClock::starting_at(Utc::now()));
    let outbox = Outbox::builder()
        .clock(clock.clone())
        .build()
        .map_err(outbox_error)?;
    schema::install(db, &outbox).await?;
    ordering::create_tables(db).await?;
    inventory::create_tables(db).await?;
    inventory::stock_book(db, "dune", "Dune", 5).await?;
    ordering::place_order(
        db,
        &outbox,
        PlaceOrder::dune(Uuid::now_v7(), Uuid::now_v7(), 2),
    )
    .await
    .map_err(outbox_error)?;

    // Relay #1 publishes, then its process dies before it marks the row.
    let relay_1 = if let Some(broker) = channel.in_process() {
        broker.crash_after_next_publish(AfterPublish::Hang);
        let relay = relay(db, &outbox, channel.publisher().await?, "relay-1")
            .build()
            .map_err(outbox_error)?;
        crash(relay, broker.wait_for_published(1, PUBLISH_WAIT)).await?
    } else {
        let publisher = Arc::new(CrashAfterPublish::new(channel.publisher().await?));
        let relay = relay(db, &outbox, Arc::clone(&publisher), "relay-1")
            .build()
            .map_err(outbox_error)?;
        crash(relay, publisher.wait_for_crash(PUBLISH_WAIT)).await?
    };
    let rows = OutboxRecord::list(db, &outbox, 10).await?;
    let pending_after_crash = rows
        .first()
        .is_some_and(|row| row.status == OutboxStatus::Pending);

    // Relay #2 starts once relay #1's lease has expired.
    let mut relay_2 = relay(db, &outbox, channel.publisher().await?, "relay-2")
        .build()
        .map_err(outbox_error)?;
    let broker_duplicate_window = channel.duplicate_window();
    if let Some(window) = broker_duplicate_window {
        tokio::time::sleep(window + Duration::from_millis(100)).await;
    }
    let lease_ttl = relay_2.config().lease_ttl;
    clock.advance(TimeDelta::from_std(lease_ttl).unwrap_or(TimeDelta::MAX) + TimeDelta::seconds(1));
    // On PostgreSQL / MariaDB the dead relay's transaction is rolled back by its pool a
    // moment later; until then its row lock makes the claim skip the row.
    let deadline = tokio::time::Instant::now() + PUBLISH_WAIT;
    let mut relay_2_published = 0;
    loop {
        relay_2_published += relay_2.drain().await?.published;
        if relay_2_published > 0 || tokio::time::Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let consumed = consume(db, &outbox, channel).await?;
    Ok(Scenario4 {
        relay: RelayChoice::Polling,
        relay_1,
        pending_after_crash,
        slot_position: None,
        relay_2_published,
        messages_on_broker: consumed.messages,
        distinct_ids: consumed.distinct_ids,
        deliveries: consumed.deliveries,
        dune: consumed.dune,
        broker_duplicate_window,
    })
}

/// What Inventory's consumer made of the broker's messages.
struct Consumed {
    messages: usize,
    distinct_ids: usize,
    deliveries: Vec<Delivery>,
    dune: StockItem,
}

/// Inventory consumes what the broker holds, in order, through its inbox.
async fn consume(
    db: &DatabaseConnection,
    outbox: &Outbox,
    channel: &Channel,
) -> Result<Consumed, DemoError> {
    let messages = channel.messages().await?;
    let distinct: BTreeSet<Uuid> = messages.iter().filter_map(|m| m.message_id()).collect();
    let consumer = inventory::reserve_stock_consumer(db, outbox).map_err(outbox_error)?;
    let mut deliveries = Vec::new();
    for message in &messages {
        let event_type = message.envelope().map_or_else(
            |_| "(undecodable)".to_owned(),
            |envelope| envelope.event_type,
        );
        let outcome = match message.deliver(&consumer).await? {
            Delivered::Applied { .. } => APPLIED.to_owned(),
            Delivered::Duplicate => DUPLICATE.to_owned(),
            other => format!("{other:?}"),
        };
        deliveries.push(Delivery {
            event_type,
            outcome,
        });
    }
    let dune = inventory::stock_of(db, "dune")
        .await?
        .ok_or_else(|| DemoError::Database(sea_orm::DbErr::RecordNotFound("dune".to_owned())))?;
    Ok(Consumed {
        messages: messages.len(),
        distinct_ids: distinct.len(),
        deliveries,
        dune,
    })
}
