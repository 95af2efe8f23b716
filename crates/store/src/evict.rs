//! Eviction policies under the memory limit, by Redis's `maxmemory-policy` names, and how a
//! shard picks its victim for each.
//!
//! Every record has one reference byte (`visited` in `item`), written by readers with a relaxed
//! atomic store under the shard's shared lock: a hit never moves anything. The LRU policies keep
//! a 2-bit frequency in it ([`FREQUENCY`], saturating at 3; the eviction hand takes one off
//! each time it passes and evicts at 0: CLOCK with a counter). `allkeys-lru`, the cache default,
//! adds S3-FIFO's probationary FIFO and ghost set (`probation`; the record's [`PROBATION`] bit):
//! a record written and never read again leaves before any record that was read, which keeps
//! the hit ratio within half a point of the best of S3-FIFO and W-TinyLFU on the eviction
//! suite's streams (bench/results/eviction.md), where plain CLOCK was 3 to 5 points behind.
//! `volatile-lru` is the counter CLOCK alone over the records with a deadline. The LFU policies use it as Redis's 8-bit
//! logarithmic frequency counter: a new record starts at [`LFU_INIT`], an access increments it
//! with probability `1 / ((counter - LFU_INIT) * 10 + 1)` (Redis's `lfu-log-factor` 10), and it
//! decays by one, on average every eighth time the eviction hand samples the record without
//! evicting it (about once every eight sweeps of the table), so that counters follow recent use
//! while memory is under pressure (Redis decays by wall-clock minutes,
//! which needs a timestamp cairn's records do not carry). The `volatile-*` policies consider only
//! records with a deadline; when none is left to evict the write fails with OOM, as in Redis.
//! `volatile-ttl` evicts the nearest deadline among a sample; the random policies pick from a
//! random slot.

use std::cell::Cell;

use crate::changes::ChangeKind;
use crate::item::ItemPtr;
use crate::shard::Shard;
use crate::{Author, Store};

/// What a write does when the memory limit is reached (Redis's `maxmemory-policy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum EvictionPolicy {
    /// Refuse writes that need more memory (-OOM).
    NoEviction = 0,
    /// Probationary FIFO, ghost set and counter CLOCK over every record: the cache default.
    #[default]
    AllKeysLru = 1,
    AllKeysLfu = 2,
    AllKeysRandom = 3,
    VolatileLru = 4,
    VolatileLfu = 5,
    VolatileRandom = 6,
    VolatileTtl = 7,
}

impl EvictionPolicy {
    pub const ALL: [EvictionPolicy; 8] = [
        EvictionPolicy::NoEviction,
        EvictionPolicy::AllKeysLru,
        EvictionPolicy::AllKeysLfu,
        EvictionPolicy::AllKeysRandom,
        EvictionPolicy::VolatileLru,
        EvictionPolicy::VolatileLfu,
        EvictionPolicy::VolatileRandom,
        EvictionPolicy::VolatileTtl,
    ];

    /// Redis's name of the policy.
    pub fn name(self) -> &'static str {
        match self {
            EvictionPolicy::NoEviction => "noeviction",
            EvictionPolicy::AllKeysLru => "allkeys-lru",
            EvictionPolicy::AllKeysLfu => "allkeys-lfu",
            EvictionPolicy::AllKeysRandom => "allkeys-random",
            EvictionPolicy::VolatileLru => "volatile-lru",
            EvictionPolicy::VolatileLfu => "volatile-lfu",
            EvictionPolicy::VolatileRandom => "volatile-random",
            EvictionPolicy::VolatileTtl => "volatile-ttl",
        }
    }

    /// The policy of a Redis name, case-insensitively.
    pub fn from_name(name: &str) -> Option<EvictionPolicy> {
        EvictionPolicy::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(name))
    }

    pub(crate) fn from_u8(v: u8) -> EvictionPolicy {
        EvictionPolicy::ALL[(v & 7) as usize]
    }

    /// Whether writes evict at the limit (rather than fail).
    pub fn evicts(self) -> bool {
        self != EvictionPolicy::NoEviction
    }

    /// Whether the reference byte is an LFU counter (OBJECT FREQ answers only then).
    pub fn is_lfu(self) -> bool {
        matches!(
            self,
            EvictionPolicy::AllKeysLfu | EvictionPolicy::VolatileLfu
        )
    }

    /// Whether only records with a deadline may be evicted.
    pub fn volatile_only(self) -> bool {
        matches!(
            self,
            EvictionPolicy::VolatileLru
                | EvictionPolicy::VolatileLfu
                | EvictionPolicy::VolatileRandom
                | EvictionPolicy::VolatileTtl
        )
    }
}

