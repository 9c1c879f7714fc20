//! Unique jobs' keys as an operator sees them (see [`Unique`](crate::job::Unique)).

use super::operations::Operations;
use crate::record::UniqueKeyRecord;

/// The most keys one call of [`Operations::unique_keys`] returns.
pub const MAX_UNIQUE_KEYS: u64 = 1_000;

impl Operations {
    /// The unique jobs' keys, newest first: at most `limit` (capped at
    /// [`MAX_UNIQUE_KEYS`]), of `event_type` when given, each with the job that took it and
    /// whether it still holds. The table keeps one row per key ever taken (a key that no
    /// longer holds is taken over by its next job), so the read is bounded.
    ///
    /// # Errors
    /// The database's error.
    pub async fn unique_keys(
        &self,
        event_type: Option<&str>,
        limit: u64,
    ) -> Result<Vec<UniqueKeyRecord>, sea_orm::DbErr> {
        let now = self.outbox.clock().now();
        self.store
            .unique_keys(&self.db, event_type, now, limit.min(MAX_UNIQUE_KEYS))
            .await
    }
}
