//! Measures the concurrency designs issue 5 asks us to compare before choosing one for `sql`.
//!
//! Every design is driven the way the engine will drive it: client threads hand a job to a
//! queue, a worker thread that owns a SQLite connection runs it and replies over a channel.
//! Designs:
//! - `actor`: one private in-memory connection per table, on its own thread;
//! - `shared-cache`: a pool of readers + one writer on `file:..?mode=memory&cache=shared`
//!   with `read_uncommitted` (table-level locks, one shared page cache);
//! - `memdb-busy`: a pool of readers + one writer on one `memdb` database (`file:/name?vfs=memdb`),
//!   SQLite's own file locks with a spinning busy handler;
//! - `memdb-rwlock`: the same, but a `parking_lot::RwLock` admits statements so SQLite never
//!   sees lock contention;
//! - `memdb-per-table`: one memdb database per table (readers of `t` never meet writers of `u`).
//!
//! Workloads: SELECT-by-primary-key on a 100k-row table, INSERT, and both at once on two
//! different tables. Run: `cargo run --release -p cairn-sql --example designs -- [secs] [clients]`.

use parking_lot::{Condvar, Mutex, RwLock};
use rusqlite::{params, Connection, OpenFlags};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

type Job = Box<dyn FnOnce(&Connection) + Send>;

/// A set of worker threads, each owning one connection, fed from one FIFO queue.
struct Pool {
    queue: Arc<(Mutex<VecDeque<Job>>, Condvar)>,
    stop: Arc<AtomicBool>,
    workers: Vec<thread::JoinHandle<()>>,
}

impl Pool {
    fn new(n: usize, open: Arc<dyn Fn() -> Connection + Send + Sync>) -> Pool {
        let queue: Arc<(Mutex<VecDeque<Job>>, Condvar)> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let workers = (0..n)
            .map(|_| {
                let (queue, stop, open) = (queue.clone(), stop.clone(), open.clone());
                thread::spawn(move || {
                    let conn = open();
                    loop {
                        let job = {
                            let mut q = queue.0.lock();
                            loop {
                                if let Some(job) = q.pop_front() {
                                    break Some(job);
                                }
                                if stop.load(Ordering::Relaxed) {
                                    break None;
                                }
                                queue.1.wait_for(&mut q, Duration::from_millis(50));
                            }
                        };
                        match job {
                            Some(job) => job(&conn),
                            None => return,
                        }
                    }
                })
            })
            .collect();
        Pool {
            queue,
            stop,
            workers,
        }
    }

    /// Runs `f` on a worker and waits for its answer, as a server command would.
    fn call<R: Send + 'static>(&self, f: impl FnOnce(&Connection) -> R + Send + 'static) -> R {
        let (tx, rx) = mpsc::sync_channel(1);
        self.queue.0.lock().push_back(Box::new(move |c| {
            let _ = tx.send(f(c));
        }));
        self.queue.1.notify_one();
        rx.recv().expect("worker gone")
    }

    fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        self.queue.1.notify_all();
        for w in self.workers {
            let _ = w.join();
        }
    }
}

/// Where a design sends reads and writes of one table.
struct Route {
    readers: Arc<Pool>,
    writer: Arc<Pool>,
    gate: Option<Arc<RwLock<()>>>,
}

fn spin_busy(n: i32) -> bool {
    if n < 64 {
        thread::yield_now();
    } else {
        thread::sleep(Duration::from_micros(50));
    }
    n < 100_000
}

fn memdb_opener(name: String) -> Arc<dyn Fn() -> Connection + Send + Sync> {
    Arc::new(move || {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let c = Connection::open_with_flags(format!("file:/{name}?vfs=memdb"), flags).unwrap();
        c.busy_handler(Some(spin_busy)).unwrap();
        c
    })
}

fn shared_cache_opener(name: String) -> Arc<dyn Fn() -> Connection + Send + Sync> {
    Arc::new(move || {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let uri = format!("file:{name}?mode=memory&cache=shared");
        let c = Connection::open_with_flags(uri, flags).unwrap();
        c.pragma_update(None, "read_uncommitted", true).unwrap();
        c.busy_handler(Some(spin_busy)).unwrap();
        c
    })
}

const ROWS: i64 = 100_000;
/// Fresh primary keys for INSERTs, unique across every run of every design.
static NEXT_ID: AtomicU64 = AtomicU64::new(10_000_000);

