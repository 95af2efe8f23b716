//! Open-addressing hash table of record references: one `u64` per slot, linear probing.
//!
//! A slot holds a record's 32-bit reference (`pages`: a slab page's number and the block's
//! index, or an entry of the table's side table of records above 4 KiB, `large_refs`) in its
//! low 32 bits, an occupied bit, and, in its high 16, a tag: 14 bits of
//! the key's hash (so most mismatches are rejected without touching the record), a bit that
//! says whether the record has a deadline (so active expiry skips records without one) and a bit
//! that says whether it carries typed tags (so flushing finds the tag index entries to drop).
//! A record keeps its reference while it is in the table, across rebuilds (the tag index holds
//! references). Deleted
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
use crate::large_refs::LargeRefs;
use crate::pages;
use crate::slots::Slots;

const EMPTY: u64 = 0;
const TOMBSTONE: u64 = 1;
/// Set in every occupied slot, so that references 0 and 1 differ from `EMPTY` and `TOMBSTONE`.
const OCCUPIED: u64 = 1 << 32;
const REF_MASK: u64 = u32::MAX as u64;
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

pub(crate) struct Table {
    slots: Slots,
    /// The records above 4 KiB, which have no slab page (`large_refs`).
    large: LargeRefs,
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
            large: LargeRefs::default(),
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

    /// The record a reference of this table names, while it is in the table.
    #[inline]
    pub fn record(&self, r: u32) -> ItemPtr {
        if pages::is_large(r) {
            ItemPtr::from_addr(self.large.get(r))
        } else {
            ItemPtr::from_block(crate::slab::block_at(r))
        }
    }

    #[inline]
    fn resolve(&self, slot: u64) -> Option<ItemPtr> {
        (slot > TOMBSTONE).then(|| self.record((slot & REF_MASK) as u32))
    }

    pub fn item_at(&self, index: usize) -> Option<ItemPtr> {
        self.resolve(self.slots[index])
    }

    /// The reference of the record in occupied slot `index` (what the tag index keeps).
    pub fn ref_at(&self, index: usize) -> u32 {
        let slot = self.slots[index];
        debug_assert!(slot > TOMBSTONE);
        (slot & REF_MASK) as u32
    }

    /// Whether slot `index` never held a record since the last rebuild (probing stops there).
    pub fn is_empty(&self, index: usize) -> bool {
        self.slots[index] == EMPTY
    }

    /// Whether slot `index` holds a record with a deadline.
    pub fn has_expire(&self, index: usize) -> bool {
        let slot = self.slots[index];
        slot > TOMBSTONE && slot & EXPIRE_BIT != 0
    }

