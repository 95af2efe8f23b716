//! Engine tests: the store against a `HashMap` model, deadlines, eviction and SCAN invariants.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use proptest::prelude::*;

use crate::{now_ms, Author, Db, Kind, Store, StoreConfig};

/// The author of the writes in these tests: nothing here listens for changes.
const A: Author = Author::SERVER;

fn store(maxmemory: u64, evict: bool) -> Arc<Store> {
    Store::new(StoreConfig {
        shards: 8,
        maxmemory,
        policy: if evict {
            crate::EvictionPolicy::AllKeysLru
        } else {
            crate::EvictionPolicy::NoEviction
        },
        background: false,
        ..StoreConfig::default()
    })
}

fn get(store: &Store, key: &[u8]) -> Option<Vec<u8>> {
    store.read(key, |item| item.map(|i| i.value().to_vec()))
}

#[derive(Debug, Clone)]
enum Op {
    Set(u8, Vec<u8>),
    Del(u8),
    Append(u8, Vec<u8>),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (any::<u8>(), proptest::collection::vec(any::<u8>(), 0..100))
            .prop_map(|(k, v)| Op::Set(k, v)),
        any::<u8>().prop_map(Op::Del),
        (any::<u8>(), proptest::collection::vec(any::<u8>(), 0..20))
            .prop_map(|(k, v)| Op::Append(k, v)),
    ]
}

proptest! {
    #[test]
    fn store_matches_hashmap_model(ops in proptest::collection::vec(op(), 0..400)) {
        let s = store(0, true);
        let mut model: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
        for op in ops {
            match op {
                Op::Set(k, v) => {
                    let key = vec![k; (k % 7) as usize + 1];
                    s.write(A, &key, |e| e.put(Kind::String, &v, None, 0)).unwrap();
                    model.insert(key, v);
                }
                Op::Del(k) => {
                    let key = vec![k; (k % 7) as usize + 1];
                    let had = s.write(A, &key, |e| e.remove());
                    prop_assert_eq!(had, model.remove(&key).is_some());
                }
                Op::Append(k, v) => {
                    let key = vec![k; (k % 7) as usize + 1];
                    s.write(A, &key, |e| {
                        let old_len = e.item().map_or(0, |i| i.value().len());
                        e.put_with(Kind::String, old_len + v.len(), None, 0, |buf, old| {
                            if let Some(old) = old { buf[..old_len].copy_from_slice(old.value()); }
                            buf[old_len..].copy_from_slice(&v);
                        })
                    }).unwrap();
                    model.entry(key).or_default().extend_from_slice(&v);
                }
            }
        }
        prop_assert_eq!(s.len(), model.len());
        for (k, v) in &model {
            let got = get(&s, k);
            prop_assert_eq!(got.as_ref(), Some(v));
        }
        // Memory accounting returns to the bare tables once everything is deleted.
        for k in model.keys() {
            s.write(A, k, |e| e.remove());
        }
        let bare: usize = (0..s.shard_count()).map(|i| s.cell(i).lock.read().table.bytes()).sum();
        prop_assert_eq!(s.used_memory() as usize, bare);
    }
}

#[test]
fn deadlines_hide_and_expiry_removes() {
    let s = store(0, true);
    let past = now_ms() - 1;
    s.write(A, b"gone", |e| e.put(Kind::String, b"v", Some(past), 0))
        .unwrap();
    s.write(A, b"kept", |e| {
        e.put(Kind::String, b"v", Some(now_ms() + 60_000), 0)
    })
    .unwrap();
    s.write(A, b"plain", |e| e.put(Kind::String, b"v", None, 0))
        .unwrap();
    assert_eq!(get(&s, b"gone"), None);
    assert_eq!(get(&s, b"kept").as_deref(), Some(&b"v"[..]));
    assert_eq!(
        s.len(),
        3,
        "expired record stays until removed, like DBSIZE in Redis"
    );
    assert_eq!(s.expire_round(), 1);
    assert_eq!(s.len(), 2);
    assert_eq!(s.stats().expired, 1);
}

/// One shard's store: its CAS values are its write counter itself (`cas_of`).
fn one_shard_store() -> Arc<Store> {
    Store::new(StoreConfig {
        shards: 1,
        background: false,
        ..StoreConfig::default()
    })
}

