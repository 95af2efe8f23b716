//! The cache engine: a sharded, concurrent keyspace of records with deadlines, CAS versions and
//! a memory limit enforced by eviction (Redis's policies, `evict`). It knows nothing of sockets or protocols.
//!
//! Reads take a shard's shared lock and never block each other; a hit only sets the record's
//! reference bit with a relaxed atomic store. Writes take one shard's exclusive lock through an
//! `Entry`. Commands that must see several keys atomically lock their shards together, in shard
//! order, through `Locked`. Large frees and flushed tables go to a reaper thread; an expiry
//! thread removes expired records a bounded slice at a time. Every change is numbered in its
//! shard's log and reported in order (`changes`).

mod background;
pub mod changes;
#[cfg(test)]
mod changes_tests;
pub mod collection;
#[cfg(test)]
mod collection_tests;
mod ctrl;
mod evict;
pub mod glob;
pub mod hash;
#[cfg(test)]
mod holds_tests;
mod intset;
mod item;
mod large_refs;
mod list;
mod moves;
mod packed;
mod pages;
mod probation;
mod scan;
mod set;
mod shard;
pub mod slab;
mod slots;
pub mod snapshot;
pub mod snapshot_parts;
mod table;
pub mod tags;
#[cfg(test)]
mod tests;
pub mod varint;
mod zset;

use std::sync::atomic::{AtomicI64, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::{Mutex, RwLock, RwLockWriteGuard};

pub use changes::{
    Change, ChangeKind, ChangeRecord, ChangeTap, Cursor, Lagged, Listener, RecordKind,
};
pub use collection::Collection;
pub use evict::{lfu_increment, random_u64, EvictionPolicy, LFU_INIT};
pub use item::{Fields, Item, Kind};
pub use moves::Moved;
pub use shard::{Entry, OutOfMemory, TagWrite};
pub use tags::{Op, Predicate, Query, Tag, MAX_PREDICATES};

use changes::{ChangeKind as CK, Log, TAP_LISTENER};
use item::ItemPtr;
use shard::Shard;
use table::{KeyHash, Table};
use tags::TagIndex;

/// Who made a change: the id of the client whose command wrote, or [`Author::SERVER`] for the
/// server's own changes (background expiry, eviction, a delayed `flush_all`). Every write names
/// its author explicitly, so a change is never attributed to whichever client last ran on the
/// thread (client tracking's NOLOOP depends on it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Author(pub u64);

impl Author {
    /// The server itself (client ids start at 1).
    pub const SERVER: Author = Author(0);
}

/// Work the store does on its own, timed for its owner (the server's latency monitor).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cycle {
    /// One round of active expiry over every shard.
    Expire,
    /// The eviction a write ran to make room under the memory limit.
    Evict,
}

/// Told how long each [`Cycle`] took. Called on the thread that did the work (the expiry
/// thread, or the writer that evicted), so it must be quick.
pub trait CycleObserver: Send + Sync {
    fn cycle_took(&self, cycle: Cycle, took: std::time::Duration);
}

/// The record's version (fresh on every change to it), or, for a record without CAS (`--cas
/// no`), the number of the shard's last change with the top bit set: every change to any record
/// of the shard moves it, so WATCH never misses a change to the key, at the price of aborting
/// when another key of the same shard changed.
fn watch_version_in(shard: &Shard, hash: KeyHash, key: &[u8]) -> Option<u64> {
    let item = lookup(&shard.table, hash, key, None)?;
    Some(if item.has_cas() {
        item.version()
    } else {
        shard.log.seq | 1 << 63
    })
}

