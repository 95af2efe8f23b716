//! Typed numeric tags: the index from (type, value) to records, and group queries over it.
//!
//! A tag is (type: u32, value: i64); a record carries its tags inside its allocation. The index
//! keeps, per type, an ordered set of (value, record reference), so "all of a type", "= v" and
//! every range are one ordered range scan; AND intersects the per-predicate results. A reference
//! is the record's 32-bit reference in its shard's table (`Table::ref_at`, stable while the
//! record is in the table, rebuilds included) with its shard number above it; it is resolved
//! to the record through that table (`Table::record`), under the shard's lock.
//!
//! Invariant: the index holds an entry for a record's tag exactly while the record is in its
//! shard's table. Entries change only under the record's shard exclusive lock (lock order: shard,
//! then type), so a query that holds a shard's lock sees that shard's entries exactly and may
//! dereference them. Queries evaluate once to learn which shards they touch, lock those, and
//! evaluate again: the second answer is exact for the locked shards, and a match in a shard that
//! was not locked was written after the query began.

use std::collections::{BTreeSet, HashMap};
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use parking_lot::RwLock;

/// Bytes charged to the memory limit per index entry (an ordered-set element and its share of
/// tree nodes).
pub(crate) const ENTRY_COST: usize = 32;

/// Records a group delete unlinks under one hold of their shards' locks: the hold stays well
/// under a millisecond (~0.3 µs a record), and the tap hears of each chunk at once.
pub(crate) const CHUNK: usize = 512;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tag {
    pub ty: u32,
    pub value: i64,
}

/// One comparison of a tag query.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Any,
    Eq(i64),
    Lt(i64),
    Le(i64),
    Gt(i64),
    Ge(i64),
    Between(i64, i64),
}

impl Op {
    pub fn matches(self, v: i64) -> bool {
        match self {
            Op::Any => true,
            Op::Eq(x) => v == x,
            Op::Lt(x) => v < x,
            Op::Le(x) => v <= x,
            Op::Gt(x) => v > x,
            Op::Ge(x) => v >= x,
            Op::Between(a, b) => a <= v && v <= b,
        }
    }

