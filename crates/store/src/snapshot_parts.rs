//! Copying a shard in bounded parts, for a replica's full sync: the shard's shared lock is
//! held for one part at a time (at most about `most` records), so a writer of the shard waits
//! for one part's copy, not the whole shard's (a 10-million-key keyspace is ~40 000 records a
//! shard: milliseconds under the lock, during which the writer's event loop serves no one).
//!
//! Parts are ranges of the shard's 32-bit hash space, not of slots: a key's position does not
//! change when the table is rebuilt between two parts (`table.rs`), so every key belongs to
//! exactly one part whatever the table did meanwhile, and a key present for the whole copy is
//! copied exactly once. The copy is not one point in time: it is taken between the first
//! part's lock and the last one's, and each part has its own cut (`PartCut`: the shard's
//! sequence number while that part's lock was held; the shard's cut returned is the first
//! part's). A part holds every change of its keys numbered up to its cut and none after, so
//! a replica skips a stream record of the shard numbered at or below the cut of the part that
//! holds the record's key and applies the others: each key passes through the primary's
//! values in order, never back to an older one (docs/replication.md, "Full sync"). It finds
//! the part with the primary's hash ([`PartHasher`], built from the seeds the primary sends).
//! A snapshot file (SAVE, BGSAVE) keeps `Store::dump_shard`'s one point per shard.

use std::time::Instant;

use crate::item::Item;
use crate::snapshot::{copy_record, encode_copies, prefetch, ShardCut, PREFETCH_SLOTS};
use crate::table::{KeyHash, Table};
use crate::{now_ms, Store};

/// One part of a shard's copy: the positions `[previous part's hi, hi)` (the first part
/// starts at 0, the last ends at 2^32), copied while the shard's sequence number was `seq`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PartCut {
    pub hi: u64,
    pub seq: u64,
}

/// Seeds for a store's key hash, random per process (a client cannot aim keys at one
/// slot), as `ahash::RandomState::new` would pick.
pub(crate) fn random_seeds() -> [u64; 4] {
    let random = ahash::RandomState::new();
    [0u64, 1, 2, 3].map(|i| random.hash_one(i))
}

pub(crate) fn hasher_of(seeds: [u64; 4]) -> ahash::RandomState {
    ahash::RandomState::with_seeds(seeds[0], seeds[1], seeds[2], seeds[3])
}

/// A store's key positions, rebuilt elsewhere from its seeds (`Store::hash_seeds`): a
/// replica finds the part of a primary's full sync that holds a key with it.
pub struct PartHasher(ahash::RandomState);

/// The key whose position a full sync sends beside the seeds: a replica whose hash of it
/// differs (another hash implementation, e.g. a build with other CPU features) cannot find
/// parts, and falls back to each shard's first cut.
pub const PROBE_KEY: &[u8] = b"cairn:part-probe";

impl PartHasher {
    pub fn new(seeds: [u64; 4]) -> PartHasher {
        PartHasher(hasher_of(seeds))
    }

    /// The key's position in its shard's hash space (what `PartCut::hi` bounds).
    pub fn position(&self, key: &[u8]) -> u32 {
        KeyHash(self.0.hash_one(key)).position()
    }
}

/// The seq of the part of `parts` (in order, as `dump_shard_in_parts` made them) that holds
/// `position`; None when `parts` is empty.
pub fn part_seq(parts: &[PartCut], position: u32) -> Option<u64> {
    let at = parts.partition_point(|p| p.hi <= position as u64);
    parts
        .get(at.min(parts.len().checked_sub(1)?))
        .map(|p| p.seq)
}

/// The range of hash positions `[lo, hi)` of part `part` of `parts` (`hi` may be 2^32).
fn part_range(part: u64, parts: u64) -> (u64, u64) {
    ((part << 32) / parts, ((part + 1) << 32) / parts)
}