/// Wall-clock time in Unix milliseconds: deadlines are absolute so EXPIREAT needs no conversion.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[derive(Clone, Debug)]
pub struct StoreConfig {
    /// Number of shards, rounded up to a power of two.
    pub shards: usize,
    /// Memory limit in bytes; 0 means none.
    pub maxmemory: u64,
    /// What a write does at the memory limit: evict (and how) or fail with `OutOfMemory`.
    pub policy: EvictionPolicy,
    /// Run the background expiry and reaper threads (tests of the engine itself may not).
    pub background: bool,
    /// Bytes the change backlogs may hold, all logs together (kept only while a cursor
    /// consumer is registered).
    pub change_backlog: u64,
    /// Records carry a CAS (memcached `gets`, `cas`); false (`--cas no`) saves 4 bytes a record.
    pub cas: bool,
}

/// Default bound of the change backlogs: Redis's default `repl-backlog-size`.
pub const DEFAULT_CHANGE_BACKLOG: u64 = 1 << 20;

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            shards: 256,
            maxmemory: 0,
            policy: EvictionPolicy::default(),
            background: true,
            change_backlog: DEFAULT_CHANGE_BACKLOG,
            cas: true,
        }
    }
}

/// Memory that is no longer reachable, freed on the reaper thread.
pub(crate) enum Garbage {
    Item(ItemPtr),
    Items(Vec<ItemPtr>),
    /// Held only so that its records are freed when the reaper drops it.
    #[allow(dead_code)]
    Table(Table),
}

impl Drop for Garbage {
    fn drop(&mut self) {
        // SAFETY: garbage items were removed from their table before being sent here.
        match self {
            Garbage::Item(item) => unsafe { item.free() },
            Garbage::Items(items) => items.drain(..).for_each(|item| unsafe { item.free() }),
            Garbage::Table(_) => {}
        }
    }
}

/// A shard and its counters on a cache line pair of their own, so that neighbours' hits and
/// lock traffic do not contend.
#[repr(align(128))]
pub(crate) struct ShardCell {
    lock: RwLock<Shard>,
    hits: AtomicU64,
    misses: AtomicU64,
    expired: AtomicU64,
    /// Hash fields removed because their own deadline passed (INFO `expired_subkeys`).
    expired_fields: AtomicU64,
    evicted: AtomicU64,
    /// Records written (not rebuilt in place of themselves): memcached's `total_items`.
    stored: AtomicU64,
}

/// Counters for INFO and `stats`.
#[derive(Clone, Copy, Debug, Default)]
pub struct StoreStats {
    pub keys: u64,
    pub keys_with_expiry: u64,
    pub used_memory: u64,
    /// Bytes held outside the store that count against the limit (see `account_external`).
    pub external_memory: u64,
    pub hits: u64,
    pub misses: u64,
    pub expired: u64,
    /// Hash fields removed because their own deadline passed (HEXPIRE and family).
    pub expired_fields: u64,
    pub evicted: u64,
    /// Records written since start, by either protocol.
    pub stored: u64,
    /// Bytes the change backlogs hold (not counted in `used_memory` nor against the limit).
    pub change_backlog: u64,
    /// Of `used_memory`: the shards' slot arrays (the key index) and allkeys-lru's probation
    /// rings and ghost sets.
    pub index_memory: u64,
    /// Of `used_memory`: the tag index's entries.
    pub tag_index_memory: u64,
}

impl StoreStats {
    /// Of `used_memory`: the records themselves (keys, values, headers, collections).
    pub fn records_memory(&self) -> u64 {
        self.used_memory
            .saturating_sub(self.index_memory + self.tag_index_memory)
    }
}

