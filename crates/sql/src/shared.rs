//! State every engine thread shares: configuration, clock, queues, expiry registry, counters.

use crate::queue::Queue;
use crate::registry::{Registry, TableRules};
use crate::{Request, SqlConfig, SqlError, SqlStats};
use std::sync::atomic::{
    AtomicI64, AtomicU64,
    Ordering::{AcqRel, Acquire, Relaxed},
};
use std::sync::{mpsc, Arc};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

pub(crate) use crate::{Done, Gone, Origin};

pub(crate) enum Job {
    /// A client's request, with the callback for its result, when the client can go away
    /// before its turn the test for that (such work is dropped, not run), and who sent it.
    Request(Request, Done, Option<Gone>, Origin),
    /// Remove `table`'s expired rows. `basis` is the operation count to judge OPS by (the one a
    /// waiting statement saw); `waiter` is told when a statement waits for the removal.
    Expire {
        table: Arc<TableRules>,
        basis: Option<u64>,
        waiter: Option<mpsc::SyncSender<Result<(), SqlError>>>,
    },
    /// Copy every table between two writer jobs (`crate::snapshot`).
    Snapshot(mpsc::SyncSender<Result<crate::SqlSnapshot, SqlError>>),
    /// Replace every table with a checked snapshot's (`crate::snapshot`).
    Restore(
        Box<crate::snapshot::Checked>,
        mpsc::SyncSender<Result<(), SqlError>>,
    ),
}

impl Job {
    /// Fails the job because the engine is going away.
    pub fn abandon(self) {
        match self {
            Job::Request(_, done, ..) => done(Err(SqlError::shutdown())),
            Job::Expire {
                waiter: Some(w), ..
            } => {
                let _ = w.send(Err(SqlError::shutdown()));
            }
            Job::Expire { .. } => {}
            Job::Snapshot(w) => {
                let _ = w.send(Err(SqlError::shutdown()));
            }
            Job::Restore(_, w) => {
                let _ = w.send(Err(SqlError::shutdown()));
            }
        }
    }
}

/// Milliseconds since the Unix epoch that never go backwards (wall time at start-up plus a
/// monotonic clock), so row ages are immune to clock steps. `skew` lets tests move time.
pub(crate) struct Clock {
    start: Instant,
    wall_ms: i64,
    skew_ms: AtomicI64,
}

impl Clock {
    fn new() -> Clock {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        Clock {
            start: Instant::now(),
            wall_ms: wall,
            skew_ms: AtomicI64::new(0),
        }
    }

    pub fn now_ms(&self) -> i64 {
        self.wall_ms + self.start.elapsed().as_millis() as i64 + self.skew_ms.load(Relaxed)
    }

    pub fn advance(&self, ms: i64) {
        self.skew_ms.fetch_add(ms, Relaxed);
    }
}

#[derive(Default)]
pub(crate) struct Counters {
    pub statements: AtomicU64,
    pub interrupted: AtomicU64,
    pub refused: AtomicU64,
    pub too_large: AtomicU64,
    pub oom: AtomicU64,
    pub expired_age: AtomicU64,
    pub expired_rows: AtomicU64,
    pub expired_ops: AtomicU64,
    pub data_bytes: AtomicU64,
    pub cancelled: AtomicU64,
    pub inline: AtomicU64,
    pub handed_off: AtomicU64,
    /// Statements' run times, per bucket of [`crate::LATENCY_BOUNDS_NS`] (the last unbounded).
    pub latency: [AtomicU64; crate::LATENCY_BOUNDS_NS.len() + 1],
    pub latency_nanos: AtomicU64,
}

impl Counters {
    /// Counts one statement that ran for `nanos`.
    pub fn statement_took(&self, nanos: u64) {
        let bucket = crate::LATENCY_BOUNDS_NS
            .iter()
            .position(|&bound| nanos <= bound)
            .unwrap_or(crate::LATENCY_BOUNDS_NS.len());
        self.latency[bucket].fetch_add(1, Relaxed);
        self.latency_nanos.fetch_add(nanos, Relaxed);
    }
}

/// SQL texts of statements that ran long lately (direct-mapped by hash, so bounded; a
/// collision only forgets one): they queue in the readers' heavy lane, which the express
/// reader leaves alone, so quick statements are not stuck behind them.
pub(crate) struct HeavyTexts {
    /// ahash, not SipHash: every inline query hashes its text here first.
    hasher: ahash::RandomState,
    slots: Vec<AtomicU64>,
}

/// A statement that ran at least this long is heavy next time.
pub(crate) const HEAVY: std::time::Duration = std::time::Duration::from_millis(10);

