//! Tests of the work the store does in bounded holds of its shard locks (issue 19): active
//! expiry of many records at once and group deletes in chunks still remove everything, count
//! it, and tell the change tap of every removal in order.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::changes::Listener;
use crate::{
    now_ms, Author, Change, ChangeKind, ChangeTap, Kind, Op, Predicate, Query, Store, StoreConfig,
    Tag, TagWrite,
};

/// One change as the tap heard it: (log, seq, key, whether it was an expiry).
type Heard = (usize, u64, Vec<u8>, bool);

/// Keeps every change it is told of, and the size of each call.
#[derive(Default)]
struct Tap {
    seen: Mutex<Vec<Heard>>,
    calls: Mutex<Vec<usize>>,
}

impl ChangeTap for Tap {
    fn changed(&self, changes: &[Change<'_>]) {
        let mut seen = self.seen.lock();
        for c in changes {
            let expired = matches!(c.kind, ChangeKind::Expire);
            seen.push((c.log, c.seq, c.key.to_vec(), expired));
        }
        self.calls.lock().push(changes.len());
    }
    fn flushed(&self, _author: Author, _seqs: &[u64]) {}
}

fn listened_store(shards: usize) -> (Arc<Store>, Arc<Tap>) {
    let s = Store::new(StoreConfig {
        shards,
        background: false,
        ..StoreConfig::default()
    });
    let tap = Arc::new(Tap::default());
    s.set_tap(tap.clone());
    s.set_listening(Listener::Tracking, true);
    (s, tap)
}

fn put(s: &Store, key: &[u8], tags: &[Tag], deadline: Option<u64>) {
    s.write(Author(1), key, |e| {
        e.put_record(
            Kind::String,
            key.len(),
            deadline,
            0,
            TagWrite::Set(tags),
            |b, _| b.copy_from_slice(key),
        )
    })
    .unwrap();
}

/// Each log's changes came in increasing sequence order, without gaps.
fn in_order(seen: &[Heard]) {
    let mut last: HashMap<usize, u64> = HashMap::new();
    for &(log, seq, ..) in seen {
        if let Some(&prev) = last.get(&log) {
            assert_eq!(seq, prev + 1, "log {log}: change {seq} after {prev}");
        }
        last.insert(log, seq);
    }
}

#[test]
fn mass_expiry_in_short_holds_removes_counts_and_reports_every_record() {
    let (s, tap) = listened_store(4);
    let n = 50_000u32;
    let past = now_ms() - 1;
    for i in 0..n {
        put(&s, format!("e{i}").as_bytes(), &[], Some(past));
    }
    put(&s, b"stays", &[], None);
    let empty_memory = {
        let fresh = Store::new(StoreConfig {
            shards: 4,
            background: false,
            ..StoreConfig::default()
        });
        fresh.used_memory()
    };
    tap.seen.lock().clear();
    // One round takes them all: each shard goes on while what it scans is mostly expired.
    assert_eq!(s.expire_round(), n as usize);
    assert_eq!(s.len(), 1);
    assert_eq!(s.stats().expired, n as u64);
    let seen = tap.seen.lock();
    assert_eq!(seen.len(), n as usize);
    assert!(seen.iter().all(|c| c.3), "every removal is an Expire");
    in_order(&seen);
    // The records were freed and uncounted (only the grown slot arrays and "stays" remain).
    let index: u64 = s.stats().index_memory;
    assert!(s.used_memory() < index + empty_memory + 1024);
}

#[test]
fn a_large_group_delete_goes_in_chunks_and_misses_nothing() {
    let (s, tap) = listened_store(16);
    const PAGE: u32 = 1;
    const STILL: u32 = 2;
    let n = 40 * crate::tags::CHUNK + 7;
    for i in 0..n {
        let tags = [
            Tag { ty: PAGE, value: 1 },
            Tag {
                ty: STILL,
                value: 1,
            },
        ];
        put(&s, format!("g{i}").as_bytes(), &tags, None);
    }
    // One already past its deadline: removed too, as an expiry, and not counted.
    put(
        &s,
        b"late",
        &[Tag { ty: PAGE, value: 1 }],
        Some(now_ms() - 1),
    );
    put(&s, b"other", &[Tag { ty: PAGE, value: 2 }], None);
    tap.seen.lock().clear();
    tap.calls.lock().clear();
    // Meanwhile a writer rewrites members of the group (their shards' references go stale,
    // which makes the delete evaluate those shards again under their locks), and a group reader
    // must see the untouched members all there or all gone.
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (s, stop) = (s.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0u32;
            while !stop.load(Ordering::Relaxed) {
                put(
                    &s,
                    format!("w{}", i % 64).as_bytes(),
                    &[Tag { ty: PAGE, value: 1 }],
                    None,
                );
                i += 1;
            }
        })
    };
    let reader = {
        let (s, stop) = (s.clone(), stop.clone());
        std::thread::spawn(move || {
            let still = Query {
                predicates: vec![Predicate {
                    ty: STILL,
                    op: Op::Eq(1),
                }],
            };
            while !stop.load(Ordering::Relaxed) {
                let count = s.tag_read(&still, |items| items.count());
                assert!(count == 0 || count == n, "a group read saw {count} of {n}");
            }
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(20));
    let query = Query {
        predicates: vec![Predicate {
            ty: PAGE,
            op: Op::Eq(1),
        }],
    };
    let live = s.tag_delete(Author(3), &query);
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    reader.join().unwrap();
    assert!(live >= n, "{live} live records deleted, {n} at least");
    for i in 0..n {
        assert!(s.peek(format!("g{i}").as_bytes(), |i| i.is_none()));
    }
    assert!(s.peek(b"late", |i| i.is_none()));
    assert!(s.peek(b"other", |i| i.is_some()));
    let seen = tap.seen.lock();
    let group: Vec<_> = seen.iter().filter(|c| c.2.starts_with(b"g")).collect();
    assert_eq!(group.len(), n, "the tap heard of every member once");
    assert!(seen.iter().any(|c| c.2 == b"late" && c.3));
    in_order(&seen);
    // Told chunk by chunk: no call larger than a chunk's records (plus a re-evaluated shard).
    let calls = tap.calls.lock();
    assert!(calls.iter().filter(|&&c| c > 1).count() >= 5, "{calls:?}");
}