pub struct Store {
    shards: Box<[ShardCell]>,
    hasher: ahash::RandomState,
    /// The seeds `hasher` was built from (random per process): a primary's full sync sends
    /// them with its part cuts, so that its replica finds a key's part (`snapshot_parts`).
    hash_seeds: [u64; 4],
    used: AtomicI64,
    /// Memory the owner holds outside the store (the server's client buffers) that must fit
    /// under `maxmemory` too, so that eviction and OOM errors see it.
    external: AtomicI64,
    maxmemory: AtomicU64,
    /// The `EvictionPolicy`, as its `u8`.
    policy: AtomicU8,
    evict_cursor: AtomicUsize,
    reaper: Sender<Garbage>,
    pub(crate) tags: TagIndex,
    /// Held exclusively by a group delete while it works chunk by chunk, shared by group reads
    /// and by every multi-shard lock (`Locked`): those see a group whole or gone.
    pub(crate) groups: RwLock<()>,
    /// Told of every change while `taps` has a `TAP_LISTENER` bit (client tracking, write-behind).
    tap: std::sync::OnceLock<Arc<dyn ChangeTap>>,
    /// Who wants changes now (`changes::TAP_*` bits): one relaxed load per change when nobody.
    taps: AtomicU8,
    /// Registered cursors; the backlogs fill while there is one.
    consumers: AtomicUsize,
    /// The SQL statements' log (the shards' logs live in the shards).
    sql: Mutex<Log>,
    /// Bound of all backlogs together, and what they hold now.
    change_backlog: AtomicU64,
    backlog_used: AtomicI64,
    cycle_observer: std::sync::OnceLock<Arc<dyn CycleObserver>>,
    /// Replica mode: the store never expires nor evicts on its own; its primary's deletions
    /// do (docs/replication.md, "Design").
    replica: std::sync::atomic::AtomicBool,
    /// Whether new records carry a CAS (`StoreConfig::cas`).
    keeps_cas: bool,
}

impl Store {
    pub fn new(config: StoreConfig) -> Arc<Store> {
        let count = config.shards.max(1).next_power_of_two();
        let (reaper, garbage) = std::sync::mpsc::channel();
        let shards: Box<[ShardCell]> = (0..count)
            .map(|index| ShardCell {
                lock: RwLock::new(Shard::new(index)),
                hits: AtomicU64::new(0),
                misses: AtomicU64::new(0),
                expired: AtomicU64::new(0),
                expired_fields: AtomicU64::new(0),
                evicted: AtomicU64::new(0),
                stored: AtomicU64::new(0),
            })
            .collect();
        let used = shards.iter().map(|c| c.lock.read().used as i64).sum();
        let hash_seeds = snapshot_parts::random_seeds();
        let store = Arc::new(Store {
            shards,
            hasher: snapshot_parts::hasher_of(hash_seeds),
            hash_seeds,
            used: AtomicI64::new(used),
            external: AtomicI64::new(0),
            maxmemory: AtomicU64::new(config.maxmemory),
            policy: AtomicU8::new(config.policy as u8),
            evict_cursor: AtomicUsize::new(0),
            reaper,
            tags: TagIndex::new(count),
            groups: RwLock::new(()),
            tap: std::sync::OnceLock::new(),
            taps: AtomicU8::new(0),
            consumers: AtomicUsize::new(0),
            sql: Mutex::new(Log::default()),
            change_backlog: AtomicU64::new(config.change_backlog),
            backlog_used: AtomicI64::new(0),
            cycle_observer: std::sync::OnceLock::new(),
            replica: std::sync::atomic::AtomicBool::new(false),
            keeps_cas: config.cas,
        });
        if config.background {
            background::spawn(&store, garbage);
        } else {
            std::thread::spawn(move || garbage.into_iter().for_each(drop));
        }
        store
    }

    /// Installs the change tap (once); `set_listening` says whether it is called.
    pub fn set_tap(&self, tap: Arc<dyn ChangeTap>) {
        let _ = self.tap.set(tap);
    }

    /// Installs (once) the observer of the store's own work.
    pub fn set_cycle_observer(&self, observer: Arc<dyn CycleObserver>) {
        let _ = self.cycle_observer.set(observer);
    }

    pub(crate) fn cycle_took(&self, cycle: Cycle, took: std::time::Duration) {
        if let Some(observer) = self.cycle_observer.get() {
            observer.cycle_took(cycle, took);
        }
    }

