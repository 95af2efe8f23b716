//! Opening and hardening one SQLite connection to the engine's shared in-memory database.
//!
//! Every connection is owned by one engine thread for its whole life, so the per-statement
//! deadline lives in a thread-local: SQLite's progress and busy handlers run on that thread.

use crate::guard;
use crate::sandbox::{self, AuthState};
use crate::shared::Shared;
use parking_lot::Mutex;
use rusqlite::functions::FunctionFlags;
use rusqlite::limits::Limit;
use rusqlite::{ffi, Connection, OpenFlags};
use std::cell::Cell;
use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::sync::Arc;
use std::time::{Duration, Instant};

thread_local! {
    static DEADLINE: Cell<Option<Instant>> = const { Cell::new(None) };
    static TIMED_OUT: Cell<bool> = const { Cell::new(false) };
    /// Until when the running statement may yield the CPU without a budget (see `crate::pace`).
    static YIELD_FREELY: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Arms the statement deadline for this thread until dropped.
pub(crate) struct Deadline;

impl Deadline {
    pub fn arm(timeout: Duration) -> Deadline {
        if crate::inline::active() {
            // The step budget bounds an inline statement (`crate::inline`), far below any
            // timeout; no clock read, no pacing.
            return Deadline;
        }
        let now = Instant::now();
        DEADLINE.set(Some(now + timeout));
        YIELD_FREELY.set(Some(now + timeout / crate::pace::FREE_PART));
        crate::pace::statement_start();
        TIMED_OUT.set(false);
        Deadline
    }

    /// Whether the last interruption on this thread came from the deadline (not a shutdown).
    pub fn fired() -> bool {
        TIMED_OUT.get()
    }
}

impl Drop for Deadline {
    fn drop(&mut self) {
        DEADLINE.set(None);
        YIELD_FREELY.set(None);
    }
}

/// SQLite's progress handler: paces the thread (see [`crate::pace`]) and enforces the deadline;
/// an inline statement (`crate::inline`) is held to its step budget instead, and never yields
/// the I/O thread it runs on.
fn on_progress() -> bool {
    if crate::inline::active() {
        return crate::inline::on_progress() || past_deadline();
    }
    let now = Instant::now();
    crate::pace::on_progress(now, YIELD_FREELY.get().is_some_and(|t| now < t));
    past_deadline_at(now)
}

fn past_deadline() -> bool {
    past_deadline_at(Instant::now())
}

fn past_deadline_at(now: Instant) -> bool {
    match DEADLINE.get() {
        Some(t) if now >= t => {
            TIMED_OUT.set(true);
            true
        }
        _ => false,
    }
}

/// SQLite's busy handler: memdb file locks are plain counters, so a reader that meets a
/// writer (or the writer that waits for readers to drain) must poll. Yield first (the holder is
/// usually a microsecond from done), then sleep in growing steps, never past the deadline.
fn on_busy(n: c_int) -> bool {
    if crate::inline::active() {
        // An I/O thread never waits: the engine runs the statement instead.
        crate::inline::abandon(crate::inline::Why::Busy);
        return false;
    }
    if past_deadline() {
        return false;
    }
    if n < 16 {
        std::thread::yield_now();
    } else {
        let us = (10 * (n as u64 - 15)).min(500);
        std::thread::sleep(Duration::from_micros(us));
    }
    // Without a deadline (engine start-up) give up after a few seconds.
    DEADLINE.get().is_some() || n < 10_000
}

/// A user statement's footprint, learned from the authorizer while it was prepared.
#[derive(Clone, Debug, Default)]
pub(crate) struct Analysis {
    /// Tables it reads or writes (lower-case), directly or through views and triggers.
    pub tables: Vec<String>,
    /// It is an INSERT, UPDATE or DELETE (so `changes()` is meaningful for it).
    pub dml: bool,
    /// It changes the schema (the writer then re-checks expiry metadata, readers their caches).
    pub ddl: bool,
    /// SQLite says it does not write (`sqlite3_stmt_readonly`).
    pub readonly: bool,
    /// It is an ALTER TABLE (which may rename a table into cairn's reserved names).
    pub alter: bool,
    /// Its result columns' names, read once when it was compiled (`SQL.QUERY` only): a
    /// repeated query hands these out instead of asking SQLite and copying them each time.
    pub columns: Arc<[String]>,
}

pub(crate) struct Conn {
    pub db: Connection,
    pub auth: Arc<Mutex<AuthState>>,
    /// Analyses of statements in rusqlite's statement cache, keyed by SQL text. A user
    /// statement runs only once its analysis exists, i.e. once the authorizer has seen it.
    pub analyses: Analyses,
    /// `Shared::schema_epoch` when `analyses` was last known valid.
    pub epoch: u64,
}

/// Analyses by SQL text. ahash rather than SipHash: an inline point lookup looks its text up
/// on every run, and SipHash of it was a visible part of the lookup's cost (callgrind).
pub(crate) type Analyses = HashMap<String, Arc<Analysis>, ahash::RandomState>;

/// Statements kept prepared per connection (and analyses remembered).
pub(crate) const CACHE: usize = 256;

impl Conn {
    pub fn open(shared: &Arc<Shared>) -> rusqlite::Result<Conn> {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let db = Connection::open_with_flags(&shared.uri, flags)?;
        let auth = Arc::new(Mutex::new(AuthState::default()));
        harden(&db, shared)?;
        register_functions(&db, shared)?;
        db.busy_handler(Some(on_busy))?;
        db.progress_handler(crate::pace::STEPS, Some(on_progress));
        db.set_prepared_statement_cache_capacity(CACHE);
        let hook_state = auth.clone();
        db.authorizer(Some(move |ctx: rusqlite::hooks::AuthContext<'_>| {
            sandbox::authorize(&mut hook_state.lock(), ctx)
        }));
        Ok(Conn {
            db,
            auth,
            analyses: Analyses::default(),
            epoch: 0,
        })
    }

    /// Runs engine-issued SQL with the sandbox lifted (it may touch `_cairn_*` tables and set
    /// pragmas). Never pass user SQL here.
    pub fn internal<R>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<R>,
    ) -> rusqlite::Result<R> {
        let was = std::mem::replace(&mut self.auth.lock().internal, true);
        let out = f(&self.db);
        self.auth.lock().internal = was;
        out
    }

    /// After a schema change (by the writer, since this connection last looked): drops
    /// remembered analyses (a view or a table recreated under the same name may now touch other
    /// tables) and reloads the connection's copy of the schema. SQLite checks that copy against
    /// the database only when a statement opens a read transaction; `PRAGMA index_list(t)` and
    /// `index_info(i)` look `t`/`i` up in the copy first and, not finding them, open none, so a
    /// reader that loaded the schema before `t` existed would answer from the stale copy. One
    /// read of `sqlite_schema` verifies the schema cookie and reloads the copy if it changed.
    pub fn check_epoch(&mut self, shared: &Shared) {
        let now = shared.schema_epoch();
        if now != self.epoch {
            self.analyses.clear();
            self.epoch = now;
            let _ = self.internal(|db| {
                db.prepare_cached("SELECT 1 FROM sqlite_schema LIMIT 1")?
                    .exists([])
            });
        }
    }
}