/// Builds the design: returns the route for table `t` (reads) and for table `u` (writes),
/// plus a keeper connection some designs need so the in-memory database outlives the pools.
fn build(design: &str, readers: usize) -> (Route, Route, Vec<Arc<Pool>>, Vec<Connection>) {
    let id = format!("{design}-{}", std::process::id());
    let mk =
        |open: Arc<dyn Fn() -> Connection + Send + Sync>, n: usize| Arc::new(Pool::new(n, open));
    match design {
        "actor" => {
            let open: Arc<dyn Fn() -> Connection + Send + Sync> =
                Arc::new(|| Connection::open_in_memory().unwrap());
            let t = mk(open.clone(), 1);
            let u = mk(open, 1);
            let rt = Route {
                readers: t.clone(),
                writer: t.clone(),
                gate: None,
            };
            let ru = Route {
                readers: u.clone(),
                writer: u.clone(),
                gate: None,
            };
            (rt, ru, vec![t, u], vec![])
        }
        "shared-cache" | "memdb-busy" | "memdb-rwlock" => {
            let open = if design == "shared-cache" {
                shared_cache_opener(id)
            } else {
                memdb_opener(id)
            };
            let keeper = open();
            let r = mk(open.clone(), readers);
            let w = mk(open, 1);
            let gate = (design == "memdb-rwlock").then(|| Arc::new(RwLock::new(())));
            let rt = Route {
                readers: r.clone(),
                writer: w.clone(),
                gate: gate.clone(),
            };
            let ru = Route {
                readers: r.clone(),
                writer: w.clone(),
                gate,
            };
            (rt, ru, vec![r, w], vec![keeper])
        }
        "memdb-per-table" => {
            let (ot, ou) = (
                memdb_opener(format!("{id}-t")),
                memdb_opener(format!("{id}-u")),
            );
            let keepers = vec![ot(), ou()];
            let (rt_, wt) = (mk(ot.clone(), readers), mk(ot, 1));
            let (ru_, wu) = (mk(ou.clone(), readers), mk(ou, 1));
            let rt = Route {
                readers: rt_.clone(),
                writer: wt.clone(),
                gate: None,
            };
            let ru = Route {
                readers: ru_.clone(),
                writer: wu.clone(),
                gate: None,
            };
            (rt, ru, vec![rt_, wt, ru_, wu], keepers)
        }
        other => panic!("unknown design {other}"),
    }
}

fn populate(route: &Route, table: &'static str, rows: i64) {
    route.writer.call(move |c| {
        c.execute_batch(&format!(
            "CREATE TABLE {table}(id INTEGER PRIMARY KEY, v TEXT, n INTEGER);"
        ))
        .unwrap();
        c.execute_batch("BEGIN").unwrap();
        let mut st = c
            .prepare(&format!("INSERT INTO {table} VALUES(?, ?, ?)"))
            .unwrap();
        for i in 0..rows {
            st.execute(params![i, format!("value-{i}"), i * 7]).unwrap();
        }
        drop(st);
        c.execute_batch("COMMIT").unwrap();
    });
}

fn select(route: &Route, id: i64) {
    let gate = route.gate.clone();
    route.readers.call(move |c| {
        let _g = gate.as_ref().map(|g| g.read());
        let mut st = c.prepare_cached("SELECT v, n FROM t WHERE id = ?").unwrap();
        loop {
            match st.query_row([id], |r| r.get::<_, i64>(1)) {
                Ok(n) => return assert_eq!(n, id * 7),
                Err(e) if is_locked(&e) => thread::yield_now(),
                Err(e) => panic!("{e}"),
            }
        }
    })
}

/// A heavy read: a full scan with an aggregate (about 10 ms on 100k rows).
const SCAN: &str = "SELECT count(*), sum(n) FROM t WHERE v LIKE '%99%'";

fn scan(route: &Route) {
    let gate = route.gate.clone();
    route.readers.call(move |c| {
        let _g = gate.as_ref().map(|g| g.read());
        let mut st = c.prepare_cached(SCAN).unwrap();
        loop {
            match st.query_row([], |r| r.get::<_, i64>(0)) {
                Ok(n) => return assert!(n > 0),
                Err(e) if is_locked(&e) => thread::yield_now(),
                Err(e) => panic!("{e}"),
            }
        }
    })
}

fn insert(route: &Route, id: i64) {
    let gate = route.gate.clone();
    route.writer.call(move |c| {
        let _g = gate.as_ref().map(|g| g.write());
        let mut st = c.prepare_cached("INSERT INTO u VALUES(?, 'x', ?)").unwrap();
        loop {
            match st.execute(params![id, id]) {
                Ok(_) => return,
                Err(e) if is_locked(&e) => thread::yield_now(),
                Err(e) => panic!("{e}"),
            }
        }
    })
}

fn is_locked(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseLocked)
    ) || matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy)
    )
}

/// Runs `readers` SELECT clients and `writers` INSERT clients for `secs`; returns ops/s each.
fn drive(t: &Arc<Route>, u: &Arc<Route>, readers: usize, writers: usize, secs: f64) -> (f64, f64) {
    drive_with(t, u, readers, writers, secs, false)
}

/// As `drive`; with `heavy` the readers run `SCAN` instead of a primary-key lookup. The best of
/// three runs is kept: on a shared 2-core machine, other processes only ever slow a run down.
fn drive_with(
    t: &Arc<Route>,
    u: &Arc<Route>,
    readers: usize,
    writers: usize,
    secs: f64,
    heavy: bool,
) -> (f64, f64) {
    (0..3)
        .map(|_| drive_once(t, u, readers, writers, secs, heavy))
        .fold((0.0, 0.0), |a, b| (a.0.max(b.0), a.1.max(b.1)))
}

