//! Change stream tests: numbering per shard, kinds and authors, the backlog's bound and lag,
//! nothing kept without a consumer, the tap's batches, and a replay of the stream into an empty
//! store that must end up holding what the original holds.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use parking_lot::Mutex;
use proptest::prelude::*;

use crate::{
    now_ms, Author, Change, ChangeRecord, ChangeTap, Cursor, Kind, Op, Predicate, Query,
    RecordKind, Store, StoreConfig, Tag, TagWrite,
};

fn store(maxmemory: u64, change_backlog: u64) -> Arc<Store> {
    Store::new(StoreConfig {
        shards: 8,
        maxmemory,
        policy: crate::EvictionPolicy::AllKeysLru,
        background: false,
        change_backlog,
        cas: true,
    })
}

fn set(s: &Store, author: Author, key: &[u8], value: &[u8]) {
    s.write(author, key, |e| e.put(Kind::String, value, None, 0))
        .unwrap();
}

/// Every record after the cursor, log by log: (log, record's seq, kind, key, author).
fn drain(cursor: &mut Cursor) -> Vec<(usize, u64, RecordKind, Vec<u8>, Author)> {
    let mut out = Vec::new();
    for log in 0..cursor.logs() {
        cursor
            .read(log, usize::MAX, |r| {
                out.push((log, r.seq, r.kind, r.key().to_vec(), r.author))
            })
            .unwrap();
    }
    out
}

fn shard_of(s: &Store, key: &[u8]) -> usize {
    s.shard_of(s.hash(key))
}

#[test]
fn changes_are_numbered_in_order_per_shard() {
    let s = store(0, 1 << 20);
    set(&s, Author::SERVER, b"before", b"x");
    let start = s.positions();
    let mut cursor = s.subscribe();
    for (i, position) in cursor.position().iter().enumerate() {
        assert_eq!(*position, start[i] + 1, "the cursor starts after the cut");
    }
    for i in 0..200u32 {
        set(
            &s,
            Author(1),
            format!("k{}", i % 50).as_bytes(),
            &i.to_le_bytes(),
        );
    }
    let records = drain(&mut cursor);
    assert_eq!(records.len(), 200);
    let mut last: HashMap<usize, u64> = HashMap::new();
    for (log, seq, kind, key, _) in &records {
        assert_eq!(*kind, RecordKind::Set);
        assert_eq!(
            shard_of(&s, key),
            *log,
            "a key's changes are in its shard's log"
        );
        let expected = last.get(log).map_or(start[*log] + 1, |l| l + 1);
        assert_eq!(*seq, expected, "consecutive numbers in log {log}");
        last.insert(*log, *seq);
    }
    let end = s.positions();
    for (log, seq) in last {
        assert_eq!(end[log], seq);
    }
}

#[test]
fn nothing_is_kept_without_a_consumer() {
    let s = store(0, 1 << 20);
    for i in 0..100u32 {
        set(&s, Author::SERVER, &i.to_le_bytes(), b"value");
    }
    assert_eq!(s.change_backlog_memory(), 0);
    let numbered: u64 = s.positions().iter().sum();
    assert_eq!(
        numbered, 100,
        "changes are numbered even when nobody reads them"
    );
    let cursor = s.subscribe();
    set(&s, Author::SERVER, b"k", b"value");
    assert!(s.change_backlog_memory() > 0);
    let second = s.subscribe();
    drop(cursor);
    assert!(
        s.change_backlog_memory() > 0,
        "another cursor still needs it"
    );
    drop(second);
    assert_eq!(s.change_backlog_memory(), 0, "freed with the last cursor");
    set(&s, Author::SERVER, b"k", b"again");
    assert_eq!(s.change_backlog_memory(), 0);
    assert_eq!(s.stats().change_backlog, 0);
}

