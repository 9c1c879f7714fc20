//! The shipped operations files — `operations/prometheus/outbox-alerts.yml` and
//! `operations/grafana/outbox-dashboard.json` — against what the exporter really emits:
//! every rule and panel expression parses as PromQL, and every metric it names is in the
//! Prometheus exposition after a polling relay (with a dead letter, a retry, an operator
//! action and a purge), a log relay and an inbox consumer (applied, duplicate, dead
//! letter, a database without its tables) ran in this process with the service's recorder.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::time::Duration;

use outbox_core::in_process::InProcessBroker;
use outbox_core::publish::PublishError;
use outbox_core::{Envelope, Raise};
use outbox_seaorm::inbox::Consumer;
use outbox_seaorm::ops::Operations;
use outbox_seaorm::relay::Relay;
use outbox_seaorm::relay::log::LogRelay;
use outbox_seaorm::{Outbox, UnitOfWork, inbox_handler, schema};
use outbox_tests::bookstore::{OrderNotedV2, OrderingContracts, OrderingEvent};
use outbox_tests::db::TestDb;
use promql_parser::parser::Expr;
use promql_parser::util::{ExprVisitor, walk_expr};
use sea_orm::{ConnectionTrait, DbErr};
use tokio_util::sync::CancellationToken;

const RULES: &str = include_str!("../../operations/prometheus/outbox-alerts.yml");
const DASHBOARD: &str = include_str!("../../operations/grafana/outbox-dashboard.json");

/// Fails the notes of aggregate `poison`.
#[inbox_handler(consumer = "ops-files")]
async fn take_note(_uow: &UnitOfWork, event: OrderNotedV2) -> Result<(), DbErr> {
    if event.order_id == "poison" {
        return Err(DbErr::Custom("cannot take this note".into()));
    }
    Ok(())
}

/// The metric names of a PromQL expression.
fn metrics_of(expr: &str) -> BTreeSet<String> {
    struct Names(BTreeSet<String>);
    impl ExprVisitor for Names {
        type Error = std::convert::Infallible;
        fn pre_visit(&mut self, expr: &Expr) -> Result<bool, Self::Error> {
            match expr {
                Expr::VectorSelector(selector) => self.0.extend(selector.name.clone()),
                Expr::MatrixSelector(matrix) => self.0.extend(matrix.vs.name.clone()),
                _ => {}
            }
            Ok(true)
        }
    }
    // Grafana's variables, as Grafana substitutes them.
    let expr = expr.replace("$__rate_interval", "5m");
    let parsed = promql_parser::parser::parse(&expr)
        .unwrap_or_else(|error| panic!("not PromQL: {expr}\n{error}"));
    let mut names = Names(BTreeSet::new());
    let Ok(_) = walk_expr(&mut names, &parsed);
    assert!(!names.0.is_empty(), "names no metric: {expr}");
    names.0
}

/// Every metric name in an exposition (histograms as `_bucket`, `_sum` and `_count`).
fn exported(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .filter_map(|line| line.split(['{', ' ']).next())
        .map(str::to_owned)
        .collect()
}

async fn run_polling_relay() {
    let db = TestDb::sqlite_file().await;
    let outbox = Outbox::builder()
        .metric_label("relay", "polling")
        .build()
        .unwrap();
    schema::install(db.conn(), &outbox).await.unwrap();
    let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
    for order in ["ok-1", "ok-2", "poison", "flaky"] {
        uow.raise(OrderingEvent::Noted {
            order_id: order.into(),
            n: 0,
        });
    }
    uow.commit().await.unwrap();
    let broker = InProcessBroker::new();
    broker.fail_messages(|envelope| match envelope.aggregate_id.as_str() {
        "poison" => Some(PublishError::rejected("schema")),
        "flaky" => Some(PublishError::timeout("no ack")),
        _ => None,
    });
    let config = outbox_server::ServerConfig::builder()
        .toml(
            r#"
[[relay]]
name = "polling"
database_url = "sqlite::memory:"
[relay.broker]
kind = "nats"
url = "nats://127.0.0.1:4222"
"#,
        )
        .build()
        .unwrap();
    outbox_server::relay::register_metrics(&config.relays[0]);
    let mut relay = Relay::builder(db.conn().clone(), outbox.clone(), broker)
        .retention(Some(Duration::from_secs(3600)))
        .build()
        .unwrap();
    relay.drain().await.unwrap();
    let ops = Operations::new(db.conn().clone(), outbox.clone());
    ops.status().await.unwrap();
    let dead = ops.dead_letters(None, 10).await.unwrap();
    ops.requeue(dead[0].envelope.message_id, "ana", Some("test"))
        .await
        .unwrap();
    assert_eq!(ops.purge(Duration::ZERO, 100).await.unwrap(), Some(2));
    db.close().await;
}

