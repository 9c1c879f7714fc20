//! Scenario 5: a high-water mark versus a status on the row (PostgreSQL; MariaDB with
//! `--relay log`).
//!
//! Ada's and Alan's checkouts run concurrently. Ada's transaction gets outbox sequence 1
//! but commits last (the scenario holds her `COMMIT` at a gate: a deferred trigger waiting
//! for an advisory lock); Alan's gets 2 and commits at once. A watermark relay — written
//! here, as the article's "optimisation", **not** the framework's — publishes #2 and moves
//! its mark to 2; when Ada's row becomes visible it asks for `seq > 2` and never sees it:
//! her event is lost without an error. The framework's relay keeps its progress on the row
//! (`status = 'pending'`) and publishes Ada's event too.
//!
//! With the polling relay, PostgreSQL only: it needs MVCC visibility with sequence values
//! handed out at insert time, and the deferred trigger used as the gate.
//!
//! With `--relay log` the same gate holds Ada's commit while the log relay streams
//! ([`log`]): it publishes Alan's event at his commit and Ada's at hers — commit order —
//! and loses nothing. On MariaDB (its binary log) the gate is a trigger on Ada's outbox row
//! waiting for a row lock.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use outbox_seaorm::Outbox;
use outbox_seaorm::schema;
use sea_orm::{
    ConnectionTrait, DatabaseConnection, DatabaseTransaction, DbBackend, Statement,
    TransactionTrait as _,
};
use tokio::task::JoinHandle;
use uuid::Uuid;

pub mod log;

use super::{Report, expect, outbox_error, relay};
use crate::broker::{Channel, Outage};
use crate::env::Env;
use crate::error::DemoError;
use crate::ordering::{self, Order, PlaceOrder, PlaceOrderError};

/// The article's title.
pub const TITLE: &str = "High-water mark vs processed flag";
/// What the scenario proves.
pub const CLAIM: &str =
    "a watermark loses the event committed late; progress kept on the row does not";

/// One outbox row as the relays see it: `(seq, customer)`.
pub type SeenRow = (i64, String);

/// What scenario 5 measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scenario5 {
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
    /// Pending rows (the flag relay's query) after Ada's commit.
    pub flag_relay_finds: Vec<SeenRow>,
    /// The customers whose events the framework's relay published, in order.
    pub relay_published: Vec<String>,
}

impl Report for Scenario5 {
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
        lines.extend(
            self.flag_relay_finds
                .iter()
                .map(|(seq, who)| format!("flag relay finds #{seq} {} ({who})", self.event_type)),
        );
        lines.push(format!(
            "the outbox relay (status on the row) published: {}",
            self.relay_published.join(", ")
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
            "flag relay finds",
            &self.flag_relay_finds,
            &vec![(1, "Ada".to_owned())],
        );
        expect(
            &mut deviations,
            "outbox relay published",
            &self.relay_published,
            &vec!["Alan".to_owned(), "Ada".to_owned()],
        );
        deviations
    }
}

/// The first line: who got which sequence number.
fn sequences_line(ada: i64, alan: i64) -> String {
    format!("Ada got sequence {ada} (not committed), Alan got {alan} (committed)")
}

/// The watermark relay's lines: what it published, and what it asked for after Ada's
/// commit.
fn watermark_lines(
    event_type: &str,
    published: &[SeenRow],
    watermark: i64,
    rows_after_ada_commits: usize,
) -> Vec<String> {
    let mut lines: Vec<String> = published
        .iter()
        .map(|(seq, who)| format!("watermark relay publishes #{seq} {event_type} ({who})"))
        .collect();
    lines.push(format!(
        "Ada's transaction commits; watermark relay asks for sequence > {watermark}: \
         {rows_after_ada_commits} rows"
    ));
    lines
}

/// The article's facts about the sequences and the watermark relay.
fn watermark_deviations(
    (ada, alan): (i64, i64),
    visible_before_ada_commits: &[SeenRow],
    watermark_published: &[SeenRow],
    watermark_rows_after_ada_commits: usize,
) -> Vec<String> {
    let mut deviations = Vec::new();
    let alan_only = [(2, "Alan".to_owned())];
    expect(&mut deviations, "Ada's sequence", &ada, &1);
    expect(&mut deviations, "Alan's sequence", &alan, &2);
    expect(
        &mut deviations,
        "rows visible before Ada commits",
        &visible_before_ada_commits,
        &alan_only.as_slice(),
    );
    expect(
        &mut deviations,
        "watermark relay published",
        &watermark_published,
        &alan_only.as_slice(),
    );
    expect(
        &mut deviations,
        "watermark rows after Ada commits",
        &watermark_rows_after_ada_commits,
        &0,
    );
    deviations
}

