//! Open-addressing hash table of record references: per slot a 4-byte reference and a control
//! byte, linear probing 16 control bytes at a time.
//!
//! A slot's reference names its record (`pages`: a slab page's number and the block's index,
//! or an entry of the table's side table of records above 4 KiB, `large_refs`); its control
//! byte (`ctrl`) holds 6 bits of the key's hash and the record's deadline and typed-tag bits, or
//! says the slot is empty or a tombstone. 5 bytes a slot where an address and a tag took 8
//! (docs/memory.md, "A 5-byte slot"). A record keeps its reference while it is in the table,
//! across rebuilds (the tag index holds references). Deleted slots become tombstones until the
//! next rebuild, so slot positions never move under a scan, an eviction hand or a held `Entry`.
//!
//! A key's home slot is its 32-bit hash position scaled to the table's size
//! (`(position * capacity) >> 32`, which keeps the order of positions). The position does not depend on the table size,
//! which makes SCAN cursors stable across resizes. Capacities are any multiple of 16, not powers
//! of two, so that the table can grow by a quarter instead of doubling: a table is kept between
//! about 70% and 87.5% full (`MAX_LOAD_*`, `GROWTH_*`), which costs ~6.4 bytes of slots per key
//! on average where doubling 8-byte slots at 3/4 cost ~15.4 (docs/memory.md).

use crate::ctrl::{self, Group, EMPTY, EXPIRE_BIT, GROUP, TAGGED_BIT, TOMBSTONE};
use crate::item::ItemPtr;
use crate::large_refs::LargeRefs;
use crate::pages;
use crate::slots::Slots;

const MIN_CAPACITY: usize = 16;
/// Most slots in use (records and tombstones) before a rebuild: 87.5%. Probing then still
/// rejects most slots by their hash bits (16 control bytes at a time) without touching the
/// record.
const MAX_LOAD_NUM: usize = 7;
const MAX_LOAD_DEN: usize = 8;
/// A growing table takes 5/4 of its contents' needs at the maximum load, so it is ~70% full
/// right after the rebuild: ~6.4 bytes of slots a key on average over key counts, where 85% and
/// growth by half cost ~7.3 (docs/memory.md).
const GROWTH_NUM: usize = 5;
const GROWTH_DEN: usize = 4;

const _: () = assert!(MIN_CAPACITY >= GROUP);

/// Hash of a key, split into the parts the store uses.
#[derive(Clone, Copy, Debug)]
pub(crate) struct KeyHash(pub u64);

impl KeyHash {
    /// Position in the shard's 32-bit hash space (home slot = its top bits).
    pub fn position(self) -> u32 {
        (self.0 >> 32) as u32
    }
    fn bits(self) -> u8 {
        ctrl::hash_bits(self.0)
    }
}

