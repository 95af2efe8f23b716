//! Writing a snapshot: every shard's records (copied by the store at its cut), the extra
//! sections (the SQL tables), the META block, into a temporary file in `dir` that is fsynced
//! and renamed over the previous snapshot, the directory fsynced after: a crash at any point
//! leaves the previous snapshot whole.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use store::snapshot_parts::{PartCut, PartHasher, PROBE_KEY};

use super::format::{BlockKind, Writer};
use super::{Persistence, Target};

/// SQL dumps are cut into blocks of at most this many bytes, each checksummed on its own.
pub const SQL_BLOCK: usize = 4 << 20;

/// What a save wrote.
#[derive(Clone, Debug, Default)]
pub struct SaveReport {
    pub path: PathBuf,
    /// Records written.
    pub records: u64,
    pub file_bytes: u64,
    /// Bytes copied under shard locks (INFO `rdb_last_cow_size`).
    pub copied: u64,
    /// The longest a shard's lock was held for its copy.
    pub longest_hold: Duration,
}

/// Tells temporary files of saves in this process apart.
static SAVE_NUMBER: AtomicU64 = AtomicU64::new(0);

pub(super) fn write_snapshot(
    p: &Persistence,
    target: &Target,
    delay_us: u64,
) -> Result<SaveReport, String> {
    let path = target.path();
    let n = SAVE_NUMBER.fetch_add(1, Relaxed);
    let tmp = target
        .dir
        .join(format!("temp-{}-{n}.cairn", std::process::id()));
    let result = write_file(p, &tmp, delay_us).and_then(|mut report| {
        std::fs::rename(&tmp, &path)?;
        sync_dir(&target.dir)?;
        report.path = path.clone();
        Ok(report)
    });
    result.map_err(|e| {
        // The previous snapshot is untouched; the partial one goes.
        let _ = std::fs::remove_file(&tmp);
        format!("writing {}: {e}", path.display())
    })
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    File::open(dir)?.sync_all()
}

fn write_file(p: &Persistence, tmp: &Path, delay_us: u64) -> io::Result<SaveReport> {
    let file = File::create(tmp)?;
    // On a replica the save is taken between two applied records (the link waits meanwhile),
    // so that it matches a replication offset exactly, which META records.
    let mark = p.repl_mark.lock();
    let (buffered, mut report) = write_to(
        p,
        BufWriter::with_capacity(1 << 20, file),
        delay_us,
        mark.as_ref(),
        None,
    )?;
    drop(mark);
    let file = buffered.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    report.file_bytes = file.metadata()?.len();
    Ok(report)
}

/// Writes a whole snapshot to `out` (a file, or a replica's connection for a full sync):
/// every shard at its cut, the SQL section, META (with `mark`, the replication id and offset
/// the data matches exactly, when it does). Returns `out` and what was written.
///
/// `parts`: copy each shard in parts of about that many records, each under the shard's lock
/// on its own (`Store::dump_shard_in_parts`; a primary's full sync, whose replica replays the
/// changes after each part's cut, written into META's part cuts), instead of at one point in
/// time (a file).
pub fn write_to<W: Write>(
    p: &Persistence,
    out: W,
    delay_us: u64,
    mark: Option<&(String, u64)>,
    parts: Option<usize>,
) -> io::Result<(W, SaveReport)> {
    let mut w = Writer::new(out, store::now_ms())?;
    let mut report = SaveReport::default();
    let (mut scratch, mut out) = (Vec::new(), Vec::new());
    let shards = p.store.shard_count();
    let mut cut = Vec::with_capacity(shards);
    let mut part_cuts = Vec::with_capacity(if parts.is_some() { shards } else { 0 });
    for shard in 0..shards {
        out.clear();
        let c = match parts {
            Some(most) => {
                let mut cuts = Vec::new();
                let c = p
                    .store
                    .dump_shard_in_parts(shard, most, &mut scratch, &mut out, &mut cuts);
                part_cuts.push(cuts);
                c
            }
            None => p.store.dump_shard(shard, &mut scratch, &mut out),
        };
        report.records += c.records;
        report.copied += c.copied;
        report.longest_hold = report.longest_hold.max(c.held);
        cut.push(c.seq);
        if c.records > 0 {
            w.block(BlockKind::Records, shard as u32, &out)?;
        }
        if delay_us > 0 && c.records > 0 {
            std::thread::sleep(Duration::from_micros(delay_us.saturating_mul(c.records)));
        }
    }
    // The buffers of a big shard are not kept past the save.
    drop((scratch, out));
    let sql_position = extra_sections(p, &mut w)?;
    let mut meta = encode_meta(&cut, report.records, sql_position);
    if let Some((replid, offset)) = mark {
        encode_repl_mark(&mut meta, replid, *offset);
    }
    if parts.is_some() {
        encode_part_cuts(&mut meta, &p.store.hash_seeds(), &part_cuts);
    }
    w.block(BlockKind::Meta, 0, &meta)?;
    report.file_bytes = w.written();
    let out = w.finish()?;
    Ok((out, report))
}

