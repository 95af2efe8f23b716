//! cairn's SQL engine: sandboxed in-memory SQLite tables with per-table expiry rules (the
//! SQLcached face, issue 5). It knows nothing of sockets or RESP: the server turns commands
//! into [`Request`]s and [`Reply`]s back into protocol replies.
//!
//! Design (chosen by measurement, see `examples/designs.rs`): one in-memory database in
//! SQLite's `memdb` VFS, opened by a pool of reader connections and one writer connection, each
//! owned by its own thread. memdb gives every connection its own pager over one shared image,
//! so readers of the same table run in parallel; SQLite allows one writer at a time anyway, so
//! writes, DDL and expiry go through the single writer thread. Callers never run SQL: they
//! queue a request and get a callback on an engine thread. Query texts that ran long queue in a
//! heavy lane that one extra *express* reader never takes, so quick queries are not stuck
//! behind them; requests of clients that went away are dropped ([`SqlEngine::submit_for`]).
//! No statement can overflow an engine thread's stack or outgrow the heap limit (`guard.rs`).
//!
//! Semantics the server relies on:
//! - Arguments arrive as bytes; [`Value::from_bulk`] binds valid UTF-8 as TEXT, anything else
//!   as BLOB. `CAST(? AS BLOB)` forces a blob; column affinity turns numeric text into numbers.
//! - `Exec` takes a `;`-separated script; its `?` parameters are consumed in order. `Query`
//!   takes one statement (it may write, e.g. `INSERT … RETURNING`). A transaction must begin
//!   and end within one request: connections are pooled.
//! - Expiry: AGE and ROWS count from a row's last write (INSERT, UPDATE or REPLACE); OPS counts
//!   statements touching the table. Rows go lazily (before a statement on the table) and in the
//!   background (`sweep_interval`, 1000 rows per transaction). Per-row metadata lives in
//!   `_cairn_meta_<table>(rid, seq, written_ms, op_stamp)`, readable with
//!   `SELECT t.*, m.written_ms FROM t JOIN _cairn_meta_t AS m ON m.rid = t.rowid`; rules are in
//!   `_cairn_expiry`; `cairn_now()` is the engine clock in ms. `_cairn_*` is read-only to users.
//! - Errors carry the client-facing text in [`SqlError::message`]; [`ErrorKind`] classifies it.
//! - Snapshots ([`SqlEngine::snapshot`], [`SqlEngine::restore`], `snapshot.rs`): every table with
//!   its rules and row metadata, at an exact position in the change numbering ([`ChangeSink`]).

mod catalog;
mod changes;
mod conn;
mod error;
mod exec;
mod expiry;
mod guard;
mod inline;
mod pace;
mod queue;
mod registry;
mod rows;
mod sandbox;
mod shared;
mod snapshot;
mod snapshot_format;
mod types;
mod worker;

pub use changes::{ChangeSink, SqlChange};
pub use error::{ErrorKind, SqlError};
pub use rows::RowChanges;
pub use snapshot::SqlSnapshot;
pub use types::{ColumnInfo, ExpiryRules, Reply, Request, SqlStats, Value};

/// Upper bounds (nanoseconds, inclusive) of the statement latency histogram's buckets
/// ([`SqlStats::latency`]): 50 µs (a point lookup) to 10 s (past any sane `--sql-timeout`).
pub const LATENCY_BOUNDS_NS: [u64; 12] = [
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    10_000_000,
    50_000_000,
    250_000_000,
    1_000_000_000,
    5_000_000_000,
    10_000_000_000,
];

use conn::Conn;
use parking_lot::Mutex;
use shared::{Job, Shared};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::{self, JoinHandle};
use std::time::Duration;

