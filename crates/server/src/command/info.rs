//! INFO and ROLE: every section and field Redis 7.4 emits, with cairn's real values (0, or
//! Redis's "nothing happened" value, where a feature such as persistence or replication does
//! not exist), plus a few cairn-specific fields. Section selection follows Redis's
//! `genInfoSectionDict`: no argument = `default`; `all` adds commandstats and latencystats;
//! `everything` adds modules' sections (cairn has none); several sections may be named.

use std::collections::HashSet;
use std::fmt::{Display, Write as _};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::OnceLock;

use super::server::REDIS_COMPAT_VERSION;
use super::Ctx;
use crate::shared::Shared;

/// The sections INFO prints without arguments (and for `default`), in Redis's order.
const DEFAULT_SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "module_list",
    "errorstats",
    "cluster",
    "keyspace",
];

/// Which sections an INFO call asked for.
struct Selection {
    all: bool,
    names: HashSet<String>,
}

impl Selection {
    fn parse<'a>(args: impl Iterator<Item = &'a [u8]>) -> Selection {
        let mut sel = Selection {
            all: false,
            names: HashSet::new(),
        };
        let mut any = false;
        for arg in args {
            any = true;
            match super::lower(arg).as_str() {
                "default" => sel.add_defaults(),
                "all" | "everything" => sel.all = true,
                name => {
                    sel.names.insert(name.to_string());
                }
            }
        }
        if !any {
            sel.add_defaults();
        }
        sel
    }

    fn add_defaults(&mut self) {
        self.names
            .extend(DEFAULT_SECTIONS.iter().map(|s| s.to_string()));
    }

    fn shows(&self, section: &str) -> bool {
        self.all
            || self.names.contains(section)
            || (section == "module_list" && self.names.contains("modules"))
    }
}

/// Appends `name:value\r\n`.
fn field(text: &mut String, name: &str, value: impl Display) {
    let _ = write!(text, "{name}:{value}\r\n");
}

/// Byte counts and the resident set: the memory breakdown's (`crate::memory`) helpers.
pub use crate::memory::{human, page_size, rss_bytes};

fn total_system_memory() -> u64 {
    // SAFETY: sysconf only reads a system constant.
    let pages = unsafe { libc::sysconf(libc::_SC_PHYS_PAGES) };
    u64::try_from(pages).unwrap_or(0) * page_size()
}

/// 40 random hex digits, as Redis's run ids and replication ids (std's randomly seeded
/// hasher is the randomness: no dependency for an identifier).
fn random_hex40() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut out = String::with_capacity(40);
    while out.len() < 40 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos(),
        );
        let _ = write!(out, "{:016x}", h.finish());
    }
    out.truncate(40);
    out
}

/// This process's run id (INFO server `run_id`).
fn run_id() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(random_hex40)
}

fn unix_now() -> std::time::Duration {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
}

/// `uname -srm`, as Redis's `os:` field.
fn os_name() -> String {
    // SAFETY: uname fills the zeroed struct it is given; the fields are NUL-terminated.
    unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut u) != 0 {
            return format!("{} {}", std::env::consts::OS, std::env::consts::ARCH);
        }
        let text = |f: &[libc::c_char]| {
            std::ffi::CStr::from_ptr(f.as_ptr())
                .to_string_lossy()
                .into_owned()
        };
        format!(
            "{} {} {}",
            text(&u.sysname),
            text(&u.release),
            text(&u.machine)
        )
    }
}

/// (system, user) CPU seconds of this process, or of its children, from getrusage.
fn cpu_times(who: libc::c_int) -> (String, String) {
    // SAFETY: getrusage writes into the zeroed struct it is given.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(who, &mut ru);
        ru
    };
    let fmt = |t: libc::timeval| format!("{}.{:06}", t.tv_sec, t.tv_usec);
    (fmt(ru.ru_stime), fmt(ru.ru_utime))
}

/// Memory held by connections: their buffers, queued transactions and per-client state.
fn clients_memory(shared: &Shared) -> u64 {
    crate::memory::clients_memory(shared)
}

