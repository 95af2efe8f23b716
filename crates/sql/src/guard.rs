//! Keeps one statement from taking the process down: the engine threads' stack size, a guard
//! that stops SQLite's recursion long before it reaches the end of that stack, and the
//! process-wide SQLite heap limit derived from `--sql-maxmemory` (issue 11, items 1 and 7).
//!
//! SQLite recurses on the C stack while it compiles (expanding views and CTEs, walking nested
//! subqueries and expressions) and while it matches LIKE/GLOB patterns. Its own limits bound
//! some of that (expression depth, compound SELECTs, LIKE pattern length, SQL length) but
//! nothing bounds view nesting: views chain across statements, so `SELECT * FROM v3000` expands
//! 3,000 levels however short it is. Measured with `examples/stack_probe.rs` (bytes of stack
//! per level): chained views ~710, chained CTEs ~390, nested FROM subqueries ~390, LIKE/GLOB
//! ~112 per `%a` pair (56 per pattern byte), compound SELECT ~950 (500 at most).
//!
//! The guard: every level of view, CTE and subquery expansion allocates (SQLite copies the
//! SELECT it expands), so SQLite's allocator is wrapped and refuses to allocate (`SQLITE_NOMEM`)
//! on an engine thread that has used more than [`DEPTH_BUDGET`] of its stack; the statement
//! fails cleanly with a "nests too deeply" error. The passes after expansion recurse over the
//! same tree at most a few times as deep, and pattern matching, which allocates nothing, is
//! bounded by the LIKE pattern length limit: [`STACK_SIZE`] leaves room for both. The stack is
//! reserved virtual memory; only pages a statement touches become resident.

use rusqlite::ffi;
use std::cell::Cell;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Once;
use std::time::{Duration, Instant};

/// Stack of every engine thread.
pub(crate) const STACK_SIZE: usize = 32 << 20;
/// Stack an engine thread may use before SQLite's allocations fail on it: 1/8 of the stack,
/// ~5,900 chained views or ~10,700 chained CTEs or nested subqueries.
pub(crate) const DEPTH_BUDGET: usize = 4 << 20;
/// SQLITE_LIMIT_LIKE_PATTERN_LENGTH (SQLite's default, said explicitly): at 56 bytes of stack
/// per pattern byte the deepest match uses ~2.7 MiB.
pub(crate) const LIKE_PATTERN_LENGTH: i32 = 50_000;
/// SQLITE_LIMIT_SQL_LENGTH: longest SQL text (a script counts whole).
pub(crate) const SQL_LENGTH: i32 = 16 << 20;
/// SQLITE_LIMIT_EXPR_DEPTH and SQLITE_LIMIT_COMPOUND_SELECT (SQLite's defaults, explicit).
pub(crate) const EXPR_DEPTH: i32 = 1000;
pub(crate) const COMPOUND_SELECT: i32 = 500;

thread_local! {
    /// Lowest stack address this thread may allocate at (0: no guard, not an engine thread).
    static FLOOR: Cell<usize> = const { Cell::new(0) };
    /// The guard refused an allocation since the last [`take_tripped`].
    static TRIPPED: Cell<bool> = const { Cell::new(false) };
    /// While a user statement compiles: when compiling must end. SQLite's progress handler
    /// does not run while it compiles, and expanding a deep view chain can take minutes.
    static COMPILE_DEADLINE: Cell<Option<Instant>> = const { Cell::new(None) };
    /// Allocations since the clock was last read (it is read every [`CLOCK_EVERY`]).
    static TICKS: Cell<u32> = const { Cell::new(0) };
    /// The compile deadline refused an allocation since the last [`take_timed_out`].
    static TIMED_OUT: Cell<bool> = const { Cell::new(false) };
}

const CLOCK_EVERY: u32 = 256;

/// SQLite's default allocator, wrapped by [`guarded_malloc`] and [`guarded_realloc`].
struct Methods(ffi::sqlite3_mem_methods);
// SAFETY: written once, before SQLite is initialised (under `INSTALL`), then only read.
unsafe impl Sync for Methods {}
/// No allocator: what `DEFAULT` holds until [`install`] reads SQLite's own.
const NO_METHODS: ffi::sqlite3_mem_methods = ffi::sqlite3_mem_methods {
    xMalloc: None,
    xFree: None,
    xRealloc: None,
    xSize: None,
    xRoundup: None,
    xInit: None,
    xShutdown: None,
    pAppData: std::ptr::null_mut(),
};
static mut DEFAULT: Methods = Methods(NO_METHODS);
static INSTALL: Once = Once::new();
static ACTIVE: AtomicBool = AtomicBool::new(false);

#[inline(always)]
fn too_deep() -> bool {
    let floor = FLOOR.get();
    if floor == 0 {
        return false;
    }
    let marker = 0u8;
    let sp = std::hint::black_box(&marker) as *const u8 as usize;
    if sp < floor {
        TRIPPED.set(true);
        return true;
    }
    if let Some(end) = COMPILE_DEADLINE.get() {
        let n = TICKS.get().wrapping_add(1);
        TICKS.set(n);
        if n.is_multiple_of(CLOCK_EVERY) && Instant::now() >= end {
            TIMED_OUT.set(true);
            return true;
        }
    }
    false
}

/// Bounds the compilation of a user statement by `timeout` until dropped: past it, SQLite's
/// allocations fail and the statement fails to compile (see [`take_timed_out`]).
pub(crate) struct Compiling;

