//! The side structures of `allkeys-lru`'s S3-FIFO-like policy, one per shard: the probationary
//! FIFO of newly written records and the ghost set of records it evicted.
//!
//! A new record enters probation (the `PROBATION` bit of its reference byte) and its key hash
//! joins the back of the ring. When the shard must evict and the ring holds a twentieth of the
//! shard's records, the front of the ring leaves first: a record read since it was written moves
//! on to the main part (its bit cleared; the main part is CLOCK over the table with a 2-bit
//! frequency), one never read is evicted and its hash remembered in the ghost set. A write of a
//! key the ghost set remembers skips probation: it was evicted too early once. So one-hit
//! wonders and scans pass through a short queue without pushing the read-again records out
//! (S3-FIFO, Yang et al., SOSP '23, with the queue sizes `bench/cachesim.py`'s "cairn-model"
//! found best for cairn's 256 small shards).
//!
//! Readers never touch these structures (a hit only raises the frequency in the record's byte);
//! they change under the shard's exclusive lock. Both are bounded by the shard's record count and
//! their bytes count toward the memory limit. The ring holds hashes, not pointers: an entry
//! whose record was deleted or replaced meanwhile finds no probationary record and is dropped.

use std::collections::VecDeque;

use crate::evict::PROBATION;
use crate::table::KeyHash;

/// One in this many of a shard's records may wait in probation before eviction takes the
/// oldest of them (at least one).
const PROBATION_SHARE: usize = 20;
/// Ring entries beyond the probation target that deleted records' stale entries may occupy
/// before the oldest entries are promoted without eviction (bounds the ring without eviction).
const RING_SLACK: usize = 16;

#[derive(Default)]
pub(crate) struct Probation {
    /// Hashes of the records in probation, oldest first (with stale entries of records gone).
    ring: VecDeque<u64>,
    /// Direct-mapped fingerprints of the hashes of records evicted from probation; 0 = none.
    /// A power-of-two length, about half the shard's record count.
    ghost: Box<[u16]>,
}

impl Probation {
    /// Bytes held, counted toward the memory limit.
    pub fn bytes(&self) -> usize {
        self.ring.capacity() * 8 + self.ghost.len() * 2
    }

    /// How many records may wait in probation in a shard of `records`.
    pub fn target(records: usize) -> usize {
        (records / PROBATION_SHARE).max(1)
    }

    /// Whether eviction should take from the probation ring (rather than the main part).
    pub fn is_due(&self, records: usize) -> bool {
        self.ring.len() >= Self::target(records)
    }

    /// The oldest entry, taken off the ring.
    pub fn pop(&mut self) -> Option<KeyHash> {
        self.ring.pop_front().map(KeyHash)
    }

    /// A new record with `hash` in a shard of `records`: true when it enters probation (its
    /// hash is queued), false when the ghost set remembered it (it goes to the main part).
    /// When stale entries have filled the ring past its bound, the oldest is returned for the
    /// caller to promote.
    pub fn admit(&mut self, hash: KeyHash, records: usize) -> (bool, Option<KeyHash>) {
        if self.forget(hash) {
            return (false, None);
        }
        let overflow = if self.ring.len() >= 2 * Self::target(records) + RING_SLACK {
            self.pop()
        } else {
            None
        };
        self.ring.push_back(hash.0);
        (true, overflow)
    }

    fn ghost_slot(&self, hash: KeyHash) -> (usize, u16) {
        // The shard index takes the hash's low bits and the table's home slot its top bits:
        // the slot and fingerprint come from bits in between and above.
        let index = (hash.0 >> 16) as usize & (self.ghost.len() - 1);
        (index, (hash.0 >> 48) as u16 | 1)
    }

    /// Remembers the hash of a record evicted from probation in a shard of `records`. The set
    /// is resized (and so emptied) when the shard's size calls for another power of two.
    pub fn remember(&mut self, hash: KeyHash, records: usize) {
        let want = (records / 2).max(1).next_power_of_two();
        if self.ghost.len() != want {
            self.ghost = vec![0; want].into_boxed_slice();
        }
        let (i, fingerprint) = self.ghost_slot(hash);
        self.ghost[i] = fingerprint;
    }

