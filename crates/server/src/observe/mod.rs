//! The operator's views of the command path: MONITOR (every command as it runs), SLOWLOG (the
//! slowest commands) and LATENCY (the worst latency of each event, per second).
//!
//! Commands enter through one hook, [`after_call`], which `command::call` runs for every
//! command of every protocol and caller (a memcached request shown as the command-table entry
//! it counts as, queued EXEC commands included). Work the store does on its own (expiry, eviction)
//! reaches the latency monitor through `store::CycleObserver`, and SQL statements, which run on
//! the engine's threads, through [`DeferredCall`] when their result comes.
//!
//! The cost for a command when nobody watches: a relaxed load of the monitor count and of the
//! two thresholds, and comparisons against the command's duration (which commandstats measures
//! anyway).

pub mod latency;
pub mod monitor;
pub mod slowlog;

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::clients::ClientInfo;
use crate::command::{flags, Args, Command};
use crate::shared::{Settings, Shared};

/// What the server remembers for its operator: monitoring clients, the slow log, latency.
#[derive(Default)]
pub struct Observe {
    pub monitors: monitor::Monitors,
    pub slowlog: slowlog::SlowLog,
    pub latency: latency::LatencyMonitor,
}

/// What Redis shows in place of a secret argument (AUTH's password...).
pub const REDACTED: &[u8] = b"(redacted)";

/// After a command ran, whatever its protocol or caller (`command::call` calls this for every
/// command; `took` is its handler's time, which commandstats measured too): feeds monitors, the
/// slow log and the latency monitor. `args` hands over the command's arguments as the entry it
/// ran under shows them (a memcached request as its mapped command, `memcached::verbs`); they
/// are only copied when a monitor watches or the slow log keeps this command. A deferred
/// command (SQL) is only shown to monitors here; its slow log entry and latency sample come
/// with its result ([`DeferredCall`]).
#[inline]
pub fn after_call(
    shared: &Shared,
    command: &'static Command,
    client: &ClientInfo,
    took: Duration,
    args: &dyn Fn(&mut dyn FnMut(&[u8])),
) {
    let observe = &*shared.observe;
    let watched = observe.monitors.active();
    let (slower_than, latency_ms) = thresholds(&shared.settings);
    let micros = took.as_micros().min(i64::MAX as u128) as i64;
    let logged = slower_than >= 0 && micros >= slower_than && !command.has(flags::DEFERRED);
    if !watched && !logged {
        if latency_ms > 0 && !command.has(flags::DEFERRED) {
            observe.latency.sample_if_needed(
                latency_ms,
                latency_event(command),
                micros as u64 / 1000,
            );
        }
        return;
    }
    let mut owned: Vec<Vec<u8>> = Vec::new();
    args(&mut |arg| owned.push(arg.to_vec()));
    let shown = || owned.iter().map(Vec::as_slice);
    if watched && !monitor::hidden(command, owned.get(1).map(Vec::as_slice)) {
        observe
            .monitors
            .feed(shared, client, &monitor::redacted(command, shown()));
    }
    if command.has(flags::DEFERRED) {
        return;
    }
    record(observe, &shared.settings, command, client, took, shown);
}

/// The latency event a command's duration is sampled under (Redis splits them by FAST).
fn latency_event(command: &Command) -> &'static str {
    if command.has(flags::FAST) {
        latency::FAST_COMMAND
    } else {
        latency::COMMAND
    }
}

/// The slow log threshold (µs, negative: off) and the latency threshold (ms, 0: off).
#[inline]
fn thresholds(settings: &Settings) -> (i64, u64) {
    (
        settings.slowlog_log_slower_than.load(Relaxed),
        settings.latency_monitor_threshold.load(Relaxed),
    )
}

/// Slow log entry and latency sample of a command that took `took`.
fn record<'a, I: Iterator<Item = &'a [u8]>>(
    observe: &Observe,
    settings: &Settings,
    command: &'static Command,
    client: &ClientInfo,
    took: Duration,
    args: impl Fn() -> I,
) {
    let (slower_than, latency_ms) = thresholds(settings);
    let micros = took.as_micros().min(i64::MAX as u128) as i64;
    if slower_than >= 0 && micros >= slower_than {
        let max_len = settings.slowlog_max_len.load(Relaxed);
        if max_len > 0 {
            let shown = monitor::redacted(command, args());
            observe.slowlog.push(
                slowlog::Entry::new(&shown, micros as u64, client),
                max_len as usize,
            );
        }
    }
    observe
        .latency
        .sample_if_needed(latency_ms, latency_event(command), micros as u64 / 1000);
}