/// The bits of the reference byte that count reads under the LRU policies (0 to 3).
pub const FREQUENCY: u8 = 0b11;
/// The bit of the reference byte that marks an `allkeys-lru` record still in probation.
pub const PROBATION: u8 = 0x80;

/// Whether a reference byte says the record was read since the hand last passed (memcached `h`).
pub(crate) fn was_read(reference: u8) -> bool {
    reference & !PROBATION != 0
}

/// The counter a new record starts with under LFU (Redis's `LFU_INIT_VAL`), so that it is not
/// the first evicted before it had a chance to be read.
pub const LFU_INIT: u8 = 5;
/// Redis's default `lfu-log-factor`.
const LFU_LOG_FACTOR: f64 = 10.0;
/// Records a sampling policy (LFU, volatile-ttl) compares per eviction.
const SAMPLES: usize = 16;
/// A sampled LFU counter decays one time in this many.
const DECAY_ONE_IN: u64 = 8;

/// One logarithmic increment of an LFU counter (Redis's `LFULogIncr`); `chance` is uniform in
/// [0, 1).
pub fn lfu_increment(counter: u8, chance: f64) -> u8 {
    if counter == u8::MAX {
        return counter;
    }
    let base = counter.saturating_sub(LFU_INIT) as f64;
    let p = 1.0 / (base * LFU_LOG_FACTOR + 1.0);
    if chance < p {
        counter + 1
    } else {
        counter
    }
}

thread_local! {
    static RNG: Cell<u64> = const { Cell::new(0) };
}

/// A fast per-thread pseudo-random number (xorshift64*), for sampling, not for secrets.
pub fn random_u64() -> u64 {
    RNG.with(|state| {
        let mut x = state.get();
        if x == 0 {
            // Seeded from the thread's stack address and the clock: distinct per thread.
            let local = 0u8;
            x = (&local as *const u8 as u64) ^ crate::now_ms().wrapping_mul(0x9E37_79B9_7F4A_7C15);
            x |= 1;
        }
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        state.set(x);
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    })
}

/// A reader's access to a record: one more in the 2-bit frequency, or an LFU increment. A
/// plain load first keeps hot records' lines clean; readers race only with readers (the hand
/// runs under the exclusive lock), and a lost increment is harmless.
pub(crate) fn access(item: ItemPtr, lfu: bool) {
    let counter = item.reference();
    if !lfu {
        if counter & FREQUENCY != FREQUENCY {
            item.set_reference(counter + 1);
        }
        return;
    }
    if counter == u8::MAX {
        return;
    }
    let chance = (random_u64() >> 11) as f64 / (1u64 << 53) as f64;
    let next = lfu_increment(counter, chance);
    if next != counter {
        item.set_reference(next);
    }
}

/// Whether `item` is the record in probation whose key has `hash`. A slot keeps only 6 bits of
/// the hash, so another record in probation on the same probe path would match those 1 time
/// in 63: the whole hash of its key decides (only for a candidate those bits let through).
pub(crate) fn probationer_is(store: &Store, item: ItemPtr, hash: crate::table::KeyHash) -> bool {
    item.reference() & PROBATION != 0 && store.hash(item.key()).0 == hash.0
}

impl Shard {
    /// The record in slot `i` if the policy may evict it.
    fn candidate(&self, i: usize, keep: Option<usize>, volatile: bool) -> Option<ItemPtr> {
        if Some(i) == keep {
            return None;
        }
        let item = self.table.item_at(i)?;
        if volatile && !(self.table.has_expire(i) && item.expire_at().is_some()) {
            return None;
        }
        Some(item)
    }

    /// Evicts one record as `store`'s policy chooses, never the one in slot `keep`. Returns
    /// the bytes freed, or None when the shard has nothing the policy may evict.
    pub fn evict_one(&mut self, store: &Store, keep: Option<usize>) -> Option<usize> {
        let policy = store.policy();
        let volatile = policy.volatile_only();
        // No record with a deadline: nothing for volatile-* here, without a sweep.
        if volatile && self.table.expiring() == 0 {
            return None;
        }
        let victim = match policy {
            EvictionPolicy::NoEviction => None,
            EvictionPolicy::AllKeysLru => self.probation_victim(store, keep),
            EvictionPolicy::VolatileLru => self.clock_victim(keep, true, false),
            EvictionPolicy::AllKeysLfu | EvictionPolicy::VolatileLfu => {
                self.sampled_victim(keep, volatile, true, |item| item.reference() as u64)
            }
            EvictionPolicy::AllKeysRandom | EvictionPolicy::VolatileRandom => {
                self.random_victim(keep, volatile)
            }
            EvictionPolicy::VolatileTtl => self.sampled_victim(keep, true, false, |item| {
                item.expire_at().unwrap_or(u64::MAX)
            }),
        }?;
        let from_probation = policy == EvictionPolicy::AllKeysLru
            && self
                .table
                .item_at(victim)
                .is_some_and(|item| item.reference() & PROBATION != 0);
        let hash = from_probation.then(|| {
            let item = self.table.item_at(victim).expect("victim slot is occupied");
            store.hash(item.key())
        });
        let freed = self.remove_slot(store, victim, Author::SERVER, ChangeKind::Evict);
        if let Some(hash) = hash {
            let before = self.probation.bytes();
            self.probation.remember(hash, self.table.len());
            self.account_probation(store, before);
        }
        Some(freed)
    }

