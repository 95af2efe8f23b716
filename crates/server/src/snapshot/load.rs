//! Loading a snapshot at start-up (and for DEBUG RELOAD): the blocks' checksums are checked
//! first (so a refused file loads nothing), then the blocks are expanded and their records
//! inserted by several threads at once, progress going to the log and to INFO.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tracing::{info, warn};

use super::format::{self, Block, BlockKind};
use store::snapshot_parts::PartCut;

use super::{Damaged, Persistence};

/// What a load did.
#[derive(Clone, Debug, Default)]
pub struct LoadReport {
    pub records: u64,
    /// Records skipped because their deadline had passed.
    pub expired: u64,
    pub file_bytes: u64,
    /// The damaged parts skipped (`--load-damaged skip`), each described.
    pub skipped: Vec<String>,
    /// The saving server's per-shard change positions at their cuts.
    pub cut: Vec<u64>,
    /// The SQL change-log position the SQL section includes, if any.
    pub sql_position: Option<u64>,
    /// The replication id and offset the snapshot matches exactly (a replica's save).
    pub repl: Option<(String, u64)>,
    /// Each shard's part cuts, when the shards were copied in parts (a primary's full sync).
    pub parts: Option<PartCuts>,
    pub took: Duration,
}

/// META's part cuts (`save::encode_part_cuts`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartCuts {
    /// The saving store's key hash seeds, and the position of `PROBE_KEY` under them.
    pub seeds: [u64; 4],
    pub probe: u32,
    /// Per shard, its parts in order of position.
    pub shards: Vec<Vec<PartCut>>,
}

const HINT: &str = "start with --load-damaged skip to load the undamaged blocks, or move the \
                    file away to start empty";

pub(super) fn read_snapshot(
    p: &Persistence,
    path: &Path,
    damaged: Damaged,
    threads: usize,
    delay_us: u64,
) -> Result<LoadReport, String> {
    let started = Instant::now();
    let name = path.display().to_string();
    let file = std::fs::read(path).map_err(|e| format!("cannot read snapshot {name}: {e}"))?;
    p.loading_total.store(file.len() as u64, Relaxed);
    let layout = format::layout(&file).map_err(|e| format!("snapshot {name}: {e}"))?;
    let mut report = LoadReport {
        file_bytes: file.len() as u64,
        ..LoadReport::default()
    };
    let refuse_or_skip = |what: String, report: &mut LoadReport| match damaged {
        Damaged::Refuse => Err(format!("snapshot {name} is damaged: {what}; {HINT}")),
        Damaged::Skip => {
            warn!("snapshot {name}: {what}: skipped (load-damaged skip)");
            report.skipped.push(what);
            Ok(())
        }
    };
    if let Some(why) = &layout.cut_short {
        refuse_or_skip(format!("{why}; nothing after it can be read"), &mut report)?;
    }
    let blocks = &layout.blocks;
    let bad = checksums(&file, blocks, threads);
    for &i in &bad {
        refuse_or_skip(
            format!("{}: checksum mismatch", blocks[i].describe()),
            &mut report,
        )?;
    }
    if layout.cut_short.is_none() && bad.is_empty() && !layout.file_crc_ok {
        refuse_or_skip("the file checksum does not match".into(), &mut report)?;
    }
    // Tables sized for what is coming grow no more on the way (META has the record count).
    let expected = blocks
        .iter()
        .filter(|b| b.kind == BlockKind::Meta && b.checksum_ok(&file))
        .find_map(|b| {
            let mut buf = Vec::new();
            b.decode(&file, &mut buf).ok()?;
            decode_meta(&buf).map(|(_, records, _)| records)
        });
    if let Some(records) = expected {
        p.store.reserve(records as usize);
    }
    let loaded = insert_blocks(p, &file, blocks, &bad, threads, delay_us, &name);
    p.store.reserve(0);
    let loaded = loaded?;
    for failure in loaded.failures {
        refuse_or_skip(failure, &mut report)?;
    }
    report.records = loaded.records;
    report.expired = loaded.expired;
    p.store.raise_cas_above(loaded.max_cas);
    if let Some(meta) = loaded.meta {
        match decode_meta(&meta) {
            Some((cut, _, sql_position)) => {
                report.cut = cut;
                report.sql_position = sql_position;
                report.repl = decode_repl_mark(&meta);
                report.parts = decode_part_cuts(&meta);
            }
            None => refuse_or_skip("the META block does not parse".into(), &mut report)?,
        }
    }
    if !loaded.sql.is_empty() {
        let mut parts = loaded.sql;
        parts.sort_by_key(|(i, _)| *i);
        let bytes: Vec<u8> = parts.into_iter().flat_map(|(_, b)| b).collect();
        restore_sql(p, &bytes).or_else(|e| refuse_or_skip(e, &mut report))?;
    }
    report.took = started.elapsed();
    Ok(report)
}