    /// Whether the ghost set remembers `hash`; it forgets it if so.
    fn forget(&mut self, hash: KeyHash) -> bool {
        if self.ghost.is_empty() {
            return false;
        }
        let (i, fingerprint) = self.ghost_slot(hash);
        let found = self.ghost[i] == fingerprint;
        if found {
            self.ghost[i] = 0;
        }
        found
    }

    /// Drops everything (FLUSHALL), freeing the memory.
    pub fn clear(&mut self) {
        *self = Probation::default();
    }
}

impl crate::shard::Shard {
    /// Takes every record out of probation and frees the ring and ghost set: the policy is no
    /// longer `allkeys-lru`, and under an LFU policy the probation bit would read as a high
    /// counter. Costs one lookup per ring entry (about a twentieth of the shard's records).
    pub(crate) fn end_probation(&mut self, store: &crate::Store) {
        let before = self.probation.bytes();
        while let Some(hash) = self.probation.pop() {
            let found = self
                .table
                .find_by_hash(hash, |item| crate::evict::probationer_is(store, item, hash));
            if let Some(item) = found.and_then(|i| self.table.item_at(i)) {
                item.set_reference(item.reference() & !PROBATION);
            }
        }
        self.probation.clear();
        self.used -= before;
        store.account(-(before as isize));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Author, EvictionPolicy, Kind, Store, StoreConfig};

    fn store(maxmemory: u64) -> std::sync::Arc<Store> {
        Store::new(StoreConfig {
            shards: 1,
            maxmemory,
            policy: EvictionPolicy::AllKeysLru,
            background: false,
            ..StoreConfig::default()
        })
    }

    fn put(s: &Store, key: &str) {
        assert!(s.write(Author::SERVER, key.as_bytes(), |e| {
            e.put(Kind::String, &[b'v'; 200], None, 0).is_ok()
        }));
    }

    /// The reference byte, without counting as a read.
    fn reference(s: &Store, key: &str) -> Option<u8> {
        s.peek(key.as_bytes(), |i| i.map(|i| i.frequency()))
    }

    /// Scan resistance: records read once stay while a long stream of records never read
    /// passes through (plain CLOCK lost them after two sweeps).
    #[test]
    fn records_read_once_outlast_a_stream_of_records_never_read() {
        let s = store(128 * 1024);
        for i in 0..100 {
            put(&s, &format!("hot{i}"));
            assert!(s.read(format!("hot{i}").as_bytes(), |i| i.is_some()));
        }
        for i in 0..5000 {
            put(&s, &format!("cold{i}"));
        }
        assert!(s.stats().evicted > 4000);
        let left = (0..100)
            .filter(|i| reference(&s, &format!("hot{i}")).is_some())
            .count();
        assert_eq!(left, 100, "hot records evicted by a scan");
        assert!(s.used_memory() <= 128 * 1024);
    }

    /// The ring keeps hashes; a slot keeps 6 bits of one. With every record in probation, each
    /// key's hash finds its own record, not another with the same bits earlier on its path.
    #[test]
    fn a_probationer_is_found_by_its_whole_hash() {
        let s = store(1 << 30);
        for i in 0..5000 {
            put(&s, &format!("k{i}"));
        }
        let shard = s.cell(0).lock.read();
        for i in 0..shard.table.capacity() {
            if let Some(item) = shard.table.item_at(i) {
                item.set_reference(PROBATION);
            }
        }
        let wrong = (0..5000)
            .filter(|i| {
                let key = format!("k{i}");
                let found = shard
                    .probationer(&s, s.hash(key.as_bytes()))
                    .and_then(|j| shard.table.item_at(j));
                found.map(|item| item.key()) != Some(key.as_bytes())
            })
            .count();
        assert_eq!(wrong, 0, "records found for another key's hash");
    }

