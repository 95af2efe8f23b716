//! cairn's write-behind engine: mappings of key prefixes to database tables, each with its
//! durable log under `dir/wb/<name>/`, a flusher thread that applies the log to the database
//! (SQLite or PostgreSQL) in order per key, coalesced and batched, and its dead-letter list.
//!
//! It knows nothing of sockets or commands: the server's change tap hands it each change of a
//! mapped key ([`Engine::capture`], under the key's shard lock), and the thread that ran the
//! command then makes the change durable enough for the reply ([`Engine::commit`]); for a
//! write-through mapping the reply then waits for the database (`through`).
//! docs/writebehind.md describes the design and what it guarantees.

pub mod config;
pub mod db;
mod dead;
mod flusher;
pub mod log;
mod pg;
pub mod read;
mod sqlite;
mod through;

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};

pub use config::{Database, MappingConfig, Mode, ValueShape};
pub use db::{encode_row, encode_sql_row, Cell};
pub use dead::{DeadLetter, DEAD_MAX};
pub use log::OpKind;
pub use read::{Loaded, Miss, Sink, Waiter};
pub use through::{Done, Failed, Undo};

/// When the log is fsynced (Redis AOF's `appendfsync` meanings).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fsync {
    /// Before the reply (the reply waits for a group fsync).
    Always,
    /// Once a second: a crash of the machine (not of cairn) may lose the last second.
    Everysec,
}

/// What a write to a mapped key meets when the log is at `max_bytes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnFull {
    /// `-BUSY write-behind queue full`.
    Error,
    /// The write waits (its I/O thread with it) until the flusher frees room.
    Block,
}

#[derive(Clone, Debug)]
pub struct EngineSettings {
    /// The logs live in `dir/wb/`.
    pub dir: PathBuf,
    pub fsync: Fsync,
    /// Bytes one mapping's log may hold (files and unwritten records).
    pub max_bytes: u64,
    pub on_full: OnFull,
}

/// A mapping's counters (WB.INFO).
#[derive(Default)]
pub struct Stats {
    pub rows_written: AtomicU64,
    pub batches: AtomicU64,
    pub retries: AtomicU64,
    /// The last log number applied to the database.
    pub checkpoint: AtomicU64,
    /// Capture time (µs since the epoch) of the oldest record not yet applied; 0: none.
    pub oldest_micros: AtomicU64,
    pub last_error: Mutex<Option<String>>,
}

pub struct Mapping {
    pub config: MappingConfig,
    pub log: log::Log,
    pub stats: Stats,
    stop: AtomicBool,
    /// Wakes the flusher from its sleeps (stop).
    nap: (Mutex<()>, parking_lot::Condvar),
    dead: Mutex<dead::DeadList>,
    /// Read-through's loads, remembered misses and pending keys (`read_through` only).
    pub reads: read::Reads,
    /// Write-through: the records whose writers wait for the database.
    waiters: through::Waiters,
}

impl Mapping {
    /// A read found `key` (of this mapping, which reads through) missing in the cache.
    pub fn miss(&self, key: &[u8], waiter: Waiter) -> Miss {
        let checkpoint = self.stats.checkpoint.load(Relaxed);
        self.reads.miss(key, checkpoint, waiter)
    }

    fn stopped(&self) -> bool {
        self.stop.load(Relaxed)
    }

    fn through(&self) -> bool {
        self.config.mode == Mode::Through
    }

    /// Sleeps `d` (or until stopped); a waiting write-through reply whose deadline passes
    /// meanwhile is answered on time.
    fn sleep(&self, d: Duration) {
        let end = Instant::now() + d;
        loop {
            let now = Instant::now();
            if now >= end || self.stopped() {
                return;
            }
            let wake = self.waiters.next_deadline().map_or(end, |dl| dl.min(end));
            if wake > now {
                let mut g = self.nap.0.lock();
                if !self.stopped() {
                    self.nap.1.wait_until(&mut g, wake);
                }
            }
            self.expire_waiters();
        }
    }

    /// Answers the write-through replies whose deadline passed: the database did not commit
    /// in time (down, or slow); their records stay in the log and are applied later.
    fn expire_waiters(&self) {
        if self.waiters.len() == 0 {
            return;
        }
        let last = self.stats.last_error.lock().clone();
        let why = format!(
            "not committed within {}ms ({}); the write stays queued and will be applied",
            self.config.through_timeout.as_millis(),
            last.as_deref().unwrap_or("the database is slow")
        );
        self.waiters.expire(Some(Instant::now()), &why);
    }