/// The SQL section's bytes go back to the SQL engine here, before the server serves (the save
/// side is `save::extra_sections`). The engine tells the store's SQL log where to go on from
/// (`sql_changes`' `restored`).
fn restore_sql(p: &Persistence, bytes: &[u8]) -> Result<(), String> {
    match &p.sql {
        None => Err("the snapshot has SQL tables but the SQL engine is not running".into()),
        Some(sql) => sql.restore(bytes).map_err(|e| format!("SQL section: {e}")),
    }
}

/// The indexes of the blocks whose payload checksum does not match, checked on `threads`
/// threads.
fn checksums(file: &[u8], blocks: &[Block], threads: usize) -> Vec<usize> {
    let next = AtomicUsize::new(0);
    let bad = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Relaxed);
                let Some(block) = blocks.get(i) else {
                    return;
                };
                if !block.checksum_ok(file) {
                    bad.lock().push(i);
                }
            });
        }
    });
    let mut bad = bad.into_inner();
    bad.sort_unstable();
    bad
}

#[derive(Default)]
struct Inserted {
    records: u64,
    expired: u64,
    max_cas: u64,
    meta: Option<Vec<u8>>,
    sql: Vec<(u32, Vec<u8>)>,
    /// Blocks that passed their checksum but could not be used.
    failures: Vec<String>,
}

/// Expands and inserts the blocks (but those in `skip`) on `threads` threads.
fn insert_blocks(
    p: &Persistence,
    file: &[u8],
    blocks: &[Block],
    skip: &[usize],
    threads: usize,
    delay_us: u64,
    name: &str,
) -> Result<Inserted, String> {
    let next = AtomicUsize::new(0);
    let done = Mutex::new(Inserted::default());
    let stop = AtomicBool::new(false);
    let last_log = Mutex::new(Instant::now());
    let total = file.len() as u64;
    let now = store::now_ms();
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| {
                let mut buf = Vec::new();
                let mut mine = Inserted::default();
                while !stop.load(Relaxed) {
                    let i = next.fetch_add(1, Relaxed);
                    let Some(block) = blocks.get(i) else {
                        break;
                    };
                    if skip.binary_search(&i).is_err() {
                        match insert_block(p, file, block, now, &mut buf, &mut mine) {
                            Err(e) => mine.failures.push(format!("{}: {e}", block.describe())),
                            Ok(records) if delay_us > 0 => std::thread::sleep(
                                Duration::from_micros(delay_us.saturating_mul(records)),
                            ),
                            Ok(_) => {}
                        }
                    }
                    let loaded = p
                        .loading_loaded
                        .fetch_add((block.payload.end - block.offset) as u64, Relaxed);
                    if let Some(mut last) = last_log.try_lock() {
                        if last.elapsed() >= Duration::from_secs(1) {
                            *last = Instant::now();
                            info!(
                                "loading {name}: {:.1}% of {total} bytes",
                                loaded as f64 * 100.0 / total.max(1) as f64
                            );
                        }
                    }
                }
                let mut all = done.lock();
                all.records += mine.records;
                all.expired += mine.expired;
                all.max_cas = all.max_cas.max(mine.max_cas);
                if mine.meta.is_some() {
                    all.meta = mine.meta;
                }
                all.sql.append(&mut mine.sql);
                all.failures.append(&mut mine.failures);
            });
        }
    });
    let inserted = done.into_inner();
    Ok(inserted)
}

fn insert_block(
    p: &Persistence,
    file: &[u8],
    block: &Block,
    now: u64,
    buf: &mut Vec<u8>,
    into: &mut Inserted,
) -> Result<u64, String> {
    block.decode(file, buf)?;
    match block.kind {
        BlockKind::Records => {
            let loaded = p.store.load_records(buf, now).map_err(|e| e.to_string());
            match loaded {
                Ok(l) => {
                    into.records += l.records;
                    into.expired += l.expired;
                    into.max_cas = into.max_cas.max(l.max_cas);
                    Ok(l.records + l.expired)
                }
                Err(e) => Err(e),
            }
        }
        BlockKind::Sql => {
            into.sql.push((block.item, std::mem::take(buf)));
            Ok(0)
        }
        BlockKind::Meta => {
            into.meta = Some(buf.clone());
            Ok(0)
        }
        BlockKind::End => Ok(0),
    }
}

/// Reads META (see `save::encode_meta`): the cut, the record count, the SQL position.
/// META's replication mark (`save::encode_repl_mark`), if it has one.
pub(super) fn decode_repl_mark(m: &[u8]) -> Option<(String, u64)> {
    let shards = u32::from_le_bytes(m.get(1..5)?.try_into().ok()?) as usize;
    let mut at = 5 + shards.checked_mul(8)? + 8;
    at += match *m.get(at)? {
        1 => 9,
        _ => 1,
    };
    if *m.get(at)? != 2 {
        return None;
    }
    let id = std::str::from_utf8(m.get(at + 1..at + 41)?)
        .ok()?
        .to_string();
    let offset = u64::from_le_bytes(m.get(at + 41..at + 49)?.try_into().ok()?);
    Some((id, offset))
}

