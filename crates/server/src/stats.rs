//! Server-wide statistics: per-command call counts and time (INFO commandstats), error replies
//! by code (INFO errorstats), the server's counters ([`ServerStats`]), memcached's `stats`
//! counters ([`memcache`]) and INFO's rates ([`metrics`]). A leaf: it names nothing else of
//! the crate, so every layer may count into it.
//!
//! Each thread counts calls into its own array of relaxed atomics, so hot commands on many
//! cores never share a cache line; INFO sums the arrays. Errors are rarer and go to one shared
//! table.
//!
//! As in Redis 7: `calls` counts commands that ran, `failed_calls` those of them that replied
//! with an error, `rejected_calls` commands refused before running (wrong arity, NOAUTH,
//! OOM, not allowed in this context), which are not in `calls`.
//!
//! The same per-thread arrays keep, by protocol, the calls and failures (the Prometheus
//! endpoint's `protocol` label) and, by command, a histogram of handler times in
//! [`LATENCY_BOUNDS_NS`] (the endpoint's latency histograms): INFO's `calls`, `usec` and
//! `failed_calls` are their sums, so nothing is counted twice.

pub mod memcache;
pub mod metrics;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

/// Counters reported by INFO and memcached `stats`. Relaxed atomics: they are statistics.
#[derive(Default)]
pub struct ServerStats {
    pub total_connections_received: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub total_commands_processed: AtomicU64,
    pub net_input_bytes: AtomicU64,
    pub net_output_bytes: AtomicU64,
    pub client_output_limit_disconnections: AtomicU64,
    pub client_query_buffer_limit_disconnections: AtomicU64,
    pub total_reads_processed: AtomicU64,
    pub total_writes_processed: AtomicU64,
    /// memcached `stats` counters (cmd_get, get_hits, cas_badval, ...).
    pub memcache: memcache::McStats,
}

/// Slots of the per-command counters: the command table's entries, then its memcached-only
/// entries (the table checks that they fit).
pub const SLOTS: usize = 256;

/// What commandstats counts: an entry of the command table, which gives each entry its own
/// slot below [`SLOTS`] (the table's position, so no lookup on the hot path).
pub trait Counted: 'static {
    fn slot(&'static self) -> usize;
}

/// The protocols commands are counted by, as the `protocol` index of [`record`] gives them.
pub const PROTOCOLS: [&str; 2] = ["resp", "memcache"];

/// Upper bounds (nanoseconds, inclusive) of the latency histogram's buckets; one more bucket
/// takes what is slower than the last. From 10 µs (a GET is ~1 µs) to 1 s (a slow script).
pub const LATENCY_BOUNDS_NS: [u64; 15] = [
    10_000,
    25_000,
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    1_000_000_000,
];
const BUCKETS: usize = LATENCY_BOUNDS_NS.len() + 1;

struct ThreadCounters {
    /// By protocol, then slot: `PROTOCOLS.len() * SLOTS`.
    calls: Box<[AtomicU64]>,
    nanos: Box<[AtomicU64]>,
    /// By protocol, then slot.
    failed: Box<[AtomicU64]>,
    rejected: Box<[AtomicU64]>,
    /// By slot, then bucket: `SLOTS * BUCKETS`.
    latency: Box<[AtomicU64]>,
}

fn registry() -> &'static Mutex<Vec<Arc<ThreadCounters>>> {
    static REGISTRY: OnceLock<Mutex<Vec<Arc<ThreadCounters>>>> = OnceLock::new();
    REGISTRY.get_or_init(Default::default)
}

thread_local! {
    static LOCAL: Arc<ThreadCounters> = {
        let zeros = |n| (0..n).map(|_| AtomicU64::new(0)).collect();
        let by_protocol = PROTOCOLS.len() * SLOTS;
        let counters = Arc::new(ThreadCounters {
            calls: zeros(by_protocol),
            nanos: zeros(SLOTS),
            failed: zeros(by_protocol),
            rejected: zeros(SLOTS),
            latency: zeros(SLOTS * BUCKETS),
        });
        registry().lock().push(counters.clone());
        counters
    };
}

