//! Reading given-up rows, and one row by message id, as [`OutboxRecord`]s.

use sea_orm::sea_query::{Alias, Expr, ExprTrait as _};
use sea_orm::{ConnectionTrait, DbErr, FromQueryResult};
use uuid::Uuid;

use crate::record::OutboxRecord;
use crate::sql::dialect;
use crate::sql::store::Store;
use crate::status::OutboxStatus;

impl Store {
    /// Rows in `status` in `seq` order, of one event type or all, at most `limit`.
    pub(crate) async fn rows_with_status<C: ConnectionTrait>(
        &self,
        conn: &C,
        status: OutboxStatus,
        event_type: Option<&str>,
        limit: u64,
    ) -> Result<Vec<OutboxRecord>, DbErr> {
        let c = self.outbox.columns();
        let mut select = OutboxRecord::select(&self.outbox);
        select
            .and_where(Expr::col(Alias::new(c.status)).eq(status.as_str()))
            .limit(limit);
        if let Some(event_type) = event_type {
            select.and_where(Expr::col(Alias::new(c.event_type)).eq(event_type));
        }
        let rows = conn.query_all(&select).await?;
        rows.iter()
            .map(|row| OutboxRecord::from_query_result(row, ""))
            .collect()
    }

    /// The row with this message id, whatever its status.
    pub(crate) async fn find<C: ConnectionTrait>(
        &self,
        conn: &C,
        message_id: Uuid,
    ) -> Result<Option<OutboxRecord>, DbErr> {
        let mut select = OutboxRecord::select(&self.outbox);
        select.and_where(
            Expr::col(Alias::new(self.outbox.columns().message_id))
                .eq(dialect::uuid(self.backend, message_id)),
        );
        let row = conn.query_one(&select).await?;
        row.map(|row| OutboxRecord::from_query_result(&row, ""))
            .transpose()
    }
}
