//! Retention cleanup: deleting published outbox rows, or inbox rows, older than a retention
//! period, a batch per statement, while holding the table's cleanup lease so that one
//! instance cleans up at a time. The relay purges the outbox when its `retention` is set,
//! the consumer and the operations purge on request.

use std::time::Duration;

use chrono::TimeDelta;
use outbox_core::metric;
use sea_orm::DbErr;

use crate::config::Outbox;
use crate::lease::{INBOX_CLEANUP_LEASE, OUTBOX_CLEANUP_LEASE};
use crate::sql::Store;
use crate::transaction::Pool;

/// Which table a cleanup deletes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Table {
    /// Published outbox rows, by `published_at`.
    Outbox,
    /// Inbox rows, by `received_at`.
    Inbox,
}

impl Table {
    /// The cleanup lease of the table.
    const fn lease(self) -> &'static str {
        match self {
            Self::Outbox => OUTBOX_CLEANUP_LEASE,
            Self::Inbox => INBOX_CLEANUP_LEASE,
        }
    }

    /// The `table` label of [`metric::PURGED_ROWS`].
    const fn label(self) -> &'static str {
        match self {
            Self::Outbox => "outbox",
            Self::Inbox => "inbox",
        }
    }
}

/// How one cleanup runs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Purge<'a> {
    /// The table.
    pub(crate) table: Table,
    /// The owner written on the cleanup lease.
    pub(crate) owner: &'a str,
    /// Rows older than this go.
    pub(crate) retention: Duration,
    /// Rows per `DELETE`.
    pub(crate) batch: usize,
    /// How long the lease is held before it must be renewed (it is, after every batch).
    pub(crate) lease_ttl: Duration,
}

fn to_delta(duration: Duration) -> TimeDelta {
    TimeDelta::from_std(duration).unwrap_or(TimeDelta::MAX)
}

/// Runs `purge` on `db`: deletes batches until one comes back short or the lease is lost.
/// Returns the rows deleted, or `None` when another instance holds the cleanup lease.
///
/// # Errors
/// The database's error; batches deleted before it stay deleted.
pub(crate) async fn purge(
    db: &Pool,
    outbox: &Outbox,
    store: &Store,
    purge: Purge<'_>,
) -> Result<Option<u64>, DbErr> {
    let Purge {
        table,
        owner,
        retention,
        batch,
        lease_ttl,
    } = purge;
    let names = [table.lease().to_owned()];
    let clock = outbox.clock();
    store.ensure_leases(db, &names).await?;
    let now = clock.now();
    if store
        .acquire(db, owner, &names, now, now + to_delta(lease_ttl))
        .await?
        == 0
    {
        return Ok(None);
    }
    let cutoff = now - to_delta(retention);
    let batch = batch.max(1);
    let mut total = 0u64;
    let result = async {
        loop {
            let deleted = match table {
                Table::Outbox => store.delete_published(db, cutoff, batch).await?,
                Table::Inbox => store.delete_received(db, cutoff, batch).await?,
            };
            total += deleted;
            if deleted < batch as u64 {
                return Ok::<_, DbErr>(());
            }
            let now = clock.now();
            if store
                .acquire(db, owner, &names, now, now + to_delta(lease_ttl))
                .await?
                == 0
            {
                return Ok(());
            }
        }
    }
    .await;
    let released = store.release(db, owner, Some(&names), clock.now()).await;
    result?;
    released?;
    if total > 0 {
        let mut labels = outbox.metric_labels().to_vec();
        labels.push(metrics::Label::new("table", table.label()));
        metrics::counter!(metric::PURGED_ROWS, labels).increment(total);
    }
    Ok(Some(total))
}
