//! The status report of an outbox — pending, in backoff, held back, the outbox lag, given-up
//! rows, worker keys, live relays — and the gauges it sets. Read by
//! [`Operations::status`](crate::ops::Operations::status) and, every heartbeat, by a running
//! relay (for the gauges).

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use outbox_core::metric;
use outbox_core::policy::{DeadLetterPolicy, Ordering};
use sea_orm::{ConnectionTrait as _, DbErr};

use crate::config::Outbox;
use crate::record::log_slot::LogRelayStatus;
#[cfg(log_relay)]
use crate::record::log_slot::LogSlotStatus;
use crate::sql::{Members, Store};
use crate::transaction::Pool;

/// The relays' policy, which decides what the report counts as held back.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RelayPolicy {
    /// The relays' ordering.
    pub(crate) ordering: Ordering,
    /// The relays' dead-letter policy.
    pub(crate) dead_letters: DeadLetterPolicy,
}

/// The state of an outbox, as `outbox status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct StatusReport {
    /// The outbox table.
    pub outbox: String,
    /// Rows waiting to be published (in backoff included).
    pub pending: u64,
    /// Pending rows parked in backoff (not claimable before their `next_attempt_at`).
    pub in_backoff: u64,
    /// Pending rows that are due but held back behind an earlier row of their aggregate:
    /// one in backoff, or (under [`DeadLetterPolicy::Block`]) one that is dead or failed.
    /// The claim does not take them; they wait for a retry, or for an operator.
    ///
    /// [`DeadLetterPolicy::Block`]: outbox_core::policy::DeadLetterPolicy::Block
    pub held: u64,
    /// Age of the oldest claimable pending row — due, and not held back: the outbox lag.
    /// Rows in backoff and held-back rows are not counted, so a poisoned aggregate does not
    /// make it grow.
    #[serde(serialize_with = "serialize_age")]
    pub oldest_claimable_age: Option<Duration>,
    /// Age of the oldest held-back row.
    #[serde(serialize_with = "serialize_age")]
    pub oldest_held_age: Option<Duration>,
    /// Dead rows per event type.
    pub dead_by_event_type: BTreeMap<String, u64>,
    /// Failed rows (non-retryable jobs that failed, see [`crate::job`]) per event type.
    pub failed_by_event_type: BTreeMap<String, u64>,
    /// Pending rows per worker key (job-queue mode; rows without a worker key are not
    /// listed): the seed's per-key lag. A key whose oldest claimable row keeps ageing has no
    /// live relay.
    pub pending_by_worker_key: BTreeMap<String, WorkerKeyStatus>,
    /// Rows skipped by operators.
    pub skipped: u64,
    /// Live relay instances.
    pub live_relays: Vec<String>,
    /// How commits write their envelopes (`table`, `table+remove_after_insert`,
    /// `message`; see [`WriteMode`](crate::config::WriteMode)).
    pub write_mode: &'static str,
    /// The log relay's slots and dead letters, when a log relay has run on this outbox
    /// (PostgreSQL, feature `log-relay`). Under a log relay, table-mode rows stay `pending`
    /// until retention deletes them: its lag is the slots' `lag_bytes`, not the pending
    /// rows.
    pub log_relay: Option<LogRelayStatus>,
}

fn serialize_age<S: serde::Serializer>(age: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match age {
        Some(age) => s.serialize_f64(age.as_secs_f64()),
        None => s.serialize_none(),
    }
}

impl StatusReport {
    /// Dead rows in total.
    pub fn dead(&self) -> u64 {
        self.dead_by_event_type.values().sum()
    }

    /// Failed rows in total.
    pub fn failed(&self) -> u64 {
        self.failed_by_event_type.values().sum()
    }
}

/// The pending rows of one worker key ([`StatusReport::pending_by_worker_key`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct WorkerKeyStatus {
    /// Pending rows (in backoff included).
    pub pending: u64,
    /// Age of the oldest claimable pending row (backoff excluded).
    #[serde(serialize_with = "serialize_age")]
    pub oldest_claimable_age: Option<Duration>,
}

/// Pending rows, the oldest claimable row's age, dead and failed rows by event type,
/// skipped rows, pending rows by worker key and live relays; also sets the
/// [`metric::PENDING_ROWS`], [`metric::OLDEST_CLAIMABLE_AGE`], [`metric::DEAD_ROWS`] and
/// [`metric::FAILED_ROWS`] gauges. Reads only pending, dead, failed and skipped rows
/// (indexed), never the published ones.
///
/// # Errors
/// The database's error.
pub(crate) async fn read(
    db: &Pool,
    outbox: &Outbox,
    store: &Store,
    policy: RelayPolicy,
) -> Result<StatusReport, DbErr> {
    let now = outbox.clock().now();
    let summary = store
        .pending_summary(
            db,
            now,
            policy.ordering == Ordering::PerAggregate,
            policy.dead_letters,
        )
        .await?;
    let given_up = store.given_up_counts(db).await?;
    let pending_by_worker_key = pending_by_worker_key(db, store, now).await?;
    let live_relays = store.live_instances(db, now, Members::All).await?;
    let age = |at: DateTime<Utc>| (now - at).to_std().unwrap_or(Duration::ZERO);
    let oldest_claimable_age = summary.oldest.map(age);
    let labels = outbox.metric_labels().to_vec();
    let report = StatusReport {
        outbox: outbox.outbox_table().to_string(),
        pending: u64::try_from(summary.pending).unwrap_or(0),
        in_backoff: u64::try_from(summary.in_backoff).unwrap_or(0),
        held: u64::try_from(summary.held).unwrap_or(0),
        oldest_claimable_age,
        oldest_held_age: summary.oldest_held.map(age),
        dead_by_event_type: given_up.dead,
        failed_by_event_type: given_up.failed,
        pending_by_worker_key,
        skipped: given_up.skipped,
        live_relays,
        write_mode: outbox.write_mode().as_str(),
        log_relay: log_relay(db, store).await?,
    };
    let mut mode = labels.clone();
    mode.push(metrics::Label::new("mode", report.write_mode));
    metrics::gauge!(metric::WRITE_MODE, mode).set(1.0);
    metrics::gauge!(metric::PENDING_ROWS, labels.clone()).set(report.pending as f64);
    metrics::gauge!(metric::OLDEST_CLAIMABLE_AGE, labels.clone())
        .set(oldest_claimable_age.map_or(0.0, |age| age.as_secs_f64()));
    metrics::gauge!(metric::HELD_ROWS, labels.clone()).set(report.held as f64);
    metrics::gauge!(metric::BACKOFF_ROWS, labels.clone()).set(report.in_backoff as f64);
    metrics::gauge!(metric::DEAD_ROWS, labels.clone()).set(report.dead() as f64);
    metrics::gauge!(metric::FAILED_ROWS, labels.clone()).set(report.failed() as f64);
    Ok(report)
}

