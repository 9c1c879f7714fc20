//! The live relay instances with their heartbeats, and who holds which lease: what an
//! operator's overview shows.

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, DbErr};

use crate::sql::dialect::{quote, read_timestamp, required};
use crate::sql::store::Store;

/// One live row of the instance table.
#[derive(Debug, Clone)]
pub(crate) struct InstanceRow {
    pub(crate) instance_id: String,
    pub(crate) description: Option<String>,
    pub(crate) started_at: DateTime<Utc>,
    pub(crate) heartbeat_at: DateTime<Utc>,
    pub(crate) expires_at: DateTime<Utc>,
    pub(crate) group: Option<String>,
}

impl Store {
    /// The instances live at `now`, by id.
    pub(crate) async fn instance_rows<C: ConnectionTrait>(
        &self,
        conn: &C,
        now: DateTime<Utc>,
    ) -> Result<Vec<InstanceRow>, DbErr> {
        let q = |name: &str| quote(self.backend, name);
        let mut sql = self.sql();
        sql.push(&format!(
            "SELECT {}, {}, {}, {}, {}, {} AS {} FROM ",
            q("instance_id"),
            q("description"),
            q("started_at"),
            q("heartbeat_at"),
            q("expires_at"),
            q(self.leases.group_column),
            q("member_group"),
        ))
        .table(&self.leases.instances)
        .push(&format!(" WHERE {} > ", q("expires_at")))
        .bind(self.ts(now))
        .push(&format!(" ORDER BY {}", q("instance_id")));
        let rows = conn.query_all_raw(sql.build()).await?;
        rows.iter()
            .map(|row| {
                Ok(InstanceRow {
                    instance_id: row.try_get("", "instance_id")?,
                    description: row.try_get("", "description")?,
                    started_at: required(read_timestamp(row, "started_at")?, "started_at")?,
                    heartbeat_at: required(read_timestamp(row, "heartbeat_at")?, "heartbeat_at")?,
                    expires_at: required(read_timestamp(row, "expires_at")?, "expires_at")?,
                    group: row.try_get("", "member_group")?,
                })
            })
            .collect()
    }

    /// `(lease, owner)` of every lease held at `now`, by lease name.
    pub(crate) async fn lease_holders<C: ConnectionTrait>(
        &self,
        conn: &C,
        now: DateTime<Utc>,
    ) -> Result<Vec<(String, String)>, DbErr> {
        let q = |name: &str| quote(self.backend, name);
        let mut sql = self.sql();
        sql.push(&format!("SELECT {}, {} FROM ", q("name"), q("owner")))
            .table(&self.leases.leases)
            .push(&format!(
                " WHERE {} IS NOT NULL AND {} > ",
                q("owner"),
                q("expires_at")
            ))
            .bind(self.ts(now))
            .push(&format!(" ORDER BY {}", q("name")));
        let rows = conn.query_all_raw(sql.build()).await?;
        rows.iter()
            .map(|row| Ok((row.try_get("", "name")?, row.try_get("", "owner")?)))
            .collect()
    }
}