    /// A letter the database now holds (committed with its checkpoint).
    fn dead_letter(&self, letter: DeadLetter) {
        self.dead.lock().add(letter);
    }

    /// A change that cannot be written back at all (a mapped SQL table without a one-column
    /// primary key): logged, counted and kept in the dead-letter list; the cache has it.
    pub fn refuse(&self, key: &[u8], why: &str) {
        tracing::error!(
            "write-behind {}: a change is not written back: {why}",
            self.config.name
        );
        *self.stats.last_error.lock() = Some(why.to_string());
        // Not a change of the log (it has no number): kept in memory only, as letter 0 (the
        // latest such refusal).
        self.dead.lock().add(DeadLetter {
            lsn: 0,
            key: key.to_vec(),
            value: Vec::new(),
            reason: why.to_string(),
            time_ms: log::now_micros() / 1000,
        });
    }

    /// Records not yet applied to the database.
    pub fn queue_len(&self) -> u64 {
        self.log
            .last()
            .saturating_sub(self.stats.checkpoint.load(Relaxed))
    }
}

/// A key's record in the store's record encoding (`store::snapshot::encode_record`); None:
/// the key is absent.
type Record = Option<Vec<u8>>;

thread_local! {
    /// What the thread's commands captured, in one place: a mapped write reaches it several
    /// times (capture, commit, the batch's end), one thread-local access each.
    static THREAD: RefCell<Captures> = const {
        RefCell::new(Captures {
            logs: Vec::new(),
            through: None,
            prev: Vec::new(),
            depth: 0,
            fsync: false,
        })
    };
}

/// A mapping's log as the thread's commands captured it: the last number the running command
/// captured (`command`) and the last one its [`LogBatch`] holds to be written (`batch`); 0:
/// none. The entry outlives the command and the batch (it is left with both numbers 0), so
/// that the next write of the mapping finds it instead of cloning the mapping's handle and
/// dropping it again each time; a removed mapping's entry is dropped at the thread's next
/// batch end (or its next commit outside a batch).
struct Captured {
    mapping: Arc<Mapping>,
    command: u64,
    batch: u64,
}

struct Captures {
    logs: Vec<Captured>,
    /// Write-through: the group of the records the command captured (each waits on its
    /// mapping's list from its capture on).
    through: Option<Arc<through::Group>>,
    /// Write-through: the records of the command's keys before it ran (noted by the server
    /// before the command; a capture takes the key's and leaves the new record for a later
    /// write of the same key in the command, e.g. in EXEC).
    prev: Vec<(Vec<u8>, Record)>,
    /// How deep the thread's open [`LogBatch`]es nest: within one, records committed whose
    /// replies need nothing more than a log write and, under `wb-fsync always`, its fsync (no
    /// write-through) wait to be written once, when the batch ends, instead of one `write`
    /// (and fsync) per command.
    depth: u32,
    /// The batch's replies also wait for an fsync (`wb-fsync always`).
    fsync: bool,
}

/// Records captured per mapping: (mapping, its last number captured).
type CapturedLogs = Vec<(Arc<Mapping>, u64)>;

/// One connection's batch of requests (the server opens it around each read's worth of
/// commands): the log writes its commands need before their replies are made once, at its
/// end, before any of the batch's replies is sent (Redis writes its AOF once per event-loop
/// turn). A pipeline of 100 SETs so costs one `write`, not 100; under `wb-fsync always`
/// also one fsync, not 100: [`LogBatch::finish`] hands the batch's replies a [`Wait`].
pub struct LogBatch {
    ended: bool,
}

pub fn log_batch() -> LogBatch {
    THREAD.with(|t| t.borrow_mut().depth += 1);
    LogBatch { ended: false }
}

impl LogBatch {
    /// Ends the batch: writes its records to the logs' files. Under `wb-fsync always`,
    /// returns what the batch's replies must wait for (the fsync of those records); None when
    /// they may go now (or an outer batch still runs).
    pub fn finish(mut self) -> Option<Wait> {
        self.ended = true;
        end_batch()
    }
}