/// The article's watermark relay: remembers the highest sequence it published and asks
/// for `seq > mark`. **Loses rows** whose transaction commits after a higher sequence was
/// published; shown here to be refuted, never use it. It only records what it would
/// publish: the point is what it reads.
#[derive(Debug, Default)]
pub struct WatermarkRelay {
    /// The highest sequence published so far.
    pub last_seen: i64,
    /// What it published, in order.
    pub published: Vec<(i64, String)>,
}

impl WatermarkRelay {
    /// One pass: every row with `seq > last_seen`, "published", mark moved. Returns the
    /// rows found, as `(seq, aggregate id)`.
    ///
    /// # Errors
    /// The database's error.
    pub async fn poll(
        &mut self,
        db: &DatabaseConnection,
        outbox: &Outbox,
    ) -> Result<Vec<(i64, String)>, DemoError> {
        let rows = read(db, outbox, &format!("seq > {}", self.last_seen)).await?;
        for (seq, aggregate_id) in &rows {
            self.published.push((*seq, aggregate_id.clone()));
            self.last_seen = *seq;
        }
        Ok(rows)
    }
}

/// Committed outbox rows matching `condition`, as `(seq, aggregate_id)` in `seq` order.
async fn read(
    db: &DatabaseConnection,
    outbox: &Outbox,
    condition: &str,
) -> Result<Vec<(i64, String)>, DemoError> {
    let rows = db
        .query_all_raw(Statement::from_string(
            db.get_database_backend(),
            format!(
                "SELECT seq, aggregate_id FROM {} WHERE {condition} ORDER BY seq",
                outbox.outbox_table()
            ),
        ))
        .await?;
    let mut seen = Vec::new();
    for row in rows {
        seen.push((row.try_get("", "seq")?, row.try_get("", "aggregate_id")?));
    }
    Ok(seen)
}

/// Runs scenario 5 on `env`.
///
/// # Errors
/// [`DemoError::Skipped`] unless the database is PostgreSQL; else [`DemoError`] when
/// something cannot be set up.
pub async fn run(env: &Env) -> Result<Scenario5, DemoError> {
    if env.database.backend() != DbBackend::Postgres {
        return Err(DemoError::Skipped {
            reason: "needs PostgreSQL (two concurrent transactions whose commit order differs \
                     from their sequence order, held at a deferred-trigger gate); run with \
                     --database postgres://USER@HOST:5432/postgres"
                .to_owned(),
        });
    }
    super::staged(env, 5, Outage::None, play).await
}

async fn play(db: &DatabaseConnection, channel: &Channel) -> Result<Scenario5, DemoError> {
    let outbox = Outbox::default();
    schema::install(db, &outbox).await?;
    ordering::create_tables(db).await?;
    let ada_at_the_gate = AdaAtTheGate::start(db, &outbox).await?;
    let alan_order = ordering::place_order(
        db,
        &outbox,
        PlaceOrder::dune(Uuid::now_v7(), Uuid::now_v7(), 1),
    )
    .await
    .map_err(outbox_error)?;
    let mut names: BTreeMap<String, String> =
        BTreeMap::from([(alan_order.id.to_string(), "Alan".to_owned())]);
    let visible = read(db, &outbox, "true").await?;

    // Both relays run now: the article's watermark relay, and the framework's.
    let mut watermark = WatermarkRelay::default();
    let first_pass = watermark.poll(db, &outbox).await?;
    let mark = watermark.last_seen;
    let mut relay = relay(db, &outbox, channel.publisher().await?, "relay-1")
        .build()
        .map_err(outbox_error)?;
    relay.drain().await?;

    let ada_order = ada_at_the_gate.commit().await?;
    names.insert(ada_order.id.to_string(), "Ada".to_owned());
    let name = |aggregate_id: &str| {
        names
            .get(aggregate_id)
            .cloned()
            .unwrap_or_else(|| aggregate_id.to_owned())
    };
    let named = |rows: Vec<(i64, String)>| -> Vec<SeenRow> {
        rows.into_iter().map(|(seq, id)| (seq, name(&id))).collect()
    };

    let missed = watermark.poll(db, &outbox).await?;
    let flag = read(db, &outbox, "status = 'pending'").await?;
    relay.drain().await?;

    let all = named(read(db, &outbox, "true").await?);
    let sequence_of = |who: &str| {
        all.iter()
            .find(|(_, name)| name == who)
            .map_or(0, |(seq, _)| *seq)
    };
    let mut relay_published = Vec::new();
    for message in channel.messages().await? {
        relay_published.push(name(&message.envelope()?.aggregate_id));
    }
    Ok(Scenario5 {
        event_type:
            <bookstore_contracts::OrderPlacedV1 as outbox_core::IntegrationEvent>::EVENT_TYPE
                .to_owned(),
        ada_sequence: sequence_of("Ada"),
        alan_sequence: sequence_of("Alan"),
        visible_before_ada_commits: named(visible),
        watermark_published: named(first_pass),
        watermark: mark,
        watermark_rows_after_ada_commits: missed.len(),
        flag_relay_finds: named(flag),
        relay_published,
    })
}

