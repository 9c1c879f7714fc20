//! The operator console: server-rendered HTML (maud, every value escaped), one small
//! script and one stylesheet compiled into the binary, no CDN.
//!
//! | path | what |
//! |---|---|
//! | `/` | overview: per relay its phase, pending rows, oldest claimable age, rows per status, live relays with their leases and heartbeats, log slots |
//! | `/relays/{relay}/dead-letters` | dead rows and failed jobs, by event type; one opens with its envelope, headers, payload and last error; **requeue** or **skip with a reason** |
//! | `/relays/{relay}/log-dead-letters` | the log relay's dead letters and parked events, same actions |
//! | `/relays/{relay}/inbox-dead-letters` | the consumers' dead letters (inbox side), same actions |
//! | `/relays/{relay}/scheduled` | rows waiting for their due time, in due order, by key; **run now** or **cancel with a reason**, one row or a whole key |
//! | `/relays/{relay}/operator-log` | who did what, when and why |
//! | `/contracts` | every contract with its version and JSON Schema |
//!
//! Security: see [`auth`] (a token from the configuration, exchanged for an `HttpOnly`,
//! `SameSite=Strict` session cookie; a `reader` role that sees but cannot act; a CSRF token
//! in every form). Every response carries a Content-Security-Policy that allows the
//! console's own script and stylesheet only, `X-Content-Type-Options: nosniff`,
//! `X-Frame-Options: DENY`, `Referrer-Policy: no-referrer` and `Cache-Control: no-store`.
//!
//! Embedded in a service of one's own:
//!
//! ```no_run
//! # async fn run(db: sea_orm::DatabaseConnection) -> Result<(), Box<dyn std::error::Error>> {
//! use outbox_server::config::{ConsoleSettings, Role};
//!
//! let settings = ConsoleSettings::builder()
//!     .user("ana", Role::Operator, std::env::var("CONSOLE_TOKEN_ANA")?)
//!     .build()?;
//! let console = outbox_server::console::router(db, outbox_seaorm::Outbox::default(), settings);
//! let app = axum::Router::new().nest("/outbox", console);
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! axum::serve(listener, app).await?;
//! # Ok(())
//! # }
//! ```

pub mod action;
pub mod auth;
pub mod contracts;
pub mod dead_letters;
pub mod error;
pub mod inbox_dead_letters;
pub mod log_dead_letters;
pub mod operator_log;
pub mod overview;
pub mod page;
pub mod scheduled;
pub mod session;
pub mod tenant;

use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use outbox_seaorm::Outbox;
use sea_orm::DatabaseConnection;

use crate::config::ConsoleSettings;
use crate::fleet::{SourceProblem, TenantProblem};
use contracts::Contract;
pub use error::ConsoleError;
use session::Sessions;
pub use tenant::{Tenant, Tenants};

/// The console's stylesheet.
const STYLESHEET: &str = include_str!("../../assets/console.css");
/// The console's one script (confirmations and the payload's copy button).
const SCRIPT: &str = include_str!("../../assets/console.js");

/// The `Content-Security-Policy` of every console response.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The console of some outboxes: its tenants, sessions and contracts.
#[derive(Debug, Clone)]
pub struct Console {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    tenants: Box<dyn Tenants>,
    settings: ConsoleSettings,
    sessions: Sessions,
    contracts: Vec<Contract>,
    contracts_problem: Option<String>,
}

impl Console {
    /// The console of `tenants` (a `Vec<Tenant>`, or the service's
    /// [`Fleet`](crate::fleet::Fleet)), for the users of `settings`.
    pub fn new(tenants: impl Tenants, settings: ConsoleSettings) -> Self {
        let sessions = Sessions::new(&settings.users, settings.session_ttl);
        let (contracts, contracts_problem) = contracts::load(settings.contracts.as_deref());
        Self {
            inner: Arc::new(Inner {
                tenants: Box::new(tenants),
                settings,
                sessions,
                contracts,
                contracts_problem,
            }),
        }
    }

