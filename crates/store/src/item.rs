//! One cached record in a single block (of `slab`'s pages, or of the allocator when large): a
//! small header, the key and the value.
//!
//! A record is referenced by a thin pointer; a table slot names it by a 32-bit reference
//! (`pages`), which the table resolves to this pointer. The header
//! is variable length so that a 16-byte key with a 32-byte value takes 56 bytes:
//!
//! ```text
//! meta:u8 visited:u8 klen*2+no_cas:varint vlen:varint [expire_ms:u64] [flags:u32]
//! [ntags:u8 (type:u32 value:i64)*] [version:u64] [cas:u32, or u64 after a version] key value
//! ```
//! The key length's low bit says the record has no `cas` (a store run with `--cas no`, as
//! memcached's `-C`: 4 bytes less, which the slab's classes, 4 bytes apart up to 1 KiB, keep);
//! it then has no `version` either, and WATCH compares the shard's change number instead (`Store::watch_version`).
//! The CAS the store gives is a shard's write counter interleaved with the other shards', cut
//! to 32 bits (see `Entry::next_cas`), so it takes
//! 4 bytes; a record with a `version` field holds an 8-byte CAS, since a client may choose any
//! 64-bit CAS (memcached `E`), and a CAS above 32 bits (a snapshot's) brings a `version` with it.
//! `expire_ms` is present only when the record was written with a deadline (0 then means "none"
//! after a PERSIST, so a deadline can be changed in place); `flags` (memcached's client flags)
//! only when non-zero. `cas` is the version clients see (memcached CAS); every write gives it a
//! fresh store-unique value. `version` is present only when a client chose the CAS (memcached
//! `E`) or a change kept it (memcached `touch`): it then holds the fresh value that WATCH
//! compares, so that WATCH sees every change whatever CAS the client asked for. `visited` is the eviction policy's reference byte (see `evict`): readers set it with a
//! relaxed atomic store under the shard's shared lock, which is why it has a byte of its own.

use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU8, Ordering};

use crate::collection::{self, Collection};
use crate::tags::Tag;
use crate::varint;

mod fields;
pub use fields::Fields;

/// What a record holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    String,
    Hash,
    Set,
    ZSet,
    List,
}

/// The meta byte's two kind bits: a string, a packed hash, a collection held out of line (the
/// value is a pointer to a boxed `Collection`, owned by the record), or a collection's portable
/// bytes (a copy in the change backlog: the value is the kind's byte, then `collection::encode`).
const KIND_MASK: u8 = 0b11;
const BITS_STRING: u8 = 0;
const BITS_HASH: u8 = 1;
const BITS_OUT_OF_LINE: u8 = 2;
const BITS_PORTABLE: u8 = 3;

impl Kind {
    fn bits(self) -> u8 {
        match self {
            Kind::String => BITS_STRING,
            Kind::Hash => BITS_HASH,
            Kind::Set | Kind::ZSet | Kind::List => BITS_OUT_OF_LINE,
        }
    }

    /// The byte a portable copy's value starts with.
    pub(crate) fn code(self) -> u8 {
        match self {
            Kind::String => 0,
            Kind::Hash => 1,
            Kind::Set => 2,
            Kind::ZSet => 3,
            Kind::List => 4,
        }
    }

    fn from_code(code: u8) -> Kind {
        match code {
            0 => Kind::String,
            1 => Kind::Hash,
            2 => Kind::Set,
            3 => Kind::ZSet,
            _ => Kind::List,
        }
    }

    /// Whether records of this kind are collections (sets, sorted sets, lists).
    pub fn is_collection(self) -> bool {
        matches!(self, Kind::Set | Kind::ZSet | Kind::List)
    }
}

/// Bytes of an out-of-line record's value: the collection's address.
pub(crate) const POINTER_LEN: usize = std::mem::size_of::<usize>();
const HAS_EXPIRE: u8 = 0b100;
const HAS_FLAGS: u8 = 0b1000;
/// memcached meta protocol: the record was invalidated (`md ... I`) and is served as stale.
pub(crate) const STALE: u8 = 0b1_0000;
/// memcached meta protocol: a client was already told it won the right to recache.
pub(crate) const WIN_SENT: u8 = 0b10_0000;
const HAS_TAGS: u8 = 0b100_0000;
const HAS_VERSION: u8 = 0b1000_0000;
const TAG_BYTES: usize = 12;

