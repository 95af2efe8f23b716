//! MEMORY STATS and MEMORY DOCTOR: the memory breakdown (`crate::memory`) as Redis's fields,
//! then cairn's own kinds (`cairn.<kind>`), and a short diagnosis.

use super::Ctx;
use crate::memory::MemoryReport;

/// MEMORY STATS: a map (RESP3) or flat name/value array (RESP2), Redis's names first.
pub fn stats(ctx: &mut Ctx<'_, '_>) {
    let m = MemoryReport::collect(ctx.shared);
    let overhead =
        m.index + m.tag_index + m.client_buffers + m.change_backlog + m.repl_backlog + m.scripts;
    let percent = |a: u64, b: u64| {
        if b == 0 {
            0.0
        } else {
            a as f64 * 100.0 / b as f64
        }
    };
    let ints: [(&str, u64); 14] = [
        ("peak.allocated", m.peak),
        ("total.allocated", m.used),
        ("startup.allocated", 0),
        ("replication.backlog", m.change_backlog + m.repl_backlog),
        ("clients.slaves", 0),
        ("clients.normal", m.client_buffers),
        ("cluster.links", 0),
        ("aof.buffer", 0),
        ("lua.caches", m.scripts),
        ("functions.caches", 0),
        ("overhead.total", overhead),
        ("keys.count", m.keys),
        (
            "keys.bytes-per-key",
            m.records.checked_div(m.keys).unwrap_or(0),
        ),
        ("dataset.bytes", m.records),
    ];
    let kinds = m.kinds();
    ctx.map(ints.len() + 4 + kinds.len());
    for (name, value) in ints {
        ctx.bulk(name.as_bytes());
        ctx.int(value as i64);
    }
    ctx.bulk(b"dataset.percentage");
    ctx.double(percent(m.records, m.used));
    ctx.bulk(b"peak.percentage");
    ctx.double(percent(m.used, m.peak));
    ctx.bulk(b"rss.bytes");
    ctx.int(m.rss as i64);
    ctx.bulk(b"fragmentation");
    ctx.double(if m.used == 0 {
        0.0
    } else {
        m.rss as f64 / m.used as f64
    });
    for (kind, bytes) in kinds {
        ctx.bulk(format!("cairn.{kind}").as_bytes());
        ctx.int(bytes as i64);
    }
}

/// MEMORY DOCTOR: a few lines of advice (a verbatim string in RESP3, as Redis replies).
pub fn doctor(ctx: &mut Ctx<'_, '_>) {
    let text = MemoryReport::collect(ctx.shared).doctor();
    resp::reply::verbatim(ctx.out, b"txt", text.as_bytes(), ctx.conn.version);
}
