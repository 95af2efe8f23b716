//! The store-wide slab page table (page number → page address) and the 32-bit record
//! reference built on it: how a slot or a tag index entry can name a record in 4 bytes instead
//! of an 8-byte address (docs/memory.md, "A 5-byte slot"; docs/slot5-status.md).
//!
//! A reference below `LARGE_BASE` names a slab block: its page's number in the high 19 bits
//! (`page << INDEX_BITS`) and the block's index in the page in the low 13 (8,192 blocks: the
//! slab's smallest class is 8 bytes, so a 64 KiB page holds at most 8,184). That leaves room for
//! `MAX_PAGES` pages, 30 GiB of records of up to 4 KiB. A reference at or above `LARGE_BASE`
//! names a record above 4 KiB (an allocator block, which has no page), or a block of a page
//! that got no number (past the last one), by its entry in its shard's side table
//! (`large_refs`), so 2^28 of them a shard.
//!
//! The slab takes a number when it takes a page from the allocator and gives it back with the
//! page; freed numbers are reused first, so the numbers in use stay dense and the table never
//! outgrows the most pages held at once. The table is chunked and append-only: a chunk, once
//! published, is never moved or freed, so a reader follows a number with two loads and no lock
//! (readers reach a reference through a shard lock, which orders them after the entry was
//! written). Writers (a page taken, given back or moved to another class: about once per
//! thousand small records) take one mutex. An entry holds the page's address (64 KiB aligned)
//! with its block size in the low 16 bits, so resolving a reference reads no page header.

use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

use parking_lot::Mutex;

/// Bits of a slab reference that hold the block's index in its page.
pub(crate) const INDEX_BITS: u32 = 13;
/// References from here up name large records (`large_refs`); below, slab blocks.
pub(crate) const LARGE_BASE: u32 = 0xF000_0000;
/// Slab pages that can have a number: 491,520 pages of 64 KiB, 30 GiB.
pub(crate) const MAX_PAGES: usize = (LARGE_BASE >> INDEX_BITS) as usize;
/// Entries per chunk (32 KiB of entries, naming 256 MiB of pages).
const CHUNK: usize = 4096;
const CHUNKS: usize = MAX_PAGES / CHUNK;
/// The low bits of an entry that hold the block size (pages are aligned to 64 KiB).
const BLOCK_MASK: usize = 0xffff;

const _: () = assert!(MAX_PAGES.is_multiple_of(CHUNK));
const _: () = assert!(crate::slab::PAGE_SIZE > BLOCK_MASK);

/// Whether reference `r` names a large record (in its shard's side table).
#[inline]
pub(crate) fn is_large(r: u32) -> bool {
    r >= LARGE_BASE
}

/// A slab block's reference from its page's number and its index in the page.
#[inline]
pub(crate) fn slab_ref(page: u32, index: u32) -> u32 {
    debug_assert!((page as usize) < MAX_PAGES && index < 1 << INDEX_BITS);
    page << INDEX_BITS | index
}

struct Numbers {
    /// The next number never given out.
    next: u32,
    /// Numbers given back, reused first.
    free: Vec<u32>,
}

pub(crate) struct PageTable {
    chunks: [AtomicPtr<AtomicUsize>; CHUNKS],
    numbers: Mutex<Numbers>,
}

/// The table of the slab's pages.
pub(crate) static PAGES: PageTable = PageTable::new();

impl PageTable {
    pub const fn new() -> PageTable {
        PageTable {
            chunks: [const { AtomicPtr::new(ptr::null_mut()) }; CHUNKS],
            numbers: Mutex::new(Numbers {
                next: 0,
                free: Vec::new(),
            }),
        }
    }

    #[inline(always)]
    fn slot(&self, number: u32) -> &AtomicUsize {
        let chunk = self.chunks[number as usize / CHUNK].load(Ordering::Acquire);
        debug_assert!(!chunk.is_null(), "page number {number} was never given out");
        // SAFETY: a published chunk holds `CHUNK` entries and lives as long as the table.
        unsafe { &*chunk.add(number as usize % CHUNK) }
    }

