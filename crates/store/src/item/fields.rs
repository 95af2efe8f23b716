//! A record's fields read with its header decoded once: what a reader of every field (the
//! snapshot's and the replication stream's record encoding) takes instead of the accessors,
//! each of which decodes the variable-length header again.

use super::{
    Item, ItemPtr, Kind, BITS_HASH, BITS_OUT_OF_LINE, BITS_PORTABLE, KIND_MASK, TAG_BYTES,
};

/// Every field of one record, borrowed from it for as long as its shard lock is held.
pub struct Fields<'a> {
    pub kind: Kind,
    pub key: &'a [u8],
    /// The value in portable form: a string's or hash's bytes, a portable copy's bytes after its
    /// kind byte. None for a collection held out of line (`Item::portable_value` encodes it).
    pub value: Option<&'a [u8]>,
    /// Absolute deadline in Unix milliseconds, if any.
    pub expire_at: Option<u64>,
    pub flags: u32,
    /// 0 for a record without CAS, as `Item::cas`.
    pub cas: u64,
    /// The tags as the record lays them out: a count byte, then 12 bytes each (type:u32
    /// value:i64, little-endian); empty when the record has none.
    pub tags_raw: &'a [u8],
}

impl<'a> Item<'a> {
    /// All the record's fields, its header decoded once.
    #[inline]
    pub fn fields(&self) -> Fields<'a> {
        fields(self.ptr)
    }
}

#[inline]
fn fields<'a>(ptr: ItemPtr) -> Fields<'a> {
    let o = ptr.offsets();
    let p = ptr.0.as_ptr();
    // SAFETY: every region comes from `offsets` and lies inside the live record, which the
    // caller's shard lock keeps alive for 'a.
    unsafe {
        let key = std::slice::from_raw_parts(p.add(o.key), o.key_len);
        let value = std::slice::from_raw_parts(p.add(o.key + o.key_len), o.value_len);
        let (kind, value) = match o.meta & KIND_MASK {
            BITS_HASH => (Kind::Hash, Some(value)),
            BITS_OUT_OF_LINE => (ptr.kind(), None),
            BITS_PORTABLE => (
                Kind::from_code(value.first().copied().unwrap_or(0)),
                value.get(1..),
            ),
            _ => (Kind::String, Some(value)),
        };
        let tags_raw = match o.tags {
            Some(at) => std::slice::from_raw_parts(p.add(at), 1 + TAG_BYTES * *p.add(at) as usize),
            None => &[],
        };
        Fields {
            kind,
            key,
            value,
            expire_at: o
                .expire
                .map(|at| u64::from_le(ptr.read_u64(at)))
                .filter(|&d| d != 0),
            flags: o.flags.map_or(0, |at| {
                u32::from_le(std::ptr::read_unaligned(p.add(at) as *const u32))
            }),
            cas: ptr.read_cas(&o).unwrap_or(0),
            tags_raw,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::Header;
    use super::*;
    use crate::tags::Tag;

    #[test]
    fn fields_match_the_accessors() {
        let tags = [
            Tag { ty: 3, value: -9 },
            Tag {
                ty: 8,
                value: 1 << 40,
            },
        ];
        for (expire, flags, cas, version, tags) in [
            (None, 0, None, None, &tags[..0]),
            (Some(12), 7, Some(99), None, &tags[..]),
            (Some(5), 0, Some(1u64 << 40), Some(3), &tags[..1]),
        ] {
            let h = Header {
                tags,
                kind: Kind::Hash,
                key_len: 3,
                value_len: 2,
                expire_at: expire,
                flags,
                cas,
                version,
            };
            let p = ItemPtr::new(&h, b"key");
            unsafe { p.value_mut().copy_from_slice(b"vv") };
            let item = Item::new(p);
            let f = item.fields();
            assert_eq!(
                (f.kind, f.key, f.value, f.expire_at, f.flags, f.cas),
                (
                    item.kind(),
                    item.key(),
                    Some(item.value()),
                    item.expire_at(),
                    item.flags(),
                    item.cas()
                )
            );
            let mut raw = Vec::new();
            if !tags.is_empty() {
                raw.push(tags.len() as u8);
                for t in tags {
                    raw.extend_from_slice(&t.ty.to_le_bytes());
                    raw.extend_from_slice(&t.value.to_le_bytes());
                }
            }
            assert_eq!(f.tags_raw, &raw[..]);
            // A deadline field holding 0 (after PERSIST) reads as none.
            if expire.is_some() {
                assert!(p.set_expire_in_place(None));
                assert_eq!(item.fields().expire_at, None);
            }
            unsafe { p.free() };
        }
    }
}
