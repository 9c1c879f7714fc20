//! The configuration file as a user writes it: what it accepts, and every problem it
//! reports, each with its key path; `outbox check-config` on good and bad files.

#![allow(clippy::unwrap_used)]

use std::process::Command;
use std::time::Duration;

use outbox_server::ServerConfig;
use outbox_server::config::{BrokerKind, RelayMethod, Role, RouteSettings};

const EXAMPLE: &str = include_str!("../outbox.example.toml");

fn example_env() -> Vec<(&'static str, &'static str)> {
    vec![
        ("OUTBOX_CONSOLE_USER_ANA_TOKEN", "ana-token-0123456789"),
        (
            "OUTBOX_CONSOLE_USER_ONCALL_TOKEN",
            "oncall-token-0123456789",
        ),
    ]
}

#[test]
fn the_example_file_reads() {
    let config = ServerConfig::builder()
        .toml(EXAMPLE)
        .env(example_env())
        .build()
        .unwrap();
    assert_eq!(config.http.listen.to_string(), "127.0.0.1:8080");
    assert_eq!(
        config.http.ops_listen.unwrap().to_string(),
        "127.0.0.1:9464"
    );
    assert!(config.console.enabled);
    assert_eq!(config.console.session_ttl, Duration::from_secs(8 * 3600));
    let users: Vec<(&str, Role)> = config
        .console
        .users
        .iter()
        .map(|user| (user.name.as_str(), user.role))
        .collect();
    assert_eq!(users, [("ana", Role::Operator), ("oncall", Role::Reader)]);
    assert_eq!(
        config.console.users[0].token.expose(),
        "ana-token-0123456789"
    );
    assert_eq!(config.relays.len(), 2);
    let ordering = &config.relays[0];
    assert_eq!(ordering.name, "ordering");
    assert!(matches!(ordering.method, RelayMethod::Polling));
    assert_eq!(ordering.relay.batch_size, 100);
    assert_eq!(ordering.relay.poll_interval, Duration::from_millis(500));
    assert_eq!(ordering.relay.schedule_interval, Duration::from_millis(250));
    assert_eq!(ordering.relay.retention, Some(Duration::ZERO));
    assert_eq!(ordering.broker.kind, BrokerKind::Nats);
    assert_eq!(ordering.broker.stream.as_ref().unwrap().name, "BOOKSTORE");
    assert_eq!(
        ordering.broker.route,
        RouteSettings::EventType {
            prefix: String::new()
        }
    );
    let labels: Vec<(&str, &str)> = ordering
        .outbox
        .metric_labels()
        .iter()
        .map(|label| (label.key(), label.value()))
        .collect();
    assert_eq!(labels, [("outbox", "outbox"), ("relay", "ordering")]);
    let acme = &config.relays[1];
    let RelayMethod::Log(log) = &acme.method else {
        panic!("{:?}", acme.method)
    };
    assert_eq!(log.slot, "acme_outbox");
    assert_eq!(log.batch_size, 1000);
    assert_eq!(log.schedule_interval, Duration::from_secs(2));
    assert_eq!(
        log.lease_ttl,
        outbox_seaorm::relay::log::config::DEFAULT_LEASE_TTL,
        "the log relay keeps its own default"
    );
    assert_eq!(log.instance_id, acme.relay.instance_id);
    assert_eq!(
        log.connection_url, None,
        "the URL is a secret, given at start"
    );
    assert_eq!(acme.broker.exchange.as_deref(), Some("bookstore"));
    assert_eq!(acme.outbox.write_mode().as_str(), "table");
    assert_eq!(
        config.overridden_by,
        [
            "OUTBOX_CONSOLE_USER_ANA_TOKEN",
            "OUTBOX_CONSOLE_USER_ONCALL_TOKEN"
        ]
    );
    // Secrets never show in debug output.
    let debug = format!("{config:?}");
    assert!(!debug.contains("ana-token"), "{debug}");
}

