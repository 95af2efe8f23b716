//! A table slot's control byte, and matching 16 of them at once.
//!
//! The table keeps one byte per slot beside its 4-byte record references (docs/memory.md,
//! "A 5-byte slot"): 0 for a slot never used since the last rebuild (probing stops there), 1
//! for a tombstone, and for a record 6 bits of its key's hash (1 to 63; so most mismatches are
//! rejected without touching the record) above a bit that says it has a deadline (active expiry
//! skips records without one) and a bit that says it carries typed tags (flushing finds the
//! tag index entries to drop). Probing reads 16 control bytes at a time (SSE2 on x86-64, a plain
//! loop elsewhere) and visits only the slots whose hash bits match, in slot order, up to the
//! first empty one: still linear probing, so a key sits between its home and the next empty
//! slot, which SCAN and snapshot ranges rely on.

/// Control bytes read at once. The table keeps a copy of its first `GROUP` bytes after its
/// last, so that a group starting at any slot reads 16 bytes in order, wrapping.
pub(crate) const GROUP: usize = 16;
pub(crate) const EMPTY: u8 = 0;
pub(crate) const TOMBSTONE: u8 = 1;
pub(crate) const EXPIRE_BIT: u8 = 0b10;
pub(crate) const TAGGED_BIT: u8 = 0b01;
/// The hash bits of a record's control byte.
pub(crate) const HASH_BITS: u8 = 0b1111_1100;

/// Whether a control byte is a record's.
#[inline]
pub(crate) fn is_full(c: u8) -> bool {
    c & HASH_BITS != 0
}

/// The hash bits a record with this key hash carries (never 0, which marks a slot without one).
#[inline]
pub(crate) fn hash_bits(hash: u64) -> u8 {
    (((hash >> 26) & 63) as u8).max(1) << 2
}

/// 16 control bytes.
#[derive(Clone, Copy)]
pub(crate) struct Group([u8; GROUP]);

impl Group {
    #[cfg(test)]
    pub fn load(bytes: &[u8]) -> Group {
        Group(bytes[..GROUP].try_into().expect("a group is 16 bytes"))
    }

    /// The 16 bytes from `p` on.
    ///
    /// # Safety
    /// `p` points to at least `GROUP` readable bytes.
    #[inline(always)]
    pub unsafe fn load_at(p: *const u8) -> Group {
        Group(std::ptr::read_unaligned(p as *const [u8; GROUP]))
    }

    /// Bit `i` set where byte `i` equals `byte`.
    #[inline]
    pub fn equal(self, byte: u8) -> u32 {
        self.masked_equal(0xff, byte)
    }

    /// Bit `i` set where byte `i` holds a record with hash bits `bits` (from `hash_bits`).
    #[inline]
    pub fn matching(self, bits: u8) -> u32 {
        self.masked_equal(HASH_BITS, bits)
    }

    #[cfg(target_arch = "x86_64")]
    #[inline]
    fn masked_equal(self, mask: u8, byte: u8) -> u32 {
        use std::arch::x86_64::*;
        // SAFETY: SSE2 is part of x86-64; the load reads the 16 bytes of `self`, unaligned.
        unsafe {
            let g = _mm_loadu_si128(self.0.as_ptr() as *const __m128i);
            let masked = _mm_and_si128(g, _mm_set1_epi8(mask as i8));
            _mm_movemask_epi8(_mm_cmpeq_epi8(masked, _mm_set1_epi8(byte as i8))) as u32
        }
    }

    #[cfg(not(target_arch = "x86_64"))]
    #[inline]
    fn masked_equal(self, mask: u8, byte: u8) -> u32 {
        let mut bits = 0;
        for (i, &c) in self.0.iter().enumerate() {
            bits |= u32::from(c & mask == byte) << i;
        }
        bits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_match_hash_bits_whatever_the_flags() {
        let want = hash_bits(0x3f << 26);
        assert_eq!(want, 0xfc);
        assert_eq!(hash_bits(0), 4, "hash bits are never 0");
        let mut bytes = [EMPTY; GROUP];
        bytes[1] = want | EXPIRE_BIT;
        bytes[3] = want | TAGGED_BIT | EXPIRE_BIT;
        bytes[4] = TOMBSTONE;
        bytes[5] = hash_bits(1 << 26);
        bytes[15] = want;
        let g = Group::load(&bytes);
        assert_eq!(g.matching(want), 1 << 1 | 1 << 3 | 1 << 15);
        assert_eq!(g.equal(TOMBSTONE), 1 << 4);
        assert_eq!(g.equal(EMPTY).count_ones(), 11);
        assert!(bytes.iter().filter(|&&c| is_full(c)).count() == 4);
        assert!(!is_full(TOMBSTONE) && !is_full(EMPTY));
    }
}
