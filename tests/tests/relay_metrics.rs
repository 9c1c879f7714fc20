//! The relay's metrics through the `metrics` facade: names from `outbox_core::metric`,
//! bounded labels. A test binary of its own, since it installs the global recorder.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use metrics::{
    Counter, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder, SharedString, Unit,
};
use outbox_core::Raise;
use outbox_core::in_process::InProcessBroker;
use outbox_core::metric;
use outbox_core::publish::PublishError;
use outbox_seaorm::ops::Operations;
use outbox_seaorm::relay::Relay;
use outbox_seaorm::{Outbox, schema};
use outbox_tests::bookstore::{OrderingContracts, OrderingEvent};
use outbox_tests::db::TestDb;

#[derive(Default)]
struct Samples(Mutex<Vec<f64>>);

impl HistogramFn for Samples {
    fn record(&self, value: f64) {
        self.0.lock().unwrap().push(value);
    }
}

/// Keeps every metric by `name{label=value,…}`.
#[derive(Default)]
struct Memory {
    counters: Mutex<BTreeMap<String, Arc<AtomicU64>>>,
    gauges: Mutex<BTreeMap<String, Arc<AtomicU64>>>,
    histograms: Mutex<BTreeMap<String, Arc<Samples>>>,
}

fn render(key: &Key) -> String {
    let labels: Vec<String> = key
        .labels()
        .map(|l| format!("{}={}", l.key(), l.value()))
        .collect();
    format!("{}{{{}}}", key.name(), labels.join(","))
}

impl Recorder for &'static Memory {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(
            self.counters
                .lock()
                .unwrap()
                .entry(render(key))
                .or_default()
                .clone(),
        )
    }
    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::from_arc(
            self.gauges
                .lock()
                .unwrap()
                .entry(render(key))
                .or_default()
                .clone(),
        )
    }
    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::from_arc(
            self.histograms
                .lock()
                .unwrap()
                .entry(render(key))
                .or_default()
                .clone(),
        )
    }
}

impl Memory {
    fn counter(&self, key: &str) -> u64 {
        self.counters
            .lock()
            .unwrap()
            .get(key)
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }
    fn gauge(&self, key: &str) -> f64 {
        self.gauges
            .lock()
            .unwrap()
            .get(key)
            .map_or(f64::NAN, |g| f64::from_bits(g.load(Ordering::Relaxed)))
    }
    fn samples(&self, key: &str) -> usize {
        self.histograms
            .lock()
            .unwrap()
            .get(key)
            .map_or(0, |h| h.0.lock().unwrap().len())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_emits_documented_metrics() {
    let memory: &'static Memory = Box::leak(Box::default());
    metrics::set_global_recorder(memory).unwrap();
    let db = TestDb::sqlite_memory().await;
    let outbox = Outbox::default();
    schema::install(db.conn(), &outbox).await.unwrap();
    let uow = outbox.begin(db.conn(), &OrderingContracts).await.unwrap();
    for (order, n) in [
        ("ok-1", 0),
        ("ok-2", 0),
        ("rejected", 0),
        ("flaky", 0),
        ("rejected", 1),
    ] {
        uow.raise(OrderingEvent::Noted {
            order_id: order.into(),
            n,
        });
    }
    uow.commit().await.unwrap();
    let broker = InProcessBroker::new();
    broker.fail_messages(|e| match e.aggregate_id.as_str() {
        "rejected" => Some(PublishError::rejected("schema")),
        "flaky" => Some(PublishError::timeout("no ack")),
        _ => None,
    });
    let mut relay = Relay::builder(db.conn().clone(), outbox.clone(), broker)
        .build()
        .unwrap();
    relay.drain().await.unwrap();
    Operations::new(db.conn().clone(), outbox)
        .status()
        .await
        .unwrap();

    let o = "outbox=outbox";
    assert_eq!(memory.counter(&format!("{}{{{o}}}", metric::PUBLISHED)), 2);
    assert_eq!(
        memory.counter(&format!(
            "{}{{{o},class=transient}}",
            metric::PUBLISH_FAILURES
        )),
        1
    );
    assert_eq!(
        memory.counter(&format!(
            "{}{{{o},class=permanent}}",
            metric::PUBLISH_FAILURES
        )),
        1
    );
    assert_eq!(
        memory.counter(&format!(
            "{}{{{o},event_type=outboxtest.ordering.order-noted.v2}}",
            metric::DEAD_LETTERED
        )),
        1
    );
    assert_eq!(
        memory.gauge(&format!("{}{{{o}}}", metric::PENDING_ROWS)),
        2.0
    );
    assert_eq!(
        memory.gauge(&format!("{}{{{o}}}", metric::BACKOFF_ROWS)),
        1.0,
        "flaky"
    );
    assert_eq!(
        memory.gauge(&format!("{}{{{o}}}", metric::HELD_ROWS)),
        1.0,
        "rejected's second row, behind its dead row"
    );
    assert_eq!(memory.gauge(&format!("{}{{{o}}}", metric::DEAD_ROWS)), 1.0);
    assert_eq!(
        memory.gauge(&format!("{}{{{o}}}", metric::OLDEST_CLAIMABLE_AGE)),
        0.0,
        "in backoff"
    );
    assert_eq!(
        memory.gauge(&format!("{}{{{o}}}", metric::LEASES_OWNED)),
        1.0
    );
    assert!(memory.gauge(&format!("{}{{{o}}}", metric::RELAY_HEARTBEAT)) > 1.7e9);
    assert_eq!(
        memory.samples(&format!("{}{{{o}}}", metric::BATCH_DURATION)),
        1
    );
    assert_eq!(memory.samples(&format!("{}{{{o}}}", metric::BATCH_SIZE)), 1);
    // No label carries an id.
    for key in memory.counters.lock().unwrap().keys() {
        assert!(!key.contains("ok-1") && !key.contains("relay-"), "{key}");
    }
    db.close().await;
}
