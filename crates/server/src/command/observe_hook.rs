//! The command path's hook into the operator's views (`crate::observe`): after every command,
//! of every protocol and caller, `command::call` runs [`after_call`], which feeds monitors, the
//! slow log and the latency monitor; SQL statements, which run on the engine's threads, report
//! through [`DeferredCall`] when their result comes. Also what a command shows of itself there
//! (admin commands hidden, secrets redacted) and what a monitoring connection may run.
//!
//! The cost for a command when nobody watches: a relaxed load of the monitor count and of the
//! two thresholds, and comparisons against the command's duration (which commandstats measures
//! anyway).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use super::{flags, Args, Command};
use crate::clients::ClientInfo;
use crate::config::Settings;
use crate::observe::{latency, slowlog, Observe, REDACTED};
use crate::shared::Shared;

/// Hands each argument of a command to the function given (`command::Body::for_each_arg`).
pub type ForEachArg<'a> = dyn Fn(&mut dyn FnMut(&[u8])) + 'a;

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
    args: &ForEachArg<'_>,
) {
    let observe = &*shared.observe;
    let watched = observe.monitors.active();
    let (slower_than, latency_ms) = thresholds(&shared.settings);
    // The common case, in whole microseconds without 128-bit arithmetic: fast, unwatched.
    let micros = (took.as_nanos() as u64 / 1000) as i64;
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
    // A script shows itself before the commands it runs (`feed_monitors`), as in Redis.
    if watched
        && !command.has(flags::SCRIPTING)
        && !hidden(command, owned.get(1).map(Vec::as_slice))
    {
        observe.monitors.feed(
            &shared.settings.output_limits.read(),
            &shared.stats.client_output_limit_disconnections,
            client,
            &redacted(command, shown()),
        );
    }
    if command.has(flags::DEFERRED) {
        return;
    }
    record(observe, &shared.settings, command, client, took, shown);
}

/// Shows a command to monitors now, before it runs (EVAL, whose commands follow it).
pub fn feed_monitors(shared: &Shared, client: &ClientInfo, args: &mut dyn Iterator<Item = &[u8]>) {
    let observe = &*shared.observe;
    if !observe.monitors.active() {
        return;
    }
    let args: Vec<&[u8]> = args.collect();
    observe.monitors.feed(
        &shared.settings.output_limits.read(),
        &shared.stats.client_output_limit_disconnections,
        client,
        &args,
    );
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
            let shown = redacted(command, args());
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
            let shown = redacted(command, (0..args.len()).map(|i| args.get(i)));
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

/// The slow log entry and `sql` latency sample of an SQL statement that ran on the I/O thread
/// (`command::sql`, inline): the same as [`DeferredCall`] makes for one the engine ran, built
/// only when the statement was slow.
pub fn inline_sql(
    shared: &Shared,
    command: &'static Command,
    args: Args<'_>,
    client: &ClientInfo,
    took: Duration,
) {
    let (slower_than, latency_ms) = thresholds(&shared.settings);
    let micros = (took.as_nanos() as u64 / 1000) as i64;
    let observe = &*shared.observe;
    if slower_than >= 0 && micros >= slower_than {
        let max_len = shared.settings.slowlog_max_len.load(Relaxed);
        if max_len > 0 {
            let shown = redacted(command, (0..args.len()).map(|i| args.get(i)));
            let entry = slowlog::Entry::new(&shown, micros as u64, client);
            observe.slowlog.push(entry, max_len as usize);
        }
    }
    if latency_ms > 0 {
        observe
            .latency
            .sample_if_needed(latency_ms, latency::SQL, micros as u64 / 1000);
    }
}

/// A slow log entry made before its command's duration is known, and the slow log's
/// settings then.
struct PendingEntry {
    slower_than: i64,
    max_len: u64,
    entry: slowlog::Entry,
}

/// Whether monitors do not see `command` at all: administrative commands (Redis's ADMIN flag:
/// CONFIG, MONITOR, SLOWLOG, LATENCY, and CLIENT's KILL, LIST, PAUSE, UNPAUSE, NO-EVICT,
/// UNBLOCK), which may show secrets or are too frequent to be of interest.
pub fn hidden(command: &Command, subcommand: Option<&[u8]>) -> bool {
    if command.has(flags::ADMIN) {
        return true;
    }
    command.name == "client"
        && subcommand.is_some_and(|sub| {
            ["kill", "list", "pause", "unpause", "no-evict", "unblock"]
                .iter()
                .any(|s| sub.eq_ignore_ascii_case(s.as_bytes()))
        })
}

/// The arguments as monitors and the slow log show them: secrets replaced by `(redacted)`, as
/// Redis's `redactClientCommandArgument` does for AUTH, HELLO ... AUTH and CONFIG SET
/// requirepass.
pub fn redacted<'a>(command: &Command, args: impl Iterator<Item = &'a [u8]>) -> Vec<&'a [u8]> {
    let mut args: Vec<&[u8]> = args.collect();
    match command.name {
        // AUTH [user] password; with more arguments it fails before redacting, as in Redis.
        "auth" if args.len() <= 3 => {
            for arg in args.iter_mut().skip(1) {
                *arg = REDACTED;
            }
        }
        // HELLO [protover [AUTH user password] [SETNAME name]]: options until the first bad one.
        "hello" => {
            let mut j = 2;
            while j < args.len() {
                let more = args.len() - 1 - j;
                if args[j].eq_ignore_ascii_case(b"auth") && more >= 2 {
                    args[j + 1] = REDACTED;
                    args[j + 2] = REDACTED;
                    j += 3;
                } else if args[j].eq_ignore_ascii_case(b"setname") && more >= 1 {
                    j += 2;
                } else {
                    break;
                }
            }
        }
        "config" if args.len() > 1 && args[1].eq_ignore_ascii_case(b"set") => {
            for j in (2..args.len().saturating_sub(1)).step_by(2) {
                if args[j].eq_ignore_ascii_case(b"requirepass") {
                    args[j + 1] = REDACTED;
                }
            }
        }
        _ => {}
    }
    args
}

