//! Scheduling (issue 11, item 4): a queue of heavy statements does not hold up a quick one,
//! and requests of clients that went away before their turn are dropped, not run.

mod common;
use common::*;
use sql::{ErrorKind, Request, SqlConfig};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

const RUNAWAY: &str =
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c";

#[test]
fn quick_query_is_not_stuck_behind_queued_heavy_ones() {
    let e = engine_with(SqlConfig {
        threads: 2,
        timeout: Duration::from_millis(200),
        ..SqlConfig::default()
    });
    // Once: it runs into the timeout, so its text is known to be heavy from now on.
    assert_eq!(
        try_query(&e, RUNAWAY, vec![]).unwrap_err().kind,
        ErrorKind::Timeout
    );
    let (tx, rx) = mpsc::channel();
    for _ in 0..12 {
        let tx = tx.clone();
        let req = Request::Query {
            sql: RUNAWAY.into(),
            params: vec![],
        };
        e.submit(
            req,
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        );
    }
    thread::sleep(Duration::from_millis(20));
    let started = Instant::now();
    assert_eq!(int(&e, "SELECT 1"), 1);
    let took = started.elapsed();
    // Before: FIFO behind 12 x 200 ms on 2 readers, 1.2 s.
    assert!(
        took < Duration::from_millis(400),
        "SELECT 1 waited {took:?}"
    );
    for _ in 0..12 {
        let r = rx.recv_timeout(Duration::from_secs(10)).expect("answered");
        assert_eq!(r.unwrap_err().kind, ErrorKind::Timeout);
    }
}

#[test]
fn request_of_a_gone_client_is_dropped() {
    let e = engine_with(SqlConfig {
        timeout: Duration::from_millis(300),
        ..SqlConfig::default()
    });
    exec(&e, "CREATE TABLE t(x)", vec![]);
    // The writer is busy for 300 ms ...
    let (tx, rx) = mpsc::channel();
    let busy = Request::Exec {
        sql: format!("CREATE TABLE busy AS {RUNAWAY}").into_bytes(),
        params: vec![],
    };
    let tx1 = tx.clone();
    e.submit(busy, Box::new(move |r| drop(tx1.send(r))));
    thread::sleep(Duration::from_millis(20));
    // ... while a client queues an insert, then goes away.
    let gone = Arc::new(AtomicBool::new(false));
    let g = gone.clone();
    let insert = Request::Exec {
        sql: b"INSERT INTO t VALUES (1)".to_vec(),
        params: vec![],
    };
    e.submit_for(
        insert,
        0,
        Some(Box::new(move || g.load(Ordering::Relaxed))),
        Box::new(move |r| drop(tx.send(r))),
    );
    gone.store(true, Ordering::Relaxed);
    let first = rx.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(first.unwrap_err().kind, ErrorKind::Timeout);
    let second = rx.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(second.unwrap_err().kind, ErrorKind::Cancelled);
    assert_eq!(int(&e, "SELECT count(*) FROM t"), 0);
    assert_eq!(e.stats().cancelled, 1);
}
