//! One mapping's durable log under `dir/wb/<name>/`: segment files named by the number (LSN)
//! of their first record, each record `[len u32][check u32][lsn u64][micros u64][op u8]
//! [key_len u32][key][value]`, little-endian. `check` covers everything after it: records
//! written since the op byte's high bit ([`WORD_CHECK`]) is set use a word-at-a-time hash
//! (written under the key's shard lock on every mapped write, where the byte-wise FNV-1a of
//! older records cost a SET 6% of its CPU); records without it, from older logs, are still
//! read with FNV-1a.
//!
//! Three hands touch it, none waiting on another's slow work:
//! - the change tap (under the written key's shard lock) only appends the encoded record to
//!   the in-memory `pending` buffer and numbers it, so numbers follow the store's order per
//!   key;
//! - the thread that ran the command then `write_upto`s its record: whoever comes first writes
//!   everything pending with one `write` (a group write, as Redis's AOF does before a reply);
//! - `sync` (the flusher, the once-a-second syncer, or the `always` syncer) fsyncs outside the
//!   writer's lock, on its own handle of the files, so writers never wait for a disk flush.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::{Condvar, Mutex};

/// Record header: len, check, lsn, micros, op, key_len.
const HEADER: usize = 4 + 4 + 8 + 8 + 1 + 4;
/// The largest record the log takes (key and value together).
pub const MAX_RECORD: usize = 64 << 20;
const SUFFIX: &str = ".wblog";

/// What a record says happened to its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    Delete = 0,
    String = 1,
    /// The value is the store's hash encoding (`store::hash`).
    Hash = 2,
    /// A set, sorted set or list (its portable bytes): no mapping stores one, so the flusher
    /// dead-letters it.
    Collection = 3,
    /// A row of a cairn SQL table: the value is [`crate::db::encode_sql_row`]'s columns.
    Row = 4,
    /// No change: marks that numbering jumped (see [`Log::advance_to`]), so that a reopened
    /// log goes on above the jump.
    Mark = 5,
}

/// A record read back from the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub lsn: u64,
    pub micros: u64,
    pub op: OpKind,
    pub key: Vec<u8>,
    pub value: Vec<u8>,
}

/// Wall-clock µs since the epoch, from the kernel's coarse clock (a tick's resolution, a few
/// ms at most): every record is stamped with it under its key's shard lock, and it only times
/// `delay` windows and ages, where the precise clock's cost buys nothing.
pub fn now_micros() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to fill; CLOCK_REALTIME_COARSE exists on every Linux.
    if unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut ts) } != 0 {
        return SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
    }
    ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1_000
}

/// The op byte's flag saying the record's `check` is [`word_check`]'s (else FNV-1a's).
const WORD_CHECK: u8 = 0x80;

/// The checksum of records from older logs (FNV-1a, 32 bits, a byte at a time).
fn fnv_check(bytes: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for &b in bytes {
        h ^= b as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// A small checksum over the record's body, eight bytes a step (a multiply-rotate hash, the
/// length mixed in): catches a torn or zero-filled tail, at a fraction of FNV-1a's cost.
fn word_check(bytes: &[u8]) -> u32 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let step = |h: u64, w: u64| (h ^ w).wrapping_mul(K).rotate_left(29);
    let mut h = 0x243f_6a88_85a3_08d3 ^ bytes.len() as u64;
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        h = step(h, u64::from_le_bytes(w.try_into().expect("8 bytes")));
    }
    let rest = words.remainder();
    if !rest.is_empty() {
        let mut last = [0u8; 8];
        last[..rest.len()].copy_from_slice(rest);
        h = step(h, u64::from_le_bytes(last));
    }
    h ^= h >> 32;
    (h.wrapping_mul(K) >> 32) as u32
}

fn encode(out: &mut Vec<u8>, lsn: u64, micros: u64, op: OpKind, key: &[u8], value: &[u8]) {
    let len = HEADER - 8 + key.len() + value.len();
    // The header is made on the stack and copied once: one bounds check and one copy instead
    // of six growing appends, under the key's shard lock.
    let mut head = [0u8; HEADER];
    head[..4].copy_from_slice(&(len as u32).to_le_bytes());
    head[8..16].copy_from_slice(&lsn.to_le_bytes());
    head[16..24].copy_from_slice(&micros.to_le_bytes());
    head[24] = op as u8 | WORD_CHECK;
    head[25..].copy_from_slice(&(key.len() as u32).to_le_bytes());
    let start = out.len();
    out.reserve(8 + len);
    out.extend_from_slice(&head);
    out.extend_from_slice(key);
    out.extend_from_slice(value);
    let sum = word_check(&out[start + 8..]);
    out[start + 4..start + 8].copy_from_slice(&sum.to_le_bytes());
}

