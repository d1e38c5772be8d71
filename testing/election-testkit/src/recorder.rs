//! [`TestRecorder`]: a [`metrics::Recorder`] that keeps every value, for
//! tests that check a metric moved on the right event.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use metrics::{Counter, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, SharedString, Unit};

#[derive(Default)]
struct Values {
    counters: HashMap<String, Arc<AtomicU64>>,
    gauges: HashMap<String, Arc<AtomicU64>>,
    histograms: HashMap<String, Arc<Samples>>,
}

#[derive(Default)]
struct Samples(Mutex<Vec<f64>>);

impl HistogramFn for Samples {
    fn record(&self, value: f64) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(value);
    }
}

/// A recorder that keeps every counter, gauge and histogram sample until
/// it is dropped (unlike a snapshot that resets them), read back by name
/// and labels. Install it for one thread with
/// [`metrics::with_local_recorder`] around a current-thread runtime's
/// `block_on`, so parallel tests do not see each other's metrics.
///
/// ```
/// use election_testkit::recorder::TestRecorder;
///
/// let recorder = TestRecorder::new();
/// metrics::with_local_recorder(&recorder, || {
///     metrics::counter!("jobs_total", "name" => "a").increment(2);
/// });
/// assert_eq!(recorder.counter("jobs_total", &[("name", "a")]), 2);
/// assert_eq!(recorder.counter("jobs_total", &[("name", "b")]), 0);
/// ```
#[derive(Clone, Default)]
pub struct TestRecorder {
    values: Arc<Mutex<Values>>,
}

impl std::fmt::Debug for TestRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v = self.lock();
        f.debug_struct("TestRecorder")
            .field("counters", &v.counters.keys().collect::<Vec<_>>())
            .field("gauges", &v.gauges.keys().collect::<Vec<_>>())
            .field("histograms", &v.histograms.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// `name{k="v",...}` with the labels sorted: one string per series.
fn series(name: &str, labels: &mut [(String, String)]) -> String {
    labels.sort();
    let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
    format!("{name}{{{}}}", labels.join(","))
}

fn series_of(key: &Key) -> String {
    let mut labels: Vec<(String, String)> = key
        .labels()
        .map(|l| (l.key().to_owned(), l.value().to_owned()))
        .collect();
    series(key.name(), &mut labels)
}

fn series_asked(name: &str, labels: &[(&str, &str)]) -> String {
    let mut labels: Vec<(String, String)> = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    series(name, &mut labels)
}

impl TestRecorder {
    /// An empty recorder.
    ///
    /// ```
    /// let recorder = election_testkit::recorder::TestRecorder::new();
    /// assert!(recorder.series().is_empty());
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Values> {
        self.values.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The counter `name` with exactly `labels` (any order); 0 if never
    /// registered.
    ///
    /// ```
    /// # use election_testkit::recorder::TestRecorder;
    /// let recorder = TestRecorder::new();
    /// metrics::with_local_recorder(&recorder, || {
    ///     metrics::counter!("won_total", "name" => "jobs", "set" => "a").increment(1);
    /// });
    /// assert_eq!(recorder.counter("won_total", &[("set", "a"), ("name", "jobs")]), 1);
    /// ```
    pub fn counter(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        self.lock()
            .counters
            .get(&series_asked(name, labels))
            .map_or(0, |c| c.load(Ordering::SeqCst))
    }

    /// The gauge `name` with exactly `labels`; `None` if never registered.
    ///
    /// ```
    /// # use election_testkit::recorder::TestRecorder;
    /// let recorder = TestRecorder::new();
    /// metrics::with_local_recorder(&recorder, || {
    ///     let leader = metrics::gauge!("leader", "name" => "jobs");
    ///     leader.increment(1.0);
    ///     leader.decrement(1.0);
    /// });
    /// assert_eq!(recorder.gauge("leader", &[("name", "jobs")]), Some(0.0));
    /// assert_eq!(recorder.gauge("leader", &[("name", "other")]), None);
    /// ```
    pub fn gauge(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.lock()
            .gauges
            .get(&series_asked(name, labels))
            .map(|g| f64::from_bits(g.load(Ordering::SeqCst)))
    }

    /// Every sample of the histogram `name` with exactly `labels`.
    ///
    /// ```
    /// # use election_testkit::recorder::TestRecorder;
    /// let recorder = TestRecorder::new();
    /// metrics::with_local_recorder(&recorder, || {
    ///     metrics::histogram!("wait_seconds").record(0.5);
    /// });
    /// assert_eq!(recorder.histogram("wait_seconds", &[]), vec![0.5]);
    /// ```
    pub fn histogram(&self, name: &str, labels: &[(&str, &str)]) -> Vec<f64> {
        self.lock()
            .histograms
            .get(&series_asked(name, labels))
            .map(|h| h.0.lock().unwrap_or_else(|p| p.into_inner()).clone())
            .unwrap_or_default()
    }

    /// Every series registered so far (`name{labels}`), for messages.
    ///
    /// ```
    /// # use election_testkit::recorder::TestRecorder;
    /// let recorder = TestRecorder::new();
    /// metrics::with_local_recorder(&recorder, || {
    ///     metrics::counter!("won_total", "name" => "jobs").increment(1);
    /// });
    /// assert_eq!(recorder.series(), vec![r#"won_total{name="jobs"}"#.to_owned()]);
    /// ```
    pub fn series(&self) -> Vec<String> {
        let v = self.lock();
        let mut all: Vec<String> = v
            .counters
            .keys()
            .chain(v.gauges.keys())
            .chain(v.histograms.keys())
            .cloned()
            .collect();
        all.sort();
        all
    }
}

impl metrics::Recorder for TestRecorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        let c = self
            .lock()
            .counters
            .entry(series_of(key))
            .or_default()
            .clone();
        Counter::from_arc(c)
    }

    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        let g = self
            .lock()
            .gauges
            .entry(series_of(key))
            .or_default()
            .clone();
        Gauge::from_arc(g)
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        let h = self
            .lock()
            .histograms
            .entry(series_of(key))
            .or_default()
            .clone();
        Histogram::from_arc(h)
    }
}
