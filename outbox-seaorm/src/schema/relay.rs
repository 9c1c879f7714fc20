//! The relay's tables (see [`crate::relay::tables`]) and the two partial indexes of the
//! outbox table that the per-aggregate claim uses.

use sea_orm::DbBackend;
use sea_orm::sea_query::{Alias, ConditionalStatement as _, Expr, ExprTrait as _, Index, Table};

use super::lease;
use super::outbox::with_indexes;
use super::types::{Kind, column, mysql_options, not_null, null};
use crate::config::Outbox;
use crate::sql::dialect::table_ref;
use crate::status::{HOLDING, OutboxStatus};
use crate::table::index_name;

/// The `CREATE … IF NOT EXISTS` statements of the relay tables and, except on MariaDB
/// (where the outbox's `(status, aggregate_type, aggregate_id, seq)` index serves), the two
/// partial indexes of the outbox table that the per-aggregate claim uses.
pub(crate) fn statements(backend: DbBackend, outbox: &Outbox) -> Vec<String> {
    let tables = &outbox.tables().relay;
    let col = |n, k| column(backend, n, k);
    // Job-queue mode's `worker_keys` (unreleased v0.1.0: part of the initial table).
    let mut statements =
        lease::statements(backend, &tables.leases, &tables.instances, "worker_keys");
    let mut log = Table::create();
    log.table(table_ref(&tables.operator_log))
        .if_not_exists()
        .col(col("id", Kind::Id))
        .col(not_null(col("seq", Kind::BigInt)))
        .col(not_null(col("message_id", Kind::Uuid)))
        .col(not_null(col("event_type", Kind::Key)))
        .col(not_null(col("action", Kind::Key)))
        .col(not_null(col("previous_status", Kind::Key)))
        .col(not_null(col("actor", Kind::Key)))
        .col(null(col("reason", Kind::Text)))
        .col(null(col("last_error", Kind::Text)))
        .col(not_null(col("at", Kind::Timestamp)))
        // Unreleased v0.1.0: added to the initial table rather than by a migration.
        .col(null(col("detail", Kind::Text)));
    mysql_options(&mut log, backend);
    let mut by_message = Index::create();
    by_message
        .name(index_name(&tables.operator_log, "message_idx"))
        .table(table_ref(&tables.operator_log))
        .col(Alias::new("message_id"));
    statements.extend(with_indexes(backend, log, vec![by_message]));
    if backend != DbBackend::MySql {
        let c = outbox.columns();
        let name = outbox.outbox_table();
        let aggregate = |suffix: &str| {
            let mut index = Index::create();
            index
                .if_not_exists()
                .name(index_name(name, suffix))
                .table(table_ref(name))
                .col(Alias::new(c.aggregate_type))
                .col(Alias::new(c.aggregate_id))
                .col(Alias::new(c.seq));
            index
        };
        let mut held = aggregate("held_aggregate_idx");
        held.and_where(
            Expr::col(Alias::new(c.status)).is_in(HOLDING.iter().map(|status| status.as_str())),
        );
        let mut retrying = aggregate("retrying_aggregate_idx");
        retrying
            .and_where(Expr::col(Alias::new(c.status)).eq(OutboxStatus::Pending.as_str()))
            .and_where(Expr::col(Alias::new(c.attempts)).gt(0));
        statements.push(backend.build(&held).to_string());
        statements.push(backend.build(&retrying).to_string());
    }
    statements
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_outbox_table() {
        use crate::table::RelayTables;
        let tables = RelayTables::of(&Outbox::default());
        assert_eq!(tables.leases.to_string(), "outbox_relay_leases");
        assert_eq!(tables.instances.to_string(), "outbox_relay_instances");
        assert_eq!(tables.operator_log.to_string(), "outbox_operator_log");
        let outbox = Outbox::builder()
            .outbox_table(format!("app.{}", "o".repeat(63)))
            .build()
            .unwrap();
        let tables = RelayTables::of(&outbox);
        assert_eq!(tables.leases.schema(), Some("app"));
        assert!(tables.leases.table().len() <= 63);
        assert!(tables.leases.table().ends_with("_relay_leases"));
    }

    #[test]
    fn ddl_per_backend() {
        let outbox = Outbox::default();
        let postgres = statements(DbBackend::Postgres, &outbox).join(";\n");
        assert!(postgres.contains(r#"CREATE TABLE IF NOT EXISTS "outbox_relay_leases""#));
        assert!(postgres.contains(
            r#"ON "outbox" ("aggregate_type", "aggregate_id", "seq") WHERE "status" IN ('dead', 'failed')"#
        ));
        let mysql = statements(DbBackend::MySql, &outbox).join(";\n");
        assert!(mysql.contains("`expires_at` datetime(6) NOT NULL"));
        assert!(!mysql.contains("CREATE INDEX"));
        let sqlite = statements(DbBackend::Sqlite, &outbox).join(";\n");
        assert!(sqlite.contains("integer NOT NULL PRIMARY KEY AUTOINCREMENT"));
    }
}
