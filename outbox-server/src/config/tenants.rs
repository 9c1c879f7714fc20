//! `[tenants]`: relays the service reads **while it runs**, from a directory of tenant
//! files and/or a catalog table in a control database. Each entry is merged over the
//! `[tenants.template]` (a `[[relay]]` body; `{tenant}` in its strings becomes the tenant's
//! name) and checked exactly as a `[[relay]]` is ([`TenantsSettings::check`]).
//!
//! ```toml
//! [tenants]
//! directory = "/etc/outbox/tenants"     # acme.toml, globex.toml, …: each a [[relay]] body
//! catalog_url = "postgres://control@db:5432/control"   # or OUTBOX_TENANTS_CATALOG_URL
//! catalog_table = "outbox_tenants"      # name, database_url, settings (TOML text)
//! refresh_interval = "5s"
//!
//! [tenants.template]
//! database_url = "postgres://relay@db:5432/{tenant}"   # or OUTBOX_TENANTS_DATABASE_URL
//! poll_interval = "500ms"
//! [tenants.template.broker]
//! kind = "nats"
//! url = "nats://nats:4222"                               # or OUTBOX_TENANTS_BROKER_URL
//! route = { kind = "event_type", prefix = "{tenant}." }
//! ```

use std::path::PathBuf;
use std::time::Duration;

use super::env::Overrides;
use super::file::{FileRelay, FileTenants};
use super::problem::{ConfigError, Problems};
use super::read::read;
use super::relay::{self, RelaySettings};
use super::secret::{Secret, redacted_url};
use super::value::positive_duration;

/// How often the sources are read again unless `refresh_interval` says otherwise.
pub const DEFAULT_REFRESH_INTERVAL: Duration = Duration::from_secs(5);

/// The catalog table unless `catalog_table` says otherwise.
pub const DEFAULT_CATALOG_TABLE: &str = "outbox_tenants";

/// The most tenants a source may list: a larger directory or catalog is refused whole (its
/// last good list keeps running), never read without a bound.
pub const MAX_TENANTS: usize = 10_000;

/// The largest tenant file, or `settings` text of a catalog row, in bytes.
pub const MAX_ENTRY_BYTES: usize = 64 * 1024;

/// The placeholder the template's strings replace with the tenant's name.
pub const TENANT_PLACEHOLDER: &str = "{tenant}";

/// Where the tenants come from, and how each becomes a relay.
#[derive(Clone)]
#[non_exhaustive]
pub struct TenantsSettings {
    /// A directory of `<name>.toml` files, each the body of a `[[relay]]` (without the
    /// `[[relay]]` line); other files are ignored.
    pub directory: Option<PathBuf>,
    /// The catalog table in a control database.
    pub catalog: Option<CatalogSettings>,
    /// How often the sources are read again (default 5 s): a change shows in `/readyz`,
    /// `/metrics` and the console within two of these.
    pub refresh_interval: Duration,
    /// The `[[relay]]` body every entry is merged over (may hold secrets: not in `Debug`).
    template: toml::Table,
}