    /// Whether slot `index` holds a record with typed tags.
    pub fn is_tagged(&self, index: usize) -> bool {
        let slot = self.slots[index];
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
                let item = self.record((slot & REF_MASK) as u32);
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
                let item = self.record((slot & REF_MASK) as u32);
                if accept(item) {
                    return Some(i);
                }
            }
            i = self.next(i);
        }
        None
    }

    /// The slot for `item`, giving it a reference (a side table entry when it is large).
    fn encode(&mut self, hash: KeyHash, item: ItemPtr, has_expire: bool) -> u64 {
        // SAFETY: the record is live and `alloc_size` is the size it was allocated with.
        let r = unsafe { crate::slab::block_ref(item.block(), item.alloc_size()) }
            .unwrap_or_else(|| self.large.insert(item.addr()));
        let tagged = if item.has_tags() { TAGGED_BIT } else { 0 };
        r as u64 | OCCUPIED | hash.tag() | tagged | if has_expire { EXPIRE_BIT } else { 0 }
    }

    /// Puts an occupied slot of another table (a rebuild's source, whose side table this one
    /// took) at the end of `hash`'s probe path, keeping its reference.
    fn place(&mut self, hash: KeyHash, slot: u64) {
        let mut i = self.home(hash.position());
        while self.slots[i] != EMPTY {
            i = self.next(i);
        }
        self.slots[i] = slot;
        self.len += 1;
        self.expiring += usize::from(slot & EXPIRE_BIT != 0);
    }

    /// Moves every record of `self` into `fresh` (same references) and makes it the table.
    fn move_into(&mut self, mut fresh: Table, hash_of: impl Fn(&[u8]) -> KeyHash) {
        fresh.large = std::mem::take(&mut self.large);
        for &slot in self.slots.iter() {
            if let Some(item) = fresh.resolve(slot) {
                fresh.place(hash_of(item.key()), slot);
            }
        }
        // The records now belong to `fresh`: empty the old slots so dropping them frees nothing.
        self.slots.fill(EMPTY);
        *self = fresh;
    }

    /// Fills a vacant slot returned by `find`. The caller must call `reserve` first.
    pub fn insert_at(&mut self, index: usize, hash: KeyHash, item: ItemPtr, has_expire: bool) {
        match self.slots[index] {
            EMPTY => {}
            TOMBSTONE => self.tombstones -= 1,
            _ => panic!("insert into an occupied slot"),
        }
        let slot = self.encode(hash, item, has_expire);
        self.slots[index] = slot;
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
        let slot = self.slots[index];
        let old = self.resolve(slot).expect("remove of an empty slot");
        let r = (slot & REF_MASK) as u32;
        if pages::is_large(r) {
            self.large.remove(r);
        }
        self.expiring -= usize::from(slot & EXPIRE_BIT != 0);
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
            self.move_into(fresh, hash_of);
        }
        self.bytes() as isize - before as isize
    }

    /// Rehashes every record into a table sized for the contents. `hash_of` recomputes a key's
    /// hash; slot positions change, so any held slot index is invalid afterwards.
    pub fn rebuild(&mut self, hash_of: impl Fn(&[u8]) -> KeyHash) {
        let mut fresh = Table::with_capacity(self.rebuild_capacity());
        fresh.floor = self.floor;
        self.move_into(fresh, hash_of);
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
        for i in 0..self.slots.len() {
            if let Some(item) = self.item_at(i) {
                // SAFETY: the table owned the record and the slot is cleared right after.
                unsafe { item.free() };
            }
            self.slots[i] = EMPTY;
        }
        self.large = LargeRefs::default();
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

    /// A record above 4 KiB: an allocator block, named through the table's side table.
    fn large_record(key: &[u8]) -> ItemPtr {
        let h = Header {
            tags: &[],
            kind: Kind::String,
            key_len: key.len(),
            value_len: crate::slab::MAX_SLAB,
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

    /// Slab and large records keep their references across rebuilds (the tag index holds
    /// them), and a removed large record's reference is reused.
    #[test]
    fn references_survive_rebuilds_and_name_their_records() {
        let mut t = Table::new();
        let key = |i: u32| format!("k{i}").into_bytes();
        let mut refs = Vec::new();
        for i in 0..3_000u32 {
            if t.needs_rebuild() {
                t.rebuild(hash_of);
            }
            let k = key(i);
            let h = hash_of(&k);
            let Probe::Vacant(slot) = t.find(h, &k) else {
                panic!()
            };
            let item = if i % 10 == 0 {
                large_record(&k)
            } else {
                record(&k)
            };
            t.insert_at(slot, h, item, i % 3 == 0);
            let r = t.ref_at(slot);
            assert_eq!(pages::is_large(r), i % 10 == 0);
            assert_eq!(t.record(r), item);
            refs.push((r, item));
        }
        assert_eq!(t.large.len(), 300);
        for (i, &(r, item)) in refs.iter().enumerate() {
            assert_eq!(t.record(r), item, "key {i}");
            let k = key(i as u32);
            let Probe::Found(slot) = t.find(hash_of(&k), &k) else {
                panic!("missing {i}")
            };
            assert_eq!((t.ref_at(slot), t.has_expire(slot)), (r, i % 3 == 0));
        }
        let k = key(10);
        let Probe::Found(slot) = t.find(hash_of(&k), &k) else {
            panic!()
        };
        unsafe { t.remove_at(slot).free() };
        let again = large_record(b"again");
        let h = hash_of(b"again");
        let Probe::Vacant(slot) = t.find(h, b"again") else {
            panic!()
        };
        t.insert_at(slot, h, again, false);
        assert_eq!(
            t.ref_at(slot),
            refs[10].0,
            "a freed side table entry is reused"
        );
        assert_eq!(t.large.len(), 300);
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
