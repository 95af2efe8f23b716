//! Short read-only statements run on the caller's own thread (a server I/O thread), on a reader
//! connection that thread keeps, instead of a round trip through the engine's queue and
//! threads (issue 19, part 5: the hand-off was most of a point lookup's cost).
//!
//! The connection is opened like every engine connection (`Conn::open`: same shared memdb
//! image, sandbox, limits, functions), so what a statement may do and see is the same; being
//! a reader in autocommit mode it sees committed data only. What differs is that the caller's
//! thread serves other clients, so a statement may only run here while it stays short:
//! - a **step budget** ([`crate::SqlConfig::inline_steps`] virtual-machine steps, checked by the
//!   progress handler every [`crate::pace`] `STEPS`): past it the statement is abandoned;
//! - a writer holding the database (SQLite busy), a statement that would wait for expiry, one
//!   that writes, one whose compilation nests past [`INLINE_DEPTH`] of stack or takes longer
//!   than [`INLINE_COMPILE`], or a LIKE pattern longer than [`INLINE_LIKE`]: abandoned too.
//!
//! An abandoned statement is read-only and changed nothing, so the caller hands it to the
//! engine threads as before, which run it from the start. Nothing of its inline attempt is
//! counted (statements, latency, OPS): the engine counts it once. A text abandoned for its
//! length is remembered (bounded, per thread) and goes straight to the engine next time, as do
//! texts the engine knows to be heavy.

use crate::conn::Conn;
use crate::exec::{self, Outcome, Side};
use crate::shared::Shared;
use crate::{Reply, SqlError, Value};
use std::cell::{Cell, RefCell};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Stack an inline compilation may use below the caller's frame before SQLite's allocations
/// fail on it (and the statement goes to the engine, whose threads allow `guard::DEPTH_BUDGET`):
/// ~180 chained views. Small, since an I/O thread has Rust's default 2 MiB stack.
pub(crate) const INLINE_DEPTH: usize = 128 << 10;
/// Longest an inline compilation may take (a normal one takes a few tens of µs).
pub(crate) const INLINE_COMPILE: Duration = Duration::from_millis(2);
/// SQLITE_LIMIT_LIKE_PATTERN_LENGTH of inline connections: matching recurses ~56 bytes of
/// stack per pattern byte; a longer pattern fails here and runs on the engine.
pub(crate) const INLINE_LIKE: i32 = 1000;
/// Per-thread memory of texts that ran past the budget (direct-mapped by hash).
const LONG_SLOTS: usize = 256;

/// Why an inline statement was abandoned.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Why {
    /// Ran past the step budget, nested too deeply, or compiled too long: it stays long.
    Long,
    /// Met a writer, or would wait for expiry: another time it may run inline.
    Busy,
}

thread_local! {
    /// Progress callbacks left to the running inline statement (None: none runs here).
    static LEFT: Cell<Option<u32>> = const { Cell::new(None) };
    static ABANDONED: Cell<Option<Why>> = const { Cell::new(None) };
    /// An inline compilation failed: SQLite may have dropped the connection's schema.
    static RELOAD: Cell<bool> = const { Cell::new(false) };
    /// This thread's reader connection, for one engine (tests start several per process).
    static READER: RefCell<Option<Reader>> = const { RefCell::new(None) };
}

struct Reader {
    engine: u64,
    conn: Conn,
    long: Box<[u64; LONG_SLOTS]>,
}

/// Whether an inline statement runs on this thread.
pub(crate) fn active() -> bool {
    LEFT.get().is_some()
}

/// Abandons the running inline statement (no-op when none runs).
pub(crate) fn abandon(why: Why) {
    if active() && ABANDONED.get() != Some(Why::Long) {
        ABANDONED.set(Some(why));
    }
}

/// Whether the running inline statement was abandoned.
pub(crate) fn abandoned() -> bool {
    active() && ABANDONED.get().is_some()
}

/// From the progress handler: true (interrupt) once the budget is spent.
pub(crate) fn on_progress() -> bool {
    match LEFT.get() {
        Some(0) => {
            abandon(Why::Long);
            true
        }
        Some(n) => {
            LEFT.set(Some(n - 1));
            false
        }
        None => false,
    }
}