    /// Counter CLOCK: sweeps from the hand, taking one off each read record's frequency and
    /// evicting the first at 0. With `skip_probation`, records in probation are passed over
    /// unless nothing else can go.
    fn clock_victim(
        &mut self,
        keep: Option<usize>,
        volatile: bool,
        skip_probation: bool,
    ) -> Option<usize> {
        let cap = self.table.capacity();
        // Four passes bring any counter to 0; a fifth finds the record.
        let mut spared = None;
        for _ in 0..5 * cap {
            let i = self.clock_hand % cap;
            self.clock_hand = i + 1;
            if let Some(item) = self.candidate(i, keep, volatile) {
                let reference = item.reference();
                if skip_probation && reference & PROBATION != 0 {
                    spared = spared.or(Some(i));
                    continue;
                }
                if reference & FREQUENCY != 0 {
                    item.set_reference(reference - 1);
                    continue;
                }
                return Some(i);
            }
        }
        spared
    }

    /// `allkeys-lru`: the oldest record in probation when probation is full (those read since
    /// they were written move on to the main part instead), else the main part's CLOCK victim.
    fn probation_victim(&mut self, store: &Store, keep: Option<usize>) -> Option<usize> {
        while self.probation.is_due(self.table.len()) {
            let Some(hash) = self.probation.pop() else {
                break;
            };
            let Some(i) = self.probationer(store, hash) else {
                continue; // deleted or replaced meanwhile
            };
            let item = self.table.item_at(i).expect("found slot is occupied");
            let reference = item.reference();
            if reference & FREQUENCY != 0 || Some(i) == keep {
                item.set_reference(reference & !PROBATION);
                continue;
            }
            return Some(i);
        }
        self.clock_victim(keep, false, true)
    }

    /// The slot of the record in probation with `hash`, if it is still there.
    pub(crate) fn probationer(&self, store: &Store, hash: crate::table::KeyHash) -> Option<usize> {
        self.table
            .find_by_hash(hash, |item| probationer_is(store, item, hash))
    }

    /// A new record in slot `i` with `hash` under `allkeys-lru` with a memory limit: it enters
    /// probation unless the ghost set remembers its key.
    pub(crate) fn admit(&mut self, store: &Store, i: usize, hash: crate::table::KeyHash) {
        let before = self.probation.bytes();
        let (probation, overflow) = self.probation.admit(hash, self.table.len());
        if probation {
            let item = self.table.item_at(i).expect("admitted slot is occupied");
            item.set_reference(item.reference() | PROBATION);
        }
        // The ring is full of entries of records deleted meanwhile: its oldest live one (if
        // any) moves on to the main part without an eviction.
        if let Some(i) = overflow.and_then(|hash| self.probationer(store, hash)) {
            let item = self.table.item_at(i).expect("found slot is occupied");
            item.set_reference(item.reference() & !PROBATION);
        }
        self.account_probation(store, before);
    }

    /// Charges the change in the probation structures' size since they held `before` bytes.
    fn account_probation(&mut self, store: &Store, before: usize) {
        let after = self.probation.bytes();
        if after != before {
            self.used = self.used + after - before;
            store.account(after as isize - before as isize);
        }
    }

