//! The process's allocator: mimalloc, except that blocks of `DIRECT` bytes or more are mapped
//! and unmapped directly, so that the thread that frees one is the thread that pays for giving
//! its memory back.
//!
//! mimalloc returns a freed block's pages to the system from the heap of the thread that
//! allocated it, whichever thread freed it: a 100 MB value written by a client was given back
//! on its event loop (151 `madvise(MADV_DONTNEED)` calls of up to 4 MiB, ~0.3 ms each, back to
//! back) after the reaper freed it, stalling every client of that loop (issue 19: a DEL of a
//! 100 MB value cost `--threads 1` a 2.25 ms p99 and a 21 ms p99.9). Mapped directly, its
//! `munmap` runs on the reaper. Such blocks are rare and large, so a system call each is cheap
//! next to filling them, and growing one (a large value's read buffer) is an `mremap`.

use std::alloc::{GlobalAlloc, Layout};

use mimalloc::MiMalloc;

/// Blocks of this many bytes or more are mapped directly: giving back one of them through
/// mimalloc costs its owner ~75 µs or more.
const DIRECT: usize = 1 << 20;
/// Mapped blocks are page aligned; a layout asking more goes to mimalloc.
const PAGE: usize = 4096;

pub struct Allocator;

fn direct(layout: &Layout) -> bool {
    layout.size() >= DIRECT && layout.align() <= PAGE
}

fn map(size: usize) -> *mut u8 {
    // SAFETY: an anonymous private mapping touches no existing memory.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        std::ptr::null_mut()
    } else {
        p.cast()
    }
}

// SAFETY: every block is mapped and unmapped by the same rule (`direct` of the layout the
// caller must pass back unchanged), and mapped blocks are page aligned and zeroed.
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if direct(&layout) {
            map(layout.size())
        } else {
            MiMalloc.alloc(layout)
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if direct(&layout) {
            map(layout.size())
        } else {
            MiMalloc.alloc_zeroed(layout)
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if direct(&layout) {
            libc::munmap(ptr.cast(), layout.size());
        } else {
            MiMalloc.dealloc(ptr, layout)
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let new = Layout::from_size_align_unchecked(new_size, layout.align());
        match (direct(&layout), direct(&new)) {
            (false, false) => MiMalloc.realloc(ptr, layout, new_size),
            (true, true) => {
                let p = libc::mremap(ptr.cast(), layout.size(), new_size, libc::MREMAP_MAYMOVE);
                if p == libc::MAP_FAILED {
                    std::ptr::null_mut()
                } else {
                    p.cast()
                }
            }
            _ => {
                let p = self.alloc(new);
                if !p.is_null() {
                    std::ptr::copy_nonoverlapping(ptr, p, layout.size().min(new_size));
                    self.dealloc(ptr, layout);
                }
                p
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Allocator, DIRECT};
    use std::alloc::{GlobalAlloc, Layout};

    #[test]
    fn blocks_move_between_mimalloc_and_direct_mappings_with_their_bytes() {
        let a = Allocator;
        // SAFETY: each block is used within its size and freed with the layout it has.
        unsafe {
            let small = Layout::from_size_align(1000, 8).unwrap();
            let p = a.alloc(small);
            std::ptr::write_bytes(p, 7, 1000);
            // Grows past DIRECT (into a mapping), then within mappings, then back to mimalloc.
            let p = a.realloc(p, small, DIRECT + 5);
            assert_eq!(*p.add(999), 7);
            std::ptr::write_bytes(p.add(1000), 9, DIRECT + 5 - 1000);
            let big = Layout::from_size_align(DIRECT + 5, 8).unwrap();
            let p = a.realloc(p, big, 3 * DIRECT);
            assert_eq!((*p.add(999), *p.add(DIRECT + 4)), (7, 9));
            let bigger = Layout::from_size_align(3 * DIRECT, 8).unwrap();
            let p = a.realloc(p, bigger, 500);
            assert_eq!(*p.add(499), 7);
            a.dealloc(p, Layout::from_size_align(500, 8).unwrap());
            let z = Layout::from_size_align(2 * DIRECT, 4096).unwrap();
            let p = a.alloc_zeroed(z);
            assert_eq!(p as usize % 4096, 0);
            assert_eq!(*p.add(2 * DIRECT - 1), 0);
            a.dealloc(p, z);
        }
    }
}
