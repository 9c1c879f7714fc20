//! The relays alive on an outbox, their heartbeats and the leases (partitions, worker keys)
//! each holds: an operator's overview.

use chrono::{DateTime, Utc};
use sea_orm::DbErr;

use super::operations::Operations;
use crate::sql::InstanceRow;

/// A relay instance alive on the outbox.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RelayInstance {
    /// Its id (the relay's `instance_id`).
    pub instance_id: String,
    /// What it said of itself when it registered.
    pub description: Option<String>,
    /// When it registered.
    pub started_at: DateTime<Utc>,
    /// Its last heartbeat.
    pub heartbeat_at: DateTime<Utc>,
    /// When it counts as gone without another heartbeat.
    pub expires_at: DateTime<Utc>,
    /// Its worker keys (comma-separated), for a relay restricted to some.
    pub worker_keys: Option<String>,
    /// The leases it holds: `partition/<n>` for a partition of the per-aggregate order,
    /// a worker-key lease, or the SQLite relay lease.
    pub leases: Vec<String>,
}

impl Operations {
    /// The relay instances alive now, by id, with the leases each holds.
    ///
    /// # Errors
    /// The database's error.
    pub async fn relay_instances(&self) -> Result<Vec<RelayInstance>, DbErr> {
        let now = self.outbox.clock().now();
        let rows = self.store.instance_rows(&self.db, now).await?;
        let holders = self.store.lease_holders(&self.db, now).await?;
        Ok(rows
            .into_iter()
            .map(|row: InstanceRow| RelayInstance {
                leases: holders
                    .iter()
                    .filter(|(_, owner)| *owner == row.instance_id)
                    .map(|(lease, _)| lease.clone())
                    .collect(),
                instance_id: row.instance_id,
                description: row.description,
                started_at: row.started_at,
                heartbeat_at: row.heartbeat_at,
                expires_at: row.expires_at,
                worker_keys: row.group,
            })
            .collect())
    }
}