#[test]
fn backlog_is_bounded_and_a_slow_cursor_lags() {
    // 9 logs (8 shards and SQL) of 1000 bytes each.
    let s = store(0, 9 * 1000);
    let mut slow = s.subscribe();
    let mut fast = s.subscribe();
    let log = shard_of(&s, b"hot");
    let value = [7u8; 100];
    for _ in 0..100 {
        set(&s, Author::SERVER, b"hot", &value);
        let mut got = 0;
        fast.read(log, usize::MAX, |r| {
            assert_eq!(r.item().unwrap().value(), &value);
            got += 1;
        })
        .unwrap();
        assert_eq!(got, 1, "a cursor that keeps up reads every change");
        assert!(s.change_backlog_memory() <= 1000);
    }
    let err = slow.read(log, usize::MAX, |_| {}).unwrap_err();
    assert_eq!(err.log, log);
    assert_eq!(err.wanted, 1);
    assert!(err.oldest > 90, "only the newest few are kept: {err:?}");
    // A record larger than a log's share empties the log: everyone behind it lags.
    set(&s, Author::SERVER, b"hot", &[1u8; 2000]);
    assert_eq!(s.change_backlog_memory(), 0);
    assert!(fast.read(log, usize::MAX, |_| {}).is_err());
}

#[test]
fn kinds_and_authors_are_recorded() {
    let s = store(0, 1 << 20);
    let mut cursor = s.subscribe();
    let past = now_ms() - 1000;
    let later = now_ms() + 3_600_000;
    set(&s, Author(1), b"a", b"1");
    s.write(Author(2), b"a", |e| e.set_expire(Some(later)));
    s.write(Author(3), b"a", |e| e.set_expire_keep_cas(None));
    s.write(Author(4), b"a", |e| e.set_cas(12345));
    s.write(Author(4), b"a", |e| e.set_cas(12345)); // unchanged: no record
    s.write(Author(5), b"a", |e| e.remove());
    s.write(Author(5), b"a", |e| e.remove()); // nothing there: no record
    s.write(Author(6), b"b", |e| {
        e.put(Kind::String, b"2", Some(past), 0)
    })
    .unwrap();
    s.write(Author(7), b"b", |e| e.exists()); // lazily expired by client 7's access
    s.write(Author(6), b"c", |e| {
        e.put(Kind::String, b"3", Some(past), 0)
    })
    .unwrap();
    s.expire_round();
    let mut a: Vec<_> = drain(&mut cursor)
        .into_iter()
        .map(|(_, _, kind, key, author)| (key, kind, author))
        .collect();
    // Each key lives in one log, so per key the order is the order of the changes.
    a.sort_by(|x, y| x.0.cmp(&y.0));
    let cas_of_ttl = |k: &RecordKind| match k {
        RecordKind::Ttl { expire_at, .. } => *expire_at,
        other => panic!("not a TTL change: {other:?}"),
    };
    assert_eq!(a[0].1, RecordKind::Set);
    assert_eq!(a[0].2, Author(1));
    assert_eq!(cas_of_ttl(&a[1].1), Some(later));
    assert_eq!(a[1].2, Author(2));
    assert_eq!(cas_of_ttl(&a[2].1), None);
    assert_eq!(a[2].2, Author(3));
    assert_eq!((a[3].1, a[3].2), (RecordKind::Cas(12345), Author(4)));
    assert_eq!((a[4].1, a[4].2), (RecordKind::Delete, Author(5)));
    let rest: Vec<_> = a[5..]
        .iter()
        .map(|(k, kind, author)| (k.as_slice(), *kind, *author))
        .collect();
    assert_eq!(
        rest,
        vec![
            (&b"b"[..], RecordKind::Set, Author(6)),
            (&b"b"[..], RecordKind::Expire, Author(7)),
            (&b"c"[..], RecordKind::Set, Author(6)),
            (&b"c"[..], RecordKind::Expire, Author::SERVER),
        ]
    );
}

#[test]
fn a_deadline_rebuild_is_a_ttl_change_not_a_set() {
    let s = store(0, 1 << 20);
    set(&s, Author(1), b"k", b"v"); // no deadline field: EXPIRE rebuilds the record
    let mut cursor = s.subscribe();
    let later = now_ms() + 3_600_000;
    assert!(s.write(Author(1), b"k", |e| e.set_expire(Some(later))));
    let records = drain(&mut cursor);
    assert_eq!(records.len(), 1);
    assert!(matches!(
        records[0].2,
        RecordKind::Ttl { expire_at: Some(d), .. } if d == later
    ));
}

