//! Scenario 6 with the log relay (`--relay log`, PostgreSQL with `wal_level = logical`).
//!
//! A slot streams to one reader, so two log relays do not split the work: they share the
//! slot through its lease (2 s here). Relay A takes it and streams; relay B stands by,
//! polling the lease. Three orders are placed: A publishes them and acknowledges them; B
//! publishes nothing. A is killed (its task aborted: no shutdown, its lease not released);
//! three more orders are placed. B takes the lease over once it expired, streams from the
//! position A acknowledged and publishes the three new orders: every order once, and the
//! takeover within the lease TTL (plus B's poll of the lease and its reconnection).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use outbox_seaorm::ops::Operations;
use outbox_seaorm::record::OutboxRecord;
use outbox_seaorm::{Outbox, schema};
use uuid::Uuid;

use super::{BATCH, ORDERS};
use crate::broker::{Outage, Tally};
use crate::env::Env;
use crate::error::DemoError;
use crate::ordering::{self, PlaceOrder};
use crate::scenarios::log_relay::{self, LEASE_TTL, LogStage, Running, WAIT};
use crate::scenarios::{Report, expect, outbox_error};

/// The title with the log relay.
pub const TITLE: &str = "Two relay instances: two log relays on one slot";
/// What the scenario proves with the log relay.
pub const CLAIM: &str = "one log relay streams, the other stands by on the slot's lease and \
                         takes over within its TTL when the active one dies; every order once";

/// How much later than the lease TTL the standby may take over: its poll of the lease
/// (every fifth of the TTL), its start-up checks and reconnection.
pub const TAKEOVER_MARGIN: Duration = Duration::from_secs(2);

/// What scenario 6 measured with the log relay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scenario6Log {
    /// Every outbox row's sequence number, in order.
    pub rows: Vec<i64>,
    /// The relay holding the slot's lease while both ran.
    pub lease_before: Option<String>,
    /// The sequence numbers relay A published, in order.
    pub relay_a: Vec<i64>,
    /// Whether the slot acknowledged relay A's orders before it was killed.
    pub acknowledged_before_kill: bool,
    /// Events relay B published while relay A ran.
    pub relay_b_while_a_ran: usize,
    /// The sequence numbers relay B published after it took over, in order.
    pub relay_b: Vec<i64>,
    /// The relay holding the lease after the takeover.
    pub lease_after: Option<String>,
    /// From relay A's death to relay B's first publish.
    pub takeover: Duration,
    /// The lease TTL.
    pub lease_ttl: Duration,
    /// Messages the broker holds.
    pub messages_on_broker: usize,
    /// Distinct message ids among them.
    pub distinct_ids: usize,
}

fn holder(lease: Option<&String>) -> &str {
    lease.map_or("nobody", String::as_str)
}

impl Report for Scenario6Log {
    fn number(&self) -> u8 {
        6
    }

    fn title(&self) -> &'static str {
        TITLE
    }

    fn claim(&self) -> &'static str {
        CLAIM
    }

    fn lines(&self) -> Vec<String> {
        vec![
            format!(
                "lease held by {}; relay B stands by: published {} while relay A ran",
                holder(self.lease_before.as_ref()),
                self.relay_b_while_a_ran
            ),
            format!(
                "relay A published {:?} ({}), then was killed",
                self.relay_a,
                if self.acknowledged_before_kill {
                    "acknowledged"
                } else {
                    "NOT acknowledged"
                }
            ),
            format!(
                "relay B took over {:.1} s after relay A died (lease TTL {} s) and published \
                 {:?}; lease held by {}",
                self.takeover.as_secs_f64(),
                self.lease_ttl.as_secs(),
                self.relay_b,
                holder(self.lease_after.as_ref())
            ),
            format!(
                "messages on broker: {}, distinct ids: {}",
                self.messages_on_broker, self.distinct_ids
            ),
        ]
    }

    fn deviations(&self) -> Vec<String> {
        let mut deviations = Vec::new();
        let (first, rest) = self.rows.split_at(BATCH.min(self.rows.len()));
        expect(&mut deviations, "rows", &self.rows.len(), &ORDERS);
        expect(
            &mut deviations,
            "lease holder while both ran",
            &self.lease_before.as_deref(),
            &Some("relay-a"),
        );
        expect(
            &mut deviations,
            "relay A published",
            &self.relay_a.as_slice(),
            &first,
        );
        expect(
            &mut deviations,
            "relay A acknowledged before it was killed",
            &self.acknowledged_before_kill,
            &true,
        );
        expect(
            &mut deviations,
            "relay B published while relay A ran",
            &self.relay_b_while_a_ran,
            &0,
        );
        expect(
            &mut deviations,
            "relay B published",
            &self.relay_b.as_slice(),
            &rest,
        );
        expect(
            &mut deviations,
            "lease holder after the takeover",
            &self.lease_after.as_deref(),
            &Some("relay-b"),
        );
        expect(
            &mut deviations,
            "takeover within the lease TTL (+ 2 s for the poll and the reconnection)",
            &(self.takeover <= self.lease_ttl + TAKEOVER_MARGIN),
            &true,
        );
        expect(
            &mut deviations,
            "messages on broker",
            &self.messages_on_broker,
            &ORDERS,
        );
        expect(&mut deviations, "distinct ids", &self.distinct_ids, &ORDERS);
        deviations
    }
}

