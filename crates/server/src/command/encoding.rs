//! The encoding Redis 7.4 would give a record (OBJECT ENCODING): clients and tools read this
//! answer to learn whether a key is "small", so it follows Redis's thresholds
//! (`hash-max-listpack-entries` and the rest, `EncodingLimits`).
//!
//! Sets, sorted sets and lists change form in the store at Redis's default limits and at the
//! moments Redis converts (one way as they grow; a list back to `listpack` at half its limit),
//! so while a type's limits are the defaults the answer is the form the store holds, history
//! included. With other limits (the store does not see settings) and for hashes, the answer
//! is worked out from what the record holds now, as if it had been built at its present size.

use store::collection::listpack_entry_bytes;
use store::{hash, Collection, Item, Kind};

use super::parse_i64;
use crate::config::EncodingLimits;

/// Redis's `OBJ_ENCODING_EMBSTR_SIZE_LIMIT`.
const EMBSTR_LIMIT: usize = 44;
/// Redis's `SIZE_SAFETY_LIMIT`: the most bytes of a list node sized by count.
const LIST_SAFETY_BYTES: usize = 8192;

pub fn encoding(item: &Item<'_>, limits: &EncodingLimits) -> &'static str {
    let d = EncodingLimits::default();
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
            let default = (d.set_intset_entries, d.set_entries, d.set_value);
            if (
                limits.set_intset_entries,
                limits.set_entries,
                limits.set_value,
            ) == default
            {
                return set.encoding();
            }
            let n = set.len();
            let ints = n as i64 <= limits.set_intset_entries
                && set.iter().all(|m| parse_i64(&m).is_some());
            let lengths = set.iter().map(|m| m.len());
            if ints {
                "intset"
            } else if packs(n, lengths, limits.set_entries, limits.set_value) {
                "listpack"
            } else {
                "hashtable"
            }
        }
        (_, Some(Collection::ZSet(zset))) => {
            let packed =
                if (limits.zset_entries, limits.zset_value) == (d.zset_entries, d.zset_value) {
                    zset.is_packed()
                } else {
                    let members = zset.iter().map(|(m, _)| m.len());
                    packs(zset.len(), members, limits.zset_entries, limits.zset_value)
                };
            if packed {
                "listpack"
            } else {
                "skiplist"
            }
        }
        (_, Some(Collection::List(list))) => {
            let packed = if limits.list_size == d.list_size {
                list.is_packed()
            } else {
                list_packs(list.len(), list.iter(), limits.list_size)
            };
            if packed {
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

/// Whether `n` elements (of the lengths `lengths`) fit Redis's packed form: at most
/// `max_entries` of them, none longer than `max_len` bytes (the elements are only read when
/// the count fits).
fn packs(
    n: usize,
    mut lengths: impl Iterator<Item = usize>,
    max_entries: i64,
    max_len: i64,
) -> bool {
    n as i64 <= max_entries && lengths.all(|len| len as i64 <= max_len)
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

#[cfg(test)]
mod tests {
    use super::*;

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
        let lengths = [1, 2];
        assert!(packs(2, lengths.into_iter(), 128, 64));
        assert!(!packs(2, lengths.into_iter(), 1, 64));
        assert!(!packs(2, lengths.into_iter(), 128, 1));
    }
}