#[test]
fn the_environment_overrides_urls() {
    let mut env = example_env();
    env.push((
        "OUTBOX_RELAY_TENANT_ACME_DATABASE_URL",
        "postgres://acme@db.internal/acme",
    ));
    env.push((
        "OUTBOX_RELAY_ORDERING_BROKER_URL",
        "nats://nats.internal:4222",
    ));
    env.push(("OUTBOX_HTTP_LISTEN", "0.0.0.0:8081"));
    let config = ServerConfig::builder()
        .toml(EXAMPLE)
        .env(env)
        .build()
        .unwrap();
    assert_eq!(
        config.relays[1].database_url.expose(),
        "postgres://acme@db.internal/acme"
    );
    assert_eq!(
        config.relays[0].broker.url.expose(),
        "nats://nats.internal:4222"
    );
    assert_eq!(config.http.listen.to_string(), "0.0.0.0:8081");
}

/// A file with a mistake in nearly every section: each is reported, with its path.
#[test]
fn every_problem_is_reported_with_its_key_path() {
    let file = r#"
lisen = "oops"

[http]
listen = "localhost"

[[console.user]]
name = "bob"
role = "admin"
token = "short"

[[relay]]
name = "orders"
database_url = "postgres://db/orders"
outbox_table = "out;box"
method = "cdc"
batch_size = 0
lease_ttl = "soon"
retries = 3
[relay.broker]
kind = "nats"
url = "http://nats:4222"
exchange = "events"

[[relay]]
name = "orders"
database_url = "oracle://db"
[relay.broker]
kind = "kafka"
url = "kafka1,kafka2:9092"
route = { kind = "fixed" }

[[relay]]
name = "Bad Name"
batch_size = "many"

[[relay]]
name = "acme"
database_url = "sqlite:///var/lib/acme.db"
method = "log"
[relay.log]
slot = "Acme-Slot"
[relay.broker]
kind = "rabbitmq"
url = "amqp://guest:guest@rabbit:5672/%2f"
"#;
    let error = ServerConfig::builder()
        .toml(file)
        .env([("OUTBOX_RELAY_ORDRES_DATABASE_URL", "postgres://typo")])
        .build()
        .unwrap_err();
    let text = error.to_string();
    for (path, says) in [
        ("lisen", "unknown key"),
        ("http.listen", "`localhost` is not an address"),
        (
            "console.user[0].role",
            "`admin` is not one of `operator`, `reader`",
        ),
        ("console.user[0].token", "too short"),
        ("relay[0].retries", "unknown key"),
        ("relay[0].outbox_table", "out;box"),
        ("relay[0].method", "`cdc` is not one of `polling`, `log`"),
        ("relay[0].batch_size", "must be at least 1"),
        ("relay[0].lease_ttl", "`soon` is not a duration"),
        (
            "relay[0].broker.url",
            "scheme `http` is not one of `nats://`, `tls://`",
        ),
        ("relay[0].broker.exchange", "only for `kind = \"rabbitmq\"`"),
        ("relay[1].name", "`orders` is taken by an earlier relay"),
        ("relay[1].database_url", "scheme `oracle://`"),
        (
            "relay[1].broker.url",
            "not a list of Kafka bootstrap servers",
        ),
        ("relay[1].broker.route.destination", "missing"),
        (
            "relay[2].batch_size",
            "invalid type: string \"many\", expected usize",
        ),
        (
            "relay[3].database_url",
            "SQLite has neither (use `method = \"polling\"`)",
        ),
        ("relay[3].log.slot", "Acme-Slot"),
        ("relay[3].broker.exchange", "missing: the exchange"),
        (
            "environment variable OUTBOX_RELAY_ORDRES_DATABASE_URL",
            "names no setting",
        ),
    ] {
        let problem = error
            .about(path)
            .unwrap_or_else(|| panic!("no problem about {path} in:\n{text}"));
        assert!(
            problem.message.contains(says),
            "{path}: {:?} does not say {says:?}",
            problem.message
        );
    }
    assert!(text.starts_with(&format!(
        "{} problems in the configuration:",
        error.problems.len()
    )));
    // Section by section, in file order.
    let paths: Vec<&str> = error.problems.iter().map(|p| p.path.as_str()).collect();
    let position = |path: &str| paths.iter().position(|p| *p == path).unwrap();
    assert!(position("lisen") < position("http.listen"));
    assert!(position("http.listen") < position("console.user[0].role"));
    assert!(position("relay[0].retries") < position("relay[1].name"));
    assert!(
        position("relay[3].log.slot") < paths.len() - 1,
        "the environment comes last"
    );
    assert!(paths.last().unwrap().starts_with("environment variable"));
}

