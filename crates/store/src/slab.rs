//! Record storage that does not round records up to the allocator's size classes.
//!
//! mimalloc's classes are 16 bytes apart up to 64 and 25% apart above, so a 52-byte record took
//! 64 bytes and a 1,053-byte one 1,280 (docs/memory.md). Here records of up to `MAX_SLAB`
//! bytes live in 64 KiB pages (taken from the global allocator, aligned to their size so that a
//! block finds its page by masking its address), each page cut into blocks of one size class:
//! 4 bytes apart up to 1 KiB, 32 bytes apart up to 4 KiB. Larger records are plain allocator
//! blocks. A free block holds the offset of the next free one (free list per page); pages with
//! free blocks are on their pool's list; a page whose last block is freed leaves its pool for a
//! small store of empty pages that any class takes its next page from (`SPARE_PAGES`, so that a
//! record that moves between two classes does not take and give back a page each time), or,
//! when that is full, goes back to the allocator, its memory to the system at once.
//!
//! Pools are per size class and per arena; a thread allocates from its own arena (threads are
//! spread over `ARENAS` round robin) so that two I/O threads writing records of the same size
//! do not share a lock. A block is freed through its page's pool, whatever thread frees it, so
//! records may be freed outside any shard lock (the lazy-free thread, FLUSHALL, TAG.DEL chunks)
//! exactly as allocator blocks were.
//!
//! Every page has a number in the store-wide page table (`pages`) while the slab holds it, so
//! that a block can also be named by a 32-bit reference (`block_ref`, `block_at`): its page's
//! number and its index in the page. Past the last number (30 GiB of pages) a page has none
//! (`NO_NUMBER`) and its blocks are named as records above 4 KiB are, through their shard's
//! side table (`large_refs`); it tries again for a number each time it is reused. The smallest class is 8 bytes so that a page holds at most
//! 8,184 blocks, which a 13-bit index names.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::cell::Cell;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::LazyLock;

use parking_lot::Mutex;

use crate::pages::{self, PAGES};

/// Bytes of a slab page, and its alignment.
pub(crate) const PAGE_SIZE: usize = 64 * 1024;
/// The page's header (`Page`) takes the first bytes; blocks start here.
const FIRST_BLOCK: usize = 64;
/// Records larger than this are allocator blocks (a page would hold fewer than 16 of them).
pub(crate) const MAX_SLAB: usize = 4096;
const SMALL_STEP: usize = 4;
/// The smallest block (class 0, 4 bytes, is never used): a page then holds at most 8,184 blocks,
/// within a reference's 13-bit index.
const MIN_BLOCK: usize = 8;
const SMALL_MAX: usize = 1024;
const LARGE_STEP: usize = 32;
const SMALL_CLASSES: usize = SMALL_MAX / SMALL_STEP;
const CLASSES: usize = SMALL_CLASSES + (MAX_SLAB - SMALL_MAX) / LARGE_STEP;
/// Lock domains: enough that the I/O threads of a small machine rarely meet.
const ARENAS: usize = 8;
/// Empty pages kept for the next page any pool needs (1 MiB): bounded, and shared by all
/// classes, so that a store whose records left many classes holds no page per class.
const SPARE_PAGES: usize = 16;

/// Bytes a record of `size` bytes really holds: its class size, or its own size above
/// `MAX_SLAB` rounded to the allocator's 8-byte step plus its entry in its shard's side table
/// (`large_refs`, 8 bytes; the side table's spare capacity is not counted). What the store
/// charges for it.
pub(crate) fn held(size: usize) -> usize {
    if size <= MAX_SLAB {
        class_size(class_index(size))
    } else {
        ((size + 7) & !7) + LARGE_ENTRY
    }
}

/// Bytes of a large record's side table entry.
const LARGE_ENTRY: usize = std::mem::size_of::<usize>();

fn class_index(size: usize) -> usize {
    let size = size.max(MIN_BLOCK);
    if size <= SMALL_MAX {
        size.div_ceil(SMALL_STEP) - 1
    } else {
        SMALL_CLASSES + (size - SMALL_MAX).div_ceil(LARGE_STEP) - 1
    }
}

fn class_size(index: usize) -> usize {
    if index < SMALL_CLASSES {
        (index + 1) * SMALL_STEP
    } else {
        SMALL_MAX + (index + 1 - SMALL_CLASSES) * LARGE_STEP
    }
}

