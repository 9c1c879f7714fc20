//! Environment overrides: every secret and URL of the file can come from an `OUTBOX_…`
//! variable instead, so that the file can be committed and the secrets injected.
//!
//! | key | variable |
//! |---|---|
//! | `http.listen` | `OUTBOX_HTTP_LISTEN` |
//! | `http.ops_listen` | `OUTBOX_HTTP_OPS_LISTEN` |
//! | `console.user[i].token` | `OUTBOX_CONSOLE_USER_<NAME>_TOKEN` |
//! | `relay[i].database_url` | `OUTBOX_RELAY_<NAME>_DATABASE_URL` |
//! | `relay[i].broker.url` | `OUTBOX_RELAY_<NAME>_BROKER_URL` |
//! | `tenants.catalog_url` | `OUTBOX_TENANTS_CATALOG_URL` |
//! | `tenants.template.database_url` | `OUTBOX_TENANTS_DATABASE_URL` |
//! | `tenants.template.broker.url` | `OUTBOX_TENANTS_BROKER_URL` |
//!
//! `<NAME>` is the user's or relay's `name` in upper case with `-` as `_`. A variable that
//! starts with `OUTBOX_HTTP_`, `OUTBOX_CONSOLE_`, `OUTBOX_RELAY_` or `OUTBOX_TENANTS_` and
//! names no such key
//! (a typo, a relay that is not in the file) is an error, never silently ignored; other
//! `OUTBOX_` variables are not the service's.

use std::collections::BTreeMap;

use super::file::{FileBroker, FileConfig, FileRelay};
use super::problem::Problems;
use super::value::At;

/// The prefixes of the variables the service reads.
const PREFIXES: [&str; 4] = [
    "OUTBOX_HTTP_",
    "OUTBOX_CONSOLE_",
    "OUTBOX_RELAY_",
    "OUTBOX_TENANTS_",
];

/// `name` as it appears in a variable: upper case, `-` as `_`.
pub(crate) fn env_name(name: &str) -> String {
    name.to_ascii_uppercase().replace('-', "_")
}

/// The variables that overrode a value, by key path.
#[derive(Debug, Default)]
pub(crate) struct Overrides {
    by_path: BTreeMap<String, String>,
}

impl Overrides {
    /// Where the value at `path` came from.
    pub(crate) fn at(&self, path: &str) -> At {
        match self.by_path.get(path) {
            Some(var) => At::env(path, var),
            None => At::file(path),
        }
    }

    /// The variables used, in order.
    pub(crate) fn variables(&self) -> Vec<String> {
        let mut variables: Vec<String> = self.by_path.values().cloned().collect();
        variables.sort();
        variables
    }
}