/// One file with one problem of each kind, type errors among them: a value of the wrong
/// type does not hide the unknown keys, bad choices, URLs and durations elsewhere, nor the
/// other type errors (issue 33, item 7).
const EVERY_KIND_OF_PROBLEM: &str = r#"
lisen = "127.0.0.1:8080"

[http]
ops_listen = 9464

[[relay]]
name = "orders"
database_url = 42
method = "cdc"
batch_sise = 10
poll_interval = "soon"
[relay.broker]
kind = "nats"
url = "http://nope"

[[relay]]
name = "billing"
database_url = "postgres://db/billing"
batch_size = "many"
worker_keys = [1, "a", 2]
lease_ttl = "0s"
[relay.broker]
kind = "redis"
url = "redis://redis:6379"
max_len = "big"
colour = "blue"
"#;

/// What [`EVERY_KIND_OF_PROBLEM`] must report: each problem, with its key path.
const EVERY_KIND_OF_PROBLEM_REPORT: [(&str, &str); 13] = [
    ("lisen", "unknown key"),
    (
        "http.ops_listen",
        "invalid type: integer `9464`, expected a string",
    ),
    (
        "relay[0].database_url",
        "invalid type: integer `42`, expected a string",
    ),
    ("relay[0].method", "`cdc` is not one of `polling`, `log`"),
    ("relay[0].batch_sise", "unknown key"),
    ("relay[0].poll_interval", "`soon` is not a duration"),
    (
        "relay[0].broker.url",
        "scheme `http` is not one of `nats://`, `tls://`",
    ),
    (
        "relay[1].batch_size",
        "invalid type: string \"many\", expected usize",
    ),
    (
        "relay[1].worker_keys[0]",
        "invalid type: integer `1`, expected a string",
    ),
    (
        "relay[1].worker_keys[2]",
        "invalid type: integer `2`, expected a string",
    ),
    ("relay[1].lease_ttl", "must be longer than zero"),
    (
        "relay[1].broker.max_len",
        "invalid type: string \"big\", expected usize",
    ),
    ("relay[1].broker.colour", "unknown key"),
];

#[test]
fn type_errors_do_not_hide_the_other_problems() {
    let error = ServerConfig::builder()
        .toml(EVERY_KIND_OF_PROBLEM)
        .build()
        .unwrap_err();
    let text = error.to_string();
    for (path, says) in EVERY_KIND_OF_PROBLEM_REPORT {
        let problem = error
            .about(path)
            .unwrap_or_else(|| panic!("no problem about {path} in:\n{text}"));
        assert!(
            problem.message.contains(says),
            "{path}: {:?} does not say {says:?}",
            problem.message
        );
    }
    // Nothing else: an unreadable value is reported once, not again as missing.
    assert_eq!(
        error.problems.len(),
        EVERY_KIND_OF_PROBLEM_REPORT.len(),
        "{text}"
    );
    // Section by section, in file order.
    let paths: Vec<&str> = error.problems.iter().map(|p| p.path.as_str()).collect();
    let position = |path: &str| paths.iter().position(|p| *p == path).unwrap();
    assert!(position("lisen") < position("http.ops_listen"));
    assert!(position("http.ops_listen") < position("relay[0].database_url"));
    assert!(position("relay[0].broker.url") < position("relay[1].batch_size"));

    // `outbox check-config` prints the same list, in one run.
    let (code, out, err) = check_config(EVERY_KIND_OF_PROBLEM.as_bytes(), &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        err.contains(&format!("{} problems in the configuration:", paths.len())),
        "{err}"
    );
    for problem in &error.problems {
        assert!(err.contains(&format!("\n  {problem}")), "{err}");
    }
}