/// Engine settings; the server maps its `--sql-*` flags onto these.
#[derive(Clone, Debug)]
pub struct SqlConfig {
    /// `--sql-timeout`: longest a statement may run (or wait for a lock).
    pub timeout: Duration,
    /// `--sql-max-result`: largest result, in bytes (payload plus 16 per value).
    pub max_result_bytes: usize,
    /// `--sql-maxmemory`: largest database image in bytes (0 = unlimited); at the limit writes
    /// fail with [`ErrorKind::OutOfMemory`] while reads and deletes keep working. SQLite's whole
    /// heap is capped at this plus half of it (at least 32 MiB): a statement needing more (a huge
    /// temporary b-tree) fails with [`ErrorKind::OutOfMemory`].
    pub max_memory: u64,
    /// Reader threads (connections). The writer thread and one express reader (which runs
    /// only statements not known to be heavy) come on top.
    pub threads: usize,
    /// How often the writer looks for expired rows in the background.
    pub sweep_interval: Duration,
    /// Step budget of a query run on the caller's thread ([`SqlEngine::query_inline`]), in
    /// SQLite virtual-machine steps; 0: every query goes to the engine's threads.
    pub inline_steps: u32,
}

/// Default [`SqlConfig::inline_steps`]: a point lookup takes ~30 steps, a short index range a
/// few hundred; 1,000 steps are ~20–40 µs of work.
pub const INLINE_STEPS: u32 = 1000;

impl Default for SqlConfig {
    fn default() -> SqlConfig {
        let cores = thread::available_parallelism().map_or(2, |n| n.get());
        SqlConfig {
            timeout: Duration::from_secs(1),
            max_result_bytes: 64 << 20,
            max_memory: 0,
            threads: cores.clamp(2, 8),
            sweep_interval: Duration::from_millis(250),
            inline_steps: INLINE_STEPS,
        }
    }
}

/// Completion callback of [`SqlEngine::submit`].
pub type Done = Box<dyn FnOnce(Result<Reply, SqlError>) + Send>;

/// Tells whether the client behind a request has gone (disconnected): its queued work is then
/// dropped instead of run, and `done` gets an [`ErrorKind::Cancelled`] error.
pub type Gone = Box<dyn Fn() -> bool + Send>;

/// Who sent a request (the server's client id; 0 for the engine's owner itself), as the change
/// sink is told ([`SqlChange`]).
pub type Origin = u64;

pub struct SqlEngine {
    shared: Arc<Shared>,
    /// Tells this engine's inline reader connections from another engine's (`inline.rs`).
    id: u64,
    threads: Mutex<Vec<JoinHandle<()>>>,
    interrupts: Vec<rusqlite::InterruptHandle>,
}

/// Distinguishes the memdb images of engines in one process (tests start many).
static NEXT_DB: AtomicU64 = AtomicU64::new(0);

impl SqlEngine {
    pub fn new(mut config: SqlConfig) -> Result<Arc<SqlEngine>, SqlError> {
        config.threads = config.threads.max(1);
        // Before the first connection: SQLite must not be initialised yet.
        guard::install();
        let id = NEXT_DB.fetch_add(1, Ordering::Relaxed);
        let uri = format!("file:/cairn-sql-{}-{id}?vfs=memdb", std::process::id());
        let shared = Arc::new(Shared::new(config, uri));
        let cfg = &shared.config;
        // The writer opens first and creates the image; it lives while any connection is open.
        let writer = Conn::open(&shared)?;
        let cap = if cfg.max_memory > 0 {
            cfg.max_memory.min(i64::MAX as u64) as i64
        } else {
            1 << 50
        };
        if !conn::set_size_limit(&writer.db, cap) {
            return Err(SqlError::new(
                ErrorKind::Sqlite,
                "cannot set the SQL memory limit",
            ));
        }
        guard::set_heap_limit(cfg.max_memory);
        writer.internal(|db| db.execute_batch(expiry::INIT))?;
        // The writer touches pages all over the image (tables, indexes, row metadata); a bigger
        // cache saves re-reading them from the memdb image. Readers keep SQLite's 2 MB: every
        // write invalidates their caches anyway (inline readers: see `inline.rs`).
        let cache_kib = conn::big_cache_kib(cfg);
        writer.internal(|db| db.pragma_update(None, "cache_size", -(cache_kib as i64)))?;
        // The last reader is the express one.
        let readers = (0..=cfg.threads)
            .map(|_| Conn::open(&shared))
            .collect::<Result<Vec<_>, _>>()?;
        let mut interrupts = vec![writer.db.get_interrupt_handle()];
        interrupts.extend(readers.iter().map(|c| c.db.get_interrupt_handle()));
        let mut threads = Vec::new();
        let s = shared.clone();
        threads.push(spawn("sql-writer".into(), move || {
            worker::writer(s, writer)
        })?);
        for (i, conn) in readers.into_iter().enumerate() {
            let s = shared.clone();
            let express = i == cfg.threads;
            let name = match express {
                true => "sql-express".to_string(),
                false => format!("sql-reader-{i}"),
            };
            threads.push(spawn(name, move || worker::reader(s, conn, express))?);
        }
        Ok(Arc::new(SqlEngine {
            shared,
            id,
            threads: Mutex::new(threads),
            interrupts,
        }))
    }