/// The log relay's slots and dead-letter counts, when its tables exist and hold a slot.
#[cfg(log_relay)]
async fn log_relay(db: &Pool, store: &Store) -> Result<Option<LogRelayStatus>, DbErr> {
    if db.get_database_backend() == sea_orm::DbBackend::Sqlite
        || !store.log_tables_exist(db).await?
    {
        return Ok(None);
    }
    let slots = log_slots(db, store).await?;
    if slots.is_empty() {
        return Ok(None);
    }
    let mut status = LogRelayStatus {
        slots,
        ..LogRelayStatus::default()
    };
    for (state, count) in store.count_log_dead_letters(db).await? {
        let count = u64::try_from(count).unwrap_or(0);
        match state.as_str() {
            "dead" => status.dead = count,
            "parked" => status.parked = count,
            "requeued" => status.requeued = count,
            _ => {}
        }
    }
    Ok(Some(status))
}

/// Without the log relay: none.
#[cfg(not(log_relay))]
async fn log_relay(_: &Pool, _: &Store) -> Result<Option<LogRelayStatus>, DbErr> {
    Ok(None)
}

/// The log relay slots of the outbox, with the server's view of each (PostgreSQL's
/// replication slot; MariaDB keeps none for a replica: a slot streams while its lease is
/// held).
#[cfg(log_relay)]
pub(crate) async fn log_slots(db: &Pool, store: &Store) -> Result<Vec<LogSlotStatus>, DbErr> {
    let owners = store.log_slot_owners(db).await?;
    let binlog = db.get_database_backend() == sea_orm::DbBackend::MySql;
    let server_position = if binlog {
        binlog_position(db, store).await?
    } else {
        None
    };
    let mut slots = Vec::with_capacity(owners.len());
    for owner in owners {
        let server = if binlog {
            None
        } else {
            store.slot(db, &owner.slot).await?
        };
        let lag_transactions = transactions_behind(
            owner.acknowledged_lsn.as_deref(),
            server_position.as_deref(),
        );
        slots.push(LogSlotStatus {
            streaming: if binlog {
                owner.owner.is_some()
            } else {
                server.as_ref().is_some_and(|slot| slot.active)
            },
            active_relay: owner.owner,
            backfilled: owner.backfilled,
            acknowledged_lsn: owner.acknowledged_lsn,
            lag_bytes: server.as_ref().and_then(|slot| slot.lag_bytes),
            lag_transactions,
            wal_status: server.and_then(|slot| slot.wal_status),
            slot: owner.slot,
        });
    }
    Ok(slots)
}

/// MariaDB's `@@gtid_binlog_pos` (`None` without the feature `log-relay-mariadb`).
#[cfg(log_relay)]
async fn binlog_position(db: &Pool, store: &Store) -> Result<Option<String>, DbErr> {
    #[cfg(feature = "log-relay-mariadb")]
    return store.binlog_position(db).await.map(Some);
    #[cfg(not(feature = "log-relay-mariadb"))]
    {
        let _ = (db, store);
        Ok(None)
    }
}

/// How many transactions `server` holds after the stored position `stored` (MariaDB).
#[cfg(log_relay)]
fn transactions_behind(stored: Option<&str>, server: Option<&str>) -> Option<u64> {
    #[cfg(feature = "log-relay-mariadb")]
    {
        use crate::gtid::GtidPosition;
        let stored = GtidPosition::parse(stored?).ok()?;
        let server = GtidPosition::parse(server?).ok()?;
        Some(stored.transactions_behind(&server))
    }
    #[cfg(not(feature = "log-relay-mariadb"))]
    {
        let _ = (stored, server);
        None
    }
}

/// Pending keyed rows per worker key, with the age of each key's oldest claimable row.
async fn pending_by_worker_key(
    db: &Pool,
    store: &Store,
    now: DateTime<Utc>,
) -> Result<BTreeMap<String, WorkerKeyStatus>, DbErr> {
    let keys = store.pending_by_worker_key(db, now).await?;
    Ok(keys
        .into_iter()
        .map(|(key, pending, oldest)| {
            let status = WorkerKeyStatus {
                pending,
                oldest_claimable_age: oldest
                    .map(|at| (now - at).to_std().unwrap_or(Duration::ZERO)),
            };
            (key, status)
        })
        .collect())
}