/// META's part cuts (`save::encode_part_cuts`), if it has them; None when they do not parse
/// (a replica then skips by each shard's first cut, as before them).
pub(super) fn decode_part_cuts(m: &[u8]) -> Option<PartCuts> {
    let shards = u32::from_le_bytes(m.get(1..5)?.try_into().ok()?) as usize;
    let mut at = 5 + shards.checked_mul(8)? + 8;
    at += match *m.get(at)? {
        1 => 9,
        _ => 1,
    };
    if *m.get(at)? == 2 {
        at += 49;
    }
    if *m.get(at)? != 3 {
        return None;
    }
    at += 1;
    let mut take = |n: usize| {
        let bytes = m.get(at..at.checked_add(n)?)?;
        at += n;
        Some(bytes)
    };
    let mut seeds = [0u64; 4];
    for seed in &mut seeds {
        *seed = u64::from_le_bytes(take(8)?.try_into().ok()?);
    }
    let probe = u32::from_le_bytes(take(4)?.try_into().ok()?);
    let count = u32::from_le_bytes(take(4)?.try_into().ok()?) as usize;
    let mut cuts = PartCuts {
        seeds,
        probe,
        shards: Vec::with_capacity(count.min(m.len() / 4)),
    };
    for _ in 0..count {
        let parts = u32::from_le_bytes(take(4)?.try_into().ok()?) as usize;
        let mut shard = Vec::with_capacity(parts.min(m.len() / 16));
        for _ in 0..parts {
            let hi = u64::from_le_bytes(take(8)?.try_into().ok()?);
            let seq = u64::from_le_bytes(take(8)?.try_into().ok()?);
            shard.push(PartCut { hi, seq });
        }
        cuts.shards.push(shard);
    }
    Some(cuts)
}

pub(super) fn decode_meta(m: &[u8]) -> Option<(Vec<u64>, u64, Option<u64>)> {
    let u64_at = |at: usize| {
        m.get(at..at + 8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
    };
    if *m.first()? != 1 {
        return None;
    }
    let shards = u32::from_le_bytes(m.get(1..5)?.try_into().ok()?) as usize;
    if shards > m.len() / 8 {
        return None;
    }
    let cut = (0..shards)
        .map(|i| u64_at(5 + i * 8))
        .collect::<Option<Vec<u64>>>()?;
    let at = 5 + shards * 8;
    let records = u64_at(at)?;
    let sql = match *m.get(at + 8)? {
        0 => None,
        1 => Some(u64_at(at + 9)?),
        _ => return None,
    };
    Some((cut, records, sql))
}

#[cfg(test)]
mod tests {
    use super::super::save::encode_meta;
    use super::*;

    #[test]
    fn the_replication_mark_round_trips() {
        for sql in [None, Some(5)] {
            let mut m = encode_meta(&[1, 2], 9, sql);
            assert_eq!(decode_repl_mark(&m), None);
            super::super::save::encode_repl_mark(&mut m, &"a".repeat(40), 1234);
            assert_eq!(decode_meta(&m), Some((vec![1, 2], 9, sql)));
            assert_eq!(decode_repl_mark(&m), Some(("a".repeat(40), 1234)));
        }
    }

    #[test]
    fn part_cuts_round_trip_after_a_mark_or_alone_and_older_readers_ignore_them() {
        use super::super::save::{encode_part_cuts, encode_repl_mark};
        let shards = vec![
            vec![
                PartCut {
                    hi: 1 << 31,
                    seq: 4,
                },
                PartCut {
                    hi: 1 << 32,
                    seq: 7,
                },
            ],
            vec![],
        ];
        let seeds = [1, 2, 3, 4];
        for (sql, mark) in [(None, false), (Some(5), true), (Some(5), false)] {
            let mut m = encode_meta(&[4, 0], 9, sql);
            if mark {
                encode_repl_mark(&mut m, "r", 11);
            }
            assert_eq!(decode_part_cuts(&m), None);
            encode_part_cuts(&mut m, &seeds, &shards);
            let cuts = decode_part_cuts(&m).expect("parts");
            assert_eq!((cuts.seeds, &cuts.shards), (seeds, &shards));
            assert_eq!(decode_meta(&m), Some((vec![4, 0], 9, sql)));
            assert_eq!(decode_repl_mark(&m).is_some(), mark);
            for cut in 0..m.len() {
                let _ = decode_part_cuts(&m[..cut]);
            }
        }
    }

    #[test]
    fn meta_round_trips_and_refuses_garbage() {
        let m = encode_meta(&[1, 2, 3], 9, Some(77));
        assert_eq!(decode_meta(&m), Some((vec![1, 2, 3], 9, Some(77))));
        let m = encode_meta(&[], 0, None);
        assert_eq!(decode_meta(&m), Some((vec![], 0, None)));
        for cut in 0..m.len() {
            assert_eq!(decode_meta(&m[..cut]), None);
        }
        assert_eq!(decode_meta(&[1, 255, 255, 255, 255]), None);
    }
}
