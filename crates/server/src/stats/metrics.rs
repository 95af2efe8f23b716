//! Instantaneous rates and peaks for INFO (`instantaneous_ops_per_sec`, `instantaneous_*_kbps`,
//! `instantaneous_*_repl_kbps`, `used_memory_peak`): a background thread samples the counters
//! every 100 ms and a rate is the mean of the last 16 samples, as Redis's serverCron computes
//! them.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

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
    repl_input: Rate,
    repl_output: Rate,
}

/// The running totals sampled (and, per second, the rates derived from them). As in Redis 7,
/// `input_bytes` and `output_bytes` include the replication links' bytes, which the `repl_`
/// fields also count apart.
#[derive(Debug, Clone, Copy, Default)]
pub struct Counters {
    pub commands: u64,
    pub input_bytes: u64,
    pub output_bytes: u64,
    pub repl_input_bytes: u64,
    pub repl_output_bytes: u64,
}

/// Per second: commands, input bytes, output bytes, replication bytes in and out.
pub type PerSecond = Counters;

#[derive(Default)]
pub struct Metrics {
    rates: Mutex<Rates>,
    peak_memory: AtomicU64,
}

/// Starts the sampling thread, which calls `sample` every 100 ms until it returns false (the
/// server's shared state is gone).
pub fn start(mut sample: impl FnMut() -> bool + Send + 'static) {
    let spawned = std::thread::Builder::new()
        .name("cairn-metrics".into())
        .spawn(move || loop {
            std::thread::sleep(SAMPLE_EVERY);
            if !sample() {
                return;
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("metrics thread did not start (INFO rates stay 0): {e}");
    }
}

impl Metrics {
    /// One sample of the counters and of `used_memory`.
    pub fn sample(&self, c: Counters, used_memory: u64) {
        let now = Instant::now();
        {
            let mut r = self.rates.lock();
            r.ops.sample(now, c.commands);
            r.input.sample(now, c.input_bytes);
            r.output.sample(now, c.output_bytes);
            r.repl_input.sample(now, c.repl_input_bytes);
            r.repl_output.sample(now, c.repl_output_bytes);
        }
        self.note_memory(used_memory);
    }

    /// Raises the peak to `used` if higher; returns the peak.
    pub fn note_memory(&self, used: u64) -> u64 {
        self.peak_memory.fetch_max(used, Relaxed).max(used)
    }

    pub fn instantaneous(&self) -> PerSecond {
        let r = self.rates.lock();
        PerSecond {
            commands: r.ops.per_sec(),
            input_bytes: r.input.per_sec(),
            output_bytes: r.output.per_sec(),
            repl_input_bytes: r.repl_input.per_sec(),
            repl_output_bytes: r.repl_output.per_sec(),
        }
    }

    /// CONFIG RESETSTAT: forgets the rates (the memory peak is kept, as in Redis).
    pub fn reset(&self) {
        *self.rates.lock() = Rates::default();
    }
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