/// Decodes the record at the start of `buf`: the record and its size, or None when `buf`
/// holds no whole, intact record.
fn decode(buf: &[u8]) -> Option<(Record, usize)> {
    let len = u32::from_le_bytes(buf.get(..4)?.try_into().ok()?) as usize;
    let sum = u32::from_le_bytes(buf.get(4..8)?.try_into().ok()?);
    let body = buf.get(8..8 + len)?;
    if len < HEADER - 8 {
        return None;
    }
    // The flag is read before the check that covers it: a torn byte fails either check.
    let op = body[16];
    let checked = match op & WORD_CHECK {
        0 => fnv_check(body),
        _ => word_check(body),
    };
    if checked != sum {
        return None;
    }
    let lsn = u64::from_le_bytes(body[..8].try_into().ok()?);
    let micros = u64::from_le_bytes(body[8..16].try_into().ok()?);
    let op = match op & !WORD_CHECK {
        0 => OpKind::Delete,
        1 => OpKind::String,
        2 => OpKind::Hash,
        3 => OpKind::Collection,
        4 => OpKind::Row,
        5 => OpKind::Mark,
        _ => return None,
    };
    let key_len = u32::from_le_bytes(body[17..21].try_into().ok()?) as usize;
    let key = body.get(21..21 + key_len)?.to_vec();
    let value = body[21 + key_len..].to_vec();
    Some((
        Record {
            lsn,
            micros,
            op,
            key,
            value,
        },
        8 + len,
    ))
}

/// Records numbered but not yet written to a file.
struct Pending {
    buf: Vec<u8>,
    /// The number the next record gets.
    next: u64,
    /// The number of the first record in `buf`.
    first: u64,
}

/// The file records are appended to, and the ones before it still to be fsynced.
struct Writer {
    file: Arc<File>,
    /// The first number of the current segment and its size in bytes.
    segment: u64,
    size: u64,
    /// The segment's bytes allocated ahead (up to here, without changing its size: see
    /// [`preallocate`]); `u64::MAX` where the file system cannot.
    allocated: u64,
    /// The buffer the last write emptied, kept for `pending` to fill next (no regrowing
    /// from empty on every write), unless it grew past [`SPARE_MAX`].
    spare: Vec<u8>,
    unsynced: Vec<Arc<File>>,
    /// A segment may exist before the current one: set by a rotation (and at open), cleared
    /// by `truncate` when it lists the directory, which it skips while this is false (the
    /// flusher truncates after every batch: no directory listing each time).
    older: bool,
}

/// Bytes allocated ahead of the current segment's end at a time.
const PREALLOCATE: u64 = 1 << 20;
/// The largest buffer kept for reuse between writes.
const SPARE_MAX: usize = 1 << 20;

/// Allocates the disk blocks of `file` from `from` to `from + len` without changing its size
/// (`FALLOC_FL_KEEP_SIZE`): appends then fill blocks already allocated instead of reserving
/// each new block as they extend the file (the kernel's share of a mapped write's CPU). The
/// file's size, and so everything that reads the log, is unchanged; the blocks past its end
/// are freed with the file. Returns where the allocation ends: `u64::MAX` (do not try again)
/// where the file system does not support it.
fn preallocate(file: &File, from: u64, len: u64) -> u64 {
    use std::os::fd::AsRawFd;
    // SAFETY: a plain syscall on an open descriptor.
    let r = unsafe {
        libc::fallocate(
            file.as_raw_fd(),
            libc::FALLOC_FL_KEEP_SIZE,
            from as libc::off_t,
            len as libc::off_t,
        )
    };
    if r == 0 {
        from + len
    } else {
        u64::MAX
    }
}

