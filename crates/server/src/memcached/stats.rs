//! `stats` and its groups, and the settings commands `verbosity` and `cache_memlimit`.

use std::sync::atomic::Ordering::Relaxed;

use memcache::response::{end, stat, stat_num};
use memcache::{response, Keys};

use super::{Exec, VERSION};
use crate::clients::ClientInfo;
use crate::config::IoModel;
use crate::protocol::Protocol;
use crate::shared::Shared;

/// memcached's `MAX_VERBOSITY_LEVEL`: higher levels are taken as this one.
const MAX_VERBOSITY: u32 = 2;

/// `cache_memlimit` refuses less than memcached's minimum of 8 MB ...
const MIN_MEMLIMIT_MB: u32 = 8;
/// ... and, as memcached 1.6.22+, more than 10^9 MB (surely a size given in bytes).
const MAX_MEMLIMIT_MB: u32 = 1_000_000_000;

/// `verbosity <level>`: kept (at most 2) and shown by `stats settings`. cairn's own log is
/// governed by `--loglevel`; the change is logged there.
pub(super) fn verbosity(ex: &mut Exec<'_>, level: u32, noreply: bool, out: &mut Vec<u8>) {
    let level = level.min(MAX_VERBOSITY);
    let old = ex.shared.stats.memcache.verbosity.swap(level, Relaxed);
    if old != level {
        tracing::info!(
            "memcached verbosity set to {level} by client {}",
            ex.client.id
        );
    }
    if !noreply {
        response::ok(out);
    }
}

/// `cache_memlimit <MB>`: sets the memory limit (`--maxmemory`, CONFIG SET maxmemory) in
/// megabytes, with memcached's bounds and replies.
pub(super) fn cache_memlimit(ex: &mut Exec<'_>, megabytes: u32, noreply: bool, out: &mut Vec<u8>) {
    let reply: &[u8] = if megabytes < MIN_MEMLIMIT_MB {
        b"MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m\r\n"
    } else if megabytes > MAX_MEMLIMIT_MB {
        b"MEMLIMIT_ADJUST_FAILED input value is megabytes not bytes\r\n"
    } else {
        ex.shared
            .store
            .set_maxmemory(u64::from(megabytes) * 1024 * 1024);
        tracing::info!(
            "maxmemory set to {megabytes} MB by memcached client {}",
            ex.client.id
        );
        b"OK\r\n"
    };
    if !noreply {
        out.extend_from_slice(reply);
    }
}

pub(super) fn stats(
    ex: &mut Exec<'_>,
    group: Option<&[u8]>,
    mut args: Keys<'_>,
    out: &mut Vec<u8>,
) {
    let shared = ex.shared;
    match group {
        None => general(shared, out),
        Some(b"settings") => settings(shared, out),
        Some(b"items") => items(shared, out),
        Some(b"slabs") => slabs(shared, out),
        Some(b"sizes") => {
            stat(out, "sizes_status", "disabled");
            end(out);
        }
        Some(b"conns") => conns(shared, ex.client, out),
        Some(b"reset") => {
            let mc = &shared.stats.memcache;
            mc.reset();
            mc.total_items_base
                .store(shared.store.stats().stored, Relaxed);
            out.extend_from_slice(b"RESET\r\n");
        }
        Some(b"detail") => match args.next() {
            Some(b"on") | Some(b"off") => response::ok(out),
            Some(b"dump") => end(out),
            _ => response::client_error(out, "usage: stats detail on|off|dump"),
        },
        Some(_) => response::error(out),
    }
}

fn threads(shared: &Shared) -> u64 {
    let config = &shared.config;
    match config.io_model {
        IoModel::Reactor => config.threads as u64,
        IoModel::Dispatch => config.workers as u64,
    }
}

/// Process CPU time as memcached prints it: `seconds.microseconds`.
fn rusage() -> (String, String) {
    // SAFETY: getrusage only writes into the struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut usage) != 0 {
            return ("0.000000".into(), "0.000000".into());
        }
        usage
    };
    let fmt = |tv: libc::timeval| format!("{}.{:06}", tv.tv_sec, tv.tv_usec);
    (fmt(usage.ru_utime), fmt(usage.ru_stime))
}

