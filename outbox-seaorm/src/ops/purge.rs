//! Retention cleanup on request (see [`crate::retention`]).

use std::time::Duration;

use sea_orm::DbErr;
use uuid::Uuid;

use super::operations::Operations;
use crate::retention::{self, Purge};

impl Operations {
    /// Deletes published rows older than `retention`, `batch` rows per statement, while
    /// holding the outbox cleanup lease (one instance at a time). Returns the rows deleted,
    /// or `None` when another instance is cleaning up.
    ///
    /// # Errors
    /// The database's error; batches deleted before it stay deleted.
    pub async fn purge(&self, retention: Duration, batch: usize) -> Result<Option<u64>, DbErr> {
        self.purge_table(retention::Table::Outbox, retention, batch)
            .await
    }

    /// Deletes inbox rows received more than `retention` ago, like [`purge`](Self::purge)
    /// (inbox cleanup lease). The retention must exceed the longest redelivery window of
    /// the brokers feeding the inbox, or a late duplicate is applied twice.
    ///
    /// # Errors
    /// The database's error.
    pub async fn purge_inbox(
        &self,
        retention: Duration,
        batch: usize,
    ) -> Result<Option<u64>, DbErr> {
        self.purge_table(retention::Table::Inbox, retention, batch)
            .await
    }

    async fn purge_table(
        &self,
        table: retention::Table,
        retention: Duration,
        batch: usize,
    ) -> Result<Option<u64>, DbErr> {
        let owner = format!("ops-{}", Uuid::now_v7());
        retention::purge(
            &self.db,
            &self.outbox,
            &self.store,
            Purge {
                table,
                owner: &owner,
                retention,
                batch,
                lease_ttl: Duration::from_secs(60),
            },
        )
        .await
    }
}
