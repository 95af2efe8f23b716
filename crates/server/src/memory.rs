//! Where the server's memory goes, by kind: one breakdown that INFO memory, MEMORY STATS,
//! MEMORY DOCTOR and the Prometheus endpoint all show, so they always agree.
//!
//! The kinds come from the parts that own the memory: the store (records, the key index, the
//! tag index, the change backlog), the network runtime (client buffers, counted against
//! `maxmemory` as Redis counts them), Lua's script cache, the client-tracking table and
//! SQLite's heap. `used_memory` is the store's charge plus the memory held for it outside
//! (client buffers, scripts) plus the change backlog, as INFO has always reported it; SQLite
//! has its own limit (`sql-maxmemory`) and is reported beside it, not inside it.

use std::sync::atomic::Ordering::Relaxed;

use crate::shared::Shared;

/// Estimated bytes of one client-tracking table entry: the key's map entry, its insertion-order
/// copy and the tracker list (the keys themselves are short). The table bounds its key count
/// (`tracking-table-max-keys`), not its bytes, so an estimate is what there is.
const TRACKING_ENTRY_ESTIMATE: u64 = 128;

/// The breakdown, in bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemoryReport {
    /// What INFO reports as `used_memory`.
    pub used: u64,
    pub peak: u64,
    pub rss: u64,
    /// 0 = no limit.
    pub maxmemory: u64,
    /// Keys, values, record headers and collections.
    pub records: u64,
    /// The shards' slot arrays.
    pub index: u64,
    pub tag_index: u64,
    /// Clients' input, output and MULTI buffers and per-client state.
    pub client_buffers: u64,
    /// Cached Lua scripts.
    pub scripts: u64,
    /// The change stream's backlog (replicas, cursors); not counted against `maxmemory`.
    pub change_backlog: u64,
    /// The replication stream's backlog (`repl-backlog-size`, taken at the first replica);
    /// not counted against `maxmemory`, as in Redis.
    pub repl_backlog: u64,
    /// The client-tracking table (estimated); inside `client_buffers`' share of the limit.
    pub tracking_table: u64,
    pub tracking_keys: u64,
    /// SQLite's heap (data, page caches, statements); `sql-maxmemory` bounds it.
    pub sql: u64,
    pub keys: u64,
    pub keys_with_expiry: u64,
    pub clients: u64,
}

impl MemoryReport {
    pub fn collect(shared: &Shared) -> MemoryReport {
        let stats = shared.store.stats();
        let used = crate::shared::used_memory(shared);
        let client_buffers = clients_memory(shared);
        let (_, scripts) = shared.scripts.usage();
        let tracking_keys = shared.tracking.table_keys() as u64;
        MemoryReport {
            used,
            peak: shared.metrics.note_memory(used),
            rss: rss_bytes(),
            maxmemory: shared.store.maxmemory(),
            records: stats.records_memory(),
            index: stats.index_memory,
            tag_index: stats.tag_index_memory,
            client_buffers,
            scripts: scripts as u64,
            change_backlog: stats.change_backlog,
            repl_backlog: shared.replication.backlog_memory(),
            tracking_table: tracking_keys * TRACKING_ENTRY_ESTIMATE,
            tracking_keys,
            sql: shared.sql.as_ref().map_or(0, |s| s.stats().memory_used),
            keys: stats.keys,
            keys_with_expiry: stats.keys_with_expiry,
            clients: shared.clients.list().len() as u64,
        }
    }

    /// (kind, bytes) in one order for every view: INFO's `mem_<kind>` fields, MEMORY STATS'
    /// `<kind>` entries and the endpoint's `cairn_memory_bytes{kind}`.
    pub fn kinds(&self) -> [(&'static str, u64); 9] {
        [
            ("records", self.records),
            ("index", self.index),
            ("tag_index", self.tag_index),
            ("client_buffers", self.client_buffers),
            ("scripts", self.scripts),
            ("tracking_table", self.tracking_table),
            ("change_backlog", self.change_backlog),
            ("repl_backlog", self.repl_backlog),
            ("sql", self.sql),
        ]
    }

    /// MEMORY DOCTOR's advice: a few lines, the empty case first, as Redis's report reads.
    pub fn doctor(&self) -> String {
        let mut issues = Vec::new();
        if self.used < 5 * 1024 * 1024 {
            return "Hi Sam, this instance is empty or is using very little memory, my issues \
                    detector can't be used in these conditions. Please, leave for your mission \
                    on Earth and fill it with some data. The new Sam and I will be back to our \
                    programming as soon as I finished rebooting."
                .into();
        }
        if self.peak > self.used.saturating_mul(3) / 2 {
            issues.push(format!(
                "Peak memory: the peak ({}) is much higher than what is used now ({}): the \
                 allocator may keep the freed memory (RSS {}).",
                human(self.peak),
                human(self.used),
                human(self.rss)
            ));
        }
        if self.rss > self.used.saturating_mul(3) / 2 && self.rss > self.used + 64 * 1024 * 1024 {
            issues.push(format!(
                "High fragmentation: RSS ({}) is {:.2} times used_memory ({}).",
                human(self.rss),
                self.rss as f64 / self.used.max(1) as f64,
                human(self.used)
            ));
        }
        if self.client_buffers > self.used / 4 {
            issues.push(format!(
                "Big client buffers: clients hold {} ({} clients); look for slow readers \
                 (CLIENT LIST omem) or big pipelines, and client-output-buffer-limit.",
                human(self.client_buffers),
                self.clients
            ));
        }
        if self.tag_index > self.records / 2 {
            issues.push(format!(
                "Tag index: {} for {} of records; records carry many tags.",
                human(self.tag_index),
                human(self.records)
            ));
        }
        if self.maxmemory == 0 {
            issues.push(
                "No maxmemory: the server grows until the system runs out; set --maxmemory \
                 and a maxmemory-policy."
                    .into(),
            );
        }
        if issues.is_empty() {
            "Hi Sam, I can't find any memory issue in your instance. I can only account for \
             what occurs on this base."
                .into()
        } else {
            format!(
                "Sam, I detected a few issues in this cairn instance memory implants:\n\n{}\n",
                issues
                    .iter()
                    .map(|i| format!(" * {i}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            )
        }
    }
}

/// Client buffers as INFO's `mem_clients_normal` counts them.
pub fn clients_memory(shared: &Shared) -> u64 {
    shared
        .clients
        .list()
        .iter()
        .map(|c| {
            c.qbuf.load(Relaxed)
                + c.qbuf_free.load(Relaxed)
                + c.omem.load(Relaxed)
                + c.state.multi_mem.load(Relaxed)
                + crate::clients::client_base_mem()
        })
        .sum()
}

/// The process's resident set, bytes (0 where /proc is missing).
pub fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u64>().ok())
        })
        .map_or(0, |pages| pages * page_size())
}

pub fn page_size() -> u64 {
    // SAFETY: sysconf only reads a system constant.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(size).unwrap_or(4096)
}

/// Bytes as Redis's `_human` fields write them (`1.50M`).
pub fn human(bytes: u64) -> String {
    let units = ["B", "K", "M", "G", "T", "P"];
    if bytes < 1024 {
        return format!("{bytes}B");
    }
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < units.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.2}{}", units[unit])
}
