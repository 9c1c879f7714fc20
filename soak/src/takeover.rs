//! Takeover times of the partitioned mode: when the killer kills a consumer process, the
//! partition leases it held, and how long until every one of them has another owner.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sea_orm::{ConnectionTrait as _, DatabaseConnection, DbBackend, Statement};
use serde::Serialize;

use crate::plan::consumer_owner;

/// The consumers' partition lease table (the default inbox table's).
const LEASES: &str = "inbox_consumer_leases";

/// How long one takeover may take before it is reported as not seen.
const GIVE_UP: Duration = Duration::from_secs(60);

/// Takeover times measured during one soak.
#[derive(Debug, Clone, Default)]
pub struct Takeovers {
    db: Option<DatabaseConnection>,
    times: Arc<Mutex<Vec<Duration>>>,
    unseen: Arc<Mutex<u64>>,
}

/// The takeover times of a soak, in the report.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct TakeoverStats {
    /// Kills of a consumer that held partitions, whose partitions were all taken over.
    pub measured: u64,
    /// Kills whose partitions were not all taken over within 60 s.
    pub unseen: u64,
    /// Median time from the kill until another instance held every partition, seconds.
    pub median_seconds: f64,
    /// The longest such time, seconds.
    pub max_seconds: f64,
}

impl Takeovers {
    /// Measures on the consumers' database `db` (the partitioned mode); `None`: nothing
    /// is measured.
    pub fn new(db: Option<DatabaseConnection>) -> Self {
        Self {
            db,
            ..Self::default()
        }
    }

    /// The leases the consumer process `pid` holds (read just before it is killed).
    pub async fn held_by(&self, pid: u32) -> Vec<String> {
        let Some(db) = &self.db else {
            return Vec::new();
        };
        let rows = db
            .query_all_raw(Statement::from_sql_and_values(
                DbBackend::MySql,
                format!("SELECT name FROM {LEASES} WHERE owner = ?"),
                [consumer_owner(pid).into()],
            ))
            .await;
        match rows {
            Ok(rows) => rows
                .iter()
                .filter_map(|row| row.try_get::<String>("", "name").ok())
                .collect(),
            Err(error) => {
                tracing::warn!(%error, "cannot read the consumer leases");
                Vec::new()
            }
        }
    }

    /// Watches, in the background, until every lease of `leases` is held by an instance
    /// other than process `pid`'s (killed at `killed`), and records the time it took.
    pub fn watch(&self, pid: u32, leases: Vec<String>, killed: Instant) {
        let Some(db) = self.db.clone() else {
            return;
        };
        if leases.is_empty() {
            return;
        }
        let times = Arc::clone(&self.times);
        let unseen = Arc::clone(&self.unseen);
        let owner = consumer_owner(pid);
        tokio::spawn(async move {
            let marks = vec!["?"; leases.len()].join(", ");
            let sql = format!(
                "SELECT COUNT(*) AS left_over FROM {LEASES} WHERE name IN ({marks}) \
                 AND (owner IS NULL OR owner = ?)"
            );
            let mut values: Vec<sea_orm::Value> = leases.into_iter().map(Into::into).collect();
            values.push(owner.into());
            while killed.elapsed() < GIVE_UP {
                let row = db
                    .query_one_raw(Statement::from_sql_and_values(
                        DbBackend::MySql,
                        &sql,
                        values.clone(),
                    ))
                    .await;
                if let Ok(Some(row)) = row
                    && row.try_get::<i64>("", "left_over").is_ok_and(|n| n == 0)
                {
                    lock(&times).push(killed.elapsed());
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            *lock(&unseen) += 1;
        });
    }

    /// What was measured so far.
    pub fn stats(&self) -> TakeoverStats {
        let mut times = lock(&self.times).clone();
        times.sort();
        let seconds = |d: Option<&Duration>| d.map_or(0.0, Duration::as_secs_f64);
        TakeoverStats {
            measured: times.len() as u64,
            unseen: *lock(&self.unseen),
            median_seconds: seconds(times.get(times.len() / 2)),
            max_seconds: seconds(times.last()),
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