    fn bounds(self) -> Range {
        use Bound::*;
        match self {
            Op::Any => (Unbounded, Unbounded),
            Op::Eq(v) => (Included((v, 0)), Included((v, u64::MAX))),
            Op::Lt(v) => (Unbounded, Excluded((v, 0))),
            Op::Le(v) => (Unbounded, Included((v, u64::MAX))),
            Op::Gt(v) => (Excluded((v, u64::MAX)), Unbounded),
            Op::Ge(v) => (Included((v, 0)), Unbounded),
            Op::Between(a, b) => (Included((a, 0)), Included((b, u64::MAX))),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Predicate {
    pub ty: u32,
    pub op: Op,
}

/// Most predicates (AND clauses) one query may have. Each predicate is an ordered range scan
/// of its type, so a query's cost grows with the clause count times the index size; queries
/// needing more clauses than this are refused rather than allowed to run for seconds.
pub const MAX_PREDICATES: usize = 64;

/// Predicates joined by AND.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Query {
    pub predicates: Vec<Predicate>,
}

impl Query {
    /// Whether a record with these tags matches (used to re-check a record in place).
    pub fn matches(&self, tags: impl Iterator<Item = Tag> + Clone) -> bool {
        self.predicates
            .iter()
            .all(|p| tags.clone().any(|t| t.ty == p.ty && p.op.matches(t.value)))
    }
}

pub(crate) const SHARD_SHIFT: u32 = 32;

pub(crate) fn reference(shard: usize, record: u32) -> u64 {
    ((shard as u64) << SHARD_SHIFT) | record as u64
}

pub(crate) fn shard_of_ref(r: u64) -> usize {
    (r >> SHARD_SHIFT) as usize
}

/// The record's reference in its shard's table.
pub(crate) fn record_of_ref(r: u64) -> u32 {
    r as u32
}

type TypeIndex = RwLock<BTreeSet<(i64, u64)>>;
type Range = (Bound<(i64, u64)>, Bound<(i64, u64)>);

pub(crate) struct TagIndex {
    types: RwLock<HashMap<u32, TypeIndex>>,
    entries: AtomicUsize,
    /// Per shard, how many times entries of its records were removed (bumped after the removal,
    /// under the shard's lock). A reference evaluated without the lock is safe to follow under
    /// it while its shard's count is unchanged since before the evaluation: the record has not
    /// been unlinked, so not freed (`Store::tag_delete`).
    removals: Box<[AtomicU64]>,
}

impl TagIndex {
    pub fn new(shards: usize) -> TagIndex {
        TagIndex {
            types: RwLock::default(),
            entries: AtomicUsize::new(0),
            removals: (0..shards).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// How many times entries of `shard`'s records were removed (see `removals`).
    pub fn removals(&self, shard: usize) -> u64 {
        self.removals[shard].load(Ordering::Acquire)
    }

    pub fn len(&self) -> usize {
        self.entries.load(Ordering::Relaxed)
    }

    fn with_type<R>(&self, ty: u32, f: impl FnOnce(&TypeIndex) -> R) -> R {
        if let Some(index) = self.types.read().get(&ty) {
            return f(index);
        }
        let mut types = self.types.write();
        f(types.entry(ty).or_default())
    }

    /// Adds the entries of a record's tags. Returns how many were added.
    pub fn insert(&self, tags: impl Iterator<Item = Tag>, r: u64) -> usize {
        let mut added = 0;
        for tag in tags {
            added += usize::from(self.with_type(tag.ty, |t| t.write().insert((tag.value, r))));
        }
        self.entries.fetch_add(added, Ordering::Relaxed);
        added
    }

    /// Removes the entries of a record's tags. Returns how many were removed.
    pub fn remove(&self, tags: impl Iterator<Item = Tag>, r: u64) -> usize {
        let mut removed = 0;
        let types = self.types.read();
        for tag in tags {
            if let Some(index) = types.get(&tag.ty) {
                removed += usize::from(index.write().remove(&(tag.value, r)));
            }
        }
        self.entries.fetch_sub(removed, Ordering::Relaxed);
        if removed > 0 {
            self.removals[shard_of_ref(r)].fetch_add(1, Ordering::Release);
        }
        removed
    }

    /// Whether `query` may match `n` records or more: every predicate has at least `n` entries.
    /// Costs at most `n` steps per predicate however large the group, so a caller can choose
    /// where to run a group delete before running it.
    pub fn may_match_at_least(&self, query: &Query, n: usize) -> bool {
        let types = self.types.read();
        query.predicates.iter().all(|p| {
            if let Op::Between(a, b) = p.op {
                if a > b {
                    return false;
                }
            }
            types
                .get(&p.ty)
                .is_some_and(|index| index.read().range(p.op.bounds()).take(n).count() >= n)
        })
    }

    /// References of records matching every predicate, sorted and without duplicates.
    pub fn eval(&self, query: &Query) -> Vec<u64> {
        let types = self.types.read();
        let mut predicates = query.predicates.clone();
        // Equalities are usually the narrowest, and can then filter candidates by probing.
        predicates.sort_by_key(|p| match p.op {
            Op::Eq(_) => 0,
            Op::Between(..) => 1,
            Op::Any => 3,
            _ => 2,
        });
        let mut result: Option<Vec<u64>> = None;
        for p in &predicates {
            if let Op::Between(a, b) = p.op {
                if a > b {
                    return Vec::new();
                }
            }
            let Some(index) = types.get(&p.ty) else {
                return Vec::new();
            };
            let index = index.read();
            result = Some(match (result, p.op) {
                (Some(current), Op::Eq(v)) if current.len() * 16 < index.len() => current
                    .into_iter()
                    .filter(|&r| index.contains(&(v, r)))
                    .collect(),
                (current, _) => {
                    let mut refs: Vec<u64> = index.range(p.op.bounds()).map(|&(_, r)| r).collect();
                    refs.sort_unstable();
                    refs.dedup();
                    match current {
                        None => refs,
                        Some(current) => intersect(&current, &refs),
                    }
                }
            });
            if result.as_ref().is_some_and(Vec::is_empty) {
                break;
            }
        }
        result.unwrap_or_default()
    }
}

fn intersect(a: &[u64], b: &[u64]) -> Vec<u64> {
    let (mut i, mut j, mut out) = (0, 0, Vec::with_capacity(a.len().min(b.len())));
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                out.push(a[i]);
                i += 1;
                j += 1;
            }
        }
    }
    out
}

mod access {
    //! Group reads and deletes over the shards a query touches.

