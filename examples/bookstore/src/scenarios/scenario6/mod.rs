//! Scenario 6: two relay instances with `FOR UPDATE SKIP LOCKED` (PostgreSQL, MariaDB).
//!
//! Six orders are placed. Two relays in [`Ordering::Unordered`] mode, batches of three,
//! run one batch each at the same time: relay A claims its rows (`FOR UPDATE SKIP
//! LOCKED`) and is held in the middle of publishing, with its transaction and row locks
//! open; relay B then claims — and skips A's locked rows. Their claims are disjoint and
//! together cover every row.
//!
//! On SQLite there are no row locks (SQLite ignores `SKIP LOCKED`): the framework runs
//! one relay at a time there, through a lease, so the scenario is skipped.
//!
//! With `--relay log` there is nothing to claim: a slot streams to one reader. Two log
//! relays share the slot through its lease, one streaming and one standing by, and the
//! standby takes over when the active one dies ([`log`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use outbox_core::policy::Ordering;
use outbox_seaorm::record::OutboxRecord;
use outbox_seaorm::{Outbox, schema};
use sea_orm::{DatabaseConnection, DbBackend};
use uuid::Uuid;

pub mod log;

use super::{Report, expect, outbox_error, relay};
use crate::broker::{Channel, DemoPublisher, Gate, Hold, Outage};
use crate::env::Env;
use crate::error::DemoError;
use crate::ordering::{self, PlaceOrder};

/// The article's title.
pub const TITLE: &str = "Two relay instances with FOR UPDATE SKIP LOCKED";
/// What the scenario proves.
pub const CLAIM: &str = "concurrent relays claim disjoint rows and together publish every row once";

/// Orders placed.
const ORDERS: usize = 6;
/// Rows per relay batch.
const BATCH: usize = 3;

/// What scenario 6 measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scenario6 {
    /// Every outbox row's sequence number, in order.
    pub rows: Vec<i64>,
    /// The sequence numbers relay A claimed.
    pub relay_a: Vec<i64>,
    /// The sequence numbers relay B claimed.
    pub relay_b: Vec<i64>,
    /// Rows each relay published.
    pub published: (usize, usize),
    /// Messages the broker holds.
    pub messages_on_broker: usize,
}

impl Scenario6 {
    /// Whether no row was claimed by both relays.
    pub fn disjoint(&self) -> bool {
        let a: BTreeSet<i64> = self.relay_a.iter().copied().collect();
        self.relay_b.iter().all(|seq| !a.contains(seq))
    }

    /// Whether the two claims together are every row.
    pub fn complete(&self) -> bool {
        let both: BTreeSet<i64> = self.relay_a.iter().chain(&self.relay_b).copied().collect();
        both == self.rows.iter().copied().collect()
    }
}

impl Report for Scenario6 {
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
                "relay A claimed {:?}, relay B claimed {:?}",
                self.relay_a, self.relay_b
            ),
            format!(
                "disjoint: {}, together every row: {}, published {} + {}, messages on broker: {}",
                if self.disjoint() { "yes" } else { "NO" },
                if self.complete() { "yes" } else { "NO" },
                self.published.0,
                self.published.1,
                self.messages_on_broker
            ),
        ]
    }

    fn deviations(&self) -> Vec<String> {
        let mut deviations = Vec::new();
        let (first, rest) = self.rows.split_at(BATCH.min(self.rows.len()));
        expect(&mut deviations, "rows", &self.rows.len(), &ORDERS);
        expect(
            &mut deviations,
            "relay A claimed",
            &self.relay_a.as_slice(),
            &first,
        );
        expect(
            &mut deviations,
            "relay B claimed",
            &self.relay_b.as_slice(),
            &rest,
        );
        expect(&mut deviations, "disjoint", &self.disjoint(), &true);
        expect(
            &mut deviations,
            "together every row",
            &self.complete(),
            &true,
        );
        expect(
            &mut deviations,
            "published",
            &self.published,
            &(BATCH, ORDERS - BATCH),
        );
        expect(
            &mut deviations,
            "messages on broker",
            &self.messages_on_broker,
            &ORDERS,
        );
        deviations
    }
}

/// Runs scenario 6 on `env`.
///
/// # Errors
/// [`DemoError::Skipped`] on SQLite; else [`DemoError`] when something cannot be set up.
pub async fn run(env: &Env) -> Result<Scenario6, DemoError> {
    if env.database.backend() == DbBackend::Sqlite {
        return Err(DemoError::Skipped {
            reason: "needs PostgreSQL or MariaDB: SQLite has no row locks (it ignores \
                     SKIP LOCKED), so the framework runs one relay at a time there, through a \
                     lease; run with --database postgres://… or mysql://…"
                .to_owned(),
        });
    }
    super::staged(env, 6, Outage::None, play).await
}

async fn play(db: &DatabaseConnection, channel: &Channel) -> Result<Scenario6, DemoError> {
    let outbox = Outbox::default();
    schema::install(db, &outbox).await?;
    ordering::create_tables(db).await?;
    for _ in 0..ORDERS {
        ordering::place_order(
            db,
            &outbox,
            PlaceOrder::dune(Uuid::now_v7(), Uuid::now_v7(), 1),
        )
        .await
        .map_err(outbox_error)?;
    }
    let seq_of: BTreeMap<Uuid, i64> = OutboxRecord::list(db, &outbox, 100)
        .await?
        .iter()
        .map(|row| (row.envelope.message_id, row.seq))
        .collect();

    let gate = Arc::new(Gate::new());
    let publisher_a = Arc::new(Hold::new(channel.publisher().await?, Arc::clone(&gate)));
    let publisher_b = Arc::new(Hold::new(channel.publisher().await?, Arc::clone(&gate)));
    let build = |publisher: &Arc<Hold<DemoPublisher>>, id: &str| {
        relay(db, &outbox, Arc::clone(publisher), id)
            .ordering(Ordering::Unordered)
            .batch_size(BATCH)
            .build()
            .map_err(outbox_error)
    };
    let mut relay_a = build(&publisher_a, "relay-a")?;
    let mut relay_b = build(&publisher_b, "relay-b")?;
    let wait = Duration::from_secs(20);
    let a = tokio::spawn(async move { relay_a.run_batch().await });
    let a_held = gate.wait_for_held(1, wait).await;
    let b = tokio::spawn(async move { relay_b.run_batch().await });
    let b_held = gate.wait_for_held(2, wait).await;
    gate.release();
    let join = |result: Result<_, tokio::task::JoinError>| {
        result.map_err(|error| DemoError::Outbox(format!("relay task: {error}")))
    };
    let (a, b) = (join(a.await)??, join(b.await)??);
    if !(a_held && b_held) {
        return Err(DemoError::Timeout(
            "the two relays did not both hold a batch".to_owned(),
        ));
    }
    let seqs = |publisher: &Hold<DemoPublisher>| -> Vec<i64> {
        publisher
            .claimed()
            .iter()
            .filter_map(|id| seq_of.get(id).copied())
            .collect()
    };
    let mut rows: Vec<i64> = seq_of.values().copied().collect();
    rows.sort_unstable();
    Ok(Scenario6 {
        rows,
        relay_a: seqs(&publisher_a),
        relay_b: seqs(&publisher_b),
        published: (a.published, b.published),
        messages_on_broker: channel.messages().await?.len(),
    })
}