pub fn info(ctx: &mut Ctx<'_, '_>) {
    let sel = Selection::parse(ctx.args.tail(1));
    let shared = ctx.shared;
    // Counting keys scans every shard: only when a section needs it.
    let store_stats = (sel.shows("stats") || sel.shows("keyspace")).then(|| ctx.db.stats());
    let mut sections: Vec<String> = Vec::new();
    let mut section = |name: &str, title: &str, fill: &mut dyn FnMut(&mut String)| {
        if sel.shows(name) {
            let mut text = format!("# {title}\r\n");
            fill(&mut text);
            sections.push(text);
        }
    };
    section("server", "Server", &mut |t| server_section(t, shared));
    section("clients", "Clients", &mut |t| clients_section(t, shared));
    section("memory", "Memory", &mut |t| memory_section(t, shared));
    section("persistence", "Persistence", &mut |t| {
        persistence_section(t, shared)
    });
    section("stats", "Stats", &mut |t| {
        stats_section(t, shared, store_stats.as_ref())
    });
    section("replication", "Replication", &mut |t| {
        shared.replication.info(t)
    });
    section("cpu", "CPU", &mut cpu_section);
    section("module_list", "Modules", &mut |_| {});
    section("commandstats", "Commandstats", &mut commandstats_section);
    section("errorstats", "Errorstats", &mut errorstats_section);
    // Latency percentiles are not tracked: the section is there, empty, as in Redis with
    // `latency-tracking no`.
    section("latencystats", "Latencystats", &mut |_| {});
    section("cluster", "Cluster", &mut |t| {
        field(t, "cluster_enabled", 0)
    });
    section("keyspace", "Keyspace", &mut |t| {
        keyspace_section(t, store_stats.as_ref())
    });
    let text = sections.join("\r\n");
    resp::reply::verbatim(ctx.out, b"txt", text.as_bytes(), ctx.conn.version);
}

fn server_section(t: &mut String, shared: &Shared) {
    let cfg = &shared.config;
    let uptime = shared.started.elapsed().as_secs();
    let now = unix_now();
    field(t, "redis_version", REDIS_COMPAT_VERSION);
    field(t, "redis_git_sha1", "00000000");
    field(t, "redis_git_dirty", 0);
    field(t, "redis_build_id", "0");
    field(t, "redis_mode", "standalone");
    field(t, "os", os_name());
    field(t, "arch_bits", usize::BITS);
    field(t, "monotonic_clock", "POSIX clock_gettime");
    field(t, "multiplexing_api", "epoll");
    field(t, "atomicvar_api", "c11-builtin");
    field(t, "gcc_version", "0.0.0");
    field(t, "process_id", std::process::id());
    field(t, "process_supervised", "no");
    field(t, "run_id", run_id());
    field(t, "tcp_port", cfg.port);
    field(t, "server_time_usec", now.as_micros());
    field(t, "uptime_in_seconds", uptime);
    field(t, "uptime_in_days", uptime / 86400);
    field(t, "hz", 10);
    field(t, "configured_hz", 10);
    // Redis's LRU clock: seconds, on 24 bits.
    field(t, "lru_clock", now.as_secs() & ((1 << 24) - 1));
    field(
        t,
        "executable",
        std::env::current_exe()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
    );
    field(
        t,
        "config_file",
        cfg.config_file
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
    );
    field(t, "io_threads_active", 0);
    let mut listener = 0;
    if cfg.port != 0 {
        let binds: Vec<String> = cfg
            .bind
            .split([' ', ','])
            .filter(|b| !b.is_empty())
            .map(|b| format!("bind={b}"))
            .collect();
        let value = format!("name=tcp,{},port={}", binds.join(","), cfg.port);
        field(t, &format!("listener{listener}"), value);
        listener += 1;
    }
    if let Some(path) = &cfg.unixsocket {
        let value = format!("name=unix,bind={}", path.display());
        field(t, &format!("listener{listener}"), value);
    }
    // cairn's own.
    field(t, "cairn_version", env!("CARGO_PKG_VERSION"));
    field(t, "memcache_port", cfg.memcache_port);
    field(t, "io_model", cfg.io_model.name());
    field(t, "io_threads", cfg.threads);
}