fn general(shared: &Shared, out: &mut Vec<u8>) {
    let mc = shared.stats.memcache.snapshot();
    let server = &shared.stats;
    let store = shared.store.stats();
    let now_secs = store::now_ms() / 1000;
    let (user, system) = rusage();

    stat_num(out, "pid", u64::from(std::process::id()));
    stat_num(out, "uptime", shared.started.elapsed().as_secs());
    stat_num(out, "time", now_secs);
    stat(out, "version", VERSION);
    stat_num(out, "pointer_size", usize::BITS as u64);
    stat(out, "rusage_user", user);
    stat(out, "rusage_system", system);
    stat_num(
        out,
        "max_connections",
        shared.settings.maxclients.load(Relaxed) as u64,
    );
    stat_num(out, "curr_connections", shared.clients.count() as u64);
    stat_num(
        out,
        "total_connections",
        server.total_connections_received.load(Relaxed),
    );
    stat_num(
        out,
        "rejected_connections",
        server.rejected_connections.load(Relaxed),
    );
    stat_num(out, "connection_structures", shared.clients.count() as u64);
    stat_num(out, "cmd_get", mc.cmd_get);
    stat_num(out, "cmd_set", mc.cmd_set);
    stat_num(out, "cmd_flush", mc.cmd_flush);
    stat_num(out, "cmd_touch", mc.cmd_touch);
    stat_num(out, "cmd_meta", mc.cmd_meta);
    stat_num(out, "get_hits", mc.get_hits);
    stat_num(out, "get_misses", mc.get_misses);
    // Expired records read as absent without telling why.
    stat_num(out, "get_expired", 0);
    stat_num(out, "get_flushed", 0);
    stat_num(out, "delete_misses", mc.delete_misses);
    stat_num(out, "delete_hits", mc.delete_hits);
    stat_num(out, "incr_misses", mc.incr_misses);
    stat_num(out, "incr_hits", mc.incr_hits);
    stat_num(out, "decr_misses", mc.decr_misses);
    stat_num(out, "decr_hits", mc.decr_hits);
    stat_num(out, "cas_misses", mc.cas_misses);
    stat_num(out, "cas_hits", mc.cas_hits);
    stat_num(out, "cas_badval", mc.cas_badval);
    stat_num(out, "touch_hits", mc.touch_hits);
    stat_num(out, "touch_misses", mc.touch_misses);
    stat_num(out, "store_too_large", mc.store_too_large);
    stat_num(out, "store_no_memory", mc.store_no_memory);
    stat_num(out, "auth_cmds", 0);
    stat_num(out, "auth_errors", 0);
    stat_num(out, "bytes_read", server.net_input_bytes.load(Relaxed));
    stat_num(out, "bytes_written", server.net_output_bytes.load(Relaxed));
    stat_num(out, "limit_maxbytes", shared.store.maxmemory());
    stat_num(out, "accepting_conns", 1);
    stat_num(out, "threads", threads(shared));
    stat_num(out, "conn_yields", 0);
    stat_num(out, "bytes", store.used_memory);
    stat_num(out, "curr_items", store.keys);
    // Records written by either protocol (a RESP SET counts as a memcached set does).
    let base = shared.stats.memcache.total_items_base.load(Relaxed);
    stat_num(out, "total_items", store.stored.saturating_sub(base));
    stat_num(out, "expired_unfetched", 0);
    stat_num(out, "evicted_unfetched", 0);
    stat_num(out, "evictions", store.evicted);
    stat_num(out, "reclaimed", store.expired);
    end(out);
}

