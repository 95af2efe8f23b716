//! The slot array of a shard's table: zeroed `u64`s, mapped straight from the kernel when large.
//!
//! A table that grows frees its old array. Through the allocator, those freed arrays (as many
//! bytes as the table itself, summed over its past sizes) stayed resident: measured at 16.8 B of
//! RSS per key for 1M small keys (docs/memory.md). A large array is therefore its own anonymous
//! mapping, given back to the kernel the moment it is freed; its untouched pages are zero and cost
//! nothing until written. Small arrays (most shards of a small store) stay on the heap, where a
//! mapping's page granularity would waste more than it saves.

use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// Arrays of at least this many bytes are mapped: a few pages, so that rounding up to whole
/// pages costs at most a few percent.
const MAP_BYTES: usize = 64 * 1024;

pub(crate) struct Slots {
    ptr: NonNull<u64>,
    len: usize,
    mapped: bool,
}

// SAFETY: `Slots` owns its memory exclusively, as a `Box<[u64]>` does.
unsafe impl Send for Slots {}
unsafe impl Sync for Slots {}

impl Slots {
    /// `len` zeroed slots.
    pub fn zeroed(len: usize) -> Slots {
        let bytes = len * 8;
        if bytes >= MAP_BYTES {
            // SAFETY: a fresh private anonymous mapping; checked for failure below.
            let raw = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    bytes,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            if raw != libc::MAP_FAILED {
                let ptr = NonNull::new(raw as *mut u64).expect("mmap returned null");
                return Slots {
                    ptr,
                    len,
                    mapped: true,
                };
            }
            // No mapping to be had: the heap's allocation fails the same way a Vec's would.
        }
        let boxed: Box<[u64]> = vec![0u64; len].into_boxed_slice();
        let ptr = NonNull::new(Box::into_raw(boxed) as *mut u64).expect("box is not null");
        Slots {
            ptr,
            len,
            mapped: false,
        }
    }
}

impl Deref for Slots {
    type Target = [u64];
    fn deref(&self) -> &[u64] {
        // SAFETY: `ptr` holds `len` initialised u64s for as long as `self` lives.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for Slots {
    fn deref_mut(&mut self) -> &mut [u64] {
        // SAFETY: as `deref`, and `&mut self` is exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Slots {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from `zeroed` with this `len` and is released exactly once.
        unsafe {
            if self.mapped {
                libc::munmap(self.ptr.as_ptr() as *mut libc::c_void, self.len * 8);
            } else {
                let slice = std::ptr::slice_from_raw_parts_mut(self.ptr.as_ptr(), self.len);
                drop(Box::from_raw(slice));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_and_mapped_arrays_start_zeroed_and_hold_writes() {
        for len in [16, MAP_BYTES / 8 - 1, MAP_BYTES / 8, 100_000] {
            let mut s = Slots::zeroed(len);
            assert_eq!(s.mapped, len * 8 >= MAP_BYTES);
            assert!(s.iter().all(|&v| v == 0));
            s[len - 1] = 7;
            s[0] = 3;
            assert_eq!((s[0], s[len - 1], s.len()), (3, 7, len));
        }
    }
}