/// Owning thin pointer to a record's allocation. Freed by `ItemPtr::free`, never implicitly:
/// the table owns its records and decides when (and on which thread) they are freed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct ItemPtr(NonNull<u8>);

// SAFETY: the allocation is plain bytes; ownership is managed by the table under shard locks.
unsafe impl Send for ItemPtr {}

/// Everything needed to lay a new record out.
pub(crate) struct Header<'t> {
    pub tags: &'t [Tag],
    pub kind: Kind,
    pub key_len: usize,
    pub value_len: usize,
    pub expire_at: Option<u64>,
    pub flags: u32,
    /// None: the record carries no CAS (`--cas no`).
    pub cas: Option<u64>,
    /// The write's own version when `cas` was chosen by the client (see the module notes).
    pub version: Option<u64>,
}

fn varint_len(v: usize) -> usize {
    varint::len(v as u64)
}

fn put_varint(buf: &mut [u8], v: usize) -> usize {
    varint::put(buf, v as u64)
}

/// SAFETY: `p` points at a varint written by `put_varint` inside a live record.
unsafe fn get_varint(p: *const u8) -> (usize, usize) {
    let mut v = 0usize;
    let mut shift = 0;
    let mut i = 0;
    loop {
        let b = *p.add(i);
        v |= ((b & 0x7f) as usize) << shift;
        i += 1;
        if b < 0x80 {
            return (v, i);
        }
        shift += 7;
    }
}

/// The key length field: the length and, in its low bit, whether the record has no CAS.
fn key_field(key_len: usize, has_cas: bool) -> usize {
    (key_len << 1) | usize::from(!has_cas)
}

impl Header<'_> {
    fn header_len(&self) -> usize {
        2 + varint_len(key_field(self.key_len, self.cas.is_some()))
            + varint_len(self.value_len)
            + if self.expire_at.is_some() { 8 } else { 0 }
            + if self.flags != 0 { 4 } else { 0 }
            + if self.tags.is_empty() {
                0
            } else {
                1 + TAG_BYTES * self.tags.len()
            }
            + if self.version_field().is_some() { 8 } else { 0 }
            + self.cas_len()
    }

    /// The `version` field to write: the one asked for, or, for a CAS too wide for the short
    /// field, the CAS itself (WATCH then compares it, as it would the CAS).
    fn version_field(&self) -> Option<u64> {
        self.version
            .or(self.cas.filter(|&c| c > u64::from(u32::MAX)))
    }

    /// Bytes of the `cas` field: 4, or 8 in a record with a `version` field.
    fn cas_len(&self) -> usize {
        match (self.cas, self.version_field()) {
            (None, _) => 0,
            (Some(_), None) => 4,
            (Some(_), Some(_)) => 8,
        }
    }

    /// Bytes the allocation for this record takes.
    pub fn alloc_size(&self) -> usize {
        self.header_len() + self.key_len + self.value_len
    }
}

/// Decoded positions inside a record.
struct Offsets {
    meta: u8,
    key_len: usize,
    value_len: usize,
    expire: Option<usize>,
    flags: Option<usize>,
    tags: Option<usize>,
    version: Option<usize>,
    cas: Option<usize>,
    /// Whether the `cas` field is 8 bytes (the record has a `version` field) rather than 4.
    cas_wide: bool,
    key: usize,
}

