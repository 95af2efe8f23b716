//! Snapshots of the keyspace on disk: saving (SAVE, BGSAVE, the `save` rules, shutdown),
//! loading at start-up, and the state INFO `persistence` reports. The file format is in
//! `format` (docs/snapshot-format.md); the store copies and loads records
//! (`store::snapshot`), this module frames them into a file and back.
//!
//! Consistency: every shard is copied at one point in time under its shared lock (readers go
//! on, a writer of that shard waits for the copy); shards are copied one after another, so the
//! snapshot is a per-shard point in time, and its META block records each shard's change-log
//! position at its cut (docs/architecture.md, "Snapshots"). A primary's full sync copies a
//! shard in parts instead, each part at its own cut (META's part cuts), and the replica
//! replays the changes of a part's keys made after its cut (`stream_snapshot`,
//! docs/replication.md "Full sync").

pub mod format;
mod load;
mod save;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

pub use load::{LoadReport, PartCuts};
pub use save::SaveReport;

/// Where a snapshot is written and read: `dir/dbfilename`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub dir: PathBuf,
    pub file: String,
}

impl Target {
    pub fn path(&self) -> PathBuf {
        self.dir.join(&self.file)
    }
}

/// What to do with damaged blocks at load (`load-damaged`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Damaged {
    /// Refuse the whole file, naming the first damaged block.
    Refuse,
    /// Skip damaged blocks (logged) and load the rest.
    Skip,
}

/// Records a primary's full sync copies under a shard's lock at once: a writer of the shard
/// waits for about this many (~0.2 ms) instead of the whole shard (issue 14: ~40 000 records
/// a shard with 10 million keys).
pub const SYNC_PART: usize = 4096;

/// Redis's reply when a save is asked for while one runs.
pub const SAVE_IN_PROGRESS: &str = "ERR Background save already in progress";

fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The snapshot machinery of one server: the store (and SQL engine) it saves, and the counters
/// INFO `persistence` shows.
pub struct Persistence {
    store: Arc<store::Store>,
    sql: Option<Arc<sql::SqlEngine>>,
    /// A save (SAVE, BGSAVE, shutdown) runs: at most one at a time.
    saving: AtomicBool,
    /// The running save is a background one, started at this Unix millisecond.
    bgsave_started_ms: AtomicU64,
    bgsave_running: AtomicBool,
    /// BGSAVE SCHEDULE asked for a save while one ran: the cron starts it after.
    pub bgsave_scheduled: AtomicBool,
    last_save_unix: AtomicU64,
    /// The last background save failed (`rdb_last_bgsave_status:err`).
    last_bgsave_failed: AtomicBool,
    last_bgsave_secs: AtomicI64,
    saves: AtomicU64,
    last_copied: AtomicU64,
    /// The change count (`Store::change_count`) the last successful save included.
    changes_at_last_save: AtomicU64,
    loading: AtomicBool,
    loading_start_unix: AtomicU64,
    loading_total: AtomicU64,
    loading_loaded: AtomicU64,
    last_load_loaded: AtomicU64,
    last_load_expired: AtomicU64,
    /// The per-shard change positions of the last snapshot loaded at start (replication
    /// continues the change stream from a snapshot's cut).
    pub loaded_cut: Mutex<Option<Vec<u64>>>,
    /// On a replica, the replication id and offset of the last record applied; the link holds
    /// the lock while it applies one, a save for the whole of its dump (so a replica's
    /// snapshot matches an offset exactly, written into META). None on a primary.
    pub repl_mark: Mutex<Option<(String, u64)>>,
    /// The mark of the snapshot loaded at start, if it had one (a replica's restart).
    pub loaded_repl_mark: Mutex<Option<(String, u64)>>,
}

impl Persistence {
    pub fn new(store: Arc<store::Store>, sql: Option<Arc<sql::SqlEngine>>) -> Arc<Persistence> {
        Arc::new(Persistence {
            store,
            sql,
            saving: AtomicBool::new(false),
            bgsave_started_ms: AtomicU64::new(0),
            bgsave_running: AtomicBool::new(false),
            bgsave_scheduled: AtomicBool::new(false),
            last_save_unix: AtomicU64::new(unix_secs()),
            last_bgsave_failed: AtomicBool::new(false),
            last_bgsave_secs: AtomicI64::new(-1),
            saves: AtomicU64::new(0),
            last_copied: AtomicU64::new(0),
            changes_at_last_save: AtomicU64::new(0),
            loading: AtomicBool::new(false),
            loading_start_unix: AtomicU64::new(0),
            loading_total: AtomicU64::new(0),
            loading_loaded: AtomicU64::new(0),
            last_load_loaded: AtomicU64::new(0),
            last_load_expired: AtomicU64::new(0),
            loaded_cut: Mutex::new(None),
            repl_mark: Mutex::new(None),
            loaded_repl_mark: Mutex::new(None),
        })
    }

