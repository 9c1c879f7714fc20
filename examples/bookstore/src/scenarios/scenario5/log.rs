//! Scenario 5 with the log relay (`--relay log`, PostgreSQL with `wal_level = logical`).
//!
//! The log relay streams before the checkouts start. The same gate holds Ada's `COMMIT`:
//! her row has sequence 1, Alan's 2, and Alan commits first. The article's watermark relay
//! still loses Ada's event (it is shown beside, as in the polling scenario). The log relay
//! reads transactions from the log at their commit: it publishes Alan's event while Ada's
//! transaction is still open, and Ada's once it commits — **commit order**, not sequence
//! order — and loses nothing, without any status on the row.

use std::collections::BTreeMap;

use outbox_seaorm::Outbox;
use outbox_seaorm::record::OutboxRecord;
use outbox_seaorm::schema;
use uuid::Uuid;

use super::{
    AdaAtTheGate, SeenRow, TITLE, WatermarkRelay, read, sequences_line, watermark_deviations,
    watermark_lines,
};
use crate::broker::Outage;
use crate::env::Env;
use crate::error::DemoError;
use crate::ordering::{self, PlaceOrder};
use crate::scenarios::log_relay::{self, LogStage, WAIT};
use crate::scenarios::{Report, expect, outbox_error};

/// What the scenario proves with the log relay.
pub const CLAIM: &str = "a watermark loses the event committed late; the log relay publishes \
                         in commit order and loses nothing";

/// What scenario 5 measured with the log relay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scenario5Log {
    /// The contract's event type (for the lines).
    pub event_type: String,
    /// Ada's outbox sequence number.
    pub ada_sequence: i64,
    /// Alan's outbox sequence number.
    pub alan_sequence: i64,
    /// The rows visible while Ada's transaction had not committed.
    pub visible_before_ada_commits: Vec<SeenRow>,
    /// What the watermark relay published on its first pass.
    pub watermark_published: Vec<SeenRow>,
    /// The watermark after its first pass.
    pub watermark: i64,
    /// Rows the watermark relay found after Ada's commit.
    pub watermark_rows_after_ada_commits: usize,
    /// What the log relay published while Ada's transaction was open.
    pub log_published_before_ada_commits: Vec<SeenRow>,
    /// What the log relay published, in the broker's order.
    pub log_order: Vec<SeenRow>,
    /// The relay's report: events published.
    pub relay_published: u64,
}

