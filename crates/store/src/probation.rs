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

#[cfg(test)]
mod tests {
    use super::*;

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