/// The log relay's settings are checked by the library's own validation at load time, with
/// the shared `[[relay]]` settings it takes: a retention the polling relay accepts but the
/// log relay refuses (it needs at least a minute) is reported by check-config, not when
/// the relay starts.
#[test]
fn log_relay_settings_are_checked_by_the_library_at_load_time() {
    let file = r#"
[[relay]]
name = "acme"
database_url = "postgres://acme@db/acme"
method = "log"
retention = "5s"
[relay.log]
slot = "acme_outbox"
publication = "1pub"
feedback_interval = "0s"
[relay.broker]
kind = "nats"
url = "nats://127.0.0.1:4222"
"#;
    let error = ServerConfig::builder().toml(file).build().unwrap_err();
    let text = error.to_string();
    for (path, says) in [
        ("relay[0].retention", "shorter than a minute"),
        ("relay[0].log.publication", "not an identifier"),
        ("relay[0].log.feedback_interval", "longer than zero"),
    ] {
        let problem = error
            .about(path)
            .unwrap_or_else(|| panic!("no problem about {path} in:\n{text}"));
        assert!(
            problem.message.contains(says),
            "{path}: {:?} does not say {says:?}",
            problem.message
        );
    }
    // Accepted, the configuration is the one the relay starts with.
    let good = file
        .replace("retention = \"5s\"", "retention = \"2h\"")
        .replace("publication = \"1pub\"", "publication = \"acme_pub\"")
        .replace(
            "feedback_interval = \"0s\"",
            "feedback_interval = \"250ms\"",
        );
    let config = ServerConfig::builder().toml(&good).build().unwrap();
    let RelayMethod::Log(log) = &config.relays[0].method else {
        panic!("{:?}", config.relays[0].method)
    };
    assert_eq!(log.retention, Some(Duration::from_secs(7200)));
    assert_eq!(
        log.max_attempts,
        outbox_seaorm::relay::log::config::DEFAULT_MAX_ATTEMPTS
    );
    assert_eq!(log.publication, "acme_pub");
    assert_eq!(log.feedback_interval, Duration::from_millis(250));
    assert!(log.validate().is_ok());
}

/// A log relay on MariaDB (`mysql://`) reads the binary log: accepted, with the replica
/// server id its dump registers with; an id of 0 is reported at its key.
#[test]
fn a_log_relay_on_mariadb_takes_its_replica_server_id() {
    let file = r#"
[[relay]]
name = "acme"
database_url = "mysql://root@db/acme"
method = "log"
[relay.log]
slot = "acme_outbox"
replica_server_id = 4242
[relay.broker]
kind = "nats"
url = "nats://127.0.0.1:4222"
"#;
    let config = ServerConfig::builder().toml(file).build().unwrap();
    let RelayMethod::Log(log) = &config.relays[0].method else {
        panic!("{:?}", config.relays[0].method)
    };
    assert_eq!(log.replica_server_id(), 4242);
    let zero = file.replace("4242", "0");
    let error = ServerConfig::builder().toml(&zero).build().unwrap_err();
    let problem = error
        .about("relay[0].log.replica_server_id")
        .unwrap_or_else(|| panic!("no problem about the server id in:\n{error}"));
    assert!(
        problem.message.contains("0 is not a replica server id"),
        "{problem:?}"
    );
}

/// `transaction_pooling = true` (the database behind PgBouncer in transaction mode) reaches
/// the relay's `Outbox`; with the log relay it is refused at its key (replication needs a
/// direct connection).
#[test]
fn transaction_pooling_reaches_the_outbox_and_is_refused_for_the_log_relay() {
    let file = r#"
[[relay]]
name = "tenant-1"
database_url = "postgres://app@pgbouncer:6432/tenant_1"
transaction_pooling = true
[relay.broker]
kind = "nats"
url = "nats://127.0.0.1:4222"
"#;
    let config = ServerConfig::builder().toml(file).build().unwrap();
    assert!(config.relays[0].outbox.transaction_pooling());
    let plain = file.replace("transaction_pooling = true\n", "");
    let config = ServerConfig::builder().toml(&plain).build().unwrap();
    assert!(!config.relays[0].outbox.transaction_pooling());
    let log = file.replace(
        "transaction_pooling = true",
        "transaction_pooling = true\nmethod = \"log\"",
    );
    let error = ServerConfig::builder().toml(&log).build().unwrap_err();
    let problem = error
        .about("relay[0].transaction_pooling")
        .unwrap_or_else(|| panic!("no problem about transaction_pooling in:\n{error}"));
    assert!(problem.message.contains("directly"), "{problem:?}");
}