impl Store {
    /// Appends every live record of shard `index` to `out`, as `dump_shard` does, in parts of
    /// about `most` records, each copied under the shard's shared lock on its own (the lock is
    /// released, and the thread yields, between two parts). The cut is the shard's sequence
    /// number at the first part, each part's own is appended to `cuts`; `held` is the longest
    /// part's hold.
    pub fn dump_shard_in_parts(
        &self,
        index: usize,
        most: usize,
        scratch: &mut Vec<u8>,
        out: &mut Vec<u8>,
        cuts: &mut Vec<PartCut>,
    ) -> ShardCut {
        let cell = self.cell(index);
        let (len, used) = {
            let shard = cell.lock.read();
            (shard.table.len(), shard.used)
        };
        let parts = len.div_ceil(most.max(1)).max(1) as u64;
        let before = out.len();
        let mut cut = ShardCut {
            shard: index,
            ..ShardCut::default()
        };
        for part in 0..parts {
            if part > 0 {
                // A writer parked on the lock goes first (the lock is fair).
                std::thread::yield_now();
            }
            let (lo, hi) = part_range(part, parts);
            scratch.clear();
            scratch.reserve(used / parts as usize + len / parts as usize * 4);
            let shard = cell.lock.read();
            let started = Instant::now();
            let now = now_ms();
            copy_part(self, &shard.table, lo, hi, scratch);
            if part == 0 {
                cut.seq = shard.log.seq;
            }
            cuts.push(PartCut {
                hi,
                seq: shard.log.seq,
            });
            cut.held = cut.held.max(started.elapsed());
            drop(shard);
            cut.copied += scratch.len() as u64;
            cut.records += encode_copies(scratch, now, out);
        }
        cut.bytes = (out.len() - before) as u64;
        cut
    }

    /// The seeds of the store's key hash (see [`PartHasher`]).
    pub fn hash_seeds(&self) -> [u64; 4] {
        self.hash_seeds
    }
}