/// Applies the `OUTBOX_…` variables of `env` to the file (and its relays, read on their
/// own); a variable that names no key is a problem.
pub(crate) fn apply(
    env: &BTreeMap<String, String>,
    file: &mut FileConfig,
    relays: &mut [Option<FileRelay>],
    problems: &mut Problems,
) -> Overrides {
    let mut unused: BTreeMap<&str, &str> = env
        .iter()
        .filter(|(var, _)| PREFIXES.iter().any(|prefix| var.starts_with(prefix)))
        .map(|(var, value)| (var.as_str(), value.as_str()))
        .collect();
    let mut overrides = Overrides::default();
    let mut take = |var: String, path: String| -> Option<String> {
        let value = unused.remove(var.as_str())?;
        overrides.by_path.insert(path, var);
        Some(value.to_owned())
    };
    if let Some(value) = take("OUTBOX_HTTP_LISTEN".into(), "http.listen".into()) {
        file.http.listen = Some(value);
    }
    if let Some(value) = take("OUTBOX_HTTP_OPS_LISTEN".into(), "http.ops_listen".into()) {
        file.http.ops_listen = Some(value);
    }
    for (index, user) in file.console.user.iter_mut().enumerate() {
        let Some(name) = &user.name else { continue };
        let var = format!("OUTBOX_CONSOLE_USER_{}_TOKEN", env_name(name));
        if let Some(value) = take(var, format!("console.user[{index}].token")) {
            user.token = Some(value);
        }
    }
    for (index, relay) in relays.iter_mut().enumerate() {
        let Some(relay) = relay else { continue };
        let Some(name) = &relay.name else { continue };
        let name = env_name(name);
        let var = format!("OUTBOX_RELAY_{name}_DATABASE_URL");
        if let Some(value) = take(var, format!("relay[{index}].database_url")) {
            relay.database_url = Some(value);
        }
        let var = format!("OUTBOX_RELAY_{name}_BROKER_URL");
        if let Some(value) = take(var, format!("relay[{index}].broker.url")) {
            relay.broker.get_or_insert_with(FileBroker::default).url = Some(value);
        }
    }
    if let Some(value) = take(
        "OUTBOX_TENANTS_CATALOG_URL".into(),
        "tenants.catalog_url".into(),
    ) {
        file.tenants
            .get_or_insert_with(Default::default)
            .catalog_url = Some(value);
    }
    for (var, key) in [
        ("OUTBOX_TENANTS_DATABASE_URL", "database_url"),
        ("OUTBOX_TENANTS_BROKER_URL", "broker.url"),
    ] {
        let Some(value) = take(var.into(), format!("tenants.template.{key}")) else {
            continue;
        };
        let tenants = file.tenants.get_or_insert_with(Default::default);
        let template = tenants.template.get_or_insert_with(Default::default);
        let value = toml::Value::String(value);
        match key.split_once('.') {
            None => {
                template.insert(key.to_owned(), value);
            }
            Some((table, last)) => {
                let entry = template
                    .entry(table.to_owned())
                    .or_insert_with(|| toml::Value::Table(toml::Table::new()));
                if !entry.is_table() {
                    *entry = toml::Value::Table(toml::Table::new());
                }
                if let toml::Value::Table(inner) = entry {
                    inner.insert(last.to_owned(), value);
                }
            }
        }
    }
    for var in unused.keys() {
        problems.add(
            format!("environment variable {var}"),
            "names no setting of this file: the variables are OUTBOX_HTTP_LISTEN, \
             OUTBOX_HTTP_OPS_LISTEN, OUTBOX_CONSOLE_USER_<NAME>_TOKEN, \
             OUTBOX_RELAY_<NAME>_DATABASE_URL and OUTBOX_RELAY_<NAME>_BROKER_URL, for the \
             users and relays the file names, and OUTBOX_TENANTS_CATALOG_URL, \
             OUTBOX_TENANTS_DATABASE_URL and OUTBOX_TENANTS_BROKER_URL",
        );
    }
    overrides
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_relay() {
        assert_eq!(env_name("orders-eu_1"), "ORDERS_EU_1");
    }

    #[test]
    fn overrides_set_values_and_unknown_variables_are_problems() {
        let env: BTreeMap<String, String> = [
            (
                "OUTBOX_RELAY_ORDERS_EU_DATABASE_URL",
                "postgres://db/orders",
            ),
            ("OUTBOX_RELAY_ORDERS_EU_BROKER_URL", "nats://n:4222"),
            ("OUTBOX_RELAY_ORDRES_EU_DATABASE_URL", "postgres://typo"),
            ("OUTBOX_HTTP_LISTEN", "0.0.0.0:8080"),
            ("OUTBOX_REQUIRE_SERVICES", "1"),
            ("PATH", "/bin"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let mut file = FileConfig::default();
        let mut relays = vec![Some(FileRelay {
            name: Some("orders-eu".into()),
            database_url: Some("postgres://file".into()),
            ..FileRelay::default()
        })];
        let mut problems = Problems::default();
        let overrides = apply(&env, &mut file, &mut relays, &mut problems);
        let relay = relays[0].as_ref().unwrap();
        assert_eq!(relay.database_url.as_deref(), Some("postgres://db/orders"));
        assert_eq!(
            relay.broker.as_ref().unwrap().url.as_deref(),
            Some("nats://n:4222")
        );
        assert_eq!(file.http.listen.as_deref(), Some("0.0.0.0:8080"));
        assert_eq!(
            overrides.at("relay[0].database_url").name(),
            "relay[0].database_url (from OUTBOX_RELAY_ORDERS_EU_DATABASE_URL)"
        );
        assert_eq!(overrides.variables().len(), 3);
        let error = problems.finish(|| ()).unwrap_err();
        assert_eq!(error.problems.len(), 1, "{error}");
        assert_eq!(
            error.problems[0].path,
            "environment variable OUTBOX_RELAY_ORDRES_EU_DATABASE_URL"
        );
    }
}