    /// Whether `who` wants the tap called; it is called while anyone does.
    pub fn set_listening(&self, who: Listener, on: bool) {
        if on {
            self.taps.fetch_or(who.bit(), Ordering::Relaxed);
        } else {
            self.taps.fetch_and(!who.bit(), Ordering::Relaxed);
        }
    }

    /// Whether `who` wants the tap called now.
    pub fn listening(&self, who: Listener) -> bool {
        self.taps.load(Ordering::Relaxed) & who.bit() != 0
    }

    fn tell_flush(&self, author: Author, seqs: &[u64]) {
        if self.taps.load(Ordering::Relaxed) & TAP_LISTENER != 0 {
            if let Some(tap) = self.tap.get() {
                tap.flushed(author, seqs);
            }
        }
    }

    pub(crate) fn hash(&self, key: &[u8]) -> KeyHash {
        KeyHash(self.hasher.hash_one(key))
    }

    fn shard_of(&self, hash: KeyHash) -> usize {
        hash.0 as usize & (self.shards.len() - 1)
    }

    pub(crate) fn cell(&self, index: usize) -> &ShardCell {
        &self.shards[index]
    }

    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    pub(crate) fn account(&self, delta: isize) {
        self.used.fetch_add(delta as i64, Ordering::Relaxed);
    }

    pub fn used_memory(&self) -> u64 {
        self.used.load(Ordering::Relaxed).max(0) as u64
    }

    /// Adds `delta` bytes to the memory held outside the store that counts against the limit.
    pub fn account_external(&self, delta: i64) {
        self.external.fetch_add(delta, Ordering::Relaxed);
    }

    pub fn external_memory(&self) -> u64 {
        self.external.load(Ordering::Relaxed).max(0) as u64
    }

    pub fn maxmemory(&self) -> u64 {
        self.maxmemory.load(Ordering::Relaxed)
    }

    pub fn set_maxmemory(&self, bytes: u64) {
        self.maxmemory.store(bytes, Ordering::Relaxed);
    }

    pub fn evicts(&self) -> bool {
        self.policy().evicts() && !self.replica_mode()
    }

    /// Replica mode on or off. In replica mode records past their deadline read as absent but
    /// stay until a deletion arrives (no lazy or active expiry), and nothing is evicted nor
    /// refused for memory (the primary decides, as a Redis replica ignores maxmemory).
    pub fn set_replica_mode(&self, on: bool) {
        self.replica.store(on, Ordering::Relaxed);
    }

    #[inline]
    pub fn replica_mode(&self) -> bool {
        self.replica.load(Ordering::Relaxed)
    }

    /// Whether records carry a CAS (false under `--cas no`).
    pub fn keeps_cas(&self) -> bool {
        self.keeps_cas
    }

    /// What WATCH remembers of `key` and EXEC compares: None when there is no record, else a
    /// number that changes whenever the record does (see `watch_version_in`).
    pub fn watch_version(&self, key: &[u8]) -> Option<u64> {
        let hash = self.hash(key);
        let shard = self.shards[self.shard_of(hash)].lock.read();
        watch_version_in(&shard, hash, key)
    }

    pub fn policy(&self) -> EvictionPolicy {
        EvictionPolicy::from_u8(self.policy.load(Ordering::Relaxed))
    }

    /// Changes the policy at once. Reference bytes keep their values: switching between LRU and
    /// LFU takes a while to adjust, as in Redis.
    pub fn set_policy(&self, policy: EvictionPolicy) {
        let old = EvictionPolicy::from_u8(self.policy.swap(policy as u8, Ordering::Relaxed));
        if old == EvictionPolicy::AllKeysLru && policy != old {
            for cell in self.shards.iter() {
                cell.lock.write().end_probation(self);
            }
        }
    }