/// How a `stats settings` line gets its value.
enum Shown {
    /// The named cairn setting, as CONFIG GET renders it.
    Setting(&'static str),
    /// The named setting, rendered as memcached writes it.
    Mapped(&'static str, fn(String) -> String),
    /// Worker threads of the I/O model in use.
    Threads,
    /// The `verbosity` command's level.
    Verbosity,
    /// A constant: what cairn always does.
    Fixed(&'static str),
}

/// memcached's `stats settings` names, in memcached's order, and where their values come from:
/// the settings table, so they always agree with CONFIG GET.
const SETTINGS: &[(&str, Shown)] = &[
    ("maxbytes", Shown::Setting("maxmemory")),
    ("maxconns", Shown::Setting("maxclients")),
    ("tcpport", Shown::Setting("memcache-port")),
    ("udpport", Shown::Fixed("0")),
    ("inter", Shown::Setting("bind")),
    ("verbosity", Shown::Verbosity),
    ("oldest", Shown::Fixed("0")),
    ("evictions", Shown::Mapped("maxmemory-policy", evictions)),
    (
        "domain_socket",
        Shown::Mapped("memcache-unixsocket", null_if_empty),
    ),
    ("num_threads", Shown::Threads),
    ("cas_enabled", Shown::Setting("cas")),
    ("item_size_max", Shown::Setting("max-value-size")),
    ("flush_enabled", Shown::Fixed("yes")),
];

fn evictions(policy: String) -> String {
    if policy == "noeviction" { "off" } else { "on" }.to_string()
}

fn null_if_empty(path: String) -> String {
    if path.is_empty() {
        "NULL".to_string()
    } else {
        path
    }
}

fn settings(shared: &Shared, out: &mut Vec<u8>) {
    let config = shared.settings.current();
    let render = |name: &str| {
        crate::config::table::lookup(name)
            .map(|s| (s.render)(&config))
            .unwrap_or_default()
    };
    for (name, shown) in SETTINGS {
        let value = match shown {
            Shown::Setting(setting) => render(setting),
            Shown::Mapped(setting, map) => map(render(setting)),
            Shown::Threads => threads(shared).to_string(),
            Shown::Verbosity => shared.stats.memcache.verbosity.load(Relaxed).to_string(),
            Shown::Fixed(value) => value.to_string(),
        };
        stat(out, name, value);
    }
    end(out);
}

/// memcached's per-connection lines, for this server's memcached connections in fd order:
/// `addr`, `listen_addr`, `state` (`conn_parse_cmd` for the asking connection, `conn_new_cmd`
/// for the others, which wait for input) and `secs_since_last_cmd`. Listening sockets, which
/// memcached lists too, are not.
fn conns(shared: &Shared, me: &ClientInfo, out: &mut Vec<u8>) {
    let mut clients: Vec<_> = shared
        .clients
        .list()
        .into_iter()
        .filter(|c| c.protocol == Protocol::Memcache)
        .collect();
    clients.sort_by_key(|c| (c.fd, c.id));
    let now = crate::clients::now_ms();
    // Unix sockets are named "/path:0" in CLIENT LIST; memcached writes "unix:/path".
    let name = |a: &str| match a.strip_suffix(":0").filter(|p| p.starts_with('/')) {
        Some(path) => format!("unix:{path}"),
        None => format!("tcp:{a}"),
    };
    for c in clients {
        let fd = c.fd;
        stat(out, format!("{fd}:addr"), name(&c.addr));
        stat(out, format!("{fd}:listen_addr"), name(&c.laddr));
        let state = if c.id == me.id {
            "conn_parse_cmd"
        } else {
            "conn_new_cmd"
        };
        stat(out, format!("{fd}:state"), state);
        let idle = now.saturating_sub(c.last_active_ms.load(Relaxed)) / 1000;
        stat_num(out, format!("{fd}:secs_since_last_cmd"), idle);
    }
    end(out);
}

/// One pseudo slab class holding every record.
fn items(shared: &Shared, out: &mut Vec<u8>) {
    let store = shared.store.stats();
    if store.keys > 0 {
        stat_num(out, "items:1:number", store.keys);
        stat_num(out, "items:1:age", 0);
        stat_num(out, "items:1:mem_requested", store.used_memory);
        stat_num(out, "items:1:evicted", store.evicted);
        stat_num(out, "items:1:outofmemory", 0);
        stat_num(out, "items:1:reclaimed", store.expired);
        stat_num(out, "items:1:expired_unfetched", 0);
        stat_num(out, "items:1:evicted_unfetched", 0);
    }
    end(out);
}

fn slabs(shared: &Shared, out: &mut Vec<u8>) {
    let mc = shared.stats.memcache.snapshot();
    let store = shared.store.stats();
    let active = u64::from(store.keys > 0);
    if active > 0 {
        stat_num(out, "1:used_chunks", store.keys);
        stat_num(out, "1:get_hits", mc.get_hits);
        stat_num(out, "1:cmd_set", mc.cmd_set);
        stat_num(out, "1:delete_hits", mc.delete_hits);
        stat_num(out, "1:incr_hits", mc.incr_hits);
        stat_num(out, "1:decr_hits", mc.decr_hits);
        stat_num(out, "1:cas_hits", mc.cas_hits);
        stat_num(out, "1:cas_badval", mc.cas_badval);
        stat_num(out, "1:touch_hits", mc.touch_hits);
    }
    stat_num(out, "active_slabs", active);
    stat_num(out, "total_malloced", store.used_memory);
    end(out);
}

#[cfg(test)]
mod tests {
    #[test]
    fn stats_settings_name_settings_of_the_table() {
        for (name, shown) in super::SETTINGS {
            if let super::Shown::Setting(s) | super::Shown::Mapped(s, _) = shown {
                assert!(
                    crate::config::table::lookup(s).is_some(),
                    "{name}: no setting {s}"
                );
            }
        }
    }
}
