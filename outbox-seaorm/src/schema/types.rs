//! The column types of every table on each backend, in one place: each table's statement
//! names a [`Kind`] per column, [`column`] spells it for the backend.

use sea_orm::DbBackend;
use sea_orm::sea_query::{Alias, ColumnDef, TableCreateStatement};

/// What a column holds.
#[derive(Clone, Copy)]
pub(super) enum Kind {
    /// An identity primary key.
    Id,
    /// A UUID: `uuid`, `char(36)`, text.
    Uuid,
    /// A key or name: `varchar(255)`.
    Key,
    /// A worker key: `varchar(100)`.
    WorkerKey,
    /// A boolean.
    Bool,
    /// An outbox status: `varchar(16)`.
    Status,
    /// A 32-bit integer.
    Int,
    /// A 64-bit integer.
    BigInt,
    /// A text.
    Text,
    /// A text that may be large (a stored message): `longtext` on MariaDB.
    LongText,
    /// JSON: `jsonb`, `json`, text.
    Json,
    /// A timestamp: `timestamptz`, UTC `datetime(6)`, RFC 3339 text.
    Timestamp,
}

/// The column `name` holding `kind` on `backend` (nullability is the caller's).
pub(super) fn column(backend: DbBackend, name: &str, kind: Kind) -> ColumnDef {
    let mut def = ColumnDef::new(Alias::new(name));
    let custom = |def: &mut ColumnDef, ty: &str| {
        def.custom(Alias::new(ty));
    };
    match (backend, kind) {
        (_, Kind::Id) => {
            def.big_integer().not_null().auto_increment().primary_key();
        }
        (DbBackend::Postgres, Kind::Uuid) => custom(&mut def, "uuid"),
        (DbBackend::MySql, Kind::Uuid) => custom(&mut def, "char(36)"),
        (DbBackend::Postgres | DbBackend::MySql, Kind::Key) => custom(&mut def, "varchar(255)"),
        (DbBackend::Postgres | DbBackend::MySql, Kind::Status) => custom(&mut def, "varchar(16)"),
        (DbBackend::Postgres | DbBackend::MySql, Kind::WorkerKey) => {
            custom(&mut def, "varchar(100)")
        }
        (_, Kind::Bool) => custom(&mut def, "boolean"),
        (DbBackend::MySql, Kind::Int) => custom(&mut def, "int"),
        (_, Kind::Int) => custom(&mut def, "integer"),
        (DbBackend::Postgres | DbBackend::MySql, Kind::BigInt) => custom(&mut def, "bigint"),
        (_, Kind::BigInt) => custom(&mut def, "integer"),
        (DbBackend::MySql, Kind::LongText) => custom(&mut def, "longtext"),
        (DbBackend::Postgres, Kind::Json) => custom(&mut def, "jsonb"),
        (DbBackend::MySql, Kind::Json) => custom(&mut def, "json"),
        (DbBackend::Postgres, Kind::Timestamp) => custom(&mut def, "timestamptz"),
        (DbBackend::MySql, Kind::Timestamp) => custom(&mut def, "datetime(6)"),
        _ => custom(&mut def, "text"),
    }
    def
}

/// `def NOT NULL`.
pub(super) fn not_null(mut def: ColumnDef) -> ColumnDef {
    def.not_null();
    def
}

/// `def NULL`.
pub(super) fn null(mut def: ColumnDef) -> ColumnDef {
    def.null();
    def
}

/// MariaDB tables are InnoDB, `utf8mb4` with the binary collation (ids compare byte for
/// byte).
pub(super) fn mysql_options(table: &mut TableCreateStatement, backend: DbBackend) {
    if backend == DbBackend::MySql {
        table
            .engine("InnoDB")
            .character_set("utf8mb4")
            .collate("utf8mb4_bin");
    }
}