#[test]
fn syntax_errors_name_their_line_and_column() {
    let error = ServerConfig::builder()
        .toml("[[relay]]\nname = \"a\"\nbatch_size = = 3\n")
        .build()
        .unwrap_err();
    assert_eq!(error.problems.len(), 1);
    let problem = &error.problems[0];
    assert_eq!(problem.path, "file");
    assert!(
        problem
            .message
            .starts_with("not valid TOML at line 3, column"),
        "{problem}"
    );
}

#[test]
fn an_empty_file_needs_a_relay() {
    let error = ServerConfig::builder().toml("").build().unwrap_err();
    assert_eq!(
        error.about("relay").unwrap().message,
        "missing: at least one [[relay]], or [tenants] to read them while running"
    );
}

/// The book's `[tenants]` example (chapter "Many tenants") reads, with its secrets from the
/// environment, and a tenant entry becomes a relay through the template.
#[test]
fn the_tenants_section_reads_and_merges_entries_over_its_template() {
    let chapter = include_str!("../../docs/book/src/many-tenants.md");
    let start = chapter.find("```toml\n[tenants]").unwrap() + "```toml\n".len();
    let block = &chapter[start..];
    let block = &block[..block.find("```").unwrap()];
    let config = ServerConfig::builder()
        .toml(block)
        .env([
            (
                "OUTBOX_TENANTS_CATALOG_URL",
                "postgres://control:pw@db/control",
            ),
            (
                "OUTBOX_TENANTS_DATABASE_URL",
                "postgres://relay:pw@db/{tenant}",
            ),
            ("OUTBOX_TENANTS_BROKER_URL", "nats://other:4222"),
        ])
        .build()
        .unwrap();
    assert!(config.relays.is_empty());
    let tenants = config.tenants.unwrap();
    assert_eq!(
        tenants.directory.as_deref(),
        Some(std::path::Path::new("/etc/outbox/tenants"))
    );
    let catalog = tenants.catalog.clone().unwrap();
    assert_eq!(catalog.url.expose(), "postgres://control:pw@db/control");
    assert_eq!(catalog.table, "outbox_tenants");
    assert_eq!(tenants.refresh_interval, std::time::Duration::from_secs(5));
    assert_eq!(config.overridden_by.len(), 3);
    assert!(
        !format!("{tenants:?}").contains("pw@"),
        "the template's secrets stay out of Debug"
    );
    let entry: toml::Table = toml::from_str("batch_size = 25").unwrap();
    let merged = tenants.merged("acme", &entry);
    let relay = tenants.check("acme", &entry, merged).unwrap();
    assert_eq!(relay.name, "acme");
    assert_eq!(relay.database_url.expose(), "postgres://relay:pw@db/acme");
    assert_eq!(relay.broker.url.expose(), "nats://other:4222");
    assert_eq!(relay.relay.batch_size, 25);
}

#[test]
fn a_tenants_section_with_every_problem() {
    let error = ServerConfig::builder()
        .toml(
            r#"
[tenants]
catalog_table = "x; drop table y"
refresh_interval = "0s"
[tenants.template]
name = "all"
batch_size = "many"
colour = "red"
"#,
        )
        .env([("OUTBOX_TENANTS_TYPO", "1")])
        .build()
        .unwrap_err();
    for path in [
        "tenants",
        "tenants.catalog_table",
        "tenants.refresh_interval",
        "tenants.template.name",
        "tenants.template.batch_size",
        "tenants.template.colour",
        "environment variable OUTBOX_TENANTS_TYPO",
    ] {
        assert!(
            error.about(path).is_some(),
            "no problem about {path} in:\n{error}"
        );
    }
    assert!(
        error.about("relay").is_none(),
        "[tenants] replaces [[relay]]: {error}"
    );
    let error = ServerConfig::builder()
        .toml("[tenants]\ncatalog_url = \"redis://x\"\n")
        .build()
        .unwrap_err();
    assert!(error.about("tenants.catalog_url").is_some(), "{error}");
}

