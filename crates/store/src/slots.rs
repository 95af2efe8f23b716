//! The memory of a table's slots (`table`): its reference array and its control bytes, together
//! in one anonymous mapping of their own, unmapped when the table outgrows it.
//!
//! A growing table frees its old slots as it takes ones 1.25 times larger, so by the time a
//! shard holds n records it has freed several times its current slots. As allocator blocks, the
//! freed arrays stayed resident: mimalloc gives a page back only when all of its blocks are free,
//! and the pages that held small arrays (a shard's first growths, under 64 KiB) also hold blocks
//! that live on (connection buffers, other shards' arrays), while tables only grow. RSS stayed
//! ~3.5 MB above `used_memory` whatever the key count (docs/memory.md, "Slot arrays"): 15 bytes a
//! key at 250,000 keys, 3.5–4 at a million. Only arrays of 64 KiB and up were mapped at first;
//! mapping every table's slots took that to ~0.7 MB. The cost: an `mmap` and a `munmap` per
//! growth, and rounding to the 4 KiB page, one partly used page a table (~2 KiB on average,
//! 0.25 MiB over 128 shards; the two arrays share a mapping so that a table has one such page,
//! not two), which `Table::bytes` does not charge.

use std::alloc::{handle_alloc_error, Layout};
use std::ptr::NonNull;

use crate::ctrl::GROUP;

const PAGE: usize = 4096;

/// A table's slots, all zero at first: `capacity` 4-byte references, then `capacity + GROUP`
/// control bytes (the last `GROUP` a copy of the first, see `ctrl`).
pub(crate) struct Slots {
    ptr: NonNull<u8>,
    capacity: usize,
}

// SAFETY: `Slots` owns its memory as a `Box<[u8]>` would.
unsafe impl Send for Slots {}
// SAFETY: shared access only reads, as for a `Box<[u8]>`.
unsafe impl Sync for Slots {}

impl Slots {
    /// Slots for `capacity` records (> 0).
    pub fn zeroed(capacity: usize) -> Slots {
        assert!(capacity > 0, "a table has slots");
        let len = Self::mapped(capacity);
        // SAFETY: a fresh private anonymous mapping; it reads as zeros.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            handle_alloc_error(Layout::from_size_align(len, PAGE).expect("slot array size"));
        }
        Slots {
            // SAFETY: mmap never returns null on success.
            ptr: unsafe { NonNull::new_unchecked(ptr as *mut u8) },
            capacity,
        }
    }

    /// Bytes mapped for `capacity` slots.
    fn mapped(capacity: usize) -> usize {
        capacity
            .checked_mul(std::mem::size_of::<u32>() + 1)
            .and_then(|b| b.checked_add(GROUP))
            .expect("slot array size")
            .next_multiple_of(PAGE)
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The references, one a slot.
    #[inline(always)]
    pub fn refs(&self) -> &[u32] {
        // SAFETY: the mapping starts with `capacity` references (page aligned, so aligned for
        // `u32`), owned by `self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr() as *const u32, self.capacity) }
    }

    #[inline(always)]
    pub fn refs_mut(&mut self) -> &mut [u32] {
        // SAFETY: as `refs`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr() as *mut u32, self.capacity) }
    }

    /// The control bytes, one a slot and `GROUP` more.
    #[inline(always)]
    pub fn ctrl(&self) -> &[u8] {
        // SAFETY: `capacity + GROUP` bytes follow the references in the mapping.
        unsafe {
            std::slice::from_raw_parts(
                self.ptr.as_ptr().add(self.capacity * 4),
                self.capacity + GROUP,
            )
        }
    }

    #[inline(always)]
    pub fn ctrl_mut(&mut self) -> &mut [u8] {
        // SAFETY: as `ctrl`, and `&mut self` makes the access exclusive.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.ptr.as_ptr().add(self.capacity * 4),
                self.capacity + GROUP,
            )
        }
    }
}

impl Drop for Slots {
    fn drop(&mut self) {
        // SAFETY: the mapping was made in `zeroed` for the same capacity.
        unsafe {
            libc::munmap(
                self.ptr.as_ptr() as *mut libc::c_void,
                Self::mapped(self.capacity),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_start_zeroed_and_the_two_arrays_do_not_overlap() {
        for cap in [16, 816, 817, 8192, 100_000] {
            let mut s = Slots::zeroed(cap);
            assert_eq!(
                (s.capacity(), s.refs().len(), s.ctrl().len()),
                (cap, cap, cap + GROUP)
            );
            assert!(s.refs().iter().all(|&v| v == 0) && s.ctrl().iter().all(|&v| v == 0));
            s.refs_mut()[0] = 7;
            s.refs_mut()[cap - 1] = u32::MAX;
            s.ctrl_mut()[0] = 3;
            s.ctrl_mut()[cap + GROUP - 1] = 5;
            assert_eq!((s.refs()[0], s.refs()[cap - 1]), (7, u32::MAX));
            assert_eq!(
                (s.ctrl()[0], s.ctrl()[1], s.ctrl()[cap + GROUP - 1]),
                (3, 0, 5)
            );
        }
    }
}