fn clients_section(t: &mut String, shared: &Shared) {
    let clients = shared.clients.list();
    let (mut max_in, mut max_out) = (0, 0);
    let (mut pubsub, mut watching, mut tracking, mut watched_keys) = (0, 0, 0, 0);
    let mut blocked = 0;
    for c in &clients {
        max_in = max_in.max(c.qbuf.load(Relaxed));
        max_out = max_out.max(c.omem.load(Relaxed));
        let st = &c.state;
        let flags = st.flags.load(Relaxed);
        pubsub += usize::from(flags & crate::clients::client_flags::PUBSUB != 0);
        tracking += usize::from(flags & crate::clients::client_flags::TRACKING != 0);
        blocked += usize::from(flags & crate::clients::client_flags::BLOCKED != 0);
        let watch = st.watch.load(Relaxed);
        watching += usize::from(watch > 0);
        watched_keys += u64::from(watch);
    }
    field(t, "connected_clients", shared.clients.count());
    field(t, "cluster_connections", 0);
    field(t, "maxclients", shared.settings.maxclients.load(Relaxed));
    field(t, "client_recent_max_input_buffer", max_in);
    field(t, "client_recent_max_output_buffer", max_out);
    field(t, "blocked_clients", blocked);
    field(t, "tracking_clients", tracking);
    field(t, "pubsub_clients", pubsub);
    field(t, "watching_clients", watching);
    field(t, "clients_in_timeout_table", 0);
    field(t, "total_watched_keys", watched_keys);
    field(t, "total_blocking_keys", 0);
    field(t, "total_blocking_keys_on_nokey", 0);
}

fn memory_section(t: &mut String, shared: &Shared) {
    let used = crate::shared::used_memory(shared);
    let peak = shared.metrics.note_memory(used);
    let rss = rss_bytes();
    let max = shared.store.maxmemory();
    let system = total_system_memory();
    let policy = shared.store.policy();
    let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    let percent = |a: u64, b: u64| format!("{:.2}%", ratio(a, b) * 100.0);
    field(t, "used_memory", used);
    field(t, "used_memory_human", human(used));
    field(t, "used_memory_rss", rss);
    field(t, "used_memory_rss_human", human(rss));
    field(t, "used_memory_peak", peak);
    field(t, "used_memory_peak_human", human(peak));
    field(t, "used_memory_peak_perc", percent(used, peak));
    field(t, "used_memory_overhead", 0);
    field(t, "used_memory_startup", 0);
    field(t, "used_memory_dataset", used);
    field(t, "used_memory_dataset_perc", percent(used, used));
    // mimalloc's own statistics are not read: what the process holds stands in for them.
    field(t, "allocator_allocated", used);
    field(t, "allocator_active", rss);
    field(t, "allocator_resident", rss);
    field(t, "allocator_muzzy", 0);
    field(t, "total_system_memory", system);
    field(t, "total_system_memory_human", human(system));
    // Scripting (Redis 7's fields): the interpreters, and the script cache (bodies and
    // entries, which count against maxmemory). cairn has no FUNCTION: those stay 0.
    let (scripts, script_bytes) = shared.scripts.usage();
    let vm = shared.scripts.vm_memory.load(Relaxed);
    field(t, "used_memory_lua", vm);
    field(t, "used_memory_vm_eval", vm);
    field(t, "used_memory_lua_human", human(vm as u64));
    field(t, "used_memory_scripts_eval", script_bytes);
    field(t, "number_of_cached_scripts", scripts);
    field(t, "number_of_functions", 0);
    field(t, "number_of_libraries", 0);
    field(t, "used_memory_vm_functions", 0);
    field(t, "used_memory_vm_total", vm);
    field(t, "used_memory_vm_total_human", human(vm as u64));
    field(t, "used_memory_functions", 0);
    field(t, "used_memory_scripts", script_bytes);
    field(t, "used_memory_scripts_human", human(script_bytes as u64));
    field(t, "maxmemory", max);
    field(t, "maxmemory_human", human(max));
    field(t, "maxmemory_policy", policy.name());
    field(
        t,
        "allocator_frag_ratio",
        format!("{:.2}", ratio(rss, used)),
    );
    field(t, "allocator_frag_bytes", rss.saturating_sub(used));
    field(t, "allocator_rss_ratio", "1.00");
    field(t, "allocator_rss_bytes", 0);
    field(t, "rss_overhead_ratio", "1.00");
    field(t, "rss_overhead_bytes", 0);
    field(
        t,
        "mem_fragmentation_ratio",
        format!("{:.2}", ratio(rss, used)),
    );
    field(t, "mem_fragmentation_bytes", rss as i64 - used as i64);
    // The replication backlog and the change stream's backlog: reported, but not counted
    // against maxmemory (each has its own bound: repl-backlog-size, changes-backlog-size).
    let backlog = shared.store.change_backlog_memory() + shared.replication.backlog_memory();
    field(t, "mem_not_counted_for_evict", backlog);
    field(t, "mem_replication_backlog", backlog);
    field(t, "mem_total_replication_buffers", 0);
    field(t, "mem_clients_slaves", 0);
    field(t, "mem_clients_normal", clients_memory(shared));
    field(t, "mem_cluster_links", 0);
    field(t, "mem_aof_buffer", 0);
    field(t, "mem_allocator", "mimalloc");
    field(t, "mem_overhead_db_hashtable_rehashing", 0);
    field(t, "active_defrag_running", 0);
    field(t, "lazyfree_pending_objects", 0);
    field(t, "lazyfreed_objects", 0);
    if let Some(sql) = &shared.sql {
        // SQLite's whole heap (tables, caches, temporary b-trees) and its limit.
        let s = sql.stats();
        field(t, "sql_used_memory", s.memory_used);
        field(t, "sql_data_memory", s.data_bytes);
        field(t, "sql_maxmemory", s.max_memory);
        field(t, "sql_heap_limit", s.heap_limit);
    }
    // cairn's breakdown by kind (`crate::memory`), as MEMORY STATS and /metrics show it.
    for (kind, bytes) in crate::memory::MemoryReport::collect(shared).kinds() {
        field(t, &format!("mem_{kind}"), bytes);
    }
}

