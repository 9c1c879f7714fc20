//! What a test binary's code logs, captured: the framework's own lines (targets `outbox…`)
//! and every SQL statement SQLx sent (target `sqlx::query`, one event per statement,
//! failed ones included), for the tests that bound how often a loop talks to a failing
//! database and what it says meanwhile.
//!
//! The capture is the process's global subscriber (statements are logged on SQLx's worker
//! threads too), so a test that reads it holds [`LogCapture::begin`]'s guard: the tests of
//! one binary that use it run one at a time. Statements are logged only by a connection
//! opened with SQLx logging on ([`counted_connection`]).

use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use sea_orm::{ConnectOptions, Database, DatabaseConnection};
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt as _};

/// One captured line.
#[derive(Debug, Clone)]
pub struct Line {
    /// Its level.
    pub level: tracing::Level,
    /// Its target.
    pub target: String,
    /// Its message and fields, as `name=value` text.
    pub text: String,
}

#[derive(Default)]
struct Lines(Mutex<Vec<Line>>);

struct Fields(String);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!("{}={value:?} ", field.name()));
    }
}

struct Layer(Arc<Lines>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Layer {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let target = event.metadata().target();
        if !(target.starts_with("outbox") || target == "sqlx::query") {
            return;
        }
        let mut fields = Fields(String::new());
        event.record(&mut fields);
        self.0
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Line {
                level: *event.metadata().level(),
                target: target.to_owned(),
                text: fields.0,
            });
    }
}

fn lines() -> &'static Arc<Lines> {
    static LINES: OnceLock<Arc<Lines>> = OnceLock::new();
    LINES.get_or_init(|| {
        let lines = Arc::new(Lines::default());
        let subscriber = tracing_subscriber::registry().with(Layer(Arc::clone(&lines)));
        tracing::subscriber::set_global_default(subscriber)
            .expect("this test binary installs no other subscriber");
        lines
    })
}

/// The capture of this test binary; see the [module documentation](self).
pub struct LogCapture {
    _turn: tokio::sync::MutexGuard<'static, ()>,
}

impl LogCapture {
    /// Waits for the other capturing tests of this binary to finish, then starts with an
    /// empty capture.
    pub async fn begin() -> Self {
        static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
        let turn = TURN.lock().await;
        lines()
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        Self { _turn: turn }
    }

    /// Everything captured since [`begin`](Self::begin) or the last [`clear`](Self::clear).
    pub fn lines(&self) -> Vec<Line> {
        lines()
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Forgets what was captured so far.
    pub fn clear(&self) {
        lines()
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// SQL statements sent (by connections with SQLx logging on).
    pub fn statements(&self) -> Vec<Line> {
        self.lines()
            .into_iter()
            .filter(|line| line.target == "sqlx::query")
            .collect()
    }

    /// The framework's lines at `level` exactly.
    pub fn framework(&self, level: tracing::Level) -> Vec<Line> {
        self.lines()
            .into_iter()
            .filter(|line| line.level == level && line.target.starts_with("outbox"))
            .collect()
    }

    /// Counts the statements sent during `window`.
    pub async fn statements_during(&self, window: Duration) -> usize {
        let before = self.statements().len();
        tokio::time::sleep(window).await;
        self.statements().len().saturating_sub(before)
    }
}

/// A connection to `url` whose statements are logged (and so counted by [`LogCapture`]).
pub async fn counted_connection(url: &str) -> DatabaseConnection {
    let mut options = ConnectOptions::new(url.to_owned());
    options
        .sqlx_logging(true)
        .acquire_timeout(Duration::from_secs(30));
    if url.starts_with("sqlite") {
        options.max_connections(1).min_connections(1);
    }
    Database::connect(options)
        .await
        .unwrap_or_else(|error| panic!("cannot connect to {url}: {error}"))
}