impl Drop for LogBatch {
    /// A batch left without `finish` (unwinding) still writes its records and, under
    /// `always`, fsyncs them before its replies can go.
    fn drop(&mut self) {
        if !self.ended {
            if let Some(wait) = end_batch() {
                wait.wait();
            }
        }
    }
}

fn end_batch() -> Option<Wait> {
    THREAD.with(|t| {
        let mut t = t.borrow_mut();
        t.depth -= 1;
        if t.depth > 0 {
            return None;
        }
        let fsync = std::mem::take(&mut t.fsync);
        let mut synced = Vec::new();
        for c in t.logs.iter_mut().filter(|c| c.batch > 0) {
            write_log(&c.mapping, c.batch);
            if fsync {
                synced.push((c.mapping.clone(), c.batch));
            }
            c.batch = 0;
        }
        t.logs.retain(|c| c.command > 0 || !c.mapping.stopped());
        (!synced.is_empty()).then_some(Wait {
            fsync: Some(synced),
            group: None,
        })
    })
}

/// Writes `m`'s records up to number `lsn` to its log file.
fn write_log(m: &Mapping, lsn: u64) {
    if let Err(e) = m.log.write_upto(lsn) {
        // The record stays buffered and the next write or the flusher retries; the
        // reply still goes (the cache has the value; the log is behind).
        tracing::error!("write-behind {}: writing the log: {e}", m.config.name);
    }
}

/// Why a write to a mapped key may not run now.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    Full,
}

pub struct Engine {
    settings: RwLock<EngineSettings>,
    /// Copies of the settings every mapped write reads (`settings` holds them all): one
    /// load each instead of a lock and a copy of the whole.
    always: AtomicBool,
    max_bytes: AtomicU64,
    mappings: RwLock<Vec<Arc<Mapping>>>,
    /// Whether any mapping exists (one load on the hot path).
    active: AtomicBool,
    /// Whether any mapping reads through (one load on a read's path).
    reading: AtomicBool,
    /// Whether any mapping is write-through (whose writers `admit` must name).
    through: AtomicBool,
    /// Whether a log may be at `wb-max-bytes`: set by a capture that took a log there, by a
    /// smaller bound and by a new mapping; cleared by `admit` when it finds every log below.
    /// While it is clear and no mapping is write-through, `admit` lets a write by at once
    /// (no mapping lookup on a mapped SET's path). A capture that finds its log at the bound
    /// sets it again, so a wrong clear lets at most one more record per writer in, as the
    /// check-then-append of the slow path does.
    maybe_full: AtomicBool,
    /// Where read-through loads store what they found (the server's store).
    sink: RwLock<Option<Arc<dyn Sink>>>,
}

impl Engine {
    pub fn new(settings: EngineSettings) -> Arc<Engine> {
        Arc::new(Engine {
            always: AtomicBool::new(settings.fsync == Fsync::Always),
            max_bytes: AtomicU64::new(settings.max_bytes),
            settings: RwLock::new(settings),
            mappings: RwLock::new(Vec::new()),
            active: AtomicBool::new(false),
            reading: AtomicBool::new(false),
            through: AtomicBool::new(false),
            maybe_full: AtomicBool::new(true),
            sink: RwLock::new(None),
        })
    }

    /// Sets where read-through loads store their records (before a mapping reads through).
    pub fn set_sink(&self, sink: Arc<dyn Sink>) {
        *self.sink.write() = Some(sink);
    }

    /// Whether any mapping reads through.
    #[inline]
    pub fn reads_through(&self) -> bool {
        self.reading.load(Relaxed)
    }

    fn update_flags(&self, mappings: &[Arc<Mapping>]) {
        self.active.store(!mappings.is_empty(), Relaxed);
        let reading = mappings.iter().any(|m| m.config.read_through);
        self.reading.store(reading, Relaxed);
        self.through
            .store(mappings.iter().any(|m| m.through()), Relaxed);
        // A mapping added may resume a log already at the bound.
        self.maybe_full.store(true, Relaxed);
    }

    pub fn settings(&self) -> EngineSettings {
        self.settings.read().clone()
    }

