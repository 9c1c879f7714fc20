//! A `metrics` recorder that keeps every metric in memory, for the tests that check what
//! the relays emit (a test binary installs it once: the recorder is global).

#![allow(clippy::unwrap_used)] // a poisoned lock in a test recorder: the test has failed anyway

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use metrics::{
    Counter, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder, SharedString, Unit,
};

#[derive(Default)]
struct Samples(Mutex<Vec<f64>>);

impl HistogramFn for Samples {
    fn record(&self, value: f64) {
        self.0.lock().unwrap().push(value);
    }
}

/// Keeps every metric by `name{label=value,…}`: install it once per test binary with
/// [`Memory::install`].
#[derive(Default)]
pub struct Memory {
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
    /// The counter `key` (`name{label=value,…}`), 0 when never registered.
    pub fn counter(&self, key: &str) -> u64 {
        self.counters
            .lock()
            .unwrap()
            .get(key)
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }
    /// The gauge `key`, NaN when never registered.
    pub fn gauge(&self, key: &str) -> f64 {
        self.gauges
            .lock()
            .unwrap()
            .get(key)
            .map_or(f64::NAN, |g| f64::from_bits(g.load(Ordering::Relaxed)))
    }
    /// How many values histogram `key` recorded.
    pub fn samples(&self, key: &str) -> usize {
        self.histograms
            .lock()
            .unwrap()
            .get(key)
            .map_or(0, |h| h.0.lock().unwrap().len())
    }
}

impl Memory {
    /// The recorder of this test binary, installed as the global one by the first test that
    /// asks: for a binary whose tests record disjoint label values and may run concurrently.
    ///
    /// # Panics
    /// When another global recorder is installed already.
    pub fn shared() -> &'static Memory {
        static SHARED: std::sync::OnceLock<&'static Memory> = std::sync::OnceLock::new();
        SHARED.get_or_init(Memory::install)
    }

    /// A new recorder, installed as the global one (once per process).
    ///
    /// # Panics
    /// When a global recorder is installed already.
    pub fn install() -> &'static Memory {
        let memory: &'static Memory = Box::leak(Box::default());
        if metrics::set_global_recorder(memory).is_err() {
            panic!("a global metrics recorder is installed already");
        }
        memory
    }

    /// Every counter key registered so far.
    pub fn counter_keys(&self) -> Vec<String> {
        self.counters
            .lock()
            .map(|c| c.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// Every gauge key registered so far.
    pub fn gauge_keys(&self) -> Vec<String> {
        self.gauges
            .lock()
            .map(|g| g.keys().cloned().collect())
            .unwrap_or_default()
    }
}