/// Connection-level defences that do not depend on the authorizer.
fn harden(db: &Connection, shared: &Shared) -> rusqlite::Result<()> {
    use rusqlite::config::DbConfig;
    unsafe {
        // No extension loading, neither the C API nor the SQL function (off by default;
        // said explicitly so a future default or feature flag cannot turn it on).
        ffi::sqlite3_db_config(
            db.handle(),
            ffi::SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION,
            0 as c_int,
            std::ptr::null_mut::<c_int>(),
        );
    }
    db.set_db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true)?;
    db.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_FTS3_TOKENIZER, false)?;
    let cfg = &shared.config;
    let length = cfg.max_result_bytes.clamp(1 << 20, 1_000_000_000) as i32;
    db.set_limit(Limit::SQLITE_LIMIT_LENGTH, length)?;
    db.set_limit(
        Limit::SQLITE_LIMIT_SQL_LENGTH,
        length.min(guard::SQL_LENGTH),
    )?;
    // Limits that bound SQLite's recursion (see `crate::guard` for the stack they need).
    db.set_limit(
        Limit::SQLITE_LIMIT_LIKE_PATTERN_LENGTH,
        guard::LIKE_PATTERN_LENGTH,
    )?;
    db.set_limit(Limit::SQLITE_LIMIT_EXPR_DEPTH, guard::EXPR_DEPTH)?;
    db.set_limit(Limit::SQLITE_LIMIT_COMPOUND_SELECT, guard::COMPOUND_SELECT)?;
    db.set_limit(Limit::SQLITE_LIMIT_ATTACHED, 0)?;
    db.set_limit(Limit::SQLITE_LIMIT_TRIGGER_DEPTH, 64)?;
    db.set_limit(Limit::SQLITE_LIMIT_WORKER_THREADS, 0)?;
    // Temporary b-trees (big sorts, DISTINCT) stay in memory: never a file on disk.
    db.pragma_update(None, "temp_store", "MEMORY")?;
    // REPLACE must fire delete triggers so row metadata follows replaced rows.
    db.pragma_update(None, "recursive_triggers", true)?;
    db.pragma_update(None, "foreign_keys", true)?;
    Ok(())
}

