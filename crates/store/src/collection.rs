//! Sets, sorted sets and lists: the structures a collection record's value points at.
//!
//! A collection lives out of line: the record (see `item`) holds a pointer to a boxed
//! [`Collection`], and commands change it in place under the shard's exclusive lock, so that
//! no write costs O(size of the collection) past a small size (a packed value, as hashes use,
//! is rewritten whole on every change). Each structure keeps an estimate of the heap bytes it
//! holds, which the shard charges to its `used` memory (so that collections count in `--maxmemory` and are
//! evicted like any record). [`encode`] and [`decode`] turn a collection into portable bytes
//! and back (snapshots, COPY, the change backlog).
//!
//! Each kind has a small form and a large one, converted at Redis's default limits:
//! - a set (module `set`) is a sorted integer array or one packed buffer (`packed`) while
//!   small, else an insertion-ordered hash set (`IndexSet`): O(1) add, remove and random member;
//! - a sorted set (module `zset`) is one packed buffer in order while small, else a hash map
//!   member -> score beside an ordered tree of (score, member);
//! - a list (module `list`) is one packed buffer while small, else a ring buffer
//!   (`VecDeque`): O(1) push and pop at both ends.

pub use crate::list::{listpack_entry_bytes, List};
pub use crate::set::{Member, Set, SMALL_SET};
pub use crate::zset::{Score, ZSet};

use crate::varint;

/// What a collection record holds.
pub enum Collection {
    Set(Set),
    ZSet(ZSet),
    List(List),
}

/// Bytes the allocator takes for an element of `len` bytes (its 8-byte step).
pub(crate) fn element_cost(len: usize) -> usize {
    (len + 7) & !7
}

impl Collection {
    pub fn len(&self) -> usize {
        match self {
            Collection::Set(s) => s.len(),
            Collection::ZSet(z) => z.len(),
            Collection::List(l) => l.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn kind(&self) -> crate::Kind {
        match self {
            Collection::Set(_) => crate::Kind::Set,
            Collection::ZSet(_) => crate::Kind::ZSet,
            Collection::List(_) => crate::Kind::List,
        }
    }
    /// Heap bytes the collection holds (its box included): what the shard charges for it.
    pub fn memory(&self) -> usize {
        std::mem::size_of::<Collection>()
            + match self {
                Collection::Set(s) => s.memory(),
                Collection::ZSet(z) => z.memory(),
                Collection::List(l) => l.memory(),
            }
    }
}

fn put_varint(out: &mut Vec<u8>, v: usize) {
    varint::push(out, v as u64);
}

fn get_varint(buf: &mut &[u8]) -> Option<usize> {
    let (v, n) = varint::get(buf)?;
    *buf = &buf[n..];
    usize::try_from(v).ok()
}

fn get_bytes<'a>(buf: &mut &'a [u8]) -> Option<&'a [u8]> {
    let len = get_varint(buf)?;
    let part = buf.get(..len)?;
    *buf = &buf[len..];
    Some(part)
}

/// The collection as portable bytes: its element count, then each element (length-prefixed;
/// a sorted set's member followed by its score's 8 bytes), in the collection's order.
pub fn encode(collection: &Collection, out: &mut Vec<u8>) {
    put_varint(out, collection.len());
    let element = |out: &mut Vec<u8>, e: &[u8]| {
        put_varint(out, e.len());
        out.extend_from_slice(e);
    };
    match collection {
        Collection::Set(s) => s.iter().for_each(|m| element(out, &m)),
        Collection::List(l) => l.iter().for_each(|v| element(out, v)),
        Collection::ZSet(z) => z.iter().for_each(|(m, score)| {
            element(out, m);
            out.extend_from_slice(&score.to_le_bytes());
        }),
    }
}

