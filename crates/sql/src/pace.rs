//! How the engine's threads share the CPU with the server's event loops: SQL is batch work, and
//! a heavy query must not raise key-value latency where cores are few (issue 5: at most +20% on
//! GET p99 while full-table aggregates run back to back, on a 2-core machine).
//!
//! Two measures, chosen by measurement on the 2-core development machine (`bench/results/sql.md`,
//! `docs/architecture.md`):
//! - **nice 10** for every engine thread: under CPU saturation the event loops get ~90% of a core
//!   that SQL also wants, and SQL still its ~10%. Not `SCHED_IDLE`: it let unrelated processes
//!   starve a 90 ms query past its 1 s timeout.
//! - **cooperative yields** from SQLite's progress handler: every [`YIELD_EVERY`] of statement
//!   work the thread calls `sched_yield`, which hands the core to whatever is runnable there (an
//!   event loop, the load generator) and costs one system call when nothing is. A nice value
//!   alone does not do that: Linux's EEVDF scheduler lets the running task keep the CPU to the end
//!   of its protected slice (~1.4 ms here) when a higher-priority task wakes, which was the 1–2 ms
//!   GET p99 seen while SQL ran. (A long custom slice via `sched_setattr`, which should let waking
//!   tasks preempt at once, made no measurable difference here.)
//!
//! Yields are budgeted so that politeness cannot starve a statement into its `--sql-timeout`: for
//! the first quarter of the timeout ([`FREE_PART`]) a statement yields freely; after that it stops
//! yielding while others ran more than [`GIVE_MAX`] times what this thread ran in the recent window
//! (a CPU hog, not bursty event loops), and keeps its nice-10 share. A budget from the start cost
//! too much: on a shared machine the time counted as given away includes other jobs' slices, so
//! the yields stopped exactly when the event loops needed them (GET p99 with SQL ~0.9 ms against
//! ~0.45 ms with the free quarter, same runs).
//!
//! The state is per thread: each connection, and so each progress handler, lives on one thread.

use std::cell::Cell;
use std::time::{Duration, Instant};

/// Statement work between two yields.
pub(crate) const YIELD_EVERY: Duration = Duration::from_micros(10);
/// Stop yielding while others got more than this many times our own run time: 9 is about the
/// weight ratio of nice 0 to nice 10 (1024 / 110), so yields never take a statement below the
/// share that nice 10 alone leaves it next to one busy neighbour.
const GIVE_MAX: u32 = 9;
/// A statement yields without a budget for the first 1/FREE_PART of its timeout.
pub(crate) const FREE_PART: u32 = 4;
/// The window over which run and given time are compared (both halve when it is exceeded).
const WINDOW: Duration = Duration::from_millis(20);
/// A gap between two progress callbacks longer than this means the thread was descheduled (or
/// ran one long opcode, a sort): it is not counted as run time.
const GAP: Duration = Duration::from_micros(50);
/// SQLite virtual-machine steps between progress callbacks (~2–4 µs of work).
pub(crate) const STEPS: i32 = 100;

#[derive(Clone, Copy)]
struct Pacer {
    /// The last progress callback (or the end of the last yield).
    last: Option<Instant>,
    /// Run time since the last yield.
    since_yield: Duration,
    /// Run time and time given away by yields, over the recent window.
    ran: Duration,
    gave: Duration,
}

thread_local! {
    static PACER: Cell<Pacer> = const {
        Cell::new(Pacer { last: None, since_yield: Duration::ZERO, ran: Duration::ZERO, gave: Duration::ZERO })
    };
}

/// A statement starts: the time since the last callback (the queue, the previous reply) is not
/// statement work, and must not make a stream of short statements yield on wall time.
pub(crate) fn statement_start() {
    let mut p = PACER.get();
    p.last = None;
    PACER.set(p);
}

/// Called from SQLite's progress handler every [`STEPS`] VM steps, with the current time.
pub(crate) fn on_progress(now: Instant, freely: bool) {
    let mut p = PACER.get();
    let d = p
        .last
        .map_or(Duration::ZERO, |t| now.saturating_duration_since(t));
    p.last = Some(now);
    if d < GAP {
        p.since_yield += d;
        p.ran += d;
    }
    if p.since_yield >= YIELD_EVERY {
        p.since_yield = Duration::ZERO;
        if freely || p.gave <= p.ran * GIVE_MAX {
            std::thread::yield_now();
            let end = Instant::now();
            p.gave += end.saturating_duration_since(now);
            p.last = Some(end);
        }
        if p.ran + p.gave > WINDOW {
            p.ran /= 2;
            p.gave /= 2;
        }
    }
    PACER.set(p);
}

/// Lowers the calling engine thread's priority to nice 10 (see the module doc). Best effort: a
/// platform without per-thread nice values runs SQL at normal priority.
pub(crate) fn batch_thread() {
    #[cfg(target_os = "linux")]
    // SAFETY: setpriority with PRIO_PROCESS and who = 0 changes only the calling thread (on
    // Linux, nice values are per thread).
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, 0, 10);
    }
}