    /// Whether the dataset is being loaded (clients get `-LOADING`).
    #[inline]
    pub fn loading(&self) -> bool {
        self.loading.load(Relaxed)
    }

    /// Whether the last background save failed.
    #[inline]
    pub fn last_bgsave_failed(&self) -> bool {
        self.last_bgsave_failed.load(Relaxed)
    }

    pub fn bgsave_in_progress(&self) -> bool {
        self.bgsave_running.load(Relaxed)
    }

    pub fn last_save_time(&self) -> u64 {
        self.last_save_unix.load(Relaxed)
    }

    /// Changes to the keyspace (and SQL tables) since the last successful save.
    pub fn changes_since_last_save(&self) -> u64 {
        self.store
            .change_count()
            .saturating_sub(self.changes_at_last_save.load(Relaxed))
    }

    /// Takes the save slot, or says a save runs.
    fn begin(&self) -> Result<(), &'static str> {
        self.saving
            .compare_exchange(false, true, Relaxed, Relaxed)
            .map(drop)
            .map_err(|_| SAVE_IN_PROGRESS)
    }

    fn end(&self, result: &Result<SaveReport, String>, changes_before: u64) {
        if let Ok(report) = result {
            self.last_save_unix.store(unix_secs(), Relaxed);
            self.saves.fetch_add(1, Relaxed);
            self.last_copied.store(report.copied, Relaxed);
            self.changes_at_last_save.store(changes_before, Relaxed);
        }
        self.saving.store(false, Relaxed);
    }

    /// SAVE: writes the snapshot on this thread. `delay_us`: a pause per record saved (the
    /// `rdb-key-save-delay` test setting).
    pub fn save(&self, target: &Target, delay_us: u64) -> Result<SaveReport, String> {
        self.begin().map_err(str::to_string)?;
        let changes = self.store.change_count();
        let result = save::write_snapshot(self, target, delay_us);
        self.end(&result, changes);
        if result.is_ok() {
            // A successful save clears a failed background save's refusal of writes, as in
            // Redis.
            self.last_bgsave_failed.store(false, Relaxed);
        }
        result
    }

    /// BGSAVE: starts the save on a thread of its own and returns at once.
    pub fn bgsave(self: &Arc<Self>, target: Target, delay_us: u64) -> Result<(), &'static str> {
        self.begin()?;
        self.bgsave_running.store(true, Relaxed);
        self.bgsave_started_ms.store(store::now_ms(), Relaxed);
        let this = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name("cairn-bgsave".into())
            .spawn(move || {
                // Normal priority on purpose: the copy holds a shard's shared lock, and a
                // lower-priority thread preempted while holding it kept that shard's writers (and
                // the one I/O thread waiting on it) waiting (issue 19: p99 0.9 s at nice 10 on an
                // overloaded machine).
                let started = std::time::Instant::now();
                let changes = this.store.change_count();
                let result = save::write_snapshot(&this, &target, delay_us);
                this.last_bgsave_secs
                    .store(started.elapsed().as_secs() as i64, Relaxed);
                this.last_bgsave_failed.store(result.is_err(), Relaxed);
                match &result {
                    Ok(r) => tracing::info!(
                        "background saving terminated with success: {} keys, {} bytes in {:?} \
                         (longest shard lock {:?})",
                        r.records,
                        r.file_bytes,
                        started.elapsed(),
                        r.longest_hold
                    ),
                    Err(e) => tracing::error!("background saving error: {e}"),
                }
                this.bgsave_running.store(false, Relaxed);
                this.end(&result, changes);
            });
        if let Err(e) = spawned {
            tracing::error!("cannot start the background save thread: {e}");
            self.bgsave_running.store(false, Relaxed);
            self.saving.store(false, Relaxed);
            self.last_bgsave_failed.store(true, Relaxed);
            return Err("ERR cannot start the background save");
        }
        Ok(())
    }

    /// Waits (polling) until no save runs: a shutdown's save waits for a background one.
    pub fn wait_for_saves(&self) {
        while self.saving.load(Relaxed) {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// Loads the snapshot at `path` into the (empty) store, on `threads` threads, while
    /// `loading()` says so. `delay_us`: a pause per record loaded (`key-load-delay`).
    pub fn load(
        &self,
        path: &Path,
        damaged: Damaged,
        threads: usize,
        delay_us: u64,
    ) -> Result<LoadReport, String> {
        self.loading.store(true, Relaxed);
        self.loading_start_unix.store(unix_secs(), Relaxed);
        self.loading_loaded.store(0, Relaxed);
        let result = load::read_snapshot(self, path, damaged, threads, delay_us);
        if let Ok(report) = &result {
            self.last_load_loaded.store(report.records, Relaxed);
            self.last_load_expired.store(report.expired, Relaxed);
            *self.loaded_cut.lock() = Some(report.cut.clone());
            *self.loaded_repl_mark.lock() = report.repl.clone();
            // What was just loaded is what is on disk.
            self.changes_at_last_save
                .store(self.store.change_count(), Relaxed);
        }
        self.loading.store(false, Relaxed);
        result
    }

    /// Writes a snapshot to `out` as a save would (a replica's full sync streams it), with the
    /// replication mark `mark` in META when the data matches that offset exactly. Runs on the
    /// caller's thread, beside any save (it touches none of the save's state). Without a mark
    /// (a primary's full sync) the shards are copied in parts of at most [`SYNC_PART`]
    /// records, each with its own cut in META: the stream after a part's cut brings the
    /// changes of its keys made after it.
    pub fn stream_snapshot<W: std::io::Write>(
        &self,
        out: W,
        mark: Option<&(String, u64)>,
    ) -> std::io::Result<(W, SaveReport)> {
        let parts = mark.is_none().then_some(SYNC_PART);
        save::write_to(self, out, 0, mark, parts)
    }

    /// Marks the server as loading before its listeners open (the load itself starts after).
    pub fn set_loading(&self) {
        self.loading.store(true, Relaxed);
        self.loading_start_unix.store(unix_secs(), Relaxed);
    }

    /// The `# Persistence` fields that depend on snapshots, as `(name, value)` in Redis's
    /// order (INFO writes the AOF and fork fields around them).
    pub fn info_fields(&self) -> Vec<(&'static str, String)> {
        let mut f: Vec<(&'static str, String)> = Vec::with_capacity(24);
        let loading = self.loading();
        f.push(("loading", u8::from(loading).to_string()));
        f.push(("async_loading", "0".into()));
        if loading {
            let start = self.loading_start_unix.load(Relaxed);
            let total = self.loading_total.load(Relaxed);
            let loaded = self.loading_loaded.load(Relaxed);
            let perc = if total == 0 {
                0.0
            } else {
                loaded as f64 * 100.0 / total as f64
            };
            let elapsed = unix_secs().saturating_sub(start).max(1);
            let eta = if loaded == 0 {
                1
            } else {
                (total.saturating_sub(loaded) as f64 * elapsed as f64 / loaded as f64) as u64
            };
            f.push(("loading_start_time", start.to_string()));
            f.push(("loading_total_bytes", total.to_string()));
            f.push(("loading_rdb_used_mem", "0".into()));
            f.push(("loading_loaded_bytes", loaded.to_string()));
            f.push(("loading_loaded_perc", format!("{perc:.2}")));
            f.push(("loading_eta_seconds", eta.to_string()));
        }
        let running = self.bgsave_in_progress();
        f.push(("current_cow_peak", "0".into()));
        f.push(("current_cow_size", "0".into()));
        f.push(("current_cow_size_age", "0".into()));
        f.push(("current_fork_perc", "0.00".into()));
        f.push(("current_save_keys_processed", "0".into()));
        f.push(("current_save_keys_total", "0".into()));
        f.push((
            "rdb_changes_since_last_save",
            self.changes_since_last_save().to_string(),
        ));
        f.push(("rdb_bgsave_in_progress", u8::from(running).to_string()));
        f.push(("rdb_last_save_time", self.last_save_time().to_string()));
        let status = if self.last_bgsave_failed() {
            "err"
        } else {
            "ok"
        };
        f.push(("rdb_last_bgsave_status", status.into()));
        f.push((
            "rdb_last_bgsave_time_sec",
            self.last_bgsave_secs.load(Relaxed).to_string(),
        ));
        let current = if running {
            let started = self.bgsave_started_ms.load(Relaxed);
            (store::now_ms().saturating_sub(started) / 1000) as i64
        } else {
            -1
        };
        f.push(("rdb_current_bgsave_time_sec", current.to_string()));
        f.push(("rdb_saves", self.saves.load(Relaxed).to_string()));
        f.push((
            "rdb_last_cow_size",
            self.last_copied.load(Relaxed).to_string(),
        ));
        f.push((
            "rdb_last_load_keys_expired",
            self.last_load_expired.load(Relaxed).to_string(),
        ));
        f.push((
            "rdb_last_load_keys_loaded",
            self.last_load_loaded.load(Relaxed).to_string(),
        ));
        f
    }
}

impl Persistence {
    /// Whether a rule says to save now (and no save runs, and none failed less than 5
    /// seconds ago, as Redis retries).
    pub fn rules_due(&self, rules: &[(u64, u64)]) -> bool {
        if rules.is_empty() || self.saving.load(Relaxed) || self.loading() {
            return false;
        }
        let since = unix_secs().saturating_sub(self.last_save_time());
        let since_try = store::now_ms().saturating_sub(self.bgsave_started_ms.load(Relaxed));
        if self.last_bgsave_failed() && since_try < 5000 {
            return false;
        }
        let changes = self.changes_since_last_save();
        rules
            .iter()
            .any(|&(secs, min)| changes >= min && since >= secs)
    }
}