    pub fn set_fsync(&self, f: Fsync) {
        self.settings.write().fsync = f;
        self.always.store(f == Fsync::Always, Relaxed);
    }
    /// A smaller bound applies to the next writes: a log above it refuses (or holds) writes
    /// until the flusher has brought it below.
    pub fn set_max_bytes(&self, b: u64) {
        self.settings.write().max_bytes = b;
        self.max_bytes.store(b, Relaxed);
        self.maybe_full.store(true, Relaxed);
        for m in self.mappings.read().iter() {
            m.log.set_segment_max(segment_size(b));
        }
    }
    pub fn set_on_full(&self, o: OnFull) {
        self.settings.write().on_full = o;
    }

    #[inline]
    pub fn active(&self) -> bool {
        self.active.load(Relaxed)
    }

    fn log_dir(&self, name: &str) -> PathBuf {
        self.settings.read().dir.join("wb").join(name)
    }

    /// Adds a mapping: opens (or resumes) its log, numbers it above what the database holds
    /// (`rebase`), and starts its flusher and syncer.
    pub fn add(&self, config: MappingConfig) -> Result<(), String> {
        self.conflict(&config)?;
        let sink = self.sink.read().clone();
        if config.read_through && sink.is_none() {
            return Err("read_through needs the server's store (not set)".into());
        }
        let dir = self.log_dir(&config.name);
        let max = self.settings.read().max_bytes;
        let log = log::Log::open(&dir, segment_size(max))
            .map_err(|e| format!("write-behind log {}: {e}", dir.display()))?;
        // Outside the mappings' lock: it may wait for the database (bounded).
        rebase(&config, &log);
        let mut mappings = self.mappings.write();
        self.conflict_in(&mappings, &config)?;
        let mapping = Arc::new(Mapping {
            config,
            log,
            stats: Stats::default(),
            stop: AtomicBool::new(false),
            nap: (Mutex::new(()), parking_lot::Condvar::new()),
            dead: Mutex::new(dead::DeadList::default()),
            reads: read::Reads::default(),
            waiters: through::Waiters::default(),
        });
        if let (true, Some(sink)) = (mapping.config.read_through, sink) {
            for i in 0..read::LOADERS {
                let (m, sink) = (mapping.clone(), sink.clone());
                std::thread::Builder::new()
                    .name(format!("wb-load-{}-{i}", mapping.config.name))
                    .spawn(move || read::run_loader(m, sink))
                    .map_err(|e| e.to_string())?;
            }
        }
        let m = mapping.clone();
        std::thread::Builder::new()
            .name(format!("wb-flush-{}", mapping.config.name))
            .spawn(move || flusher::run(m))
            .map_err(|e| e.to_string())?;
        let m = mapping.clone();
        std::thread::Builder::new()
            .name(format!("wb-sync-{}", mapping.config.name))
            .spawn(move || {
                while !m.stopped() {
                    m.sleep(Duration::from_secs(1));
                    if let Err(e) = m.log.sync() {
                        tracing::error!("write-behind {}: fsync: {e}", m.config.name);
                    }
                }
            })
            .map_err(|e| e.to_string())?;
        mappings.push(mapping);
        self.update_flags(&mappings);
        Ok(())
    }

    /// Why `config` cannot join the mappings, if it cannot.
    fn conflict(&self, config: &MappingConfig) -> Result<(), String> {
        self.conflict_in(&self.mappings.read(), config)
    }

    fn conflict_in(&self, mappings: &[Arc<Mapping>], config: &MappingConfig) -> Result<(), String> {
        if mappings.iter().any(|m| m.config.name == config.name) {
            return Err(format!("mapping '{}' exists", config.name));
        }
        if let Some(table) = &config.sql_table {
            if let Some(m) = mappings
                .iter()
                .find(|m| m.config.sql_table.as_ref() == Some(table))
            {
                return Err(format!(
                    "sql_table '{table}' is mapped by '{}'",
                    m.config.name
                ));
            }
            return Ok(());
        }
        if let Some(m) = mappings.iter().find(|m| {
            m.config.sql_table.is_none()
                && (m.config.prefix.starts_with(&config.prefix)
                    || config.prefix.starts_with(&m.config.prefix))
        }) {
            return Err(format!(
                "prefix '{}' overlaps mapping '{}' ('{}')",
                config.prefix, m.config.name, m.config.prefix
            ));
        }
        Ok(())
    }

