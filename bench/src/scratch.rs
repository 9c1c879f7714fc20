//! The benchmark's own database, and reading a count from it.

/// Errors of the benchmarks.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A database of the benchmark's own on the server of `--database-url`, dropped (with its
/// connections) at the end, so no run depends on another's leftovers.
pub struct ScratchDatabase {
    admin: sea_orm::DatabaseConnection,
    name: String,
    url: String,
}

impl ScratchDatabase {
    /// Creates `outbox_bench_<uuid>` on the server of `server_url` (a PostgreSQL URL with a
    /// database name, which is replaced).
    pub async fn create(server_url: &str) -> Result<Self, BoxError> {
        use sea_orm::ConnectionTrait as _;
        let name = format!("outbox_bench_{}", uuid::Uuid::now_v7().simple());
        let Some((server, _)) = server_url.rsplit_once('/') else {
            return Err("the database URL has no database name".into());
        };
        let url = format!("{server}/{name}");
        let admin = sea_orm::Database::connect(server_url).await?;
        admin
            .execute_unprepared(&format!("CREATE DATABASE {name}"))
            .await?;
        Ok(Self { admin, name, url })
    }

    /// The URL of the scratch database.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Drops the database.
    pub async fn drop(self) -> Result<(), BoxError> {
        use sea_orm::ConnectionTrait as _;
        self.admin
            .execute_unprepared(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ))
            .await?;
        Ok(())
    }
}

/// The single `bigint` of `query`.
pub async fn count(pool: &sea_orm::sqlx::PgPool, query: &'static str) -> Result<i64, BoxError> {
    let row: (i64,) = sea_orm::sqlx::query_as(query).fetch_one(pool).await?;
    Ok(row.0)
}
