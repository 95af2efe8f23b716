//! One shard of the keyspace: its table, its memory and the write-side `Entry` API.
//!
//! Invariants (see docs/architecture.md):
//! - a record is reachable from exactly one slot of exactly one shard's table;
//! - records are freed only by the holder of the shard's exclusive lock, or by the reaper after
//!   they became unreachable;
//! - `Shard::used` is the sum of the charged size of the shard's records and its slot array,
//!   and the store-wide counter is the sum of all shards' `used`.

use std::borrow::Cow;
use std::sync::atomic::Ordering;

use indexmap::IndexSet;

use crate::changes::{ChangeKind, Log};
use crate::collection::{self, Collection};
use crate::item::{Header, Item, ItemPtr, Kind};
use crate::probation::Probation;
use crate::table::{KeyHash, Probe, Table};
use crate::tags::{reference, Tag, ENTRY_COST};
use crate::{now_ms, Author, EvictionPolicy, Garbage, Store};

/// What `Entry::put_inner` is doing.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Put {
    /// A write: a fresh CAS, a `Set` change, counted in `stored`.
    Write,
    /// The same record rebuilt with a new layout (a deadline or version field): `client_cas`
    /// is the CAS clients keep seeing while the fresh one becomes the WATCH version; `change`
    /// says what clients can see of it (the rebuild itself is invisible).
    Rebuild {
        client_cas: Option<u64>,
        change: Rebuilt,
    },
    /// A record loaded from a snapshot: it keeps the CAS it was saved with (the store's CAS
    /// counter is raised above every loaded one afterwards, `Store::raise_cas_above`).
    Load { cas: u64 },
}

/// What a rebuild changes that clients see: the change it is recorded as.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Rebuilt {
    /// A new deadline (EXPIRE, TOUCH on a record without the field): a `Ttl` change.
    Ttl,
    /// Only the CAS clients see, chosen right after a write (memcached `E`): a `Cas` change.
    Cas,
}

/// What a write does to the record's tags.
#[derive(Clone, Copy, Debug)]
pub enum TagWrite<'t> {
    /// Carry the replaced record's tags over (INCR, APPEND, EXPIRE, hash updates...).
    Keep,
    /// Replace them (an empty slice drops them, as a plain SET does).
    Set(&'t [Tag]),
}

/// Records at least this large are freed by the reaper thread, off the request path.
pub(crate) const LARGE_RECORD: usize = 64 * 1024;

pub(crate) struct Shard {
    pub index: usize,
    pub table: Table,
    pub used: usize,
    pub clock_hand: usize,
    /// `allkeys-lru`'s probationary FIFO and ghost set (see `probation`).
    pub probation: Probation,
    pub expire_cursor: usize,
    pub next_cas: u64,
    /// This shard's change numbering and backlog (see `changes`).
    pub log: Log,
    /// Keys of hashes that had a field deadline when written (HEXPIRE and family), which the
    /// expiry thread visits to remove expired fields; a key that no longer holds one is
    /// dropped when visited. Empty, and free, while no hash field has a deadline.
    pub hashes_with_deadlines: IndexSet<Box<[u8]>, ahash::RandomState>,
    /// Where the expiry thread goes on in `hashes_with_deadlines`.
    pub field_cursor: usize,
}

/// Memory charged for a byte copy held in an allocator block (the change backlog): its size
/// rounded to the allocator's 8-byte step. Records are charged their slab class (`slab::held`).
pub(crate) fn charge(size: usize) -> usize {
    (size + 7) & !7
}

/// A write would exceed `--maxmemory` and eviction is off or could not free enough.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutOfMemory;

/// The CAS shard `index` of `shards` gives for its write number `n`: `n × shards + index`, cut
/// to 32 bits. The shard count is a power of two, so the cut keeps each shard's values apart
/// from the others' (they differ in the low bits), and a value repeats only when its shard's
/// counter wraps.
pub(crate) fn cas_of(n: u64, index: usize, shards: usize) -> u32 {
    n.wrapping_mul(shards as u64).wrapping_add(index as u64) as u32
}

impl Shard {
    pub fn new(index: usize) -> Shard {
        let table = Table::new();
        Shard {
            index,
            used: table.bytes(),
            table,
            clock_hand: 0,
            probation: Probation::default(),
            expire_cursor: 0,
            next_cas: 1,
            log: Log::default(),
            hashes_with_deadlines: IndexSet::default(),
            field_cursor: 0,
        }
    }