    /// Numbers every mapping's next change above what its database holds. Called when this
    /// node becomes a primary: its logs were silent while it was a replica, and the database
    /// holds the old primary's (higher) numbers, which would make the version guard skip the
    /// new primary's changes.
    pub fn rebase_all(&self) {
        for m in self.mappings() {
            rebase(&m.config, &m.log);
        }
    }

    /// Removes a mapping: its flusher stops; its log stays on disk (adding the mapping again
    /// resumes it from the database's checkpoint).
    pub fn remove(&self, name: &str) -> bool {
        let mut mappings = self.mappings.write();
        let Some(i) = mappings.iter().position(|m| m.config.name == name) else {
            return false;
        };
        let m = mappings.remove(i);
        m.stop.store(true, Relaxed);
        m.nap.1.notify_all();
        let _ = m.log.sync();
        m.reads.fail_all("the write-behind mapping was removed");
        m.waiters.expire(
            None,
            "the mapping was removed; the write stays in its log until it is added again",
        );
        self.update_flags(&mappings);
        true
    }

    pub fn mappings(&self) -> Vec<Arc<Mapping>> {
        self.mappings.read().clone()
    }

    pub fn get(&self, name: &str) -> Option<Arc<Mapping>> {
        self.mappings
            .read()
            .iter()
            .find(|m| m.config.name.eq_ignore_ascii_case(name))
            .cloned()
    }

    /// The mapping `key` belongs to, if any.
    #[inline]
    pub fn mapped(&self, key: &[u8]) -> Option<Arc<Mapping>> {
        if !self.active() {
            return None;
        }
        mapping_of(&self.mappings.read(), key).cloned()
    }

    /// The mapping of cairn's SQL table `table` (lower-case), if any.
    pub fn mapped_table(&self, table: &str) -> Option<Arc<Mapping>> {
        if !self.active() {
            return None;
        }
        self.mappings
            .read()
            .iter()
            .find(|m| m.config.sql_table.as_deref() == Some(table))
            .cloned()
    }

    /// Whether SQL writes may run now: not while an `sql_table` mapping's log is full. (Which
    /// tables a statement writes is known only once the engine compiled it, so any full
    /// `sql_table` log holds back every SQL.EXEC; key mappings are not concerned.)
    pub fn admit_sql(&self) -> Result<(), Refusal> {
        let max = self.settings.read().max_bytes;
        let full = self
            .mappings
            .read()
            .iter()
            .any(|m| m.config.sql_table.is_some() && m.log.bytes() >= max);
        if full {
            Err(Refusal::Full)
        } else {
            Ok(())
        }
    }

    /// Buffers a change of a row of `m`'s SQL table (key: its primary key as text; value:
    /// [`db::encode_sql_row`]'s key columns and other columns) and notes it for
    /// [`Engine::commit`], as [`Engine::capture`] does for a key.
    pub fn capture_row(&self, m: &Arc<Mapping>, key: &[u8], op: OpKind, value: &[u8]) {
        let lsn = m.log.append(op, key, value);
        self.note_bytes(m);
        note_captured(m, lsn);
    }

    /// After an append: a log at its bound makes `admit` look again.
    #[inline]
    fn note_bytes(&self, m: &Mapping) {
        if m.log.bytes() >= self.max_bytes.load(Relaxed) {
            self.maybe_full.store(true, Relaxed);
        }
    }

    /// Whether [`Engine::admit`] may have anything to decide for some key: a log may be at its
    /// bound, or a mapping is write-through. False in the usual case, when a write command's
    /// keys need not be looked at.
    #[inline]
    pub fn keys_need_admission(&self) -> bool {
        self.maybe_full.load(Relaxed) || self.through.load(Relaxed)
    }

    /// Checked before a write command runs: a write to a key whose mapping's log is full is
    /// refused (or waits, `wb-on-full block`), so the cache never gets ahead of the log.
    /// Admitted, says whether the key's mapping is write-through (the caller then notes the
    /// key's record with [`Engine::note_prev`]).
    pub fn admit(&self, key: &[u8]) -> Result<bool, Refusal> {
        if !self.active() {
            return Ok(false);
        }
        if !self.keys_need_admission() {
            return Ok(false);
        }
        // Room in the log: decided under the mappings' read lock, with no copy of the
        // mapping's handle or of the settings.
        let m = {
            let mappings = self.mappings.read();
            let max = self.max_bytes.load(Relaxed);
            if mappings.iter().all(|m| m.log.bytes() < max) {
                self.maybe_full.store(false, Relaxed);
            }
            let Some(m) = mapping_of(&mappings, key) else {
                return Ok(false);
            };
            if m.log.bytes() < self.max_bytes.load(Relaxed) {
                return Ok(m.through());
            }
            m.clone()
        };
        // The settings are read on every turn: CONFIG SET may change them while a write waits.
        loop {
            let s = self.settings();
            if m.log.bytes() < s.max_bytes {
                break;
            }
            if s.on_full == OnFull::Error || m.stopped() {
                return Err(Refusal::Full);
            }
            let mut g = m.log.wake.0.lock();
            m.log.wake.1.wait_for(&mut g, Duration::from_millis(100));
        }
        Ok(m.through())
    }

