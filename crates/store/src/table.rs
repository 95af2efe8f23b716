//! Open-addressing hash table of record pointers: one `u64` per slot, linear probing.
//!
//! A slot holds a record's address in its low 48 bits and, in its high 16, a tag: 14 bits of
//! the key's hash (so most mismatches are rejected without touching the record), a bit that
//! says whether the record has a deadline (so active expiry skips records without one) and a bit
//! that says whether it carries typed tags (so flushing finds the tag index entries to drop). Deleted
//! slots become tombstones until the next rebuild, so slot positions never move under a scan, an
//! eviction hand or a held `Entry`.
//!
//! A key's home slot is its 32-bit hash position scaled to the table's size
//! (`(position * capacity) >> 32`, which keeps the order of positions). The position does not depend on the table size,
//! which makes SCAN cursors stable across resizes. Capacities are any multiple of 16, not powers
//! of two, so that the table can grow by half instead of doubling: a table is kept between about
//! 55% and 85% full (`MAX_LOAD_*`, `GROWTH_*`), which costs ~11.6 bytes of slots per key on
//! average where doubling at 3/4 cost ~15.4 (docs/memory.md).

use crate::item::ItemPtr;
use crate::slots::Slots;

const EMPTY: u64 = 0;
const TOMBSTONE: u64 = 1;
const ADDR_MASK: u64 = (1 << 48) - 1;
const EXPIRE_BIT: u64 = 1 << 63;
const TAGGED_BIT: u64 = 1 << 62;
const TAG_MASK: u64 = 0x3fff << 48;
const MIN_CAPACITY: usize = 16;
/// Most slots in use (records and tombstones) before a rebuild: 85%. Linear probing then still
/// rejects most slots by their hash tag without touching the record.
const MAX_LOAD_NUM: usize = 17;
const MAX_LOAD_DEN: usize = 20;
/// A growing table takes 3/2 of its contents' needs at the maximum load, so it is ~57% full
/// right after the rebuild.
const GROWTH_NUM: usize = 3;
const GROWTH_DEN: usize = 2;

/// Hash of a key, split into the parts the store uses.
#[derive(Clone, Copy, Debug)]
pub(crate) struct KeyHash(pub u64);

impl KeyHash {
    /// Position in the shard's 32-bit hash space (home slot = its top bits).
    pub fn position(self) -> u32 {
        (self.0 >> 32) as u32
    }
    fn tag(self) -> u64 {
        (self.0 << 32) & TAG_MASK
    }
}

pub(crate) fn slot_addr(slot: u64) -> Option<ItemPtr> {
    (slot > TOMBSTONE).then(|| ItemPtr::from_addr((slot & ADDR_MASK) as usize))
}

pub(crate) struct Table {
    slots: Slots,
    len: usize,
    /// Records whose slot has the expiry bit (the volatile-* policies' candidates).
    expiring: usize,
    tombstones: usize,
    /// The table does not shrink below this capacity (raised while a snapshot loads, so that
    /// a table sized for what is coming is not shrunk back by the first insert).
    floor: usize,
}

/// Where a lookup ended: the key's slot, or the slot where it would be inserted.
pub(crate) enum Probe {
    Found(usize),
    Vacant(usize),
}

impl Table {
    pub fn new() -> Table {
        Table::with_capacity(MIN_CAPACITY)
    }

    fn with_capacity(capacity: usize) -> Table {
        debug_assert!(capacity.is_multiple_of(MIN_CAPACITY) && capacity as u64 <= u32::MAX as u64);
        Table {
            slots: Slots::zeroed(capacity),
            len: 0,
            expiring: 0,
            tombstones: 0,
            floor: MIN_CAPACITY,
        }
    }