/// `Alan (seq 2), Ada (seq 1)`.
fn order_text(rows: &[SeenRow]) -> String {
    rows.iter()
        .map(|(seq, who)| format!("{who} (seq {seq})"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Report for Scenario5Log {
    fn number(&self) -> u8 {
        5
    }

    fn title(&self) -> &'static str {
        TITLE
    }

    fn claim(&self) -> &'static str {
        CLAIM
    }

    fn lines(&self) -> Vec<String> {
        let mut lines = vec![sequences_line(self.ada_sequence, self.alan_sequence)];
        lines.extend(watermark_lines(
            &self.event_type,
            &self.watermark_published,
            self.watermark,
            self.watermark_rows_after_ada_commits,
        ));
        lines.push(format!(
            "log relay while Ada's transaction is open: published {}",
            order_text(&self.log_published_before_ada_commits)
        ));
        lines.push(format!(
            "log order: {} (commit order, not sequence order; nothing lost)",
            order_text(&self.log_order)
        ));
        lines
    }

    fn deviations(&self) -> Vec<String> {
        let mut deviations = watermark_deviations(
            (self.ada_sequence, self.alan_sequence),
            &self.visible_before_ada_commits,
            &self.watermark_published,
            self.watermark_rows_after_ada_commits,
        );
        expect(
            &mut deviations,
            "log relay published before Ada commits",
            &self.log_published_before_ada_commits,
            &vec![(2, "Alan".to_owned())],
        );
        expect(
            &mut deviations,
            "log order",
            &self.log_order,
            &vec![(2, "Alan".to_owned()), (1, "Ada".to_owned())],
        );
        expect(
            &mut deviations,
            "log relay published",
            &self.relay_published,
            &2,
        );
        deviations
    }
}

/// Runs scenario 5 on `env` with the log relay.
///
/// # Errors
/// [`DemoError::Skipped`] when the log relay cannot run there (its error says what is
/// missing); else [`DemoError`] when something cannot be set up or does not happen in time.
pub async fn run(env: &Env) -> Result<Scenario5Log, DemoError> {
    log_relay::staged(env, 5, Outage::None, play).await
}

async fn play(stage: &LogStage<'_>) -> Result<Scenario5Log, DemoError> {
    let db = stage.db;
    let outbox = Outbox::default();
    schema::install(db, &outbox).await?;
    ordering::create_tables(db).await?;
    // Streaming first: creating a slot waits for the transactions open at that moment.
    let (publisher, relay) = stage.streaming_relay(&outbox, "relay-1").await?;

    let ada_at_the_gate = AdaAtTheGate::start(db, &outbox).await?;
    let alan_order = ordering::place_order(
        db,
        &outbox,
        PlaceOrder::dune(Uuid::now_v7(), Uuid::now_v7(), 1),
    )
    .await
    .map_err(outbox_error)?;
    let visible = read(db, &outbox, "true").await?;
    let mut watermark = WatermarkRelay::default();
    let first_pass = watermark.poll(db, &outbox).await?;
    let mark = watermark.last_seen;
    // The log relay publishes Alan's event at his commit, Ada's still open.
    if !publisher
        .wait_until(WAIT, |confirmed, _| confirmed >= 1)
        .await
    {
        return Err(DemoError::Timeout(format!(
            "the log relay did not publish Alan's event within {WAIT:?}"
        )));
    }
    let before_ada_commits = publisher.confirmed();

    let ada_order = ada_at_the_gate.commit().await?;
    let missed = watermark.poll(db, &outbox).await?;
    if !publisher
        .wait_until(WAIT, |confirmed, _| confirmed >= 2)
        .await
    {
        return Err(DemoError::Timeout(format!(
            "the log relay did not publish Ada's event within {WAIT:?}"
        )));
    }
    let report = relay.stop().await?;

    let names = BTreeMap::from([
        (alan_order.id.to_string(), "Alan".to_owned()),
        (ada_order.id.to_string(), "Ada".to_owned()),
    ]);
    let name = |aggregate_id: &str| {
        names
            .get(aggregate_id)
            .cloned()
            .unwrap_or_else(|| aggregate_id.to_owned())
    };
    let named = |rows: Vec<(i64, String)>| -> Vec<SeenRow> {
        rows.into_iter().map(|(seq, id)| (seq, name(&id))).collect()
    };
    // Each message id's row: (seq, customer).
    let rows: BTreeMap<Uuid, SeenRow> = OutboxRecord::list(db, &outbox, 100)
        .await?
        .into_iter()
        .map(|row| {
            let who = name(&row.envelope.aggregate_id);
            (row.envelope.message_id, (row.seq, who))
        })
        .collect();
    let seen = |id: Uuid| {
        rows.get(&id)
            .cloned()
            .unwrap_or_else(|| (0, format!("unknown message {id}")))
    };
    let sequence_of = |who: &str| {
        rows.values()
            .find(|(_, name)| name == who)
            .map_or(0, |(seq, _)| *seq)
    };
    let mut log_order = Vec::new();
    for message in stage.channel.messages().await? {
        log_order.push(seen(message.envelope()?.message_id));
    }
    Ok(Scenario5Log {
        event_type:
            <bookstore_contracts::OrderPlacedV1 as outbox_core::IntegrationEvent>::EVENT_TYPE
                .to_owned(),
        ada_sequence: sequence_of("Ada"),
        alan_sequence: sequence_of("Alan"),
        visible_before_ada_commits: named(visible),
        watermark_published: named(first_pass),
        watermark: mark,
        watermark_rows_after_ada_commits: missed.len(),
        log_published_before_ada_commits: before_ada_commits.into_iter().map(seen).collect(),
        log_order,
        relay_published: report.published,
    })
}