/// The header at the start of every page. Fields other than `pool`, `block` and `number`
/// change only under the pool's lock; those three are set when the page joins a pool, and a
/// live block keeps its page in that pool, so whoever holds a block may read them.
#[repr(C)]
struct Page {
    pool: *const Pool,
    /// The page's number in `pages::PAGES`, kept while the slab holds the page (spare too), or
    /// `NO_NUMBER`.
    number: u32,
    prev: *mut Page,
    next: *mut Page,
    block: u32,
    /// Offset of the first free block; 0 when none (no block starts at 0).
    free: u32,
    /// Offset of the first block never handed out.
    bump: u32,
    used: u32,
    /// Whether the page is on its pool's list of pages with room.
    listed: bool,
}

const _: () = assert!(std::mem::size_of::<Page>() <= FIRST_BLOCK);
/// A page that got no number (every number in use): `block_ref` names none of its blocks.
const NO_NUMBER: u32 = u32::MAX;
const _: () = assert!((PAGE_SIZE - FIRST_BLOCK) / MIN_BLOCK <= 1 << pages::INDEX_BITS);

struct Pool {
    block: usize,
    /// The pool's pages that have a free block.
    with_room: Mutex<PagePtr>,
}

#[derive(Clone, Copy)]
struct PagePtr(*mut Page);

// SAFETY: pages are plain memory, only touched under their pool's lock (see `Page`).
unsafe impl Send for PagePtr {}
// SAFETY: as above; a pool's mutable state sits behind its mutex.
unsafe impl Sync for Pool {}
unsafe impl Send for Pool {}

/// The empty pages kept (see `SPARE_PAGES`). Taken after a pool's lock, never before one.
static SPARES: Mutex<Vec<PagePtr>> = Mutex::new(Vec::new());

static POOLS: LazyLock<Box<[Pool]>> = LazyLock::new(|| {
    (0..ARENAS * CLASSES)
        .map(|i| Pool {
            block: class_size(i % CLASSES),
            with_room: Mutex::new(PagePtr(ptr::null_mut())),
        })
        .collect()
});

fn arena() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static ARENA: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    ARENA.with(|a| {
        if a.get() == usize::MAX {
            a.set(NEXT.fetch_add(1, Ordering::Relaxed) % ARENAS);
        }
        a.get()
    })
}

fn page_layout() -> Layout {
    Layout::from_size_align(PAGE_SIZE, PAGE_SIZE).expect("page layout")
}

fn large_layout(size: usize) -> Layout {
    Layout::from_size_align(size, 1).expect("record size overflows")
}

/// SAFETY (for the list helpers): `page` is live and belongs to the pool whose lock is held.
unsafe fn push(head: &mut PagePtr, page: *mut Page) {
    (*page).prev = ptr::null_mut();
    (*page).next = head.0;
    if !head.0.is_null() {
        (*head.0).prev = page;
    }
    head.0 = page;
    (*page).listed = true;
}

unsafe fn unlink(head: &mut PagePtr, page: *mut Page) {
    let (prev, next) = ((*page).prev, (*page).next);
    if prev.is_null() {
        head.0 = next;
    } else {
        (*prev).next = next;
    }
    if !next.is_null() {
        (*next).prev = prev;
    }
    (*page).listed = false;
}