impl HeavyTexts {
    fn new() -> HeavyTexts {
        HeavyTexts {
            hasher: Default::default(),
            slots: (0..4096).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    pub fn key(&self, sql: &[u8]) -> u64 {
        self.hasher.hash_one(sql) | 1
    }

    fn slot(&self, key: u64) -> &AtomicU64 {
        &self.slots[(key % self.slots.len() as u64) as usize]
    }

    pub fn is_heavy(&self, key: u64) -> bool {
        self.slot(key).load(Relaxed) == key
    }

    /// Records how long the statement with `key` ran.
    pub fn note(&self, key: u64, took: std::time::Duration) {
        let slot = self.slot(key);
        if took >= HEAVY {
            slot.store(key, Relaxed);
        } else if slot.load(Relaxed) == key {
            slot.store(0, Relaxed);
        }
    }
}

pub(crate) struct Shared {
    pub config: SqlConfig,
    /// `file:/cairn-sql-…?vfs=memdb`: one in-memory image that every connection opens.
    pub uri: String,
    pub clock: Clock,
    pub registry: Registry,
    pub counters: Counters,
    pub heavy: HeavyTexts,
    /// Bumped by the writer after each schema change.
    schema_epoch: AtomicU64,
    /// Bumped by the writer after each job that may have changed data.
    data_epoch: AtomicU64,
    /// Number of the last change the writer made ([`crate::SqlChange`]), counted whether or not
    /// a sink wants it: the server's sink numbers every change in the store's SQL log, so this is
    /// that log's sequence number (a snapshot's position). Written by the writer thread only.
    change_seq: AtomicU64,
    /// A replica's tables: rows are removed only by the primary's statements, never by the
    /// expiry rules here (`SqlEngine::set_expiry_paused`).
    pub expiry_paused: std::sync::atomic::AtomicBool,
    pub readers: Queue<Job>,
    pub writer: Queue<Job>,
    /// Set by `SqlEngine::shutdown`: no more inline statements (`crate::inline`).
    pub closed: std::sync::atomic::AtomicBool,
    /// Told of every change the writer makes (`crate::changes`), once set.
    pub changes: std::sync::OnceLock<Arc<dyn crate::ChangeSink>>,
}

impl Shared {
    /// Tells the change sink, if it wants changes now, of the change `describe` makes.
    pub fn tell<'a>(&self, describe: impl FnOnce() -> crate::SqlChange<'a>) {
        self.change_seq.fetch_add(1, Relaxed);
        if let Some(sink) = self.changes.get().filter(|s| s.wants()) {
            sink.changed(&describe());
        }
    }

    pub fn new(config: SqlConfig, uri: String) -> Shared {
        Shared {
            config,
            uri,
            clock: Clock::new(),
            registry: Registry::default(),
            counters: Counters::default(),
            heavy: HeavyTexts::new(),
            schema_epoch: AtomicU64::new(0),
            data_epoch: AtomicU64::new(0),
            change_seq: AtomicU64::new(0),
            expiry_paused: std::sync::atomic::AtomicBool::new(false),
            readers: Queue::new(),
            writer: Queue::new(),
            closed: std::sync::atomic::AtomicBool::new(false),
            changes: std::sync::OnceLock::new(),
        }
    }

    /// Acquire/release: a reader that sees a new epoch also sees the schema committed before it.
    pub fn schema_epoch(&self) -> u64 {
        self.schema_epoch.load(Acquire)
    }

    pub fn schema_changed(&self) {
        self.schema_epoch.fetch_add(1, AcqRel);
    }

    /// Acquire/release: a reader that sees a new epoch also sees the commit before it.
    pub fn data_epoch(&self) -> u64 {
        self.data_epoch.load(Acquire)
    }

    pub fn data_changed(&self) {
        self.data_epoch.fetch_add(1, AcqRel);
    }

    pub fn change_seq(&self) -> u64 {
        self.change_seq.load(Relaxed)
    }

    /// After a restore: the next change is numbered `position + 1`.
    pub fn set_change_seq(&self, position: u64) {
        self.change_seq.store(position, Relaxed);
    }

    pub fn timeout_message(&self) -> String {
        format!(
            "interrupted: statement ran longer than --sql-timeout ({} ms)",
            self.config.timeout.as_millis()
        )
    }

    pub fn stats(&self) -> SqlStats {
        let c = &self.counters;
        SqlStats {
            memory_used: unsafe { rusqlite::ffi::sqlite3_memory_used() }.max(0) as u64,
            heap_limit: crate::guard::heap_limit(self.config.max_memory),
            cancelled: c.cancelled.load(Relaxed),
            data_bytes: c.data_bytes.load(Relaxed),
            max_memory: self.config.max_memory,
            statements: c.statements.load(Relaxed),
            interrupted: c.interrupted.load(Relaxed),
            refused: c.refused.load(Relaxed),
            results_too_large: c.too_large.load(Relaxed),
            oom_refused: c.oom.load(Relaxed),
            expired_age: c.expired_age.load(Relaxed),
            expired_rows: c.expired_rows.load(Relaxed),
            expired_ops: c.expired_ops.load(Relaxed),
            tables_with_rules: self.registry.len() as u64,
            queued: (self.readers.len() + self.writer.len()) as u64,
            inline: c.inline.load(Relaxed),
            handed_off: c.handed_off.load(Relaxed),
            latency: c.latency.each_ref().map(|b| b.load(Relaxed)),
            latency_nanos: c.latency_nanos.load(Relaxed),
        }
    }
}