    /// Gives `page` (64 KiB aligned) a number, its blocks being `block` bytes. None when every
    /// number is in use (30 GiB of slab pages).
    pub fn register(&self, page: usize, block: usize) -> Option<u32> {
        let mut numbers = self.numbers.lock();
        let number = match numbers.free.pop() {
            Some(n) => n,
            None => {
                let n = numbers.next;
                if n as usize == MAX_PAGES {
                    return None;
                }
                let c = n as usize / CHUNK;
                if self.chunks[c].load(Ordering::Relaxed).is_null() {
                    let fresh: Box<[AtomicUsize]> =
                        (0..CHUNK).map(|_| AtomicUsize::new(0)).collect();
                    // Published for good: readers never take a lock, so a chunk is never freed.
                    self.chunks[c]
                        .store(Box::into_raw(fresh) as *mut AtomicUsize, Ordering::Release);
                }
                numbers.next = n + 1;
                n
            }
        };
        drop(numbers);
        self.set(number, page, block);
        Some(number)
    }

    /// Records that page `number` (at `page`) now holds blocks of `block` bytes (a spare page
    /// taken by another class).
    pub fn set(&self, number: u32, page: usize, block: usize) {
        debug_assert!(page & BLOCK_MASK == 0 && block > 0 && block <= BLOCK_MASK);
        self.slot(number).store(page | block, Ordering::Release);
    }

    /// Takes back the number of a page being given back to the allocator.
    pub fn unregister(&self, number: u32) {
        self.slot(number).store(0, Ordering::Release);
        self.numbers.lock().free.push(number);
    }

    /// The page's address and block size.
    #[inline(always)]
    pub fn get(&self, number: u32) -> (usize, usize) {
        let entry = self.slot(number).load(Ordering::Acquire);
        debug_assert!(entry != 0, "page number {number} is not in use");
        (entry & !BLOCK_MASK, entry & BLOCK_MASK)
    }

    /// The entry as stored (0 when the number is not in use).
    #[cfg(test)]
    pub fn raw(&self, number: u32) -> usize {
        self.slot(number).load(Ordering::Acquire)
    }

    /// Numbers in use.
    #[cfg(test)]
    pub fn in_use(&self) -> usize {
        let numbers = self.numbers.lock();
        numbers.next as usize - numbers.free.len()
    }

    /// Bytes of the chunks published so far (never given back).
    #[cfg(test)]
    pub fn bytes(&self) -> usize {
        self.numbers.lock().next.div_ceil(CHUNK as u32) as usize * CHUNK * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_dense_reused_and_resolve_to_their_page() {
        let table = PageTable::new();
        let page = |i: usize| (i + 1) << 16;
        let numbers: Vec<u32> = (0..CHUNK + 10)
            .map(|i| table.register(page(i), 8 + i % 4000).unwrap())
            .collect();
        assert_eq!(numbers, (0..(CHUNK + 10) as u32).collect::<Vec<_>>());
        for (i, &n) in numbers.iter().enumerate() {
            assert_eq!(table.get(n), (page(i), 8 + i % 4000));
        }
        table.unregister(numbers[7]);
        table.unregister(numbers[CHUNK + 3]);
        assert_eq!(table.in_use(), CHUNK + 8);
        let again = [
            table.register(page(7_000), 60).unwrap(),
            table.register(page(7_001), 64).unwrap(),
        ];
        assert_eq!(
            again,
            [numbers[CHUNK + 3], numbers[7]],
            "given-back numbers come first"
        );
        assert_eq!(table.get(numbers[7]), (page(7_001), 64));
        table.set(numbers[7], page(7_001), 4096);
        assert_eq!(table.get(numbers[7]), (page(7_001), 4096));
        assert_eq!(table.bytes(), 2 * CHUNK * 8);
    }

    #[test]
    fn the_table_refuses_a_page_past_the_last_number() {
        let table = PageTable::new();
        for i in 0..MAX_PAGES {
            assert!(table.register((i + 1) << 16, 8).is_some());
        }
        assert_eq!(table.register(1 << 16, 8), None);
        table.unregister(12);
        assert_eq!(table.register(1 << 16, 8), Some(12));
    }

    #[test]
    fn references_split_into_page_and_index() {
        let r = slab_ref(MAX_PAGES as u32 - 1, (1 << INDEX_BITS) - 1);
        assert_eq!(r, LARGE_BASE - 1);
        assert!(!is_large(r) && is_large(LARGE_BASE) && is_large(u32::MAX));
        assert_eq!(slab_ref(3, 5) >> INDEX_BITS, 3);
        assert_eq!(slab_ref(3, 5) & ((1 << INDEX_BITS) - 1), 5);
    }
}