/// Allocates `size` bytes for a record (any alignment-free use: records read their fields
/// unaligned).
pub(crate) fn allocate(size: usize) -> NonNull<u8> {
    if size > MAX_SLAB {
        let layout = large_layout(size);
        // SAFETY: size > MAX_SLAB > 0.
        return NonNull::new(unsafe { alloc(layout) })
            .unwrap_or_else(|| handle_alloc_error(layout));
    }
    let pool = &POOLS[arena() * CLASSES + class_index(size)];
    let block = pool.block as u32;
    let mut head = pool.with_room.lock();
    if head.0.is_null() {
        let spare = SPARES.lock().pop();
        let (raw, number) = match spare {
            // SAFETY: a spare page keeps its header's number (see `release`).
            Some(page) => unsafe {
                let number = match (*page.0).number {
                    NO_NUMBER => PAGES
                        .register(page.0 as usize, block as usize)
                        .unwrap_or(NO_NUMBER),
                    number => {
                        PAGES.set(number, page.0 as usize, block as usize);
                        number
                    }
                };
                (page.0, number)
            },
            None => {
                let layout = page_layout();
                // SAFETY: a non-zero size; the header is written before any other use.
                let raw = unsafe { alloc(layout) } as *mut Page;
                if raw.is_null() {
                    handle_alloc_error(layout);
                }
                // Past 30 GiB of slab pages a page has no number: its blocks are named through
                // the side tables, as large records are.
                let number = PAGES
                    .register(raw as usize, block as usize)
                    .unwrap_or(NO_NUMBER);
                (raw, number)
            }
        };
        // SAFETY: `raw` is a fresh or spare page, ours alone until pushed.
        unsafe {
            raw.write(Page {
                pool,
                number,
                prev: ptr::null_mut(),
                next: ptr::null_mut(),
                block,
                free: 0,
                bump: FIRST_BLOCK as u32,
                used: 0,
                listed: false,
            });
            push(&mut head, raw);
        }
    }
    let page = head.0;
    // SAFETY: the page is on this pool's list (it has room) and the pool's lock is held.
    unsafe {
        let base = page as *mut u8;
        let p = &mut *page;
        let offset = if p.free != 0 {
            let offset = p.free;
            p.free = ptr::read_unaligned(base.add(offset as usize) as *const u32);
            offset
        } else {
            let offset = p.bump;
            p.bump += block;
            offset
        };
        p.used += 1;
        if p.free == 0 && p.bump as usize + block as usize > PAGE_SIZE {
            unlink(&mut head, page);
        }
        NonNull::new_unchecked(base.add(offset as usize))
    }
}

/// Frees a block `allocate(size)` returned.
///
/// # Safety
/// `block` came from `allocate` with the same `size`, and is freed once.
pub(crate) unsafe fn release(block: NonNull<u8>, size: usize) {
    if size > MAX_SLAB {
        dealloc(block.as_ptr(), large_layout(size));
        return;
    }
    let addr = block.as_ptr() as usize;
    let page = (addr & !(PAGE_SIZE - 1)) as *mut Page;
    // The block keeps its page alive, so its pool (set once when the page was made) can be
    // read before taking the lock.
    let pool = &*(*page).pool;
    let mut head = pool.with_room.lock();
    let p = &mut *page;
    let offset = (addr - page as usize) as u32;
    ptr::write_unaligned(block.as_ptr() as *mut u32, p.free);
    p.free = offset;
    p.used -= 1;
    if p.used == 0 {
        if p.listed {
            unlink(&mut head, page);
        }
        drop(head);
        let mut spares = SPARES.lock();
        if spares.len() < SPARE_PAGES {
            spares.push(PagePtr(page));
        } else {
            drop(spares);
            // The allocator would keep the page resident until it purges (after a delay, and
            // only when the freeing thread allocates again): give its memory back now, so that
            // RSS falls as soon as records are deleted.
            // The header is read before `madvise`, which zeroes the page.
            if (*page).number != NO_NUMBER {
                PAGES.unregister((*page).number);
            }
            libc::madvise(page as *mut libc::c_void, PAGE_SIZE, libc::MADV_DONTNEED);
            dealloc(page as *mut u8, page_layout());
        }
    } else if !p.listed {
        push(&mut head, page);
    }
}

/// The 32-bit reference of a block `allocate(size)` returned; None for a record above
/// `MAX_SLAB` (an allocator block) and for a block of a page without a number: its shard's
/// side table names those (`large_refs`).
///
/// # Safety
/// `block` is live and was allocated with `size`.
#[inline]
pub(crate) unsafe fn block_ref(block: NonNull<u8>, size: usize) -> Option<u32> {
    if size > MAX_SLAB {
        return None;
    }
    let addr = block.as_ptr() as usize;
    let page = (addr & !(PAGE_SIZE - 1)) as *const Page;
    if (*page).number == NO_NUMBER {
        return None;
    }
    let index = (addr - page as usize - FIRST_BLOCK) as u32 / (*page).block;
    Some(pages::slab_ref((*page).number, index))
}

