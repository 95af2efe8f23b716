//! The clock the command path times commands with (commandstats `usec`, the slow log, the
//! latency monitor). Every command reads it twice, and a script's `redis.call`s are commands
//! too, so its cost counts: a vDSO `clock_gettime` costs about 24 ns here, where the
//! processor's time-stamp counter costs about 9 ns. The counter is used where the kernel itself
//! trusts it as its clocksource (`tsc`: invariant, synchronised across cores); elsewhere, and
//! off x86-64, `Instant` is.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Decides the clock (calibrating the counter: 10 ms) before the first command, so that no
/// client's first command waits for it. Called at start-up.
pub fn init() {
    let _ = source();
}

/// A point in time to measure a command's duration from.
#[derive(Clone, Copy)]
pub struct Stamp(u64);

/// How to read the clock, decided once.
enum Source {
    /// The time-stamp counter, at `ns_per_tick` nanoseconds per tick (calibrated against
    /// `Instant`).
    Counter { ns_per_tick: f64 },
    /// `Instant`, counted from `origin`.
    Monotonic { origin: Instant },
}

fn source() -> &'static Source {
    static SOURCE: OnceLock<Source> = OnceLock::new();
    SOURCE.get_or_init(|| match calibrate() {
        Some(ns_per_tick) => Source::Counter { ns_per_tick },
        None => Source::Monotonic {
            origin: Instant::now(),
        },
    })
}

/// Nanoseconds per counter tick, measured over 10 ms against `Instant`, when the kernel's
/// clocksource is the counter; None otherwise. Both clocks count wall time, so being
/// descheduled meanwhile does not skew the ratio. It runs once, before the server's first
/// command is stamped (that command's reply is 10 ms later; its measured time is not).
#[cfg(target_arch = "x86_64")]
fn calibrate() -> Option<f64> {
    let clocksource =
        std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
            .ok()?;
    if clocksource.trim() != "tsc" {
        return None;
    }
    let (t0, c0) = (Instant::now(), counter());
    while t0.elapsed() < Duration::from_millis(10) {
        std::hint::spin_loop();
    }
    let (nanos, ticks) = (t0.elapsed().as_nanos() as f64, counter().wrapping_sub(c0));
    (ticks > 0).then(|| nanos / ticks as f64)
}

#[cfg(not(target_arch = "x86_64"))]
fn calibrate() -> Option<f64> {
    None
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn counter() -> u64 {
    // SAFETY: RDTSC has no preconditions; it is available on every x86-64 processor.
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn counter() -> u64 {
    0
}

impl Stamp {
    #[inline]
    pub fn now() -> Stamp {
        match source() {
            Source::Counter { .. } => Stamp(counter()),
            Source::Monotonic { origin } => Stamp(origin.elapsed().as_nanos() as u64),
        }
    }

    /// Nanoseconds since this stamp.
    #[inline]
    pub fn elapsed_nanos(self) -> u64 {
        match source() {
            Source::Counter { ns_per_tick } => {
                (counter().saturating_sub(self.0) as f64 * ns_per_tick) as u64
            }
            Source::Monotonic { origin } => {
                (origin.elapsed().as_nanos() as u64).saturating_sub(self.0)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_agree_with_the_monotonic_clock() {
        let (stamp, at) = (Stamp::now(), Instant::now());
        std::thread::sleep(Duration::from_millis(30));
        let (ours, theirs) = (stamp.elapsed_nanos(), at.elapsed().as_nanos() as u64);
        // Within 5% (the calibration's error) plus the time between the two reads.
        let gap = ours.abs_diff(theirs);
        assert!(gap < theirs / 20 + 1_000_000, "{ours} vs {theirs}");
        assert!(Stamp::now().elapsed_nanos() < 1_000_000_000);
    }
}