/// With one shard the CAS is the shard's 32-bit write counter: it wraps past 2^32 - 1 to 1 (0
/// means "no CAS" to memcached clients), and a load raises it above the loaded CAS.
#[test]
fn the_cas_counter_wraps_to_one_and_a_load_raises_it() {
    let s = one_shard_store();
    let cas = |s: &Store| {
        s.write(A, b"k", |e| e.put(Kind::String, b"v", None, 0))
            .unwrap()
    };
    assert_eq!(cas(&s), 1);
    s.raise_cas_above(u64::from(u32::MAX) - 2);
    let seen: Vec<u64> = (0..3).map(|_| cas(&s)).collect();
    assert_eq!(seen, [u64::from(u32::MAX) - 1, u64::from(u32::MAX), 1]);
    assert_eq!(s.read(b"k", |i| i.unwrap().cas()), 1);
    // A CAS above 32 bits is never given, so loading one changes nothing.
    s.raise_cas_above(1 << 40);
    assert_eq!(cas(&s), 2);
    // A loaded record raises its own shard's counter, whatever else the load held.
    let loaded = |s: &Store, key: &[u8], c: u64| {
        s.write(A, key, |e| {
            e.put_loaded(Kind::String, b"v", None, 0, c, &[])
        })
        .unwrap()
    };
    let s = one_shard_store();
    loaded(&s, b"wide", 1 << 40);
    loaded(&s, b"k", 5000);
    s.raise_cas_above(1 << 40);
    assert_eq!(s.read(b"k", |i| i.unwrap().cas()), 5000);
    assert_eq!(cas(&s), 5001);
}

/// As in memcached, no two keys show the same CAS, whichever shards they are in (the shards'
/// counters are interleaved), and a load raises every shard's above the loaded CAS.
#[test]
fn keys_of_different_shards_never_share_a_cas() {
    let s = store(0, false);
    let mut seen = std::collections::HashSet::new();
    for i in 0..2000 {
        let key = format!("k{}", i % 500);
        let cas = s
            .write(A, key.as_bytes(), |e| e.put(Kind::String, b"v", None, 0))
            .unwrap();
        assert!(cas != 0 && seen.insert(cas), "CAS {cas} given twice");
    }
    s.raise_cas_above(1_000_000);
    for i in 0..64 {
        let key = format!("after{i}");
        let cas = s
            .write(A, key.as_bytes(), |e| e.put(Kind::String, b"v", None, 0))
            .unwrap();
        assert!(
            cas > 1_000_000 && seen.insert(cas),
            "CAS {cas} after the raise"
        );
    }
}

#[test]
fn set_expire_in_place_and_by_rebuild() {
    let s = store(0, true);
    s.write(A, b"k", |e| e.put(Kind::String, b"value", None, 7))
        .unwrap();
    let cas0 = s.read(b"k", |i| i.unwrap().cas());
    let deadline = now_ms() + 10_000;
    assert!(s.write(A, b"k", |e| e.set_expire(Some(deadline))));
    let (exp, cas1, flags, value) = s.read(b"k", |i| {
        let i = i.unwrap();
        (i.expire_at(), i.cas(), i.flags(), i.value().to_vec())
    });
    assert_eq!(exp, Some(deadline));
    assert_ne!(cas0, cas1);
    assert_eq!((flags, &value[..]), (7, &b"value"[..]));
    assert!(s.write(A, b"k", |e| e.set_expire(None)));
    assert_eq!(s.read(b"k", |i| i.unwrap().expire_at()), None);
    assert!(s.write(A, b"k", |e| e.set_expire(Some(now_ms() - 1))));
    assert_eq!(get(&s, b"k"), None);
    assert!(!s.write(A, b"absent", |e| e.set_expire(None)));
}

