//! The outbox table and its indexes (see the [schema documentation](super)).

use sea_orm::DbBackend;
use sea_orm::sea_query::{
    Alias, ConditionalStatement as _, Expr, ExprTrait as _, Index, IndexCreateStatement, Table,
    TableCreateStatement,
};

use super::types::{Kind, column, mysql_options, not_null, null};
use crate::config::Outbox;
use crate::sql::dialect::table_ref;
use crate::status::OutboxStatus;
use crate::table::index_name;

/// The outbox table's `CREATE TABLE IF NOT EXISTS` and `CREATE INDEX IF NOT EXISTS`
/// statements (MariaDB: indexes inside the `CREATE TABLE`).
pub(super) fn statements(backend: DbBackend, outbox: &Outbox) -> Vec<String> {
    let c = outbox.columns();
    let name = outbox.outbox_table();
    let mut table = row_table(
        backend,
        outbox,
        name,
        &[
            OutboxStatus::Pending,
            OutboxStatus::Published,
            OutboxStatus::Dead,
            OutboxStatus::Skipped,
            OutboxStatus::Failed,
        ],
    );
    mysql_options(&mut table, backend);

    let unique = {
        let mut index = Index::create();
        index
            .name(index_name(name, "message_id_key"))
            .table(table_ref(name))
            .col(Alias::new(c.message_id))
            .unique();
        index
    };
    let pending: [(&str, Vec<&str>); 4] = [
        // `(seq)` alone. `(seq, partition)` was measured (issue 17): it lets a relay owning
        // some partitions skip the others' rows inside the index (a claim of 500 rows in 16
        // of 64 partitions took 0.64–0.99 ms instead of 0.96–1.28), but PostgreSQL 15 then
        // plans the claim on the primary key while every row is pending, and once published
        // rows are kept each claim walks them all: 15 000 rows/s instead of 45 000.
        ("pending_seq_idx", vec![c.seq]),
        ("pending_partition_idx", vec![c.partition, c.seq]),
        (
            "pending_aggregate_idx",
            vec![c.aggregate_type, c.aggregate_id, c.seq],
        ),
        // Keyed relays: the claim's cost follows the pending rows of their worker keys, in
        // their claim order (priority, then `seq`).
        (
            "pending_worker_key_idx",
            vec![c.worker_key, c.priority, c.seq],
        ),
    ];
    let mut indexes = vec![unique];
    for (suffix, columns) in pending {
        let mut index = Index::create();
        index.name(index_name(name, suffix)).table(table_ref(name));
        if backend == DbBackend::MySql {
            // No partial indexes: lead with `status` so pending rows are one key range.
            index.col(Alias::new(c.status));
        } else {
            index.and_where(Expr::col(Alias::new(c.status)).eq(OutboxStatus::Pending.as_str()));
            if suffix == "pending_worker_key_idx" {
                // Rows without a worker key (broker relays) cost this index nothing.
                index.and_where(Expr::col(Alias::new(c.worker_key)).is_not_null());
            }
        }
        for column in columns {
            index.col(Alias::new(column));
        }
        indexes.push(index);
    }
    with_indexes(backend, table, indexes)
}

/// `CREATE TABLE IF NOT EXISTS <name>` with the outbox row's columns, `status` checked
/// to be one of `statuses` (the outbox table, and the scheduled rows' table beside it).
pub(super) fn row_table(
    backend: DbBackend,
    outbox: &Outbox,
    name: &crate::table::TableName,
    statuses: &[OutboxStatus],
) -> TableCreateStatement {
    let c = outbox.columns();
    let col = |n, k| column(backend, n, k);
    let mut table = Table::create();
    table
        .table(table_ref(name))
        .if_not_exists()
        .col(col(c.seq, Kind::Id))
        .col(not_null(col(c.message_id, Kind::Uuid)))
        .col(not_null(col(c.event_type, Kind::Key)))
        .col(not_null(col(c.version, Kind::Int)))
        .col(not_null(col(c.aggregate_type, Kind::Key)))
        .col(not_null(col(c.aggregate_id, Kind::Key)))
        .col(not_null(col(c.partition, Kind::Int)))
        .col(null(col(c.correlation_id, Kind::Uuid)))
        .col(null(col(c.causation_id, Kind::Uuid)))
        .col(null(col(c.traceparent, Kind::Text)))
        .col(null(col(c.tracestate, Kind::Text)))
        .col(not_null(col(c.headers, Kind::Json)))
        .col(not_null(col(c.occurred_at, Kind::Timestamp)))
        .col(not_null(col(c.payload, Kind::Json)))
        .col({
            let mut def = not_null(col(c.status, Kind::Status));
            def.check(
                Expr::col(Alias::new(c.status))
                    .is_in(statuses.iter().map(|status| status.as_str())),
            );
            def
        })
        .col({
            let mut def = not_null(col(c.attempts, Kind::Int));
            def.default(0);
            def
        })
        .col(not_null(col(c.next_attempt_at, Kind::Timestamp)))
        .col(null(col(c.last_error, Kind::Text)))
        .col(null(col(c.published_at, Kind::Timestamp)))
        .col(not_null(col(c.created_at, Kind::Timestamp)))
        // Job-queue columns (unreleased v0.1.0: added to the initial table rather than by a
        // migration of their own).
        .col(null(col(c.worker_key, Kind::WorkerKey)))
        .col({
            let mut def = not_null(col(c.retryable, Kind::Bool));
            def.default(true);
            def
        })
        .col({
            let mut def = not_null(col(c.priority, Kind::Int));
            def.default(0);
            def
        });
    table
}

/// Renders the table and its indexes: on MariaDB the indexes go inside `CREATE TABLE`
/// (MySQL has no `CREATE INDEX IF NOT EXISTS`), elsewhere they follow as
/// `CREATE INDEX IF NOT EXISTS`.
pub(super) fn with_indexes(
    backend: DbBackend,
    mut table: TableCreateStatement,
    indexes: Vec<IndexCreateStatement>,
) -> Vec<String> {
    if backend == DbBackend::MySql {
        for mut index in indexes {
            table.index(&mut index);
        }
        vec![backend.build(&table).to_string()]
    } else {
        let mut statements = vec![backend.build(&table).to_string()];
        statements.extend(indexes.into_iter().map(|mut index| {
            index.if_not_exists();
            backend.build(&index).to_string()
        }));
        statements
    }
}