/// META's optional tail: `2:u8 replid:40 bytes offset:u64`, the replication position the
/// snapshot matches exactly (a replica's save). A replica restarting from it asks its primary
/// for a partial resync from there.
pub(super) fn encode_repl_mark(meta: &mut Vec<u8>, replid: &str, offset: u64) {
    let mut id = [b'0'; 40];
    let n = replid.len().min(40);
    id[..n].copy_from_slice(&replid.as_bytes()[..n]);
    meta.push(2);
    meta.extend_from_slice(&id);
    meta.extend_from_slice(&offset.to_le_bytes());
}

/// META's optional part cuts, after the replication mark if there is one (a primary's full
/// sync): `3:u8 seeds:4*u64 probe:u32 shards:u32 (parts:u32 (hi:u64 seq:u64)*parts)*shards`,
/// the seeds of the primary's key hash, the position of `PROBE_KEY` under them, and each
/// shard's parts in order (docs/snapshot-format.md).
pub(super) fn encode_part_cuts(meta: &mut Vec<u8>, seeds: &[u64; 4], shards: &[Vec<PartCut>]) {
    meta.push(3);
    for seed in seeds {
        meta.extend_from_slice(&seed.to_le_bytes());
    }
    let probe = PartHasher::new(*seeds).position(PROBE_KEY);
    meta.extend_from_slice(&probe.to_le_bytes());
    meta.extend_from_slice(&(shards.len() as u32).to_le_bytes());
    for parts in shards {
        meta.extend_from_slice(&(parts.len() as u32).to_le_bytes());
        for part in parts {
            meta.extend_from_slice(&part.hi.to_le_bytes());
            meta.extend_from_slice(&part.seq.to_le_bytes());
        }
    }
}

/// The sections beyond the store's records; returns the SQL change-log position the SQL
/// section includes, if there is one. The SQL tables' dump (`sql::SqlEngine::snapshot`, taken
/// on the SQL writer between two statements) is opaque bytes here, written with
/// [`write_sql_section`]; its load side is `load::restore_sql`. It is taken apart from the
/// shards' cut (the SQL log is a log of its own), and never under a store lock: the SQL writer
/// may be waiting on the store's SQL log to record a change.
fn extra_sections<W: Write>(p: &Persistence, w: &mut Writer<W>) -> io::Result<Option<u64>> {
    let Some(sql) = &p.sql else {
        return Ok(None);
    };
    let snap = sql
        .snapshot()
        .map_err(|e| io::Error::other(format!("SQL tables: {e}")))?;
    write_sql_section(w, &snap.bytes)?;
    Ok(Some(snap.position))
}

/// Writes an SQL dump as SQL blocks of at most [`SQL_BLOCK`] bytes, numbered from 0 (an empty
/// dump is one empty block, so that "an SQL section" and "no SQL section" differ).
pub(super) fn write_sql_section<W: Write>(w: &mut Writer<W>, bytes: &[u8]) -> io::Result<()> {
    if bytes.is_empty() {
        return w.block(BlockKind::Sql, 0, &[]);
    }
    for (i, part) in bytes.chunks(SQL_BLOCK).enumerate() {
        w.block(BlockKind::Sql, i as u32, part)?;
    }
    Ok(())
}

/// META: `version:u8=1 shards:u32 (seq:u64)*shards records:u64 has_sql:u8 [sql_position:u64]`.
pub(super) fn encode_meta(cut: &[u64], records: u64, sql_position: Option<u64>) -> Vec<u8> {
    let mut m = Vec::with_capacity(22 + cut.len() * 8);
    m.push(1);
    m.extend_from_slice(&(cut.len() as u32).to_le_bytes());
    for seq in cut {
        m.extend_from_slice(&seq.to_le_bytes());
    }
    m.extend_from_slice(&records.to_le_bytes());
    match sql_position {
        Some(pos) => {
            m.push(1);
            m.extend_from_slice(&pos.to_le_bytes());
        }
        None => m.push(0),
    }
    m
}
