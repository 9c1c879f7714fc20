//! What the relay logs during a broker outage (issue 15, item 11): the first failure at WARN
//! with the publisher and the error, nothing more at WARN while the outage lasts less than
//! 30 s, and the recovery at INFO with the count of failed attempts. A test binary of its
//! own: it installs a tracing subscriber.

#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use outbox_core::Raise;
use outbox_core::in_process::InProcessBroker;
use outbox_core::policy::Backoff;
use outbox_seaorm::relay::Relay;
use outbox_seaorm::{Outbox, schema};
use outbox_tests::bookstore::{OrderingContracts, OrderingEvent};
use outbox_tests::db::TestDb;
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt as _};

/// One event: level, target and fields as text.
#[derive(Debug, Clone)]
struct Line {
    level: tracing::Level,
    target: String,
    fields: String,
}

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<Line>>>);

struct Fields(String);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!("{}={value:?} ", field.name()));
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Capture {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let mut fields = Fields(String::new());
        event.record(&mut fields);
        self.0.lock().unwrap().push(Line {
            level: *event.metadata().level(),
            target: event.metadata().target().to_owned(),
            fields: fields.0,
        });
    }
}

impl Capture {
    /// The relay's own lines at `level` or more severe.
    fn relay_lines(&self, level: tracing::Level) -> Vec<Line> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|line| line.level <= level && line.target.starts_with("outbox_seaorm"))
            .cloned()
            .collect()
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_broker_outage_is_logged_once_then_its_recovery() {
    let capture = Capture::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(capture.clone()));
    let db = TestDb::sqlite_memory().await;
    let outbox = Outbox::default();
    schema::install(db.conn(), &outbox).await.unwrap();
    let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
    for n in 0..3 {
        uow.raise(OrderingEvent::Noted {
            order_id: format!("o-{n}"),
            n,
        });
    }
    uow.commit().await.unwrap();
    let broker = InProcessBroker::new();
    let mut relay = Relay::builder(db.conn().clone(), outbox.clone(), broker.clone())
        .backoff(
            Backoff::new()
                .with_min_delay(Duration::from_millis(30))
                .with_max_delay(Duration::from_millis(30))
                .with_jitter(false),
        )
        .max_attempts(100)
        .build()
        .unwrap();

    broker.go_down();
    for _ in 0..3 {
        assert_eq!(relay.drain().await.unwrap().published, 0);
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    let warnings = capture.relay_lines(tracing::Level::WARN);
    assert_eq!(warnings.len(), 1, "one WARN for the outage: {warnings:#?}");
    let warning = &warnings[0].fields;
    assert!(warning.contains("publishing failed"), "{warning}");
    assert!(
        warning.contains("publisher=\"InProcessBroker\""),
        "{warning}"
    );
    assert!(warning.contains("error="), "{warning}");
    assert!(warning.contains("failed_rows=3"), "{warning}");

    broker.come_up();
    tokio::time::sleep(Duration::from_millis(40)).await;
    assert_eq!(relay.drain().await.unwrap().published, 3);
    let infos: Vec<Line> = capture
        .relay_lines(tracing::Level::INFO)
        .into_iter()
        .filter(|line| line.fields.contains("publishing recovered"))
        .collect();
    assert_eq!(infos.len(), 1, "{infos:#?}");
    assert!(
        infos[0].fields.contains("failed_attempts=9"),
        "three drains of three rows: {}",
        infos[0].fields
    );
    assert_eq!(
        capture.relay_lines(tracing::Level::WARN).len(),
        1,
        "no WARN after the recovery"
    );
    db.close().await;
}
