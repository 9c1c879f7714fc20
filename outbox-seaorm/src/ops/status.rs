//! The status report on request (see [`crate::status_report`]).

#[cfg(doc)]
use outbox_core::metric;
use sea_orm::DbErr;

use super::operations::Operations;
use crate::status_report::{self, RelayPolicy, StatusReport};

impl Operations {
    /// Pending rows, the oldest claimable row's age, dead and failed rows by event type,
    /// skipped rows, pending rows by worker key and live relays; also sets the
    /// [`metric::PENDING_ROWS`], [`metric::OLDEST_CLAIMABLE_AGE`], [`metric::DEAD_ROWS`] and
    /// [`metric::FAILED_ROWS`] gauges. Reads only pending, dead, failed and skipped rows
    /// (indexed), never the published ones.
    ///
    /// # Errors
    /// The database's error.
    pub async fn status(&self) -> Result<StatusReport, DbErr> {
        status_report::read(
            &self.db,
            &self.outbox,
            &self.store,
            RelayPolicy {
                ordering: self.ordering,
                dead_letters: self.dead_letter_policy,
            },
        )
        .await
    }
}