impl ItemPtr {
    /// Allocates a record with `key` and an uninitialised value region of `header.value_len`
    /// bytes, which the caller fills through `value_mut` before publishing it.
    pub fn new(header: &Header, key: &[u8]) -> ItemPtr {
        debug_assert_eq!(key.len(), header.key_len);
        let size = header.alloc_size();
        let ptr = crate::slab::allocate(size);
        let raw = ptr.as_ptr();
        // SAFETY: we write only inside the `size` bytes just allocated.
        unsafe {
            let buf = std::slice::from_raw_parts_mut(raw, size);
            let mut meta = header.kind.bits();
            if header.expire_at.is_some() {
                meta |= HAS_EXPIRE;
            }
            if header.flags != 0 {
                meta |= HAS_FLAGS;
            }
            if !header.tags.is_empty() {
                meta |= HAS_TAGS;
            }
            let version = header.version_field();
            if version.is_some() {
                meta |= HAS_VERSION;
            }
            buf[0] = meta;
            buf[1] = 0;
            let mut at = 2;
            at += put_varint(
                &mut buf[at..],
                key_field(header.key_len, header.cas.is_some()),
            );
            at += put_varint(&mut buf[at..], header.value_len);
            if let Some(deadline) = header.expire_at {
                buf[at..at + 8].copy_from_slice(&deadline.to_le_bytes());
                at += 8;
            }
            if header.flags != 0 {
                buf[at..at + 4].copy_from_slice(&header.flags.to_le_bytes());
                at += 4;
            }
            if !header.tags.is_empty() {
                buf[at] = u8::try_from(header.tags.len()).expect("at most 255 tags per record");
                at += 1;
                for tag in header.tags {
                    buf[at..at + 4].copy_from_slice(&tag.ty.to_le_bytes());
                    buf[at + 4..at + 12].copy_from_slice(&tag.value.to_le_bytes());
                    at += TAG_BYTES;
                }
            }
            if let Some(version) = version {
                buf[at..at + 8].copy_from_slice(&version.to_le_bytes());
                at += 8;
            }
            if let Some(cas) = header.cas {
                let n = header.cas_len();
                buf[at..at + n].copy_from_slice(&cas.to_le_bytes()[..n]);
                at += n;
            }
            buf[at..at + key.len()].copy_from_slice(key);
        }
        ItemPtr(ptr)
    }

    pub fn from_addr(addr: usize) -> ItemPtr {
        ItemPtr(NonNull::new(addr as *mut u8).expect("null record address"))
    }

    pub fn addr(self) -> usize {
        self.0.as_ptr() as usize
    }

    /// The record at a block `slab::block_at` resolved.
    #[inline]
    pub(crate) fn from_block(block: NonNull<u8>) -> ItemPtr {
        ItemPtr(block)
    }

    /// The record's block, as `slab::block_ref` takes it.
    pub(crate) fn block(self) -> NonNull<u8> {
        self.0
    }

    #[inline(always)]
    fn offsets(self) -> Offsets {
        let p = self.0.as_ptr();
        // SAFETY: the record is live (callers hold the shard lock) and its header well formed.
        unsafe {
            let meta = *p;
            let mut at = 2;
            let (key_field, n) = get_varint(p.add(at));
            let key_len = key_field >> 1;
            let has_cas = key_field & 1 == 0;
            at += n;
            let (value_len, n) = get_varint(p.add(at));
            at += n;
            let expire = if meta & HAS_EXPIRE != 0 {
                at += 8;
                Some(at - 8)
            } else {
                None
            };
            let flags = if meta & HAS_FLAGS != 0 {
                at += 4;
                Some(at - 4)
            } else {
                None
            };
            let tags = if meta & HAS_TAGS != 0 {
                let start = at;
                at += 1 + TAG_BYTES * *p.add(at) as usize;
                Some(start)
            } else {
                None
            };
            let version = if meta & HAS_VERSION != 0 {
                at += 8;
                Some(at - 8)
            } else {
                None
            };
            let cas_wide = version.is_some();
            Offsets {
                meta,
                key_len,
                value_len,
                expire,
                flags,
                tags,
                version,
                cas: has_cas.then_some(at),
                cas_wide,
                key: match (has_cas, cas_wide) {
                    (false, _) => at,
                    (true, false) => at + 4,
                    (true, true) => at + 8,
                },
            }
        }
    }

    fn read_u64(self, at: usize) -> u64 {
        // SAFETY: `at` comes from `offsets` and lies inside the record.
        unsafe { std::ptr::read_unaligned(self.0.as_ptr().add(at) as *const u64) }
    }

    fn write_u64(self, at: usize, v: u64) {
        // SAFETY: as `read_u64`; callers hold the shard's exclusive lock.
        unsafe { std::ptr::write_unaligned(self.0.as_ptr().add(at) as *mut u64, v.to_le()) }
    }