/// A failed inline statement that the engine would run differently (deeper stack, longer
/// compile, longer LIKE patterns) is abandoned rather than failed. `compiling`: the error came
/// from compiling, where a spent budget means SQLite (re)loaded the schema, a one-time cost.
pub(crate) fn check_error(e: &rusqlite::Error, compiling: bool) {
    if !active() {
        return;
    }
    if compiling && ABANDONED.get() == Some(Why::Long) {
        ABANDONED.set(Some(Why::Busy));
    }
    if crate::guard::peek_tripped() || e.to_string().contains("LIKE or GLOB pattern too complex") {
        abandon(Why::Long);
    } else if crate::guard::peek_timed_out() {
        // Loading a large schema into a fresh connection can take this long once.
        abandon(Why::Busy);
    }
    if compiling && abandoned() {
        RELOAD.set(true);
    }
}

/// Progress callbacks (one every `pace::STEPS` steps) in a budget of `steps`.
fn budget(steps: u32) -> u32 {
    steps.div_ceil(crate::pace::STEPS as u32)
}

/// Marks this thread as running an inline statement until dropped.
struct Running;

impl Running {
    fn start(steps: u32) -> Running {
        LEFT.set(Some(budget(steps)));
        ABANDONED.set(None);
        crate::guard::arm_inline(INLINE_DEPTH);
        Running
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        LEFT.set(None);
        crate::guard::disarm_inline();
    }
}

/// Runs `sql` (an `SQL.QUERY`) on this thread if it is read-only and short: its result and how
/// long it ran; None when the caller must hand it to the engine (`SqlEngine::submit_for`).
pub(crate) fn query(
    shared: &Arc<Shared>,
    engine: u64,
    sql: &[u8],
    params: &[Value],
) -> Option<(Result<Reply, SqlError>, Duration)> {
    let steps = shared.config.inline_steps;
    if steps == 0 || shared.closed.load(Relaxed) {
        return None;
    }
    let key = shared.heavy.key(sql);
    if shared.heavy.is_heavy(key) {
        return None;
    }
    READER.with(|cell| {
        // Never re-entered (nothing here calls back into the server); be safe anyway.
        let mut slot = cell.try_borrow_mut().ok()?;
        if crate::guard::armed() {
            // An engine thread (a change sink calling back): it has its own connection.
            return None;
        }
        if slot.as_ref().is_none_or(|r| r.engine != engine) {
            *slot = None;
            let conn = Conn::open(shared).ok()?;
            conn.db
                .set_limit(
                    rusqlite::limits::Limit::SQLITE_LIMIT_LIKE_PATTERN_LENGTH,
                    INLINE_LIKE,
                )
                .ok()?;
            // Point lookups land anywhere in the image: a page cache as large as the writer's
            // saves copying each page out of the memdb image again (a 4 KB copy under the
            // image's mutex per leaf page otherwise). A write empties it at the next statement.
            let kib = crate::conn::big_cache_kib(&shared.config) as i64;
            conn.internal(|db| db.pragma_update(None, "cache_size", -kib))
                .ok()?;
            *slot = Some(Reader {
                engine,
                conn,
                long: Box::new([0; LONG_SLOTS]),
            });
        }
        let reader = slot.as_mut()?;
        let at = (key % LONG_SLOTS as u64) as usize;
        if reader.long[at] == key {
            return None;
        }
        // A schema changed since this connection last looked is loaded first, with no step
        // budget (a large schema takes many steps, once); meeting the writer still abandons.
        let running = Running::start(u32::MAX);
        reader.conn.check_epoch(shared);
        if abandoned() {
            reader.conn.epoch = u64::MAX;
            shared.counters.handed_off.fetch_add(1, Relaxed);
            return None;
        }
        LEFT.set(Some(budget(steps)));
        // Timed here, once, for both the latency histogram and the caller's slow log.
        let started = Instant::now();
        let out = crate::worker::guarded(&mut reader.conn, |conn| {
            Ok(exec::query(shared, conn, Side::Inline, sql, params))
        });
        let took = started.elapsed();
        let why = ABANDONED.get();
        drop(running);
        if RELOAD.replace(false) {
            // SQLite drops a connection's schema when an allocation fails while it loads it;
            // reload it before the next compilation (`Conn::check_epoch`), which is then not
            // bounded by the inline compile time: a large schema loads once, not never.
            reader.conn.epoch = u64::MAX;
        }
        let counters = &shared.counters;
        match (why, out) {
            (None, Ok(Outcome::Done(result, _))) => {
                counters.inline.fetch_add(1, Relaxed);
                counters.statement_took(took.as_nanos() as u64);
                Some((result, took))
            }
            (why, _) => {
                if why == Some(Why::Long) {
                    reader.long[at] = key;
                }
                counters.handed_off.fetch_add(1, Relaxed);
                None
            }
        }
    })
}