    use super::{record_of_ref, shard_of_ref, Query, CHUNK};
    use crate::changes::{Change, ChangeKind, TAP_LISTENER};
    use crate::item::{Item, ItemPtr};
    use crate::shard::Shard;
    use crate::{now_ms, Author, Locked, Store};

    fn live(item: ItemPtr, now: u64) -> bool {
        item.expire_at().is_none_or(|d| d > now)
    }

    fn shards_of(refs: &[u64]) -> Vec<usize> {
        let mut shards: Vec<usize> = refs.iter().map(|&r| shard_of_ref(r)).collect();
        shards.sort_unstable();
        shards.dedup();
        shards
    }

    /// Unlinks the records behind `refs` from their (held) shards; each removal is recorded
    /// (Delete, or Expire for one already past its deadline) and the tap told of them together.
    /// Returns how many were live, and the unlinked records, for the caller to free (after
    /// releasing the locks when it can).
    fn delete_refs(
        store: &Store,
        refs: &[u64],
        held: &mut [(usize, &mut Shard)],
        author: Author,
    ) -> (usize, Vec<ItemPtr>) {
        let now = now_ms();
        let (mut live_count, mut expired, mut freed_total) = (0, 0, 0);
        let mut garbage = Vec::with_capacity(refs.len());
        let listening = store.taps.load(std::sync::atomic::Ordering::Relaxed) & TAP_LISTENER != 0;
        let mut changes: Vec<Change<'_>> = Vec::new();
        for &r in refs {
            let Ok(pos) = held.binary_search_by_key(&shard_of_ref(r), |(i, _)| *i) else {
                continue;
            };
            let shard = &mut *held[pos].1;
            let item = shard.table.record(record_of_ref(r));
            let key = item.key();
            let crate::table::Probe::Found(slot) = shard.table.find(store.hash(key), key) else {
                unreachable!("indexed record missing from its table")
            };
            let why = if live(item, now) {
                live_count += 1;
                ChangeKind::Delete
            } else {
                expired += 1;
                ChangeKind::Expire
            };
            let (item, freed) = shard.unlink_slot(store, slot);
            freed_total += freed;
            garbage.push(item);
            // The key stays readable until the records are freed.
            let change = store.number(&mut shard.log, shard.index, author, item.key(), why);
            if listening {
                changes.push(change);
            }
        }
        store.account(-(freed_total as isize));
        store.tell(&changes);
        store
            .cell(0)
            .expired
            .fetch_add(expired, std::sync::atomic::Ordering::Relaxed);
        (live_count, garbage)
    }

