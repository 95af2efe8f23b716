//! The encoding Redis 7.4 would give a record (OBJECT ENCODING): cairn holds every collection
//! one way, but clients and tools read this answer to learn whether a key is "small", so it
//! follows Redis's thresholds (`hash-max-listpack-entries` and the rest, `EncodingLimits`).
//!
//! The answer is worked out from what the record holds now. Redis converts one way as a
//! collection grows (a set that became a `hashtable` stays one after shrinking; only a list
//! goes back to `listpack`, at half its limit), so after a shrink cairn can name the smaller
//! encoding where Redis keeps the larger.

use store::{hash, Collection, Item, Kind};

use super::parse_i64;
use crate::config::EncodingLimits;

/// Redis's `OBJ_ENCODING_EMBSTR_SIZE_LIMIT`.
const EMBSTR_LIMIT: usize = 44;
/// Redis's `SIZE_SAFETY_LIMIT`: the most bytes of a list node sized by count.
const LIST_SAFETY_BYTES: usize = 8192;

pub fn encoding(item: &Item<'_>, limits: &EncodingLimits) -> &'static str {
    match (item.kind(), item.collection()) {
        (Kind::String, _) => {
            let value = item.value();
            if value.len() <= 20 && parse_i64(value).is_some() {
                "int"
            } else if value.len() <= EMBSTR_LIMIT {
                "embstr"
            } else {
                "raw"
            }
        }
        (Kind::Hash, _) => hash_encoding(item.value(), limits),
        (_, Some(Collection::Set(set))) => {
            let n = set.len();
            let ints =
                n as i64 <= limits.set_intset_entries && set.iter().all(|m| parse_i64(m).is_some());
            if ints {
                "intset"
            } else if packs(n, set.iter(), limits.set_entries, limits.set_value) {
                "listpack"
            } else {
                "hashtable"
            }
        }
        (_, Some(Collection::ZSet(zset))) => {
            let members = zset.iter().map(|(m, _)| m);
            if packs(zset.len(), members, limits.zset_entries, limits.zset_value) {
                "listpack"
            } else {
                "skiplist"
            }
        }
        (_, Some(Collection::List(list))) => {
            if list_packs(list.len(), list.iter(), limits.list_size) {
                "listpack"
            } else {
                "quicklist"
            }
        }
        // A collection kind without its structure cannot be; name Redis's large encoding.
        (Kind::Set, None) => "hashtable",
        (Kind::ZSet, None) => "skiplist",
        (Kind::List, None) => "quicklist",
    }
}

/// Whether `n` elements fit Redis's packed form: at most `max_entries` of them, none longer
/// than `max_len` bytes (the elements are only read when the count fits).
fn packs<'a>(
    n: usize,
    mut elements: impl Iterator<Item = &'a [u8]>,
    max_entries: i64,
    max_len: i64,
) -> bool {
    n as i64 <= max_entries && elements.all(|e| e.len() as i64 <= max_len)
}

/// A hash: `listpack` (`listpackex` when a field has a deadline) while small, else
/// `hashtable`.
fn hash_encoding(value: &[u8], limits: &EncodingLimits) -> &'static str {
    let n = hash::len(value);
    let small = n as i64 <= limits.hash_entries
        && hash::entries(value).all(|(f, v, _)| {
            f.len() as i64 <= limits.hash_value && v.len() as i64 <= limits.hash_value
        });
    match (small, hash::has_deadlines(value)) {
        (false, _) => "hashtable",
        (true, false) => "listpack",
        (true, true) => "listpackex",
    }
}

/// Whether a list of `n` elements fits one listpack node by `list-max-listpack-size` (`fill`):
/// a positive fill counts entries (and at most 8 KiB), a negative one bytes (-1: 4 KiB ..
/// -5: 64 KiB), the bytes being the listpack's as Redis encodes it.
fn list_packs<'a>(n: usize, elements: impl Iterator<Item = &'a [u8]>, fill: i64) -> bool {
    let (max_entries, max_bytes) = if fill >= 0 {
        (fill as usize, LIST_SAFETY_BYTES)
    } else {
        (
            usize::MAX,
            4096usize << (fill.unsigned_abs().clamp(1, 5) - 1),
        )
    };
    if n > max_entries {
        return false;
    }
    // The listpack's header (6 bytes) and end mark (1), then each entry, until past the limit.
    let mut bytes = 7usize;
    for e in elements {
        bytes += listpack_entry_bytes(e);
        if bytes > max_bytes {
            return false;
        }
    }
    true
}

/// Bytes one element takes in a Redis listpack: its encoding (an integer packed small, a
/// string with a 1, 2 or 5 byte header) and the back-length of that.
fn listpack_entry_bytes(e: &[u8]) -> usize {
    let encoded = match parse_i64(e) {
        Some(v) if (0..=127).contains(&v) => 1,
        Some(v) if (-4096..4096).contains(&v) => 2,
        Some(v) if (-32768..32768).contains(&v) => 3,
        Some(v) if (-(1 << 23)..(1 << 23)).contains(&v) => 4,
        Some(v) if (i64::from(i32::MIN)..=i64::from(i32::MAX)).contains(&v) => 5,
        Some(_) => 9,
        None if e.len() < 64 => 1 + e.len(),
        None if e.len() < 4096 => 2 + e.len(),
        None => 5 + e.len(),
    };
    let back = match encoded {
        0..=127 => 1,
        128..=16383 => 2,
        16384..=2097151 => 3,
        2097152..=268435455 => 4,
        _ => 5,
    };
    encoded + back
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listpack_entries_are_sized_as_redis_encodes_them() {
        assert_eq!(listpack_entry_bytes(b"7"), 2);
        assert_eq!(listpack_entry_bytes(b"-1"), 3);
        assert_eq!(listpack_entry_bytes(b"100000"), 5);
        assert_eq!(listpack_entry_bytes(b"abc"), 5);
        assert_eq!(listpack_entry_bytes(&[b'x'; 100]), 103);
        assert_eq!(listpack_entry_bytes(&[b'x'; 200]), 204);
    }

    #[test]
    fn a_list_packs_up_to_its_node_limit() {
        let small: Vec<&[u8]> = vec![b"a"; 100];
        assert!(list_packs(100, small.iter().copied(), -2));
        assert!(!list_packs(100, small.iter().copied(), 50));
        let big = [b'x'; 5000];
        let two: Vec<&[u8]> = vec![&big, &big];
        assert!(!list_packs(2, two.iter().copied(), -2));
        assert!(list_packs(2, two.iter().copied(), -3));
    }

    #[test]
    fn packed_collections_respect_count_and_length() {
        let members: Vec<&[u8]> = vec![b"a", b"bb"];
        assert!(packs(2, members.iter().copied(), 128, 64));
        assert!(!packs(2, members.iter().copied(), 1, 64));
        assert!(!packs(2, members.iter().copied(), 128, 1));
    }
}