impl Compiling {
    pub fn start(timeout: Duration) -> Compiling {
        COMPILE_DEADLINE.set(Some(Instant::now() + timeout));
        TIMED_OUT.set(false);
        Compiling
    }
}

impl Drop for Compiling {
    fn drop(&mut self) {
        COMPILE_DEADLINE.set(None);
    }
}

/// Whether the compile deadline refused an allocation since the last call.
pub(crate) fn take_timed_out() -> bool {
    TIMED_OUT.replace(false)
}

unsafe extern "C" fn guarded_malloc(n: c_int) -> *mut c_void {
    if too_deep() {
        return std::ptr::null_mut();
    }
    // SAFETY: DEFAULT was filled before SQLite could call us.
    match unsafe { (*std::ptr::addr_of!(DEFAULT)).0.xMalloc } {
        Some(f) => unsafe { f(n) },
        None => std::ptr::null_mut(),
    }
}

unsafe extern "C" fn guarded_realloc(p: *mut c_void, n: c_int) -> *mut c_void {
    if too_deep() {
        return std::ptr::null_mut();
    }
    match unsafe { (*std::ptr::addr_of!(DEFAULT)).0.xRealloc } {
        Some(f) => unsafe { f(p, n) },
        None => std::ptr::null_mut(),
    }
}

/// Wraps SQLite's allocator; must run before SQLite is initialised (the first connection). If
/// something initialised it earlier the guard stays off (and [`active`] says so): the stack
/// size and SQLite's limits still apply.
pub(crate) fn install() {
    INSTALL.call_once(|| unsafe {
        let mut m = NO_METHODS;
        if ffi::sqlite3_config(ffi::SQLITE_CONFIG_GETMALLOC, &mut m as *mut _) != ffi::SQLITE_OK
            || m.xMalloc.is_none()
            || m.xRealloc.is_none()
        {
            return;
        }
        *std::ptr::addr_of_mut!(DEFAULT) = Methods(m);
        let mut wrapped = m;
        wrapped.xMalloc = Some(guarded_malloc);
        wrapped.xRealloc = Some(guarded_realloc);
        // SQLite copies the struct.
        if ffi::sqlite3_config(ffi::SQLITE_CONFIG_MALLOC, &wrapped as *const _) == ffi::SQLITE_OK {
            ACTIVE.store(true, Relaxed);
        }
    });
}

/// Whether the depth guard is in place.
pub(crate) fn active() -> bool {
    ACTIVE.load(Relaxed)
}

/// Arms the guard for the calling engine thread (at its start, near the top of its stack).
pub(crate) fn arm_thread() {
    let marker = 0u8;
    let here = std::hint::black_box(&marker) as *const u8 as usize;
    FLOOR.set(here.saturating_sub(DEPTH_BUDGET));
}

/// Arms the guard on a thread that is not an engine thread for one inline statement
/// (`crate::inline`): `depth` bytes below the caller's frame.
pub(crate) fn arm_inline(depth: usize) {
    let marker = 0u8;
    let here = std::hint::black_box(&marker) as *const u8 as usize;
    FLOOR.set(here.saturating_sub(depth));
}

/// Whether the guard is armed on this thread (an engine thread, or an inline statement runs).
pub(crate) fn armed() -> bool {
    FLOOR.get() != 0
}

/// Ends [`arm_inline`]: the thread is unguarded again.
pub(crate) fn disarm_inline() {
    FLOOR.set(0);
}

/// Whether the guard refused an allocation since [`clear`] (without forgetting it, unlike
/// [`take_tripped`]).
pub(crate) fn peek_tripped() -> bool {
    TRIPPED.get()
}

/// Whether the compile deadline refused an allocation since [`clear`] (without forgetting it,
/// unlike [`take_timed_out`]).
pub(crate) fn peek_timed_out() -> bool {
    TIMED_OUT.get()
}

/// Forgets an earlier refusal (before a statement is compiled).
pub(crate) fn clear() {
    TRIPPED.set(false);
    TIMED_OUT.set(false);
}

/// Whether the guard refused an allocation since [`clear`]: an out-of-memory error then means
/// the statement nested too deeply, not that memory ran out.
pub(crate) fn take_tripped() -> bool {
    TRIPPED.replace(false)
}

/// The message for a statement the guard stopped.
pub(crate) fn too_deep_message() -> String {
    format!(
        "statement nests too deeply (views, CTEs, subqueries or expressions): it would need more than {} MiB of stack",
        DEPTH_BUDGET >> 20
    )
}

/// The SQLite heap limit for a `--sql-maxmemory` of `max_memory` bytes (0: none): the image
/// may reach `max_memory`, and statements get working room (page caches, temporary b-trees of
/// DISTINCT, ORDER BY and GROUP BY, statement journals, trigger programs) of half of it, at
/// least 32 MiB.
pub(crate) fn heap_limit(max_memory: u64) -> u64 {
    if max_memory == 0 {
        return 0;
    }
    max_memory.saturating_add((max_memory / 2).max(32 << 20))
}

/// Applies [`heap_limit`] process-wide (only this engine uses SQLite in the process): past the
/// soft limit SQLite shrinks its page caches, at the hard limit allocations fail and the
/// statement gets an out-of-memory error. The last engine started with a limit sets it.
pub(crate) fn set_heap_limit(max_memory: u64) {
    if max_memory == 0 {
        return;
    }
    let hard = heap_limit(max_memory).min(i64::MAX as u64) as i64;
    unsafe {
        ffi::sqlite3_hard_heap_limit64(hard);
        ffi::sqlite3_soft_heap_limit64(hard - hard / 8);
    }
}
