//! The DDL of a lease table and its instance table, shared by the relays
//! (`<outbox>_relay_leases`, `<outbox>_relay_instances`, see [`crate::relay::tables`]) and
//! the partitioned consumers (`<inbox>_consumer_leases`, `<inbox>_consumer_instances`, see
//! [`crate::inbox::partitioned`]).

use sea_orm::DbBackend;
use sea_orm::sea_query::Table;

use super::outbox::with_indexes;
use super::types::{Kind, column, mysql_options, not_null, null};
use crate::config::Outbox;
use crate::sql::dialect::table_ref;
use crate::table::TableName;

/// `CREATE TABLE IF NOT EXISTS` of the lease table `leases` and the instance table
/// `instances`, whose group column (`worker_keys` for relays, `consumer` for consumers) is
/// `group_column`.
pub(super) fn statements(
    backend: DbBackend,
    leases: &TableName,
    instances: &TableName,
    group_column: &'static str,
) -> Vec<String> {
    let col = |n, k| column(backend, n, k);
    let mut lease_table = Table::create();
    lease_table
        .table(table_ref(leases))
        .if_not_exists()
        .col(not_null(col("name", Kind::Key)).primary_key().to_owned())
        .col(null(col("owner", Kind::Key)))
        .col(not_null(col("token", Kind::BigInt)).default(0).to_owned())
        .col(null(col("acquired_at", Kind::Timestamp)))
        .col(not_null(col("expires_at", Kind::Timestamp)));
    mysql_options(&mut lease_table, backend);
    let mut instance_table = Table::create();
    instance_table
        .table(table_ref(instances))
        .if_not_exists()
        .col(
            not_null(col("instance_id", Kind::Key))
                .primary_key()
                .to_owned(),
        )
        .col(null(col("description", Kind::Text)))
        .col(not_null(col("started_at", Kind::Timestamp)))
        .col(not_null(col("heartbeat_at", Kind::Timestamp)))
        .col(not_null(col("expires_at", Kind::Timestamp)))
        .col(null(col(group_column, Kind::Text)));
    mysql_options(&mut instance_table, backend);
    let mut statements = with_indexes(backend, lease_table, Vec::new());
    statements.extend(with_indexes(backend, instance_table, Vec::new()));
    statements
}

/// The partitioned consumers' lease and instance tables, next to the inbox table.
pub(super) fn consumer_statements(backend: DbBackend, outbox: &Outbox) -> Vec<String> {
    let tables = outbox.tables();
    statements(
        backend,
        &tables.consumer_leases,
        &tables.consumer_instances,
        "consumer",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consumer_lease_tables_follow_the_inbox_table() {
        let outbox = Outbox::builder()
            .inbox_table("ordering_inbox")
            .build()
            .unwrap();
        let postgres = consumer_statements(DbBackend::Postgres, &outbox).join(";\n");
        assert!(
            postgres.contains(r#"CREATE TABLE IF NOT EXISTS "ordering_inbox_consumer_leases""#)
        );
        assert!(
            postgres.contains(r#"CREATE TABLE IF NOT EXISTS "ordering_inbox_consumer_instances""#)
        );
        assert!(postgres.contains(r#""consumer" text"#), "{postgres}");
        assert!(!postgres.contains("worker_keys"));
    }
}
