//! The memory of a table's slot arrays (`table`: references and control bytes): small arrays
//! are allocator blocks, large ones their own anonymous mappings.
//!
//! A growing table frees its old array as it takes one 1.5 times larger. Allocator blocks of
//! 64 KiB and up share the allocator's large pages, whose free parts it does not give back
//! while another block of the page lives: after a million keys were written, the outgrown arrays
//! left ~3 bytes per key of RSS that no one used (docs/memory.md). A mapping of its own is given
//! back whole by `munmap` the moment the table outgrows it, at the cost of rounding to the 4 KiB
//! page (under 4% of an array that size) and two system calls per growth.

use std::alloc::{alloc_zeroed, dealloc, handle_alloc_error, Layout};
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// Arrays of at least this many bytes get their own mapping.
const MAP_FROM: usize = 1;
const PAGE: usize = 4096;

/// Integers, for which all zero bytes are 0: what a slot array may hold.
pub(crate) trait Zeroable: Copy {}
impl Zeroable for u8 {}
impl Zeroable for u32 {}
impl Zeroable for u64 {}

/// A zeroed array of slots that frees its memory to the system when large.
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
            p as *mut T
        } else {
            // SAFETY: the layout has a non-zero size.
            unsafe { alloc_zeroed(Self::layout(len)) as *mut T }
        };
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
    fn small_and_mapped_arrays_start_zeroed_and_hold_what_is_written() {
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
