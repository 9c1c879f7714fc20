//! The relay's batch transaction on PostgreSQL plans its statements once per connection.

use sea_orm::{ConnectionTrait, DbBackend, DbErr};

use super::store::Store;

impl Store {
    /// On PostgreSQL, `SET LOCAL plan_cache_mode = force_generic_plan` for the transaction
    /// `txn`: the claim and the mark bind the current time, and with such parameters
    /// PostgreSQL keeps planning them afresh at every execution (a custom plan: about
    /// 0.3–0.7 ms per statement, measured in the server log, for a plan that never
    /// changes). Nothing on the other backends.
    pub(crate) async fn plan_generically<C: ConnectionTrait>(&self, txn: &C) -> Result<(), DbErr> {
        if self.backend() == DbBackend::Postgres {
            txn.execute_unprepared("SET LOCAL plan_cache_mode = force_generic_plan")
                .await?;
        }
        Ok(())
    }
}