fn check_config(contents: &[u8], env: &[(&str, &str)]) -> (i32, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("outbox.toml");
    std::fs::write(&path, contents).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_outbox"))
        .arg("check-config")
        .arg(&path)
        .env_clear()
        .envs(env.iter().copied())
        .output()
        .unwrap();
    (
        output.status.code().unwrap(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn check_config_prints_a_summary_or_every_problem() {
    let (code, out, err) = check_config(EXAMPLE.as_bytes(), &example_env());
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("relay ordering: polling relay, outbox outbox"),
        "{out}"
    );
    assert!(out.contains("relay tenant-acme: log relay"), "{out}");
    assert!(
        out.contains("amqp://guest:***@127.0.0.1:5672/%2f"),
        "passwords are hidden: {out}"
    );
    assert!(
        out.contains("from the environment: OUTBOX_CONSOLE_USER_ANA_TOKEN"),
        "{out}"
    );

    let (code, out, err) = check_config(EXAMPLE.as_bytes(), &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        err.contains("console.user[0].token: missing: set it, or OUTBOX_CONSOLE_USER_ANA_TOKEN"),
        "{err}"
    );

    // Not even text: a clear error, not a panic.
    let (code, _, err) = check_config(&[0xff, 0xfe, 0x00, 0x80], &[]);
    assert_eq!(code, 1);
    assert!(err.contains("cannot read"), "{err}");
    assert!(!err.contains("panicked"), "{err}");

    let output = Command::new(env!("CARGO_BIN_EXE_outbox"))
        .args(["check-config", "/nonexistent/outbox.toml"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("cannot read /nonexistent/outbox.toml")
    );
}

/// The book's configuration example (chapter "The relay service") is this file, verbatim
/// (so it cannot drift from what the tests read).
#[test]
fn the_book_shows_the_example_file() {
    let chapter = include_str!("../../docs/book/src/relay-service.md");
    assert!(
        chapter.contains(&format!("```toml\n{EXAMPLE}```")),
        "the TOML block of docs/book/src/relay-service.md differs from outbox.example.toml"
    );
}

/// The Bookstore's relay configuration reads, with its URLs and token from the
/// environment as `bookstore-services up` sets them.
#[test]
fn the_bookstore_relay_configuration_reads() {
    let config = ServerConfig::builder()
        .toml(include_str!(
            "../../examples/bookstore/services/outbox.toml"
        ))
        .env([
            (
                "OUTBOX_RELAY_ORDERING_DATABASE_URL",
                "postgres://db/bookstore_ordering",
            ),
            ("OUTBOX_RELAY_ORDERING_BROKER_URL", "nats://nats:4222"),
            (
                "OUTBOX_CONSOLE_USER_OPERATOR_TOKEN",
                "operator-token-0123456789",
            ),
        ])
        .build()
        .unwrap();
    assert_eq!(config.relays[0].name, "ordering");
    assert_eq!(
        config.relays[0].broker.stream.as_ref().unwrap().name,
        "BOOKSTORE"
    );
}

/// The book's `[connections]` example (chapter "Many tenants") reads; bad values are
/// reported with their key paths.
#[test]
fn the_connections_section_reads_and_is_checked() {
    let chapter = include_str!("../../docs/book/src/many-tenants.md");
    let start = chapter.find("```toml\n[connections]").unwrap() + "```toml\n".len();
    let block = &chapter[start..];
    let block = &block[..block.find("```").unwrap()];
    let relay = "[[relay]]\nname = \"a\"\ndatabase_url = \"postgres://db/a\"\n[relay.broker]\nkind = \"nats\"\nurl = \"nats://n:4222\"\n";
    let config = ServerConfig::builder()
        .toml(format!("{block}\n{relay}"))
        .build()
        .unwrap();
    let connections = config.connections.unwrap();
    assert_eq!(connections.max_per_server, 20);
    assert_eq!(connections.idle_timeout, std::time::Duration::from_secs(30));
    let error = ServerConfig::builder()
        .toml(format!(
            "[connections]\nmax_per_server = 0\nidle_timeout = \"soon\"\n{relay}"
        ))
        .build()
        .unwrap_err();
    assert!(
        error.about("connections.max_per_server").is_some(),
        "{error}"
    );
    assert!(error.about("connections.idle_timeout").is_some(), "{error}");
    let error = ServerConfig::builder()
        .toml(format!("[connections]\n{relay}"))
        .build()
        .unwrap_err();
    assert!(
        error.about("connections.max_per_server").is_some(),
        "{error}"
    );
}