    /// Notes `key`'s record (the store's record encoding; None: absent) before the command
    /// that may change it runs: a write the database refuses puts it back.
    pub fn note_prev(&self, key: &[u8], record: Option<Vec<u8>>) {
        THREAD.with(|t| {
            let p = &mut t.borrow_mut().prev;
            if !p.iter().any(|(k, _)| k == key) {
                p.push((key.to_vec(), record));
            }
        });
    }

    /// Called by the change tap, under `key`'s shard lock: buffers the change in its
    /// mapping's log (numbered in the store's order) and notes it for [`Engine::commit`].
    /// `after` gives the key's new record (encoded) and CAS, None for a delete: asked only
    /// for a write-through mapping.
    pub fn capture(
        &self,
        key: &[u8],
        op: OpKind,
        value: &[u8],
        after: impl FnOnce() -> Option<(Vec<u8>, u64)>,
    ) {
        if !self.active() {
            return;
        }
        let mappings = self.mappings.read();
        let Some(m) = mapping_of(&mappings, key) else {
            return;
        };
        if !m.through() {
            let lsn = m.log.append(op, key, value);
            self.note_bytes(m);
            if m.config.read_through {
                m.reads.captured(key, lsn, op == OpKind::Delete);
            }
            return note_captured(m, lsn);
        }
        let now = after();
        let (prev, group) = THREAD.with(|t| {
            let t = &mut *t.borrow_mut();
            let prev = t.prev.iter_mut().find(|(k, _)| k == key).map(|slot| {
                let next = now.as_ref().map(|(record, _)| record.clone());
                std::mem::replace(&mut slot.1, next)
            });
            let group = t.through.get_or_insert_with(|| through::Group::new(0));
            group.add_one();
            (prev, group.clone())
        });
        let undo = Undo {
            key: key.to_vec(),
            prev,
            cas: now.map(|(_, cas)| cas),
        };
        // The waiter is on the list before the record can be written (the log's pending lock
        // is held), so the flusher never settles a record nobody waits for yet.
        let deadline = Instant::now() + m.config.through_timeout;
        let lsn = m.log.append_then(op, key, value, |lsn| {
            m.waiters.add(through::Waiter {
                lsn,
                deadline,
                undo,
                group,
            })
        });
        self.note_bytes(m);
        if m.config.read_through {
            m.reads.captured(key, lsn, op == OpKind::Delete);
        }
        note_captured(m, lsn);
    }

    /// After a command ran on this thread: writes what it captured to the logs' files (a group
    /// write). Returns what must still be fsynced before the reply under `wb-fsync always`:
    /// `None` when the reply may go now.
    pub fn commit(&self) -> Option<Wait> {
        let always = self.always.load(Relaxed);
        let (captured, group) = THREAD.with(|t| {
            let t = &mut *t.borrow_mut();
            t.prev.clear();
            let group = t.through.take();
            if group.is_none() && t.depth > 0 {
                // Within a batch (the usual case): the records wait for the batch's end.
                for c in t.logs.iter_mut().filter(|c| c.command > 0) {
                    c.batch = c.batch.max(c.command);
                    c.command = 0;
                    t.fsync |= always;
                }
                return (Vec::new(), None);
            }
            let captured: CapturedLogs = t
                .logs
                .iter_mut()
                .filter(|c| c.command > 0)
                .map(|c| (c.mapping.clone(), std::mem::take(&mut c.command)))
                .collect();
            // A thread that commits outside batches (the SQL writer) drops its entries of
            // removed mappings here.
            if t.depth == 0 {
                t.logs.retain(|c| c.batch > 0 || !c.mapping.stopped());
            }
            (captured, group)
        });
        if captured.is_empty() {
            return None;
        }
        for (m, lsn) in &captured {
            write_log(m, *lsn);
        }
        let fsync = always.then_some(captured);
        if fsync.is_none() && group.is_none() {
            return None;
        }
        Some(Wait { fsync, group })
    }