    /// Reads one key without counting an access (no hit or miss, no LRU/LFU update): OBJECT,
    /// MEMORY USAGE.
    pub fn peek<R>(&self, key: &[u8], f: impl FnOnce(Option<Item<'_>>) -> R) -> R {
        let hash = self.hash(key);
        let shard = self.shards[self.shard_of(hash)].lock.read();
        f(lookup(&shard.table, hash, key, None))
    }

    /// A random live key, or None when there is none (RANDOMKEY). Starts from a random shard
    /// and slot, so keys in sparse shards are likelier than others (Redis's is not uniform
    /// either).
    pub fn random_key(&self) -> Option<Vec<u8>> {
        let n = self.shards.len();
        let start = random_u64() as usize;
        (0..n).find_map(|k| {
            let shard = self.shards[(start + k) % n].lock.read();
            random_in(&shard)
        })
    }

    /// Reads one key under its shard's shared lock. Expired records read as absent.
    /// Counts a hit or a miss.
    pub fn read<R>(&self, key: &[u8], f: impl FnOnce(Option<Item<'_>>) -> R) -> R {
        let hash = self.hash(key);
        let cell = &self.shards[self.shard_of(hash)];
        let shard = cell.lock.read();
        let item = lookup(&shard.table, hash, key, Some(self.policy().is_lfu()));
        count_lookup(cell, item.is_some());
        f(item)
    }

    /// Runs `f` with exclusive access to `key`'s place in its shard; its changes are `author`'s.
    pub fn write<R>(&self, author: Author, key: &[u8], f: impl FnOnce(&mut Entry<'_>) -> R) -> R {
        let index = self.shard_of(self.hash(key));
        let mut shard = self.shards[index].lock.write();
        let mut entry = Entry::new(self, index, &mut shard, key, author);
        f(&mut entry)
    }

    /// Locks the shards of `keys` exclusively, in shard order so that lockers never deadlock.
    pub fn lock_keys<'k>(
        &self,
        author: Author,
        keys: impl IntoIterator<Item = &'k [u8]>,
    ) -> Locked<'_> {
        let mut indexes: Vec<usize> = keys
            .into_iter()
            .map(|k| self.shard_of(self.hash(k)))
            .collect();
        indexes.sort_unstable();
        indexes.dedup();
        self.lock_indexes(author, indexes)
    }

    /// Locks every shard: the whole keyspace is frozen for other clients while held.
    pub fn lock_all(&self, author: Author) -> Locked<'_> {
        self.lock_indexes(author, (0..self.shards.len()).collect())
    }

