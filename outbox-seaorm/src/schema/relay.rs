//! The relay's tables (see [`crate::relay::tables`]) and the two partial indexes of the
//! outbox table that the per-aggregate claim uses.

use sea_orm::DbBackend;

use super::types::ColumnTypes;
use crate::config::Outbox;
use crate::sql::dialect::{quote, quote_table};
use crate::table::index_name;

/// The `CREATE … IF NOT EXISTS` statements of the relay tables and the dead-row index.
pub(crate) fn statements(backend: DbBackend, outbox: &Outbox) -> Vec<String> {
    let tables = &outbox.tables().relay;
    let q = |name: &str| quote(backend, name);
    let ColumnTypes {
        key,
        ts,
        id,
        uuid,
        suffix,
        ..
    } = ColumnTypes::of(backend);
    let big = if backend == DbBackend::Sqlite {
        "integer"
    } else {
        "bigint"
    };
    let mut statements = vec![
        format!(
            "CREATE TABLE IF NOT EXISTS {} ({} {key} NOT NULL PRIMARY KEY, {} {key} NULL, \
             {} {big} NOT NULL DEFAULT 0, {} {ts} NULL, {} {ts} NOT NULL){suffix}",
            quote_table(backend, &tables.leases),
            q("name"),
            q("owner"),
            q("token"),
            q("acquired_at"),
            q("expires_at"),
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {} ({} {key} NOT NULL PRIMARY KEY, {} text NULL, \
             {} {ts} NOT NULL, {} {ts} NOT NULL, {} {ts} NOT NULL, {} text NULL){suffix}",
            quote_table(backend, &tables.instances),
            q("instance_id"),
            q("description"),
            q("started_at"),
            q("heartbeat_at"),
            q("expires_at"),
            // Job-queue mode (unreleased v0.1.0: part of the initial table).
            q("worker_keys"),
        ),
    ];
    let log_index = index_name(&tables.operator_log, "message_idx");
    let log_columns = format!(
        "{} {id}, {} {big} NOT NULL, {} {uuid} NOT NULL, {} {key} NOT NULL, \
         {} {key} NOT NULL, {} {key} NOT NULL, {} {key} NOT NULL, {} text NULL, \
         {} text NULL, {} {ts} NOT NULL",
        q("id"),
        q("seq"),
        q("message_id"),
        q("event_type"),
        q("action"),
        q("previous_status"),
        q("actor"),
        q("reason"),
        q("last_error"),
        q("at"),
    );
    if backend == DbBackend::MySql {
        statements.push(format!(
            "CREATE TABLE IF NOT EXISTS {} ({log_columns}, KEY {} ({})){suffix}",
            quote_table(backend, &tables.operator_log),
            q(&log_index),
            q("message_id"),
        ));
    } else {
        statements.push(format!(
            "CREATE TABLE IF NOT EXISTS {} ({log_columns})",
            quote_table(backend, &tables.operator_log),
        ));
        statements.push(format!(
            "CREATE INDEX IF NOT EXISTS {} ON {} ({})",
            q(&log_index),
            quote_table(backend, &tables.operator_log),
            q("message_id"),
        ));
        let c = outbox.columns();
        statements.push(format!(
            "CREATE INDEX IF NOT EXISTS {} ON {} ({}, {}, {}) WHERE {} IN ('dead', 'failed')",
            q(&index_name(outbox.outbox_table(), "held_aggregate_idx")),
            quote_table(backend, outbox.outbox_table()),
            q(c.aggregate_type),
            q(c.aggregate_id),
            q(c.seq),
            q(c.status),
        ));
        statements.push(format!(
            "CREATE INDEX IF NOT EXISTS {} ON {} ({}, {}, {}) WHERE {} = 'pending' AND {} > 0",
            q(&index_name(outbox.outbox_table(), "retrying_aggregate_idx")),
            quote_table(backend, outbox.outbox_table()),
            q(c.aggregate_type),
            q(c.aggregate_id),
            q(c.seq),
            q(c.status),
            q(c.attempts),
        ));
    }
    statements
}

/// `DROP TABLE IF EXISTS` of the relay tables (the dead-row index goes with the outbox
/// table).
#[cfg(feature = "migration")]
pub(crate) fn drop_statements(backend: DbBackend, outbox: &Outbox) -> Vec<String> {
    let tables = &outbox.tables().relay;
    [&tables.leases, &tables.instances, &tables.operator_log]
        .iter()
        .map(|table| format!("DROP TABLE IF EXISTS {}", quote_table(backend, table)))
        .collect()
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
