//! The memory of a table's slot arrays (`table`: references and control bytes): each array is
//! an anonymous mapping of its own, unmapped when the table outgrows it.
//!
//! A growing table frees its old array as it takes one 1.5 times larger, so by the time a shard
//! holds n records it has freed arrays of about twice its current one. As allocator blocks, the
//! freed arrays stayed resident: mimalloc gives a page back only when all of its blocks are free,
//! and the pages that held small arrays (a shard's first ~15 growths, under 64 KiB) also hold
//! blocks that live on (connection buffers, other shards' arrays), while tables only grow. RSS
//! stayed ~3.5 MB above `used_memory` whatever the key count (docs/memory.md, "The RSS beyond the
//! accounting"): 15 bytes a key at 250,000 keys, 3.5–4 at a million. Only arrays of 64 KiB and up
//! were mapped at first; mapping every array took that to ~0.9 MB. The cost: rounding each array
//! to the 4 KiB page (two arrays a shard: ≤ 8 KiB a shard, 1 MiB over 128 shards at most, most of
//! it in the tables' first, touched, pages) and an `mmap` and a `munmap` per growth.

use std::alloc::{handle_alloc_error, Layout};
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

const PAGE: usize = 4096;

/// Integers, for which all zero bytes are 0: what a slot array may hold.
pub(crate) trait Zeroable: Copy {}
impl Zeroable for u8 {}
impl Zeroable for u32 {}
impl Zeroable for u64 {}

/// A zeroed array of slots, its memory given back to the system when dropped.
pub(crate) struct Slots<T: Zeroable> {
    ptr: NonNull<T>,
    len: usize,
    _owns: PhantomData<T>,
}

// SAFETY: `Slots` owns its memory as a `Box<[T]>` of plain integers would.
unsafe impl<T: Zeroable> Send for Slots<T> {}
// SAFETY: shared access only reads (`Deref`), as for a `Box<[T]>`.
unsafe impl<T: Zeroable> Sync for Slots<T> {}

impl<T: Zeroable> Slots<T> {
    /// `len` slots, all 0 (`len` > 0).
    pub fn zeroed(len: usize) -> Slots<T> {
        assert!(len > 0, "a slot array has slots");
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .expect("slot array size");
        // SAFETY: a fresh private anonymous mapping; it reads as zeros.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes.next_multiple_of(PAGE),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            handle_alloc_error(Self::layout(len));
        }
        let ptr = ptr as *mut T;
        Slots {
            ptr: NonNull::new(ptr).unwrap_or_else(|| handle_alloc_error(Self::layout(len))),
            len,
            _owns: PhantomData,
        }
    }

    fn layout(len: usize) -> Layout {
        Layout::array::<T>(len).expect("slot array size")
    }
}

impl<T: Zeroable> Drop for Slots<T> {
    fn drop(&mut self) {
        let bytes = self.len * std::mem::size_of::<T>();
        // SAFETY: the mapping was made in `zeroed` for the same length.
        unsafe {
            libc::munmap(
                self.ptr.as_ptr() as *mut libc::c_void,
                bytes.next_multiple_of(PAGE),
            );
        }
    }
}

impl<T: Zeroable> Deref for Slots<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: `len` initialised slots owned by `self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Zeroable> DerefMut for Slots<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as `deref`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_start_zeroed_and_hold_what_is_written() {
        for len in [16, 8191, 8192, 100_000] {
            let mut s = Slots::<u64>::zeroed(len);
            assert_eq!(s.len(), len);
            assert!(s.iter().all(|&v| v == 0));
            s[0] = 7;
            s[len - 1] = u64::MAX;
            assert_eq!((s[0], s[len - 1]), (7, u64::MAX));
            let mut b = Slots::<u8>::zeroed(len * 8);
            assert!(b.iter().all(|&v| v == 0));
            b[len * 8 - 1] = 3;
            assert_eq!(b[len * 8 - 1], 3);
        }
    }
}