/// Snapshot fields from the persistence state (`crate::snapshot`); cairn has no AOF and no
/// fork, so those fields say that none ran.
fn persistence_section(t: &mut String, shared: &Shared) {
    for (name, value) in shared.persistence.info_fields() {
        field(t, name, value);
    }
    field(t, "aof_enabled", 0);
    field(t, "aof_rewrite_in_progress", 0);
    field(t, "aof_rewrite_scheduled", 0);
    field(t, "aof_last_rewrite_time_sec", -1);
    field(t, "aof_current_rewrite_time_sec", -1);
    field(t, "aof_last_bgrewrite_status", "ok");
    field(t, "aof_rewrites", 0);
    field(t, "aof_rewrites_consecutive_failures", 0);
    field(t, "aof_last_write_status", "ok");
    field(t, "aof_last_cow_size", 0);
    field(t, "module_fork_in_progress", 0);
    field(t, "module_fork_last_cow_size", 0);
}

fn stats_section(t: &mut String, shared: &Shared, store: Option<&store::StoreStats>) {
    let s = &shared.stats;
    let rates = shared.metrics.instantaneous();
    let kbps = |bytes: u64| format!("{:.2}", bytes as f64 / 1024.0);
    let store = store.copied().unwrap_or_default();
    field(
        t,
        "total_connections_received",
        s.total_connections_received.load(Relaxed),
    );
    field(
        t,
        "total_commands_processed",
        s.total_commands_processed.load(Relaxed),
    );
    field(t, "instantaneous_ops_per_sec", rates.commands);
    // As Redis 7: the totals include the replication link's bytes, also shown apart.
    let repl_in = shared.replication.received_bytes.load(Relaxed);
    let repl_out = shared.replication.sent_bytes.load(Relaxed);
    let net_in = s.net_input_bytes.load(Relaxed);
    field(t, "total_net_input_bytes", net_in + repl_in);
    field(
        t,
        "total_net_output_bytes",
        s.net_output_bytes.load(Relaxed) + repl_out,
    );
    field(t, "total_net_repl_input_bytes", repl_in);
    field(t, "total_net_repl_output_bytes", repl_out);
    field(t, "instantaneous_input_kbps", kbps(rates.input_bytes));
    field(t, "instantaneous_output_kbps", kbps(rates.output_bytes));
    field(
        t,
        "instantaneous_input_repl_kbps",
        kbps(rates.repl_input_bytes),
    );
    field(
        t,
        "instantaneous_output_repl_kbps",
        kbps(rates.repl_output_bytes),
    );
    field(
        t,
        "rejected_connections",
        s.rejected_connections.load(Relaxed),
    );
    let repl = &shared.replication;
    field(t, "sync_full", repl.sync_full.load(Relaxed));
    field(t, "sync_partial_ok", repl.sync_partial_ok.load(Relaxed));
    field(t, "sync_partial_err", repl.sync_partial_err.load(Relaxed));
    field(t, "expired_subkeys", store.expired_fields);
    field(t, "expired_keys", store.expired);
    field(t, "expired_stale_perc", "0.00");
    field(t, "expired_time_cap_reached_count", 0);
    field(t, "expire_cycle_cpu_milliseconds", 0);
    field(t, "evicted_keys", store.evicted);
    field(t, "evicted_clients", 0);
    field(t, "evicted_scripts", 0);
    field(t, "total_eviction_exceeded_time", 0);
    field(t, "current_eviction_exceeded_time", 0);
    field(t, "keyspace_hits", store.hits);
    field(t, "keyspace_misses", store.misses);
    field(t, "pubsub_channels", shared.pubsub.channels(None).len());
    field(t, "pubsub_patterns", shared.pubsub.numpat());
    field(t, "pubsubshard_channels", 0);
    field(t, "latest_fork_usec", 0);
    field(t, "total_forks", 0);
    field(t, "migrate_cached_sockets", 0);
    field(t, "slave_expires_tracked_keys", 0);
    for name in [
        "active_defrag_hits",
        "active_defrag_misses",
        "active_defrag_key_hits",
        "active_defrag_key_misses",
        "total_active_defrag_time",
        "current_active_defrag_time",
    ] {
        field(t, name, 0);
    }
    let tracked = shared.tracking.table_keys();
    field(t, "tracking_total_keys", tracked);
    field(t, "tracking_total_items", tracked);
    field(t, "tracking_total_prefixes", 0);
    field(t, "unexpected_error_replies", 0);
    field(t, "total_error_replies", crate::stats::total_errors());
    field(t, "dump_payload_sanitizations", 0);
    field(
        t,
        "total_reads_processed",
        s.total_reads_processed.load(Relaxed),
    );
    field(
        t,
        "total_writes_processed",
        s.total_writes_processed.load(Relaxed),
    );
    field(t, "io_threaded_reads_processed", 0);
    field(t, "io_threaded_writes_processed", 0);
    field(
        t,
        "client_query_buffer_limit_disconnections",
        s.client_query_buffer_limit_disconnections.load(Relaxed),
    );
    let output_limit = s.client_output_limit_disconnections.load(Relaxed);
    field(t, "client_output_buffer_limit_disconnections", output_limit);
    field(t, "reply_buffer_shrinks", 0);
    field(t, "reply_buffer_expands", 0);
    field(t, "eventloop_cycles", 0);
    field(t, "eventloop_duration_sum", 0);
    field(t, "eventloop_duration_cmd_sum", 0);
    field(t, "instantaneous_eventloop_cycles_per_sec", 0);
    field(t, "instantaneous_eventloop_duration_usec", 0);
    field(t, "acl_access_denied_auth", 0);
    field(t, "acl_access_denied_cmd", 0);
    field(t, "acl_access_denied_key", 0);
    field(t, "acl_access_denied_channel", 0);
    // cairn's own name for the output-limit count (kept for existing readers).
    field(t, "client_output_limit_disconnections", output_limit);
}

