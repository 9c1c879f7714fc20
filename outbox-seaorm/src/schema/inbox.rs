//! The inbox table and its index (see the [schema documentation](super)).

use sea_orm::DbBackend;
use sea_orm::sea_query::{Alias, Index, Table};

use super::outbox::with_indexes;
use super::types::{Kind, column, mysql_options, not_null, null};
use crate::config::Outbox;
use crate::sql::dialect::table_ref;
use crate::table::{inbox_columns, index_name};

pub(super) fn statements(backend: DbBackend, outbox: &Outbox) -> Vec<String> {
    let name = outbox.inbox_table();
    let col = |n, k| column(backend, n, k);
    let mut table = Table::create();
    table
        .table(table_ref(name))
        .if_not_exists()
        .col(not_null(col(inbox_columns::MESSAGE_ID, Kind::Uuid)))
        .col(not_null(col(inbox_columns::CONSUMER, Kind::Key)))
        .col(not_null(col(inbox_columns::EVENT_TYPE, Kind::Key)))
        .col(not_null(col(inbox_columns::RECEIVED_AT, Kind::Timestamp)))
        .col(null(col(inbox_columns::PROCESSED_AT, Kind::Timestamp)))
        .primary_key(
            Index::create()
                .name(index_name(name, "pkey"))
                .col(Alias::new(inbox_columns::MESSAGE_ID))
                .col(Alias::new(inbox_columns::CONSUMER)),
        );
    mysql_options(&mut table, backend);
    let mut received = Index::create();
    received
        .name(index_name(name, "received_at_idx"))
        .table(table_ref(name))
        .col(Alias::new(inbox_columns::RECEIVED_AT));
    with_indexes(backend, table, vec![received])
}