#[test]
fn noeviction_refuses_writes_past_the_limit() {
    let s = store(64 * 1024, false);
    let value = vec![0u8; 1000];
    let mut stored = 0;
    for i in 0..1000u32 {
        match s.write(A, &i.to_le_bytes(), |e| {
            e.put(Kind::String, &value, None, 0)
        }) {
            Ok(_) => stored += 1,
            Err(_) => break,
        }
    }
    assert!(stored > 10 && stored < 64, "stored {stored}");
    assert!(s.used_memory() <= 64 * 1024);
    // Deleting still works, and frees room (for a smaller value: the shard's table may have to
    // grow, and that counts too).
    assert!(s.write(A, &0u32.to_le_bytes(), |e| e.remove()));
    assert!(s
        .write(A, &0u32.to_le_bytes(), |e| e.put(
            Kind::String,
            &value[..500],
            None,
            0
        ))
        .is_ok());
}

#[test]
fn eviction_keeps_memory_under_the_limit_and_prefers_unvisited() {
    let limit = 256 * 1024;
    let s = store(limit, true);
    let value = vec![1u8; 500];
    s.write(A, b"hot", |e| e.put(Kind::String, &value, None, 0))
        .unwrap();
    for i in 0..5000u32 {
        s.write(A, &i.to_le_bytes(), |e| {
            e.put(Kind::String, &value, None, 0)
        })
        .unwrap();
        assert!(s.used_memory() <= limit, "used {} at {i}", s.used_memory());
        get(&s, b"hot");
    }
    assert!(s.stats().evicted > 4000);
    assert!(
        get(&s, b"hot").is_some(),
        "a record read between sweeps keeps its second chance"
    );
}

#[test]
fn value_larger_than_memory_is_refused_even_with_eviction() {
    let s = store(64 * 1024, true);
    let big = vec![0u8; 100 * 1024];
    assert!(s
        .write(A, b"big", |e| e.put(Kind::String, &big, None, 0))
        .is_err());
}

#[test]
fn scan_returns_every_key_across_resizes() {
    let s = store(0, true);
    for i in 0..2000u32 {
        s.write(A, format!("k{i}").as_bytes(), |e| {
            e.put(Kind::String, b"v", None, 0)
        })
        .unwrap();
    }
    let mut seen = HashSet::new();
    let mut cursor = 0;
    let mut step = 0;
    loop {
        cursor = Db::Shared(&s, A).scan(cursor, 10, |item| {
            seen.insert(item.key().to_vec());
        });
        step += 1;
        // Grow the keyspace mid-iteration: the original keys must still all be returned.
        if step == 20 {
            for i in 2000..20_000u32 {
                s.write(A, format!("k{i}").as_bytes(), |e| {
                    e.put(Kind::String, b"v", None, 0)
                })
                .unwrap();
            }
        }
        if cursor == 0 {
            break;
        }
    }
    for i in 0..2000u32 {
        assert!(seen.contains(format!("k{i}").as_bytes()), "k{i} missed");
    }
}

#[test]
fn flush_empties_and_releases_memory() {
    let s = store(0, true);
    for i in 0..1000u32 {
        s.write(A, &i.to_le_bytes(), |e| {
            e.put(Kind::String, &[0u8; 100], None, 0)
        })
        .unwrap();
    }
    let before = s.used_memory();
    s.flush();
    assert_eq!(s.len(), 0);
    assert!(s.used_memory() < before / 10);
    assert_eq!(get(&s, &1u32.to_le_bytes()), None);
}

#[test]
fn locked_shards_give_atomic_multi_key_updates() {
    let s = store(0, true);
    for k in [&b"a"[..], b"b"] {
        s.write(A, k, |e| e.put(Kind::String, b"0", None, 0))
            .unwrap();
    }
    let writer = {
        let s = s.clone();
        std::thread::spawn(move || {
            for n in 1..=2000u32 {
                let mut locked = s.lock_keys(A, [&b"a"[..], b"b"]);
                for k in [&b"a"[..], b"b"] {
                    locked
                        .write(k, |e| {
                            e.put(Kind::String, n.to_string().as_bytes(), None, 0)
                        })
                        .unwrap();
                }
            }
        })
    };
    for _ in 0..2000 {
        let mut locked = s.lock_keys(A, [&b"b"[..], b"a"]);
        let a = locked.read(b"a", |i| i.unwrap().value().to_vec());
        let b = locked.read(b"b", |i| i.unwrap().value().to_vec());
        assert_eq!(a, b);
    }
    writer.join().unwrap();
}

