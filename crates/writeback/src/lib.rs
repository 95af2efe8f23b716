//! cairn's write-behind engine: mappings of key prefixes to database tables, each with its
//! durable log under `dir/wb/<name>/`, a flusher thread that applies the log to the database
//! (SQLite or PostgreSQL) in order per key, coalesced and batched, and its dead-letter list.
//!
//! It knows nothing of sockets or commands: the server's change tap hands it each change of a
//! mapped key ([`Engine::capture`], under the key's shard lock), and the thread that ran the
//! command then makes the change durable enough for the reply ([`Engine::commit`]).
//! docs/writebehind.md describes the design and what it guarantees.

pub mod config;
pub mod db;
mod dead;
mod flusher;
pub mod log;
mod pg;
mod sqlite;

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};

pub use config::{Database, MappingConfig, Mode, ValueShape};
pub use dead::{DeadLetter, DEAD_MAX};
pub use log::OpKind;

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
}

impl Mapping {
    fn stopped(&self) -> bool {
        self.stop.load(Relaxed)
    }

    fn sleep(&self, d: Duration) {
        let mut g = self.nap.0.lock();
        if !self.stopped() {
            self.nap.1.wait_for(&mut g, d);
        }
    }

    /// A letter the database now holds (committed with its checkpoint).
    fn dead_letter(&self, letter: DeadLetter) {
        self.dead.lock().add(letter);
    }

    /// Records not yet applied to the database.
    pub fn queue_len(&self) -> u64 {
        self.log
            .last()
            .saturating_sub(self.stats.checkpoint.load(Relaxed))
    }
}

thread_local! {
    /// What the tap captured for the command this thread runs: (mapping, last number).
    static CAPTURED: RefCell<Vec<(Arc<Mapping>, u64)>> = const { RefCell::new(Vec::new()) };
}

/// Why a write to a mapped key may not run now.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    Full,
}

pub struct Engine {
    settings: RwLock<EngineSettings>,
    mappings: RwLock<Vec<Arc<Mapping>>>,
    /// Whether any mapping exists (one load on the hot path).
    active: AtomicBool,
}

impl Engine {
    pub fn new(settings: EngineSettings) -> Arc<Engine> {
        Arc::new(Engine {
            settings: RwLock::new(settings),
            mappings: RwLock::new(Vec::new()),
            active: AtomicBool::new(false),
        })
    }

    pub fn settings(&self) -> EngineSettings {
        self.settings.read().clone()
    }

    pub fn set_fsync(&self, f: Fsync) {
        self.settings.write().fsync = f;
    }
    /// A smaller bound applies to the next writes: a log above it refuses (or holds) writes
    /// until the flusher has brought it below.
    pub fn set_max_bytes(&self, b: u64) {
        self.settings.write().max_bytes = b;
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

    /// Adds a mapping: opens (or resumes) its log and starts its flusher and syncer.
    pub fn add(&self, config: MappingConfig) -> Result<(), String> {
        let mut mappings = self.mappings.write();
        if mappings.iter().any(|m| m.config.name == config.name) {
            return Err(format!("mapping '{}' exists", config.name));
        }
        if let Some(m) = mappings.iter().find(|m| {
            m.config.prefix.starts_with(&config.prefix)
                || config.prefix.starts_with(&m.config.prefix)
        }) {
            return Err(format!(
                "prefix '{}' overlaps mapping '{}' ('{}')",
                config.prefix, m.config.name, m.config.prefix
            ));
        }
        let dir = self.log_dir(&config.name);
        let max = self.settings.read().max_bytes;
        let log = log::Log::open(&dir, segment_size(max))
            .map_err(|e| format!("write-behind log {}: {e}", dir.display()))?;
        let mapping = Arc::new(Mapping {
            config,
            log,
            stats: Stats::default(),
            stop: AtomicBool::new(false),
            nap: (Mutex::new(()), parking_lot::Condvar::new()),
            dead: Mutex::new(dead::DeadList::default()),
        });
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
        self.active.store(true, Relaxed);
        Ok(())
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
        self.active.store(!mappings.is_empty(), Relaxed);
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
        self.mappings
            .read()
            .iter()
            .find(|m| key.starts_with(m.config.prefix.as_bytes()))
            .cloned()
    }

    /// Checked before a write command runs: a write to a key whose mapping's log is full is
    /// refused (or waits, `wb-on-full block`), so the cache never gets ahead of the log.
    pub fn admit(&self, key: &[u8]) -> Result<(), Refusal> {
        let Some(m) = self.mapped(key) else {
            return Ok(());
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
        Ok(())
    }

    /// Called by the change tap, under `key`'s shard lock: buffers the change in its
    /// mapping's log (numbered in the store's order) and notes it for [`Engine::commit`].
    pub fn capture(&self, key: &[u8], op: OpKind, value: &[u8]) {
        let Some(m) = self.mapped(key) else {
            return;
        };
        let lsn = m.log.append(op, key, value);
        CAPTURED.with(|c| {
            let mut c = c.borrow_mut();
            match c.iter_mut().find(|(x, _)| Arc::ptr_eq(x, &m)) {
                Some(entry) => entry.1 = lsn,
                None => c.push((m, lsn)),
            }
        });
    }

    /// After a command ran on this thread: writes what it captured to the logs' files (a group
    /// write). Returns what must still be fsynced before the reply under `wb-fsync always`:
    /// `None` when the reply may go now.
    pub fn commit(&self) -> Option<Durable> {
        let captured = CAPTURED.with(|c| std::mem::take(&mut *c.borrow_mut()));
        if captured.is_empty() {
            return None;
        }
        for (m, lsn) in &captured {
            if let Err(e) = m.log.write_upto(*lsn) {
                // The record stays buffered and the next write or the flusher retries; the
                // reply still goes (the cache has the value; the log is behind).
                tracing::error!("write-behind {}: writing the log: {e}", m.config.name);
            }
        }
        (self.settings.read().fsync == Fsync::Always).then_some(Durable { captured })
    }

    /// Whether the thread has captured changes not yet committed (a command's own check).
    pub fn has_captured() -> bool {
        CAPTURED.with(|c| !c.borrow().is_empty())
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

/// Segment size for a log bound: eight segments or more per bound, so that applied ones free
/// room well before it.
fn segment_size(max_bytes: u64) -> u64 {
    (max_bytes / 8).clamp(4 << 10, 64 << 20)
}

/// A mapping's WB.INFO fields, in order: (name, value).
pub type Report = Vec<(String, String)>;

/// Changes a reply must wait for under `wb-fsync always`.
pub struct Durable {
    captured: Vec<(Arc<Mapping>, u64)>,
}

impl Durable {
    /// Fsyncs (a group fsync: one covers every writer's records) and then calls `done`; on
    /// a thread of its own, so that the caller's thread goes on.
    pub fn then(self, done: impl FnOnce() + Send + 'static) {
        let run = move || {
            for (m, lsn) in &self.captured {
                while m.log.synced() < *lsn {
                    if let Err(e) = m.log.sync() {
                        tracing::error!("write-behind {}: fsync: {e}", m.config.name);
                        std::thread::sleep(Duration::from_millis(100));
                    }
                }
            }
            done();
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
        out.push(stat("dead_letters", self.dead.lock().len() as u64));
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
