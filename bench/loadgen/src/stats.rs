//! Per-thread recording (HDR histograms in nanoseconds, counters) and the
//! merged summary.

use crate::proto::{Op, Reply};
use hdrhistogram::Histogram;

/// Highest trackable latency: one hour, in nanoseconds.
pub const MAX_TRACKABLE_NS: u64 = 3_600 * 1_000_000_000;
/// Significant decimal digits kept by the histograms (0.1% resolution).
pub const SIGFIG: u8 = 3;
/// How many error replies are kept verbatim for the report.
pub const MAX_ERROR_SAMPLES: usize = 5;

pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_TRACKABLE_NS, SIGFIG).expect("valid histogram bounds")
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Replies received (all kinds, errors included).
    pub ops: u64,
    pub gets: u64,
    pub sets: u64,
    pub nulls: u64,
    pub hits: u64,
    pub misses: u64,
    pub errors: u64,
    pub bytes_out: u64,
    pub bytes_in: u64,
}

impl Counters {
    pub fn add(&mut self, o: &Counters) {
        self.ops += o.ops;
        self.gets += o.gets;
        self.sets += o.sets;
        self.nulls += o.nulls;
        self.hits += o.hits;
        self.misses += o.misses;
        self.errors += o.errors;
        self.bytes_out += o.bytes_out;
        self.bytes_in += o.bytes_in;
    }
}

/// Everything one thread measures.
pub struct Recorder {
    pub all: Histogram<u64>,
    pub get: Histogram<u64>,
    pub set: Histogram<u64>,
    /// Open loop: how late each request was sent after its intended time.
    pub lag: Histogram<u64>,
    pub counters: Counters,
    pub error_samples: Vec<String>,
}

impl Default for Recorder {
    fn default() -> Self {
        Self::new()
    }
}

impl Recorder {
    pub fn new() -> Recorder {
        Recorder {
            all: new_histogram(),
            get: new_histogram(),
            set: new_histogram(),
            lag: new_histogram(),
            counters: Counters::default(),
            error_samples: Vec::new(),
        }
    }

    /// Records one reply that took `latency_ns`.
    #[inline]
    pub fn record(&mut self, op: Op, reply: Reply, latency_ns: u64) {
        let v = latency_ns.max(1);
        self.all.saturating_record(v);
        let c = &mut self.counters;
        c.ops += 1;
        match op {
            Op::Get => {
                c.gets += 1;
                self.get.saturating_record(v);
            }
            Op::Set => {
                c.sets += 1;
                self.set.saturating_record(v);
            }
            Op::Null => c.nulls += 1,
        }
        match reply {
            Reply::Hit => c.hits += 1,
            Reply::Miss => c.misses += 1,
            Reply::Error => c.errors += 1,
            Reply::Ok => {}
        }
    }

    #[inline]
    pub fn record_lag(&mut self, lag_ns: u64) {
        self.lag.saturating_record(lag_ns.max(1));
    }

    pub fn sample_error(&mut self, text: &[u8]) {
        if self.error_samples.len() < MAX_ERROR_SAMPLES {
            let t = &text[..text.len().min(200)];
            self.error_samples
                .push(String::from_utf8_lossy(t).trim_end().to_string());
        }
    }

    /// Forgets everything (the end of the warm-up).
    pub fn reset(&mut self) {
        self.all.reset();
        self.get.reset();
        self.set.reset();
        self.lag.reset();
        self.counters = Counters::default();
        self.error_samples.clear();
    }

    pub fn merge(&mut self, other: &Recorder) {
        self.all.add(&other.all).expect("same bounds");
        self.get.add(&other.get).expect("same bounds");
        self.set.add(&other.set).expect("same bounds");
        self.lag.add(&other.lag).expect("same bounds");
        self.counters.add(&other.counters);
        for e in &other.error_samples {
            if self.error_samples.len() < MAX_ERROR_SAMPLES {
                self.error_samples.push(e.clone());
            }
        }
    }
}

/// Latency percentiles in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Summary {
    pub count: u64,
    pub min_us: f64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub p9999_us: f64,
    pub max_us: f64,
}