/// Ada's checkout, held by the gate after her outbox row got its sequence number: on
/// PostgreSQL a deferred trigger on her order waits at her `COMMIT` for an advisory lock
/// the scenario holds; on MariaDB (no deferred triggers) a trigger on her outbox row waits
/// for a row lock the scenario holds.
pub(crate) struct AdaAtTheGate {
    gate: DatabaseTransaction,
    checkout: JoinHandle<Result<Order, PlaceOrderError>>,
}

impl AdaAtTheGate {
    /// Installs the gate, closes it, starts Ada's checkout and waits until it waits at the
    /// gate.
    pub(crate) async fn start(db: &DatabaseConnection, outbox: &Outbox) -> Result<Self, DemoError> {
        let ada = Uuid::now_v7();
        let backend = db.get_database_backend();
        let gate = if backend == DbBackend::MySql {
            // After her outbox row is inserted (its `seq` taken), the trigger waits for the
            // gate's row, locked by the scenario until it opens the gate.
            let table = outbox.outbox_table();
            for statement in [
                "CREATE TABLE ada_gate (id INT PRIMARY KEY)".to_owned(),
                "INSERT INTO ada_gate VALUES (1)".to_owned(),
                format!(
                    "CREATE TRIGGER ada_gate AFTER INSERT ON {table} FOR EACH ROW \
                     BEGIN IF NEW.payload LIKE '%{ada}%' THEN \
                     SELECT id INTO @ada_gate FROM ada_gate WHERE id = 1 FOR UPDATE; \
                     END IF; END"
                ),
            ] {
                db.execute_unprepared(&statement).await?;
            }
            let gate = db.begin().await?;
            gate.execute_unprepared("SELECT id FROM ada_gate WHERE id = 1 FOR UPDATE")
                .await?;
            gate
        } else {
            let key = i64::from(rand_key());
            db.execute_unprepared(&format!(
                "CREATE FUNCTION ada_gate() RETURNS trigger LANGUAGE plpgsql AS $$ \
                 BEGIN PERFORM pg_advisory_xact_lock_shared({key}); RETURN NULL; END $$; \
                 CREATE CONSTRAINT TRIGGER ada_gate AFTER INSERT ON orders \
                 DEFERRABLE INITIALLY DEFERRED FOR EACH ROW \
                 WHEN (NEW.customer_id = '{ada}') EXECUTE FUNCTION ada_gate()"
            ))
            .await?;
            let gate = db.begin().await?;
            gate.execute_unprepared(&format!("SELECT pg_advisory_xact_lock({key})"))
                .await?;
            gate
        };
        let waiting_at_the_gate = if backend == DbBackend::MySql {
            // The trigger's locking read, running (waiting) on Ada's connection.
            "SELECT count(*) AS waiting FROM information_schema.processlist \
             WHERE db = DATABASE() AND info LIKE 'SELECT id INTO @ada_gate%'"
        } else {
            "SELECT count(*) AS waiting FROM pg_locks WHERE locktype = 'advisory' \
             AND NOT granted AND database = \
             (SELECT oid FROM pg_database WHERE datname = current_database())"
        };

        let checkout = tokio::spawn({
            let (db, outbox) = (db.clone(), outbox.clone());
            async move {
                ordering::place_order(&db, &outbox, PlaceOrder::dune(Uuid::now_v7(), ada, 1)).await
            }
        });
        let started = Instant::now();
        loop {
            let waiting = db
                .query_one_raw(Statement::from_string(backend, waiting_at_the_gate))
                .await?
                .map(|row| row.try_get::<i64>("", "waiting"))
                .transpose()?
                .unwrap_or(0);
            if waiting > 0 {
                return Ok(Self { gate, checkout });
            }
            if checkout.is_finished() {
                let outcome = match checkout.await {
                    Ok(Ok(_)) => "it committed without waiting".to_owned(),
                    Ok(Err(error)) => error.to_string(),
                    Err(error) => error.to_string(),
                };
                return Err(DemoError::Outbox(format!(
                    "Ada's checkout passed the gate: {outcome}"
                )));
            }
            if started.elapsed() > Duration::from_secs(20) {
                checkout.abort();
                return Err(DemoError::Timeout(
                    "Ada's checkout never reached COMMIT".to_owned(),
                ));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Opens the gate: Ada's transaction commits; her order.
    pub(crate) async fn commit(self) -> Result<Order, DemoError> {
        self.gate.commit().await?;
        self.checkout
            .await
            .map_err(|error| DemoError::Outbox(error.to_string()))?
            .map_err(outbox_error)
    }
}

/// A lock key of this run (advisory locks are server-wide; concurrent runs must not share
/// one).
fn rand_key() -> u32 {
    // The last bytes of a UUIDv7 are random.
    let bytes = Uuid::now_v7().into_bytes();
    u32::from_le_bytes([bytes[12], bytes[13], bytes[14], bytes[15]])
}