/// Copies (`copy_record`) the records whose position lies in `[lo, hi)`.
///
/// Their home slots are `[start, end)` (a home is the position scaled to the capacity, which
/// keeps the order). Linear probing puts a record at or after its home with no empty slot
/// between: a record in `[start, end)` behind an empty slot that lies at or after `start` is
/// homed after that slot and before its own, so it is in the range without hashing its key;
/// the records before the first empty slot (which may be homed before `start`, or wrapped
/// around from the table's end) and those at or after `end` (the probing overflow, up to the
/// next empty slot) are hashed and kept if their position is in the range.
fn copy_part(store: &Store, table: &Table, lo: u64, hi: u64, scratch: &mut Vec<u8>) {
    let cap = table.capacity();
    if cap == 0 || table.len() == 0 {
        return;
    }
    let home = |position: u64| table.home_of(KeyHash(position << 32));
    let start = home(lo);
    let end = if hi >= 1 << 32 { cap } else { home(hi) };
    let mut seen_empty = false;
    let mut i = start;
    let mut walked = 0;
    while walked < cap && (i < end || !table.is_empty(i % cap)) {
        let slot = i % cap;
        if i + PREFETCH_SLOTS < end {
            if let Some(ahead) = table.item_at((i + PREFETCH_SLOTS) % cap) {
                prefetch(ahead.addr());
            }
        }
        match table.item_at(slot) {
            Some(ptr) => {
                let item = Item::new(ptr);
                let inside = if seen_empty && i < end {
                    true
                } else {
                    let position = store.hash(item.key()).position() as u64;
                    lo <= position && position < hi
                };
                if inside {
                    copy_record(item, scratch);
                }
            }
            None => seen_empty |= table.is_empty(slot),
        }
        i += 1;
        walked += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::item::Kind;
    use crate::{Author, StoreConfig};

    fn store(shards: usize) -> std::sync::Arc<Store> {
        Store::new(StoreConfig {
            shards,
            background: false,
            ..StoreConfig::default()
        })
    }

    fn set(s: &Store, key: &str, value: &str) {
        s.write(Author(1), key.as_bytes(), |e| {
            e.put(Kind::String, value.as_bytes(), None, 0).unwrap()
        });
    }

    fn value(s: &Store, key: &str) -> Option<String> {
        s.read(key.as_bytes(), |i| {
            i.map(|i| String::from_utf8(i.value().to_vec()).unwrap())
        })
    }

    /// Loads `bytes` into a new store: (records loaded, keys it holds after).
    fn load(bytes: &[u8]) -> (std::sync::Arc<Store>, u64, usize) {
        let copy = store(4);
        let loaded = copy.load_records(bytes, now_ms()).unwrap();
        let len = copy.len();
        (copy, loaded.records, len)
    }

    #[test]
    fn parts_copy_every_record_once_as_one_copy_does() {
        let s = store(4);
        for i in 0..20_000 {
            set(&s, &format!("k{i}"), &format!("v{i}"));
        }
        let (mut scratch, mut whole, mut parts) = (Vec::new(), Vec::new(), Vec::new());
        let (mut records, mut in_parts) = (0, 0);
        for shard in 0..s.shard_count() {
            let one = s.dump_shard(shard, &mut scratch, &mut whole);
            records += one.records;
            let mut cuts = Vec::new();
            let cut = s.dump_shard_in_parts(shard, 300, &mut scratch, &mut parts, &mut cuts);
            assert_eq!(cut.seq, one.seq);
            assert!(cuts.len() > 1 && cuts.iter().all(|c| c.seq == one.seq));
            assert_eq!(cuts.last().map(|c| c.hi), Some(1 << 32));
            assert!(cut.copied <= one.copied + 16);
            in_parts += cut.records;
        }
        assert_eq!((records, in_parts), (20_000, 20_000));
        assert_eq!(parts.len(), whole.len());
        let (copy, loaded, len) = load(&parts);
        assert_eq!((loaded, len), (20_000, 20_000));
        for i in (0..20_000).step_by(97) {
            assert_eq!(value(&copy, &format!("k{i}")), Some(format!("v{i}")));
        }
    }

    #[test]
    fn part_cuts_cover_the_hash_space_and_keys_find_their_part() {
        // The hash the seeds rebuild is the store's own; part_seq finds a position's part.
        let s = store(1);
        for i in 0..3_000 {
            set(&s, &format!("k{i}"), "v");
        }
        let hasher = PartHasher::new(s.hash_seeds());
        for i in 0..100 {
            let key = format!("k{i}");
            assert_eq!(
                hasher.position(key.as_bytes()),
                s.hash(key.as_bytes()).position()
            );
        }
        let (mut scratch, mut out, mut cuts) = (Vec::new(), Vec::new(), Vec::new());
        s.dump_shard_in_parts(0, 1_000, &mut scratch, &mut out, &mut cuts);
        assert_eq!(cuts.len(), 3);
        assert!(cuts.windows(2).all(|w| w[0].hi < w[1].hi));
        assert_eq!(part_seq(&cuts, 0), Some(cuts[0].seq));
        assert_eq!(part_seq(&cuts, u32::MAX), Some(cuts[2].seq));
        let at = cuts[0].hi as u32;
        assert_eq!(part_seq(&cuts, at - 1), Some(cuts[0].seq));
        assert_eq!(part_seq(&cuts, at), Some(cuts[1].seq));
        assert_eq!(part_seq(&[], 5), None);
    }

    #[test]
    fn a_key_present_throughout_is_copied_once_while_the_table_grows_and_shrinks() {
        // Writers between the parts rebuild the table (growth by inserts, then a shrink by
        // deletes): every key present for the whole copy is copied exactly once, with its value.
        let s = store(1);
        for i in 0..5_000 {
            set(&s, &format!("stay{i}"), "s");
            set(&s, &format!("temp{i}"), "t");
        }
        let cell = s.cell(0);
        let (mut scratch, mut out) = (Vec::new(), Vec::new());
        let parts = 40u64;
        let (mut grown, mut removed) = (0, 0);
        let mut capacities = std::collections::BTreeSet::new();
        for part in 0..parts {
            let (lo, hi) = part_range(part, parts);
            scratch.clear();
            {
                let shard = cell.lock.read();
                copy_part(&s, &shard.table, lo, hi, &mut scratch);
                capacities.insert(shard.table.capacity());
            }
            encode_copies(&scratch, now_ms(), &mut out);
            if part < parts / 2 {
                for _ in 0..1_000 {
                    set(&s, &format!("new{grown}"), "n");
                    grown += 1;
                }
            } else {
                for _ in 0..1_000 {
                    let key = format!("temp{removed}");
                    s.write(Author(1), key.as_bytes(), |e| e.remove());
                    removed = (removed + 1) % 5_000;
                }
            }
        }
        assert!(
            capacities.len() >= 2,
            "the table was rebuilt: {capacities:?}"
        );
        let (copy, loaded, len) = load(&out);
        // No key was copied twice (a second load of a key replaces it: fewer keys than loads).
        assert_eq!(loaded as usize, len);
        for i in 0..5_000 {
            assert_eq!(value(&copy, &format!("stay{i}")).as_deref(), Some("s"));
        }
    }
}