/// Runs scenario 6 on `env` with the log relay.
///
/// # Errors
/// [`DemoError::Skipped`] when the log relay cannot run there (its error says what is
/// missing); else [`DemoError`] when something cannot be set up or does not happen in time.
pub async fn run(env: &Env) -> Result<Scenario6Log, DemoError> {
    log_relay::staged(env, 6, Outage::None, play).await
}

/// Places `count` orders.
async fn place_orders(
    db: &sea_orm::DatabaseConnection,
    outbox: &Outbox,
    count: usize,
) -> Result<(), DemoError> {
    for _ in 0..count {
        ordering::place_order(
            db,
            outbox,
            PlaceOrder::dune(Uuid::now_v7(), Uuid::now_v7(), 1),
        )
        .await
        .map_err(outbox_error)?;
    }
    Ok(())
}

async fn play(stage: &LogStage<'_>) -> Result<Scenario6Log, DemoError> {
    let db = stage.db;
    let outbox = Outbox::default();
    schema::install(db, &outbox).await?;
    ordering::create_tables(db).await?;
    let operations = Operations::new(db.clone(), outbox.clone());
    let lease_holder = async || -> Result<Option<String>, DemoError> {
        Ok(operations
            .log_slots()
            .await?
            .into_iter()
            .find(|slot| slot.slot == stage.slot)
            .and_then(|slot| slot.active_relay))
    };

    let publisher_a = Arc::new(Tally::new(stage.channel.publisher().await?));
    let publisher_b = Arc::new(Tally::new(stage.channel.publisher().await?));
    let relay_a = stage
        .relay(&outbox, Arc::clone(&publisher_a), "relay-a")
        .build()
        .map_err(log_relay::failure)?;
    let mut relay_a = Running::start(relay_a);
    relay_a.streaming(stage).await?;
    let relay_b = stage
        .relay(&outbox, Arc::clone(&publisher_b), "relay-b")
        .build()
        .map_err(log_relay::failure)?;
    let relay_b = Running::start(relay_b);

    place_orders(db, &outbox, BATCH).await?;
    if !publisher_a
        .wait_until(WAIT, |confirmed, _| confirmed >= BATCH)
        .await
    {
        return Err(DemoError::Timeout(format!(
            "relay A did not publish {BATCH} orders within {WAIT:?}"
        )));
    }
    // Relay A's acknowledgement reaches the server (with its next status update).
    let position = stage.current_position().await?;
    let acknowledged_before_kill = stage.wait_acknowledged(&position).await.is_ok();
    let lease_before = lease_holder().await?;
    let relay_b_while_a_ran = publisher_b.confirmed().len();

    let killed = Instant::now();
    relay_a.kill().await;
    place_orders(db, &outbox, ORDERS - BATCH).await?;
    if !publisher_b
        .wait_until(WAIT, |confirmed, _| confirmed >= 1)
        .await
    {
        return Err(DemoError::Timeout(format!(
            "relay B did not take over within {WAIT:?}"
        )));
    }
    let takeover = killed.elapsed();
    if !publisher_b
        .wait_until(WAIT, |confirmed, _| confirmed >= ORDERS - BATCH)
        .await
    {
        return Err(DemoError::Timeout(format!(
            "relay B did not publish {} orders within {WAIT:?}",
            ORDERS - BATCH
        )));
    }
    let lease_after = lease_holder().await?;
    relay_b.stop().await?;

    let seq_of: BTreeMap<Uuid, i64> = OutboxRecord::list(db, &outbox, 100)
        .await?
        .iter()
        .map(|row| (row.envelope.message_id, row.seq))
        .collect();
    let seqs = |ids: Vec<Uuid>| -> Vec<i64> {
        ids.iter()
            .map(|id| seq_of.get(id).copied().unwrap_or(0))
            .collect()
    };
    let mut rows: Vec<i64> = seq_of.values().copied().collect();
    rows.sort_unstable();
    let messages = stage.channel.messages().await?;
    let distinct: BTreeSet<Uuid> = messages.iter().filter_map(|m| m.message_id()).collect();
    Ok(Scenario6Log {
        rows,
        lease_before,
        relay_a: seqs(publisher_a.confirmed()),
        acknowledged_before_kill,
        relay_b_while_a_ran,
        relay_b: seqs(publisher_b.confirmed()),
        lease_after,
        takeover,
        lease_ttl: LEASE_TTL,
        messages_on_broker: messages.len(),
        distinct_ids: distinct.len(),
    })
}
