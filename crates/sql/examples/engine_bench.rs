//! Engine-level figures for the chosen design, on seed 002's Table 2 data set: 100,000 cached
//! records over 30,000 pages and 1,000 users, indexed by page and by user.
//!
//! Measures, through the public API (queue hand-off included, no network): SELECT-by-primary-
//! key latency and throughput, INSERT throughput, and the forced-expiry deletes of Table 2
//! (one page, one user), with and without expiry rules (row-metadata triggers) on the table.
//! Run: `cargo run --release -p cairn-sql --example engine_bench -- [clients]`.

use sql::{ExpiryRules, Reply, Request, SqlConfig, SqlEngine, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

const RECORDS: i64 = 100_000;
const PAGES: i64 = 30_000;
const USERS: i64 = 1_000;

fn exec(e: &SqlEngine, sql: &str, params: Vec<Value>) -> u64 {
    match e.run(Request::Exec {
        sql: sql.into(),
        params,
    }) {
        Ok(Reply::Changed(n)) => n,
        other => panic!("{sql}: {other:?}"),
    }
}

fn populate(e: &SqlEngine) {
    exec(
        e,
        "CREATE TABLE cache(id INTEGER PRIMARY KEY, page INTEGER, user INTEGER, data BLOB);
         CREATE INDEX cache_page ON cache(page); CREATE INDEX cache_user ON cache(user);",
        vec![],
    );
    // Deterministic spread: record i belongs to page i*7919 % PAGES and user i*104729 % USERS.
    exec(
        e,
        &format!(
            "WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < {})
             INSERT INTO cache SELECT i, i * 7919 % {PAGES}, i * 104729 % {USERS}, randomblob(100) FROM c",
            RECORDS - 1
        ),
        vec![],
    );
}

fn percentile(mut v: Vec<Duration>, p: f64) -> Duration {
    v.sort();
    v[((v.len() - 1) as f64 * p) as usize]
}

/// Median and p99 of `n` calls of `f(i)`.
fn time(n: usize, mut f: impl FnMut(usize)) -> (Duration, Duration) {
    let v: Vec<Duration> = (0..n)
        .map(|i| {
            let t = Instant::now();
            f(i);
            t.elapsed()
        })
        .collect();
    (percentile(v.clone(), 0.5), percentile(v, 0.99))
}

fn us(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

/// `clients` threads, each keeping `depth` lookups in flight via `submit`; ops/s.
fn select_throughput(e: &Arc<SqlEngine>, clients: usize, depth: usize, secs: f64) -> f64 {
    let done = Arc::new(AtomicU64::new(0));
    let stop = Instant::now() + Duration::from_secs_f64(secs);
    let hs: Vec<_> = (0..clients)
        .map(|c| {
            let (e, done) = (e.clone(), done.clone());
            thread::spawn(move || {
                let (tx, rx) = mpsc::channel::<()>();
                let mut k = c as i64 * 7;
                let issue = |k: i64| {
                    let tx = tx.clone();
                    e.submit(
                        Request::Query {
                            sql: b"SELECT page, user, data FROM cache WHERE id = ?".to_vec(),
                            params: vec![Value::Integer(k % RECORDS)],
                        },
                        Box::new(move |r| {
                            assert!(matches!(r, Ok(Reply::Rows { .. })));
                            let _ = tx.send(());
                        }),
                    )
                };
                for _ in 0..depth {
                    k += 7919;
                    issue(k);
                }
                while Instant::now() < stop {
                    rx.recv().unwrap();
                    done.fetch_add(1, Ordering::Relaxed);
                    k += 7919;
                    issue(k);
                }
                for _ in 0..depth {
                    rx.recv().unwrap();
                }
            })
        })
        .collect();
    let start = Instant::now();
    for h in hs {
        h.join().unwrap();
    }
    done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}

fn run(label: &str, rules: Option<ExpiryRules>, clients: usize) {
    let e = SqlEngine::new(SqlConfig::default()).unwrap();
    populate(&e);
    if let Some(rules) = rules {
        let set = Request::Expire {
            table: "cache".into(),
            rules: Some(rules),
        };
        e.run(set).unwrap();
    }
    println!("## {label}");
    let (p50, p99) = time(20_000, |i| {
        let r = e.run(Request::Query {
            sql: b"SELECT page, user, data FROM cache WHERE id = ?".to_vec(),
            params: vec![Value::Integer((i as i64 * 7919) % RECORDS)],
        });
        assert!(matches!(r, Ok(Reply::Rows { rows, .. }) if rows.len() == 1));
    });
    println!(
        "SELECT by pk, one at a time:        p50 {}  p99 {}",
        us(p50),
        us(p99)
    );
    for (c, d) in [(1, 16), (clients, 16)] {
        let ops = select_throughput(&e, c, d, 2.0);
        println!("SELECT by pk, {c} client(s) x {d} in flight: {ops:.0}/s");
    }
    let next = AtomicU64::new(RECORDS as u64);
    let (p50, p99) = time(20_000, |i| {
        let id = next.fetch_add(1, Ordering::Relaxed) as i64;
        exec(
            &e,
            "INSERT INTO cache VALUES (?, ?, ?, randomblob(100))",
            vec![
                Value::Integer(id),
                Value::Integer(i as i64 % PAGES),
                Value::Integer(i as i64 % USERS),
            ],
        );
    });
    println!(
        "INSERT, one at a time:               p50 {}  p99 {}  (~{:.0}/s)",
        us(p50),
        us(p99),
        1.0 / p50.as_secs_f64()
    );
    let mut deleted = 0;
    let (p50, p99) = time(1_000, |i| {
        deleted += exec(
            &e,
            "DELETE FROM cache WHERE page = ?",
            vec![Value::Integer(i as i64 * 29 % PAGES)],
        );
    });
    println!(
        "DELETE one page ({:.1} rows avg):    p50 {}  p99 {}",
        deleted as f64 / 1000.0,
        us(p50),
        us(p99)
    );
    let mut deleted = 0;
    let (p50, p99) = time(200, |i| {
        deleted += exec(
            &e,
            "DELETE FROM cache WHERE user = ?",
            vec![Value::Integer(i as i64)],
        );
    });
    println!(
        "DELETE one user ({:.1} rows avg):    p50 {}  p99 {}",
        deleted as f64 / 200.0,
        us(p50),
        us(p99)
    );
    let s = e.stats();
    println!(
        "memory: {} KiB SQLite heap, {} KiB database image\n",
        s.memory_used >> 10,
        s.data_bytes >> 10
    );
}

fn main() {
    let clients: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
    let cores = thread::available_parallelism().map_or(1, |n| n.get());
    println!("# engine_bench: {cores} cores, {RECORDS} records / {PAGES} pages / {USERS} users\n");
    run("plain table", None, clients);
    let age = ExpiryRules {
        age: Some(Duration::from_secs(3600)),
        ..Default::default()
    };
    run("with AGE 3600 (row-metadata triggers)", Some(age), clients);
    let rows = ExpiryRules {
        rows: Some(10_000_000),
        ..Default::default()
    };
    run(
        "with ROWS 10000000 (triggers + row count)",
        Some(rows),
        clients,
    );
}
