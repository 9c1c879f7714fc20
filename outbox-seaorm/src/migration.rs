//! `sea-orm-migration` migrations creating the outbox and inbox tables of an [`Outbox`]
//! configuration.
//!
//! Add them to your migrator. Their names include the table names, so two configurations
//! (two outboxes in one database) never collide in `seaql_migrations`:
//!
//! ```
//! use outbox_seaorm::{Outbox, migration};
//! use sea_orm_migration::{MigrationTrait, MigratorTrait};
//!
//! fn outbox() -> Outbox {
//!     Outbox::builder().outbox_table("ordering_outbox").inbox_table("ordering_inbox").build()
//!         .expect("valid table names")
//! }
//!
//! struct Migrator;
//!
//! impl MigratorTrait for Migrator {
//!     fn migrations() -> Vec<Box<dyn MigrationTrait>> {
//!         let mut migrations = migration::migrations(&outbox());
//!         // migrations.push(Box::new(m20260101_000001_create_orders::Migration));
//!         migrations
//!     }
//! }
//!
//! let names: Vec<String> = Migrator::migrations().iter().map(|m| m.name().to_owned()).collect();
//! assert_eq!(names, [
//!     "m20260501_000001_create_outbox_table__ordering_outbox",
//!     "m20260501_000002_create_inbox_table__ordering_inbox",
//!     "m20260601_000001_create_relay_tables__ordering_outbox",
//!     "m20261201_000001_create_inbox_dead_letters__ordering_inbox",
//!     "m20261204_000001_create_consumer_leases__ordering_inbox",
//!     "m20261205_000001_create_log_relay_tables__ordering_outbox",
//!     "m20261206_000001_create_log_relay_tables_mariadb__ordering_outbox",
//!     "m20261207_000001_create_scheduled_table__ordering_outbox_scheduled",
//!     "m20261208_000001_create_periodic_table__ordering_outbox_periodic",
//!     "m20261208_000002_create_unique_table__ordering_outbox_unique",
//!     "m20261209_000001_create_worker_slots_table__ordering_outbox_worker_slots",
//! ]);
//! ```
//!
//! `up` runs the same idempotent statements as [`schema::install`];
//! `down` drops the table(s).

use sea_orm::DbErr;
use sea_orm_migration::{MigrationName, MigrationTrait, SchemaManager};

use crate::config::Outbox;
use crate::schema::{self, Tables};

/// Creates the outbox table and its indexes.
#[derive(Debug, Clone)]
pub struct CreateOutboxTable {
    outbox: Outbox,
    name: String,
}

/// Creates the inbox table and its index.
#[derive(Debug, Clone)]
pub struct CreateInboxTable {
    outbox: Outbox,
    name: String,
}

impl CreateOutboxTable {
    /// The migration for `outbox`'s outbox table, named
    /// `m20260501_000001_create_outbox_table__<table>`.
    pub fn new(outbox: &Outbox) -> Self {
        Self {
            name: format!(
                "m20260501_000001_create_outbox_table__{}",
                outbox.outbox_table()
            ),
            outbox: outbox.clone(),
        }
    }
}

impl CreateInboxTable {
    /// The migration for `outbox`'s inbox table, named
    /// `m20260501_000002_create_inbox_table__<table>`.
    pub fn new(outbox: &Outbox) -> Self {
        Self {
            name: format!(
                "m20260501_000002_create_inbox_table__{}",
                outbox.inbox_table()
            ),
            outbox: outbox.clone(),
        }
    }
}

impl MigrationName for CreateOutboxTable {
    fn name(&self) -> &str {
        &self.name
    }
}

impl MigrationName for CreateInboxTable {
    fn name(&self) -> &str {
        &self.name
    }
}

#[async_trait::async_trait]
impl MigrationTrait for CreateOutboxTable {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let statements =
            schema::statements(manager.get_database_backend(), &self.outbox, Tables::Outbox)?;
        schema::execute_all(manager.get_connection(), statements).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let statement =
            schema::drop_statement(manager.get_database_backend(), self.outbox.outbox_table());
        schema::execute_all(manager.get_connection(), vec![statement]).await
    }
}

