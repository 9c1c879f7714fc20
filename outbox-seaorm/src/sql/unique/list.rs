//! The unique jobs' keys for operators, newest first, bounded, with whether each still
//! holds.
//!
//! ```sql
//! SELECT u.event_type, u.unique_key, u.message_id, u.expires_at, u.created_at,
//!   CASE WHEN u.expires_at IS NOT NULL THEN (u.expires_at > :now)
//!        WHEN EXISTS (pending row of u.message_id) OR EXISTS (scheduled row of it)
//!        THEN TRUE ELSE FALSE END AS holding
//! FROM outbox_unique u [WHERE u.event_type = :type]
//! ORDER BY u.created_at DESC, u.event_type, u.unique_key LIMIT :limit
//! ```

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, DbErr};

use crate::record::UniqueKeyRecord;
use crate::sql::dialect::{self, quote, read_bool, read_opt_uuid, read_timestamp, required};
use crate::sql::store::Store;
use crate::table::UniqueColumn;

impl Store {
    /// At most `limit` keys of the unique table, newest first, of `event_type` when given.
    pub(crate) async fn unique_keys<C: ConnectionTrait>(
        &self,
        conn: &C,
        event_type: Option<&str>,
        now: DateTime<Utc>,
        limit: u64,
    ) -> Result<Vec<UniqueKeyRecord>, DbErr> {
        let backend = self.backend;
        let q = |c: UniqueColumn| format!("u.{}", quote(backend, c.as_str()));
        let c = self.outbox.columns();
        let message_id = q(UniqueColumn::MessageId);
        let expires_at = q(UniqueColumn::ExpiresAt);
        let mut sql = self.sql();
        sql.push(&format!(
            "SELECT {} AS event_type, {} AS unique_key, {message_id} AS message_id, \
             {expires_at} AS expires_at, {} AS created_at, CASE WHEN {expires_at} IS NOT NULL \
             THEN ({expires_at} > ",
            q(UniqueColumn::EventType),
            q(UniqueColumn::UniqueKey),
            q(UniqueColumn::CreatedAt),
        ))
        .bind(dialect::timestamp(backend, now))
        .push(") WHEN EXISTS (SELECT 1 FROM ")
        .table(self.outbox.outbox_table())
        .push(&format!(
            " o WHERE o.{} = {message_id} AND o.{} = 'pending') OR EXISTS (SELECT 1 FROM ",
            quote(backend, c.message_id),
            quote(backend, c.status),
        ))
        .table(self.outbox.scheduled_table())
        .push(&format!(
            " s WHERE s.{} = {message_id}) THEN TRUE ELSE FALSE END AS holding FROM ",
            quote(backend, c.message_id),
        ))
        .table(self.outbox.unique_table())
        .push(" u");
        if let Some(event_type) = event_type {
            sql.push(&format!(" WHERE {} = ", q(UniqueColumn::EventType)))
                .bind(dialect::text(event_type));
        }
        sql.push(&format!(
            " ORDER BY {} DESC, {}, {} LIMIT {limit}",
            q(UniqueColumn::CreatedAt),
            q(UniqueColumn::EventType),
            q(UniqueColumn::UniqueKey),
        ));
        conn.query_all_raw(sql.build())
            .await?
            .iter()
            .map(|row| {
                Ok(UniqueKeyRecord {
                    event_type: row.try_get("", "event_type")?,
                    key: row.try_get("", "unique_key")?,
                    message_id: required(read_opt_uuid(row, "", "message_id")?, "message_id")?,
                    expires_at: read_timestamp(row, "expires_at")?,
                    created_at: required(read_timestamp(row, "created_at")?, "created_at")?,
                    holding: read_bool(row, "", "holding")?,
                })
            })
            .collect()
    }
}