    /// The CAS field at `o.cas`, 4 or 8 bytes wide.
    fn read_cas(self, o: &Offsets) -> Option<u64> {
        let at = o.cas?;
        Some(if o.cas_wide {
            u64::from_le(self.read_u64(at))
        } else {
            // SAFETY: a short CAS field is 4 bytes inside the record.
            let v = unsafe { std::ptr::read_unaligned(self.0.as_ptr().add(at) as *const u32) };
            u64::from(u32::from_le(v))
        })
    }

    /// Writes `cas` into the CAS field; a short field keeps its low 32 bits (see `set_cas`).
    /// SAFETY contract as `write_u64`.
    fn write_cas(self, o: &Offsets, cas: u64) {
        let Some(at) = o.cas else { return };
        if o.cas_wide {
            self.write_u64(at, cas);
        } else {
            // SAFETY: as `write_u64`; the short field is 4 bytes inside the record.
            unsafe {
                std::ptr::write_unaligned(self.0.as_ptr().add(at) as *mut u32, (cas as u32).to_le())
            }
        }
    }

    pub fn key<'a>(self) -> &'a [u8] {
        let o = self.offsets();
        // SAFETY: the key region lies inside the record; the caller bounds the lifetime.
        unsafe { std::slice::from_raw_parts(self.0.as_ptr().add(o.key), o.key_len) }
    }

    pub fn value<'a>(self) -> &'a [u8] {
        let o = self.offsets();
        // SAFETY: as `key`.
        unsafe { std::slice::from_raw_parts(self.0.as_ptr().add(o.key + o.key_len), o.value_len) }
    }

    /// SAFETY: only while the record is not yet published, or under the exclusive lock.
    pub unsafe fn value_mut<'a>(self) -> &'a mut [u8] {
        let o = self.offsets();
        std::slice::from_raw_parts_mut(self.0.as_ptr().add(o.key + o.key_len), o.value_len)
    }

    fn kind_bits(self) -> u8 {
        // SAFETY: meta byte is the first byte of a live record.
        unsafe { *self.0.as_ptr() & KIND_MASK }
    }

    pub fn kind(self) -> Kind {
        match self.kind_bits() {
            BITS_STRING => Kind::String,
            BITS_HASH => Kind::Hash,
            BITS_OUT_OF_LINE => self.collection().expect("out-of-line record").kind(),
            _ => Kind::from_code(self.value().first().copied().unwrap_or(0)),
        }
    }

    /// The collection an out-of-line record owns.
    fn collection_addr(self) -> Option<*mut Collection> {
        if self.kind_bits() != BITS_OUT_OF_LINE {
            return None;
        }
        let addr = usize::from_le_bytes(self.value().try_into().expect("pointer value"));
        Some(addr as *mut Collection)
    }

    pub fn collection<'a>(self) -> Option<&'a Collection> {
        // SAFETY: the value of an out-of-line record is the address of its live box, which the
        // record owns; the caller holds the shard lock for 'a.
        self.collection_addr().map(|p| unsafe { &*p })
    }

    /// SAFETY: exclusive lock held, and no other reference to the collection alive.
    pub unsafe fn collection_mut<'a>(self) -> Option<&'a mut Collection> {
        self.collection_addr().map(|p| &mut *p)
    }

    /// Whether this record and `other` own the same collection (a rebuild moved it over).
    pub fn shares_collection(self, other: ItemPtr) -> bool {
        self.kind_bits() == BITS_OUT_OF_LINE
            && other.kind_bits() == BITS_OUT_OF_LINE
            && self.value() == other.value()
    }

    /// Forgets the collection (its new record owns it) so that freeing this one leaves it be.
    /// SAFETY: the record is unreachable and about to be freed.
    pub unsafe fn disown_collection(self) {
        *self.0.as_ptr() &= !KIND_MASK;
    }

    /// Bytes charged for the record: its allocation, and the collection it owns.
    pub fn charged(self) -> usize {
        crate::slab::held(self.alloc_size()) + self.collection().map_or(0, Collection::memory)
    }