#[test]
fn concurrent_readers_and_writers_keep_the_table_consistent() {
    let s = Store::new(StoreConfig {
        shards: 4,
        maxmemory: 1 << 20,
        policy: crate::EvictionPolicy::AllKeysLru,
        background: true,
        ..StoreConfig::default()
    });
    let threads: Vec<_> = (0..4u32)
        .map(|t| {
            let s = s.clone();
            std::thread::spawn(move || {
                for i in 0..20_000u32 {
                    let key = ((i * 7 + t) % 3000).to_le_bytes();
                    match i % 4 {
                        0 => drop(s.write(A, &key, |e| {
                            e.put(Kind::String, &key, Some(now_ms() + 5), 0)
                        })),
                        1 => drop(s.write(A, &key, |e| e.remove())),
                        _ => {
                            if let Some(v) = get(&s, &key) {
                                assert_eq!(v, key, "a record's value belongs to its key");
                            }
                        }
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert!(s.used_memory() <= 1 << 20);
}

/// `--cas no`: records carry no CAS (0 to clients, 8 bytes smaller), and WATCH's version moves
/// with every change to the key: write, deadline (in place or not), memcached touch, delete.
#[test]
fn a_store_without_cas_still_versions_every_change_for_watch() {
    let s = Store::new(StoreConfig {
        shards: 1,
        background: false,
        cas: false,
        ..StoreConfig::default()
    });
    assert!(!s.keeps_cas());
    let cas = s
        .write(A, b"k", |e| e.put(Kind::String, b"v", None, 0))
        .unwrap();
    assert_eq!(cas, 0);
    s.read(b"k", |i| {
        let i = i.unwrap();
        assert_eq!((i.cas(), i.has_cas(), i.value()), (0, false, &b"v"[..]));
    });
    let mut seen = vec![s.watch_version(b"k").unwrap()];
    let deadline = now_ms() + 100_000;
    let changes: [&dyn Fn(); 5] = [
        &|| {
            s.write(A, b"k", |e| e.put(Kind::String, b"w", None, 0))
                .unwrap();
        },
        &|| assert!(s.write(A, b"k", |e| e.set_expire(Some(deadline)))),
        &|| assert!(s.write(A, b"k", |e| e.set_expire(Some(deadline + 1)))),
        &|| assert!(s.write(A, b"k", |e| e.set_expire_keep_cas(Some(deadline + 2)))),
        &|| {
            s.write(A, b"k", |e| e.remove());
            s.write(A, b"k", |e| e.put(Kind::String, b"v", None, 0))
                .unwrap();
        },
    ];
    for change in changes {
        change();
        let now = s.watch_version(b"k").unwrap();
        assert!(!seen.contains(&now), "{now} already seen in {seen:?}");
        seen.push(now);
    }
    // A client's CAS has nowhere to go: accepted, nothing changes.
    assert!(s.write(A, b"k", |e| e.set_cas(5)));
    s.read(b"k", |i| assert_eq!(i.unwrap().cas(), 0));
    assert_eq!(s.watch_version(b"missing"), None);
}

mod tag_tests {
    use super::*;
    use crate::{Op, Predicate, Query, Tag, TagWrite};

    fn tag(ty: u32, value: i64) -> Tag {
        Tag { ty, value }
    }

    fn put_tagged(s: &Store, key: &[u8], tags: &[Tag], deadline: Option<u64>) {
        s.write(A, key, |e| {
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

    fn q(preds: &[(u32, Op)]) -> Query {
        Query {
            predicates: preds.iter().map(|&(ty, op)| Predicate { ty, op }).collect(),
        }
    }

    fn keys(s: &Store, query: &Query) -> Vec<Vec<u8>> {
        let mut k: Vec<Vec<u8>> =
            s.tag_read(query, |items| items.map(|i| i.key().to_vec()).collect());
        k.sort();
        k
    }

    const PAGE: u32 = 1;
    const USER: u32 = 2;

    /// The memory breakdown (MEMORY STATS, /metrics): the key index is the slot arrays, the tag
    /// index its entries, the records the rest of `used_memory`; the tag index empties with
    /// the records.
    #[test]
    fn memory_breakdown_by_kind() {
        let s = store(0, true);
        let empty = s.stats();
        assert_eq!(empty.tag_index_memory, 0);
        assert_eq!(empty.records_memory(), 0);
        assert_eq!(empty.index_memory, empty.used_memory);
        put_tagged(&s, b"a", &[tag(PAGE, 1), tag(USER, 2)], None);
        put_tagged(&s, b"b", &[tag(PAGE, 1)], None);
        let st = s.stats();
        assert_eq!(st.tag_index_memory, 3 * crate::tags::ENTRY_COST as u64);
        assert!(st.records_memory() > 0);
        assert_eq!(
            st.records_memory() + st.index_memory + st.tag_index_memory,
            st.used_memory
        );
        s.write(A, b"a", |e| e.remove());
        s.write(A, b"b", |e| e.remove());
        assert_eq!(s.stats().tag_index_memory, 0);
        assert_eq!(s.stats().records_memory(), 0);
    }

    /// A kept (touch) or client-chosen (memcached `E`) CAS leaves the record's WATCH version
    /// fresh, and the rebuild that adds the version field keeps value, deadline, flags, marks
    /// and tags (the tag index follows the record to its new address).
    #[test]
    fn kept_or_chosen_cas_still_changes_the_version() {
        let s = store(0, true);
        let version = |k: &[u8]| s.read(k, |i| i.map(|i| (i.cas(), i.version())).unwrap());
        put_tagged(&s, b"k", &[tag(PAGE, 3)], None);
        let (cas0, v0) = version(b"k");
        assert_eq!(cas0, v0);
        let deadline = now_ms() + 100_000;
        for round in 0..3 {
            let before = version(b"k");
            assert!(s.write(A, b"k", |e| e.set_expire_keep_cas(Some(deadline + round))));
            let (cas, v) = version(b"k");
            assert_eq!(cas, cas0, "touch keeps the CAS");
            assert_ne!(v, before.1, "touch changes the WATCH version");
        }
        s.write(A, b"k", |e| {
            e.set_marks(true, false);
            e.set_expire(None);
            assert!(e.set_cas(cas0));
        });
        let (cas, v) = version(b"k");
        assert_eq!(cas, cas0);
        assert_ne!(v, cas0);
        s.read(b"k", |i| {
            let i = i.unwrap();
            assert_eq!(
                (i.value(), i.expire_at(), i.is_stale()),
                (&b"k"[..], None, true)
            );
        });
        // a fresh record without the field takes the chosen CAS through a rebuild (one no
        // CAS the store gives equals: those are below 2^32)
        let chosen = 1 << 40;
        put_tagged(&s, b"j", &[tag(PAGE, 3), tag(USER, 1)], Some(deadline));
        s.write(A, b"j", |e| assert!(e.set_cas(chosen)));
        let (cas, v) = version(b"j");
        assert_eq!(cas, chosen);
        assert_ne!(v, chosen);
        assert_eq!(
            keys(&s, &q(&[(PAGE, Op::Eq(3))])),
            vec![b"j".to_vec(), b"k".to_vec()]
        );
        assert_eq!(keys(&s, &q(&[(USER, Op::Any)])), vec![b"j".to_vec()]);
        assert_eq!(s.read(b"j", |i| i.unwrap().expire_at()), Some(deadline));
        assert_eq!(s.tag_delete(A, &q(&[(PAGE, Op::Any)])), 2);
        assert_eq!(s.tags.len(), 0);
    }

    #[test]
    fn predicates_select_by_type_value_and_range() {
        let s = store(0, true);
        for i in 0..20i64 {
            put_tagged(
                &s,
                format!("f{i:02}").as_bytes(),
                &[tag(PAGE, i % 5), tag(USER, i)],
                None,
            );
        }
        assert_eq!(
            keys(&s, &q(&[(PAGE, Op::Eq(3))])),
            vec![
                b"f03".to_vec(),
                b"f08".to_vec(),
                b"f13".to_vec(),
                b"f18".to_vec()
            ]
        );
        assert_eq!(keys(&s, &q(&[(USER, Op::Lt(2))])).len(), 2);
        assert_eq!(keys(&s, &q(&[(USER, Op::Le(2))])).len(), 3);
        assert_eq!(keys(&s, &q(&[(USER, Op::Gt(17))])).len(), 2);
        assert_eq!(keys(&s, &q(&[(USER, Op::Ge(17))])).len(), 3);
        assert_eq!(keys(&s, &q(&[(USER, Op::Between(5, 9))])).len(), 5);
        assert_eq!(keys(&s, &q(&[(USER, Op::Any)])).len(), 20);
        assert_eq!(
            keys(&s, &q(&[(PAGE, Op::Eq(3)), (USER, Op::Gt(10))])),
            vec![b"f13".to_vec(), b"f18".to_vec()]
        );
        assert!(keys(&s, &q(&[(99, Op::Any)])).is_empty());
        assert_eq!(s.tag_delete(A, &q(&[(PAGE, Op::Eq(0))])), 4);
        assert_eq!(s.len(), 16);
        assert!(keys(&s, &q(&[(PAGE, Op::Eq(0))])).is_empty());
    }

    #[test]
    fn tags_live_and_die_with_their_record() {
        let s = store(0, true);
        let bare: usize = s.used_memory() as usize;
        put_tagged(&s, b"a", &[tag(PAGE, 1), tag(PAGE, 2)], None);
        put_tagged(&s, b"b", &[tag(PAGE, 1)], Some(now_ms() - 1));
        assert_eq!(s.tags.len(), 3);
        assert_eq!(
            keys(&s, &q(&[(PAGE, Op::Eq(1))])),
            vec![b"a".to_vec()],
            "expired records never match"
        );
        // Modifications keep tags; an overwrite drops them.
        s.write(A, b"a", |e| e.set_expire(Some(now_ms() + 100_000)));
        s.write(A, b"a", |e| {
            e.put_with(Kind::String, 1, None, 0, |b, _| b[0] = b'x')
        })
        .unwrap();
        assert_eq!(keys(&s, &q(&[(PAGE, Op::Eq(2))])), vec![b"a".to_vec()]);
        s.write(A, b"a", |e| {
            e.put_record(Kind::String, 5, None, 0, TagWrite::Set(&[]), |b, _| {
                b.copy_from_slice(b"plain")
            })
        })
        .unwrap();
        assert!(keys(&s, &q(&[(PAGE, Op::Any)])).is_empty());
        // Expiry, deletion and flushing drop entries too.
        s.expire_round();
        assert_eq!(s.tags.len(), 0);
        put_tagged(&s, b"c", &[tag(USER, 7)], None);
        s.write(A, b"c", |e| e.remove());
        assert_eq!(s.tags.len(), 0);
        for i in 0..100u32 {
            put_tagged(&s, &i.to_le_bytes(), &[tag(USER, i as i64)], None);
        }
        s.flush();
        assert_eq!(s.tags.len(), 0);
        assert!(s.used_memory() as usize <= bare + 4096);
    }

    #[test]
    fn eviction_drops_index_entries_and_counts_them() {
        let s = store(128 * 1024, true);
        for i in 0..5000u32 {
            put_tagged(
                &s,
                &i.to_le_bytes(),
                &[tag(PAGE, (i % 50) as i64), tag(USER, i as i64)],
                None,
            );
            assert!(s.used_memory() <= 128 * 1024);
        }
        let live = s.len();
        assert_eq!(
            s.tags.len(),
            2 * live,
            "one entry per tag of each live record"
        );
        assert_eq!(keys(&s, &q(&[(USER, Op::Any)])).len(), live);
    }

    /// Writers, readers and group deleters on every thread; at the end the index and the
    /// tables agree, and no group read ever saw a half-deleted group.
    #[test]
    fn concurrent_tag_deletes_are_atomic_and_leave_no_orphans() {
        let s = Store::new(StoreConfig {
            shards: 16,
            maxmemory: 0,
            policy: crate::EvictionPolicy::AllKeysLru,
            background: true,
            ..StoreConfig::default()
        });
        let groups = 8i64;
        let per_group = 50u32;
        let threads: Vec<_> = (0..4u32)
            .map(|t| {
                let s = s.clone();
                std::thread::spawn(move || {
                    for round in 0..300u32 {
                        let g = ((round + t) % groups as u32) as i64;
                        match (round + t) % 3 {
                            0 => {
                                // Write a whole group: every member also carries the round number.
                                for m in 0..per_group {
                                    let key = format!("g{g}:m{m}");
                                    put_tagged(
                                        &s,
                                        key.as_bytes(),
                                        &[tag(PAGE, g), tag(USER, m as i64)],
                                        None,
                                    );
                                }
                            }
                            1 => {
                                s.tag_delete(A, &q(&[(PAGE, Op::Eq(g))]));
                            }
                            _ => {
                                // A group delete removes all members at once, and whole-group
                                // writes only add: a reader sees each member at most once.
                                let seen = keys(&s, &q(&[(PAGE, Op::Eq(g))]));
                                let mut dedup = seen.clone();
                                dedup.dedup();
                                assert_eq!(seen, dedup);
                            }
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        // Index and tables agree exactly.
        let indexed = keys(&s, &q(&[(PAGE, Op::Any)]));
        let mut in_tables = Vec::new();
        let mut cursor = 0;
        loop {
            cursor = Db::Shared(&s, A).scan(cursor, 100, |i| in_tables.push(i.key().to_vec()));
            if cursor == 0 {
                break;
            }
        }
        in_tables.sort();
        assert_eq!(indexed, in_tables);
        assert_eq!(s.tags.len(), 2 * indexed.len());
        // A delete removes everything that matched when it began.
        for g in 0..groups {
            s.tag_delete(A, &q(&[(PAGE, Op::Eq(g))]));
        }
        assert_eq!(s.len(), 0);
        assert_eq!(s.tags.len(), 0);
    }

    #[test]
    fn group_delete_races_writers_without_leaving_old_members() {
        // Each writer rewrites its members round after round, tagging them with the round, and
        // publishes each round it finished. A delete that begins after round c was finished must
        // leave no member of round c or older.
        let s = Store::new(StoreConfig {
            shards: 16,
            maxmemory: 0,
            policy: crate::EvictionPolicy::AllKeysLru,
            background: true,
            ..StoreConfig::default()
        });
        const ROUND: u32 = 3;
        const WRITER: u32 = 4;
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let done: Arc<[std::sync::atomic::AtomicI64; 2]> = Arc::new(Default::default());
        let writers: Vec<_> = (0..2i64)
            .map(|w| {
                let (s, stop, done) = (s.clone(), stop.clone(), done.clone());
                std::thread::spawn(move || {
                    let mut round = 1i64;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        for m in 0..20 {
                            let tags = [tag(PAGE, 1), tag(ROUND, round), tag(WRITER, w)];
                            put_tagged(&s, format!("w{w}:{m}").as_bytes(), &tags, None);
                        }
                        done[w as usize].store(round, std::sync::atomic::Ordering::SeqCst);
                        round += 1;
                    }
                })
            })
            .collect();
        for _ in 0..20 {
            std::thread::sleep(std::time::Duration::from_millis(5));
            let finished: Vec<i64> = done
                .iter()
                .map(|d| d.load(std::sync::atomic::Ordering::SeqCst))
                .collect();
            s.tag_delete(A, &q(&[(PAGE, Op::Eq(1))]));
            for (w, &c) in finished.iter().enumerate() {
                let stale = s.tag_read(
                    &q(&[(WRITER, Op::Eq(w as i64)), (ROUND, Op::Le(c))]),
                    |items| items.count(),
                );
                assert_eq!(
                    stale, 0,
                    "writer {w}: records of round <= {c} survived a delete that began after it"
                );
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for w in writers {
            w.join().unwrap();
        }
    }
}

#[test]
fn external_memory_counts_against_the_limit() {
    let value = vec![0u8; 1000];
    let put = |s: &Store, k: u32| {
        s.write(A, &k.to_le_bytes(), |e| {
            e.put(Kind::String, &value, None, 0)
        })
    };
    // noeviction: memory held outside (client buffers) makes writes fail until it is released.
    let s = store(1 << 20, false);
    assert!(put(&s, 0).is_ok());
    s.account_external(1 << 20);
    assert_eq!(s.stats().external_memory, 1 << 20);
    assert!(put(&s, 1).is_err());
    s.account_external(-(1 << 20));
    assert!(put(&s, 1).is_ok());
    // evict: records are evicted to make room for it.
    let s = store(1 << 20, true);
    for k in 0..500 {
        put(&s, k).unwrap();
    }
    s.account_external(900 << 10);
    put(&s, 1000).unwrap();
    assert!(s.used_memory() + s.external_memory() <= 1 << 20);
    assert!(s.stats().evicted > 0);
}

#[test]
fn hash_fields_expire_actively_and_the_last_one_takes_the_hash() {
    use crate::hash;
    let s = store(0, false);
    let now = now_ms();
    let mut plain = Vec::new();
    hash::set(&[], &[(b"a", b"1"), (b"b", b"2")], &mut plain);
    let mut timed = Vec::new();
    hash::set_deadlines(&plain, &[(b"a", Some(now - 1))], &mut timed);
    s.write(A, b"h", |e| e.put(Kind::Hash, &timed, None, 0))
        .unwrap();
    let mut both = Vec::new();
    hash::set_deadlines(
        &plain,
        &[(b"a", Some(now - 1)), (b"b", Some(now - 1))],
        &mut both,
    );
    s.write(A, b"gone", |e| e.put(Kind::Hash, &both, None, 0))
        .unwrap();
    s.write(A, b"later", |e| {
        let mut v = Vec::new();
        hash::set_deadlines(&plain, &[(b"b", Some(now + 60_000))], &mut v);
        e.put(Kind::Hash, &v, None, 0)
    })
    .unwrap();
    // Readers see the hash as it is stored until the expiry thread (or a write) comes by.
    assert_eq!(s.read(b"h", |i| hash::len(i.unwrap().value())), 2);
    s.expire_round();
    assert_eq!(
        s.read(b"h", |i| i.map(|i| i.value().to_vec())),
        Some(b"\x01b\x012".to_vec())
    );
    assert!(s.read(b"gone", |i| i.is_none()));
    assert_eq!(s.read(b"later", |i| hash::len(i.unwrap().value())), 2);
    assert_eq!(s.stats().expired_fields, 3);
    // "h" has no deadline left and is no longer visited; "later" still is.
    s.expire_round();
    let tracked: usize = (0..s.shard_count())
        .map(|i| s.cell(i).lock.read().hashes_with_deadlines.len())
        .sum();
    assert_eq!(tracked, 1);
}

#[test]
fn a_write_to_a_hash_removes_its_expired_fields_first() {
    use crate::hash;
    let s = store(0, false);
    let mut v = Vec::new();
    hash::set(&[], &[(b"a", b"1")], &mut v);
    let mut timed = Vec::new();
    hash::set_deadlines(&v, &[(b"a", Some(now_ms() - 1))], &mut timed);
    s.write(A, b"h", |e| e.put(Kind::Hash, &timed, None, 0))
        .unwrap();
    assert!(s.write(A, b"h", |e| e.item().is_none()));
}

/// Replica mode: the store neither expires (lazily or actively) nor evicts on its own, and
/// ignores the memory limit; expired records read as absent until a deletion removes them.
#[test]
fn replica_mode_keeps_expired_records_and_never_evicts() {
    let s = store(200_000, true);
    s.set_replica_mode(true);
    let past = now_ms() - 1;
    s.write(A, b"old", |e| e.put(Kind::String, b"v", Some(past), 0))
        .unwrap();
    assert_eq!(get(&s, b"old"), None, "an expired record reads as absent");
    assert_eq!(s.expire_round(), 0);
    // A write path still finds it (the primary's deletion removes it).
    assert!(s.write(A, b"old", |e| e.remove()));
    // Far past the memory limit: nothing evicted, nothing refused.
    for i in 0..5000u32 {
        s.write(A, &i.to_le_bytes(), |e| {
            e.put(Kind::String, &[7; 100], None, 0)
        })
        .unwrap();
    }
    assert_eq!(s.len(), 5000);
    assert!(s.used_memory() > 200_000);
    // Back to a primary: expiry and eviction work again.
    s.set_replica_mode(false);
    s.write(A, b"old", |e| e.put(Kind::String, b"v", Some(past), 0))
        .unwrap();
    assert!(
        !s.write(A, b"old", |e| e.remove()),
        "lazily expired on access"
    );
}
