//! The memory of a table's slot array (`table`): small arrays are allocator blocks, large ones
//! their own anonymous mappings.
//!
//! A growing table frees its old array as it takes one 1.5 times larger. Allocator blocks of
//! 64 KiB and up share the allocator's large pages, whose free parts it does not give back
//! while another block of the page lives: after a million keys were written, the outgrown arrays
//! left ~3 bytes per key of RSS that no one used (docs/memory.md). A mapping of its own is given
//! back whole by `munmap` the moment the table outgrows it, at the cost of rounding to the 4 KiB
//! page (under 4% of an array that size) and two system calls per growth.

use std::alloc::{alloc_zeroed, dealloc, handle_alloc_error, Layout};
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// Arrays of at least this many bytes get their own mapping.
const MAP_FROM: usize = 64 * 1024;
const PAGE: usize = 4096;

/// A zeroed array of `u64` slots that frees its memory to the system when large.
pub(crate) struct Slots {
    ptr: NonNull<u64>,
    len: usize,
}

// SAFETY: `Slots` owns its memory as a `Box<[u64]>` would.
unsafe impl Send for Slots {}
// SAFETY: shared access only reads (`Deref`), as for a `Box<[u64]>`.
unsafe impl Sync for Slots {}

impl Slots {
    /// `len` slots, all 0 (`len` > 0).
    pub fn zeroed(len: usize) -> Slots {
        assert!(len > 0, "a slot array has slots");
        let bytes = len.checked_mul(8).expect("slot array size");
        let ptr = if bytes >= MAP_FROM {
            // SAFETY: a fresh private anonymous mapping; it reads as zeros.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    bytes.next_multiple_of(PAGE),
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            if p == libc::MAP_FAILED {
                handle_alloc_error(Self::layout(len));
            }
            p as *mut u64
        } else {
            // SAFETY: the layout has a non-zero size.
            unsafe { alloc_zeroed(Self::layout(len)) as *mut u64 }
        };
        Slots {
            ptr: NonNull::new(ptr).unwrap_or_else(|| handle_alloc_error(Self::layout(len))),
            len,
        }
    }

    fn layout(len: usize) -> Layout {
        Layout::array::<u64>(len).expect("slot array size")
    }
}

impl Drop for Slots {
    fn drop(&mut self) {
        let bytes = self.len * 8;
        // SAFETY: the memory was obtained in `zeroed` the same way for the same length.
        unsafe {
            if bytes >= MAP_FROM {
                libc::munmap(
                    self.ptr.as_ptr() as *mut libc::c_void,
                    bytes.next_multiple_of(PAGE),
                );
            } else {
                dealloc(self.ptr.as_ptr() as *mut u8, Self::layout(self.len));
            }
        }
    }
}

impl Deref for Slots {
    type Target = [u64];
    fn deref(&self) -> &[u64] {
        // SAFETY: `len` initialised slots owned by `self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for Slots {
    fn deref_mut(&mut self) -> &mut [u64] {
        // SAFETY: as `deref`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_and_mapped_arrays_start_zeroed_and_hold_what_is_written() {
        for len in [16, 8191, 8192, 100_000] {
            let mut s = Slots::zeroed(len);
            assert_eq!(s.len(), len);
            assert!(s.iter().all(|&v| v == 0));
            s[0] = 7;
            s[len - 1] = u64::MAX;
            assert_eq!((s[0], s[len - 1]), (7, u64::MAX));
        }
    }
}
