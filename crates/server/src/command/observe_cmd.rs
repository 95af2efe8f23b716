//! MONITOR, SLOWLOG and LATENCY: the commands that show the operator's views
//! (`crate::observe`, fed by `observe_hook`).

use std::sync::atomic::Ordering::Relaxed;

use resp::reply;

use super::{parse_i64, Ctx};
use crate::clients::client_flags;
use crate::observe::latency::{doctor, graph};
use crate::observe::slowlog::DEFAULT_COUNT;

/// MONITOR: from now on, this connection receives a line for every command run.
pub fn monitor(ctx: &mut Ctx<'_, '_>) {
    if matches!(ctx.db, store::Db::Locked(_)) {
        // Inside EXEC, where Redis denies commands that would block the client.
        return ctx.err(b"ERR MONITOR isn't allowed for DENY BLOCKING client");
    }
    if ctx.conn.monitor {
        // Already monitoring: ignored, as Redis does (no reply).
        return;
    }
    ctx.conn.monitor = true;
    let client = ctx.conn.client.clone();
    client.state.flags.fetch_or(client_flags::MONITOR, Relaxed);
    ctx.shared.observe.monitors.add(client);
    ctx.ok()
}

/// SLOWLOG GET [count] | LEN | RESET | HELP.
pub fn slowlog(ctx: &mut Ctx<'_, '_>) {
    let log = &ctx.shared.observe.slowlog;
    let sub = crate::command::lower(ctx.arg(1));
    match (sub.as_str(), ctx.argc()) {
        ("help", 2) => ctx.help(
            "SLOWLOG",
            &[
                "GET [<count>]",
                "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
                "    Entries are made of:",
                "    id, timestamp, time in microseconds, arguments array, client IP and port,",
                "    client name",
                "LEN",
                "    Return the length of the slowlog.",
                "RESET",
                "    Reset the slowlog.",
            ],
        ),
        ("reset", 2) => {
            log.reset();
            ctx.ok()
        }
        ("len", 2) => ctx.int(log.len() as i64),
        ("get", 2 | 3) => {
            let count = if ctx.argc() == 3 {
                match parse_i64(ctx.arg(2)) {
                    Some(-1) => usize::MAX,
                    Some(n) if n >= 0 => n as usize,
                    _ => return ctx.err(b"ERR count should be greater than or equal to -1"),
                }
            } else {
                DEFAULT_COUNT
            };
            let entries = log.latest(count);
            ctx.array(entries.len());
            for e in &entries {
                ctx.array(6);
                ctx.int(e.id as i64);
                ctx.int(e.time as i64);
                ctx.int(e.micros as i64);
                ctx.array(e.args.len());
                for arg in &e.args {
                    ctx.bulk(arg);
                }
                ctx.bulk(e.addr.as_bytes());
                ctx.bulk(&e.name);
            }
        }
        ("get", _) => ctx.err(
            b"ERR unknown subcommand or wrong number of arguments for 'GET'. Try SLOWLOG HELP.",
        ),
        ("help" | "reset" | "len", _) => ctx.wrong_subcommand_arity("slowlog"),
        _ => ctx.unknown_subcommand("SLOWLOG"),
    }
}

/// LATENCY LATEST | HISTORY event | RESET [event ...] | GRAPH event | DOCTOR | HELP.
pub fn latency(ctx: &mut Ctx<'_, '_>) {
    let monitor = &ctx.shared.observe.latency;
    let sub = crate::command::lower(ctx.arg(1));
    match (sub.as_str(), ctx.argc()) {
        ("latest", 2) => {
            let latest = monitor.latest();
            ctx.array(latest.len());
            for (name, sample, max) in latest {
                ctx.array(4);
                ctx.bulk(name.as_bytes());
                ctx.int(sample.time as i64);
                ctx.int(sample.latency as i64);
                ctx.int(max as i64);
            }
        }
        ("history", 3) => {
            let samples = monitor.history(ctx.arg(2)).unwrap_or_default();
            ctx.array(samples.len());
            for s in samples {
                ctx.array(2);
                ctx.int(s.time as i64);
                ctx.int(s.latency as i64);
            }
        }
        ("reset", n) if n >= 2 => {
            let resets = if n == 2 {
                monitor.reset(None)
            } else {
                (2..n).map(|i| monitor.reset(Some(ctx.arg(i)))).sum()
            };
            ctx.int(resets as i64)
        }
        ("graph", 3) => match monitor.history(ctx.arg(2)) {
            Some(samples) => {
                let text = graph(&String::from_utf8_lossy(ctx.arg(2)), &samples);
                reply::verbatim(ctx.out, b"txt", text.as_bytes(), ctx.conn.version)
            }
            None => {
                let msg = format!(
                    "ERR No samples available for event '{}'",
                    String::from_utf8_lossy(ctx.arg(2))
                );
                ctx.err(msg.as_bytes())
            }
        },
        ("doctor", 2) => {
            let threshold = ctx
                .shared
                .settings
                .latency_monitor_threshold
                .load(std::sync::atomic::Ordering::Relaxed);
            let text = doctor(threshold, &monitor.latest());
            reply::verbatim(ctx.out, b"txt", text.as_bytes(), ctx.conn.version)
        }
        ("help", 2) => ctx.help(
            "LATENCY",
            &[
                "DOCTOR",
                "    Return a human readable latency analysis report.",
                "GRAPH <event>",
                "    Return an ASCII latency graph for the <event> class.",
                "HISTORY <event>",
                "    Return time-latency samples for the <event> class.",
                "LATEST",
                "    Return the latest latency samples for all events.",
                "RESET [<event> ...]",
                "    Reset latency data of one or more <event> classes.",
                "    (default: reset all data for all event classes)",
            ],
        ),
        ("latest" | "history" | "graph" | "doctor" | "help", _) => {
            ctx.wrong_subcommand_arity("latency")
        }
        _ => ctx.unknown_subcommand("LATENCY"),
    }
}