    /// Whether the thread has captured changes not yet committed (a command's own check).
    pub fn has_captured() -> bool {
        THREAD.with(|t| t.borrow().logs.iter().any(|c| c.command > 0))
    }

    /// Reports of every mapping, or of `name`.
    pub fn info(&self, name: Option<&str>) -> Option<Vec<(String, Report)>> {
        let list = match name {
            Some(n) => vec![self.get(n)?],
            None => self.mappings(),
        };
        Some(
            list.iter()
                .map(|m| (m.config.name.clone(), m.report()))
                .collect(),
        )
    }

    /// The mapping's dead letters, newest first, at most `count` (WB.DLQ LIST).
    pub fn dead_letters(&self, name: &str, count: usize) -> Option<Vec<DeadLetter>> {
        Some(self.get(name)?.dead.lock().newest(count))
    }

    /// Takes the letters numbered `lsns` (all: None) off the list: at once from WB.DLQ's
    /// view, from the database at the flusher's next turn. Returns the letters taken (a
    /// number with no letter is passed over). WB.DLQ DROP, and RETRY after it re-captured
    /// the letters' keys.
    pub fn take_dead_letters(&self, name: &str, lsns: Option<&[u64]>) -> Option<Vec<DeadLetter>> {
        Some(self.get(name)?.dead.lock().take(lsns))
    }
}

/// The key mapping (not an `sql_table` one) whose prefix `key` has.
fn mapping_of<'a>(mappings: &'a [Arc<Mapping>], key: &[u8]) -> Option<&'a Arc<Mapping>> {
    mappings
        .iter()
        .find(|m| m.config.sql_table.is_none() && key.starts_with(m.config.prefix.as_bytes()))
}

fn note_captured(m: &Arc<Mapping>, lsn: u64) {
    THREAD.with(|t| {
        let logs = &mut t.borrow_mut().logs;
        match logs.iter_mut().find(|c| Arc::ptr_eq(&c.mapping, m)) {
            Some(c) => c.command = lsn,
            None => logs.push(Captured {
                mapping: m.clone(),
                command: lsn,
                batch: 0,
            }),
        }
    });
}

/// Numbers `log`'s next change above the database's checkpoint and key versions for the
/// mapping, so the version guard lets it through (a log that did not write the database:
/// a promoted replica's, a new node's, a log lost with its directory). A database that
/// cannot be asked (bounded by the connect timeout) gives the current time in µs as the floor
/// instead: a log numbering one per change stays below it unless it ran a million changes a
/// second since it began (docs/writebehind.md).
fn rebase(config: &MappingConfig, log: &log::Log) {
    let floor = match db::connect(config).and_then(|mut d| d.floor(&config.name)) {
        Ok(f) => f,
        Err(e) => {
            tracing::warn!(
                "write-behind {}: cannot read the database's numbers ({e}); numbering from the clock",
                config.name
            );
            log::now_micros()
        }
    };
    if floor > log.last() {
        match log.advance_to(floor) {
            Ok(_) => tracing::info!(
                "write-behind {}: log numbering continues above {floor}",
                config.name
            ),
            Err(e) => tracing::error!("write-behind {}: marking the log: {e}", config.name),
        }
    }
}

/// Segment size for a log bound: eight segments or more per bound, so that applied ones free
/// room well before it.
fn segment_size(max_bytes: u64) -> u64 {
    (max_bytes / 8).clamp(4 << 10, 64 << 20)
}

/// A mapping's WB.INFO fields, in order: (name, value).
pub type Report = Vec<(String, String)>;

/// What a reply must wait for: the fsync of the command's records under `wb-fsync always`,
/// and the database's commit of its write-through records.
pub struct Wait {
    fsync: Option<Vec<(Arc<Mapping>, u64)>>,
    group: Option<Arc<through::Group>>,
}