    fn lock_indexes(&self, author: Author, indexes: Vec<usize>) -> Locked<'_> {
        // Taken before any shard (lock order: groups, then shards).
        let groups = self.groups.read_recursive();
        let guards = indexes
            .into_iter()
            .map(|i| (i, self.shards[i].lock.write()))
            .collect();
        Locked {
            store: self,
            guards,
            author,
            _groups: groups,
        }
    }

    /// Number of records, expired ones not yet removed included (as Redis's DBSIZE).
    pub fn len(&self) -> usize {
        self.shards.iter().map(|c| c.lock.read().table.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Removes every record, as the server (a delayed flush); see `flush_by`.
    pub fn flush(&self) {
        self.flush_by(Author::SERVER)
    }

    /// Removes every record, as `author`; the memory is freed on the reaper thread.
    /// Every shard is locked at once: no write lands between two shards' flushes, so the
    /// change stream holds the flush as one point (a replica applies it as one).
    pub fn flush_by(&self, author: Author) {
        self.lock_all(author).flush();
    }

    pub fn stats(&self) -> StoreStats {
        self.stats_with(|index, f| f(&self.shards[index].lock.read()))
    }

    /// Zeroes the hit, miss, expiry and eviction counters (CONFIG RESETSTAT).
    pub fn reset_stats(&self) {
        for cell in self.shards.iter() {
            for counter in [
                &cell.hits,
                &cell.misses,
                &cell.expired,
                &cell.expired_fields,
                &cell.evicted,
            ] {
                counter.store(0, Ordering::Relaxed);
            }
        }
    }

    /// Sums the counters, reading each shard's table through `with_shard`.
    fn stats_with(&self, mut with_shard: impl FnMut(usize, &mut dyn FnMut(&Shard))) -> StoreStats {
        let mut s = StoreStats {
            used_memory: self.used_memory(),
            external_memory: self.external_memory(),
            change_backlog: self.change_backlog_memory(),
            tag_index_memory: (self.tags.len() * tags::ENTRY_COST) as u64,
            ..StoreStats::default()
        };
        for (index, cell) in self.shards.iter().enumerate() {
            s.hits += cell.hits.load(Ordering::Relaxed);
            s.misses += cell.misses.load(Ordering::Relaxed);
            s.expired += cell.expired.load(Ordering::Relaxed);
            s.expired_fields += cell.expired_fields.load(Ordering::Relaxed);
            s.evicted += cell.evicted.load(Ordering::Relaxed);
            s.stored += cell.stored.load(Ordering::Relaxed);
            with_shard(index, &mut |shard: &Shard| {
                s.keys += shard.table.len() as u64;
                s.keys_with_expiry += shard.table.expiring() as u64;
                s.index_memory += (shard.table.bytes() + shard.probation.bytes()) as u64;
            });
        }
        s
    }

    /// Evicts from shards other than `busy` (skipping locked ones) until `done` holds.
    pub(crate) fn evict_elsewhere(&self, busy: usize, done: impl Fn() -> bool) -> bool {
        let n = self.shards.len();
        let mut idle_rounds = 0;
        while !done() {
            let mut progressed = false;
            for _ in 0..n {
                let index = self.evict_cursor.fetch_add(1, Ordering::Relaxed) % n;
                if index == busy {
                    continue;
                }
                let cell = &self.shards[index];
                let Some(mut shard) = cell.lock.try_write() else {
                    continue;
                };
                while !done() {
                    if shard.evict_one(self, None).is_none() {
                        break;
                    }
                    cell.evicted.fetch_add(1, Ordering::Relaxed);
                    progressed = true;
                }
                if done() {
                    return true;
                }
            }
            idle_rounds = if progressed { 0 } else { idle_rounds + 1 };
            if idle_rounds >= 2 {
                return false;
            }
        }
        true
    }
}

/// A random live key of one shard.
fn random_in(shard: &Shard) -> Option<Vec<u8>> {
    if shard.table.len() == 0 {
        return None;
    }
    let cap = shard.table.capacity();
    let start = random_u64() as usize % cap;
    let now = now_ms();
    (0..cap).find_map(|k| {
        let item = shard.table.item_at((start + k) % cap)?;
        let live = item.expire_at().is_none_or(|d| d > now);
        live.then(|| item.key().to_vec())
    })
}

/// The live record under `key`. `access`: Some(lfu) counts a read for the eviction policy
/// (an LFU increment, or CLOCK's reference bit), None leaves it alone.
fn lookup<'a>(
    table: &'a Table,
    hash: KeyHash,
    key: &[u8],
    access: Option<bool>,
) -> Option<Item<'a>> {
    let (i, item) = table.find_record(hash, key)?;
    if table.has_expire(i) && item.expire_at().is_some_and(|d| d <= now_ms()) {
        return None;
    }
    if let Some(lfu) = access {
        evict::access(item, lfu);
    }
    Some(Item::new(item))
}

fn count_lookup(cell: &ShardCell, hit: bool) {
    let counter = if hit { &cell.hits } else { &cell.misses };
    counter.fetch_add(1, Ordering::Relaxed);
}