    /// Samples up to `SAMPLES` candidates from the hand and picks the lowest `score`; with
    /// `decay`, a sampled record that stays loses one from its LFU counter one time in eight.
    fn sampled_victim(
        &mut self,
        keep: Option<usize>,
        volatile: bool,
        decay: bool,
        score: impl Fn(ItemPtr) -> u64,
    ) -> Option<usize> {
        let cap = self.table.capacity();
        let mut best: Option<(u64, usize)> = None;
        let mut sampled = Vec::with_capacity(SAMPLES);
        for _ in 0..cap {
            let i = self.clock_hand % cap;
            self.clock_hand = i + 1;
            if let Some(item) = self.candidate(i, keep, volatile) {
                let s = score(item);
                if best.is_none_or(|(b, _)| s < b) {
                    best = Some((s, i));
                }
                sampled.push(item);
                if sampled.len() == SAMPLES {
                    break;
                }
            }
        }
        let (_, victim) = best?;
        if decay {
            let chosen = self.table.item_at(victim);
            for item in sampled.into_iter().filter(|&item| Some(item) != chosen) {
                let counter = item.reference();
                if counter > 0 && random_u64().is_multiple_of(DECAY_ONE_IN) {
                    item.set_reference(counter - 1);
                }
            }
        }
        Some(victim)
    }