    /// Runs `request` on an engine thread and calls `done` there with the result. Never blocks
    /// beyond queueing. After [`shutdown`](Self::shutdown), `done` is called at once, on the
    /// caller's thread, with an [`ErrorKind::Shutdown`] error.
    pub fn submit(&self, request: Request, done: Done) {
        self.submit_for(request, 0, None, done)
    }

    /// [`submit`](Self::submit) for a client that may go away while the request queues:
    /// `gone` is asked before the request runs, and a gone client's request is dropped.
    /// Queries known to run long (by their SQL text) wait in the readers' heavy lane. `origin`
    /// names the sender to the change sink.
    pub fn submit_for(&self, request: Request, origin: Origin, gone: Option<Gone>, done: Done) {
        let shared = &self.shared;
        let pushed = match &request {
            Request::Exec { .. } | Request::Expire { rules: Some(_), .. } => shared
                .writer
                .push(Job::Request(request, done, gone, origin)),
            Request::Query { sql, .. } if shared.heavy.is_heavy(shared.heavy.key(sql)) => shared
                .readers
                .push_heavy(Job::Request(request, done, gone, origin)),
            _ => shared
                .readers
                .push(Job::Request(request, done, gone, origin)),
        };
        if let Err(job) = pushed {
            job.abandon();
        }
    }

    /// Runs an `SQL.QUERY` on the calling thread, on a reader connection the thread keeps for
    /// this engine, if it is read-only and short (within [`SqlConfig::inline_steps`], meeting
    /// no writer and no rows to expire first): its result, or None when the caller must
    /// [`submit_for`](Self::submit_for) it as usual (nothing of the attempt then shows or
    /// counts; the engine runs it from the start). Never blocks; the budget bounds its time.
    /// With the result comes how long the statement ran (as the latency histogram counts it),
    /// so the caller need not read the clock again for its own records. See `inline.rs`.
    pub fn query_inline(
        &self,
        sql: &[u8],
        params: &[Value],
    ) -> Option<(Result<Reply, SqlError>, Duration)> {
        inline::query(&self.shared, self.id, sql, params)
    }

    /// Installs (once) the sink told of every change the writer makes.
    pub fn set_change_sink(&self, sink: Arc<dyn ChangeSink>) {
        let _ = self.shared.changes.set(sink);
    }

    /// Pauses (or resumes) the tables' expiry rules: a replica's rows go only when its
    /// primary's deletions arrive, as its keys do.
    pub fn set_expiry_paused(&self, paused: bool) {
        self.shared
            .expiry_paused
            .store(paused, std::sync::atomic::Ordering::Relaxed);
    }