#[async_trait::async_trait]
impl MigrationTrait for CreateInboxTable {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let statements =
            schema::statements(manager.get_database_backend(), &self.outbox, Tables::Inbox)?;
        schema::execute_all(manager.get_connection(), statements).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let statement =
            schema::drop_statement(manager.get_database_backend(), self.outbox.inbox_table());
        schema::execute_all(manager.get_connection(), vec![statement]).await
    }
}

/// Creates the relay's tables (leases, instances, operator log) and the dead-row index,
/// see [`crate::relay::tables`].
#[derive(Debug, Clone)]
pub struct CreateRelayTables {
    outbox: Outbox,
    name: String,
}

impl CreateRelayTables {
    /// The migration for `outbox`'s relay tables, named
    /// `m20260601_000001_create_relay_tables__<outbox table>`.
    pub fn new(outbox: &Outbox) -> Self {
        Self {
            name: format!(
                "m20260601_000001_create_relay_tables__{}",
                outbox.outbox_table()
            ),
            outbox: outbox.clone(),
        }
    }
}

impl MigrationName for CreateRelayTables {
    fn name(&self) -> &str {
        &self.name
    }
}

#[async_trait::async_trait]
impl MigrationTrait for CreateRelayTables {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let statements =
            schema::statements(manager.get_database_backend(), &self.outbox, Tables::Relay)?;
        schema::execute_all(manager.get_connection(), statements).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let backend = manager.get_database_backend();
        let tables = &self.outbox.tables().relay;
        let statements = [&tables.leases, &tables.instances, &tables.operator_log]
            .map(|table| schema::drop_statement(backend, table))
            .to_vec();
        schema::execute_all(manager.get_connection(), statements).await
    }
}

/// Creates the consumer's dead-letter and parked-message tables, see
/// [`crate::inbox::dead_letter`] and [`crate::inbox::parked`].
#[derive(Debug, Clone)]
pub struct CreateInboxDeadLetters {
    outbox: Outbox,
    name: String,
}

impl CreateInboxDeadLetters {
    /// The migration for `outbox`'s consumer dead-letter table, named
    /// `m20261201_000001_create_inbox_dead_letters__<inbox table>`.
    pub fn new(outbox: &Outbox) -> Self {
        Self {
            name: format!(
                "m20261201_000001_create_inbox_dead_letters__{}",
                outbox.inbox_table()
            ),
            outbox: outbox.clone(),
        }
    }
}

impl MigrationName for CreateInboxDeadLetters {
    fn name(&self) -> &str {
        &self.name
    }
}

#[async_trait::async_trait]
impl MigrationTrait for CreateInboxDeadLetters {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let statements = schema::statements(
            manager.get_database_backend(),
            &self.outbox,
            Tables::InboxDeadLetters,
        )?;
        schema::execute_all(manager.get_connection(), statements).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let backend = manager.get_database_backend();
        let statements = vec![
            schema::drop_statement(backend, &self.outbox.tables().parked),
            schema::drop_statement(backend, &self.outbox.tables().dead_letters),
        ];
        schema::execute_all(manager.get_connection(), statements).await
    }
}

/// Creates the partitioned consumers' lease and instance tables, see
/// [`crate::inbox::partitioned`].
#[derive(Debug, Clone)]
pub struct CreateConsumerLeases {
    outbox: Outbox,
    name: String,
}

impl CreateConsumerLeases {
    /// The migration for `outbox`'s consumer lease tables, named
    /// `m20261204_000001_create_consumer_leases__<inbox table>`.
    pub fn new(outbox: &Outbox) -> Self {
        Self {
            name: format!(
                "m20261204_000001_create_consumer_leases__{}",
                outbox.inbox_table()
            ),
            outbox: outbox.clone(),
        }
    }
}

impl MigrationName for CreateConsumerLeases {
    fn name(&self) -> &str {
        &self.name
    }
}

#[async_trait::async_trait]
impl MigrationTrait for CreateConsumerLeases {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let statements = schema::statements(
            manager.get_database_backend(),
            &self.outbox,
            Tables::ConsumerLeases,
        )?;
        schema::execute_all(manager.get_connection(), statements).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let backend = manager.get_database_backend();
        let tables = self.outbox.tables();
        let statements = vec![
            schema::drop_statement(backend, &tables.consumer_instances),
            schema::drop_statement(backend, &tables.consumer_leases),
        ];
        schema::execute_all(manager.get_connection(), statements).await
    }
}

