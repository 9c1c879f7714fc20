//! [`Store`]: the statements of one outbox on one backend, the context every relay
//! statement (claim, mark, leases) is built in. The statements themselves live one operation
//! per file beside it.

use chrono::{DateTime, Utc};
use sea_orm::DbBackend;
use sea_orm::sea_query::Value;

use super::columns;
use super::dialect::{self, quote};
use super::statement::Sql;
use crate::config::Outbox;
use crate::table::{RelayTables, TableName};

/// The two tables lease statements run on: the relays' (`<outbox>_relay_leases`,
/// `<outbox>_relay_instances`, instances grouped by `worker_keys`) or the consumers'
/// (`<inbox>_consumer_leases`, `<inbox>_consumer_instances`, grouped by `consumer`).
#[derive(Debug, Clone)]
pub(crate) struct LeaseTables {
    pub(super) leases: TableName,
    pub(super) instances: TableName,
    /// The instance column [`Members::Group`](super::lease::Members) compares.
    pub(super) group_column: &'static str,
}

/// The relay's statements for one outbox on one backend.
#[derive(Debug, Clone)]
pub(crate) struct Store {
    pub(super) outbox: Outbox,
    pub(super) backend: DbBackend,
    /// The columns a claim reads. PostgreSQL: `o."seq", o."message_id", …`, the
    /// [claimed](Column::claimed) columns in their one order (read by position, see
    /// [`RowDecoder`](super::decode::RowDecoder)). Other backends: `o."seq" AS "seq", …`,
    /// every column under its standard name (read by name through
    /// [`OutboxRecord`](crate::record::OutboxRecord)).
    pub(super) select_list: String,
    /// Where the lease statements run.
    pub(super) leases: LeaseTables,
}

impl Store {
    pub(crate) fn new(outbox: &Outbox, backend: DbBackend) -> Self {
        let c = outbox.columns();
        let select_list = if backend == DbBackend::Postgres {
            columns::ALL
                .iter()
                .filter(|column| column.claimed())
                .map(|column| format!("o.{}", quote(backend, column.name(c))))
                .collect::<Vec<_>>()
                .join(", ")
        } else {
            columns::ALL
                .iter()
                .map(|column| {
                    format!(
                        "o.{} AS {}",
                        quote(backend, column.name(c)),
                        quote(backend, column.standard())
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        let relay = &outbox.tables().relay;
        Self {
            outbox: outbox.clone(),
            backend,
            select_list,
            leases: LeaseTables {
                leases: relay.leases.clone(),
                instances: relay.instances.clone(),
                group_column: "worker_keys",
            },
        }
    }

    /// This store with its lease statements on the consumers' lease tables (one set per
    /// inbox table, shared by every consumer name, instances grouped by consumer).
    pub(crate) fn for_consumer_leases(mut self) -> Self {
        let tables = self.outbox.tables();
        self.leases = LeaseTables {
            leases: tables.consumer_leases.clone(),
            instances: tables.consumer_instances.clone(),
            group_column: "consumer",
        };
        self
    }

    /// The outbox this store's statements run on.
    pub(crate) fn outbox(&self) -> &Outbox {
        &self.outbox
    }

    pub(crate) fn backend(&self) -> DbBackend {
        self.backend
    }

    pub(crate) fn tables(&self) -> &RelayTables {
        &self.outbox.tables().relay
    }

    pub(super) fn sql(&self) -> Sql {
        Sql::new(self.backend)
    }

    pub(super) fn ts(&self, at: DateTime<Utc>) -> Value {
        dialect::timestamp(self.backend, at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claim_sql_per_backend() {
        let outbox = Outbox::default();
        let store = Store::new(&outbox, DbBackend::Postgres);
        assert_eq!(
            store.select_list,
            r#"o."seq", o."message_id", o."event_type", o."version", o."aggregate_type", o."aggregate_id", o."correlation_id", o."causation_id", o."traceparent", o."tracestate", o."headers", o."occurred_at", o."payload", o."attempts", o."worker_key", o."retryable""#
        );
        let store = Store::new(&outbox, DbBackend::Sqlite);
        assert!(
            store
                .select_list
                .starts_with(r#"o."seq" AS "seq", o."message_id" AS "message_id""#)
        );
    }
}