pub struct Log {
    dir: PathBuf,
    /// A new segment starts past this size (CONFIG SET wb-max-bytes changes it).
    segment_max: AtomicU64,
    pending: Mutex<Pending>,
    writer: Mutex<Writer>,
    /// Serialises fsyncs, so that `synced` only moves forward.
    syncing: Mutex<()>,
    /// Last record number in a file (written) and on disk (fsynced).
    written: AtomicU64,
    synced: AtomicU64,
    /// Fsync rounds made (WB.INFO `fsyncs`): under `wb-fsync always`, one per connection's
    /// batch of writes, not one per write.
    fsyncs: AtomicU64,
    /// Bytes in segment files, and waiting in `pending`.
    disk_bytes: AtomicU64,
    pending_bytes: AtomicU64,
    /// Woken when records are written (the flusher waits on it) or space is freed.
    pub(crate) wake: (Mutex<()>, Condvar),
}

fn segment_name(first: u64) -> String {
    format!("{first:020}{SUFFIX}")
}

/// The segments in `dir`, oldest first: (first number, path).
fn segments(dir: &Path) -> std::io::Result<Vec<(u64, PathBuf)>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if let Some(first) = name.strip_suffix(SUFFIX).and_then(|n| n.parse().ok()) {
            out.push((first, path));
        }
    }
    out.sort();
    Ok(out)
}

