//! Scenario 4 with the log relay (`--relay log`, PostgreSQL with `wal_level = logical`).
//!
//! The order commits, relay #1 publishes its event, the broker confirms — and the process
//! freezes before its acknowledgement (the publisher never answers the relay) and dies (its
//! task is aborted): the slot's confirmed position has not moved. The
//! restarted relay (the same instance, so it takes its own lease back at once) streams from
//! that position and publishes the order's event again, **with the same message id**.
//! Inventory's inbox applies the first delivery and skips the second, as in the polling
//! scenario: the report and its facts are the same.

use std::sync::Arc;
use std::time::Duration;

use outbox_seaorm::Outbox;
use outbox_seaorm::schema;
use uuid::Uuid;

use super::{Scenario4, consume};
use crate::broker::{Outage, Tally};
use crate::env::{Env, RelayChoice};
use crate::error::DemoError;
use crate::inventory;
use crate::ordering::{self, PlaceOrder};
use crate::scenarios::log_relay::{self, LogStage, Running, WAIT};
use crate::scenarios::outbox_error;

/// The relay's instance id, before and after the crash (the process restarts as itself).
const INSTANCE: &str = "relay-1";

/// Runs scenario 4 on `env` with the log relay.
///
/// # Errors
/// [`DemoError::Skipped`] when the log relay cannot run there (its error says what is
/// missing); else [`DemoError`] when something cannot be set up or does not happen in time.
pub async fn run(env: &Env) -> Result<Scenario4, DemoError> {
    log_relay::staged(env, 4, Outage::None, play).await
}

async fn play(stage: &LogStage<'_>) -> Result<Scenario4, DemoError> {
    let db = stage.db;
    let outbox = Outbox::default();
    schema::install(db, &outbox).await?;
    ordering::create_tables(db).await?;
    inventory::create_tables(db).await?;
    inventory::stock_book(db, "dune", "Dune", 5).await?;

    // Relay #1 publishes, then its process dies before the acknowledgement goes out.
    let first = Arc::new(Tally::freezing(stage.channel.publisher().await?));
    let relay_1 = stage
        .relay(&outbox, Arc::clone(&first), INSTANCE)
        .build()
        .map_err(log_relay::failure)?;
    let mut relay_1 = Running::start(relay_1);
    relay_1.streaming(stage).await?;
    let before = stage.confirmed_position().await?;
    ordering::place_order(
        db,
        &outbox,
        PlaceOrder::dune(Uuid::now_v7(), Uuid::now_v7(), 2),
    )
    .await
    .map_err(outbox_error)?;
    // The server's position now: at or past the order's commit.
    let committed = stage.current_position().await?;
    if !first.wait_until(WAIT, |confirmed, _| confirmed >= 1).await {
        return Err(DemoError::Timeout(format!(
            "relay #1 did not publish within {WAIT:?}"
        )));
    }
    relay_1.kill().await;
    let after = stage.confirmed_position().await?;
    // PostgreSQL: the slot did not move at all. MariaDB: the relay's own lease and
    // position writes are transactions of the binlog too, which it may acknowledge; the
    // order's commit it must not.
    let order_acknowledged = if stage.binlog() {
        stage.acknowledged(&committed).await?
    } else {
        after != before
    };

    // Relay #2: the same relay, restarted, on the same slot.
    let broker_duplicate_window = stage.channel.duplicate_window();
    if let Some(window) = broker_duplicate_window {
        tokio::time::sleep(window + Duration::from_millis(100)).await;
    }
    let second = Arc::new(Tally::new(stage.channel.publisher().await?));
    let relay_2 = stage
        .relay(&outbox, Arc::clone(&second), INSTANCE)
        .build()
        .map_err(log_relay::failure)?;
    let relay_2 = Running::start(relay_2);
    if !second.wait_until(WAIT, |confirmed, _| confirmed >= 1).await {
        return Err(DemoError::Timeout(format!(
            "relay #2 did not publish within {WAIT:?}"
        )));
    }
    let report = relay_2.stop().await?;

    let consumed = consume(db, &outbox, stage.channel).await?;
    Ok(Scenario4 {
        relay: RelayChoice::Log,
        relay_1: "Process crashed (simulated) after the broker confirmed, before the \
                  acknowledgement reached the server"
            .to_owned(),
        pending_after_crash: !order_acknowledged,
        slot_position: Some(after),
        relay_2_published: usize::try_from(report.published).unwrap_or(usize::MAX),
        messages_on_broker: consumed.messages,
        distinct_ids: consumed.distinct_ids,
        deliveries: consumed.deliveries,
        dune: consumed.dune,
        broker_duplicate_window,
    })
}