/// Creates the log relay's slot and dead-letter tables on one backend (nothing on the
/// others), see the `log` module of [`crate::relay`]: two migrations, because the
/// PostgreSQL one shipped before the log relay read MariaDB, and a MariaDB database that
/// already applied it (as a no-op) gets its tables from the second.
#[derive(Debug, Clone)]
pub struct CreateLogRelayTables {
    outbox: Outbox,
    backend: sea_orm::DbBackend,
    name: String,
}

impl CreateLogRelayTables {
    /// The PostgreSQL migration for `outbox`'s log relay tables, named
    /// `m20261205_000001_create_log_relay_tables__<outbox table>`.
    pub fn new(outbox: &Outbox) -> Self {
        Self {
            name: format!(
                "m20261205_000001_create_log_relay_tables__{}",
                outbox.outbox_table()
            ),
            backend: sea_orm::DbBackend::Postgres,
            outbox: outbox.clone(),
        }
    }

    /// The MariaDB migration for `outbox`'s log relay tables, named
    /// `m20261206_000001_create_log_relay_tables_mariadb__<outbox table>`.
    pub fn mariadb(outbox: &Outbox) -> Self {
        Self {
            name: format!(
                "m20261206_000001_create_log_relay_tables_mariadb__{}",
                outbox.outbox_table()
            ),
            backend: sea_orm::DbBackend::MySql,
            outbox: outbox.clone(),
        }
    }
}

impl MigrationName for CreateLogRelayTables {
    fn name(&self) -> &str {
        &self.name
    }
}

#[async_trait::async_trait]
impl MigrationTrait for CreateLogRelayTables {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        if manager.get_database_backend() != self.backend {
            return Ok(());
        }
        let statements = schema::statements(
            manager.get_database_backend(),
            &self.outbox,
            Tables::LogRelay,
        )?;
        schema::execute_all(manager.get_connection(), statements).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let backend = manager.get_database_backend();
        if backend != self.backend {
            return Ok(());
        }
        let tables = &self.outbox.tables().relay;
        let statements = vec![
            schema::drop_statement(backend, &tables.log_dead_letters),
            schema::drop_statement(backend, &tables.log_slots),
        ];
        schema::execute_all(manager.get_connection(), statements).await
    }
}

/// Creates the scheduled rows' table beside the outbox table (see [`crate::schedule`]).
#[derive(Debug, Clone)]
pub struct CreateScheduledTable {
    outbox: Outbox,
    name: String,
}

impl CreateScheduledTable {
    /// The migration for `outbox`'s scheduled table, named
    /// `m20261207_000001_create_scheduled_table__<table>`.
    pub fn new(outbox: &Outbox) -> Self {
        Self {
            name: format!(
                "m20261207_000001_create_scheduled_table__{}",
                outbox.scheduled_table()
            ),
            outbox: outbox.clone(),
        }
    }
}

impl MigrationName for CreateScheduledTable {
    fn name(&self) -> &str {
        &self.name
    }
}

#[async_trait::async_trait]
impl MigrationTrait for CreateScheduledTable {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let statements = schema::statements(
            manager.get_database_backend(),
            &self.outbox,
            Tables::Scheduled,
        )?;
        schema::execute_all(manager.get_connection(), statements).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let statement = schema::drop_statement(
            manager.get_database_backend(),
            self.outbox.scheduled_table(),
        );
        schema::execute_all(manager.get_connection(), vec![statement]).await
    }
}

/// Creates the periodic jobs' table beside the outbox table (see [`crate::periodic`]).
#[derive(Debug, Clone)]
pub struct CreatePeriodicTable {
    outbox: Outbox,
    name: String,
}

impl CreatePeriodicTable {
    /// The migration for `outbox`'s periodic table, named
    /// `m20261208_000001_create_periodic_table__<table>`.
    pub fn new(outbox: &Outbox) -> Self {
        Self {
            name: format!(
                "m20261208_000001_create_periodic_table__{}",
                outbox.periodic_table()
            ),
            outbox: outbox.clone(),
        }
    }
}