impl Log {
    /// Opens (or creates) the log in `dir`: finds its last intact record, cuts a torn tail,
    /// and appends after it.
    pub fn open(dir: &Path, segment_max: u64) -> std::io::Result<Log> {
        std::fs::create_dir_all(dir)?;
        let mut last = 0;
        let mut disk = 0;
        let found = segments(dir)?;
        for (i, (first, path)) in found.iter().enumerate() {
            let bytes = std::fs::read(path)?;
            let mut at = 0;
            while let Some((record, size)) = decode(&bytes[at..]) {
                last = record.lsn;
                at += size;
            }
            if at < bytes.len() {
                if i + 1 < found.len() {
                    return Err(std::io::Error::other(format!(
                        "write-behind log {} is damaged at byte {at} (not its tail)",
                        path.display()
                    )));
                }
                tracing::warn!(
                    "write-behind log {}: cut a torn tail of {} bytes",
                    path.display(),
                    bytes.len() - at
                );
                OpenOptions::new()
                    .write(true)
                    .open(path)?
                    .set_len(at as u64)?;
            }
            if at == 0 && last == 0 {
                last = first.saturating_sub(1);
            }
            disk += at as u64;
        }
        let next = last + 1;
        let (segment, size) = match found.last() {
            Some((first, path)) => (*first, std::fs::metadata(path)?.len()),
            None => (next, 0),
        };
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join(segment_name(segment)))?;
        File::open(dir)?.sync_all()?;
        Ok(Log {
            dir: dir.to_path_buf(),
            segment_max: AtomicU64::new(segment_max),
            pending: Mutex::new(Pending {
                buf: Vec::new(),
                next,
                first: next,
            }),
            writer: Mutex::new(Writer {
                file: Arc::new(file),
                segment,
                size,
                allocated: size,
                spare: Vec::new(),
                unsynced: Vec::new(),
                older: true,
            }),
            syncing: Mutex::new(()),
            written: AtomicU64::new(last),
            synced: AtomicU64::new(last),
            fsyncs: AtomicU64::new(0),
            disk_bytes: AtomicU64::new(disk),
            pending_bytes: AtomicU64::new(0),
            wake: (Mutex::new(()), Condvar::new()),
        })
    }

    /// Numbers and buffers one record; returns its number. Quick (a copy under a lock): the
    /// tap calls it under the key's shard lock.
    pub fn append(&self, op: OpKind, key: &[u8], value: &[u8]) -> u64 {
        self.append_then(op, key, value, |_| ())
    }

    /// As `append`, calling `f` with the record's number before the record can be written
    /// (under the lock `write_upto` takes it with).
    pub fn append_then(&self, op: OpKind, key: &[u8], value: &[u8], f: impl FnOnce(u64)) -> u64 {
        let mut p = self.pending.lock();
        let lsn = p.next;
        p.next += 1;
        let before = p.buf.len();
        encode(&mut p.buf, lsn, now_micros(), op, key, value);
        self.pending_bytes
            .fetch_add((p.buf.len() - before) as u64, Relaxed);
        f(lsn);
        lsn
    }

    /// Numbers the next record above `floor` (if it is not already): a mark record takes the
    /// number `floor`, written and fsynced, so that the log reopened goes on above it too.
    /// Returns the mark's number, or None when numbering was already above `floor`.
    pub fn advance_to(&self, floor: u64) -> std::io::Result<Option<u64>> {
        let lsn = {
            let mut p = self.pending.lock();
            if p.next > floor {
                return Ok(None);
            }
            p.next = floor;
            if p.buf.is_empty() {
                p.first = floor;
            }
            let before = p.buf.len();
            encode(&mut p.buf, floor, now_micros(), OpKind::Mark, b"", b"");
            p.next = floor + 1;
            self.pending_bytes
                .fetch_add((p.buf.len() - before) as u64, Relaxed);
            floor
        };
        self.write_upto(lsn)?;
        self.sync()?;
        Ok(Some(lsn))
    }

    /// Makes sure record `lsn` is in a file (written, maybe not yet fsynced): writes
    /// everything pending unless another thread already did.
    pub fn write_upto(&self, lsn: u64) -> std::io::Result<()> {
        if self.written.load(Relaxed) >= lsn {
            return Ok(());
        }
        let mut w = self.writer.lock();
        if self.written.load(Relaxed) >= lsn {
            return Ok(());
        }
        let spare = std::mem::take(&mut w.spare);
        let (mut buf, first, last) = {
            let mut p = self.pending.lock();
            let first = p.first;
            p.first = p.next;
            (std::mem::replace(&mut p.buf, spare), first, p.next - 1)
        };
        if buf.is_empty() {
            return Ok(());
        }
        if w.size >= self.segment_max.load(Relaxed) {
            let file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(self.dir.join(segment_name(first)))?;
            let old = std::mem::replace(&mut w.file, Arc::new(file));
            w.unsynced.push(old);
            w.segment = first;
            w.size = 0;
            w.allocated = 0;
            w.older = true;
        }
        let end = w.size + buf.len() as u64;
        if end > w.allocated {
            let ahead = PREALLOCATE.min(self.segment_max.load(Relaxed));
            w.allocated = preallocate(&w.file, w.size, (end - w.size).max(ahead));
        }
        let result = (&*w.file).write_all(&buf);
        if let Err(e) = result {
            // The records stay numbered but unwritten: put them back so a later call retries.
            let mut p = self.pending.lock();
            buf.extend_from_slice(&p.buf);
            p.buf = buf;
            p.first = first;
            return Err(e);
        }
        w.size = end;
        let len = buf.len() as u64;
        self.pending_bytes.fetch_sub(len, Relaxed);
        self.disk_bytes.fetch_add(len, Relaxed);
        self.written.store(last, Relaxed);
        if buf.capacity() <= SPARE_MAX {
            buf.clear();
            w.spare = buf;
        }
        drop(w);
        self.wake.1.notify_all();
        Ok(())
    }

    /// Fsyncs what is written; returns the last record number now on disk.
    pub fn sync(&self) -> std::io::Result<u64> {
        let _one = self.syncing.lock();
        let (file, old, written) = {
            let mut w = self.writer.lock();
            (
                w.file.clone(),
                std::mem::take(&mut w.unsynced),
                self.written.load(Relaxed),
            )
        };
        if written <= self.synced.load(Relaxed) {
            return Ok(written);
        }
        for f in old.iter().chain(std::iter::once(&file)) {
            f.sync_data()?;
        }
        if !old.is_empty() {
            File::open(&self.dir)?.sync_all()?;
        }
        self.synced.store(written, Relaxed);
        self.fsyncs.fetch_add(1, Relaxed);
        Ok(written)
    }

    /// Fsync rounds made since the log was opened.
    pub fn fsyncs(&self) -> u64 {
        self.fsyncs.load(Relaxed)
    }

    pub fn written(&self) -> u64 {
        self.written.load(Relaxed)
    }

    pub fn synced(&self) -> u64 {
        self.synced.load(Relaxed)
    }

    /// The number of the last record numbered (written or not).
    pub fn last(&self) -> u64 {
        self.pending.lock().next - 1
    }

    /// Bytes the log holds: its files and its unwritten records.
    pub fn bytes(&self) -> u64 {
        self.disk_bytes.load(Relaxed) + self.pending_bytes.load(Relaxed)
    }

    pub fn set_segment_max(&self, bytes: u64) {
        self.segment_max.store(bytes, Relaxed);
    }

    /// Deletes the segments whose records are all at or before `done` (never the current one).
    /// A full current segment whose records are all applied is replaced by a new, empty one
    /// first, so that an idle log shrinks to nothing (and a smaller `wb-max-bytes` can be
    /// met) instead of keeping its last segment's applied records.
    pub fn truncate(&self, done: u64) -> std::io::Result<()> {
        let current = {
            let mut w = self.writer.lock();
            let written = self.written.load(Relaxed);
            if done >= written && w.size > 0 && w.size >= self.segment_max.load(Relaxed) {
                // Under the writer's lock, the next record written is `written + 1`. The old
                // file's records are applied, hence fsynced: no fsync of it is owed.
                let first = written + 1;
                let file = OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(self.dir.join(segment_name(first)))?;
                File::open(&self.dir)?.sync_all()?;
                w.file = Arc::new(file);
                w.segment = first;
                w.size = 0;
                w.allocated = 0;
                w.older = true;
            }
            if !std::mem::take(&mut w.older) {
                return Ok(());
            }
            w.segment
        };
        let found = match segments(&self.dir) {
            Ok(found) => found,
            Err(e) => {
                self.writer.lock().older = true;
                return Err(e);
            }
        };
        // Whether an older segment is left (not all applied): listed again next time.
        let mut left = false;
        for pair in found.windows(2) {
            let ((first, path), (next_first, _)) = (&pair[0], &pair[1]);
            if *next_first <= done + 1 && *next_first <= current {
                let size = std::fs::metadata(path).map_or(0, |m| m.len());
                if let Err(e) = std::fs::remove_file(path) {
                    self.writer.lock().older = true;
                    return Err(e);
                }
                self.disk_bytes.fetch_sub(size, Relaxed);
            } else if *first < current {
                left = true;
            }
        }
        if left {
            self.writer.lock().older = true;
        }
        self.wake.1.notify_all();
        Ok(())
    }

    /// A reader from the start of the log.
    pub fn reader(&self) -> Reader {
        Reader {
            dir: self.dir.clone(),
            segment: None,
            offset: 0,
            buf: Vec::new(),
            buf_start: 0,
        }
    }

    /// Waits (at most `timeout`) for a record after `lsn` to be written, or for `wake`.
    pub fn wait_written(&self, lsn: u64, timeout: std::time::Duration) {
        let mut g = self.wake.0.lock();
        if self.written.load(Relaxed) > lsn {
            return;
        }
        self.wake.1.wait_for(&mut g, timeout);
    }
}

