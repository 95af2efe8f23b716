//! A shard's side table of its records above 4 KiB: what a 32-bit reference at or above
//! `pages::LARGE_BASE` names.
//!
//! Such records are allocator blocks (`slab::MAX_SLAB`), which have no page number; so are
//! the blocks of a slab page that got no number (past 30 GiB of pages: `slab::NO_NUMBER`).
//! Those are charged without their 8-byte entry (`slab::held` knows only the size). They get
//! an entry here when their shard's table takes them and lose it when the table lets them go,
//! both under the shard's exclusive lock, so the table needs no lock of its own and no thread
//! shares it (a store-wide table would take a lock per large record, on every I/O thread).
//! Readers of a reference hold the shard's lock (the tag index's references carry the shard).
//! An entry costs 8 bytes, 0.2% of a record that size; freed entries are reused first (a free
//! list threaded through them), so the table holds at most as many entries as the shard ever
//! held large records at once.

use crate::pages::LARGE_BASE;

/// Entries a shard can hold: every reference from `LARGE_BASE` up.
const MAX_ENTRIES: usize = (u32::MAX - LARGE_BASE) as usize + 1;
/// `free` when no entry is free.
const NONE: u32 = u32::MAX;

#[derive(Default)]
pub(crate) struct LargeRefs {
    /// A record's address (even: allocator blocks are aligned), or a free entry's link to the
    /// next free one (`next << 1 | 1`).
    entries: Vec<usize>,
    /// The first free entry.
    free: Option<u32>,
    len: usize,
}

impl LargeRefs {
    /// Gives the record at `addr` a reference.
    pub fn insert(&mut self, addr: usize) -> u32 {
        debug_assert!(addr & 1 == 0);
        self.len += 1;
        let index = match self.free {
            Some(i) => {
                let link = self.entries[i as usize] >> 1;
                self.free = (link != NONE as usize).then_some(link as u32);
                self.entries[i as usize] = addr;
                i
            }
            None => {
                // 2^28 records of over 4 KiB each (a TiB) in one shard: beyond any memory.
                assert!(self.entries.len() < MAX_ENTRIES, "large record table full");
                self.entries.push(addr);
                (self.entries.len() - 1) as u32
            }
        };
        LARGE_BASE + index
    }

    /// The address of the record `r` names.
    #[inline]
    pub fn get(&self, r: u32) -> usize {
        let addr = self.entries[(r - LARGE_BASE) as usize];
        debug_assert!(addr & 1 == 0, "reference to a free large entry");
        addr
    }

    /// Takes back `r`, returning the record's address.
    pub fn remove(&mut self, r: u32) -> usize {
        let index = r - LARGE_BASE;
        let addr = self.get(r);
        let link = self.free.unwrap_or(NONE) as usize;
        self.entries[index as usize] = link << 1 | 1;
        self.free = Some(index);
        self.len -= 1;
        addr
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Any mix of inserts and removes: every live reference names its record, references
        /// are distinct, and the table never holds more entries than records were live at once.
        #[test]
        fn references_name_their_records_and_entries_are_reused(ops in proptest::collection::vec(any::<(bool, usize)>(), 1..500)) {
            let mut t = LargeRefs::default();
            let mut live: Vec<(u32, usize)> = Vec::new();
            let mut most = 0;
            for (n, (remove, pick)) in ops.into_iter().enumerate() {
                if remove && !live.is_empty() {
                    let (r, addr) = live.swap_remove(pick % live.len());
                    prop_assert_eq!(t.remove(r), addr);
                } else {
                    let addr = (n + 1) * 16;
                    let r = t.insert(addr);
                    prop_assert!(r >= LARGE_BASE);
                    prop_assert!(live.iter().all(|&(other, _)| other != r));
                    live.push((r, addr));
                    most = most.max(live.len());
                }
                prop_assert_eq!(t.len(), live.len());
                prop_assert!(t.entries.len() <= most);
                for &(r, addr) in &live {
                    prop_assert_eq!(t.get(r), addr);
                }
            }
        }
    }
}