/// Monotonic nanoseconds since the first call (a time an atomic can hold).
fn mono_nanos() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// The slow log entry and `sql` latency sample of a command that hands its work to the SQL
/// engine: made when the command is submitted, [`started`](Self::started) when the engine
/// picks the statement up, [`done`](Self::done) when its result comes (on the engine's thread).
/// The thresholds are those in force at submission.
pub struct DeferredCall {
    observe: Arc<Observe>,
    /// The slow log's threshold and length, and the entry's arguments, when it is on.
    slowlog: Option<PendingEntry>,
    latency_ms: u64,
    started: AtomicU64,
}

impl DeferredCall {
    /// None when neither the slow log nor the latency monitor is on (nothing to measure).
    pub fn new(
        shared: &Shared,
        command: &'static Command,
        args: Args<'_>,
        client: &ClientInfo,
    ) -> Option<Arc<DeferredCall>> {
        let (slower_than, latency_ms) = thresholds(&shared.settings);
        let max_len = shared.settings.slowlog_max_len.load(Relaxed);
        let slowlog = (slower_than >= 0 && max_len > 0).then(|| {
            let shown = monitor::redacted(command, (0..args.len()).map(|i| args.get(i)));
            PendingEntry {
                slower_than,
                max_len,
                entry: slowlog::Entry::new(&shown, 0, client),
            }
        });
        if slowlog.is_none() && latency_ms == 0 {
            return None;
        }
        Some(Arc::new(DeferredCall {
            observe: shared.observe.clone(),
            slowlog,
            latency_ms,
            started: AtomicU64::new(mono_nanos()),
        }))
    }

    /// The engine is about to run the statement (the time it waited in the queue is not its).
    pub fn started(&self) {
        self.started.store(mono_nanos(), Relaxed);
    }

    /// The statement's result came.
    pub fn done(&self) {
        let micros = mono_nanos().saturating_sub(self.started.load(Relaxed)) / 1000;
        if let Some(pending) = &self.slowlog {
            if micros as i64 >= pending.slower_than {
                let entry = slowlog::Entry {
                    micros,
                    time: store::now_ms() / 1000,
                    ..pending.entry.clone()
                };
                self.observe.slowlog.push(entry, pending.max_len as usize);
            }
        }
        self.observe
            .latency
            .sample_if_needed(self.latency_ms, latency::SQL, micros / 1000);
    }
}

/// A slow log entry made before its command's duration is known, and the slow log's
/// settings then.
struct PendingEntry {
    slower_than: i64,
    max_len: u64,
    entry: slowlog::Entry,
}

/// Reports the store's own work (expiry rounds, eviction) to the latency monitor. Holds the
/// server weakly: the store must not keep the server alive.
pub struct StoreCycles(pub std::sync::Weak<Shared>);

impl store::CycleObserver for StoreCycles {
    fn cycle_took(&self, cycle: store::Cycle, took: Duration) {
        let Some(shared) = self.0.upgrade() else {
            return;
        };
        let threshold = shared.settings.latency_monitor_threshold.load(Relaxed);
        let event = match cycle {
            store::Cycle::Expire => latency::EXPIRE_CYCLE,
            store::Cycle::Evict => latency::EVICTION_CYCLE,
        };
        shared
            .observe
            .latency
            .sample_if_needed(threshold, event, took.as_millis() as u64);
    }
}

/// Redis's HELP reply: `<COMMAND> <subcommand> ...` then the lines, then HELP's own.
pub(crate) fn help(ctx: &mut crate::command::Ctx<'_, '_>, command: &str, lines: &[&str]) {
    ctx.array(lines.len() + 3);
    let head = format!("{command} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:");
    ctx.simple(head.as_bytes());
    for line in lines {
        ctx.simple(line.as_bytes());
    }
    ctx.simple(b"HELP");
    ctx.simple(b"    Prints this help.");
}

/// Redis's reply to a subcommand it does not know or with the wrong arguments.
pub(crate) fn bad_subcommand(ctx: &mut crate::command::Ctx<'_, '_>, command: &str) {
    let sub = String::from_utf8_lossy(ctx.arg(1)).into_owned();
    let msg = format!("ERR unknown subcommand '{sub}'. Try {command} HELP.");
    ctx.err(msg.as_bytes())
}

/// Redis's reply to a known subcommand with the wrong number of arguments.
pub(crate) fn wrong_arity(ctx: &mut crate::command::Ctx<'_, '_>, command: &str) {
    let sub = crate::command::lower(ctx.arg(1));
    let msg = format!("ERR wrong number of arguments for '{command}|{sub}' command");
    ctx.err(msg.as_bytes())
}