/// `cairn_now()` (the engine clock, ms since the Unix epoch), `_cairn_ops(id)` (the operation
/// count of a table with expiry rules) and `_cairn_seq(id)` (its next write sequence number):
/// the row-metadata triggers stamp rows with them.
fn register_functions(db: &Connection, shared: &Arc<Shared>) -> rusqlite::Result<()> {
    // INNOCUOUS: usable from triggers even if trusted_schema is ever turned off; not
    // DETERMINISTIC: the values change between calls.
    let flags = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_INNOCUOUS;
    let s = shared.clone();
    db.create_scalar_function("cairn_now", 0, flags, move |_| Ok(s.clock.now_ms()))?;
    let s = shared.clone();
    db.create_scalar_function("_cairn_ops", 1, flags, move |ctx| {
        let id: i64 = ctx.get(0)?;
        Ok(s.registry.ops_of(id) as i64)
    })?;
    let s = shared.clone();
    db.create_scalar_function("_cairn_seq", 1, flags, move |ctx| {
        let id: i64 = ctx.get(0)?;
        Ok(s.registry.seq_of(id) as i64)
    })?;
    Ok(())
}

/// Page cache of the writer and of inline readers (KiB): 32 MiB, or a quarter of
/// `--sql-maxmemory` (at least 2 MiB) when it is set.
pub(crate) fn big_cache_kib(cfg: &crate::SqlConfig) -> u64 {
    match cfg.max_memory {
        0 => 32768,
        max => (max / 4 / 1024).clamp(2048, 32768),
    }
}

/// Sets the memdb image's size cap: at the cap SQLite fails writes with SQLITE_FULL, which the
/// engine reports as out-of-memory. Deletes still work (freed pages are reused, not grown).
pub(crate) fn set_size_limit(db: &Connection, bytes: i64) -> bool {
    let mut limit: i64 = bytes;
    let rc = unsafe {
        ffi::sqlite3_file_control(
            db.handle(),
            c"main".as_ptr(),
            ffi::SQLITE_FCNTL_SIZE_LIMIT,
            &mut limit as *mut i64 as *mut c_void,
        )
    };
    rc == ffi::SQLITE_OK
}