/// Counts one call of `command`, over `protocol` (an index of [`PROTOCOLS`]), that took
/// `nanos`; `failed`: it replied with an error.
pub fn record(command: &'static impl Counted, protocol: usize, nanos: u64, failed: bool) {
    let i = command.slot();
    let p = protocol * SLOTS + i;
    let bucket = LATENCY_BOUNDS_NS
        .iter()
        .position(|&bound| nanos <= bound)
        .unwrap_or(BUCKETS - 1);
    LOCAL.with(|c| {
        bump(&c.calls[p], 1);
        bump(&c.nanos[i], nanos);
        bump(&c.latency[i * BUCKETS + bucket], 1);
        if failed {
            bump(&c.failed[p], 1);
        }
    });
}

/// Adds `n` to a counter of this thread's own array. Only this thread writes it (INFO only
/// reads), so a plain load and store does, without a locked read-modify-write: every command
/// counts three of them, a script's commands too, and a locked add costs some 5 ns where this
/// costs nothing. The one other writer, CONFIG RESETSTAT from another thread, may see its zero
/// overwritten by an add that read the old value just before; statistics tolerate that.
#[inline(always)]
fn bump(counter: &AtomicU64, n: u64) {
    counter.store(counter.load(Relaxed).wrapping_add(n), Relaxed);
}

/// Counts `command` refused before it ran.
pub fn record_rejected(command: &'static impl Counted) {
    let i = command.slot();
    LOCAL.with(|c| c.rejected[i].fetch_add(1, Relaxed));
}

/// One command's counters (INFO commandstats).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CommandStats {
    pub calls: u64,
    pub usec: u64,
    pub failed: u64,
    pub rejected: u64,
}

/// The counters of every command called, failed or rejected at least once, by slot.
pub fn snapshot() -> Vec<(usize, CommandStats)> {
    let mut totals = vec![CommandStats::default(); SLOTS];
    for counters in registry().lock().iter() {
        for (i, total) in totals.iter_mut().enumerate() {
            for p in 0..PROTOCOLS.len() {
                total.calls += counters.calls[p * SLOTS + i].load(Relaxed);
                total.failed += counters.failed[p * SLOTS + i].load(Relaxed);
            }
            total.usec += counters.nanos[i].load(Relaxed);
            total.rejected += counters.rejected[i].load(Relaxed);
        }
    }
    totals
        .into_iter()
        .enumerate()
        .filter(|(_, t)| t.calls + t.failed + t.rejected > 0)
        .map(|(c, t)| {
            (
                c,
                CommandStats {
                    usec: t.usec / 1000,
                    ..t
                },
            )
        })
        .collect()
}

/// One command's counters with the detail the Prometheus endpoint shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandDetail {
    /// By protocol ([`PROTOCOLS`]).
    pub calls: [u64; PROTOCOLS.len()],
    pub failed: [u64; PROTOCOLS.len()],
    pub rejected: u64,
    pub nanos: u64,
    /// Calls per bucket of [`LATENCY_BOUNDS_NS`] (not cumulative), the last one unbounded.
    pub latency: [u64; BUCKETS],
}

/// [`CommandDetail`] of every command called or rejected at least once, by slot.
pub fn detail_snapshot() -> Vec<(usize, CommandDetail)> {
    let mut totals = vec![CommandDetail::default(); SLOTS];
    for counters in registry().lock().iter() {
        for (i, total) in totals.iter_mut().enumerate() {
            for p in 0..PROTOCOLS.len() {
                total.calls[p] += counters.calls[p * SLOTS + i].load(Relaxed);
                total.failed[p] += counters.failed[p * SLOTS + i].load(Relaxed);
            }
            total.rejected += counters.rejected[i].load(Relaxed);
            total.nanos += counters.nanos[i].load(Relaxed);
            for b in 0..BUCKETS {
                total.latency[b] += counters.latency[i * BUCKETS + b].load(Relaxed);
            }
        }
    }
    totals
        .into_iter()
        .enumerate()
        .filter(|(_, t)| t.latency.iter().sum::<u64>() + t.rejected > 0)
        .collect()
}

