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

pub(crate) use crate::Done;

pub(crate) enum Job {
    Request(Request, Done),
    /// Remove `table`'s expired rows. `basis` is the operation count to judge OPS by (the one a
    /// waiting statement saw); `waiter` is told when a statement waits for the removal.
    Expire {
        table: Arc<TableRules>,
        basis: Option<u64>,
        waiter: Option<mpsc::SyncSender<Result<(), SqlError>>>,
    },
}

impl Job {
    /// Fails the job because the engine is going away.
    pub fn abandon(self) {
        match self {
            Job::Request(_, done) => done(Err(SqlError::shutdown())),
            Job::Expire {
                waiter: Some(w), ..
            } => {
                let _ = w.send(Err(SqlError::shutdown()));
            }
            Job::Expire { .. } => {}
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
}

pub(crate) struct Shared {
    pub config: SqlConfig,
    /// `file:/cairn-sql-…?vfs=memdb`: one in-memory image that every connection opens.
    pub uri: String,
    pub clock: Clock,
    pub registry: Registry,
    pub counters: Counters,
    /// Bumped by the writer after each schema change.
    schema_epoch: AtomicU64,
    /// Bumped by the writer after each job that may have changed data.
    data_epoch: AtomicU64,
    pub readers: Queue<Job>,
    pub writer: Queue<Job>,
}

impl Shared {
    pub fn new(config: SqlConfig, uri: String) -> Shared {
        Shared {
            config,
            uri,
            clock: Clock::new(),
            registry: Registry::default(),
            counters: Counters::default(),
            schema_epoch: AtomicU64::new(0),
            data_epoch: AtomicU64::new(0),
            readers: Queue::new(),
            writer: Queue::new(),
        }
    }

    pub fn schema_epoch(&self) -> u64 {
        self.schema_epoch.load(Relaxed)
    }

    pub fn schema_changed(&self) {
        self.schema_epoch.fetch_add(1, Relaxed);
    }

    /// Acquire/release: a reader that sees a new epoch also sees the commit before it.
    pub fn data_epoch(&self) -> u64 {
        self.data_epoch.load(Acquire)
    }

    pub fn data_changed(&self) {
        self.data_epoch.fetch_add(1, AcqRel);
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
        }
    }
}