    /// The record's value as portable bytes: a string's or hash's value as is, a collection
    /// through `collection::encode`.
    pub fn portable_value(self) -> std::borrow::Cow<'static, [u8]> {
        match self.kind_bits() {
            BITS_OUT_OF_LINE => {
                let mut out = Vec::new();
                collection::encode(self.collection().expect("out-of-line"), &mut out);
                out.into()
            }
            BITS_PORTABLE => self.value()[1..].to_vec().into(),
            _ => self.value().to_vec().into(),
        }
    }

    /// A byte copy of the whole record that stands on its own (the change backlog keeps it):
    /// an out-of-line record is copied with its collection's portable bytes as value.
    pub fn portable_bytes(self) -> Box<[u8]> {
        if self.kind_bits() != BITS_OUT_OF_LINE {
            return self.bytes().into();
        }
        let kind = self.kind();
        let encoded = self.portable_value();
        let tags: Vec<Tag> = self.tags().collect();
        let o = self.offsets();
        let header = Header {
            tags: &tags,
            kind: Kind::String,
            key_len: o.key_len,
            value_len: 1 + encoded.len(),
            expire_at: o.expire.map(|at| u64::from_le(self.read_u64(at))),
            flags: self.flags(),
            cas: self.read_cas(&o),
            version: o.version.map(|at| u64::from_le(self.read_u64(at))),
        };
        let copy = ItemPtr::new(&header, self.key());
        // SAFETY: the copy is ours alone; it is a plain record (no collection to free).
        unsafe {
            *copy.0.as_ptr() |= BITS_PORTABLE;
            let value = copy.value_mut();
            value[0] = kind.code();
            value[1..].copy_from_slice(&encoded);
            let bytes: Box<[u8]> = copy.bytes().into();
            *copy.0.as_ptr() &= !KIND_MASK;
            copy.free();
            bytes
        }
    }

    pub fn expire_at(self) -> Option<u64> {
        let o = self.offsets();
        o.expire
            .map(|at| u64::from_le(self.read_u64(at)))
            .filter(|&d| d != 0)
    }

    /// Whether a deadline can be stored without reallocating.
    pub fn has_expire_field(self) -> bool {
        self.offsets().meta & HAS_EXPIRE != 0
    }

    /// SAFETY contract as `write_u64`: exclusive lock held. Returns false if the record has no
    /// deadline field (the caller must rebuild it).
    pub fn set_expire_in_place(self, deadline: Option<u64>) -> bool {
        match self.offsets().expire {
            Some(at) => {
                self.write_u64(at, deadline.unwrap_or(0));
                true
            }
            None => deadline.is_none(),
        }
    }

    pub fn marks(self) -> u8 {
        // SAFETY: meta byte is the first byte of a live record.
        unsafe { *self.0.as_ptr() & (STALE | WIN_SENT) }
    }

    /// SAFETY contract as `write_u64`: exclusive lock held.
    pub fn set_marks(self, marks: u8) {
        // SAFETY: the meta byte is only written under the exclusive lock.
        unsafe {
            let p = self.0.as_ptr();
            *p = (*p & !(STALE | WIN_SENT)) | (marks & (STALE | WIN_SENT));
        }
    }

    pub fn flags(self) -> u32 {
        let o = self.offsets();
        o.flags.map_or(0, |at| {
            // SAFETY: flags field lies inside the record.
            let v = unsafe { std::ptr::read_unaligned(self.0.as_ptr().add(at) as *const u32) };
            u32::from_le(v)
        })
    }

    /// The CAS clients see; 0 for a record without one (as memcached `-C` shows).
    pub fn cas(self) -> u64 {
        self.read_cas(&self.offsets()).unwrap_or(0)
    }

    /// Whether the record carries a CAS (all do unless the store runs with `--cas no`).
    pub fn has_cas(self) -> bool {
        self.offsets().cas.is_some()
    }

    pub fn has_tags(self) -> bool {
        // SAFETY: meta byte is the first byte of a live record.
        unsafe { *self.0.as_ptr() & HAS_TAGS != 0 }
    }

    /// The record's tags, in the order they were written.
    pub fn tags<'a>(self) -> impl ExactSizeIterator<Item = Tag> + 'a {
        let (start, count) = match self.offsets().tags {
            // SAFETY: the count byte lies inside the record.
            Some(at) => (at + 1, unsafe { *self.0.as_ptr().add(at) } as usize),
            None => (0, 0),
        };
        let base = self.0.as_ptr() as usize;
        (0..count).map(move |i| {
            let p = (base + start + i * TAG_BYTES) as *const u8;
            // SAFETY: each tag's 12 bytes lie inside the record, which outlives the iterator
            // because callers hold the shard lock for 'a.
            unsafe {
                Tag {
                    ty: u32::from_le(std::ptr::read_unaligned(p as *const u32)),
                    value: i64::from_le(std::ptr::read_unaligned(p.add(4) as *const i64)),
                }
            }
        })
    }

    /// The version WATCH compares: the `version` field where there is one, else the CAS (0 for
    /// a record without CAS: `Store::watch_version` then uses the shard's change number).
    pub fn version(self) -> u64 {
        let o = self.offsets();
        match o.version {
            Some(at) => u64::from_le(self.read_u64(at)),
            None => self.read_cas(&o).unwrap_or(0),
        }
    }

    pub fn has_version_field(self) -> bool {
        self.offsets().version.is_some()
    }

    /// Gives the record a fresh version after an in-place change: both CAS and `version`.
    /// SAFETY contract as `write_u64`.
    pub fn set_fresh_cas(self, cas: u64) {
        let o = self.offsets();
        if let Some(at) = o.version {
            self.write_u64(at, cas);
        }
        debug_assert!(
            o.cas_wide || cas <= u64::from(u32::MAX),
            "fresh CAS fits 32 bits"
        );
        self.write_cas(&o, cas);
    }

    /// Sets the CAS clients see and nothing else (nothing for a record without CAS); a record
    /// without a `version` field keeps its low 32 bits (`cas_fits`). SAFETY contract as
    /// `write_u64`.
    pub fn set_cas(self, cas: u64) {
        self.write_cas(&self.offsets(), cas);
    }

    fn visited_bit(self) -> &'static AtomicU8 {
        // SAFETY: byte 1 of a live record is only ever accessed atomically.
        unsafe { AtomicU8::from_ptr(self.0.as_ptr().add(1)) }
    }

    /// Whether the record was read since the eviction hand last passed (see `evict`).
    pub fn visited(self) -> bool {
        crate::evict::was_read(self.visited_bit().load(Ordering::Relaxed))
    }

    /// The whole reference byte: the LRU policies' frequency and probation bit, or the LFU
    /// counter under an LFU policy.
    pub fn reference(self) -> u8 {
        self.visited_bit().load(Ordering::Relaxed)
    }

    pub fn set_reference(self, value: u8) {
        self.visited_bit().store(value, Ordering::Relaxed);
    }

    pub fn alloc_size(self) -> usize {
        let o = self.offsets();
        o.key + o.key_len + o.value_len
    }

    /// The whole allocation: header, key and value (a change record copies it as is). Callers
    /// hold the shard's exclusive lock, so no reader sets the reference bit meanwhile.
    pub fn bytes<'a>(self) -> &'a [u8] {
        // SAFETY: the allocation is `alloc_size` bytes long and live while the lock is held.
        unsafe { std::slice::from_raw_parts(self.0.as_ptr(), self.alloc_size()) }
    }

    /// Header of a copy of this record (tags excepted), for the caller to change.
    pub fn header(self) -> Header<'static> {
        let o = self.offsets();
        Header {
            tags: &[],
            kind: self.kind(),
            key_len: o.key_len,
            value_len: o.value_len,
            expire_at: self.expire_at(),
            flags: self.flags(),
            cas: self.has_cas().then(|| self.cas()),
            version: None,
        }
    }

    /// SAFETY: the record must be unreachable from any table and freed exactly once.
    pub unsafe fn free(self) {
        if let Some(collection) = self.collection_addr() {
            drop(Box::from_raw(collection));
        }
        crate::slab::release(self.0, self.alloc_size());
    }
}