    /// Its routes.
    pub fn router(&self) -> Router {
        Router::new()
            .route("/", get(overview::page))
            .route("/login", get(auth::login_page).post(auth::login))
            .route("/logout", post(auth::logout))
            .route("/assets/console.css", get(stylesheet))
            .route("/assets/console.js", get(script))
            .route("/contracts", get(contracts::list))
            .route("/contracts/{event_type}", get(contracts::show))
            .route("/relays/{relay}/dead-letters", get(dead_letters::list))
            .route(
                "/relays/{relay}/dead-letters/{message_id}",
                get(dead_letters::show),
            )
            .route(
                "/relays/{relay}/dead-letters/{message_id}/requeue",
                post(dead_letters::requeue),
            )
            .route(
                "/relays/{relay}/dead-letters/{message_id}/skip",
                post(dead_letters::skip),
            )
            .route(
                "/relays/{relay}/log-dead-letters",
                get(log_dead_letters::list),
            )
            .route(
                "/relays/{relay}/log-dead-letters/{id}",
                get(log_dead_letters::show),
            )
            .route(
                "/relays/{relay}/log-dead-letters/{id}/requeue",
                post(log_dead_letters::requeue),
            )
            .route(
                "/relays/{relay}/log-dead-letters/{id}/skip",
                post(log_dead_letters::skip),
            )
            .route(
                "/relays/{relay}/inbox-dead-letters",
                get(inbox_dead_letters::list),
            )
            .route(
                "/relays/{relay}/inbox-dead-letters/{id}",
                get(inbox_dead_letters::show),
            )
            .route(
                "/relays/{relay}/inbox-dead-letters/{id}/requeue",
                post(inbox_dead_letters::requeue),
            )
            .route(
                "/relays/{relay}/inbox-dead-letters/{id}/skip",
                post(inbox_dead_letters::skip),
            )
            .route("/relays/{relay}/scheduled", get(scheduled::list))
            .route(
                "/relays/{relay}/scheduled/key/run-now",
                post(scheduled::run_key_now),
            )
            .route(
                "/relays/{relay}/scheduled/key/cancel",
                post(scheduled::cancel_key),
            )
            .route(
                "/relays/{relay}/scheduled/{message_id}/run-now",
                post(scheduled::run_now),
            )
            .route(
                "/relays/{relay}/scheduled/{message_id}/cancel",
                post(scheduled::cancel),
            )
            .route("/relays/{relay}/operator-log", get(operator_log::page))
            .layer(axum::middleware::map_response(security_headers))
            .with_state(self.clone())
    }

    /// The tenants now.
    pub fn tenants(&self) -> Vec<Tenant> {
        self.inner.tenants.tenants()
    }

    /// What the tenant list could not apply or read.
    pub fn tenant_problems(&self) -> (Vec<TenantProblem>, Vec<SourceProblem>) {
        (
            self.inner.tenants.problems(),
            self.inner.tenants.source_problems(),
        )
    }

    /// The tenant named `relay`.
    ///
    /// # Errors
    /// [`ConsoleError::UnknownRelay`].
    pub fn tenant(&self, relay: &str) -> Result<Tenant, ConsoleError> {
        self.inner
            .tenants
            .tenants()
            .into_iter()
            .find(|tenant| tenant.name() == relay)
            .ok_or_else(|| ConsoleError::UnknownRelay {
                relay: relay.to_owned(),
            })
    }

    /// The settings.
    pub fn settings(&self) -> &ConsoleSettings {
        &self.inner.settings
    }

    /// The sessions.
    pub fn sessions(&self) -> &Sessions {
        &self.inner.sessions
    }

    /// The contracts shown.
    pub fn contracts(&self) -> &[Contract] {
        &self.inner.contracts
    }

    /// What went wrong reading the contracts, if anything.
    pub fn contracts_problem(&self) -> Option<&str> {
        self.inner.contracts_problem.as_deref()
    }
}

/// The console of one outbox in `db`, for the users of `settings`: what a service embeds
/// (e.g. `Router::new().nest("/outbox", router(db, outbox, settings))`).
pub fn router(db: DatabaseConnection, outbox: Outbox, settings: ConsoleSettings) -> Router {
    let name = outbox.outbox_table().to_string();
    Console::new(vec![Tenant::new(name, db, outbox)], settings).router()
}

async fn security_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::CACHE_CONTROL, "no-store"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

async fn stylesheet() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        STYLESHEET,
    )
        .into_response()
}

async fn script() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        SCRIPT,
    )
        .into_response()
}