impl Wait {
    /// Waits on this thread until the records are on disk under `wb-fsync always` (for a
    /// caller that replies right after, as the SQL writer does; `sql_table` mappings are never
    /// write-through).
    pub fn wait(self) {
        for (m, lsn) in self.fsync.iter().flatten() {
            while m.log.synced() < *lsn {
                if let Err(e) = m.log.sync() {
                    tracing::error!("write-behind {}: fsync: {e}", m.config.name);
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
    }

    /// Calls `done` once the reply may go, with the write-through records that failed (none
    /// under write-behind); never on the caller's thread while it must wait: fsyncs run on
    /// the `wb-fsync` thread (a group fsync: one covers every writer's records), commits are
    /// reported by the mappings' flushers.
    pub fn then(self, done: impl FnOnce(Vec<Failed>) + Send + 'static) {
        let Some(captured) = self.fsync else {
            if let Some(group) = self.group {
                group.then(Box::new(done));
            }
            return;
        };
        let group = self.group;
        let run = move || {
            for (m, lsn) in &captured {
                while m.log.synced() < *lsn {
                    if let Err(e) = m.log.sync() {
                        tracing::error!("write-behind {}: fsync: {e}", m.config.name);
                        std::thread::sleep(Duration::from_millis(100));
                    }
                }
            }
            match group {
                Some(group) => group.then(Box::new(done)),
                None => done(Vec::new()),
            }
        };
        syncer().send(Box::new(run));
    }
}

/// The one thread that runs fsync waits for `always` (in order: a later one often finds its
/// records already synced by an earlier one's group fsync).
struct Syncer {
    tx: Mutex<std::sync::mpsc::Sender<Box<dyn FnOnce() + Send>>>,
}

impl Syncer {
    fn send(&self, job: Box<dyn FnOnce() + Send>) {
        let _ = self.tx.lock().send(job);
    }
}

fn syncer() -> &'static Syncer {
    static ONE: std::sync::OnceLock<Syncer> = std::sync::OnceLock::new();
    ONE.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel::<Box<dyn FnOnce() + Send>>();
        std::thread::Builder::new()
            .name("wb-fsync".into())
            .spawn(move || {
                while let Ok(job) = rx.recv() {
                    job();
                }
            })
            .expect("spawn the write-behind fsync thread");
        Syncer { tx: Mutex::new(tx) }
    })
}

impl Mapping {
    fn report(&self) -> Vec<(String, String)> {
        let oldest = self.stats.oldest_micros.load(Relaxed);
        let age_ms = if oldest == 0 || self.queue_len() == 0 {
            0
        } else {
            log::now_micros().saturating_sub(oldest) / 1000
        };
        let mut out: Vec<(String, String)> = self
            .config
            .to_pairs()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        let stat = |k: &str, v: u64| (k.to_string(), v.to_string());
        out.push(stat("queue", self.queue_len()));
        out.push(stat("bytes", self.log.bytes()));
        out.push(stat("oldest_age_ms", age_ms));
        out.push(stat("last_lsn", self.log.last()));
        out.push(stat("checkpoint", self.stats.checkpoint.load(Relaxed)));
        out.push(stat("rows_written", self.stats.rows_written.load(Relaxed)));
        out.push(stat("batches", self.stats.batches.load(Relaxed)));
        out.push(stat("retries", self.stats.retries.load(Relaxed)));
        out.push(stat("fsyncs", self.log.fsyncs()));
        out.push(stat("dead_letters", self.dead.lock().len() as u64));
        if self.config.read_through {
            let r = &self.reads.stats;
            out.push(stat("loads", r.loads.load(Relaxed)));
            out.push(stat("load_hits", r.load_hits.load(Relaxed)));
            out.push(stat("load_misses", r.load_misses.load(Relaxed)));
            out.push(stat("load_errors", r.load_errors.load(Relaxed)));
            out.push(stat("load_joins", r.load_joins.load(Relaxed)));
            out.push(stat("negative_hits", r.negative_hits.load(Relaxed)));
            out.push(stat("negatives", self.reads.negatives() as u64));
        }
        out.push(stat("waiting", self.waiters.len() as u64));
        out.push((
            "last_error".into(),
            self.stats.last_error.lock().clone().unwrap_or_default(),
        ));
        out
    }
}

/// The directory of a mapping's log (tests, tools).
pub fn log_dir(dir: &Path, name: &str) -> PathBuf {
    dir.join("wb").join(name)
}