pub fn summarize(h: &Histogram<u64>) -> Summary {
    if h.is_empty() {
        return Summary::default();
    }
    let us = |ns: u64| ns as f64 / 1_000.0;
    Summary {
        count: h.len(),
        min_us: us(h.min()),
        mean_us: h.mean() / 1_000.0,
        p50_us: us(h.value_at_quantile(0.50)),
        p90_us: us(h.value_at_quantile(0.90)),
        p99_us: us(h.value_at_quantile(0.99)),
        p999_us: us(h.value_at_quantile(0.999)),
        p9999_us: us(h.value_at_quantile(0.9999)),
        max_us: us(h.max()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        // Within the histogram's resolution (3 significant digits).
        (a - b).abs() <= b.abs() * 2e-3 + 1e-9
    }

    #[test]
    fn percentiles_of_a_known_distribution() {
        let mut r = Recorder::new();
        // 1..=10000 microseconds, once each.
        for i in 1..=10_000u64 {
            r.record(Op::Get, Reply::Hit, i * 1_000);
        }
        let s = summarize(&r.all);
        assert_eq!(s.count, 10_000);
        assert!(close(s.min_us, 1.0), "{s:?}");
        assert!(close(s.p50_us, 5_000.0), "{s:?}");
        assert!(close(s.p90_us, 9_000.0), "{s:?}");
        assert!(close(s.p99_us, 9_900.0), "{s:?}");
        assert!(close(s.p999_us, 9_990.0), "{s:?}");
        assert!(close(s.max_us, 10_000.0), "{s:?}");
        assert!(close(s.mean_us, 5_000.5), "{s:?}");
    }

    #[test]
    fn merging_equals_recording_everything_in_one() {
        let mut a = Recorder::new();
        let mut b = Recorder::new();
        let mut both = Recorder::new();
        for i in 0..5_000u64 {
            let lat = 10_000 + (i * 7919) % 900_000;
            let (op, reply) = if i % 10 == 0 {
                (Op::Set, Reply::Ok)
            } else {
                (Op::Get, if i % 3 == 0 { Reply::Miss } else { Reply::Hit })
            };
            if i % 2 == 0 {
                a.record(op, reply, lat);
            } else {
                b.record(op, reply, lat);
            }
            both.record(op, reply, lat);
        }
        a.merge(&b);
        assert_eq!(a.counters, both.counters);
        assert_eq!(summarize(&a.all), summarize(&both.all));
        assert_eq!(summarize(&a.get), summarize(&both.get));
        assert_eq!(summarize(&a.set), summarize(&both.set));
        assert_eq!(a.counters.gets + a.counters.sets, a.counters.ops);
        assert_eq!(a.counters.hits + a.counters.misses, a.counters.gets);
    }

    #[test]
    fn a_stall_dominates_the_tail_not_the_median() {
        // 99.8% fast replies and two stalls: the stall must show at p99.9 and max.
        let mut r = Recorder::new();
        for _ in 0..998 {
            r.record(Op::Get, Reply::Hit, 20_000);
        }
        r.record(Op::Get, Reply::Hit, 50_000_000);
        r.record(Op::Get, Reply::Hit, 50_000_000);
        let s = summarize(&r.all);
        assert!(close(s.p50_us, 20.0));
        assert!(close(s.p99_us, 20.0));
        assert!(close(s.p999_us, 50_000.0), "{s:?}");
        assert!(close(s.max_us, 50_000.0));
    }

    #[test]
    fn counters_errors_zero_latency_and_reset() {
        let mut r = Recorder::new();
        r.record(Op::Set, Reply::Error, 0);
        r.record(Op::Null, Reply::Ok, 5);
        r.sample_error(b"-OOM command not allowed\r\n");
        assert_eq!(r.counters.errors, 1);
        assert_eq!(r.counters.nulls, 1);
        assert_eq!(
            r.error_samples,
            vec!["-OOM command not allowed".to_string()]
        );
        assert_eq!(
            r.all.min(),
            1,
            "zero is clamped to the lowest trackable value"
        );
        for _ in 0..10 {
            r.sample_error(b"x");
        }
        assert_eq!(r.error_samples.len(), MAX_ERROR_SAMPLES);
        r.reset();
        assert_eq!(r.counters, Counters::default());
        assert!(r.all.is_empty());
        assert_eq!(summarize(&r.all), Summary::default());
    }

    #[test]
    fn values_past_the_range_saturate_instead_of_failing() {
        let mut r = Recorder::new();
        r.record(Op::Get, Reply::Hit, u64::MAX);
        assert_eq!(r.counters.ops, 1);
        assert!(summarize(&r.all).max_us >= MAX_TRACKABLE_NS as f64 / 1_000.0 * 0.99);
    }
}