    /// Blocking convenience over [`submit`](Self::submit) (tests, tools).
    pub fn run(&self, request: Request) -> Result<Reply, SqlError> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.submit(
            request,
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        );
        rx.recv().unwrap_or_else(|_| Err(SqlError::shutdown()))
    }

    /// Every SQL table with its rows, schema (indexes, triggers, views too), expiry rules and
    /// per-row metadata, as of one point in the SQL change log: `position` is the number of the
    /// last change included (every change numbered up to it is in, none after). Taken on the
    /// writer thread between two statements: readers go on, writes wait for the copy of the
    /// database image. Blocks the caller until done; refused on an engine thread (a change
    /// sink's callback), where it would wait for itself. See `snapshot.rs`.
    pub fn snapshot(&self) -> Result<SqlSnapshot, SqlError> {
        self.not_on_engine_thread("snapshot")?;
        let (tx, rx) = mpsc::sync_channel(1);
        if let Err(job) = self.shared.writer.push(Job::Snapshot(tx)) {
            job.abandon();
        }
        let mut snap = rx.recv().unwrap_or_else(|_| Err(SqlError::shutdown()))?;
        // The checksum costs the writer nothing: computed here, after the copy.
        snapshot_format::seal(&mut snap.bytes);
        Ok(snap)
    }

    /// Replaces every table (rows, schema, expiry rules, row metadata) with those of a
    /// [`snapshot`](Self::snapshot)'s bytes; the next change is numbered `position + 1` (the
    /// change sink is told, [`ChangeSink::restored`]). Meant for start-up, before clients are
    /// served. Bytes that are not a snapshot this engine reads (another file, a newer format
    /// version, truncated, damaged) get an [`ErrorKind::BadSnapshot`] error and change nothing.
    /// Holds one extra copy of the bytes while it runs.
    pub fn restore(&self, bytes: &[u8]) -> Result<(), SqlError> {
        self.not_on_engine_thread("restore")?;
        let checked = snapshot::check(bytes)?;
        let (tx, rx) = mpsc::sync_channel(1);
        if let Err(job) = self.shared.writer.push(Job::Restore(Box::new(checked), tx)) {
            job.abandon();
        }
        rx.recv().unwrap_or_else(|_| Err(SqlError::shutdown()))
    }

    fn not_on_engine_thread(&self, what: &str) -> Result<(), SqlError> {
        let me = thread::current().id();
        if self.threads.lock().iter().any(|t| t.thread().id() == me) {
            return Err(SqlError::new(
                ErrorKind::BadArgument,
                format!("SQL {what} cannot run on an SQL engine thread"),
            ));
        }
        Ok(())
    }

    pub fn stats(&self) -> SqlStats {
        self.shared.stats()
    }

    /// Stops the engine: queued requests fail with [`ErrorKind::Shutdown`], running statements
    /// are interrupted, threads are joined. Idempotent.
    pub fn shutdown(&self) {
        self.shared.closed.store(true, Ordering::Relaxed);
        for job in self
            .shared
            .readers
            .close()
            .into_iter()
            .chain(self.shared.writer.close())
        {
            job.abandon();
        }
        for h in &self.interrupts {
            h.interrupt();
        }
        let me = thread::current().id();
        for t in self.threads.lock().drain(..) {
            // A callback may drop the last handle on an engine thread: never join oneself.
            if t.thread().id() != me {
                let _ = t.join();
            }
        }
    }

    /// Whether SQLite's allocator carries the stack-depth guard (see `guard.rs`); false only
    /// if something initialised SQLite in this process before the first engine started.
    #[doc(hidden)]
    pub fn stack_guard_active(&self) -> bool {
        guard::active()
    }

    /// Moves the engine clock forward (tests of AGE expiry without sleeping).
    #[doc(hidden)]
    pub fn advance_clock(&self, by: Duration) {
        self.shared.clock.advance(by.as_millis() as i64);
    }
}

impl Drop for SqlEngine {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn spawn(name: String, f: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>, SqlError> {
    thread::Builder::new()
        .name(name)
        .stack_size(guard::STACK_SIZE)
        .spawn(move || {
            pace::batch_thread();
            guard::arm_thread();
            f()
        })
        .map_err(|e| SqlError::new(ErrorKind::Sqlite, format!("cannot start SQL thread: {e}")))
}
