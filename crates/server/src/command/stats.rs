//! Per-command call counts and time (INFO commandstats). Each thread counts into its own
//! array of relaxed atomics, so hot commands on many cores never share a cache line; INFO sums
//! the arrays.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use super::{Command, COMMANDS};

struct ThreadCounters {
    calls: Box<[AtomicU64]>,
    nanos: Box<[AtomicU64]>,
}

fn registry() -> &'static Mutex<Vec<Arc<ThreadCounters>>> {
    static REGISTRY: OnceLock<Mutex<Vec<Arc<ThreadCounters>>>> = OnceLock::new();
    REGISTRY.get_or_init(Default::default)
}

thread_local! {
    static LOCAL: Arc<ThreadCounters> = {
        let zeros = || (0..COMMANDS.len()).map(|_| AtomicU64::new(0)).collect();
        let counters = Arc::new(ThreadCounters { calls: zeros(), nanos: zeros() });
        registry().lock().push(counters.clone());
        counters
    };
}

fn index_of(command: &'static Command) -> usize {
    (command as *const Command as usize - COMMANDS.as_ptr() as usize)
        / std::mem::size_of::<Command>()
}

/// Counts one call of `command` that took `nanos`.
pub fn record(command: &'static Command, nanos: u64) {
    let i = index_of(command);
    LOCAL.with(|c| {
        c.calls[i].fetch_add(1, Relaxed);
        c.nanos[i].fetch_add(nanos, Relaxed);
    });
}

/// (command, calls, microseconds) for every command called at least once.
pub fn snapshot() -> Vec<(&'static Command, u64, u64)> {
    let mut totals = vec![(0u64, 0u64); COMMANDS.len()];
    for counters in registry().lock().iter() {
        for (i, total) in totals.iter_mut().enumerate() {
            total.0 += counters.calls[i].load(Relaxed);
            total.1 += counters.nanos[i].load(Relaxed);
        }
    }
    COMMANDS
        .iter()
        .zip(totals)
        .filter(|(_, (calls, _))| *calls > 0)
        .map(|(c, (calls, nanos))| (c, calls, nanos / 1000))
        .collect()
}

pub fn reset() {
    for counters in registry().lock().iter() {
        counters
            .calls
            .iter()
            .chain(counters.nanos.iter())
            .for_each(|a| a.store(0, Relaxed));
    }
}
