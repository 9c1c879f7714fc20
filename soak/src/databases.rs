//! The soak's two databases: the producer's (its `soak_orders` table and the outbox; on
//! PostgreSQL, or on the soak's binlog-enabled MariaDB for the log relay) and the
//! consumers' on MariaDB (the inbox and their `soak_effects` table). Both are made for one
//! soak and dropped after it.

use std::time::Duration;

use outbox_seaorm::{Outbox, schema};
use sea_orm::{ConnectOptions, ConnectionTrait, Database, DatabaseConnection, DbErr, Statement};

/// The soak's databases on the two servers.
#[derive(Debug, Clone)]
pub struct Databases {
    /// The producer's server, without a database (`postgres://…:5432`, `mysql://…`).
    producer_server: String,
    /// The server's URL without a database (`mysql://…:3306`).
    mariadb_server: String,
    /// The databases' name (the same on both servers).
    name: String,
}

impl Databases {
    /// Names the databases of a soak.
    pub fn new(producer_server: &str, mariadb_server: &str, name: &str) -> Self {
        Self {
            producer_server: producer_server.trim_end_matches('/').to_owned(),
            mariadb_server: mariadb_server.trim_end_matches('/').to_owned(),
            name: name.to_owned(),
        }
    }

    /// The databases' name (the same on both servers).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the producer's server is a MariaDB (the log relay's binlog server).
    fn producer_on_mariadb(&self) -> bool {
        self.producer_server.starts_with("mysql:")
    }

    /// The producer server's own database (`postgres`, or MariaDB's `mysql`), for what is
    /// done from outside the soak's (creating and dropping it, cutting the relays'
    /// connections).
    pub fn producer_admin_url(&self) -> String {
        let database = if self.producer_on_mariadb() {
            "mysql"
        } else {
            "postgres"
        };
        format!("{}/{database}", self.producer_server)
    }

    /// The producer's database.
    pub fn producer_url(&self) -> String {
        format!("{}/{}", self.producer_server, self.name)
    }

    /// The consumers' database.
    pub fn mariadb_url(&self) -> String {
        format!("{}/{}", self.mariadb_server, self.name)
    }

    /// Creates both databases and their tables.
    ///
    /// # Errors
    /// The database's error.
    pub async fn create(&self, outbox: &Outbox) -> Result<(), DbErr> {
        let server = connect(&self.producer_admin_url(), 1).await?;
        server
            .execute_unprepared(&format!("CREATE DATABASE {}", self.name))
            .await?;
        server.close().await?;
        let server = connect(&self.mariadb_server, 1).await?;
        server
            .execute_unprepared(&format!("CREATE DATABASE {}", self.name))
            .await?;
        server.close().await?;

        let producer = connect(&self.producer_url(), 1).await?;
        schema::install(&producer, outbox).await?;
        producer
            .execute_unprepared(
                "CREATE TABLE soak_orders (customer_id VARCHAR(64) NOT NULL, \
                 order_no INTEGER NOT NULL, PRIMARY KEY (customer_id, order_no))",
            )
            .await?;
        producer.close().await?;

        let consumer = connect(&self.mariadb_url(), 1).await?;
        schema::install(&consumer, outbox).await?;
        consumer
            .execute_unprepared(
                "CREATE TABLE soak_effects (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, \
                 customer_id VARCHAR(64) NOT NULL, order_no INTEGER NOT NULL, \
                 message_id VARCHAR(36) NOT NULL)",
            )
            .await?;
        consumer.close().await?;
        Ok(())
    }

    /// Drops both databases (what is still connected to them is disconnected first).
    ///
    /// # Errors
    /// The database's error.
    pub async fn drop_all(&self) -> Result<(), DbErr> {
        let server = connect(&self.producer_admin_url(), 1).await?;
        let force = if self.producer_on_mariadb() {
            ""
        } else {
            " WITH (FORCE)"
        };
        server
            .execute_unprepared(&format!("DROP DATABASE IF EXISTS {}{force}", self.name))
            .await?;
        server.close().await?;
        let server = connect(&self.mariadb_server, 1).await?;
        server
            .execute_unprepared(&format!("DROP DATABASE IF EXISTS {}", self.name))
            .await?;
        server.close().await?;
        Ok(())
    }
}

/// A pool of at most `connections` connections to `url`, with timeouts short enough that
/// a killed server or a terminated backend shows up as errors within seconds.
///
/// # Errors
/// The database's error.
pub async fn connect(url: &str, connections: u32) -> Result<DatabaseConnection, DbErr> {
    let mut options = ConnectOptions::new(url.to_owned());
    options
        .max_connections(connections)
        .min_connections(0)
        .acquire_timeout(Duration::from_secs(5))
        .connect_timeout(Duration::from_secs(5))
        .sqlx_logging(false);
    Database::connect(options).await
}

/// The first column of the first row of `sql`, an integer.
///
/// # Errors
/// The database's error, or [`DbErr::RecordNotFound`] without a row.
pub async fn count(db: &DatabaseConnection, sql: &str) -> Result<i64, DbErr> {
    let row = db
        .query_one_raw(Statement::from_string(db.get_database_backend(), sql))
        .await?
        .ok_or_else(|| DbErr::RecordNotFound(sql.to_owned()))?;
    row.try_get_by_index::<i64>(0)
}