async fn run_log_relay() -> bool {
    const TEST: &str = "operations_files::log_relay";
    let Some(db) = TestDb::logical_postgres(TEST).await else {
        return false;
    };
    let outbox = Outbox::builder()
        .metric_label("relay", "log")
        .build()
        .unwrap();
    schema::install(db.conn(), &outbox).await.unwrap();
    let slot = format!("ops_{}", uuid::Uuid::now_v7().simple());
    let broker = InProcessBroker::new();
    let relay = LogRelay::builder(db.conn().clone(), outbox.clone(), broker.clone())
        .slot(&slot)
        .heartbeat_interval(Duration::from_millis(200))
        .build()
        .unwrap();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(relay.run(shutdown.clone()));
    let streaming = async {
        loop {
            let active = db
                .conn()
                .query_one_raw(sea_orm::Statement::from_string(
                    sea_orm::DbBackend::Postgres,
                    format!("SELECT 1 AS one FROM pg_replication_slots WHERE slot_name = '{slot}' AND active"),
                ))
                .await
                .unwrap();
            if active.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), streaming)
        .await
        .unwrap();
    // Then a heartbeat or two: the slot's lag and WAL status.
    publish_one(&db, &outbox, &broker, "log-1").await;
    shutdown.cancel();
    running.await.unwrap().unwrap();
    let _ = db
        .conn()
        .execute_unprepared(&format!("SELECT pg_drop_replication_slot('{slot}')"))
        .await;
    db.close().await;
    true
}

async fn run_consumer() {
    let db = TestDb::sqlite_file().await;
    let outbox = Outbox::default();
    schema::install(db.conn(), &outbox).await.unwrap();
    let consumer = Consumer::builder(db.conn().clone(), outbox.clone(), "ops-files")
        .max_attempts(1)
        .build()
        .unwrap();
    let note = |order: &str| {
        Envelope::from_event(&OrderNotedV2 {
            order_id: order.into(),
            n: 0,
        })
        .unwrap()
    };
    let ok = note("ok-1");
    consumer.deliver(&ok).await.unwrap();
    consumer.deliver(&ok).await.unwrap();
    consumer.deliver(&note("poison")).await.unwrap();
    consumer.redeliver_parked().await.unwrap();
    db.close().await;
    // A consumer whose database has no outbox tables: outbox_database_failures_total.
    let bare = TestDb::sqlite_file().await;
    let consumer = Consumer::builder(bare.conn().clone(), outbox, "ops-files")
        .build()
        .unwrap();
    consumer.deliver(&ok).await.unwrap_err();
    bare.close().await;
}

/// Commits one event of `order`, waits until the running log relay published it, then 800 ms
/// (a few heartbeat intervals of 200 ms: the relay's periodic gauges).
async fn publish_one(db: &TestDb, outbox: &Outbox, broker: &InProcessBroker, order: &str) {
    let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
    uow.raise(OrderingEvent::Noted {
        order_id: order.into(),
        n: 0,
    });
    uow.commit().await.unwrap();
    let published = async {
        while broker.published().is_empty() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), published)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(800)).await;
}