    /// The first candidate from a random slot.
    fn random_victim(&mut self, keep: Option<usize>, volatile: bool) -> Option<usize> {
        let cap = self.table.capacity();
        let start = random_u64() as usize % cap;
        (0..cap)
            .map(|k| (start + k) % cap)
            .find(|&i| self.candidate(i, keep, volatile).is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Kind, StoreConfig};

    #[test]
    fn names_round_trip_and_parse_case_insensitively() {
        for p in EvictionPolicy::ALL {
            assert_eq!(EvictionPolicy::from_name(p.name()), Some(p));
            assert_eq!(EvictionPolicy::from_u8(p as u8), p);
        }
        assert_eq!(
            EvictionPolicy::from_name("VOLATILE-TTL"),
            Some(EvictionPolicy::VolatileTtl)
        );
        assert_eq!(EvictionPolicy::from_name("evict"), None);
        assert!(
            EvictionPolicy::VolatileLfu.is_lfu() && EvictionPolicy::VolatileLfu.volatile_only()
        );
        assert!(!EvictionPolicy::AllKeysLru.is_lfu() && !EvictionPolicy::NoEviction.evicts());
    }

    /// The counter grows logarithmically, as Redis's table for lfu-log-factor 10 shows
    /// (100 hits: about 10, 1000 hits: about 18), and saturates at 255.
    #[test]
    fn lfu_counter_grows_logarithmically() {
        // A fixed pseudo-random sequence (xorshift64, fixed seed): the figures are exact, so
        // the test cannot flake; the bounds still allow any fair sequence's spread.
        let run = |hits: usize| {
            let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
            let mut c = LFU_INIT;
            for _ in 0..hits {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let chance = (x >> 11) as f64 / (1u64 << 53) as f64;
                c = lfu_increment(c, chance);
            }
            c
        };
        let after_100 = run(100);
        let after_1000 = run(1000);
        let after_100k = run(100_000);
        assert!((7..=14).contains(&after_100), "{after_100}");
        assert!((12..=24).contains(&after_1000), "{after_1000}");
        assert!(after_100k > after_1000 && after_100k < 200, "{after_100k}");
        assert_eq!(lfu_increment(255, 0.0), 255);
        // The first access past the initial value always counts; later ones rarely.
        assert_eq!(lfu_increment(LFU_INIT, 0.99), LFU_INIT + 1);
        assert_eq!(lfu_increment(LFU_INIT + 10, 0.5), LFU_INIT + 10);
    }

    fn store(policy: EvictionPolicy, maxmemory: u64) -> std::sync::Arc<Store> {
        Store::new(StoreConfig {
            shards: 1,
            maxmemory,
            policy,
            background: false,
            ..StoreConfig::default()
        })
    }

    fn put(s: &Store, key: &str, ttl: Option<u64>) -> bool {
        let deadline = ttl.map(|t| crate::now_ms() + t);
        s.write(Author::SERVER, key.as_bytes(), |e| {
            e.put(Kind::String, &[b'v'; 100], deadline, 0).is_ok()
        })
    }

    fn exists(s: &Store, key: &str) -> bool {
        s.read(key.as_bytes(), |i| i.is_some())
    }

    #[test]
    fn volatile_policies_evict_only_records_with_a_deadline_then_refuse() {
        for policy in [
            EvictionPolicy::VolatileLru,
            EvictionPolicy::VolatileLfu,
            EvictionPolicy::VolatileRandom,
            EvictionPolicy::VolatileTtl,
        ] {
            let s = store(policy, 64 * 1024);
            for i in 0..100 {
                assert!(put(&s, &format!("keep{i}"), None));
                assert!(put(&s, &format!("ttl{i}"), Some(3_600_000)));
            }
            // Fill up: only records with a deadline go, then writes fail with OOM.
            let mut refused = false;
            for i in 0..2000 {
                if !put(&s, &format!("more{i}"), None) {
                    refused = true;
                    break;
                }
            }
            assert!(refused, "{policy:?}: writes were never refused");
            assert!(
                (0..100).all(|i| exists(&s, &format!("keep{i}"))),
                "{policy:?} evicted a record without a deadline"
            );
            assert!(
                (0..100).all(|i| !exists(&s, &format!("ttl{i}"))),
                "{policy:?}: records with a deadline are left while writes fail"
            );
            assert!(s.stats().evicted >= 100);
        }
    }

    /// The tables count their records with a deadline (volatile-* skip a shard without any,
    /// INFO keyspace's `expires`) through every way a deadline comes and goes.
    #[test]
    fn records_with_a_deadline_are_counted() {
        let s = Store::new(StoreConfig {
            shards: 2,
            background: false,
            ..StoreConfig::default()
        });
        let counted = || s.stats().keys_with_expiry;
        for i in 0..100 {
            put(&s, &format!("ttl{i}"), Some(60_000));
            put(&s, &format!("keep{i}"), None);
        }
        assert_eq!(counted(), 100);
        for i in 0..10 {
            s.write(Author::SERVER, format!("ttl{i}").as_bytes(), |e| {
                e.set_expire(None)
            });
            s.write(Author::SERVER, format!("keep{i}").as_bytes(), |e| {
                e.set_expire(Some(crate::now_ms() + 60_000))
            });
            s.write(Author::SERVER, format!("ttl{}", 50 + i).as_bytes(), |e| {
                e.remove()
            });
            put(&s, &format!("ttl{}", 80 + i), None);
        }
        // 100 - 10 persisted + 10 gained - 10 removed - 10 overwritten without one
        assert_eq!(counted(), 80);
        s.flush();
        assert_eq!(counted(), 0);
    }

    #[test]
    fn volatile_ttl_evicts_the_nearest_deadlines_first() {
        let s = store(EvictionPolicy::VolatileTtl, 64 * 1024);
        for i in 0..200 {
            // Deadlines from 1 h to 200 h: the early ones must go first.
            assert!(put(&s, &format!("k{i}"), Some(3_600_000 * (i + 1))));
        }
        let mut i = 0;
        while s.stats().evicted < 100 {
            assert!(put(&s, &format!("new{i}"), Some(1_000_000_000)));
            i += 1;
        }
        let early_left = (0..40).filter(|i| exists(&s, &format!("k{i}"))).count();
        let late_left = (160..200).filter(|i| exists(&s, &format!("k{i}"))).count();
        // Sampled, so approximate: over 200 runs at most 5 early ones stayed and at least 33
        // late ones did (the hash seed is random per store); evicting at random would leave
        // about 27 of each.
        assert!(
            early_left <= 8,
            "{early_left} of the 40 nearest deadlines left"
        );
        assert!(
            late_left >= 28,
            "{late_left} of the 40 latest deadlines left"
        );
    }

    #[test]
    fn allkeys_lfu_keeps_the_frequently_read_records() {
        let s = store(EvictionPolicy::AllKeysLfu, 64 * 1024);
        for i in 0..200 {
            assert!(put(&s, &format!("k{i}"), None));
        }
        // Every tenth record is read often.
        for _ in 0..50 {
            for i in (0..200).step_by(10) {
                assert!(exists(&s, &format!("k{i}")));
            }
        }
        let hot = s.read(b"k0", |i| i.map(|i| i.frequency()));
        assert!(hot.unwrap() > LFU_INIT, "hot counter {hot:?}");
        // Cold records stream in while the hot ones keep being read.
        for round in 0..10 {
            for i in 0..100 {
                assert!(put(&s, &format!("cold{round}.{i}"), None));
            }
            for i in (0..200).step_by(10) {
                s.read(format!("k{i}").as_bytes(), |_| ());
            }
        }
        assert!(s.stats().evicted > 500);
        let hot_left = (0..200)
            .step_by(10)
            .filter(|i| s.peek(format!("k{i}").as_bytes(), |i| i.is_some()))
            .count();
        assert!(hot_left >= 18, "only {hot_left} of 20 hot records left");
    }

    #[test]
    fn allkeys_random_evicts_and_noeviction_refuses() {
        let s = store(EvictionPolicy::AllKeysRandom, 64 * 1024);
        for i in 0..2000 {
            assert!(put(&s, &format!("k{i}"), None));
        }
        assert!(s.stats().evicted > 1000);
        s.set_policy(EvictionPolicy::NoEviction);
        let refused = (0..2000).any(|i| !put(&s, &format!("x{i}"), None));
        assert!(refused);
    }
}