/// A read-only view of a live record, valid while the shard lock that produced it is held.
#[derive(Clone, Copy)]
pub struct Item<'a> {
    ptr: ItemPtr,
    _lock: PhantomData<&'a ()>,
}

impl<'a> Item<'a> {
    pub(crate) fn new(ptr: ItemPtr) -> Item<'a> {
        Item {
            ptr,
            _lock: PhantomData,
        }
    }
    pub(crate) fn ptr(&self) -> ItemPtr {
        self.ptr
    }
    pub fn key(&self) -> &'a [u8] {
        self.ptr.key()
    }
    pub fn value(&self) -> &'a [u8] {
        self.ptr.value()
    }
    pub fn kind(&self) -> Kind {
        self.ptr.kind()
    }
    /// The set, sorted set or list the record holds (None for strings and hashes). (A
    /// collection record's `value` is its collection's address: copy `portable_value`.)
    pub fn collection(&self) -> Option<&'a Collection> {
        self.ptr.collection()
    }
    /// The value as portable bytes, whatever the kind (what `Entry::put_portable` reads).
    pub fn portable_value(&self) -> std::borrow::Cow<'static, [u8]> {
        self.ptr.portable_value()
    }
    /// Bytes the record is charged (its allocation and the collection it owns).
    pub fn memory(&self) -> usize {
        self.ptr.charged()
    }
    /// Absolute deadline in Unix milliseconds, if any.
    pub fn expire_at(&self) -> Option<u64> {
        self.ptr.expire_at()
    }
    /// memcached client flags.
    pub fn flags(&self) -> u32 {
        self.ptr.flags()
    }
    /// memcached meta protocol: whether the record was invalidated and is served stale.
    pub fn is_stale(&self) -> bool {
        self.ptr.marks() & STALE != 0
    }
    /// memcached meta protocol: whether a client already won the right to recache it.
    pub fn win_sent(&self) -> bool {
        self.ptr.marks() & WIN_SENT != 0
    }
    /// Whether the record was read since the eviction hand last passed (memcached `h`).
    pub fn was_hit(&self) -> bool {
        self.ptr.visited()
    }
    /// The record's tags.
    pub fn tags(&self) -> impl ExactSizeIterator<Item = Tag> + 'a {
        self.ptr.tags()
    }
    /// The record's CAS (memcached `gets`/`cas`): fresh on every write unless a client chose it
    /// (memcached `E`) or the change keeps it (memcached `touch`).
    /// The LFU counter (meaningful under an LFU policy: OBJECT FREQ).
    pub fn frequency(&self) -> u8 {
        self.ptr.reference()
    }

    /// Bytes the record is charged for (MEMORY USAGE): `memory` and its tag index entries.
    pub fn charged_size(&self) -> usize {
        self.memory() + crate::tags::ENTRY_COST * self.ptr.tags().len()
    }

    pub fn cas(&self) -> u64 {
        self.ptr.cas()
    }
    /// Whether the record carries a CAS (`--cas no` records do not: `cas` is then 0).
    pub fn has_cas(&self) -> bool {
        self.ptr.has_cas()
    }
    /// Store-unique version that changes on every write, whatever the CAS: what WATCH compares.
    pub fn version(&self) -> u64 {
        self.ptr.version()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn make(key: &[u8], value: &[u8], expire: Option<u64>, flags: u32) -> ItemPtr {
        let h = Header {
            tags: &[],
            kind: Kind::String,
            key_len: key.len(),
            value_len: value.len(),
            expire_at: expire,
            flags,
            cas: Some(77),
            version: None,
        };
        let p = ItemPtr::new(&h, key);
        unsafe { p.value_mut().copy_from_slice(value) };
        p
    }

    #[test]
    fn small_record_takes_fifty_six_bytes() {
        let p = make(&[b'k'; 16], &[b'v'; 32], None, 0);
        assert_eq!(p.alloc_size(), 4 + 4 + 16 + 32);
        unsafe { p.free() };
    }

    #[test]
    fn a_cas_wider_than_32_bits_brings_a_version_field_and_reads_back_whole() {
        let wide = (1u64 << 40) + 3;
        let h = Header {
            cas: Some(wide),
            ..make(b"k", b"v", None, 0).header()
        };
        let p = ItemPtr::new(&h, b"k");
        unsafe { p.value_mut().copy_from_slice(b"v") };
        // 4 header bytes, version 8, cas 8, key, value.
        assert_eq!(p.alloc_size(), 4 + 8 + 8 + 2);
        assert_eq!(
            (p.cas(), p.version(), p.key(), p.value()),
            (wide, wide, &b"k"[..], &b"v"[..])
        );
        p.set_cas(u64::MAX);
        assert_eq!((p.cas(), p.version()), (u64::MAX, wide));
        // A short field keeps the low 32 bits of what it is given.
        let short = make(b"k", b"v", None, 0);
        short.set_cas(wide);
        assert_eq!((short.cas(), short.value()), (3, &b"v"[..]));
        short.set_fresh_cas(u64::from(u32::MAX));
        assert_eq!(
            (short.cas(), short.version()),
            (u64::from(u32::MAX), u64::from(u32::MAX))
        );
        unsafe {
            p.free();
            short.free();
        }
    }

    #[test]
    fn fields_round_trip() {
        let key = vec![7u8; 300];
        let value = vec![1u8; 70_000];
        let p = make(&key, &value, Some(123_456), 0xdead_beef);
        assert_eq!(p.key(), &key[..]);
        assert_eq!(p.value(), &value[..]);
        assert_eq!(p.expire_at(), Some(123_456));
        assert_eq!(p.flags(), 0xdead_beef);
        assert_eq!(p.cas(), 77);
        assert!(p.set_expire_in_place(None));
        assert_eq!(p.expire_at(), None);
        assert!(!p.visited());
        p.set_reference(0x80);
        assert!(!p.visited(), "the probation bit is not a read");
        p.set_reference(0x81);
        assert!(p.visited());
        p.set_cas(9);
        assert_eq!(p.cas(), 9);
        assert_eq!(p.value(), &value[..]);
        unsafe { p.free() };
    }

    #[test]
    fn tags_round_trip_beside_other_fields() {
        let tags = [
            Tag { ty: 1, value: -5 },
            Tag {
                ty: 7,
                value: i64::MAX,
            },
        ];
        let h = Header {
            tags: &tags,
            kind: Kind::String,
            key_len: 3,
            value_len: 2,
            expire_at: Some(9),
            flags: 4,
            cas: Some(11),
            version: Some(12),
        };
        let p = ItemPtr::new(&h, b"key");
        unsafe { p.value_mut().copy_from_slice(b"vv") };
        assert!(p.has_tags());
        assert_eq!(p.tags().collect::<Vec<_>>(), tags);
        assert_eq!(
            (p.key(), p.value(), p.expire_at(), p.flags(), p.cas()),
            (&b"key"[..], &b"vv"[..], Some(9), 4, 11)
        );
        assert_eq!(p.version(), 12);
        p.set_cas(5);
        assert_eq!((p.cas(), p.version()), (5, 12));
        p.set_fresh_cas(13);
        assert_eq!((p.cas(), p.version()), (13, 13));
        assert_eq!(p.tags().collect::<Vec<_>>(), tags);
        unsafe { p.free() };
    }

    #[test]
    fn a_record_without_cas_is_four_bytes_smaller_and_reads_back() {
        let with = make(&[b'k'; 16], &[b'v'; 32], None, 0);
        let h = Header {
            cas: None,
            ..with.header()
        };
        let without = ItemPtr::new(&h, with.key());
        unsafe { without.value_mut().copy_from_slice(with.value()) };
        assert_eq!(without.alloc_size() + 4, with.alloc_size());
        assert_eq!(without.alloc_size(), 52);
        assert_eq!((without.key(), without.value()), (with.key(), with.value()));
        assert_eq!(
            (without.cas(), without.version(), without.has_cas()),
            (0, 0, false)
        );
        without.set_cas(9);
        without.set_fresh_cas(10);
        assert_eq!(without.cas(), 0);
        assert_eq!(without.value(), with.value());
        assert!(with.has_cas());
        for key_len in [63, 64, 200, 70_000] {
            let key = vec![3u8; key_len];
            let h = Header {
                cas: None,
                key_len,
                ..without.header()
            };
            let p = ItemPtr::new(&h, &key);
            assert_eq!((p.key(), p.has_cas()), (&key[..], false));
            unsafe { p.free() };
        }
        unsafe {
            with.free();
            without.free();
        }
    }

    #[test]
    fn record_without_deadline_field_cannot_gain_one_in_place() {
        let p = make(b"k", b"v", None, 0);
        assert!(!p.set_expire_in_place(Some(5)));
        assert!(p.set_expire_in_place(None));
        unsafe { p.free() };
    }
}