fn flush_shard(store: &Store, shard: &mut Shard, author: Author) {
    if store.tags.len() > 0 {
        for i in 0..shard.table.capacity() {
            if shard.table.is_tagged(i) {
                let item = shard.table.item_at(i).expect("tagged slot is occupied");
                let removed = store.tags.remove(
                    item.tags(),
                    tags::reference(shard.index, shard.table.ref_at(i)),
                );
                shard.used -= tags::ENTRY_COST * removed;
                store.account(-((tags::ENTRY_COST * removed) as isize));
            }
        }
    }
    let old = shard.table.take();
    let delta = shard.table.bytes() as isize - shard.used as isize;
    shard.used = shard.table.bytes();
    shard.clock_hand = 0;
    shard.probation.clear();
    shard.expire_cursor = 0;
    shard.hashes_with_deadlines.clear();
    store.account(delta);
    if let Err(err) = store.reaper.send(Garbage::Table(old)) {
        drop(err);
    }
    let index = shard.index;
    store.record(&mut shard.log, index, author, &[], CK::Flush);
}

/// Several shards held exclusively at once: commands run through it see and change their keys
/// atomically with respect to every other client.
pub struct Locked<'s> {
    store: &'s Store,
    guards: Vec<(usize, RwLockWriteGuard<'s, Shard>)>,
    /// Whose changes the writes through this are.
    author: Author,
    /// No group delete runs while this is held (released after the shards).
    _groups: parking_lot::RwLockReadGuard<'s, ()>,
}

impl<'s> Locked<'s> {
    fn guard(&mut self, key: &[u8]) -> (usize, &mut Shard) {
        let index = self.store.shard_of(self.store.hash(key));
        let pos = self
            .guards
            .binary_search_by_key(&index, |(i, _)| *i)
            .unwrap_or_else(|_| panic!("key's shard {index} was not locked"));
        (index, &mut self.guards[pos].1)
    }

