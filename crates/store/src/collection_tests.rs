//! Collection records in the store: ownership of the out-of-line structure through rebuilds
//! and frees, memory accounting, the change backlog's portable copies, eviction.

use crate::collection::{Collection, Set};
use crate::{now_ms, Author, Kind, Store, StoreConfig, Tag, TagWrite};
use std::sync::Arc;

const A: Author = Author::SERVER;

fn store(maxmemory: u64) -> Arc<Store> {
    Store::new(StoreConfig {
        shards: 4,
        maxmemory,
        background: false,
        ..StoreConfig::default()
    })
}

fn set_of(members: &[&str]) -> Collection {
    let mut s = Set::new();
    members.iter().for_each(|m| {
        s.insert(m.as_bytes());
    });
    Collection::Set(s)
}

fn members(store: &Store, key: &[u8]) -> Option<Vec<Vec<u8>>> {
    store.read(key, |item| {
        let Some(Collection::Set(s)) = item?.collection() else {
            return None;
        };
        let mut m: Vec<Vec<u8>> = s.iter().map(|m| m.to_vec()).collect();
        m.sort();
        Some(m)
    })
}

fn add(store: &Store, key: &[u8], member: &str) {
    store.write(A, key, |e| {
        e.update_collection(|c| match c {
            Collection::Set(s) => ((), s.insert(member.as_bytes())),
            _ => ((), false),
        })
        .expect("a collection")
        .expect("room")
    })
}

#[test]
fn in_place_updates_charge_memory_and_delete_frees_it() {
    let s = store(0);
    let base = s.used_memory();
    s.write(A, b"s", |e| e.put_collection(set_of(&["a"]), None))
        .unwrap();
    let one = s.used_memory();
    assert!(one > base);
    let cas = s.read(b"s", |i| i.unwrap().cas());
    for i in 0..2000 {
        add(&s, b"s", &format!("member-{i}"));
    }
    assert!(s.used_memory() > one + 2000 * 24, "{}", s.used_memory());
    assert_ne!(
        s.read(b"s", |i| i.unwrap().cas()),
        cas,
        "a change gives a fresh CAS"
    );
    assert_eq!(s.read(b"s", |i| i.unwrap().kind()), Kind::Set);
    s.write(A, b"s", |e| e.remove());
    assert_eq!(s.used_memory(), base);
}

#[test]
fn emptied_collection_is_deleted() {
    let s = store(0);
    s.write(A, b"s", |e| e.put_collection(set_of(&["a"]), None))
        .unwrap();
    s.write(A, b"s", |e| {
        e.update_collection(|c| match c {
            Collection::Set(set) => ((), set.remove(b"a")),
            _ => unreachable!(),
        })
    });
    assert!(s.read(b"s", |i| i.is_none()));
}

#[test]
fn rebuilds_move_the_collection_to_the_new_record() {
    let s = store(0);
    s.write(A, b"s", |e| e.put_collection(set_of(&["a", "b"]), None))
        .unwrap();
    // A new deadline field and new tags both rebuild the record around the same collection.
    s.write(A, b"s", |e| assert!(e.set_expire(Some(now_ms() + 60_000))));
    s.write(A, b"s", |e| {
        let item = e.item().unwrap();
        let (kind, len, deadline) = (item.kind(), item.value().len(), item.expire_at());
        e.put_record(
            kind,
            len,
            deadline,
            0,
            TagWrite::Set(&[Tag { ty: 1, value: 2 }]),
            |buf, old| buf.copy_from_slice(old.unwrap().value()),
        )
        .unwrap();
    });
    add(&s, b"s", "c");
    assert_eq!(
        members(&s, b"s"),
        Some(vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()])
    );
    assert!(s.read(b"s", |i| i.unwrap().expire_at().is_some()));
    s.flush();
    assert_eq!(s.len(), 0);
}

#[test]
fn portable_values_round_trip_with_tags() {
    let s = store(0);
    s.write(A, b"s", |e| e.put_collection(set_of(&["x", "y"]), None))
        .unwrap();
    let (kind, bytes) = s.read(b"s", |i| {
        let i = i.unwrap();
        (i.kind(), i.portable_value().into_owned())
    });
    let tags = [Tag { ty: 3, value: 4 }];
    s.write(A, b"copy", |e| {
        e.put_portable(kind, &bytes, None, 0, TagWrite::Set(&tags))
    })
    .unwrap()
    .expect("decodes");
    assert_eq!(members(&s, b"copy"), members(&s, b"s"));
    assert_eq!(
        s.read(b"copy", |i| i.unwrap().tags().collect::<Vec<_>>()),
        tags
    );
    assert_eq!(
        s.write(A, b"bad", |e| e.put_portable(
            Kind::ZSet,
            b"\x05",
            None,
            0,
            TagWrite::Keep
        )),
        Ok(None)
    );
}

#[test]
fn the_change_backlog_keeps_a_portable_copy() {
    let s = store(0);
    let mut cursor = s.subscribe();
    s.write(A, b"s", |e| e.put_collection(set_of(&["a"]), None))
        .unwrap();
    add(&s, b"s", "b");
    s.write(A, b"s", |e| e.remove());
    let mut seen = Vec::new();
    for log in 0..cursor.logs() {
        cursor
            .read(log, 100, |r| {
                if let Some(item) = r.item() {
                    assert_eq!(item.kind(), Kind::Set);
                    assert!(item.collection().is_none(), "a copy owns no structure");
                    let c = crate::collection::decode(Kind::Set, &item.portable_value()).unwrap();
                    seen.push(c.len());
                }
            })
            .unwrap();
    }
    assert_eq!(seen, [1, 2]);
}

#[test]
fn collections_count_against_the_limit_and_are_evicted() {
    let s = store(400_000);
    for k in 0..40 {
        let key = format!("set-{k}");
        s.write(A, key.as_bytes(), |e| {
            e.put_collection(set_of(&["seed"]), None)
        })
        .unwrap();
        for i in 0..400 {
            add(&s, key.as_bytes(), &format!("member-{i:08}"));
        }
    }
    assert!(
        s.used_memory() <= 400_000 + 64 * 1024,
        "{}",
        s.used_memory()
    );
    let stats = s.stats();
    assert!(stats.evicted > 0, "{stats:?}");
    assert!(stats.keys < 40);
}

#[test]
fn over_the_limit_without_eviction_a_change_that_may_grow_is_refused_and_a_shrink_runs() {
    let s = Store::new(StoreConfig {
        shards: 4,
        policy: crate::EvictionPolicy::NoEviction,
        background: false,
        ..StoreConfig::default()
    });
    s.write(A, b"s", |e| e.put_collection(set_of(&["a", "b"]), None))
        .unwrap();
    s.set_maxmemory(1);
    let grown = s.write(A, b"s", |e| {
        e.update_collection(|c| match c {
            Collection::Set(set) => ((), set.insert(b"c")),
            _ => unreachable!(),
        })
    });
    assert!(matches!(grown, Some(Err(_))), "refused before it ran");
    let removed = s.write(A, b"s", |e| {
        e.shrink_collection(|c| match c {
            Collection::Set(set) => {
                let removed = set.remove(b"a");
                (removed, removed)
            }
            _ => unreachable!(),
        })
    });
    assert_eq!(removed, Some(true));
    assert_eq!(members(&s, b"s"), Some(vec![b"b".to_vec()]));
}
