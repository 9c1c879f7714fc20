//! Scenario 1: commit, then publish, while the broker is down.
//!
//! **Anti-pattern.** [`commit_then_publish`] is the handler the article starts from: it
//! commits the order, then publishes `OrderPlacedV1` straight to the broker. With the
//! broker down, the customer gets an error although the order exists, and the event is lost
//! for good: retrying the handler would place another order.

use outbox_core::clock::SystemClock;
use outbox_core::mapping::{ContractMapper as _, ContractSink, DerivedMapping};
use outbox_core::publish::Publisher;
use outbox_core::{Envelope, EnvelopeConfig, RecordedEvents};
use sea_orm::{DatabaseConnection, TransactionTrait as _};
use uuid::Uuid;

use super::{Report, expect};
use crate::broker::{Channel, Outage, publish_all};
use crate::env::Env;
use crate::error::DemoError;
use crate::ordering::{self, Order, OrderingEvent, PlaceOrder, PlaceOrderError};

/// The article's title.
pub const TITLE: &str = "Commit, then publish; broker is down";
/// What the scenario proves.
pub const CLAIM: &str =
    "anti-pattern: the order is committed and its event is lost (dual write, first window)";

/// Why a naive handler failed.
#[derive(Debug, thiserror::Error)]
pub enum NaiveHandlerError {
    /// Placing or storing the order failed.
    #[error(transparent)]
    Order(#[from] PlaceOrderError),
    /// Mapping the event failed.
    #[error("mapping: {0}")]
    Mapping(String),
    /// The broker refused or could not be reached.
    #[error("{0}")]
    Publish(String),
}

/// The contracts of the events an aggregate raised, through the same derived mapping the
/// unit of work uses.
pub(crate) fn contracts_of(
    events: RecordedEvents<OrderingEvent>,
) -> Result<Vec<Envelope>, NaiveHandlerError> {
    let (config, clock) = (EnvelopeConfig::default(), SystemClock);
    let mut sink = ContractSink::new(&config, &clock);
    for event in events.take() {
        DerivedMapping
            .map(&event, &mut sink)
            .map_err(|error| NaiveHandlerError::Mapping(error.to_string()))?;
    }
    Ok(sink.into_envelopes())
}

/// **ANTI-PATTERN — do not copy.** Commits the order, then publishes its event directly:
/// if the broker is unreachable (or the process dies) after the commit, the event is lost.
///
/// # Errors
/// [`NaiveHandlerError`] — when it is [`NaiveHandlerError::Publish`], the order is
/// already committed.
pub async fn commit_then_publish<P: Publisher>(
    db: &DatabaseConnection,
    publisher: &P,
    command: PlaceOrder,
) -> Result<Order, NaiveHandlerError> {
    let events = RecordedEvents::new();
    let order = Order::place(&events, command).map_err(PlaceOrderError::from)?;
    let txn = db.begin().await.map_err(PlaceOrderError::from)?;
    ordering::insert_order(&txn, &order).await?;
    txn.commit().await.map_err(PlaceOrderError::from)?; // 1) committed
    let envelopes = contracts_of(events)?;
    publish_all(publisher, &envelopes) // 2) the broker is down: lost
        .await
        .map_err(NaiveHandlerError::Publish)?;
    Ok(order)
}

/// What scenario 1 measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scenario1 {
    /// The handler's error (`None` if it succeeded).
    pub handler_error: Option<String>,
    /// Orders stored.
    pub orders_in_db: u64,
    /// Messages the broker holds.
    pub messages_on_broker: usize,
}

impl Report for Scenario1 {
    fn number(&self) -> u8 {
        1
    }

    fn title(&self) -> &'static str {
        TITLE
    }

    fn claim(&self) -> &'static str {
        CLAIM
    }

    fn lines(&self) -> Vec<String> {
        vec![
            match &self.handler_error {
                Some(error) => format!("handler failed: {error}"),
                None => "handler succeeded".to_owned(),
            },
            format!(
                "orders in db: {}, messages on broker: {}",
                self.orders_in_db, self.messages_on_broker
            ),
        ]
    }

    fn deviations(&self) -> Vec<String> {
        let mut deviations = Vec::new();
        expect(
            &mut deviations,
            "handler failed",
            &self.handler_error.is_some(),
            &true,
        );
        expect(&mut deviations, "orders in db", &self.orders_in_db, &1);
        expect(
            &mut deviations,
            "messages on broker",
            &self.messages_on_broker,
            &0,
        );
        deviations
    }
}

/// Runs scenario 1 on `env`.
///
/// # Errors
/// [`DemoError`] when the database or broker cannot be set up.
pub async fn run(env: &Env) -> Result<Scenario1, DemoError> {
    super::staged(env, 1, Outage::Playable, play).await
}

async fn play(db: &DatabaseConnection, channel: &Channel) -> Result<Scenario1, DemoError> {
    ordering::create_tables(db).await?;
    let publisher = channel.publisher().await?;
    channel.go_down();
    let command = PlaceOrder::dune(Uuid::now_v7(), Uuid::now_v7(), 2);
    let handler_error = commit_then_publish(db, &publisher, command)
        .await
        .err()
        .map(|error| error.to_string());
    Ok(Scenario1 {
        handler_error,
        orders_in_db: ordering::count_orders(db).await?,
        messages_on_broker: channel.messages().await?.len(),
    })
}
