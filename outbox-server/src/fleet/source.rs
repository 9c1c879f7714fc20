//! Where the tenants come from: a directory of tenant files ([`read_directory`]) and a
//! catalog table in a control database ([`Catalog`]). Both are read whole and bounded
//! ([`MAX_TENANTS`] entries, [`MAX_ENTRY_BYTES`] each); an entry that cannot be read keeps
//! its name, so that its problem is reported against its tenant.

use std::path::Path;
use std::time::Duration;

use sea_orm::{ConnectOptions, ConnectionTrait as _, Database, DatabaseConnection, DbBackend};

use crate::config::{CatalogSettings, MAX_ENTRY_BYTES, MAX_TENANTS, redacted_url};

/// How long connecting to the catalog's database, or reading the catalog, may take.
const CATALOG_TIMEOUT: Duration = Duration::from_secs(5);

/// One tenant as its source lists it.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Its name (the file's stem, or the catalog row's `name`).
    pub name: String,
    /// Where it comes from: `file <path>` or `catalog <table>`.
    pub origin: String,
    /// Its `[[relay]]` body, or why it cannot be read.
    pub body: Result<toml::Table, String>,
}

/// The `<name>.toml` files of `directory`, in name order (other files are not tenants).
///
/// # Errors
/// The directory cannot be listed, or it holds more than [`MAX_TENANTS`] tenant files.
pub fn read_directory(directory: &Path) -> Result<Vec<Entry>, String> {
    let listing = std::fs::read_dir(directory)
        .map_err(|error| format!("cannot read directory {}: {error}", directory.display()))?;
    let mut entries = Vec::new();
    for file in listing {
        let file = file
            .map_err(|error| format!("cannot read directory {}: {error}", directory.display()))?;
        let path = file.path();
        let file_name = file.file_name();
        let file_name = file_name.to_string_lossy();
        // Hidden files are an editor's or a deployment tool's work in progress.
        let Some(name) = file_name.strip_suffix(".toml") else {
            continue;
        };
        if name.starts_with('.') || !path.is_file() {
            continue;
        }
        if entries.len() == MAX_TENANTS {
            return Err(format!(
                "directory {} holds more than {MAX_TENANTS} tenant files",
                directory.display()
            ));
        }
        entries.push(Entry {
            name: name.to_owned(),
            origin: format!("file {}", path.display()),
            body: read_file(&path),
        });
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(entries)
}

/// One tenant file, bounded.
fn read_file(path: &Path) -> Result<toml::Table, String> {
    let size = std::fs::metadata(path)
        .map_err(|error| format!("cannot read it: {error}"))?
        .len();
    if size > MAX_ENTRY_BYTES as u64 {
        return Err(format!(
            "{size} bytes: a tenant file holds at most {MAX_ENTRY_BYTES}"
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|error| format!("cannot read it: {error}"))?;
    parse(&text)
}

/// A `[[relay]]` body.
fn parse(text: &str) -> Result<toml::Table, String> {
    toml::from_str(text).map_err(|error| format!("not valid TOML: {}", error.message().trim()))
}

/// The catalog table, read through a connection of its own (opened again after a failure).
#[derive(Debug)]
pub struct Catalog {
    settings: CatalogSettings,
    db: Option<DatabaseConnection>,
}

impl Catalog {
    /// The catalog of `settings`, not connected yet.
    pub fn new(settings: CatalogSettings) -> Self {
        Self { settings, db: None }
    }

    /// Where entries come from: `catalog <table>`.
    pub fn origin(&self) -> String {
        format!("catalog {}", self.settings.table)
    }

    /// Every row, in name order.
    ///
    /// # Errors
    /// The database cannot be reached or read within 5 s, or the table holds more than
    /// [`MAX_TENANTS`] rows.
    pub async fn read(&mut self) -> Result<Vec<Entry>, String> {
        let read = tokio::time::timeout(CATALOG_TIMEOUT, self.read_rows()).await;
        let result = read.unwrap_or_else(|_| {
            Err(format!(
                "the catalog did not answer within {CATALOG_TIMEOUT:?}"
            ))
        });
        if result.is_err() {
            // A new connection next time: this one may be the problem.
            self.db = None;
        }
        result
    }

    async fn read_rows(&mut self) -> Result<Vec<Entry>, String> {
        let db = match &self.db {
            Some(db) => db.clone(),
            None => {
                let url = self.settings.url.expose();
                let mut options = ConnectOptions::new(url.to_owned());
                options
                    .max_connections(1)
                    .min_connections(0)
                    .connect_timeout(CATALOG_TIMEOUT)
                    .acquire_timeout(CATALOG_TIMEOUT)
                    .sqlx_logging(false);
                let db = Database::connect(options)
                    .await
                    .map_err(|error| format!("catalog database {}: {error}", redacted_url(url)))?;
                self.db = Some(db.clone());
                db
            }
        };
        let backend = db.get_database_backend();
        let sql = format!(
            "SELECT name, database_url, settings FROM {} ORDER BY name LIMIT {}",
            quoted_table(backend, &self.settings.table),
            MAX_TENANTS + 1
        );
        let rows = db
            .query_all_raw(sea_orm::Statement::from_string(backend, sql))
            .await
            .map_err(|error| format!("reading {}: {error}", self.settings.table))?;
        if rows.len() > MAX_TENANTS {
            return Err(format!(
                "{} holds more than {MAX_TENANTS} tenants",
                self.settings.table
            ));
        }
        let origin = self.origin();
        let mut entries = Vec::with_capacity(rows.len());
        for row in rows {
            let column = |name: &str| -> Result<Option<String>, String> {
                row.try_get::<Option<String>>("", name)
                    .map_err(|error| format!("column {name}: {error}"))
            };
            let name = column("name")?.unwrap_or_default();
            let body = entry_body(column("database_url")?, column("settings")?);
            entries.push(Entry {
                name,
                origin: origin.clone(),
                body,
            });
        }
        Ok(entries)
    }
}

/// A catalog row's body: its `settings`, with its `database_url` over them.
fn entry_body(
    database_url: Option<String>,
    settings: Option<String>,
) -> Result<toml::Table, String> {
    let mut body = match settings {
        Some(text) if text.len() > MAX_ENTRY_BYTES => {
            return Err(format!(
                "settings of {} bytes: at most {MAX_ENTRY_BYTES}",
                text.len()
            ));
        }
        Some(text) => parse(&text).map_err(|error| format!("settings: {error}"))?,
        None => toml::Table::new(),
    };
    if let Some(url) = database_url {
        body.insert("database_url".into(), toml::Value::String(url));
    }
    Ok(body)
}

/// `table` (`name` or `schema.name`, checked as identifiers by the configuration) quoted
/// for `backend`.
fn quoted_table(backend: DbBackend, table: &str) -> String {
    let quote = match backend {
        DbBackend::MySql => '`',
        _ => '"',
    };
    table
        .split('.')
        .map(|part| format!("{quote}{part}{quote}"))
        .collect::<Vec<_>>()
        .join(".")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_lists_its_toml_files_by_name_and_reads_each_on_its_own() {
        let dir = tempfile::tempdir().unwrap_or_else(|error| panic!("{error}"));
        let write = |name: &str, text: &str| {
            std::fs::write(dir.path().join(name), text).unwrap_or_else(|error| panic!("{error}"))
        };
        write("globex.toml", "batch_size = 5");
        write("acme.toml", "batch_size = [");
        write(".initech.toml", "batch_size = 5");
        write("README.md", "not a tenant");
        write("huge.toml", &"#".repeat(MAX_ENTRY_BYTES + 1));
        let entries = read_directory(dir.path()).unwrap_or_else(|error| panic!("{error}"));
        let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["acme", "globex", "huge"]);
        assert!(
            entries[0]
                .body
                .as_ref()
                .is_err_and(|e| e.starts_with("not valid TOML"))
        );
        assert!(entries[1].body.is_ok());
        assert!(
            entries[2]
                .body
                .as_ref()
                .is_err_and(|e| e.contains("at most 65536"))
        );
        assert!(read_directory(&dir.path().join("missing")).is_err());
    }

    #[test]
    fn a_catalog_row_is_its_settings_with_its_url_over_them() {
        let body = entry_body(
            Some("postgres://db/acme".into()),
            Some("database_url = \"x\"\nbatch_size = 7".into()),
        );
        let body = body.unwrap_or_default();
        assert_eq!(body["database_url"].as_str(), Some("postgres://db/acme"));
        assert_eq!(body["batch_size"].as_integer(), Some(7));
        assert!(entry_body(None, Some("x = ".into())).is_err());
        assert!(entry_body(None, None).is_ok_and(|body| body.is_empty()));
        assert_eq!(quoted_table(DbBackend::MySql, "c.t"), "`c`.`t`");
        assert_eq!(quoted_table(DbBackend::Postgres, "t"), "\"t\"");
    }
}