fn cpu_section(t: &mut String) {
    let (sys, user) = cpu_times(libc::RUSAGE_SELF);
    let (sys_children, user_children) = cpu_times(libc::RUSAGE_CHILDREN);
    field(t, "used_cpu_sys", sys);
    field(t, "used_cpu_user", user);
    field(t, "used_cpu_sys_children", sys_children);
    field(t, "used_cpu_user_children", user_children);
    // Redis's `*_main_thread` fields are left out: cairn has no main thread running commands
    // (Redis prints them only where the platform can measure them, too).
}

fn commandstats_section(t: &mut String) {
    for (slot, s) in crate::stats::snapshot() {
        let Some(command) = super::by_slot(slot) else {
            continue;
        };
        let per_call = if s.calls == 0 {
            0.0
        } else {
            s.usec as f64 / s.calls as f64
        };
        let _ = write!(
            t,
            "cmdstat_{}:calls={},usec={},usec_per_call={per_call:.2},rejected_calls={},failed_calls={}\r\n",
            command.name, s.calls, s.usec, s.rejected, s.failed
        );
    }
}

fn errorstats_section(t: &mut String) {
    for (code, count) in crate::stats::error_snapshot() {
        let _ = write!(t, "errorstat_{code}:count={count}\r\n");
    }
}