/// Reads `encode`'s bytes back as a collection of `kind`; None when they are malformed.
pub fn decode(kind: crate::Kind, mut buf: &[u8]) -> Option<Collection> {
    let buf = &mut buf;
    let count = get_varint(buf)?;
    // Every element takes at least one byte: a count beyond that is malformed, not a
    // reason to reserve memory.
    if count > buf.len() {
        return None;
    }
    let collection = match kind {
        crate::Kind::Set => {
            // Built member by member, the forms change as the set grows (as Redis's
            // loading of a set picks its encoding by size).
            let mut s = Set::new();
            for _ in 0..count {
                s.insert(get_bytes(buf)?);
            }
            Collection::Set(s)
        }
        crate::Kind::List => {
            let mut l = List::new();
            for _ in 0..count {
                l.push_back(get_bytes(buf)?);
            }
            Collection::List(l)
        }
        crate::Kind::ZSet => {
            let mut z = ZSet::new();
            for _ in 0..count {
                let member = get_bytes(buf)?;
                let score = f64::from_le_bytes(buf.get(..8)?.try_into().ok()?);
                *buf = &buf[8..];
                if score.is_nan() {
                    return None;
                }
                z.insert(member, score);
            }
            Collection::ZSet(z)
        }
        crate::Kind::String | crate::Kind::Hash => return None,
    };
    buf.is_empty().then_some(collection)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    #[test]
    fn memory_follows_the_contents() {
        let mut s = Set::new();
        let empty = Collection::Set(Set::new()).memory();
        for i in 0..1000 {
            s.insert(format!("member-{i}").as_bytes());
        }
        let full = Collection::Set(s);
        let full_memory = full.memory();
        assert!(full_memory > empty + 1000 * 16, "{full_memory}");
        let Collection::Set(mut s) = full else {
            unreachable!()
        };
        for i in 0..1000 {
            assert!(s.remove(format!("member-{i}").as_bytes()));
        }
        let emptied = Collection::Set(s).memory();
        // The members' bytes went (the table's slots stay; see set's tests for the exact count).
        assert!(emptied + 1000 * 8 < full_memory, "{emptied} {full_memory}");
    }

    #[test]
    fn zset_orders_by_score_then_member() {
        let mut z = ZSet::new();
        z.insert(b"b", 1.0);
        z.insert(b"a", 1.0);
        z.insert(b"c", -0.0);
        z.insert(b"d", f64::INFINITY);
        let order: Vec<_> = z.iter().map(|(m, _)| m.to_vec()).collect();
        assert_eq!(
            order,
            [b"c".to_vec(), b"a".to_vec(), b"b".to_vec(), b"d".to_vec()]
        );
        assert_eq!(z.rank(b"b"), Some(2));
        assert_eq!(z.insert(b"b", 0.5), Some(1.0));
        assert_eq!(z.rank(b"b"), Some(1));
        assert_eq!(z.score(b"c"), Some(0.0));
        let from: Vec<_> = z.from_score(0.6).map(|(m, _)| m.to_vec()).collect();
        assert_eq!(from, [b"a".to_vec(), b"d".to_vec()]);
        assert_eq!(z.remove(b"a"), Some(1.0));
        assert_eq!(z.len(), 3);
    }

    #[test]
    fn malformed_bytes_decode_to_nothing() {
        assert!(decode(crate::Kind::Set, &[]).is_none());
        assert!(decode(crate::Kind::Set, &[200, 200, 200, 1]).is_none());
        assert!(decode(crate::Kind::List, &[2, 1, b'a']).is_none());
        assert!(decode(crate::Kind::ZSet, &[1, 1, b'a', 0, 0]).is_none());
        assert!(decode(crate::Kind::String, &[0]).is_none());
        assert!(decode(crate::Kind::List, &[0]).is_some());
    }

    fn round_trip(c: &Collection) -> Collection {
        let mut bytes = Vec::new();
        encode(c, &mut bytes);
        decode(c.kind(), &bytes).expect("decodes")
    }

    proptest! {
        #[test]
        fn sets_survive_encoding(members in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..20), 0..60)) {
            let mut s = Set::new();
            let mut model = std::collections::BTreeSet::new();
            for m in &members {
                prop_assert_eq!(s.insert(m), model.insert(m.clone()));
            }
            let Collection::Set(back) = round_trip(&Collection::Set(s)) else { unreachable!() };
            let got: std::collections::BTreeSet<Vec<u8>> = back.iter().map(|m| m.to_vec()).collect();
            prop_assert_eq!(got, model);
        }

        #[test]
        fn zsets_survive_encoding(pairs in proptest::collection::vec((proptest::collection::vec(0u8..5, 0..4), -1e6f64..1e6), 0..60)) {
            let mut z = ZSet::new();
            let mut model = std::collections::BTreeMap::new();
            for (m, score) in &pairs {
                z.insert(m, *score);
                model.insert(m.clone(), *score);
            }
            let Collection::ZSet(back) = round_trip(&Collection::ZSet(z)) else { unreachable!() };
            prop_assert_eq!(back.len(), model.len());
            for (m, score) in &model {
                prop_assert_eq!(back.score(m), Some(*score));
            }
            let scores: Vec<f64> = back.iter().map(|(_, s)| s).collect();
            prop_assert!(scores.windows(2).all(|w| w[0] <= w[1]));
        }

        #[test]
        fn lists_survive_encoding(ops in proptest::collection::vec((0u8..4, proptest::collection::vec(any::<u8>(), 0..10)), 0..80)) {
            let mut l = List::new();
            let mut model = VecDeque::new();
            for (op, v) in ops {
                match op {
                    0 => { l.push_front(&v); model.push_front(v); }
                    1 => { l.push_back(&v); model.push_back(v); }
                    2 => { prop_assert_eq!(l.pop_front().map(Vec::from), model.pop_front()); }
                    _ => { prop_assert_eq!(l.pop_back().map(Vec::from), model.pop_back()); }
                }
            }
            let Collection::List(back) = round_trip(&Collection::List(l)) else { unreachable!() };
            let got: Vec<Vec<u8>> = back.iter().map(<[u8]>::to_vec).collect();
            prop_assert_eq!(got, Vec::from(model));
        }
    }
}