    /// The capacity (a multiple of 16) that holds `records` at the maximum load.
    fn capacity_for(records: usize) -> usize {
        let slots = records * MAX_LOAD_DEN / MAX_LOAD_NUM + 1;
        slots.next_multiple_of(MIN_CAPACITY).max(MIN_CAPACITY)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// How many records have a deadline (their slot's expiry bit).
    pub fn expiring(&self) -> usize {
        self.expiring
    }

    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Bytes of the slot array, counted toward the memory limit.
    pub fn bytes(&self) -> usize {
        self.slots.len() * 8
    }

    fn home(&self, position: u32) -> usize {
        ((position as u64 * self.slots.len() as u64) >> 32) as usize
    }

    fn next(&self, i: usize) -> usize {
        if i + 1 == self.slots.len() {
            0
        } else {
            i + 1
        }
    }

    pub fn slot(&self, index: usize) -> u64 {
        self.slots[index]
    }

    pub fn item_at(&self, index: usize) -> Option<ItemPtr> {
        slot_addr(self.slots[index])
    }

    pub fn slot_has_expire(slot: u64) -> bool {
        slot > TOMBSTONE && slot & EXPIRE_BIT != 0
    }

    pub fn slot_is_tagged(slot: u64) -> bool {
        slot > TOMBSTONE && slot & TAGGED_BIT != 0
    }

    pub fn find(&self, hash: KeyHash, key: &[u8]) -> Probe {
        let tag = hash.tag();
        let mut i = self.home(hash.position());
        let mut vacant = None;
        loop {
            let slot = self.slots[i];
            if slot == EMPTY {
                return Probe::Vacant(vacant.unwrap_or(i));
            }
            if slot == TOMBSTONE {
                vacant.get_or_insert(i);
            } else if slot & TAG_MASK == tag {
                let item = ItemPtr::from_addr((slot & ADDR_MASK) as usize);
                if item.key() == key {
                    return Probe::Found(i);
                }
            }
            i = self.next(i);
        }
    }

    /// The first record on `hash`'s probe path whose slot carries the hash's tag and which
    /// `accept` takes: how a side structure that keeps hashes, not keys, finds its record again.
    pub fn find_by_hash(&self, hash: KeyHash, accept: impl Fn(ItemPtr) -> bool) -> Option<usize> {
        let tag = hash.tag();
        let mut i = self.home(hash.position());
        for _ in 0..self.slots.len() {
            let slot = self.slots[i];
            if slot == EMPTY {
                return None;
            }
            if slot != TOMBSTONE && slot & TAG_MASK == tag {
                let item = ItemPtr::from_addr((slot & ADDR_MASK) as usize);
                if accept(item) {
                    return Some(i);
                }
            }
            i = self.next(i);
        }
        None
    }

    fn encode(hash: KeyHash, item: ItemPtr, has_expire: bool) -> u64 {
        let addr = item.addr() as u64;
        debug_assert_eq!(addr & !ADDR_MASK, 0, "record address beyond 48 bits");
        let tagged = if item.has_tags() { TAGGED_BIT } else { 0 };
        addr | hash.tag() | tagged | if has_expire { EXPIRE_BIT } else { 0 }
    }

    /// Fills a vacant slot returned by `find`. The caller must call `reserve` first.
    pub fn insert_at(&mut self, index: usize, hash: KeyHash, item: ItemPtr, has_expire: bool) {
        match self.slots[index] {
            EMPTY => {}
            TOMBSTONE => self.tombstones -= 1,
            _ => panic!("insert into an occupied slot"),
        }
        self.slots[index] = Self::encode(hash, item, has_expire);
        self.len += 1;
        self.expiring += usize::from(has_expire);
    }

    pub fn set_expire_bit(&mut self, index: usize, has_expire: bool) {
        let slot = self.slots[index];
        debug_assert!(slot > TOMBSTONE);
        if (slot & EXPIRE_BIT != 0) != has_expire {
            if has_expire {
                self.expiring += 1;
            } else {
                self.expiring -= 1;
            }
        }
        self.slots[index] = if has_expire {
            slot | EXPIRE_BIT
        } else {
            slot & !EXPIRE_BIT
        };
    }

    /// Empties an occupied slot, returning its record for the caller to free.
    pub fn remove_at(&mut self, index: usize) -> ItemPtr {
        let old = slot_addr(self.slots[index]).expect("remove of an empty slot");
        self.expiring -= usize::from(self.slots[index] & EXPIRE_BIT != 0);
        self.slots[index] = TOMBSTONE;
        self.len -= 1;
        self.tombstones += 1;
        old
    }

    /// Whether inserting one more record needs a rebuild first (load above the maximum with
    /// tombstones counted, or a table at least 16 times larger than its contents).
    pub fn needs_rebuild(&self) -> bool {
        let cap = self.slots.len();
        (self.len + self.tombstones + 1) * MAX_LOAD_DEN > cap * MAX_LOAD_NUM
            || (cap > self.floor && self.len * 16 < cap)
    }

    /// Capacity a rebuild would pick for the current contents plus one.
    pub fn rebuild_capacity(&self) -> usize {
        Self::capacity_for((self.len + 1) * GROWTH_NUM / GROWTH_DEN).max(self.floor)
    }

    /// Sizes the table for `records` in all without a rebuild on the way, and keeps it at
    /// least that large until `reserve(0)`. Returns the change in bytes.
    pub fn reserve(&mut self, records: usize, hash_of: impl Fn(&[u8]) -> KeyHash) -> isize {
        let before = self.bytes();
        self.floor = if records == 0 {
            MIN_CAPACITY
        } else {
            Self::capacity_for(records)
        };
        if self.floor > self.capacity() {
            let mut fresh = Table::with_capacity(self.floor);
            fresh.floor = self.floor;
            for &slot in self.slots.iter() {
                if let Some(item) = slot_addr(slot) {
                    let hash = hash_of(item.key());
                    let Probe::Vacant(i) = fresh.find(hash, item.key()) else {
                        panic!("duplicate key in table")
                    };
                    fresh.insert_at(i, hash, item, slot & EXPIRE_BIT != 0);
                }
            }
            self.slots.fill(EMPTY);
            *self = fresh;
        }
        self.bytes() as isize - before as isize
    }

    /// Rehashes every record into a table sized for the contents. `hash_of` recomputes a key's
    /// hash; slot positions change, so any held slot index is invalid afterwards.
    pub fn rebuild(&mut self, hash_of: impl Fn(&[u8]) -> KeyHash) {
        let mut fresh = Table::with_capacity(self.rebuild_capacity());
        fresh.floor = self.floor;
        for &slot in self.slots.iter() {
            if let Some(item) = slot_addr(slot) {
                let hash = hash_of(item.key());
                let Probe::Vacant(i) = fresh.find(hash, item.key()) else {
                    panic!("duplicate key in table")
                };
                fresh.insert_at(i, hash, item, slot & EXPIRE_BIT != 0);
            }
        }
        // The records now belong to `fresh`: empty the old slots so dropping them frees nothing.
        self.slots.fill(EMPTY);
        *self = fresh;
    }

    /// Takes every record out, leaving an empty minimal table.
    pub fn take(&mut self) -> Table {
        std::mem::replace(self, Table::new())
    }

    pub fn home_of(&self, hash: KeyHash) -> usize {
        self.home(hash.position())
    }

    /// Position (in the 32-bit hash space) where home slot `index` starts: the least position
    /// whose home is `index`.
    pub fn position_of_home(&self, index: usize) -> u64 {
        let cap = self.slots.len() as u64;
        ((index as u64) << 32).div_ceil(cap)
    }

    /// Frees every record. Runs on the reaper thread for flushed tables.
    pub fn free_all(&mut self) {
        for slot in self.slots.iter_mut() {
            if let Some(item) = slot_addr(*slot) {
                // SAFETY: the table owned the record and the slot is cleared right after.
                unsafe { item.free() };
            }
            *slot = EMPTY;
        }
        self.len = 0;
        self.tombstones = 0;
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        self.free_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::item::{Header, Kind};

    fn hash_of(key: &[u8]) -> KeyHash {
        KeyHash(ahash::RandomState::with_seeds(1, 2, 3, 4).hash_one(key))
    }

    fn record(key: &[u8]) -> ItemPtr {
        let h = Header {
            tags: &[],
            kind: Kind::String,
            key_len: key.len(),
            value_len: 0,
            expire_at: None,
            flags: 0,
            cas: Some(0),
            version: None,
        };
        ItemPtr::new(&h, key)
    }

    fn put(t: &mut Table, key: &[u8]) {
        if t.needs_rebuild() {
            t.rebuild(hash_of);
        }
        let h = hash_of(key);
        match t.find(h, key) {
            Probe::Vacant(i) => t.insert_at(i, h, record(key), false),
            Probe::Found(_) => panic!("already present"),
        }
    }

    #[test]
    fn insert_find_remove_across_rebuilds() {
        let mut t = Table::new();
        for i in 0..10_000u32 {
            put(&mut t, &i.to_le_bytes());
        }
        assert_eq!(t.len(), 10_000);
        for i in (0..10_000u32).step_by(2) {
            let k = i.to_le_bytes();
            let Probe::Found(slot) = t.find(hash_of(&k), &k) else {
                panic!("missing {i}")
            };
            unsafe { t.remove_at(slot).free() };
        }
        for i in 0..10_000u32 {
            let k = i.to_le_bytes();
            let found = matches!(t.find(hash_of(&k), &k), Probe::Found(_));
            assert_eq!(found, i % 2 == 1, "key {i}");
        }
        for i in 10_000..20_000u32 {
            put(&mut t, &i.to_le_bytes());
        }
        assert_eq!(t.len(), 15_000);
        assert!(t.capacity() * MAX_LOAD_NUM >= t.len() * MAX_LOAD_DEN);
    }

    #[test]
    fn a_growing_table_stays_between_half_and_the_maximum_load() {
        let mut t = Table::new();
        let mut least = 1.0f64;
        for i in 0..50_000u32 {
            put(&mut t, &i.to_le_bytes());
            if i > 1_000 {
                least = least.min(t.len() as f64 / t.capacity() as f64);
            }
            assert!(t.len() * MAX_LOAD_DEN <= t.capacity() * MAX_LOAD_NUM);
        }
        assert!(least > 0.55, "{least}");
        assert!(t.capacity().is_multiple_of(MIN_CAPACITY) && !t.capacity().is_power_of_two());
    }

    #[test]
    fn home_positions_are_ordered_and_invert() {
        for cap in [16usize, 48, 1_000_016, 16 * 12_345] {
            let t = Table::with_capacity(cap);
            for index in [1, 2, cap / 3, cap / 2 + 1, cap - 1] {
                let p = t.position_of_home(index);
                assert!(p <= u32::MAX as u64);
                assert_eq!(t.home(p as u32), index, "cap {cap} index {index}");
                assert_eq!(t.home(p as u32 - 1), index - 1, "cap {cap} index {index}");
            }
            assert_eq!(t.home(u32::MAX), cap - 1);
        }
    }

    #[test]
    fn a_reserved_table_does_not_grow_or_shrink_until_released() {
        let mut t = Table::new();
        put(&mut t, b"before");
        assert!(t.reserve(10_000, hash_of) > 0);
        let reserved = t.capacity();
        assert!(reserved * MAX_LOAD_NUM >= 10_000 * MAX_LOAD_DEN);
        for i in 0..10_000u32 {
            put(&mut t, &i.to_le_bytes());
        }
        assert_eq!((t.capacity(), t.len()), (reserved, 10_001));
        let mut small = Table::new();
        small.reserve(10_000, hash_of);
        put(&mut small, b"one");
        assert_eq!(
            small.capacity(),
            reserved,
            "a reserved table is not shrunk by an insert"
        );
        assert_eq!(small.reserve(0, hash_of), 0);
        assert!(small.needs_rebuild(), "released: it may shrink again");
    }

    #[test]
    fn rebuild_shrinks_a_mostly_empty_table() {
        let mut t = Table::new();
        for i in 0..4096u32 {
            put(&mut t, &i.to_le_bytes());
        }
        let big = t.capacity();
        for i in 0..4090u32 {
            let k = i.to_le_bytes();
            let Probe::Found(slot) = t.find(hash_of(&k), &k) else {
                panic!()
            };
            unsafe { t.remove_at(slot).free() };
        }
        assert!(t.needs_rebuild());
        t.rebuild(hash_of);
        assert!(t.capacity() < big / 8);
        assert_eq!(t.len(), 6);
    }
}