/// The block a reference from `block_ref` names, while that block lives.
#[inline(always)]
pub(crate) fn block_at(r: u32) -> NonNull<u8> {
    debug_assert!(!pages::is_large(r));
    let (page, block) = PAGES.get(r >> pages::INDEX_BITS);
    let index = (r & ((1 << pages::INDEX_BITS) - 1)) as usize;
    // SAFETY: a page's address is never null.
    unsafe { NonNull::new_unchecked((page + FIRST_BLOCK + index * block) as *mut u8) }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn classes_are_four_bytes_apart_to_1k_and_32_above() {
        assert_eq!(
            (held(1), held(4), held(8), held(9), held(52), held(60)),
            (8, 8, 8, 12, 52, 60)
        );
        assert_eq!(
            (held(1024), held(1025), held(1053), held(1056)),
            (1024, 1056, 1056, 1056)
        );
        assert_eq!((held(4096), held(4097)), (4096, 4104 + LARGE_ENTRY));
        for size in 1..=MAX_SLAB {
            let i = class_index(size);
            assert!(class_size(i) >= size && i < CLASSES, "{size}");
            assert!(class_size(i - 1) < size.max(MIN_BLOCK), "{size}");
        }
    }

    /// Blocks are distinct, keep what was written, are reused after a free, and pages leave
    /// their pool once empty.
    #[test]
    fn blocks_are_reused_and_empty_pages_returned() {
        // A class no other test uses (the property test stays below it), so that the pool's
        // pages are this test's own.
        let size = 4000;
        let per_page = (PAGE_SIZE - FIRST_BLOCK) / held(size);
        let blocks: Vec<_> = (0..per_page * 3)
            .map(|i| {
                let b = allocate(size);
                unsafe { ptr::write_bytes(b.as_ptr(), i as u8, size) };
                b
            })
            .collect();
        let pages = |bs: &[NonNull<u8>]| {
            let mut v: Vec<usize> = bs.iter().map(|b| b.as_ptr() as usize / PAGE_SIZE).collect();
            v.sort();
            v.dedup();
            v.len()
        };
        assert_eq!(pages(&blocks), 3);
        for (i, b) in blocks.iter().enumerate() {
            let bytes = unsafe { std::slice::from_raw_parts(b.as_ptr(), size) };
            assert!(bytes.iter().all(|&x| x == i as u8));
        }
        let freed = blocks[per_page + 1];
        unsafe { release(freed, size) };
        assert_eq!(allocate(size), freed, "a freed block is handed out again");
        let mut addrs: Vec<usize> = blocks.iter().map(|b| b.as_ptr() as usize).collect();
        addrs.sort();
        addrs.dedup();
        assert_eq!(addrs.len(), blocks.len());
        for b in &blocks {
            unsafe { release(*b, size) };
        }
        let pool = &POOLS[arena() * CLASSES + class_index(size)];
        assert!(
            pool.with_room.lock().0.is_null(),
            "empty pages leave the pool"
        );
        assert!(SPARES.lock().len() <= SPARE_PAGES);
    }

    /// Pages given back to the allocator give back their numbers; blocks of pages taken
    /// afterwards (numbers reused) are named by their references again.
    #[test]
    fn given_back_pages_return_their_numbers_and_refs_still_name_blocks() {
        // A class of its own (3,968 bytes: 16 blocks a page), as in the test above.
        let size = 3950;
        let pages_made = SPARE_PAGES + 4;
        let per_page = (PAGE_SIZE - FIRST_BLOCK) / held(size);
        let take = || -> Vec<(NonNull<u8>, u32)> {
            (0..per_page * pages_made)
                .map(|_| {
                    let b = allocate(size);
                    let r = unsafe { block_ref(b, size) }.expect("a slab block");
                    assert_eq!(block_at(r), b);
                    (b, r)
                })
                .collect()
        };
        let blocks = take();
        let mut numbers: Vec<u32> = blocks
            .iter()
            .map(|&(_, r)| r >> pages::INDEX_BITS)
            .collect();
        numbers.sort();
        numbers.dedup();
        assert_eq!(numbers.len(), pages_made);
        let entries: Vec<(u32, usize)> = numbers.iter().map(|&n| (n, PAGES.get(n).0)).collect();
        for &(b, _) in &blocks {
            unsafe { release(b, size) };
        }
        // At most `SPARE_PAGES` stay with the slab (keeping their entry); the others were
        // given back: their entry was cleared (or reused by another page since).
        let kept = entries
            .iter()
            .filter(|&&(n, page)| PAGES.raw(n) == page | held(size))
            .count();
        assert!(kept <= SPARE_PAGES, "{kept} pages kept their numbers");
        let again = take();
        for (b, r) in again {
            assert_eq!(block_at(r), b);
            unsafe { release(b, size) };
        }
    }

    /// A page that got no number (past 30 GiB of pages) has blocks without a reference; the
    /// table names them through its side table (`table` tests).
    #[test]
    fn blocks_of_a_page_without_a_number_have_no_reference() {
        // A class of its own (4,064 bytes).
        let size = 4050;
        let b = allocate(size);
        let page = (b.as_ptr() as usize & !(PAGE_SIZE - 1)) as *mut Page;
        unsafe {
            let number = (*page).number;
            assert_eq!(block_at(block_ref(b, size).unwrap()), b);
            (*page).number = NO_NUMBER;
            assert_eq!(block_ref(b, size), None);
            (*page).number = number;
            release(b, size);
        }
    }

    /// Marks the page of `block` as having no number (as past the last one), for tests.
    ///
    /// # Safety
    /// `block` is live, and no other test uses its class.
    pub(crate) unsafe fn forget_number(block: NonNull<u8>) -> u32 {
        let page = (block.as_ptr() as usize & !(PAGE_SIZE - 1)) as *mut Page;
        std::mem::replace(&mut (*page).number, NO_NUMBER)
    }

    /// Undoes `forget_number`.
    ///
    /// # Safety
    /// As `forget_number`.
    pub(crate) unsafe fn restore_number(block: NonNull<u8>, number: u32) {
        let page = (block.as_ptr() as usize & !(PAGE_SIZE - 1)) as *mut Page;
        (*page).number = number;
    }

    #[test]
    fn large_records_bypass_the_pages() {
        let b = allocate(MAX_SLAB + 1);
        unsafe {
            ptr::write_bytes(b.as_ptr(), 7, MAX_SLAB + 1);
            assert_eq!(block_ref(b, MAX_SLAB + 1), None);
            release(b, MAX_SLAB + 1);
        }
    }

    #[test]
    fn blocks_freed_on_another_thread_go_back_to_their_pool() {
        let size = 2001;
        let blocks: Vec<usize> = (0..100).map(|_| allocate(size).as_ptr() as usize).collect();
        std::thread::spawn(move || {
            for b in blocks {
                unsafe { release(NonNull::new(b as *mut u8).unwrap(), size) };
            }
        })
        .join()
        .unwrap();
        let again = allocate(size);
        unsafe { release(again, size) };
    }

    proptest! {
        /// Any interleaving of allocations and frees of any sizes keeps blocks disjoint and
        /// their contents intact.
        #[test]
        fn blocks_never_overlap(ops in proptest::collection::vec((prop_oneof![1usize..3900, 4097usize..6000], any::<bool>()), 1..400)) {
            // Every live block's reference names it, from its allocation to its free (other
            // pages meanwhile taken, emptied, given back and reused).
            let round_trips = |b: NonNull<u8>, s: usize| match unsafe { block_ref(b, s) } {
                Some(r) => block_at(r) == b,
                None => s > MAX_SLAB,
            };
            let mut live: Vec<(NonNull<u8>, usize, u8)> = Vec::new();
            for (n, (size, free)) in ops.into_iter().enumerate() {
                if free && !live.is_empty() {
                    let (b, s, fill) = live.swap_remove(size % live.len());
                    let bytes = unsafe { std::slice::from_raw_parts(b.as_ptr(), s) };
                    prop_assert!(bytes.iter().all(|&x| x == fill));
                    prop_assert!(round_trips(b, s));
                    unsafe { release(b, s) };
                } else {
                    let b = allocate(size);
                    prop_assert!(round_trips(b, size));
                    unsafe { ptr::write_bytes(b.as_ptr(), n as u8, size) };
                    live.push((b, size, n as u8));
                }
            }
            for (b, s, fill) in live {
                let bytes = unsafe { std::slice::from_raw_parts(b.as_ptr(), s) };
                prop_assert!(bytes.iter().all(|&x| x == fill));
                prop_assert!(round_trips(b, s));
                unsafe { release(b, s) };
            }
        }
    }
}