    pub fn read<R>(&mut self, key: &[u8], f: impl FnOnce(Option<Item<'_>>) -> R) -> R {
        let store = self.store;
        let hash = store.hash(key);
        let lfu = store.policy().is_lfu();
        let (index, shard) = self.guard(key);
        let item = lookup(&shard.table, hash, key, Some(lfu));
        count_lookup(store.cell(index), item.is_some());
        f(item)
    }

    /// As `Store::watch_version`, on a held shard.
    pub fn watch_version(&mut self, key: &[u8]) -> Option<u64> {
        let hash = self.store.hash(key);
        let (_, shard) = self.guard(key);
        watch_version_in(shard, hash, key)
    }

    /// As `Store::peek`, on a held shard.
    pub fn peek<R>(&mut self, key: &[u8], f: impl FnOnce(Option<Item<'_>>) -> R) -> R {
        let hash = self.store.hash(key);
        let (_, shard) = self.guard(key);
        f(lookup(&shard.table, hash, key, None))
    }

    /// As `Store::random_key`, among the held shards (a transaction holds them all).
    pub fn random_key(&self) -> Option<Vec<u8>> {
        let n = self.guards.len();
        if n == 0 {
            return None;
        }
        let start = random_u64() as usize;
        (0..n).find_map(|k| random_in(&self.guards[(start + k) % n].1))
    }

    pub fn write<R>(&mut self, key: &[u8], f: impl FnOnce(&mut Entry<'_>) -> R) -> R {
        let store = self.store;
        let author = self.author;
        let (index, shard) = self.guard(key);
        let mut entry = Entry::new(store, index, shard, key, author);
        f(&mut entry)
    }

    /// Whether every shard is held (needed for keyspace-wide commands inside a transaction).
    pub fn holds_all(&self) -> bool {
        self.guards.len() == self.store.shards.len()
    }

    pub fn len(&self) -> usize {
        self.guards.iter().map(|(_, g)| g.table.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Counters as `Store::stats`, without taking the locks this already holds.
    pub fn stats(&self) -> StoreStats {
        self.store.stats_with(|index, f| {
            match self.guards.binary_search_by_key(&index, |(i, _)| *i) {
                Ok(pos) => f(&self.guards[pos].1),
                Err(_) => f(&self.store.shards[index].lock.read()),
            }
        })
    }

    pub fn flush(&mut self) {
        let store = self.store;
        for (_, shard) in self.guards.iter_mut() {
            flush_shard(store, shard, self.author);
        }
        let seqs: Vec<u64> = self.guards.iter().map(|(_, g)| g.log.seq).collect();
        store.tell_flush(self.author, &seqs);
    }
}

/// The keyspace as a command sees it: the shared store (one lock per access) or a set of
/// shards held by a transaction or a multi-key command. Commands are written once against it.
/// Either way it knows whose command runs, and its writes are that author's.
pub enum Db<'a, 's> {
    Shared(&'s Store, Author),
    Locked(&'a mut Locked<'s>),
}

impl<'a, 's> Db<'a, 's> {
    pub fn store(&self) -> &'s Store {
        match self {
            Db::Shared(store, _) => store,
            Db::Locked(locked) => locked.store,
        }
    }

    /// Whose changes the writes through this are.
    pub fn author(&self) -> Author {
        match self {
            Db::Shared(_, author) => *author,
            Db::Locked(locked) => locked.author,
        }
    }

    pub fn read<R>(&mut self, key: &[u8], f: impl FnOnce(Option<Item<'_>>) -> R) -> R {
        match self {
            Db::Shared(store, _) => store.read(key, f),
            Db::Locked(locked) => locked.read(key, f),
        }
    }

    pub fn write<R>(&mut self, key: &[u8], f: impl FnOnce(&mut Entry<'_>) -> R) -> R {
        match self {
            Db::Shared(store, author) => store.write(*author, key, f),
            Db::Locked(locked) => locked.write(key, f),
        }
    }

    /// See `Store::watch_version`.
    pub fn watch_version(&mut self, key: &[u8]) -> Option<u64> {
        match self {
            Db::Shared(store, _) => store.watch_version(key),
            Db::Locked(locked) => locked.watch_version(key),
        }
    }

    /// Reads without counting an access; see `Store::peek`.
    pub fn peek<R>(&mut self, key: &[u8], f: impl FnOnce(Option<Item<'_>>) -> R) -> R {
        match self {
            Db::Shared(store, _) => store.peek(key, f),
            Db::Locked(locked) => locked.peek(key, f),
        }
    }

    /// A random live key (RANDOMKEY).
    pub fn random_key(&self) -> Option<Vec<u8>> {
        match self {
            Db::Shared(store, _) => store.random_key(),
            Db::Locked(locked) => locked.random_key(),
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Db::Shared(store, _) => store.len(),
            Db::Locked(locked) => locked.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn flush(&mut self) {
        match self {
            Db::Shared(store, author) => store.flush_by(*author),
            Db::Locked(locked) => locked.flush(),
        }
    }

    pub fn stats(&self) -> StoreStats {
        match self {
            Db::Shared(store, _) => store.stats(),
            Db::Locked(locked) => locked.stats(),
        }
    }

    /// Runs `f` over the live records matching `query`, seen atomically: see `tags`.
    pub fn tag_read<R>(
        &mut self,
        query: &Query,
        f: impl FnOnce(&mut dyn Iterator<Item = Item<'_>>) -> R,
    ) -> R {
        match self {
            Db::Shared(store, _) => store.tag_read(query, f),
            Db::Locked(locked) => locked.tag_read(query, f),
        }
    }

    /// Removes every record matching `query` at once; returns how many live ones went.
    pub fn tag_delete(&mut self, query: &Query) -> usize {
        match self {
            Db::Shared(store, author) => store.tag_delete(*author, query),
            Db::Locked(locked) => locked.tag_delete(query),
        }
    }

    /// One SCAN step; see `scan::scan`.
    pub fn scan(&mut self, cursor: u64, count: usize, visit: impl FnMut(Item<'_>)) -> u64 {
        match self {
            Db::Shared(store, _) => scan::scan_shared(store, cursor, count, visit),
            Db::Locked(locked) => scan::scan_locked(locked, cursor, count, visit),
        }
    }
}