#[test]
fn flush_records_one_flush_per_shard_and_evictions_are_recorded() {
    let s = store(0, 1 << 20);
    let mut cursor = s.subscribe();
    set(&s, Author(1), b"k", b"v");
    s.flush_by(Author(9));
    let flushes: Vec<_> = drain(&mut cursor)
        .into_iter()
        .filter(|r| r.2 == RecordKind::Flush)
        .collect();
    assert_eq!(flushes.len(), s.shard_count());
    assert!(flushes.iter().all(|r| r.4 == Author(9) && r.3.is_empty()));
    s.set_maxmemory(s.used_memory() + 2000);
    for i in 0..200u32 {
        set(&s, Author(1), &i.to_le_bytes(), &[0u8; 100]);
    }
    let records = drain(&mut cursor);
    let evicted = records.iter().filter(|r| r.2 == RecordKind::Evict).count();
    assert!(evicted >= 100, "{evicted} evictions recorded");
    assert!(records
        .iter()
        .filter(|r| r.2 == RecordKind::Evict)
        .all(|r| r.4 == Author::SERVER));
    assert_eq!(evicted as u64, s.stats().evicted);
}

#[test]
fn sql_statements_have_their_own_log() {
    let s = store(0, 1 << 20);
    let mut cursor = s.subscribe();
    s.record_sql(Author(3), b"INSERT INTO t VALUES (1)");
    let mut got = Vec::new();
    cursor
        .read(s.sql_log(), 10, |r| {
            got.push((r.seq, r.kind, r.key().to_vec(), r.author))
        })
        .unwrap();
    assert_eq!(
        got,
        vec![(
            1,
            RecordKind::Sql,
            b"INSERT INTO t VALUES (1)".to_vec(),
            Author(3)
        )]
    );
}

/// Keeps what the tap is told, as (keys per call, flushes).
#[derive(Default)]
struct Recorder {
    calls: Mutex<Vec<(Vec<Vec<u8>>, Author)>>,
    flushes: Mutex<Vec<Author>>,
}

