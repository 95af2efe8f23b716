//! Instantaneous rates and peaks for INFO (`instantaneous_ops_per_sec`, `instantaneous_*_kbps`,
//! `used_memory_peak`): a background thread samples the counters every 100 ms and a rate is
//! the mean of the last 16 samples, as Redis's serverCron computes them.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::shared::Shared;

const SAMPLE_EVERY: Duration = Duration::from_millis(100);
const SAMPLES: usize = 16;

/// One counter's recent per-second rates.
#[derive(Default)]
struct Rate {
    last: Option<(Instant, u64)>,
    samples: [u64; SAMPLES],
    next: usize,
}

impl Rate {
    fn sample(&mut self, now: Instant, value: u64) {
        if let Some((then, before)) = self.last {
            let ms = now.duration_since(then).as_millis().max(1) as u64;
            self.samples[self.next] = value.saturating_sub(before) * 1000 / ms;
            self.next = (self.next + 1) % SAMPLES;
        }
        self.last = Some((now, value));
    }

    fn per_sec(&self) -> u64 {
        self.samples.iter().sum::<u64>() / SAMPLES as u64
    }
}

#[derive(Default)]
struct Rates {
    ops: Rate,
    input: Rate,
    output: Rate,
}

/// Per second: commands, input bytes, output bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct PerSecond {
    pub ops: u64,
    pub input_bytes: u64,
    pub output_bytes: u64,
}

#[derive(Default)]
pub struct Metrics {
    rates: Mutex<Rates>,
    peak_memory: AtomicU64,
}

impl Metrics {
    /// Starts the sampling thread; it ends once the server's shared state is dropped.
    pub fn start(shared: &Arc<Shared>) {
        let weak: Weak<Shared> = Arc::downgrade(shared);
        let spawned = std::thread::Builder::new()
            .name("cairn-metrics".into())
            .spawn(move || loop {
                std::thread::sleep(SAMPLE_EVERY);
                match weak.upgrade() {
                    Some(shared) => shared.metrics.sample(&shared),
                    None => return,
                }
            });
        if let Err(e) = spawned {
            tracing::warn!("metrics thread did not start (INFO rates stay 0): {e}");
        }
    }

    fn sample(&self, shared: &Shared) {
        let now = Instant::now();
        let s = &shared.stats;
        {
            let mut r = self.rates.lock();
            r.ops.sample(now, s.total_commands_processed.load(Relaxed));
            r.input.sample(now, s.net_input_bytes.load(Relaxed));
            r.output.sample(now, s.net_output_bytes.load(Relaxed));
        }
        self.note_memory(used_memory(shared));
    }

    /// Raises the peak to `used` if higher; returns the peak.
    pub fn note_memory(&self, used: u64) -> u64 {
        self.peak_memory.fetch_max(used, Relaxed).max(used)
    }

    pub fn instantaneous(&self) -> PerSecond {
        let r = self.rates.lock();
        PerSecond {
            ops: r.ops.per_sec(),
            input_bytes: r.input.per_sec(),
            output_bytes: r.output.per_sec(),
        }
    }

    /// CONFIG RESETSTAT: forgets the rates (the memory peak is kept, as in Redis).
    pub fn reset(&self) {
        *self.rates.lock() = Rates::default();
    }
}

/// The memory INFO reports as `used_memory`, whose peak is tracked.
pub fn used_memory(shared: &Shared) -> u64 {
    // Client buffers count as Redis counts them: in used_memory and against maxmemory; the
    // change backlog in used_memory only (it has its own bound).
    shared.store.used_memory()
        + shared.store.external_memory()
        + shared.store.change_backlog_memory()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_is_the_mean_of_recent_samples() {
        let mut r = Rate::default();
        let t0 = Instant::now();
        r.sample(t0, 0);
        assert_eq!(r.per_sec(), 0);
        for i in 1..=SAMPLES as u64 {
            r.sample(t0 + Duration::from_millis(100 * i), 50 * i);
        }
        // 50 per 100 ms.
        assert_eq!(r.per_sec(), 500);
        // A counter reset (RESETSTAT) never gives a huge rate.
        r.sample(t0 + Duration::from_millis(1800), 0);
        assert!(r.per_sec() < 500);
    }

    #[test]
    fn peak_only_rises() {
        let m = Metrics::default();
        assert_eq!(m.note_memory(10), 10);
        assert_eq!(m.note_memory(5), 10);
        assert_eq!(m.note_memory(12), 12);
    }
}
