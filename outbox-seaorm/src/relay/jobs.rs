//! The relay's side of job-queue mode ([`crate::job`]): worker-key leases and claims, and
//! the alert hook of `failed` rows.
//!
//! A keyed relay (one with [`RelayConfig::worker_keys`](super::RelayConfig)) competes for
//! the lease `worker/<key>` of each of its keys whenever it holds leases at all (with
//! [`Ordering::PerAggregate`](outbox_core::policy::Ordering), and always on SQLite). Unlike
//! partition leases these are not spread by rendezvous hashing: a keyed relay takes every
//! key lease that is free or expired and keeps it while it heartbeats, so a second relay
//! with the same key is a standby that takes over within a lease TTL of the first one
//! stopping. A relay then claims the rows of the keys it holds, in the same batch
//! transaction that share-locks those leases.
//!
//! Keyed relays register their keys in the instance table (`worker_keys`), so that the
//! relays without worker keys spread partitions among themselves only.
//!
//! A worker key with a concurrency limit
//! ([`OutboxBuilder::worker_key_limit`](crate::OutboxBuilder::worker_key_limit)) is claimed
//! on its own: the batch's transaction first locks free slots of the key in
//! `<outbox>_worker_slots` (`FOR UPDATE SKIP LOCKED`), then claims at most that many of its
//! rows; the slots stay locked while the batch holds the rows, so every relay's batches
//! together hold at most the limit. With priorities ([`Job::priority`](crate::job::Job))
//! every key is claimed on its own, by `(priority, seq)`; otherwise the unlimited keys
//! follow in one claim. Each claim gets a fair share of the batch.

use std::collections::BTreeSet;

use outbox_core::publish::Publisher;

use sea_orm::{ConnectionTrait, DbErr};

use super::core::Core;
use super::decide::Mark;
use crate::job::{FailedJob, raise_alert};
use crate::lease::{lease_worker_key, worker_lease};
use crate::sql::{Claim, ClaimedRow};

/// The lease of each worker key.
pub(super) fn worker_leases(keys: &BTreeSet<String>) -> Vec<String> {
    keys.iter().map(|key| worker_lease(key)).collect()
}

/// The worker keys of the worker leases among `owned`.
pub(super) fn owned_worker_keys(owned: &[String]) -> Vec<String> {
    owned
        .iter()
        .filter_map(|name| lease_worker_key(name))
        .map(str::to_owned)
        .collect()
}

