//! The operations routes: `/healthz` (the process serves), `/readyz` (every relay's
//! database and broker answer and its relay runs) and `/metrics` (Prometheus).

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use metrics_exporter_prometheus::PrometheusHandle;
use serde::Serialize;

use outbox_seaorm::ops::Operations;

use crate::config::RelayMethod;
use crate::fleet::{Fleet, SourceProblem, TenantProblem};
use crate::relay::{Phase, RelayTask};

/// What the operations routes read.
#[derive(Debug, Clone)]
pub struct OpsState {
    /// The relays running now.
    pub fleet: Fleet,
    /// The recorder `/metrics` renders.
    pub metrics: PrometheusHandle,
}

/// `/healthz`, `/readyz` and `/metrics`.
pub fn router(state: OpsState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(state)
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn metrics(State(state): State<OpsState>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.metrics.render(),
    )
        .into_response()
}

/// `/readyz`'s answer.
#[derive(Debug, Serialize)]
pub struct Readiness {
    /// Whether every relay is ready, every tenant entry applied and every tenant source
    /// read at least once.
    pub ready: bool,
    /// Each relay.
    pub relays: Vec<RelayReadiness>,
    /// The tenant entries that could not be applied (left out when none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tenant_problems: Vec<TenantProblem>,
    /// The tenant sources that could not be read (left out when none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub source_problems: Vec<SourceProblem>,
}

/// One relay in `/readyz`.
#[derive(Debug, Serialize)]
pub struct RelayReadiness {
    /// Its name.
    pub name: String,
    /// `starting`, `running`, `retrying` or `stopped`.
    pub phase: &'static str,
    /// Seconds in that phase.
    pub phase_seconds: u64,
    /// `ok`, or why its database does not answer.
    pub database: String,
    /// `ok`, or why its broker does not answer.
    pub broker: String,
    /// What this process holds: `3 leases` (a polling relay's partitions or keys),
    /// `waiting for a lease` (others hold them all), `active on slot S` or `standby on slot
    /// S` (a log relay), `unknown` while its database does not answer. Ready either way.
    pub leases: String,
    /// The last failure while retrying, or what the running relay's loop sees failing in
    /// its database (`step: error`, e.g. a missing table with the fix).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Whether it is ready.
    pub ready: bool,
}

async fn readyz(State(state): State<OpsState>) -> Response {
    let running = state.fleet.relays();
    let relays = futures_util::future::join_all(running.iter().map(|relay| check(relay))).await;
    let tenant_problems = state.fleet.problems();
    let source_problems = state.fleet.source_problems();
    // A source down with its last good list running is reported, not unready: every tenant
    // it listed still relays.
    let ready = relays.iter().all(|relay| relay.ready)
        && tenant_problems.is_empty()
        && source_problems.iter().all(|p| p.running_last_good);
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let readiness = Readiness {
        ready,
        relays,
        tenant_problems,
        source_problems,
    };
    (status, axum::Json(readiness)).into_response()
}

async fn check(relay: &RelayTask) -> RelayReadiness {
    let (phase, since) = relay.phase();
    let (database, leases) = match relay.database() {
        None => ("not connected".to_owned(), "unknown".to_owned()),
        // A ping or a read would take the relay's turn in its server's budget: its own
        // loop's health says whether the database answers.
        Some(_) if relay.has_budget_seat() => (
            relay
                .database_failure()
                .map_or_else(|| "ok".to_owned(), |failure| failure.error),
            "not read (connection budget)".to_owned(),
        ),
        Some(db) => match tokio::time::timeout(crate::broker::PROBE_TIMEOUT, db.ping()).await {
            Ok(Ok(())) => ("ok".to_owned(), leases(relay, db).await),
            Ok(Err(error)) => (error.to_string(), "unknown".to_owned()),
            Err(_) => ("no answer within 2 s".to_owned(), "unknown".to_owned()),
        },
    };
    let broker = match relay.broker_probe() {
        None => "not connected".to_owned(),
        Some(probe) => match probe.check().await {
            Ok(()) => "ok".to_owned(),
            Err(error) => error,
        },
    };
    // While it runs, the relay's own loop may see its tables missing or a permission
    // revoked although the database answers a ping.
    let failing = relay.database_failure();
    let error = match &phase {
        Phase::Retrying { error, .. } => Some(error.clone()),
        _ => failing
            .as_ref()
            .map(|failure| format!("{}: {}", failure.step, failure.error)),
    };
    let ready = phase == Phase::Running && failing.is_none() && database == "ok" && broker == "ok";
    RelayReadiness {
        name: relay.name().to_owned(),
        phase: phase.as_str(),
        phase_seconds: since.as_secs(),
        database,
        broker,
        leases,
        error,
        ready,
    }
}

/// What the relay of this process holds, read from its tables.
async fn leases(relay: &RelayTask, db: sea_orm::DatabaseConnection) -> String {
    let settings = relay.settings();
    let ops = Operations::new(db, settings.outbox.clone());
    let me = &settings.relay.instance_id;
    let read = async {
        match &settings.method {
            RelayMethod::Polling => ops.relay_instances().await.map(|instances| {
                match instances
                    .iter()
                    .find(|instance| instance.instance_id == *me)
                {
                    Some(instance) if !instance.leases.is_empty() => {
                        format!("{} leases", instance.leases.len())
                    }
                    _ => "waiting for a lease".to_owned(),
                }
            }),
            RelayMethod::Log(log) => ops.log_slots().await.map(|slots| {
                let active = slots
                    .iter()
                    .any(|slot| slot.slot == log.slot && slot.active_relay.as_deref() == Some(me));
                let role = if active { "active" } else { "standby" };
                format!("{role} on slot {}", log.slot)
            }),
        }
    };
    match tokio::time::timeout(crate::broker::PROBE_TIMEOUT, read).await {
        Ok(Ok(text)) => text,
        Ok(Err(error)) => format!("unknown: {error}"),
        Err(_) => "unknown: no answer within 2 s".to_owned(),
    }
}