fn keyspace_section(t: &mut String, store: Option<&store::StoreStats>) {
    if let Some(s) = store.filter(|s| s.keys > 0) {
        let _ = write!(
            t,
            "db0:keys={},expires={},avg_ttl=0,subexpiry=0\r\n",
            s.keys, s.keys_with_expiry
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sel(args: &[&str]) -> Selection {
        Selection::parse(args.iter().map(|a| a.as_bytes()))
    }

    #[test]
    fn section_selection_follows_redis() {
        let default = sel(&[]);
        assert!(default.shows("server") && default.shows("errorstats"));
        assert!(!default.shows("commandstats") && !default.shows("latencystats"));
        assert!(sel(&["all"]).shows("commandstats"));
        assert!(sel(&["EVERYTHING"]).shows("latencystats"));
        let two = sel(&["Memory", "cpu"]);
        assert!(two.shows("memory") && two.shows("cpu") && !two.shows("server"));
        let mixed = sel(&["default", "commandstats"]);
        assert!(mixed.shows("keyspace") && mixed.shows("commandstats"));
        assert!(sel(&["modules"]).shows("module_list"));
        assert!(!sel(&["nosuchsection"]).shows("server"));
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human(0), "0B");
        assert_eq!(human(1000), "1000B");
        assert_eq!(human(941040), "918.98K");
        assert_eq!(human(12292096), "11.72M");
    }

    /// The change stream's backlog (kept while a cursor consumer is registered) shows in
    /// `used_memory` and `mem_replication_backlog`, and is not counted for eviction.
    #[test]
    fn memory_section_reports_the_change_backlog() {
        let args = ["cairn-server", "--changes-backlog-size", "4mb"];
        let shared = Shared::new(crate::config::Config::from_args(args).expect("config"));
        assert_eq!(shared.store.change_backlog(), 4 << 20);
        let memory = |name: &str| -> u64 {
            let mut text = String::new();
            memory_section(&mut text, &shared);
            let prefix = format!("{name}:");
            let line = text.lines().find(|l| l.starts_with(&prefix)).expect(name);
            line[prefix.len()..].parse().expect("a number")
        };
        let put = |value: &[u8]| {
            let kind = store::Kind::String;
            let store = &shared.store;
            store.write(store::Author::SERVER, b"k", |e| e.put(kind, value, None, 0))
        };
        put(b"before").unwrap();
        assert_eq!(memory("mem_replication_backlog"), 0);
        let cursor = shared.store.subscribe();
        put(b"after").unwrap();
        let backlog = shared.store.change_backlog_memory();
        assert!(backlog > 0);
        assert_eq!(memory("mem_replication_backlog"), backlog);
        assert_eq!(memory("mem_not_counted_for_evict"), backlog);
        assert!(memory("used_memory") >= shared.store.used_memory() + backlog);
        drop(cursor);
        assert_eq!(memory("mem_replication_backlog"), 0);
    }

    #[test]
    fn ids_are_40_hex_digits() {
        let id = run_id();
        assert_eq!(id.len(), 40);
        assert!(id.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(run_id(), crate::replication::random_id());
    }
}