pub(crate) struct Table {
    /// Each occupied slot's record reference (meaningless in other slots), and one control
    /// byte per slot, then a copy of the first `GROUP` (see `ctrl`).
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
        self.slots.capacity()
    }

    /// Bytes of a table of `capacity` slots, counted toward the memory limit.
    pub fn bytes_for(capacity: usize) -> usize {
        capacity * (std::mem::size_of::<u32>() + 1) + GROUP
    }

    /// Bytes of the slot arrays, counted toward the memory limit.
    pub fn bytes(&self) -> usize {
        Self::bytes_for(self.capacity())
    }

    fn home(&self, position: u32) -> usize {
        ((position as u64 * self.slots.capacity() as u64) >> 32) as usize
    }

    /// Slot `i` taken modulo the capacity (`i` < 2 × capacity).
    #[inline]
    fn wrap(&self, i: usize) -> usize {
        let cap = self.slots.capacity();
        if i >= cap {
            i - cap
        } else {
            i
        }
    }

    /// The control bytes from slot `i` on, 16 of them, wrapping.
    #[inline(always)]
    fn group(&self, i: usize) -> Group {
        debug_assert!(i < self.capacity());
        // SAFETY: `i` < capacity and the array holds capacity + `GROUP` bytes.
        unsafe { Group::load_at(self.slots.ctrl().as_ptr().add(i)) }
    }

    /// The reference in slot `j` (< capacity), without a bounds check: probing's hot path.
    #[inline(always)]
    fn ref_in(&self, j: usize) -> u32 {
        debug_assert!(j < self.capacity());
        // SAFETY: `j` < capacity, the array's length.
        unsafe { *self.slots.refs().get_unchecked(j) }
    }

    fn set_ctrl(&mut self, i: usize, c: u8) {
        self.slots.ctrl_mut()[i] = c;
        if i < GROUP {
            let cap = self.slots.capacity();
            self.slots.ctrl_mut()[cap + i] = c;
        }
    }

    /// The record a reference of this table names, while it is in the table.
    #[inline(always)]
    pub fn record(&self, r: u32) -> ItemPtr {
        if pages::is_large(r) {
            ItemPtr::from_addr(self.large.get(r))
        } else {
            ItemPtr::from_block(crate::slab::block_at(r))
        }
    }

    #[inline]
    pub fn item_at(&self, index: usize) -> Option<ItemPtr> {
        ctrl::is_full(self.slots.ctrl()[index]).then(|| self.record(self.slots.refs()[index]))
    }

    /// The reference of the record in occupied slot `index` (what the tag index keeps).
    pub fn ref_at(&self, index: usize) -> u32 {
        debug_assert!(ctrl::is_full(self.slots.ctrl()[index]));
        self.slots.refs()[index]
    }

    /// Whether slot `index` never held a record since the last rebuild (probing stops there).
    pub fn is_empty(&self, index: usize) -> bool {
        self.slots.ctrl()[index] == EMPTY
    }

    /// Whether slot `index` holds a record with a deadline.
    pub fn has_expire(&self, index: usize) -> bool {
        let c = self.slots.ctrl()[index];
        ctrl::is_full(c) && c & EXPIRE_BIT != 0
    }

    /// Whether slot `index` holds a record with typed tags.
    pub fn is_tagged(&self, index: usize) -> bool {
        let c = self.slots.ctrl()[index];
        ctrl::is_full(c) && c & TAGGED_BIT != 0
    }

    pub fn find(&self, hash: KeyHash, key: &[u8]) -> Probe {
        match self.probe(hash, key) {
            Ok((i, _)) => Probe::Found(i),
            Err(i) => Probe::Vacant(i),
        }
    }

    /// As `find`, with the record found: a reader's lookup resolves its reference once.
    #[inline]
    pub fn find_record(&self, hash: KeyHash, key: &[u8]) -> Option<(usize, ItemPtr)> {
        self.probe(hash, key).ok()
    }

    /// The key's slot and record, or the slot where it would be inserted.
    #[inline(always)]
    fn probe(&self, hash: KeyHash, key: &[u8]) -> Result<(usize, ItemPtr), usize> {
        self.probe_for(hash, |item| item.key() == key)
    }

    /// The first record on `hash`'s probe path whose slot carries the hash's bits and which
    /// `accept` takes: how a side structure that keeps hashes, not keys, finds its record again.
    pub fn find_by_hash(&self, hash: KeyHash, accept: impl Fn(ItemPtr) -> bool) -> Option<usize> {
        self.probe_for(hash, accept).ok().map(|(j, _)| j)
    }

    /// Walks `hash`'s probe path to the first empty slot: the first record whose slot carries
    /// the hash's bits and which `accept` takes, or the slot where a record of that hash would
    /// be inserted (the first tombstone on the path, else that empty slot). The load factor
    /// (at most 87.5%) leaves an empty slot on every path.
    #[inline(always)]
    fn probe_for(
        &self,
        hash: KeyHash,
        accept: impl Fn(ItemPtr) -> bool,
    ) -> Result<(usize, ItemPtr), usize> {
        let bits = hash.bits();
        let mut i = self.home(hash.position());
        let mut vacant = None;
        loop {
            let g = self.group(i);
            let empty = g.equal(EMPTY);
            let before = before_first_empty(empty);
            let mut m = g.matching(bits) & before;
            while m != 0 {
                let j = self.wrap(i + m.trailing_zeros() as usize);
                let item = self.record(self.ref_in(j));
                if accept(item) {
                    return Ok((j, item));
                }
                m &= m - 1;
            }
            if vacant.is_none() {
                let t = g.equal(TOMBSTONE) & before;
                if t != 0 {
                    vacant = Some(self.wrap(i + t.trailing_zeros() as usize));
                }
            }
            if empty != 0 {
                let first_empty = self.wrap(i + empty.trailing_zeros() as usize);
                return Err(vacant.unwrap_or(first_empty));
            }
            i = self.wrap(i + GROUP);
        }
    }

    /// Fills a vacant slot returned by `find`, giving the record a reference (a side table
    /// entry when it is large). The caller must call `reserve` first.
    pub fn insert_at(&mut self, index: usize, hash: KeyHash, item: ItemPtr, has_expire: bool) {
        match self.slots.ctrl()[index] {
            EMPTY => {}
            TOMBSTONE => self.tombstones -= 1,
            _ => panic!("insert into an occupied slot"),
        }
        // SAFETY: the record is live and `alloc_size` is the size it was allocated with.
        let r = unsafe { crate::slab::block_ref(item.block(), item.alloc_size()) }
            .unwrap_or_else(|| self.large.insert(item.addr()));
        let tagged = if item.has_tags() { TAGGED_BIT } else { 0 };
        let expire = if has_expire { EXPIRE_BIT } else { 0 };
        self.slots.refs_mut()[index] = r;
        self.set_ctrl(index, hash.bits() | tagged | expire);
        self.len += 1;
        self.expiring += usize::from(has_expire);
    }

    pub fn set_expire_bit(&mut self, index: usize, has_expire: bool) {
        let c = self.slots.ctrl()[index];
        debug_assert!(ctrl::is_full(c));
        if (c & EXPIRE_BIT != 0) != has_expire {
            if has_expire {
                self.expiring += 1;
            } else {
                self.expiring -= 1;
            }
        }
        self.set_ctrl(
            index,
            if has_expire {
                c | EXPIRE_BIT
            } else {
                c & !EXPIRE_BIT
            },
        );
    }

    /// Empties an occupied slot, returning its record for the caller to free.
    pub fn remove_at(&mut self, index: usize) -> ItemPtr {
        let old = self.item_at(index).expect("remove of an empty slot");
        let r = self.slots.refs()[index];
        if pages::is_large(r) {
            self.large.remove(r);
        }
        self.expiring -= usize::from(self.slots.ctrl()[index] & EXPIRE_BIT != 0);
        self.set_ctrl(index, TOMBSTONE);
        self.len -= 1;
        self.tombstones += 1;
        old
    }

    /// Puts a record of another table (a rebuild's source, whose side table this one took) at
    /// the end of `hash`'s probe path, with its control byte and reference.
    fn place(&mut self, hash: KeyHash, c: u8, r: u32) {
        let mut i = self.home(hash.position());
        loop {
            let empty = self.group(i).equal(EMPTY);
            if empty != 0 {
                i = self.wrap(i + empty.trailing_zeros() as usize);
                break;
            }
            i = self.wrap(i + GROUP);
        }
        self.slots.refs_mut()[i] = r;
        self.set_ctrl(i, c);
        self.len += 1;
        self.expiring += usize::from(c & EXPIRE_BIT != 0);
    }

    /// Moves every record of `self` into `fresh` (same references) and makes it the table.
    fn move_into(&mut self, mut fresh: Table, hash_of: impl Fn(&[u8]) -> KeyHash) {
        fresh.large = std::mem::take(&mut self.large);
        for i in 0..self.capacity() {
            let c = self.slots.ctrl()[i];
            if ctrl::is_full(c) {
                let r = self.slots.refs()[i];
                let hash = hash_of(fresh.record(r).key());
                fresh.place(hash, c, r);
            }
        }
        // The records now belong to `fresh`: empty the old slots so dropping them frees nothing.
        self.slots.ctrl_mut().fill(EMPTY);
        *self = fresh;
    }

    /// Whether inserting one more record needs a rebuild first (load above the maximum with
    /// tombstones counted, or a table at least 16 times larger than its contents).
    pub fn needs_rebuild(&self) -> bool {
        let cap = self.capacity();
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
    /// hash; slot positions change, so any held slot index is invalid afterwards (references
    /// do not change).
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
        let cap = self.capacity() as u64;
        ((index as u64) << 32).div_ceil(cap)
    }

    /// Frees every record. Runs on the reaper thread for flushed tables.
    pub fn free_all(&mut self) {
        for i in 0..self.capacity() {
            if let Some(item) = self.item_at(i) {
                // SAFETY: the table owned the record and its slot is cleared right after.
                unsafe { item.free() };
            }
        }
        self.slots.ctrl_mut().fill(EMPTY);
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

/// The mask of a group's slots before its first empty one (all 16 when none is): a probe
/// stops at an empty slot, so matches after it belong to no key on this path.
#[inline(always)]
fn before_first_empty(empty: u32) -> u32 {
    if empty == 0 {
        u32::MAX
    } else {
        (empty & empty.wrapping_neg()) - 1
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

    /// Keys whose home slots are the table's last: their probe paths wrap past the end, which
    /// the copy of the first control bytes after the last must follow (and be kept equal).
    #[test]
    fn probing_wraps_past_the_last_slot() {
        let mut t = Table::new();
        let near_end: Vec<Vec<u8>> = (0u32..)
            .map(|i| i.to_le_bytes().to_vec())
            .filter(|k| t.home_of(hash_of(k)) >= MIN_CAPACITY - 2)
            .take(12)
            .collect();
        for k in &near_end {
            let h = hash_of(k);
            let Probe::Vacant(i) = t.find(h, k) else {
                panic!()
            };
            t.insert_at(i, h, record(k), true);
        }
        for (n, k) in near_end.iter().enumerate() {
            let Probe::Found(i) = t.find(hash_of(k), k) else {
                panic!("missing {n}")
            };
            assert!(t.has_expire(i));
            if n % 2 == 0 {
                t.set_expire_bit(i, false);
                assert!(!t.has_expire(i));
                unsafe { t.remove_at(i).free() };
            }
        }
        assert_eq!((t.len(), t.expiring()), (6, 6));
        for (n, k) in near_end.iter().enumerate() {
            assert_eq!(matches!(t.find(hash_of(k), k), Probe::Found(_)), n % 2 == 1);
        }
        let cap = t.capacity();
        assert_eq!(&t.slots.ctrl()[..GROUP], &t.slots.ctrl()[cap..cap + GROUP]);
    }

    proptest::proptest! {
        /// Any sequence of inserts (slab and large records, with and without deadlines),
        /// removes and rebuilds agrees with a map: what is found, its reference, its bits.
        #[test]
        fn the_table_agrees_with_a_map(ops in proptest::collection::vec((0u32..300, 0u8..8), 1..600)) {
            let mut t = Table::new();
            let mut model: std::collections::HashMap<u32, (u32, bool)> = Default::default();
            for (key, op) in ops {
                let k = key.to_le_bytes();
                let h = hash_of(&k);
                match (t.find(h, &k), model.get(&key).copied()) {
                    (Probe::Found(i), Some((r, expire))) => {
                        proptest::prop_assert_eq!((t.ref_at(i), t.has_expire(i)), (r, expire));
                        if op < 4 {
                            unsafe { t.remove_at(i).free() };
                            model.remove(&key);
                        }
                    }
                    (Probe::Vacant(_), None) => {
                        if t.needs_rebuild() {
                            t.rebuild(hash_of);
                        }
                        let Probe::Vacant(i) = t.find(h, &k) else {
                            panic!("found after a rebuild")
                        };
                        let item = if op == 7 { large_record(&k) } else { record(&k) };
                        t.insert_at(i, h, item, op % 2 == 1);
                        model.insert(key, (t.ref_at(i), op % 2 == 1));
                    }
                    (found, expected) => proptest::prop_assert!(false, "{key}: {} but {expected:?}", matches!(found, Probe::Found(_))),
                }
                proptest::prop_assert_eq!(t.len(), model.len());
                proptest::prop_assert_eq!(t.expiring(), model.values().filter(|v| v.1).count());
            }
            let cap = t.capacity();
            proptest::prop_assert_eq!(&t.slots.ctrl()[..GROUP], &t.slots.ctrl()[cap..cap + GROUP]);
        }
    }

    /// A slab record whose page got no number (past 30 GiB of pages) is named through the side
    /// table, as a large record is, and found, rebuilt and removed like any other.
    #[test]
    fn a_record_in_a_page_without_a_number_goes_to_the_side_table() {
        // A record of 4,065 to 4,096 bytes: a class no other test uses.
        let key = b"unnumbered";
        let header = |value_len| Header {
            tags: &[],
            kind: Kind::String,
            key_len: key.len(),
            value_len,
            expire_at: None,
            flags: 0,
            cas: Some(0),
            version: None,
        };
        let value_len = (0..4096).find(|&v| header(v).alloc_size() == 4090).unwrap();
        let item = ItemPtr::new(&header(value_len), key);
        let number = unsafe { crate::slab::tests::forget_number(item.block()) };
        let mut t = Table::new();
        let h = hash_of(key);
        let Probe::Vacant(i) = t.find(h, key) else {
            panic!()
        };
        t.insert_at(i, h, item, false);
        let r = t.ref_at(i);
        assert!(pages::is_large(r));
        assert_eq!((t.record(r), t.large.len()), (item, 1));
        for n in 0..200u32 {
            put(&mut t, &n.to_le_bytes());
        }
        let Probe::Found(i) = t.find(h, key) else {
            panic!("lost across rebuilds")
        };
        assert_eq!((t.ref_at(i), t.item_at(i)), (r, Some(item)));
        let out = t.remove_at(i);
        assert_eq!((out, t.large.len()), (item, 0));
        unsafe {
            crate::slab::tests::restore_number(item.block(), number);
            out.free();
        }
    }

    #[test]
    fn a_growing_table_stays_between_two_thirds_and_the_maximum_load() {
        let mut t = Table::new();
        let mut least = 1.0f64;
        for i in 0..50_000u32 {
            put(&mut t, &i.to_le_bytes());
            if i > 1_000 {
                least = least.min(t.len() as f64 / t.capacity() as f64);
            }
            assert!(t.len() * MAX_LOAD_DEN <= t.capacity() * MAX_LOAD_NUM);
        }
        assert!(least > 0.68, "{least}");
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