impl ChangeTap for Recorder {
    fn changed(&self, changes: &[Change<'_>]) {
        let keys = changes.iter().map(|c| c.key.to_vec()).collect();
        self.calls.lock().push((keys, changes[0].author));
    }
    fn flushed(&self, author: Author, _seqs: &[u64]) {
        self.flushes.lock().push(author);
    }
}

#[test]
fn the_tap_hears_each_change_a_group_delete_at_once_and_a_flush_once() {
    let s = store(0, 1 << 20);
    let tap = Arc::new(Recorder::default());
    s.set_tap(tap.clone());
    set(&s, Author(1), b"quiet", b"v");
    assert!(tap.calls.lock().is_empty(), "not called until listening");
    s.set_listening(crate::Listener::Tracking, true);
    let tagged = [Tag { ty: 1, value: 5 }];
    for k in [&b"t1"[..], b"t2", b"t3"] {
        s.write(Author(2), k, |e| {
            e.put_record(Kind::String, 1, None, 0, TagWrite::Set(&tagged), |b, _| {
                b[0] = b'x'
            })
        })
        .unwrap();
    }
    let query = Query {
        predicates: vec![Predicate {
            ty: 1,
            op: Op::Eq(5),
        }],
    };
    assert_eq!(s.tag_delete(Author(3), &query), 3);
    s.flush_by(Author(4));
    let calls = tap.calls.lock().clone();
    assert_eq!(calls.len(), 4);
    assert_eq!(calls[0], (vec![b"t1".to_vec()], Author(2)));
    let mut group = calls[3].0.clone();
    group.sort();
    assert_eq!(
        (group, calls[3].1),
        (
            vec![b"t1".to_vec(), b"t2".to_vec(), b"t3".to_vec()],
            Author(3)
        )
    );
    assert_eq!(*tap.flushes.lock(), vec![Author(4)]);
    s.set_listening(crate::Listener::Tracking, false);
    set(&s, Author(1), b"quiet", b"w");
    assert_eq!(tap.calls.lock().len(), 4);
}

/// One operation of the replay property.
#[derive(Debug, Clone)]
enum StreamOp {
    Set {
        key: u8,
        value: Vec<u8>,
        deadline: u8,
        tag: Option<i64>,
        flags: u32,
        hash: bool,
    },
    Append(u8, Vec<u8>),
    Del(u8),
    Expire(u8, u8),
    Touch(u8, u8),
    ClientCas(u8, u64),
    TagDel(i64),
    Flush,
    ExpireRound,
}

fn stream_op() -> impl Strategy<Value = StreamOp> {
    let key = 0u8..40;
    prop_oneof![
        6 => (key.clone(), proptest::collection::vec(any::<u8>(), 0..120), 0u8..3,
              proptest::option::of(0i64..3), prop_oneof![Just(0u32), any::<u32>()], any::<bool>())
            .prop_map(|(key, value, deadline, tag, flags, hash)| StreamOp::Set {
                key, value, deadline, tag, flags, hash
            }),
        2 => (key.clone(), proptest::collection::vec(any::<u8>(), 0..30))
            .prop_map(|(k, v)| StreamOp::Append(k, v)),
        2 => key.clone().prop_map(StreamOp::Del),
        2 => (key.clone(), 0u8..3).prop_map(|(k, d)| StreamOp::Expire(k, d)),
        1 => (key.clone(), 0u8..3).prop_map(|(k, d)| StreamOp::Touch(k, d)),
        1 => (key, any::<u64>()).prop_map(|(k, c)| StreamOp::ClientCas(k, c)),
        1 => (0i64..3).prop_map(StreamOp::TagDel),
        1 => Just(StreamOp::Flush),
        1 => Just(StreamOp::ExpireRound),
    ]
}

/// No deadline, one long past, or one far off: the property must not depend on the clock
/// crossing a deadline between the original and the replay.
fn deadline(choice: u8) -> Option<u64> {
    match choice {
        0 => None,
        1 => Some(now_ms() - 10_000),
        _ => Some(now_ms() + 3_600_000),
    }
}

fn run(s: &Store, op: &StreamOp) {
    let author = Author(1);
    let name = |k: u8| vec![b'k', k];
    match op {
        StreamOp::Set {
            key,
            value,
            deadline: d,
            tag,
            flags,
            hash,
        } => {
            let tags: Vec<Tag> = tag.iter().map(|&v| Tag { ty: 1, value: v }).collect();
            let kind = if *hash { Kind::Hash } else { Kind::String };
            // Under the memory limit a write may be refused: nothing changes then.
            let _ = s.write(author, &name(*key), |e| {
                e.put_record(
                    kind,
                    value.len(),
                    deadline(*d),
                    *flags,
                    TagWrite::Set(&tags),
                    |b, _| b.copy_from_slice(value),
                )
            });
        }
        StreamOp::Append(key, extra) => {
            let _ = s.write(author, &name(*key), |e| {
                let (old, deadline, flags) = e.item().map_or((Vec::new(), None, 0), |i| {
                    (i.value().to_vec(), i.expire_at(), i.flags())
                });
                e.put_with(
                    Kind::String,
                    old.len() + extra.len(),
                    deadline,
                    flags,
                    |b, _| {
                        b[..old.len()].copy_from_slice(&old);
                        b[old.len()..].copy_from_slice(extra);
                    },
                )
            });
        }
        StreamOp::Del(key) => {
            s.write(author, &name(*key), |e| e.remove());
        }
        StreamOp::Expire(key, d) => {
            s.write(author, &name(*key), |e| e.set_expire(deadline(*d)));
        }
        StreamOp::Touch(key, d) => {
            s.write(author, &name(*key), |e| e.set_expire_keep_cas(deadline(*d)));
        }
        StreamOp::ClientCas(key, cas) => {
            s.write(author, &name(*key), |e| e.set_cas(*cas));
        }
        StreamOp::TagDel(value) => {
            let query = Query {
                predicates: vec![Predicate {
                    ty: 1,
                    op: Op::Eq(*value),
                }],
            };
            s.tag_delete(author, &query);
        }
        StreamOp::Flush => s.flush_by(author),
        StreamOp::ExpireRound => {
            s.expire_round();
        }
    }
}

/// Applies one record of `log` to `replica`; `keys_of` remembers which log each key the
/// replica holds came from, so that a shard's flush removes exactly that shard's keys.
fn apply(
    replica: &Store,
    log: usize,
    record: &ChangeRecord,
    keys_of: &mut HashMap<usize, HashSet<Vec<u8>>>,
) {
    let author = record.author;
    let key = record.key();
    match record.kind {
        RecordKind::Set => {
            let item = record.item().unwrap();
            let tags: Vec<Tag> = item.tags().collect();
            replica
                .write(author, key, |e| {
                    e.put_record(
                        item.kind(),
                        item.value().len(),
                        item.expire_at(),
                        item.flags(),
                        TagWrite::Set(&tags),
                        |b, _| b.copy_from_slice(item.value()),
                    )
                })
                .unwrap();
            keys_of.entry(log).or_default().insert(key.to_vec());
        }
        RecordKind::Ttl { expire_at, .. } => {
            assert!(replica.write(author, key, |e| e.set_expire(expire_at)));
        }
        RecordKind::Cas(cas) => {
            assert!(replica.write(author, key, |e| e.set_cas(cas)));
        }
        RecordKind::Delete | RecordKind::Expire | RecordKind::Evict => {
            replica.write(author, key, |e| e.remove());
            keys_of.entry(log).or_default().remove(key);
        }
        RecordKind::Flush => {
            for key in keys_of.remove(&log).unwrap_or_default() {
                replica.write(author, &key, |e| e.remove());
            }
        }
        RecordKind::Sql => {}
    }
}

type Snapshot = BTreeMap<Vec<u8>, (Vec<u8>, Kind, u32, Vec<Tag>, Option<u64>)>;

/// Every record the tables hold, expired ones not yet removed included, with what a client
/// can see of it (CAS values are each store's own).
fn snapshot(s: &Store) -> Snapshot {
    let mut out = BTreeMap::new();
    for index in 0..s.shard_count() {
        let shard = s.cell(index).lock.read();
        for slot in 0..shard.table.capacity() {
            if let Some(ptr) = shard.table.item_at(slot) {
                let i = crate::Item::new(ptr);
                out.insert(
                    i.key().to_vec(),
                    (
                        i.value().to_vec(),
                        i.kind(),
                        i.flags(),
                        i.tags().collect(),
                        i.expire_at(),
                    ),
                );
            }
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever the writes, removals, expiries, evictions, group deletes and flushes, replaying
    /// the stream into an empty store gives it the same live records.
    #[test]
    fn replaying_the_stream_rebuilds_the_store(
        ops in proptest::collection::vec(stream_op(), 1..300),
        small in any::<bool>(),
    ) {
        // A small memory limit makes writes evict (and the 8 empty tables take about 1 KiB).
        let original = store(if small { 6000 } else { 0 }, 64 << 20);
        let replica = store(0, 0);
        let mut cursor = original.subscribe();
        let mut keys_of = HashMap::new();
        for (i, op) in ops.iter().enumerate() {
            run(&original, op);
            // Reading as it goes or all at the end must not matter.
            if i % 7 == 0 {
                for log in 0..cursor.logs() {
                    cursor.read(log, usize::MAX, |r| apply(&replica, log, r, &mut keys_of)).unwrap();
                }
            }
        }
        for log in 0..cursor.logs() {
            cursor.read(log, usize::MAX, |r| apply(&replica, log, r, &mut keys_of)).unwrap();
        }
        prop_assert_eq!(snapshot(&original), snapshot(&replica));
        prop_assert_eq!(original.positions(), cursor.position().iter().map(|p| p - 1).collect::<Vec<_>>());
    }
}

fn set_sixteen_by_thirty_two(s: &Store, n: u32) {
    for i in 0..n {
        let key = format!("key:{i:012}");
        set(s, Author::SERVER, key.as_bytes(), &[b'v'; 32]);
    }
}

/// The figure docs/architecture.md gives: 56 bytes of record plus the copy of the record
/// (8 bytes of header, the key and the value, rounded to 8): 112 bytes per SET of 16 + 32.
#[test]
fn a_backlog_record_costs_its_overhead_and_its_copy() {
    #[cfg(target_pointer_width = "64")]
    assert_eq!(crate::changes::RECORD_OVERHEAD, 56);
    let s = store(0, 64 << 20);
    let cursor = s.subscribe();
    set_sixteen_by_thirty_two(&s, 1000);
    assert_eq!(
        s.change_backlog_memory(),
        1000 * (crate::changes::RECORD_OVERHEAD as u64 + 56)
    );
    drop(cursor);
}

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    statm
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<u64>()
        .unwrap()
        * 4096
}

/// What the process really holds per backlog record (ring slack and allocator included):
/// `cargo test --release -p cairn-store backlog_rss -- --ignored --nocapture`.
#[test]
#[ignore]
fn backlog_rss_per_record() {
    const N: u32 = 200_000;
    let s = store(0, 1 << 40);
    set_sixteen_by_thirty_two(&s, N);
    let before = rss_bytes();
    let cursor = s.subscribe();
    set_sixteen_by_thirty_two(&s, N);
    let after = rss_bytes();
    println!(
        "backlog: {} B counted, {:.1} B counted per record, {:.1} B of RSS per record",
        s.change_backlog_memory(),
        s.change_backlog_memory() as f64 / N as f64,
        (after - before) as f64 / N as f64
    );
    drop(cursor);
}