impl MigrationName for CreatePeriodicTable {
    fn name(&self) -> &str {
        &self.name
    }
}

#[async_trait::async_trait]
impl MigrationTrait for CreatePeriodicTable {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let statements = schema::statements(
            manager.get_database_backend(),
            &self.outbox,
            Tables::Periodic,
        )?;
        schema::execute_all(manager.get_connection(), statements).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let statement =
            schema::drop_statement(manager.get_database_backend(), self.outbox.periodic_table());
        schema::execute_all(manager.get_connection(), vec![statement]).await
    }
}

/// Creates the unique jobs' keys table beside the outbox table (see [`Unique`](crate::job::Unique)).
#[derive(Debug, Clone)]
pub struct CreateUniqueTable {
    outbox: Outbox,
    name: String,
}

impl CreateUniqueTable {
    /// The migration for `outbox`'s periodic table, named
    /// `m20261208_000002_create_unique_table__<table>`.
    pub fn new(outbox: &Outbox) -> Self {
        Self {
            name: format!(
                "m20261208_000002_create_unique_table__{}",
                outbox.unique_table()
            ),
            outbox: outbox.clone(),
        }
    }
}

impl MigrationName for CreateUniqueTable {
    fn name(&self) -> &str {
        &self.name
    }
}

#[async_trait::async_trait]
impl MigrationTrait for CreateUniqueTable {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let statements =
            schema::statements(manager.get_database_backend(), &self.outbox, Tables::Unique)?;
        schema::execute_all(manager.get_connection(), statements).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let statement =
            schema::drop_statement(manager.get_database_backend(), self.outbox.unique_table());
        schema::execute_all(manager.get_connection(), vec![statement]).await
    }
}

/// Creates the worker keys' concurrency slots table beside the outbox table (see
/// [`OutboxBuilder::worker_key_limit`](crate::OutboxBuilder::worker_key_limit)).
#[derive(Debug, Clone)]
pub struct CreateWorkerSlotsTable {
    outbox: Outbox,
    name: String,
}

impl CreateWorkerSlotsTable {
    /// The migration for `outbox`'s worker slots table, named
    /// `m20261209_000001_create_worker_slots_table__<table>`.
    pub fn new(outbox: &Outbox) -> Self {
        Self {
            name: format!(
                "m20261209_000001_create_worker_slots_table__{}",
                outbox.worker_slots_table()
            ),
            outbox: outbox.clone(),
        }
    }
}

impl MigrationName for CreateWorkerSlotsTable {
    fn name(&self) -> &str {
        &self.name
    }
}

#[async_trait::async_trait]
impl MigrationTrait for CreateWorkerSlotsTable {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let statements = schema::statements(
            manager.get_database_backend(),
            &self.outbox,
            Tables::WorkerSlots,
        )?;
        schema::execute_all(manager.get_connection(), statements).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let statement = schema::drop_statement(
            manager.get_database_backend(),
            self.outbox.worker_slots_table(),
        );
        schema::execute_all(manager.get_connection(), vec![statement]).await
    }
}

/// Every migration of `outbox`: outbox table, inbox table, relay tables, consumer
/// dead-letter tables, consumer lease tables, log relay tables, the scheduled table, the
/// periodic table, the unique table, the worker slots table.
pub fn migrations(outbox: &Outbox) -> Vec<Box<dyn MigrationTrait>> {
    vec![
        Box::new(CreateOutboxTable::new(outbox)),
        Box::new(CreateInboxTable::new(outbox)),
        Box::new(CreateRelayTables::new(outbox)),
        Box::new(CreateInboxDeadLetters::new(outbox)),
        Box::new(CreateConsumerLeases::new(outbox)),
        Box::new(CreateLogRelayTables::new(outbox)),
        Box::new(CreateLogRelayTables::mariadb(outbox)),
        Box::new(CreateScheduledTable::new(outbox)),
        Box::new(CreatePeriodicTable::new(outbox)),
        Box::new(CreateUniqueTable::new(outbox)),
        Box::new(CreateWorkerSlotsTable::new(outbox)),
    ]
}
