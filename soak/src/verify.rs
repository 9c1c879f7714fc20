//! The verifier: waits (bounded) until the system is quiet — every outbox row published
//! and an effect for every committed order — then compares the orders committed on
//! PostgreSQL with the effects applied on MariaDB.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use sea_orm::{ConnectionTrait as _, DatabaseConnection, DbErr, Statement};
use serde::Serialize;

use crate::databases::count;
use crate::plan::RelayMethod;

/// Outbox rows not published: dead, or still pending (the polling relay marks rows).
const UNPUBLISHED: &str = "SELECT COUNT(*) FROM outbox WHERE status <> 'published'";
/// Events the log relay gave up on or holds back (it marks no row: every row stays
/// `pending`; what it did not publish is in its dead-letter table).
const LOG_UNPUBLISHED: &str = "SELECT COUNT(*) FROM outbox_log_dead_letters \
                               WHERE status IN ('dead', 'parked', 'requeued')";

/// The query that counts what `relay` left unpublished.
fn unpublished(relay: RelayMethod) -> &'static str {
    match relay {
        RelayMethod::Polling => UNPUBLISHED,
        RelayMethod::Log => LOG_UNPUBLISHED,
    }
}

/// What the verifier found. Every count but `orders` and `effects` must be 0.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Verdict {
    /// Orders committed (the producer's rows).
    pub orders: u64,
    /// Effects applied (rows of `soak_effects`, duplicates included).
    pub effects: u64,
    /// Effects applied more than once (each extra application counts).
    pub duplicates: u64,
    /// Committed orders without an effect.
    pub missing: u64,
    /// Effects of orders that were never committed (an invented event).
    pub phantoms: u64,
    /// Effects applied out of their aggregate's order: not the order after the previous
    /// one applied for the same customer.
    pub order_violations: u64,
    /// Outbox rows left unpublished (dead or still pending at the end).
    pub unpublished: u64,
    /// Consumer dead letters.
    pub dead_letters: u64,
}

impl Verdict {
    /// Whether every count that must be 0 is.
    pub fn passed(&self) -> bool {
        self.duplicates == 0
            && self.missing == 0
            && self.phantoms == 0
            && self.order_violations == 0
            && self.unpublished == 0
            && self.dead_letters == 0
    }
}

/// Waits until every outbox row is published and every committed order has an effect,
/// polling every 250 ms for at most `timeout`; how long it took, or `None` if it never did.
///
/// # Errors
/// The database's error.
pub async fn quiesce(
    producer: &DatabaseConnection,
    consumer: &DatabaseConnection,
    relay: RelayMethod,
    timeout: Duration,
) -> Result<Option<Duration>, DbErr> {
    let started = Instant::now();
    loop {
        let pending = count(producer, unpublished(relay)).await?;
        let orders = count(producer, "SELECT COUNT(*) FROM soak_orders").await?;
        let effects = count(
            consumer,
            "SELECT COUNT(DISTINCT message_id) FROM soak_effects",
        )
        .await?;
        if pending == 0 && effects >= orders {
            return Ok(Some(started.elapsed()));
        }
        if started.elapsed() >= timeout {
            tracing::warn!(pending, orders, effects, "not quiet in time");
            return Ok(None);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Compares what was committed with what was applied.
///
/// # Errors
/// The database's error.
pub async fn verify(
    producer: &DatabaseConnection,
    consumer: &DatabaseConnection,
    relay: RelayMethod,
    dead_letter_table: &str,
) -> Result<Verdict, DbErr> {
    let orders: BTreeSet<(String, i32)> =
        rows(producer, "SELECT customer_id, order_no FROM soak_orders")
            .await?
            .into_iter()
            .collect();
    let effects = rows(
        consumer,
        "SELECT customer_id, order_no FROM soak_effects ORDER BY id",
    )
    .await?;
    let unpublished = count(producer, unpublished(relay)).await?;
    let dead_letters = count(
        consumer,
        &format!("SELECT COUNT(*) FROM {dead_letter_table}"),
    )
    .await?;
    Ok(judge(&orders, &effects, unpublished, dead_letters))
}

/// The verdict on `effects` (in the order they were applied) against `orders`.
fn judge(
    orders: &BTreeSet<(String, i32)>,
    effects: &[(String, i32)],
    unpublished: i64,
    dead_letters: i64,
) -> Verdict {
    let mut applied: BTreeSet<(String, i32)> = BTreeSet::new();
    let mut duplicates = 0;
    let mut order_violations = 0;
    let mut last: BTreeMap<&str, i32> = BTreeMap::new();
    for effect in effects {
        if !applied.insert(effect.clone()) {
            duplicates += 1;
            continue;
        }
        let previous = last.get(effect.0.as_str()).copied().unwrap_or(-1);
        if effect.1 != previous + 1 {
            order_violations += 1;
        }
        last.insert(&effect.0, effect.1.max(previous));
    }
    Verdict {
        orders: orders.len() as u64,
        effects: effects.len() as u64,
        duplicates,
        missing: orders.difference(&applied).count() as u64,
        phantoms: applied.difference(orders).count() as u64,
        order_violations,
        unpublished: u64::try_from(unpublished).unwrap_or(0),
        dead_letters: u64::try_from(dead_letters).unwrap_or(0),
    }
}

async fn rows(db: &DatabaseConnection, sql: &str) -> Result<Vec<(String, i32)>, DbErr> {
    db.query_all_raw(Statement::from_string(db.get_database_backend(), sql))
        .await?
        .iter()
        .map(|row| {
            Ok((
                row.try_get("", "customer_id")?,
                row.try_get("", "order_no")?,
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn effect(customer: &str, n: i32) -> (String, i32) {
        (customer.to_owned(), n)
    }

    #[test]
    fn counts_duplicates_gaps_phantoms_and_reorders() {
        let orders: BTreeSet<_> = [
            effect("a", 0),
            effect("a", 1),
            effect("a", 2),
            effect("b", 0),
        ]
        .into_iter()
        .collect();
        let clean = judge(
            &orders,
            &[
                effect("a", 0),
                effect("b", 0),
                effect("a", 1),
                effect("a", 2),
            ],
            0,
            0,
        );
        assert!(clean.passed(), "{clean:?}");

        let bad = judge(
            &orders,
            // a/1 before a/0, a/0 twice, b/0 missing, c/0 never ordered.
            &[
                effect("a", 1),
                effect("a", 0),
                effect("a", 0),
                effect("a", 2),
                effect("c", 0),
            ],
            0,
            0,
        );
        assert_eq!(bad.duplicates, 1);
        assert_eq!(bad.missing, 1);
        assert_eq!(bad.phantoms, 1);
        assert_eq!(
            bad.order_violations, 2,
            "a/1 skips a/0, then a/0 comes late"
        );
        assert!(!bad.passed());
    }
}
