//! Scenario 2: publish, then commit; the same checkout is submitted twice.
//!
//! **Anti-pattern.** [`publish_then_commit`] swaps the order of scenario 1: it publishes
//! first, then commits. A double click submits the same checkout twice; the unique index
//! on `checkout_id` rightly rejects the second order — after its event went out. The
//! broker now announces an order that does not exist.

use bookstore_contracts::OrderPlacedV1;
use outbox_core::publish::Publisher;
use outbox_core::{IntegrationEvent as _, RecordedEvents};
use sea_orm::{DatabaseConnection, EntityTrait as _, TransactionTrait as _};
use uuid::Uuid;

use super::scenario1::{NaiveHandlerError, contracts_of};
use super::{Report, expect};
use crate::broker::{Channel, Outage, publish_all};
use crate::env::Env;
use crate::error::DemoError;
use crate::ordering::{self, Order, PlaceOrder, PlaceOrderError};

/// The article's title.
pub const TITLE: &str = "Publish, then commit; the same checkout is submitted twice";
/// What the scenario proves.
pub const CLAIM: &str = "anti-pattern: a rejected commit leaves a ghost event on the broker (dual write, second window)";

/// **ANTI-PATTERN — do not copy.** Publishes the order's event, then commits the order: if
/// the commit fails (unique violation, deadlock, validation), the event is already out.
///
/// # Errors
/// [`NaiveHandlerError`] — when the commit failed, the event was already published.
pub async fn publish_then_commit<P: Publisher>(
    db: &DatabaseConnection,
    publisher: &P,
    command: PlaceOrder,
) -> Result<Order, NaiveHandlerError> {
    let events = RecordedEvents::new();
    let order = Order::place(&events, command).map_err(PlaceOrderError::from)?;
    let envelopes = contracts_of(events)?;
    publish_all(publisher, &envelopes) // 1) published first
        .await
        .map_err(NaiveHandlerError::Publish)?;
    let txn = db.begin().await.map_err(PlaceOrderError::from)?;
    ordering::insert_order(&txn, &order).await?; // 2) then the commit fails
    txn.commit().await.map_err(PlaceOrderError::from)?;
    Ok(order)
}

/// What scenario 2 measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scenario2 {
    /// The first click's error, if any.
    pub click_1_error: Option<String>,
    /// The second click's error (`None` if it succeeded).
    pub click_2_error: Option<String>,
    /// Whether the second click failed on the unique `checkout_id`.
    pub click_2_duplicate_checkout: bool,
    /// Orders stored.
    pub orders_in_db: u64,
    /// Messages the broker holds.
    pub messages_on_broker: usize,
    /// Messages announcing an order that is not in the database.
    pub ghost_events: usize,
}

impl Report for Scenario2 {
    fn number(&self) -> u8 {
        2
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
            "orders in db: {}, messages on broker: {}",
            self.orders_in_db, self.messages_on_broker
        ));
        lines.push(format!(
            "ghost events (announcing an order that does not exist): {}",
            self.ghost_events
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
        expect(&mut deviations, "orders in db", &self.orders_in_db, &1);
        expect(
            &mut deviations,
            "messages on broker",
            &self.messages_on_broker,
            &2,
        );
        expect(&mut deviations, "ghost events", &self.ghost_events, &1);
        deviations
    }
}

/// Runs scenario 2 on `env`.
///
/// # Errors
/// [`DemoError`] when the database or broker cannot be set up.
pub async fn run(env: &Env) -> Result<Scenario2, DemoError> {
    super::staged(env, 2, Outage::None, play).await
}

async fn play(db: &DatabaseConnection, channel: &Channel) -> Result<Scenario2, DemoError> {
    ordering::create_tables(db).await?;
    let publisher = channel.publisher().await?;
    let (checkout, customer) = (Uuid::now_v7(), Uuid::now_v7());
    let click_1 =
        publish_then_commit(db, &publisher, PlaceOrder::dune(checkout, customer, 2)).await;
    let click_2 =
        publish_then_commit(db, &publisher, PlaceOrder::dune(checkout, customer, 2)).await;
    let click_2_duplicate_checkout = matches!(
        &click_2,
        Err(NaiveHandlerError::Order(
            PlaceOrderError::DuplicateCheckout { .. }
        ))
    );
    let messages = channel.messages().await?;
    let mut ghost_events = 0;
    for message in &messages {
        let envelope = message.envelope()?;
        if envelope.event_type != OrderPlacedV1::EVENT_TYPE {
            continue;
        }
        let placed: OrderPlacedV1 = envelope.decode().map_err(DemoError::broker)?;
        let stored = ordering::entity::orders::Entity::find_by_id(placed.order_id.to_string())
            .one(db)
            .await?;
        if stored.is_none() {
            ghost_events += 1;
        }
    }
    Ok(Scenario2 {
        click_1_error: click_1.err().map(|error| error.to_string()),
        click_2_error: click_2.err().map(|error| error.to_string()),
        click_2_duplicate_checkout,
        orders_in_db: ordering::count_orders(db).await?,
        messages_on_broker: messages.len(),
        ghost_events,
    })
}