    #[test]
    fn a_key_evicted_unread_comes_back_to_the_main_part() {
        let s = store(128 * 1024);
        // Under pressure first: before, records past the ring's bound leave probation unread.
        let mut i = 0;
        while s.stats().evicted == 0 {
            put(&s, &format!("k{i}"));
            i += 1;
        }
        put(&s, "early");
        assert_eq!(reference(&s, "early"), Some(PROBATION));
        while reference(&s, "early").is_some() {
            put(&s, &format!("k{i}"));
            i += 1;
            assert!(i < 10_000, "never evicted");
        }
        // Written again soon after: the ghost set remembers it, so it skips probation.
        put(&s, "early");
        assert_eq!(reference(&s, "early"), Some(0));
        put(&s, "fresh");
        assert_eq!(reference(&s, "fresh"), Some(PROBATION));
        // A read counts in the low bits and leaves the probation bit alone.
        s.read(b"fresh", |_| ());
        assert_eq!(reference(&s, "fresh"), Some(PROBATION | 1));
    }

    #[test]
    fn leaving_allkeys_lru_takes_every_record_out_of_probation() {
        let s = store(128 * 1024);
        for i in 0..2000 {
            put(&s, &format!("k{i}"));
        }
        let in_probation = |s: &Store| {
            (1500..2000)
                .filter(|i| reference(s, &format!("k{i}")).is_some_and(|r| r & PROBATION != 0))
                .count()
        };
        assert!(in_probation(&s) > 0);
        let before = s.used_memory();
        s.set_policy(EvictionPolicy::AllKeysLfu);
        assert_eq!(in_probation(&s), 0);
        assert_eq!(s.cell(0).lock.read().probation.bytes(), 0);
        assert!(s.used_memory() < before);
    }

    /// The ring and ghost set are charged to the memory limit and freed by a flush.
    #[test]
    fn probation_memory_is_counted_and_freed() {
        let s = store(128 * 1024);
        let empty = s.used_memory();
        for i in 0..2000 {
            put(&s, &format!("k{i}"));
        }
        let shard = s.cell(0).lock.read();
        let side = shard.probation.bytes() as u64;
        assert!(side > 0);
        let records: u64 = (0..shard.table.capacity())
            .filter_map(|i| shard.table.item_at(i))
            .map(|item| item.charged() as u64)
            .sum();
        assert_eq!(s.used_memory(), shard.table.bytes() as u64 + records + side);
        drop(shard);
        let stats = s.stats();
        assert_eq!(
            stats.records_memory(),
            records,
            "the side structures count as index"
        );
        s.flush();
        assert_eq!(s.used_memory(), empty);
    }

    fn admit(p: &mut Probation, hash: KeyHash, records: usize) -> (bool, Option<u64>) {
        let (probation, overflow) = p.admit(hash, records);
        (probation, overflow.map(|h| h.0))
    }

    fn hash(i: u64) -> KeyHash {
        KeyHash(i.wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }

    #[test]
    fn new_records_queue_in_order_until_due() {
        let mut p = Probation::default();
        for i in 0..5 {
            assert_eq!(admit(&mut p, hash(i), 100), (true, None));
        }
        assert!(p.is_due(100), "5 of 100 records is the target");
        assert!(!p.is_due(200));
        assert_eq!(p.pop().map(|h| h.0), Some(hash(0).0));
        assert!(!p.is_due(100));
    }

    #[test]
    fn the_ghost_set_sends_a_returning_key_to_main_once() {
        let mut p = Probation::default();
        p.remember(hash(7), 100);
        assert_eq!(p.ghost.len(), 64);
        assert_eq!(admit(&mut p, hash(7), 100), (false, None));
        // Forgotten after the first return.
        assert_eq!(admit(&mut p, hash(7), 100), (true, None));
        assert_eq!(admit(&mut p, hash(8), 100), (true, None));
        // Resizing for another shard size empties it.
        p.remember(hash(9), 100);
        p.remember(hash(10), 1000);
        assert_eq!(p.ghost.len(), 512);
        assert_eq!(admit(&mut p, hash(9), 1000), (true, None));
    }

    #[test]
    fn stale_entries_cannot_grow_the_ring_without_bound() {
        let mut p = Probation::default();
        let mut overflowed = 0;
        for i in 0..10_000 {
            overflowed += usize::from(admit(&mut p, hash(i), 100).1.is_some());
        }
        assert!(p.ring.len() <= 2 * 5 + RING_SLACK + 1, "{}", p.ring.len());
        assert!(overflowed > 9_000);
        assert!(p.bytes() < 1024);
        p.clear();
        assert_eq!(p.bytes(), 0);
    }
}