    /// Makes the CAS this shard (`index` of `shards`) gives next (until its 32-bit value
    /// wraps) larger than `cas`, a CAS a record is loaded with: a key's CAS stays unique across
    /// a restart or a full sync. A CAS above 32 bits is never given, so it needs nothing.
    pub fn raise_cas_above(&mut self, cas: u64, index: usize, shards: usize) {
        if cas >= u64::from(u32::MAX) {
            return;
        }
        let next = u64::from(cas_of(self.next_cas, index, shards));
        if next <= cas {
            self.next_cas += (cas - next) / shards as u64 + 1;
        }
    }

    /// Removes the record in `slot` and frees it (on the reaper when large), recording the
    /// removal as `why` (Delete, Expire or Evict). Returns bytes freed.
    pub fn remove_slot(
        &mut self,
        store: &Store,
        slot: usize,
        author: Author,
        why: ChangeKind<'_>,
    ) -> usize {
        let (item, freed) = self.unlink_slot(store, slot);
        self.record(store, author, item.key(), why);
        store.release(item, freed);
        freed
    }

    /// Numbers a change made to this shard and reports it (see `changes`).
    #[inline]
    pub fn record(&mut self, store: &Store, author: Author, key: &[u8], kind: ChangeKind<'_>) {
        store.record(&mut self.log, self.index, author, key, kind);
    }

    /// Takes the record in `slot` out of the table and the tag index, leaving the freeing to
    /// the caller. Returns it with the bytes it was charged.
    pub fn unlink_slot(&mut self, store: &Store, slot: usize) -> (ItemPtr, usize) {
        let r = self.table.ref_at(slot);
        let item = self.table.remove_at(slot);
        let mut freed = item.charged();
        if item.has_tags() {
            freed += ENTRY_COST * store.tags.remove(item.tags(), reference(self.index, r));
        }
        self.used -= freed;
        (item, freed)
    }

    /// Removes expired records among up to `budget` slots from the expiry cursor, recording
    /// each removal and uncounting its memory, but leaving the records themselves in `dead` for
    /// the caller to free once it has released the lock (`Store::free_dead`).
    /// Returns (slots scanned, records removed).
    pub fn expire_some(
        &mut self,
        store: &Store,
        budget: usize,
        now: u64,
        dead: &mut Vec<ItemPtr>,
    ) -> (usize, usize) {
        let cap = self.table.capacity();
        let mut removed = 0;
        let scanned = budget.min(cap);
        for _ in 0..scanned {
            let i = self.expire_cursor % cap;
            self.expire_cursor = i + 1;
            if self.table.has_expire(i) {
                let item = self.table.item_at(i).expect("occupied slot");
                if item.expire_at().is_some_and(|d| d <= now) {
                    let (item, freed) = self.unlink_slot(store, i);
                    self.record(store, Author::SERVER, item.key(), ChangeKind::Expire);
                    store.account(-(freed as isize));
                    dead.push(item);
                    removed += 1;
                }
            }
        }
        (scanned, removed)
    }

    /// Removes the expired fields of up to `budget` hashes with field deadlines, from the
    /// field cursor on (a hash whose last field expired goes as a whole). Returns (hashes
    /// visited, fields removed).
    pub fn expire_fields_some(&mut self, store: &Store, budget: usize, now: u64) -> (usize, usize) {
        let budget = budget.min(self.hashes_with_deadlines.len());
        let mut visited = 0;
        let mut removed = 0;
        while visited < budget && !self.hashes_with_deadlines.is_empty() {
            let at = self.field_cursor % self.hashes_with_deadlines.len();
            let key = self.hashes_with_deadlines[at].clone();
            visited += 1;
            let index = self.index;
            let (fields, still) =
                Entry::new(store, index, self, &key, Author::SERVER).purge_expired_fields(now);
            removed += fields;
            if still {
                self.field_cursor = at + 1;
            } else {
                self.hashes_with_deadlines.swap_remove_index(at);
                self.field_cursor = at;
            }
        }
        (visited, removed)
    }
}

/// Exclusive access to one key's place in a shard, for the duration of one write.
pub struct Entry<'a> {
    store: &'a Store,
    shard_index: usize,
    shard: &'a mut Shard,
    key: &'a [u8],
    hash: KeyHash,
    probe: Probe,
    /// Whose write this is (told to the change listener).
    author: Author,
}