impl<P: Publisher + 'static> Core<P> {
    /// Whether this relay claims only rows of its worker keys.
    pub(super) fn keyed(&self) -> bool {
        self.config.worker_keys.is_some()
    }

    /// Its worker keys, comma-separated, for the instance table (`None`: every row).
    pub(super) fn worker_keys_label(&self) -> Option<String> {
        self.config
            .worker_keys
            .as_ref()
            .map(|keys| keys.iter().cloned().collect::<Vec<_>>().join(","))
    }

    /// The worker keys to claim in a batch, from the leases held for it: `None` for a relay
    /// without worker keys; its keys whose lease it holds when leased; all of its keys
    /// otherwise (unordered on PostgreSQL / MariaDB: `SKIP LOCKED` shares the rows).
    pub(super) fn claimable_keys(&self, owned: &[String]) -> Option<Vec<String>> {
        let keys = self.config.worker_keys.as_ref()?;
        Some(if self.leased() {
            owned_worker_keys(owned)
        } else {
            keys.iter().cloned().collect()
        })
    }

    /// Whether `claim` is taken key by key ([`claim_by_key`](Self::claim_by_key)): one of
    /// its worker keys has a concurrency limit, or it orders several keys by priority (one
    /// statement over several keys by `(priority, seq)` cannot walk an index: PostgreSQL
    /// sorted 200 000 pending rows for it, 278 ms, against 0.9 ms per key).
    pub(super) fn by_key(&self, claim: Claim<'_>) -> bool {
        claim.worker_keys.is_some_and(|keys| {
            (keys.len() > 1 && self.store.by_priority(claim))
                || keys
                    .iter()
                    .any(|key| self.outbox.worker_key_limit(key).is_some())
        })
    }

    /// The claim of a batch taken key by key (see the module documentation): each limited
    /// key alone, up to the slots it takes on `conn` (the batch's transaction); with
    /// priorities every key alone, each by `(priority, seq)` through its index; without,
    /// the unlimited keys together. Each group gets a fair share of what the batch has left
    /// (a group with fewer due rows leaves the rest to the next ones); rows in group order,
    /// each group's in claim order.
    pub(super) async fn claim_by_key<C: ConnectionTrait>(
        &self,
        conn: &C,
        claim: Claim<'_>,
    ) -> Result<Vec<ClaimedRow>, DbErr> {
        let keys = claim.worker_keys.unwrap_or_default();
        let apart = self.store.by_priority(claim);
        let mut groups: Vec<(Vec<String>, Option<u32>)> = Vec::new();
        let mut together = Vec::new();
        for key in keys {
            let limit = self.outbox.worker_key_limit(key);
            if limit.is_some() || apart {
                groups.push((vec![key.clone()], limit));
            } else {
                together.push(key.clone());
            }
        }
        if !together.is_empty() {
            groups.push((together, None));
        }
        if groups.iter().any(|(_, limit)| limit.is_some()) {
            self.worker_slots
                .get_or_try_init(|| self.store.ensure_worker_slots(&self.db))
                .await?;
        }
        let mut rows = Vec::new();
        let count = groups.len();
        for (index, (keys, limit)) in groups.iter().enumerate() {
            let left = claim.limit.saturating_sub(rows.len());
            let share = left.div_ceil(count - index);
            let want = match (limit, keys.first()) {
                (Some(limit), Some(key)) => {
                    self.store
                        .take_worker_slots(conn, key, *limit, share)
                        .await?
                }
                _ => share,
            };
            if want == 0 {
                continue;
            }
            let group = Claim {
                worker_keys: Some(keys),
                limit: want,
                past: None,
                ..claim
            };
            rows.extend(self.store.claim(conn, group).await?);
        }
        Ok(rows)
    }

    /// Calls the alert hook once for every row of the batch marked `failed`, after the marks
    /// were committed; logs when no hook is configured.
    pub(super) async fn raise_alerts(&self, rows: &[ClaimedRow], marks: &[Mark]) {
        for (row, mark) in rows.iter().zip(marks) {
            let Mark::Failed { attempts, error } = mark else {
                continue;
            };
            let Ok(envelope) = &row.envelope else {
                continue;
            };
            let Some(hook) = &self.alert_hook else {
                tracing::warn!(
                    message_id = %envelope.message_id,
                    seq = row.seq,
                    "a non-retryable row failed and the relay has no alert hook"
                );
                continue;
            };
            let job = FailedJob {
                seq: row.seq,
                envelope: envelope.clone(),
                worker_key: row.worker_key.clone(),
                attempts: *attempts,
                error: error.clone(),
                failed_at: self.now(),
                relay: self.config.instance_id.clone(),
            };
            raise_alert(hook.0.as_ref(), job).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
    use std::sync::{Arc, Mutex};

    use outbox_core::PublishError;
    use outbox_core::metric;

    /// Counters by `name{labels}`.
    #[derive(Default)]
    struct Counters(Mutex<BTreeMap<String, Arc<AtomicU64>>>);

    impl metrics::Recorder for Counters {
        fn describe_counter(
            &self,
            _: metrics::KeyName,
            _: Option<metrics::Unit>,
            _: metrics::SharedString,
        ) {
        }
        fn describe_gauge(
            &self,
            _: metrics::KeyName,
            _: Option<metrics::Unit>,
            _: metrics::SharedString,
        ) {
        }
        fn describe_histogram(
            &self,
            _: metrics::KeyName,
            _: Option<metrics::Unit>,
            _: metrics::SharedString,
        ) {
        }
        fn register_counter(
            &self,
            key: &metrics::Key,
            _: &metrics::Metadata<'_>,
        ) -> metrics::Counter {
            let labels: Vec<String> = key
                .labels()
                .map(|label| format!("{}={}", label.key(), label.value()))
                .collect();
            let name = format!("{}{{{}}}", key.name(), labels.join(","));
            let counter = Arc::clone(self.0.lock().expect("lock").entry(name).or_default());
            metrics::Counter::from_arc(counter)
        }
        fn register_gauge(&self, _: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Gauge {
            metrics::Gauge::noop()
        }
        fn register_histogram(
            &self,
            _: &metrics::Key,
            _: &metrics::Metadata<'_>,
        ) -> metrics::Histogram {
            metrics::Histogram::noop()
        }
    }

    #[test]
    fn a_failed_row_is_counted_with_its_event_type() {
        let envelope = outbox_core::Envelope::from_parts(outbox_core::envelope::EnvelopeParts {
            message_id: uuid::Uuid::now_v7(),
            event_type: "shop.payments.payout-requested.v1".into(),
            occurred_at: chrono::Utc::now(),
            correlation_id: None,
            causation_id: None,
            traceparent: None,
            tracestate: None,
            aggregate_type: "payout".into(),
            aggregate_id: "p-1".into(),
            headers: Default::default(),
            payload: serde_json::json!({}).into(),
        })
        .expect("valid");
        let rows = [ClaimedRow {
            seq: 1,
            attempts: 0,
            worker_key: Some("payments".into()),
            retryable: false,
            envelope: Ok(envelope),
        }];
        let marks = [Mark::Failed {
            attempts: 1,
            error: PublishError::timeout("bank did not answer"),
        }];
        let counters = Counters::default();
        metrics::with_local_recorder(&counters, || {
            crate::relay::decide::count_marks(
                &[metrics::Label::new("outbox", "outbox")],
                &rows,
                &marks,
            );
        });
        let counts: BTreeMap<String, u64> = counters
            .0
            .lock()
            .expect("lock")
            .iter()
            .map(|(name, value)| (name.clone(), value.load(AtomicOrdering::SeqCst)))
            .collect();
        assert_eq!(
            counts.get(&format!(
                "{}{{outbox=outbox,event_type=shop.payments.payout-requested.v1}}",
                metric::FAILED
            )),
            Some(&1),
            "{counts:?}"
        );
        assert_eq!(
            counts.get(&format!(
                "{}{{outbox=outbox,class=transient}}",
                metric::PUBLISH_FAILURES
            )),
            Some(&1),
            "{counts:?}"
        );
        assert_eq!(metric::FAILED, "outbox_failed_total");
    }

    #[test]
    fn worker_lease_names() {
        let keys: BTreeSet<String> = ["payments", "notifications"]
            .map(String::from)
            .into_iter()
            .collect();
        let leases = worker_leases(&keys);
        assert_eq!(leases, ["worker/notifications", "worker/payments"]);
        let mut owned = leases.clone();
        owned.push("partition/3".into());
        assert_eq!(owned_worker_keys(&owned), ["notifications", "payments"]);
    }
}