    impl Store {
        pub fn tag_read<R>(
            &self,
            query: &Query,
            f: impl FnOnce(&mut dyn Iterator<Item = Item<'_>>) -> R,
        ) -> R {
            // A group delete in progress finishes first: a group is seen whole or not at all.
            let _groups = self.groups.read_recursive();
            let shards = shards_of(&self.tags.eval(query));
            let guards: Vec<_> = shards
                .iter()
                .map(|&i| (i, self.cell(i).lock.read()))
                .collect();
            let refs = self.tags.eval(query);
            let now = now_ms();
            let mut items = refs
                .into_iter()
                .filter_map(|r| {
                    let pos = guards
                        .binary_search_by_key(&shard_of_ref(r), |(i, _)| *i)
                        .ok()?;
                    Some(guards[pos].1.table.record(record_of_ref(r)))
                })
                .filter(|&i| live(i, now))
                .map(Item::new);
            f(&mut items)
        }

        /// Whether `query` may match `n` records or more (`TagIndex::may_match_at_least`).
        pub fn tag_group_at_least(&self, query: &Query, n: usize) -> bool {
            self.tags.may_match_at_least(query, n)
        }

        /// Removes the records matching `query`, `CHUNK` at a time: each chunk's shards are
        /// locked together, its records unlinked, the locks released (fairly) and the records
        /// freed outside them, so a request waits at most one chunk. Group reads, transactions
        /// and multi-key commands wait for the whole delete (`groups`), so they see the group
        /// whole or gone; a single-key command may run between two chunks. Removes what
        /// matched when it began (and, in a shard whose tagged records changed meanwhile, what
        /// matches when that shard is reached). Returns how many live records went.
        pub fn tag_delete(&self, author: Author, query: &Query) -> usize {
            let _groups = self.groups.write();
            let mut seen: Vec<u64> = (0..self.shard_count())
                .map(|i| self.tags.removals(i))
                .collect();
            let refs = self.tags.eval(query);
            // Shards whose matches were evaluated again under their lock and all deleted.
            let mut redone: Vec<usize> = Vec::new();
            let mut live_total = 0;
            for chunk in refs.chunks(CHUNK) {
                let mut shards = shards_of(chunk);
                shards.retain(|s| !redone.contains(s));
                if shards.is_empty() {
                    continue;
                }
                let mut guards: Vec<_> = shards
                    .iter()
                    .map(|&i| (i, self.cell(i).lock.write()))
                    .collect();
                let mut todo: Vec<u64> = Vec::with_capacity(chunk.len());
                let mut again: Option<Vec<u64>> = None;
                for &s in &shards {
                    let mine = chunk.iter().copied().filter(|&r| shard_of_ref(r) == s);
                    if self.tags.removals(s) == seen[s] {
                        todo.extend(mine);
                    } else {
                        // A record of this shard lost its tags meanwhile: a reference from the
                        // first evaluation may be gone. What matches now, under the lock, is
                        // exact (and deleted whole, so later chunks skip the shard).
                        let now = again.get_or_insert_with(|| self.tags.eval(query));
                        todo.extend(now.iter().copied().filter(|&r| shard_of_ref(r) == s));
                        redone.push(s);
                    }
                }
                let mut held: Vec<(usize, &mut Shard)> =
                    guards.iter_mut().map(|(i, g)| (*i, &mut **g)).collect();
                let (live, dead) = delete_refs(self, &todo, &mut held, author);
                live_total += live;
                // Our own removals: the next chunk's check must not take them for another's.
                for &s in &shards {
                    seen[s] = self.tags.removals(s);
                }
                drop(held);
                for (_, guard) in guards {
                    parking_lot::RwLockWriteGuard::unlock_fair(guard);
                }
                self.free_dead(dead);
            }
            live_total
        }
    }

    impl Locked<'_> {
        /// As `Store::tag_read`; a transaction holds every shard, so one evaluation is exact.
        pub fn tag_read<R>(
            &mut self,
            query: &Query,
            f: impl FnOnce(&mut dyn Iterator<Item = Item<'_>>) -> R,
        ) -> R {
            assert!(self.holds_all(), "tag queries need every shard held");
            let now = now_ms();
            let guards = &self.guards;
            let mut items = self
                .store
                .tags
                .eval(query)
                .into_iter()
                .map(|r| {
                    let pos = guards
                        .binary_search_by_key(&shard_of_ref(r), |(i, _)| *i)
                        .expect("every shard is held");
                    guards[pos].1.table.record(record_of_ref(r))
                })
                .filter(|&i| live(i, now))
                .map(Item::new);
            f(&mut items)
        }

        pub fn tag_delete(&mut self, query: &Query) -> usize {
            assert!(self.holds_all(), "tag queries need every shard held");
            let store = self.store;
            let refs = store.tags.eval(query);
            let mut held: Vec<(usize, &mut Shard)> = self
                .guards
                .iter_mut()
                .map(|(i, g)| (*i, &mut **g))
                .collect();
            let (live, dead) = delete_refs(store, &refs, &mut held, self.author);
            store.free_dead(dead);
            live
        }
    }
}