/// Reads records in order from the segment files (the flusher's position).
pub struct Reader {
    dir: PathBuf,
    /// The segment read now: (first number, file).
    segment: Option<(u64, File)>,
    /// Where the next record starts in the segment.
    offset: u64,
    /// Bytes of the segment from `buf_start` on, read a chunk at a time (the flusher reads
    /// every record: one `pread` per chunk, not two per record).
    buf: Vec<u8>,
    buf_start: u64,
}

/// Bytes the reader asks the file for at once (more when one record is larger).
const READ_CHUNK: usize = 256 << 10;

/// Where a reader is: restored with [`Reader::seek`] to read a batch again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Position {
    segment: Option<u64>,
    offset: u64,
}

impl Reader {
    pub fn position(&self) -> Position {
        Position {
            segment: self.segment.as_ref().map(|(f, _)| *f),
            offset: self.offset,
        }
    }

    pub fn seek(&mut self, pos: Position) -> std::io::Result<()> {
        // Back in the segment open now (the flusher rereads a batch): keep its file and the
        // bytes read (segments are only appended to).
        if pos.segment.is_some() && pos.segment == self.position().segment {
            self.offset = pos.offset;
            return Ok(());
        }
        self.buf.clear();
        // A segment deleted meanwhile held only records already applied: start from the
        // oldest one left (the flusher skips what its checkpoint covers).
        self.segment = match pos.segment {
            Some(first) => match File::open(self.dir.join(segment_name(first))) {
                Ok(file) => Some((first, file)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => return Err(e),
            },
            None => None,
        };
        self.offset = if self.segment.is_some() {
            pos.offset
        } else {
            0
        };
        Ok(())
    }

    /// The next record at or before `upto` (a number known written), or None for now.
    pub fn next(&mut self, upto: u64) -> std::io::Result<Option<Record>> {
        loop {
            if self.segment.is_none() {
                let Some((first, path)) = segments(&self.dir)?.into_iter().next() else {
                    return Ok(None);
                };
                self.segment = Some((first, File::open(path)?));
                self.offset = 0;
                self.buf.clear();
            }
            let first = self.segment.as_ref().expect("opened above").0;
            if let Some(found) = self.buffered(upto)? {
                return Ok(found);
            }
            // The end of this segment for now. A segment is complete once a newer one exists
            // (the writer rotates before writing to the new one): go on there.
            let newer = segments(&self.dir)?.into_iter().find(|(f, _)| *f > first);
            match newer {
                Some((f, path)) => {
                    self.segment = Some((f, File::open(path)?));
                    self.offset = 0;
                    self.buf.clear();
                }
                None => return Ok(None),
            }
        }
    }

    /// The record at `offset` in the open segment, from the buffer, which is read again from
    /// the file (at `offset`, a chunk or the whole record) when it does not hold that record
    /// whole and intact: Some(None) when the record is past `upto`, None at the segment's
    /// end for now (nothing more written, or a tail still being written).
    fn buffered(&mut self, upto: u64) -> std::io::Result<Option<Option<Record>>> {
        // Bytes last read from the file at `offset` (0: the buffer there is older).
        let mut asked = 0;
        loop {
            let rest = match self.offset.checked_sub(self.buf_start) {
                Some(at) if at as usize <= self.buf.len() => &self.buf[at as usize..],
                _ => &[][..],
            };
            let mut need = READ_CHUNK;
            if let Some(head) = rest.get(..4) {
                let len = u32::from_le_bytes(head.try_into().expect("4 bytes")) as usize;
                if len > MAX_RECORD + HEADER {
                    return Err(std::io::Error::other("write-behind log: bad record length"));
                }
                if let Some((record, size)) = decode(rest) {
                    if record.lsn > upto {
                        return Ok(Some(None));
                    }
                    self.offset += size as u64;
                    return Ok(Some(Some(record)));
                }
                need = need.max(8 + len);
            }
            // Read just now with room for the whole record, yet not there whole and intact.
            if asked >= need {
                return Ok(None);
            }
            let (_, file) = self.segment.as_ref().expect("open");
            self.buf.resize(need, 0);
            let got = read_at_most(file, &mut self.buf, self.offset)?;
            self.buf.truncate(got);
            self.buf_start = self.offset;
            asked = need;
        }
    }

    /// Skips records up to and including `done` (a checkpoint).
    pub fn skip_to(&mut self, done: u64, upto: u64) -> std::io::Result<()> {
        loop {
            let pos = self.position();
            match self.next(upto.max(done))? {
                Some(r) if r.lsn <= done => continue,
                Some(_) => return self.seek(pos),
                None => return Ok(()),
            }
        }
    }
}

fn read_at_most(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], offset + got as u64)? {
            0 => break,
            n => got += n,
        }
    }
    Ok(got)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("cairn-wblog-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn numbering_jumps_above_a_floor_and_stays_there_after_reopening() {
        let dir = temp("advance");
        let log = Log::open(&dir, 1 << 20).unwrap();
        assert_eq!(log.append(OpKind::String, b"k", b"1"), 1);
        assert_eq!(log.advance_to(100).unwrap(), Some(100));
        assert_eq!(log.advance_to(50).unwrap(), None, "already above");
        assert_eq!(log.append(OpKind::String, b"k", b"2"), 101);
        log.write_upto(101).unwrap();
        let mut r = log.reader();
        let ops: Vec<(u64, OpKind)> = std::iter::from_fn(|| r.next(101).unwrap())
            .map(|rec| (rec.lsn, rec.op))
            .collect();
        assert_eq!(
            ops,
            [
                (1, OpKind::String),
                (100, OpKind::Mark),
                (101, OpKind::String)
            ]
        );
        drop(log);
        // A jump with nothing after it is kept by its mark record too.
        let log = Log::open(&dir, 1 << 20).unwrap();
        assert_eq!(log.advance_to(500).unwrap(), Some(500));
        drop(log);
        let log = Log::open(&dir, 1 << 20).unwrap();
        assert_eq!(log.append(OpKind::Delete, b"k", b""), 501);
    }

    #[test]
    fn appends_reads_back_across_segments_and_reopens() {
        let dir = temp("segments");
        let log = Log::open(&dir, 100).unwrap();
        for i in 0..50u64 {
            let lsn = log.append(OpKind::String, format!("k{i}").as_bytes(), b"value");
            assert_eq!(lsn, i + 1);
            if i % 3 == 0 {
                log.write_upto(lsn).unwrap();
            }
        }
        log.write_upto(50).unwrap();
        assert_eq!(log.sync().unwrap(), 50);
        assert!(segments(&dir).unwrap().len() > 3);
        let mut r = log.reader();
        let mut seen = Vec::new();
        while let Some(rec) = r.next(50).unwrap() {
            seen.push(rec.lsn);
        }
        assert_eq!(seen, (1..=50).collect::<Vec<_>>());
        log.truncate(30).unwrap();
        drop(log);
        let log = Log::open(&dir, 100).unwrap();
        assert_eq!(log.last(), 50);
        let mut r = log.reader();
        r.skip_to(30, 50).unwrap();
        assert_eq!(r.next(50).unwrap().unwrap().lsn, 31);
        assert_eq!(log.append(OpKind::Delete, b"k", b""), 51);
    }

    #[test]
    fn reads_records_of_older_logs_checked_by_fnv() {
        // An older log's record: no flag in the op byte, FNV-1a over the body.
        let mut old = Vec::new();
        encode(&mut old, 7, 123, OpKind::String, b"k", b"v");
        old[24] &= !WORD_CHECK;
        let sum = fnv_check(&old[8..]);
        old[4..8].copy_from_slice(&sum.to_le_bytes());
        let (record, size) = decode(&old).expect("an older record reads");
        assert_eq!(
            (record.lsn, record.op, size),
            (7, OpKind::String, old.len())
        );
        assert_eq!((&record.key[..], &record.value[..]), (&b"k"[..], &b"v"[..]));
        // Either check fails on a changed byte, or on a flag flipped by a torn write.
        let mut bad = old.clone();
        bad[30] ^= 1;
        assert!(decode(&bad).is_none());
        let mut new = Vec::new();
        encode(&mut new, 7, 123, OpKind::String, b"k", b"v");
        assert!(decode(&new).is_some());
        for i in 8..new.len() {
            let mut bad = new.clone();
            bad[i] ^= 0x80;
            assert!(decode(&bad).is_none(), "byte {i} changed");
        }
        let mut zeroed = new.clone();
        zeroed[8..].fill(0);
        assert!(decode(&zeroed).is_none());
    }

    #[test]
    fn a_reader_sees_records_written_after_it_read_and_records_larger_than_a_chunk() {
        let dir = temp("chunks");
        let log = Log::open(&dir, 64 << 20).unwrap();
        let big = vec![7u8; READ_CHUNK * 2 + 5];
        log.append(OpKind::String, b"a", b"1");
        log.write_upto(1).unwrap();
        let mut r = log.reader();
        assert_eq!(r.next(9).unwrap().unwrap().lsn, 1);
        assert!(r.next(9).unwrap().is_none(), "nothing more yet");
        let at = r.position();
        log.append(OpKind::String, b"b", &big);
        log.append(OpKind::String, b"c", b"3");
        log.write_upto(3).unwrap();
        let got = r.next(9).unwrap().unwrap();
        assert_eq!((got.lsn, got.value.len()), (2, big.len()));
        assert!(r.next(2).unwrap().is_none(), "3 is past upto");
        assert_eq!(r.next(9).unwrap().unwrap().value, b"3");
        // Back to a position read before: the same records again.
        r.seek(at).unwrap();
        let lsns: Vec<u64> = std::iter::from_fn(|| r.next(9).unwrap())
            .map(|rec| rec.lsn)
            .collect();
        assert_eq!(lsns, [2, 3]);
    }

    #[test]
    fn cuts_a_torn_tail() {
        let dir = temp("torn");
        let log = Log::open(&dir, 1 << 20).unwrap();
        log.append(OpKind::String, b"a", b"1");
        log.append(OpKind::String, b"b", b"2");
        log.write_upto(2).unwrap();
        drop(log);
        let (_, path) = segments(&dir).unwrap().pop().unwrap();
        let len = std::fs::metadata(&path).unwrap().len();
        OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(len - 3)
            .unwrap();
        let log = Log::open(&dir, 1 << 20).unwrap();
        assert_eq!(log.last(), 1);
        assert_eq!(log.append(OpKind::String, b"b", b"3"), 2);
        log.write_upto(2).unwrap();
        let mut r = log.reader();
        assert_eq!(r.next(9).unwrap().unwrap().value, b"1");
        assert_eq!(r.next(9).unwrap().unwrap().value, b"3");
    }

    #[test]
    fn truncate_deletes_older_segments_once_applied_even_after_skipping_listings() {
        let dir = temp("older");
        let log = Log::open(&dir, 100).unwrap();
        for i in 1..=30u64 {
            log.append(OpKind::String, format!("k{i}").as_bytes(), b"value");
            log.write_upto(i).unwrap();
        }
        log.sync().unwrap();
        let before = segments(&dir).unwrap().len();
        assert!(before > 3);
        // Nothing applied: every segment stays, and the next truncate lists them again.
        log.truncate(0).unwrap();
        log.truncate(1).unwrap();
        assert_eq!(segments(&dir).unwrap().len(), before);
        // All but the current one applied: the older ones go.
        log.truncate(29).unwrap();
        assert_eq!(segments(&dir).unwrap().len(), 1);
        let mut r = log.reader();
        r.skip_to(29, 30).unwrap();
        assert_eq!(r.next(30).unwrap().unwrap().lsn, 30);
        // No rotation since: the current segment stays, record 30 not applied.
        log.truncate(29).unwrap();
        assert_eq!(segments(&dir).unwrap().len(), 1);
        // Full and applied: replaced by an empty one, the old one deleted.
        log.truncate(30).unwrap();
        assert_eq!(segments(&dir).unwrap().len(), 1);
        assert_eq!(log.bytes(), 0);
    }

    #[test]
    fn preallocating_keeps_the_segment_size_to_its_records() {
        let dir = temp("prealloc");
        let log = Log::open(&dir, 64 << 20).unwrap();
        for i in 1..=3u64 {
            log.append(OpKind::String, b"k", b"v");
            log.write_upto(i).unwrap();
        }
        let (_, path) = segments(&dir).unwrap().pop().unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.len(), log.bytes());
        drop(log);
        let log = Log::open(&dir, 64 << 20).unwrap();
        assert_eq!(log.last(), 3);
        assert_eq!(log.bytes(), meta.len());
    }

    #[test]
    fn an_applied_full_segment_is_replaced_and_numbering_goes_on() {
        let dir = temp("rolled");
        let log = Log::open(&dir, 1 << 20).unwrap();
        for i in 0..20u64 {
            log.append(OpKind::String, format!("k{i}").as_bytes(), b"value");
        }
        log.write_upto(20).unwrap();
        log.sync().unwrap();
        log.truncate(20).unwrap();
        assert!(log.bytes() > 0, "a segment under its size stays");
        log.set_segment_max(64);
        log.truncate(19).unwrap();
        assert!(log.bytes() > 0, "record 20 is not applied yet");
        let mut r = log.reader();
        log.truncate(20).unwrap();
        assert_eq!(log.bytes(), 0);
        assert_eq!(segments(&dir).unwrap().len(), 1);
        assert_eq!(log.append(OpKind::String, b"x", b"1"), 21);
        log.write_upto(21).unwrap();
        r.skip_to(20, 21).unwrap();
        assert_eq!(r.next(21).unwrap().unwrap().lsn, 21);
        drop(log);
        let log = Log::open(&dir, 64).unwrap();
        assert_eq!(log.last(), 21);
        drop(log);
        // Applied and empty: reopening numbers on from the empty segment's name.
        let log = Log::open(&dir, 64).unwrap();
        log.sync().unwrap();
        log.truncate(21).unwrap();
        drop(log);
        let log = Log::open(&dir, 64).unwrap();
        assert_eq!(log.last(), 21);
        assert_eq!(log.append(OpKind::Delete, b"k", b""), 22);
    }
}
