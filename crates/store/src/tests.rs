//! Engine tests: the store against a `HashMap` model, deadlines, eviction and SCAN invariants.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use proptest::prelude::*;

use crate::{now_ms, Db, Kind, Store, StoreConfig};

fn store(maxmemory: u64, evict: bool) -> Arc<Store> {
    Store::new(StoreConfig {
        shards: 8,
        maxmemory,
        evict,
        background: false,
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
                    s.write(&key, |e| e.put(Kind::String, &v, None, 0)).unwrap();
                    model.insert(key, v);
                }
                Op::Del(k) => {
                    let key = vec![k; (k % 7) as usize + 1];
                    let had = s.write(&key, |e| e.remove());
                    prop_assert_eq!(had, model.remove(&key).is_some());
                }
                Op::Append(k, v) => {
                    let key = vec![k; (k % 7) as usize + 1];
                    s.write(&key, |e| {
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
            s.write(k, |e| e.remove());
        }
        let bare: usize = (0..s.shard_count()).map(|i| s.cell(i).lock.read().table.bytes()).sum();
        prop_assert_eq!(s.used_memory() as usize, bare);
    }
}

#[test]
fn deadlines_hide_and_expiry_removes() {
    let s = store(0, true);
    let past = now_ms() - 1;
    s.write(b"gone", |e| e.put(Kind::String, b"v", Some(past), 0))
        .unwrap();
    s.write(b"kept", |e| {
        e.put(Kind::String, b"v", Some(now_ms() + 60_000), 0)
    })
    .unwrap();
    s.write(b"plain", |e| e.put(Kind::String, b"v", None, 0))
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

#[test]
fn set_expire_in_place_and_by_rebuild() {
    let s = store(0, true);
    s.write(b"k", |e| e.put(Kind::String, b"value", None, 7))
        .unwrap();
    let cas0 = s.read(b"k", |i| i.unwrap().cas());
    let deadline = now_ms() + 10_000;
    assert!(s.write(b"k", |e| e.set_expire(Some(deadline))));
    let (exp, cas1, flags, value) = s.read(b"k", |i| {
        let i = i.unwrap();
        (i.expire_at(), i.cas(), i.flags(), i.value().to_vec())
    });
    assert_eq!(exp, Some(deadline));
    assert_ne!(cas0, cas1);
    assert_eq!((flags, &value[..]), (7, &b"value"[..]));
    assert!(s.write(b"k", |e| e.set_expire(None)));
    assert_eq!(s.read(b"k", |i| i.unwrap().expire_at()), None);
    assert!(s.write(b"k", |e| e.set_expire(Some(now_ms() - 1))));
    assert_eq!(get(&s, b"k"), None);
    assert!(!s.write(b"absent", |e| e.set_expire(None)));
}

#[test]
fn noeviction_refuses_writes_past_the_limit() {
    let s = store(64 * 1024, false);
    let value = vec![0u8; 1000];
    let mut stored = 0;
    for i in 0..1000u32 {
        match s.write(&i.to_le_bytes(), |e| e.put(Kind::String, &value, None, 0)) {
            Ok(_) => stored += 1,
            Err(_) => break,
        }
    }
    assert!(stored > 10 && stored < 64, "stored {stored}");
    assert!(s.used_memory() <= 64 * 1024);
    // Deleting still works, and frees room.
    assert!(s.write(&0u32.to_le_bytes(), |e| e.remove()));
    assert!(s
        .write(b"x", |e| e.put(Kind::String, &value, None, 0))
        .is_ok());
}

#[test]
fn eviction_keeps_memory_under_the_limit_and_prefers_unvisited() {
    let limit = 256 * 1024;
    let s = store(limit, true);
    let value = vec![1u8; 500];
    s.write(b"hot", |e| e.put(Kind::String, &value, None, 0))
        .unwrap();
    for i in 0..5000u32 {
        s.write(&i.to_le_bytes(), |e| e.put(Kind::String, &value, None, 0))
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
        .write(b"big", |e| e.put(Kind::String, &big, None, 0))
        .is_err());
}

#[test]
fn scan_returns_every_key_across_resizes() {
    let s = store(0, true);
    for i in 0..2000u32 {
        s.write(format!("k{i}").as_bytes(), |e| {
            e.put(Kind::String, b"v", None, 0)
        })
        .unwrap();
    }
    let mut seen = HashSet::new();
    let mut cursor = 0;
    let mut step = 0;
    loop {
        cursor = Db::Shared(&s).scan(cursor, 10, |item| {
            seen.insert(item.key().to_vec());
        });
        step += 1;
        // Grow the keyspace mid-iteration: the original keys must still all be returned.
        if step == 20 {
            for i in 2000..20_000u32 {
                s.write(format!("k{i}").as_bytes(), |e| {
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
        s.write(&i.to_le_bytes(), |e| {
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
        s.write(k, |e| e.put(Kind::String, b"0", None, 0)).unwrap();
    }
    let writer = {
        let s = s.clone();
        std::thread::spawn(move || {
            for n in 1..=2000u32 {
                let mut locked = s.lock_keys([&b"a"[..], b"b"]);
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
        let mut locked = s.lock_keys([&b"b"[..], b"a"]);
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
        evict: true,
        background: true,
    });
    let threads: Vec<_> = (0..4u32)
        .map(|t| {
            let s = s.clone();
            std::thread::spawn(move || {
                for i in 0..20_000u32 {
                    let key = ((i * 7 + t) % 3000).to_le_bytes();
                    match i % 4 {
                        0 => drop(
                            s.write(&key, |e| e.put(Kind::String, &key, Some(now_ms() + 5), 0)),
                        ),
                        1 => drop(s.write(&key, |e| e.remove())),
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
