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

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::cell::Cell;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::LazyLock;

use parking_lot::Mutex;

/// Bytes of a slab page, and its alignment.
pub(crate) const PAGE_SIZE: usize = 64 * 1024;
/// The page's header (`Page`) takes the first bytes; blocks start here.
const FIRST_BLOCK: usize = 64;
/// Records larger than this are allocator blocks (a page would hold fewer than 16 of them).
pub(crate) const MAX_SLAB: usize = 4096;
const SMALL_STEP: usize = 4;
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
/// `MAX_SLAB` rounded to the allocator's 8-byte step. What the store charges for it.
pub(crate) fn held(size: usize) -> usize {
    if size <= MAX_SLAB {
        class_size(class_index(size))
    } else {
        (size + 7) & !7
    }
}

fn class_index(size: usize) -> usize {
    let size = size.max(SMALL_STEP);
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

/// The header at the start of every page. Fields other than `pool` and `block` change only
/// under the pool's lock.
#[repr(C)]
struct Page {
    pool: *const Pool,
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
        let raw = spare.map_or_else(
            || {
                let layout = page_layout();
                // SAFETY: a non-zero size; the header is written before any other use.
                let raw = unsafe { alloc(layout) } as *mut Page;
                if raw.is_null() {
                    handle_alloc_error(layout);
                }
                raw
            },
            |page| page.0,
        );
        // SAFETY: `raw` is a fresh or spare page, ours alone until pushed.
        unsafe {
            raw.write(Page {
                pool,
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
            libc::madvise(page as *mut libc::c_void, PAGE_SIZE, libc::MADV_DONTNEED);
            dealloc(page as *mut u8, page_layout());
        }
    } else if !p.listed {
        push(&mut head, page);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn classes_are_four_bytes_apart_to_1k_and_32_above() {
        assert_eq!(
            (held(1), held(4), held(5), held(52), held(60)),
            (4, 4, 8, 52, 60)
        );
        assert_eq!(
            (held(1024), held(1025), held(1053), held(1056)),
            (1024, 1056, 1056, 1056)
        );
        assert_eq!((held(4096), held(4097)), (4096, 4104));
        for size in 1..=MAX_SLAB {
            let i = class_index(size);
            assert!(class_size(i) >= size && i < CLASSES, "{size}");
            assert!(i == 0 || class_size(i - 1) < size, "{size}");
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

    #[test]
    fn large_records_bypass_the_pages() {
        let b = allocate(MAX_SLAB + 1);
        unsafe {
            ptr::write_bytes(b.as_ptr(), 7, MAX_SLAB + 1);
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
            let mut live: Vec<(NonNull<u8>, usize, u8)> = Vec::new();
            for (n, (size, free)) in ops.into_iter().enumerate() {
                if free && !live.is_empty() {
                    let (b, s, fill) = live.swap_remove(size % live.len());
                    let bytes = unsafe { std::slice::from_raw_parts(b.as_ptr(), s) };
                    prop_assert!(bytes.iter().all(|&x| x == fill));
                    unsafe { release(b, s) };
                } else {
                    let b = allocate(size);
                    unsafe { ptr::write_bytes(b.as_ptr(), n as u8, size) };
                    live.push((b, size, n as u8));
                }
            }
            for (b, s, fill) in live {
                let bytes = unsafe { std::slice::from_raw_parts(b.as_ptr(), s) };
                prop_assert!(bytes.iter().all(|&x| x == fill));
                unsafe { release(b, s) };
            }
        }
    }
}
