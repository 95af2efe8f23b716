//! The latency monitor (LATENCY LATEST / HISTORY / RESET / GRAPH / DOCTOR / HELP): for each
//! event, the worst latency of every second in which it reached `latency-monitor-threshold`
//! milliseconds, the last 160 such seconds (Redis's LATENCY_TS_LEN), and the all-time maximum.
//!
//! Events: `command` and `fast-command` (a command's handler time, split by the FAST flag as
//! Redis splits them), `expire-cycle` (one round of the store's active expiry over every
//! shard), `eviction-cycle` (the eviction a write ran to make room) and `sql` (an SQL
//! statement's run time on the engine, from when a thread picks it up to its result).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use parking_lot::Mutex;

pub const COMMAND: &str = "command";
pub const FAST_COMMAND: &str = "fast-command";
pub const EXPIRE_CYCLE: &str = "expire-cycle";
pub const EVICTION_CYCLE: &str = "eviction-cycle";
pub const SQL: &str = "sql";

/// Samples kept per event.
pub const HISTORY_LEN: usize = 160;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sample {
    /// Unix time, seconds.
    pub time: u64,
    /// Milliseconds.
    pub latency: u64,
}

/// One event's samples, oldest first, one per second at most.
#[derive(Default)]
struct Series {
    samples: std::collections::VecDeque<Sample>,
    max: u64,
}

#[derive(Default)]
pub struct LatencyMonitor {
    events: Mutex<BTreeMap<&'static str, Series>>,
}

impl LatencyMonitor {
    /// Records `latency_ms` for `event` when the monitor is on (`threshold_ms` > 0) and it
    /// reaches the threshold.
    #[inline]
    pub fn sample_if_needed(&self, threshold_ms: u64, event: &'static str, latency_ms: u64) {
        if threshold_ms != 0 && latency_ms >= threshold_ms {
            self.add(event, latency_ms, store::now_ms() / 1000);
        }
    }

    /// Adds a sample at `now` (Unix seconds): a second already sampled keeps its worst.
    pub fn add(&self, event: &'static str, latency_ms: u64, now: u64) {
        let mut events = self.events.lock();
        let series = events.entry(event).or_default();
        series.max = series.max.max(latency_ms);
        if let Some(last) = series.samples.back_mut().filter(|s| s.time == now) {
            last.latency = last.latency.max(latency_ms);
            return;
        }
        if series.samples.len() == HISTORY_LEN {
            series.samples.pop_front();
        }
        series.samples.push_back(Sample {
            time: now,
            latency: latency_ms,
        });
    }

    /// Per event: (name, latest sample, all-time max), by name.
    pub fn latest(&self) -> Vec<(&'static str, Sample, u64)> {
        self.events
            .lock()
            .iter()
            .filter_map(|(name, s)| Some((*name, *s.samples.back()?, s.max)))
            .collect()
    }

    /// An event's samples, oldest first; None if it has none.
    pub fn history(&self, event: &[u8]) -> Option<Vec<Sample>> {
        let events = self.events.lock();
        let (_, series) = events.iter().find(|(name, _)| name.as_bytes() == event)?;
        Some(series.samples.iter().copied().collect())
    }

    /// Forgets `event` (any case), or every event; returns how many were forgotten.
    pub fn reset(&self, event: Option<&[u8]>) -> usize {
        let mut events = self.events.lock();
        let before = events.len();
        events.retain(|name, _| event.is_some_and(|e| !name.as_bytes().eq_ignore_ascii_case(e)));
        before - events.len()
    }
}

/// A short text graph of an event's samples: one row per sample, oldest first, a bar as long
/// as the sample is high relative to the highest.
pub fn graph(event: &str, samples: &[Sample]) -> String {
    let high = samples.iter().map(|s| s.latency).max().unwrap_or(0);
    let low = samples.iter().map(|s| s.latency).min().unwrap_or(0);
    let mut text = format!("{event} - high {high} ms, low {low} ms\n");
    for s in samples {
        let width = (s.latency * 40).checked_div(high).unwrap_or(0).max(1) as usize;
        let _ = writeln!(
            text,
            "{:>10} {:>6} ms {}",
            s.time,
            s.latency,
            "#".repeat(width)
        );
    }
    text
}

/// LATENCY DOCTOR: whether the monitor is on, then one line per event.
pub fn doctor(threshold_ms: u64, latest: &[(&'static str, Sample, u64)]) -> String {
    if threshold_ms == 0 {
        return "Latency monitoring is disabled on this server. Enable it with \
                CONFIG SET latency-monitor-threshold <milliseconds>.\n"
            .into();
    }
    if latest.is_empty() {
        return format!("No event reached the latency threshold ({threshold_ms} ms) yet.\n");
    }
    let mut text = format!("Events that reached the latency threshold ({threshold_ms} ms):\n");
    for (name, sample, max) in latest {
        let _ = writeln!(
            text,
            "- {name}: latest {} ms at {}, all-time high {max} ms",
            sample.latency, sample.time
        );
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_sample_per_second_keeps_the_worst() {
        let m = LatencyMonitor::default();
        m.add(COMMAND, 5, 100);
        m.add(COMMAND, 9, 100);
        m.add(COMMAND, 3, 100);
        m.add(COMMAND, 4, 101);
        assert_eq!(
            m.history(b"command").unwrap(),
            [
                Sample {
                    time: 100,
                    latency: 9
                },
                Sample {
                    time: 101,
                    latency: 4
                }
            ]
        );
        assert_eq!(
            m.latest(),
            [(
                COMMAND,
                Sample {
                    time: 101,
                    latency: 4
                },
                9
            )]
        );
        assert!(m.history(b"sql").is_none());
    }

    #[test]
    fn history_is_bounded() {
        let m = LatencyMonitor::default();
        for t in 0..1000 {
            m.add(SQL, t, t);
        }
        let h = m.history(b"sql").unwrap();
        assert_eq!(h.len(), HISTORY_LEN);
        assert_eq!(h[0].time, 1000 - HISTORY_LEN as u64);
        assert_eq!(m.latest()[0].2, 999);
    }

    #[test]
    fn threshold_and_reset() {
        let m = LatencyMonitor::default();
        m.sample_if_needed(0, COMMAND, 1000);
        m.sample_if_needed(10, COMMAND, 9);
        assert!(m.latest().is_empty());
        m.sample_if_needed(10, COMMAND, 10);
        m.sample_if_needed(10, EXPIRE_CYCLE, 11);
        assert_eq!(m.latest().len(), 2);
        assert_eq!(m.reset(Some(b"COMMAND")), 1);
        assert_eq!(m.reset(Some(b"nosuch")), 0);
        assert_eq!(m.reset(None), 1);
        assert!(m.latest().is_empty());
    }
}