impl<'a> Entry<'a> {
    pub(crate) fn new(
        store: &'a Store,
        shard_index: usize,
        shard: &'a mut Shard,
        key: &'a [u8],
        author: Author,
    ) -> Entry<'a> {
        let hash = store.hash(key);
        let mut probe = shard.table.find(hash, key);
        if let Probe::Found(i) = probe {
            let item = shard.table.item_at(i).expect("found slot is occupied");
            if shard.table.has_expire(i)
                && item.expire_at().is_some_and(|d| d <= now_ms())
                && !store.replica_mode()
            {
                // Lazily expired on this client's access: attributed to it, as Redis's
                // `current_client` is when a lookup deletes an expired key.
                shard.remove_slot(store, i, author, ChangeKind::Expire);
                store
                    .cell(shard_index)
                    .expired
                    .fetch_add(1, Ordering::Relaxed);
                probe = Probe::Vacant(i);
            }
        }
        let mut entry = Entry {
            store,
            shard_index,
            shard,
            key,
            hash,
            probe,
            author,
        };
        // A write sees a hash without its expired fields (removed here, as a lookup in Redis
        // deletes them); readers only filter them (`hash::live`). A replica leaves them to
        // its primary, whose purge arrives as the hash's new value.
        if !store.replica_mode() && entry.item().is_some_and(|i| i.kind() == Kind::Hash) {
            entry.purge_expired_fields(now_ms());
        }
        entry
    }

    /// Removes the hash's fields whose deadline is at or before `now`, recorded as the
    /// write of the rest (or as the key's expiry when none is left). Returns (fields removed,
    /// whether the hash still has field deadlines).
    pub(crate) fn purge_expired_fields(&mut self, now: u64) -> (usize, bool) {
        let Some(item) = self.item().filter(|i| i.kind() == Kind::Hash) else {
            return (0, false);
        };
        let value = item.value();
        let Cow::Owned(rest) = crate::hash::live(value, now) else {
            return (0, crate::hash::has_deadlines(value));
        };
        let removed = crate::hash::len(value) - crate::hash::len(&rest);
        self.store
            .cell(self.shard_index)
            .expired_fields
            .fetch_add(removed as u64, Ordering::Relaxed);
        if rest.is_empty() {
            if let Probe::Found(i) = self.probe {
                self.shard
                    .remove_slot(self.store, i, self.author, ChangeKind::Expire);
                self.probe = Probe::Vacant(i);
            }
            return (removed, false);
        }
        let (expire_at, flags) = (item.expire_at(), item.flags());
        // Shrinking needs no room, so this cannot fail for memory.
        let _ = self.put(Kind::Hash, &rest, expire_at, flags);
        (removed, crate::hash::has_deadlines(&rest))
    }

    pub fn key(&self) -> &[u8] {
        self.key
    }

    /// The live record under this key, if any (an expired one was removed on entry).
    pub fn item(&self) -> Option<Item<'_>> {
        match self.probe {
            Probe::Found(i) => self.shard.table.item_at(i).map(Item::new),
            Probe::Vacant(_) => None,
        }
    }

    pub fn exists(&self) -> bool {
        matches!(self.probe, Probe::Found(_))
    }

    /// Deletes the record; returns whether there was one.
    pub fn remove(&mut self) -> bool {
        match self.probe {
            Probe::Found(i) => {
                self.shard
                    .remove_slot(self.store, i, self.author, ChangeKind::Delete);
                self.probe = Probe::Vacant(i);
                true
            }
            Probe::Vacant(_) => false,
        }
    }

    /// A fresh CAS: the shard's write counter, interleaved with the other shards' and cut to
    /// the 32 bits a record holds (`cas_of`; 0, which memcached clients read as "no CAS", is
    /// skipped). Two keys never show the same CAS, as in memcached, until a shard's values
    /// wrap: after 2^32 / shards of its writes (see docs/memory.md).
    fn next_cas(&mut self) -> u64 {
        let shards = self.store.shard_count();
        let mut n = self.shard.next_cas;
        if cas_of(n, self.shard_index, shards) == 0 {
            n += 1;
        }
        self.shard.next_cas = n + 1;
        u64::from(cas_of(n, self.shard_index, shards))
    }

    /// Writes a record with `value`, replacing any existing one. Returns its CAS.
    pub fn put(
        &mut self,
        kind: Kind,
        value: &[u8],
        expire_at: Option<u64>,
        flags: u32,
    ) -> Result<u64, OutOfMemory> {
        self.put_with(kind, value.len(), expire_at, flags, |buf, _| {
            buf.copy_from_slice(value)
        })
    }

    /// Writes a record whose value of `value_len` bytes is produced by `fill`, which also sees
    /// the record being replaced (for APPEND, SETRANGE, hash updates). Tags are kept.
    /// Returns the new CAS.
    pub fn put_with(
        &mut self,
        kind: Kind,
        value_len: usize,
        expire_at: Option<u64>,
        flags: u32,
        fill: impl FnOnce(&mut [u8], Option<Item<'_>>),
    ) -> Result<u64, OutOfMemory> {
        self.put_record(kind, value_len, expire_at, flags, TagWrite::Keep, fill)
    }

    /// The general write: as `put_with`, with the record's tags chosen by `tags`.
    pub fn put_record(
        &mut self,
        kind: Kind,
        value_len: usize,
        expire_at: Option<u64>,
        flags: u32,
        tags: TagWrite<'_>,
        fill: impl FnOnce(&mut [u8], Option<Item<'_>>),
    ) -> Result<u64, OutOfMemory> {
        self.put_inner(kind, value_len, expire_at, flags, tags, Put::Write, fill)
    }

    /// As `put_record`, for a write or for a rebuild of the record in place of itself.
    #[allow(clippy::too_many_arguments)]
    fn put_inner(
        &mut self,
        kind: Kind,
        value_len: usize,
        expire_at: Option<u64>,
        flags: u32,
        tags: TagWrite<'_>,
        how: Put,
        fill: impl FnOnce(&mut [u8], Option<Item<'_>>),
    ) -> Result<u64, OutOfMemory> {
        let kept: Vec<Tag>;
        let tags: &[Tag] = match tags {
            TagWrite::Set(t) => t,
            TagWrite::Keep => {
                kept = self.item().map_or_else(Vec::new, |i| i.tags().collect());
                &kept
            }
        };
        let (cas, version) = match how {
            Put::Write => (self.next_cas(), None),
            Put::Rebuild { client_cas, .. } => {
                let fresh = self.next_cas();
                (client_cas.unwrap_or(fresh), client_cas.map(|_| fresh))
            }
            Put::Load { cas } => {
                // Per record, so that a snapshot's CAS above 32 bits (a client's choice) does
                // not hide the others from `Store::raise_cas_above`.
                let shards = self.store.shard_count();
                self.shard.raise_cas_above(cas, self.shard_index, shards);
                (cas, None)
            }
        };
        // `--cas no`: the record carries neither, clients see CAS 0 (the counter still moves:
        // it numbers the shard's writes).
        let keeps_cas = self.store.keeps_cas();
        let cas = if keeps_cas { cas } else { 0 };
        let header = Header {
            tags,
            kind,
            key_len: self.key.len(),
            value_len,
            expire_at,
            flags,
            cas: keeps_cas.then_some(cas),
            version: version.filter(|_| keeps_cas),
        };
        let new_charge = crate::slab::held(header.alloc_size()) + ENTRY_COST * tags.len();
        let old_charge = match self.probe {
            Probe::Found(i) => {
                let old = self.shard.table.item_at(i).expect("occupied");
                old.charged() + ENTRY_COST * old.tags().len()
            }
            Probe::Vacant(_) => 0,
        };
        // A new key may make the table grow: that counts against the limit too.
        let rebuild = matches!(self.probe, Probe::Vacant(_)) && self.shard.table.needs_rebuild();
        let growth = if rebuild {
            Table::bytes_for(self.shard.table.rebuild_capacity())
                .saturating_sub(self.shard.table.bytes())
        } else {
            0
        };
        if new_charge + growth > old_charge {
            self.make_room(new_charge + growth - old_charge)?;
        }
        if let Probe::Vacant(_) = self.probe {
            if rebuild && self.shard.table.needs_rebuild() {
                let before = self.shard.table.bytes();
                let store = self.store;
                self.shard.table.rebuild(|k| store.hash(k));
                let after = self.shard.table.bytes();
                self.shard.used = self.shard.used + after - before;
                store.account(after as isize - before as isize);
                self.probe = self.shard.table.find(self.hash, self.key);
            }
        }
        let item = ItemPtr::new(&header, self.key);
        let lfu = self.store.policy().is_lfu();
        if lfu {
            item.set_reference(crate::evict::LFU_INIT);
        }
        // SAFETY: the record is not yet published.
        fill(unsafe { item.value_mut() }, self.item());
        if let Probe::Found(i) = self.probe {
            let (old, freed) = self.shard.unlink_slot(self.store, i);
            // A rebuilt record keeps its reference bit (memcached `h`, and CLOCK's choice); under
            // LFU an overwritten one keeps its counter too, as in Redis. An overwritten record
            // stays in probation if it was (its hash is in the ring).
            if how != Put::Write || lfu {
                item.set_reference(old.reference());
            } else {
                item.set_reference(old.reference() & crate::evict::PROBATION);
            }
            // A rebuild (a new deadline, new tags) moves the collection over to the new record.
            if item.shares_collection(old) {
                // SAFETY: `old` was just unlinked and is freed right below.
                unsafe { old.disown_collection() };
            }
            self.store.release(old, freed);
        }
        let i = match self.probe {
            Probe::Found(i) | Probe::Vacant(i) => i,
        };
        let new_key = matches!(self.probe, Probe::Vacant(_));
        self.shard
            .table
            .insert_at(i, self.hash, item, expire_at.is_some());
        self.probe = Probe::Found(i);
        // Probation matters only once eviction can happen: without a limit it costs nothing.
        if new_key
            && self.store.policy() == EvictionPolicy::AllKeysLru
            && self.store.maxmemory.load(Ordering::Relaxed) != 0
        {
            self.shard.admit(self.store, i, self.hash);
        }
        if kind == Kind::Hash && crate::hash::has_deadlines(item.value()) {
            self.shard.hashes_with_deadlines.insert(self.key.into());
        }
        let mut charged = item.charged();
        if !tags.is_empty() {
            let added = self.store.tags.insert(
                tags.iter().copied(),
                reference(self.shard_index, self.shard.table.ref_at(i)),
            );
            charged += ENTRY_COST * added;
        }
        self.shard.used += charged;
        self.store.account(charged as isize);
        let change = match how {
            Put::Write | Put::Load { .. } => ChangeKind::Set(Item::new(item)),
            Put::Rebuild {
                change: Rebuilt::Ttl,
                ..
            } => ChangeKind::Ttl { expire_at, cas },
            Put::Rebuild {
                change: Rebuilt::Cas,
                ..
            } => ChangeKind::Cas(cas),
        };
        self.shard.record(self.store, self.author, self.key, change);
        if how == Put::Write {
            self.store
                .cell(self.shard_index)
                .stored
                .fetch_add(1, Ordering::Relaxed);
        }
        Ok(cas)
    }

    /// Writes a record loaded from a snapshot: its value, deadline, flags, tags and CAS as
    /// they were saved. Recorded as a `Set` by `author`.
    pub(crate) fn put_loaded(
        &mut self,
        kind: Kind,
        value: &[u8],
        expire_at: Option<u64>,
        flags: u32,
        cas: u64,
        tags: &[Tag],
    ) -> Result<u64, OutOfMemory> {
        self.put_inner(
            kind,
            value.len(),
            expire_at,
            flags,
            TagWrite::Set(tags),
            Put::Load { cas },
            |buf, _| buf.copy_from_slice(value),
        )
    }

    /// As `put_loaded`, for a collection (already decoded from its portable bytes).
    pub(crate) fn put_loaded_collection(
        &mut self,
        collection: Collection,
        expire_at: Option<u64>,
        flags: u32,
        cas: u64,
        tags: &[Tag],
    ) -> Result<u64, OutOfMemory> {
        let kind = collection.kind();
        self.make_room(collection.memory())?;
        let boxed = Box::new(collection);
        // The closure owns the box: a write that fails before filling drops it with it.
        self.put_inner(
            kind,
            crate::item::POINTER_LEN,
            expire_at,
            flags,
            TagWrite::Set(tags),
            Put::Load { cas },
            move |buf, _| {
                let addr = Box::into_raw(boxed) as usize;
                buf.copy_from_slice(&addr.to_le_bytes());
            },
        )
    }

    /// Sets or clears the deadline of the existing record, giving it a new CAS. Returns false
    /// when there is no record.
    pub fn set_expire(&mut self, expire_at: Option<u64>) -> bool {
        let Probe::Found(i) = self.probe else {
            return false;
        };
        let item = self.shard.table.item_at(i).expect("found slot is occupied");
        if item.set_expire_in_place(expire_at) {
            let cas = self.next_cas();
            item.set_fresh_cas(cas);
            self.deadline_set_in_place(i, expire_at, cas);
            return true;
        }
        // The record has no deadline field: rebuild it with one. Growth of 8 bytes is allowed
        // past the memory limit rather than failing an EXPIRE.
        let header = item.header();
        self.put_inner(
            header.kind,
            header.value_len,
            expire_at,
            header.flags,
            TagWrite::Keep,
            Put::Rebuild {
                client_cas: None,
                change: Rebuilt::Ttl,
            },
            |buf, old| buf.copy_from_slice(old.expect("record being rebuilt").value()),
        )
        .is_ok()
    }

    /// After the record in slot `i` took deadline `expire_at` in place: the slot's expiry bit
    /// follows it, and the change is recorded with `cas`, the CAS clients now see.
    fn deadline_set_in_place(&mut self, i: usize, expire_at: Option<u64>, cas: u64) {
        let item = self.shard.table.item_at(i).expect("found slot is occupied");
        self.shard
            .table
            .set_expire_bit(i, item.has_expire_field() && expire_at.is_some());
        let change = ChangeKind::Ttl { expire_at, cas };
        self.shard.record(self.store, self.author, self.key, change);
    }

    /// Changes the deadline as memcached's `touch` does: the CAS clients see stays, but the
    /// record gets a fresh WATCH version (a touch changes the TTL, which Redis's WATCH counts
    /// as a change). The meta marks stay too, and the touch counts as an access (memcached
    /// `h`). Returns false when there is no record.
    pub fn set_expire_keep_cas(&mut self, expire_at: Option<u64>) -> bool {
        let Probe::Found(i) = self.probe else {
            return false;
        };
        let item = self.shard.table.item_at(i).expect("found slot is occupied");
        crate::evict::access(item, self.store.policy().is_lfu());
        if !item.has_cas() {
            // No CAS to keep (`--cas no`): a plain deadline change, in place where it can be.
            return self.set_expire(expire_at);
        }
        let cas = item.cas();
        let in_place = item.has_version_field()
            && (expire_at.is_none() || item.has_expire_field())
            && item.set_expire_in_place(expire_at);
        if in_place {
            let version = self.next_cas();
            item.set_fresh_cas(version);
            item.set_cas(cas);
            self.deadline_set_in_place(i, expire_at, cas);
            return true;
        }
        // As `set_expire`: growth past the limit fails the rebuild, and then the plain path
        // (a fresh CAS) is better than no new deadline.
        self.rebuild_with_cas(i, expire_at, cas, Rebuilt::Ttl) || self.set_expire(expire_at)
    }

    /// Rebuilds the record in slot `i` with deadline `expire_at`, its value, flags, tags and
    /// meta marks unchanged, showing clients `cas` while WATCH sees a fresh version (the
    /// rebuilt record has the field for it). `change`: what it is recorded as.
    /// False when the rebuild does not fit under the memory limit.
    fn rebuild_with_cas(
        &mut self,
        i: usize,
        expire_at: Option<u64>,
        cas: u64,
        change: Rebuilt,
    ) -> bool {
        let item = self.shard.table.item_at(i).expect("found slot is occupied");
        let marks = item.marks();
        let header = item.header();
        let rebuilt = self.put_inner(
            header.kind,
            header.value_len,
            expire_at,
            header.flags,
            TagWrite::Keep,
            Put::Rebuild {
                client_cas: Some(cas),
                change,
            },
            |buf, old| buf.copy_from_slice(old.expect("record being rebuilt").value()),
        );
        if rebuilt.is_err() {
            return false;
        }
        self.set_marks(
            marks & crate::item::STALE != 0,
            marks & crate::item::WIN_SENT != 0,
        );
        true
    }

    /// Sets the memcached meta-protocol marks (stale, win sent) of the existing record in place.
    /// Returns false when there is no record.
    pub fn set_marks(&mut self, stale: bool, win_sent: bool) -> bool {
        let Probe::Found(i) = self.probe else {
            return false;
        };
        let item = self.shard.table.item_at(i).expect("found slot is occupied");
        let marks = if stale { crate::item::STALE } else { 0 }
            | if win_sent { crate::item::WIN_SENT } else { 0 };
        item.set_marks(marks);
        true
    }

    /// Replaces the CAS clients see with a caller-chosen one (memcached meta `E` flag, or the
    /// old CAS that memcached's `touch` keeps), right after a write gave the record a fresh
    /// one. WATCH keeps seeing that fresh version: it moves to the record's `version` field,
    /// which a record gains (one rebuild) the first time it needs it.
    pub fn set_cas(&mut self, cas: u64) -> bool {
        let Probe::Found(i) = self.probe else {
            return false;
        };
        let item = self.shard.table.item_at(i).expect("found slot is occupied");
        if item.cas() == cas || !item.has_cas() {
            return true;
        }
        // Without room for the 8 more bytes of a version field (and the wider CAS field), the
        // client's CAS still applies in place, at the cost of WATCH missing this change; and
        // only its low 32 bits when it is wider (what the record then holds is what is
        // recorded and what clients see).
        if !item.has_version_field()
            && self.rebuild_with_cas(i, item.header().expire_at, cas, Rebuilt::Cas)
        {
            return true;
        }
        let item = self.shard.table.item_at(i).expect("found slot is occupied");
        item.set_cas(cas);
        let change = ChangeKind::Cas(item.cas());
        self.shard.record(self.store, self.author, self.key, change);
        true
    }

    /// Writes `collection` (a set, sorted set or list) under the key, replacing any record; the
    /// record owns it and is charged for it. Tags are kept. Returns the new CAS.
    pub fn put_collection(
        &mut self,
        collection: Collection,
        expire_at: Option<u64>,
    ) -> Result<u64, OutOfMemory> {
        self.put_collection_tagged(collection, expire_at, TagWrite::Keep)
    }

    fn put_collection_tagged(
        &mut self,
        collection: Collection,
        expire_at: Option<u64>,
        tags: TagWrite<'_>,
    ) -> Result<u64, OutOfMemory> {
        let kind = collection.kind();
        // The record's own size is checked by the write; its collection's here.
        self.make_room(collection.memory())?;
        let boxed = Box::new(collection);
        // The closure owns the box: a write that fails before filling drops it with it.
        self.put_record(
            kind,
            crate::item::POINTER_LEN,
            expire_at,
            0,
            tags,
            move |buf, _| {
                let addr = Box::into_raw(boxed) as usize;
                buf.copy_from_slice(&addr.to_le_bytes());
            },
        )
    }

    /// Changes the collection under the key in place (O(the change), not O(the collection)):
    /// `f` returns its result and whether it changed anything. A change gives the record a
    /// fresh CAS and is recorded as a `Set`; a collection left empty is deleted, as Redis
    /// deletes empty keys. Fails before `f` runs when memory is over the limit and nothing can
    /// be evicted (Redis's `denyoom` commands). `None` when there is no collection under the key.
    pub fn update_collection<R>(
        &mut self,
        f: impl FnOnce(&mut Collection) -> (R, bool),
    ) -> Option<Result<R, OutOfMemory>> {
        self.change_collection(true, f)
    }

    /// As `update_collection` for a change that only takes away (pops, removals, trims): it
    /// runs over the memory limit too, as Redis runs LPOP or SREM when it refuses writes that
    /// add, so that a full store can still be drained.
    pub fn shrink_collection<R>(
        &mut self,
        f: impl FnOnce(&mut Collection) -> (R, bool),
    ) -> Option<R> {
        match self.change_collection(false, f)? {
            Ok(r) => Some(r),
            Err(OutOfMemory) => unreachable!("only a change that may grow is refused"),
        }
    }

    fn change_collection<R>(
        &mut self,
        may_grow: bool,
        f: impl FnOnce(&mut Collection) -> (R, bool),
    ) -> Option<Result<R, OutOfMemory>> {
        let Probe::Found(i) = self.probe else {
            return None;
        };
        let item = self.shard.table.item_at(i).expect("occupied");
        // SAFETY: the exclusive lock is held; the reference lives only during `f`.
        let collection = unsafe { item.collection_mut() }?;
        if may_grow {
            if let Err(oom) = self.make_room(0) {
                return Some(Err(oom));
            }
        }
        let before = collection.memory();
        let (result, changed) = f(collection);
        let after = collection.memory();
        self.shard.used = self.shard.used + after - before;
        self.store.account(after as isize - before as isize);
        if !changed {
            return Some(Ok(result));
        }
        if collection.is_empty() {
            self.remove();
            return Some(Ok(result));
        }
        let cas = self.next_cas();
        item.set_fresh_cas(cas);
        self.shard.record(
            self.store,
            self.author,
            self.key,
            ChangeKind::Set(Item::new(item)),
        );
        self.store
            .cell(self.shard_index)
            .stored
            .fetch_add(1, Ordering::Relaxed);
        if after > before {
            // Grown past the limit: make room elsewhere (the write itself stands, as a
            // Redis command that was let in runs to its end).
            let _ = self.make_room(0);
        }
        Some(Ok(result))
    }

    /// Writes a record of `kind` from its portable value (`Item::portable_value`: snapshots,
    /// COPY), replacing any record. Tags as `tags` says. `Ok(None)` when the bytes do not
    /// decode as `kind`.
    pub fn put_portable(
        &mut self,
        kind: Kind,
        portable: &[u8],
        expire_at: Option<u64>,
        flags: u32,
        tags: TagWrite<'_>,
    ) -> Result<Option<u64>, OutOfMemory> {
        if !kind.is_collection() {
            return self
                .put_record(kind, portable.len(), expire_at, flags, tags, |buf, _| {
                    buf.copy_from_slice(portable)
                })
                .map(Some);
        }
        let Some(collection) = collection::decode(kind, portable) else {
            return Ok(None);
        };
        self.put_collection_tagged(collection, expire_at, tags)
            .map(Some)
    }

    /// Frees memory until `extra` more bytes fit under the limit: from this shard first, then
    /// from others that are not busy. Fails when eviction is off or nothing is left to evict.
    fn make_room(&mut self, extra: usize) -> Result<(), OutOfMemory> {
        let store = self.store;
        let limit = store.maxmemory.load(Ordering::Relaxed);
        if limit == 0 || store.replica_mode() {
            return Ok(());
        }
        let fits =
            |store: &Store| store.used_memory() + store.external_memory() + extra as u64 <= limit;
        if fits(store) {
            return Ok(());
        }
        if !store.evicts() {
            return Err(OutOfMemory);
        }
        let started = std::time::Instant::now();
        let made = self.evict_until(fits);
        store.cycle_took(crate::Cycle::Evict, started.elapsed());
        made
    }

    /// Evicts until `fits`: from this shard first, then from others that are not busy.
    fn evict_until(&mut self, fits: impl Fn(&Store) -> bool) -> Result<(), OutOfMemory> {
        let store = self.store;
        let keep = match self.probe {
            Probe::Found(i) => Some(i),
            Probe::Vacant(_) => None,
        };
        while !fits(store) {
            if self.shard.evict_one(store, keep).is_none() {
                break;
            }
            store
                .cell(self.shard_index)
                .evicted
                .fetch_add(1, Ordering::Relaxed);
        }
        if fits(store) {
            return Ok(());
        }
        if store.evict_elsewhere(self.shard_index, || fits(store)) {
            Ok(())
        } else {
            Err(OutOfMemory)
        }
    }
}

impl Store {
    /// Frees records already unlinked and uncounted (`Shard::expire_some`), after their
    /// shard's lock is released: a batch holding a large record goes to the reaper whole.
    pub(crate) fn free_dead(&self, dead: Vec<ItemPtr>) {
        if dead.iter().any(|item| item.charged() >= LARGE_RECORD) {
            if let Err(garbage) = self.reaper.send(Garbage::Items(dead)) {
                drop(garbage);
            }
        } else {
            drop(Garbage::Items(dead));
        }
    }

    /// Frees a record that is no longer reachable, deferring large ones to the reaper.
    pub(crate) fn release(&self, item: ItemPtr, charged: usize) {
        self.account(-(charged as isize));
        if charged >= LARGE_RECORD {
            if let Err(garbage) = self.reaper.send(Garbage::Item(item)) {
                drop(garbage);
            }
        } else {
            // SAFETY: the caller removed the record from its table.
            unsafe { item.free() };
        }
    }
}