/// Whether a monitoring client may not run `command`: like a Redis replica, it may not touch
/// the keyspace (reads, writes, PUBLISH).
pub fn refuses(command: &Command) -> bool {
    command.has(flags::READONLY | flags::WRITE) || command.name == "publish"
}

/// The error a monitoring client gets for a command that touches the keyspace.
pub const REFUSED: &[u8] = b"ERR Replica can't interact with the keyspace";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::lookup;
    use crate::observe::monitor::{line, unix_micros};
    use crate::protocol::Protocol;

    fn client(addr: &str, laddr: &str) -> ClientInfo {
        ClientInfo::new(1, addr.into(), laddr.into(), 3, Protocol::Resp, None)
    }

    /// What `after_call` does for a monitor: feeds it under the server's pubsub limit.
    fn feed(shared: &Shared, client: &ClientInfo, args: &[&[u8]]) {
        let limits = shared.settings.output_limits.read();
        let cut = &shared.stats.client_output_limit_disconnections;
        shared.observe.monitors.feed(&limits, cut, client, args)
    }

    #[test]
    fn a_monitor_whose_mail_piles_up_is_cut_at_the_pubsub_limit() {
        let shared = Shared::new(crate::config::Config::default());
        *shared.settings.output_limits.write() =
            crate::config::OutputLimits::parse("pubsub 1000 0 0").unwrap();
        // A monitor whose thread never takes its mail (no connection behind it).
        let monitor = Arc::new(ClientInfo::detached(7, Protocol::Resp));
        let monitors = &shared.observe.monitors;
        monitors.add(monitor.clone());
        assert!(monitors.active());
        let writer = client("127.0.0.1:5555", "127.0.0.1:6380");
        let value = [b'v'; 50];
        let args: [&[u8]; 3] = [b"set", b"k", &value];
        let mut one = Vec::new();
        line(&mut one, unix_micros(), &writer, &args);
        assert_eq!(one.len(), 102);
        for _ in 0..9 {
            feed(&shared, &writer, &args);
        }
        assert!(
            monitors.active() && !monitor.killed(),
            "918 bytes: under the limit"
        );
        feed(&shared, &writer, &args);
        assert!(monitor.killed(), "1020 bytes: over it");
        assert!(!monitors.active());
        let cut = &shared.stats.client_output_limit_disconnections;
        assert_eq!(cut.load(Relaxed), 1);
        // Nothing more is posted to it.
        assert_eq!(monitor.take_mail().bytes.len(), 1020);
        feed(&shared, &writer, &[b"get", b"k"]);
        assert_eq!(monitor.take_mail().bytes.len(), 0);
    }

    #[test]
    fn secrets_are_redacted() {
        let show = |name: &str, args: &[&'static str]| -> Vec<String> {
            let command = lookup(name.as_bytes()).unwrap();
            redacted(command, args.iter().map(|a| a.as_bytes()))
                .into_iter()
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        };
        assert_eq!(show("auth", &["AUTH", "pw"]), ["AUTH", "(redacted)"]);
        assert_eq!(
            show("auth", &["auth", "u", "pw"]),
            ["auth", "(redacted)", "(redacted)"]
        );
        assert_eq!(
            show("auth", &["auth", "a", "b", "c"]),
            ["auth", "a", "b", "c"]
        );
        assert_eq!(
            show("hello", &["HELLO", "3", "SETNAME", "n", "auth", "u", "p"]),
            [
                "HELLO",
                "3",
                "SETNAME",
                "n",
                "auth",
                "(redacted)",
                "(redacted)"
            ]
        );
        assert_eq!(
            show(
                "config",
                &["config", "set", "maxclients", "5", "REQUIREPASS", "s"]
            ),
            [
                "config",
                "set",
                "maxclients",
                "5",
                "REQUIREPASS",
                "(redacted)"
            ]
        );
        assert_eq!(show("get", &["get", "auth"]), ["get", "auth"]);
    }

    #[test]
    fn admin_commands_are_hidden() {
        let hide = |args: &[&[u8]]| {
            let ranges: Vec<_> = {
                let mut at = 0;
                args.iter()
                    .map(|a| {
                        at += a.len();
                        at - a.len()..at
                    })
                    .collect()
            };
            let buf = args.concat();
            let args = Args::new(&buf, &ranges);
            hidden(
                lookup(args.get(0)).unwrap(),
                (args.len() > 1).then(|| args.get(1)),
            )
        };
        assert!(hide(&[b"config", b"get", b"x"]));
        assert!(hide(&[b"client", b"LIST"]));
        assert!(hide(&[b"client", b"kill", b"1.2.3.4:5"]));
        assert!(!hide(&[b"client", b"setname", b"x"]));
        assert!(!hide(&[b"get", b"k"]));
    }
}