impl std::fmt::Debug for TenantsSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TenantsSettings")
            .field("directory", &self.directory)
            .field("catalog", &self.catalog)
            .field("refresh_interval", &self.refresh_interval)
            .field("template_keys", &self.template.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// The catalog: a table with one row per tenant.
///
/// ```sql
/// CREATE TABLE outbox_tenants (
///     name         VARCHAR(63) PRIMARY KEY,  -- the relay's name: a-z 0-9 _ -
///     database_url TEXT,                     -- NULL: the template's
///     settings     TEXT                      -- NULL, or TOML: a [[relay]] body
/// );
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CatalogSettings {
    /// The control database (PostgreSQL, MariaDB or SQLite).
    pub url: Secret,
    /// The table: `name` or `schema.name`.
    pub table: String,
}

impl TenantsSettings {
    /// The entry of tenant `name` merged over the template: the template's strings with
    /// `{tenant}` replaced by `name`, the entry's values over them (tables merged key by
    /// key, anything else replaced), and `name` set. Two entries that merge to the same
    /// table describe the same relay.
    pub fn merged(&self, name: &str, entry: &toml::Table) -> toml::Table {
        let mut merged = self.template.clone();
        for (_, value) in merged.iter_mut() {
            substitute(value, name);
        }
        merge(&mut merged, entry);
        merged.insert("name".into(), toml::Value::String(name.to_owned()));
        merged
    }

    /// Checks a merged entry (see [`Self::merged`]) of tenant `name` as a `[[relay]]`; its
    /// problems' key paths begin with `tenant[<name>]`.
    ///
    /// # Errors
    /// [`ConfigError`] with every problem of the entry.
    pub fn check(
        &self,
        name: &str,
        entry: &toml::Table,
        merged: toml::Table,
    ) -> Result<RelaySettings, ConfigError> {
        let path = format!("tenant[{name}]");
        let mut problems = Problems::default();
        if let Some(given) = entry.get("name")
            && given.as_str() != Some(name)
        {
            problems.add(
                format!("{path}.name"),
                format!("is {given}, but the tenant is `{name}` (leave `name` out: the file or catalog row names it)"),
            );
        }
        let file: Option<FileRelay> = read(toml::Value::Table(merged), &path, &mut problems);
        let settings = file
            .as_ref()
            .and_then(|file| relay::check(file, &path, &Overrides::default(), &mut problems));
        problems.finish(|| ())?;
        settings.ok_or_else(|| ConfigError::one(path, "is not a relay's settings"))
    }
}

/// Replaces the placeholder in every string of `value`.
fn substitute(value: &mut toml::Value, name: &str) {
    match value {
        toml::Value::String(text) => *text = text.replace(TENANT_PLACEHOLDER, name),
        toml::Value::Array(values) => values.iter_mut().for_each(|v| substitute(v, name)),
        toml::Value::Table(table) => table.iter_mut().for_each(|(_, v)| substitute(v, name)),
        _ => {}
    }
}

/// `over`'s values over `base`'s: tables merged key by key, anything else replaced.
fn merge(base: &mut toml::Table, over: &toml::Table) {
    for (key, value) in over {
        match (base.get_mut(key), value) {
            (Some(toml::Value::Table(base)), toml::Value::Table(over)) => merge(base, over),
            _ => {
                base.insert(key.clone(), value.clone());
            }
        }
    }
}

/// Checks `[tenants]` (with the environment's overrides applied already).
pub(crate) fn check(
    file: Option<&FileTenants>,
    overrides: &Overrides,
    problems: &mut Problems,
) -> Option<Option<TenantsSettings>> {
    let Some(file) = file else {
        return Some(None);
    };
    let before = problems.len();
    if file.directory.is_none() && file.catalog_url.is_none() {
        problems.add(
            "tenants",
            "missing: `directory` (tenant files) or `catalog_url` (a catalog table), or both",
        );
    }
    let directory = file.directory.as_ref().map(PathBuf::from);
    let table = file
        .catalog_table
        .clone()
        .unwrap_or_else(|| DEFAULT_CATALOG_TABLE.to_owned());
    if !catalog_table_ok(&table) {
        problems.add(
            "tenants.catalog_table",
            format!("`{table}` is not a table name: `name` or `schema.name`, each 1 to 63 of `A-Z a-z 0-9 _`, not starting with a digit"),
        );
    }
    let catalog = match &file.catalog_url {
        Some(url) => {
            if let Some(problem) = catalog_url_problem(url) {
                problems.add(overrides.at("tenants.catalog_url").name(), problem);
            }
            Some(CatalogSettings {
                url: Secret::new(url.clone()),
                table,
            })
        }
        None => {
            if file.catalog_table.is_some() {
                problems.add(
                    "tenants.catalog_table",
                    "only with `catalog_url` (the database the table is in)",
                );
            }
            None
        }
    };
    let refresh_interval = match &file.refresh_interval {
        Some(text) => positive_duration(problems, "tenants.refresh_interval", text),
        None => Some(DEFAULT_REFRESH_INTERVAL),
    };
    let template = file.template.clone().unwrap_or_default();
    if template.contains_key("name") {
        problems.add(
            "tenants.template.name",
            "each tenant's name comes from its file or catalog row",
        );
    }
    // Its types and keys now; the rest once merged with each entry.
    let _: Option<FileRelay> = read(
        toml::Value::Table(template.clone()),
        "tenants.template",
        problems,
    );
    if problems.len() > before {
        return None;
    }
    Some(Some(TenantsSettings {
        directory,
        catalog,
        refresh_interval: refresh_interval?,
        template,
    }))
}

/// `name` or `schema.name`, each part an identifier.
fn catalog_table_ok(table: &str) -> bool {
    let parts: Vec<&str> = table.split('.').collect();
    parts.len() <= 2
        && parts.iter().all(|part| {
            (1..=63).contains(&part.len())
                && !part.starts_with(|c: char| c.is_ascii_digit())
                && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
}

/// What is wrong with the catalog's URL, if anything.
fn catalog_url_problem(url: &str) -> Option<String> {
    match url::Url::parse(url) {
        Err(error) => Some(format!(
            "`{}` is not a URL ({error}); write e.g. `postgres://user@host:5432/control`",
            redacted_url(url)
        )),
        Ok(parsed) => match parsed.scheme() {
            "postgres" | "postgresql" | "mysql" | "mariadb" | "sqlite" => None,
            scheme => Some(format!(
                "scheme `{scheme}://` is not a database the service reads: `postgres://`, `mysql://`, `mariadb://` or `sqlite://`"
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(template: &str) -> TenantsSettings {
        TenantsSettings {
            directory: None,
            catalog: None,
            refresh_interval: DEFAULT_REFRESH_INTERVAL,
            template: toml::from_str(template).unwrap_or_default(),
        }
    }

    #[test]
    fn an_entry_merges_over_the_template_with_the_name_in_its_strings() {
        let tenants = settings(
            r#"
database_url = "postgres://relay@db/{tenant}"
batch_size = 100
[broker]
kind = "nats"
url = "nats://n:4222"
route = { kind = "event_type", prefix = "{tenant}." }
"#,
        );
        let entry: toml::Table = toml::from_str(
            r#"
batch_size = 10
[broker.route]
prefix = "special."
"#,
        )
        .unwrap_or_default();
        let merged = tenants.merged("acme", &entry);
        assert_eq!(
            merged["database_url"].as_str(),
            Some("postgres://relay@db/acme")
        );
        assert_eq!(merged["batch_size"].as_integer(), Some(10));
        assert_eq!(
            merged["broker"]["route"]["prefix"].as_str(),
            Some("special.")
        );
        assert_eq!(
            merged["broker"]["route"]["kind"].as_str(),
            Some("event_type")
        );
        assert_eq!(merged["broker"]["url"].as_str(), Some("nats://n:4222"));
        let relay = tenants.check("acme", &entry, merged);
        let relay = relay.map_err(|error| error.to_string());
        assert_eq!(relay.as_ref().map(|r| r.name.as_str()), Ok("acme"));
    }

    #[test]
    fn a_bad_entry_names_its_tenant_and_key() {
        let tenants = settings(r#"database_url = "postgres://relay@db/{tenant}""#);
        let entry: toml::Table =
            toml::from_str("name = \"other\"\nbatch_size = \"many\"\nbatch_sizes = 1")
                .unwrap_or_default();
        let merged = tenants.merged("acme", &entry);
        let error = tenants.check("acme", &entry, merged).unwrap_err();
        for path in [
            "tenant[acme].name",
            "tenant[acme].batch_size",
            "tenant[acme].batch_sizes",
            "tenant[acme].broker",
        ] {
            assert!(error.about(path).is_some(), "{path} in {error}");
        }
    }

    #[test]
    fn catalog_tables_are_identifiers() {
        assert!(catalog_table_ok("outbox_tenants"));
        assert!(catalog_table_ok("control.tenants"));
        for bad in ["", "a.b.c", "1x", "x;drop", "x\"y", "a b"] {
            assert!(!catalog_table_ok(bad), "{bad}");
        }
    }
}