/// Distinct error codes tracked before errorstats gives up (Redis's limit): the codes come
/// from cairn's own replies, but a bound keeps the table small whatever happens.
const ERROR_CODES_MAX: usize = 128;

struct ErrorTable {
    counts: parking_lot::Mutex<BTreeMap<String, u64>>,
    enabled: AtomicBool,
    total: AtomicU64,
}

fn errors() -> &'static ErrorTable {
    static ERRORS: OnceLock<ErrorTable> = OnceLock::new();
    ERRORS.get_or_init(|| ErrorTable {
        counts: Default::default(),
        enabled: AtomicBool::new(true),
        total: AtomicU64::new(0),
    })
}

/// The code of an error reply (`-WRONGTYPE Operation...` gives `WRONGTYPE`); None when the
/// reply is not an error.
pub fn error_code(reply: &[u8]) -> Option<&[u8]> {
    let body = reply.strip_prefix(b"-")?;
    let end = body
        .iter()
        .position(|&b| b == b' ' || b == b'\r')
        .unwrap_or(body.len());
    Some(&body[..end])
}

/// Counts one error reply whose message (without `-`) is `msg`.
pub fn record_error(msg: &[u8]) {
    let table = errors();
    table.total.fetch_add(1, Relaxed);
    if !table.enabled.load(Relaxed) {
        return;
    }
    let end = msg.iter().position(|&b| b == b' ').unwrap_or(msg.len());
    // INFO lines are `name:value`: characters that would break them are replaced, as Redis does.
    let code: String = String::from_utf8_lossy(&msg[..end])
        .chars()
        .map(|c| if "#:\n\r".contains(c) { '_' } else { c })
        .collect();
    let mut counts = table.counts.lock();
    if let Some(n) = counts.get_mut(&code) {
        *n += 1;
    } else if counts.len() >= ERROR_CODES_MAX {
        tracing::warn!(
            "errorstats stopped adding new errors: {ERROR_CODES_MAX} codes reached; CONFIG RESETSTAT re-enables it"
        );
        counts.clear();
        counts.insert("ERRORSTATS_DISABLED".into(), 1);
        table.enabled.store(false, Relaxed);
    } else {
        counts.insert(code, 1);
    }
}

/// (error code, count), by code (INFO errorstats).
pub fn error_snapshot() -> Vec<(String, u64)> {
    errors()
        .counts
        .lock()
        .iter()
        .map(|(k, v)| (k.clone(), *v))
        .collect()
}

/// Error replies sent since the start or the last reset (INFO `total_error_replies`).
pub fn total_errors() -> u64 {
    errors().total.load(Relaxed)
}

/// CONFIG RESETSTAT: zeroes every command and error counter.
pub fn reset() {
    for counters in registry().lock().iter() {
        counters
            .calls
            .iter()
            .chain(counters.nanos.iter())
            .chain(counters.failed.iter())
            .chain(counters.rejected.iter())
            .chain(counters.latency.iter())
            .for_each(|a| a.store(0, Relaxed));
    }
    let table = errors();
    table.counts.lock().clear();
    table.enabled.store(true, Relaxed);
    table.total.store(0, Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes() {
        assert_eq!(error_code(b"-ERR syntax error\r\n"), Some(&b"ERR"[..]));
        assert_eq!(
            error_code(b"-WRONGTYPE Operation\r\n"),
            Some(&b"WRONGTYPE"[..])
        );
        assert_eq!(error_code(b"-NOPROTO\r\n"), Some(&b"NOPROTO"[..]));
        assert_eq!(error_code(b"+OK\r\n"), None);
        assert_eq!(error_code(b""), None);
    }
}
