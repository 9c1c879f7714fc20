//! Periodic jobs as an operator sees them: each one's schedule, next run and last run (see
//! [`crate::periodic`]).

use super::operations::Operations;
use crate::record::PeriodicRecord;

impl Operations {
    /// Every periodic job the relays have seen, by name: its schedule, next run and last
    /// run. A job added to the configuration appears once a relay has looked at it (within
    /// its schedule interval).
    ///
    /// # Errors
    /// The database's error.
    pub async fn periodic(&self) -> Result<Vec<PeriodicRecord>, sea_orm::DbErr> {
        self.store.periodic_rows(&self.db).await
    }
}