/// A log relay on MariaDB's binary log: the slot's lag in transactions.
async fn run_binlog_relay() -> bool {
    const TEST: &str = "operations_files::binlog_relay";
    let Some(db) = TestDb::binlog_mariadb(TEST).await else {
        return false;
    };
    let outbox = Outbox::builder()
        .metric_label("relay", "binlog")
        .build()
        .unwrap();
    schema::install(db.conn(), &outbox).await.unwrap();
    let slot = format!("ops_{}", uuid::Uuid::now_v7().simple());
    let broker = InProcessBroker::new();
    let relay = LogRelay::builder(db.conn().clone(), outbox.clone(), broker.clone())
        .slot(&slot)
        .connection_url(db.url())
        .heartbeat_interval(Duration::from_millis(200))
        .build()
        .unwrap();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(relay.run(shutdown.clone()));
    // Then a lag reading or two (every heartbeat interval).
    publish_one(&db, &outbox, &broker, "binlog-1").await;
    shutdown.cancel();
    running.await.unwrap().unwrap();
    db.close().await;
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alert_rules_and_dashboard_name_only_exported_metrics() {
    let handle = outbox_server::http::metrics::install().unwrap();
    run_polling_relay().await;
    let log_relay_ran = run_log_relay().await & run_binlog_relay().await;
    run_consumer().await;
    handle.run_upkeep();
    let exposition = handle.render();
    let exported = exported(&exposition);

    // The rule file: groups of rules, each with an alert name, a PromQL expression and a
    // summary; every metric named is exported.
    let rules: serde_yaml_ng::Value = serde_yaml_ng::from_str(RULES).unwrap();
    let mut named = BTreeSet::new();
    let mut alerts = Vec::new();
    for group in rules["groups"].as_sequence().unwrap() {
        assert!(group["name"].as_str().is_some());
        for rule in group["rules"].as_sequence().unwrap() {
            let alert = rule["alert"].as_str().unwrap();
            assert!(
                rule["annotations"]["summary"].as_str().is_some(),
                "{alert} has a summary"
            );
            alerts.push(alert.to_owned());
            named.extend(metrics_of(rule["expr"].as_str().unwrap()));
        }
    }
    assert_eq!(alerts.len(), 11, "{alerts:?}");

    // The dashboard: every panel's targets, and the relay variable's query.
    let dashboard: serde_json::Value = serde_json::from_str(DASHBOARD).unwrap();
    let panels = dashboard["panels"].as_array().unwrap();
    assert!(panels.len() >= 15);
    for panel in panels {
        let targets = panel["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "{}", panel["title"]);
        for target in targets {
            named.extend(metrics_of(target["expr"].as_str().unwrap()));
        }
    }
    let variable = dashboard["templating"]["list"][1]["definition"]
        .as_str()
        .unwrap();
    let inner = variable
        .strip_prefix("label_values(")
        .and_then(|rest| rest.split(',').next())
        .unwrap();
    named.extend(metrics_of(inner));

    for metric in &named {
        let log_only = metric.starts_with("outbox_log_");
        if log_only && !log_relay_ran {
            continue;
        }
        assert!(
            exported.contains(metric),
            "`{metric}` is named by the operations files but not exported:\n{exposition}"
        );
    }
    // Every metric of README's Operations table the relays and consumers emit is covered
    // by the dashboard.
    for documented in [
        outbox_core::metric::PENDING_ROWS,
        outbox_core::metric::OLDEST_CLAIMABLE_AGE,
        outbox_core::metric::BACKOFF_ROWS,
        outbox_core::metric::HELD_ROWS,
        outbox_core::metric::PUBLISHED,
        outbox_core::metric::PUBLISH_FAILURES,
        outbox_core::metric::DEAD_LETTERED,
        outbox_core::metric::DEAD_ROWS,
        outbox_core::metric::FAILED_ROWS,
        outbox_core::metric::RELAY_HEARTBEAT,
        outbox_core::metric::LEASES_OWNED,
        outbox_core::metric::LISTENER_RECONNECTS,
        outbox_core::metric::PURGED_ROWS,
        outbox_core::metric::OPERATOR_ACTIONS,
        outbox_core::metric::LOG_SLOT_LAG_BYTES,
        outbox_core::metric::LOG_SLOT_WAL_STATUS,
        outbox_core::metric::LOG_SLOT_LAG_TRANSACTIONS,
    ] {
        assert!(
            named.contains(documented),
            "the dashboard shows {documented}"
        );
    }
    // Rows carry the relay's label.
    assert!(
        exposition.contains(r#"outbox_published_total{outbox="outbox",relay="polling"} 2"#),
        "{exposition}"
    );
}
