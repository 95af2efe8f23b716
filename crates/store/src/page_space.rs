//! The address space of the slab's 64 KiB pages: cut in order from 1 GiB reservations of our
//! own, given back to the system page by page and reused first.
//!
//! Taken from mimalloc (64 KiB blocks aligned to 64 KiB), the pages shared mimalloc's arena with
//! the outgrown slot arrays and every other block, and RSS stayed ~3 MB above what the store
//! holds at any key count (docs/memory.md, "The RSS beyond the accounting"): 13–16 bytes a key
//! at 250,000 keys, 3.5–4 at a million. A mapping per page would cost the kernel one mapping
//! (VMA) each where they do not merge, and 30 GiB of pages is 491,520 pages, far past the
//! default `vm.max_map_count` (65,530). A reservation is mapped without access and without
//! commit charge (`PROT_NONE`, `MAP_NORESERVE`); its pages are opened for reading and writing in
//! order as they are first taken, so it stays at most two mappings. A page given back is
//! emptied with `madvise(MADV_DONTNEED)` by the slab and kept here as address space only.
//! Where the system refuses a reservation, `take` says so and the slab uses the allocator.

use parking_lot::Mutex;

/// Bytes of a slab page; its address is a multiple of it.
use crate::slab::PAGE_SIZE as PAGE;
/// Bytes of one reservation.
const CHUNK: usize = 1 << 30;

struct Space {
    /// Start of each reservation (multiples of `PAGE`).
    chunks: Vec<usize>,
    /// The next never used page of the last reservation, and that reservation's end.
    next: usize,
    end: usize,
    /// Pages given back (their memory already returned to the system), taken first.
    free: Vec<usize>,
}

static SPACE: Mutex<Space> = Mutex::new(Space {
    chunks: Vec::new(),
    next: 0,
    end: 0,
    free: Vec::new(),
});

/// A 64 KiB page aligned to 64 KiB, zeroed if never used; None when the system refuses more
/// address space or access to it.
pub(crate) fn take() -> Option<*mut u8> {
    let mut s = SPACE.lock();
    if let Some(page) = s.free.pop() {
        return Some(page as *mut u8);
    }
    if s.next == s.end {
        let start = reserve()?;
        s.chunks.push(start);
        s.next = start;
        s.end = start + CHUNK;
    }
    let page = s.next;
    // SAFETY: the page lies in a reservation of ours that nothing else uses.
    let opened = unsafe {
        libc::mprotect(
            page as *mut libc::c_void,
            PAGE,
            libc::PROT_READ | libc::PROT_WRITE,
        )
    };
    if opened != 0 {
        return None;
    }
    s.next += PAGE;
    Some(page as *mut u8)
}

/// Takes back a page `take` gave, whose memory the caller has returned to the system; false
/// (and nothing done) for a page that is not ours.
pub(crate) fn give(page: *mut u8) -> bool {
    let addr = page as usize;
    let mut s = SPACE.lock();
    if !s.chunks.iter().any(|&c| (c..c + CHUNK).contains(&addr)) {
        return false;
    }
    s.free.push(addr);
    true
}

/// A fresh reservation of `CHUNK` bytes aligned to `PAGE`.
fn reserve() -> Option<usize> {
    let len = CHUNK + PAGE;
    // SAFETY: a new private mapping with no access touches no existing memory.
    let raw = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if raw == libc::MAP_FAILED {
        return None;
    }
    let raw = raw as usize;
    let start = raw.next_multiple_of(PAGE);
    // SAFETY: both ends lie in the mapping just made and are not part of the reservation.
    unsafe {
        if start > raw {
            libc::munmap(raw as *mut libc::c_void, start - raw);
        }
        let tail = raw + len - (start + CHUNK);
        if tail > 0 {
            libc::munmap((start + CHUNK) as *mut libc::c_void, tail);
        }
    }
    Some(start)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_are_aligned_distinct_writable_and_known_when_given_back() {
        let pages: Vec<*mut u8> = (0..40).map(|_| take().expect("a page")).collect();
        for &p in &pages {
            assert_eq!(p as usize % PAGE, 0);
            // SAFETY: a page `take` gave is ours to write, all of it.
            unsafe {
                assert_eq!(*p.add(PAGE - 1), 0);
                p.write_bytes(7, PAGE);
            }
        }
        let mut sorted: Vec<usize> = pages.iter().map(|&p| p as usize).collect();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), pages.len());
        assert!(give(pages[3]));
        let mut heap = vec![0u8; 16];
        assert!(!give(heap.as_mut_ptr()), "not a page of ours");
    }
}