fn drive_once(
    t: &Arc<Route>,
    u: &Arc<Route>,
    readers: usize,
    writers: usize,
    secs: f64,
    heavy: bool,
) -> (f64, f64) {
    let stop = Arc::new(AtomicBool::new(false));
    let (reads, writes) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let mut hs = Vec::new();
    for i in 0..readers {
        let (t, stop, reads) = (t.clone(), stop.clone(), reads.clone());
        hs.push(thread::spawn(move || {
            let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ (i as u64 + 1);
            while !stop.load(Ordering::Relaxed) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if heavy {
                    scan(&t)
                } else {
                    select(&t, (x % ROWS as u64) as i64)
                }
                reads.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for _ in 0..writers {
        let (u, stop, writes) = (u.clone(), stop.clone(), writes.clone());
        hs.push(thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                insert(&u, NEXT_ID.fetch_add(1, Ordering::Relaxed) as i64);
                writes.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let start = Instant::now();
    thread::sleep(Duration::from_secs_f64(secs));
    stop.store(true, Ordering::Relaxed);
    for h in hs {
        h.join().unwrap();
    }
    let el = start.elapsed().as_secs_f64();
    (
        reads.load(Ordering::Relaxed) as f64 / el,
        writes.load(Ordering::Relaxed) as f64 / el,
    )
}

/// SELECT-by-pk with each thread owning its connection (no queue): how far SQLite itself lets
/// readers of one table run in parallel under shared-cache versus memdb.
fn raw_select(open: Arc<dyn Fn() -> Connection + Send + Sync>, threads: usize, secs: f64) -> f64 {
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));
    let hs: Vec<_> = (0..threads)
        .map(|i| {
            let (open, stop, reads) = (open.clone(), stop.clone(), reads.clone());
            thread::spawn(move || {
                let c = open();
                let mut st = c.prepare_cached("SELECT v, n FROM t WHERE id = ?").unwrap();
                let mut x = 0x2545_F491_4F6C_DD1Du64 ^ (i as u64 + 1);
                while !stop.load(Ordering::Relaxed) {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let id = (x % ROWS as u64) as i64;
                    let n: i64 = st.query_row([id], |r| r.get(1)).unwrap();
                    assert_eq!(n, id * 7);
                    reads.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let start = Instant::now();
    thread::sleep(Duration::from_secs_f64(secs));
    stop.store(true, Ordering::Relaxed);
    for h in hs {
        h.join().unwrap();
    }
    reads.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let secs: f64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1.0);
    let clients: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(4);
    let cores = thread::available_parallelism().map_or(1, |n| n.get());
    println!("# {cores} cores, {clients} clients, {secs}s per figure, {ROWS} rows in t");
    println!(
        "{:<16} {:>11} {:>11} {:>9} {:>11} {:>11} {:>9} {:>9}",
        "design",
        "select x1/s",
        "select xN/s",
        "insert/s",
        "mix sel/s",
        "mix ins/s",
        "scan x1/s",
        "scan xN/s"
    );
    for design in [
        "actor",
        "shared-cache",
        "memdb-busy",
        "memdb-rwlock",
        "memdb-per-table",
    ] {
        let (t, u, pools, keeper) = build(design, clients);
        populate(&t, "t", ROWS);
        populate(&u, "u", 0);
        let (t, u) = (Arc::new(t), Arc::new(u));
        let (s1, _) = drive(&t, &u, 1, 0, secs);
        let (sn, _) = drive(&t, &u, clients, 0, secs);
        let (_, ins) = drive(&t, &u, 0, 1, secs);
        let (ms, mi) = drive(&t, &u, clients.saturating_sub(1).max(1), 1, secs);
        let (c1, _) = drive_with(&t, &u, 1, 0, secs, true);
        let (cn, _) = drive_with(&t, &u, clients, 0, secs, true);
        println!(
            "{design:<16} {s1:>11.0} {sn:>11.0} {ins:>9.0} {ms:>11.0} {mi:>11.0} {c1:>9.1} {cn:>9.1}"
        );
        drop((t, u));
        for p in pools {
            if let Ok(p) = Arc::try_unwrap(p) {
                p.stop();
            }
        }
        drop(keeper);
    }
    println!("\n# without the queue: each thread owns a connection (SQLite's own concurrency)");
    println!(
        "{:<16} {:>12} {:>12}",
        "database", "select x1/s", "select xN/s"
    );
    let pid = std::process::id();
    for (name, open) in [
        ("shared-cache", shared_cache_opener(format!("raw-sc-{pid}"))),
        ("memdb", memdb_opener(format!("raw-memdb-{pid}"))),
    ] {
        let keeper = open();
        let pool = Pool::new(1, open.clone());
        let route = Route {
            readers: Arc::new(Pool::new(0, open.clone())),
            writer: Arc::new(pool),
            gate: None,
        };
        populate(&route, "t", ROWS);
        let best = |n: usize| {
            (0..3)
                .map(|_| raw_select(open.clone(), n, secs))
                .fold(0.0, f64::max)
        };
        let (s1, sn) = (best(1), best(clients));
        println!("{name:<16} {s1:>12.0} {sn:>12.0}");
        drop((route, keeper));
    }
}
