//! Sorted sets: members ordered by (score, member bytes), in one of two forms.
//!
//! A small set (at most [`PACKED_ENTRIES`] members of at most [`PACKED_VALUE`] bytes each) is
//! one packed buffer (`packed`) of entries sorted by (score, member), each its score's 8 bytes
//! then the member: lookups scan it, which at this size costs less than the hashing and tree
//! walks of the large form and a fraction of its memory (Redis's listpack plays the same
//! part). Past either limit the set converts, once and for good, to a hash map
//! member -> score beside an ordered tree of (score, member). Both forms behave identically;
//! only their cost differs.

use std::collections::{BTreeSet, HashMap};
use std::ops::Bound;

use crate::collection::element_cost;
use crate::packed::Packed;

type Hasher = ahash::RandomState;

/// The most members a packed set holds (Redis's `zset-max-listpack-entries` default). The
/// store does not see the server's settings, so the defaults are fixed here.
pub const PACKED_ENTRIES: usize = 128;
/// The longest member a packed set holds (`zset-max-listpack-value`'s default).
pub const PACKED_VALUE: usize = 64;

/// A score with the total order sorted sets use (no NaN is ever stored; -0 is stored as 0).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Score(pub f64);

impl Eq for Score {}
impl PartialOrd for Score {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Score {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

enum Form {
    /// Entries (score's 8 bytes, then the member) sorted by (score, member); every member is
    /// at most `PACKED_VALUE` bytes.
    Packed(Packed),
    /// Boxed, so that every collection is not as large as this form's two tables.
    Tree(Box<Tree>),
}

struct Tree {
    scores: HashMap<Box<[u8]>, f64, Hasher>,
    order: BTreeSet<(Score, Box<[u8]>)>,
}

/// A sorted set: members ordered by (score, member bytes).
pub struct ZSet {
    form: Form,
    /// Heap bytes of one copy of the members (the tree form keeps two).
    heap: usize,
}

impl Default for ZSet {
    fn default() -> ZSet {
        ZSet {
            form: Form::Packed(Packed::default()),
            heap: 0,
        }
    }
}

/// One of two iterators (the two forms' walks), itself an iterator.
enum Either<A, B> {
    Packed(A),
    Tree(B),
}

impl<T, A: Iterator<Item = T>, B: Iterator<Item = T>> Iterator for Either<A, B> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        match self {
            Either::Packed(a) => a.next(),
            Either::Tree(b) => b.next(),
        }
    }
}

impl<T, A: DoubleEndedIterator<Item = T>, B: DoubleEndedIterator<Item = T>> DoubleEndedIterator
    for Either<A, B>
{
    fn next_back(&mut self) -> Option<T> {
        match self {
            Either::Packed(a) => a.next_back(),
            Either::Tree(b) => b.next_back(),
        }
    }
}

fn entry((s, m): &(Score, Box<[u8]>)) -> (&[u8], f64) {
    (m, s.0)
}

/// A packed entry as (member, score).
fn unpack_entry(e: &[u8]) -> (&[u8], f64) {
    let (score, member) = e.split_at(8);
    (
        member,
        f64::from_le_bytes(score.try_into().expect("8 bytes")),
    )
}

fn pack_entry(score: f64, member: &[u8]) -> Vec<u8> {
    let mut e = Vec::with_capacity(8 + member.len());
    e.extend_from_slice(&score.to_le_bytes());
    e.extend_from_slice(member);
    e
}

/// Where (score, member) goes in a packed set.
fn packed_slot(p: &Packed, score: Score, member: &[u8]) -> usize {
    p.iter()
        .map(unpack_entry)
        .take_while(|&(m, s)| (Score(s), m) < (score, member))
        .count()
}

/// The index and score of `member` in a packed set.
fn packed_find(p: &Packed, member: &[u8]) -> Option<(usize, f64)> {
    p.iter()
        .map(unpack_entry)
        .enumerate()
        .find(|(_, (m, _))| *m == member)
        .map(|(i, (_, s))| (i, s))
}

impl ZSet {
    pub fn new() -> ZSet {
        ZSet::default()
    }
    pub fn len(&self) -> usize {
        match &self.form {
            Form::Packed(v) => v.len(),
            Form::Tree(t) => t.scores.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Whether the set is in its small form (OBJECT ENCODING's `listpack`).
    pub fn is_packed(&self) -> bool {
        matches!(self.form, Form::Packed(_))
    }
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        match &self.form {
            Form::Packed(p) => packed_find(p, member).map(|(_, s)| s),
            Form::Tree(t) => t.scores.get(member).copied(),
        }
    }
    /// Sets `member`'s score; returns the score it had.
    pub fn insert(&mut self, member: &[u8], score: f64) -> Option<f64> {
        debug_assert!(!score.is_nan());
        let score = if score == 0.0 { 0.0 } else { score };
        if let Form::Packed(p) = &mut self.form {
            if let Some((at, previous)) = packed_find(p, member) {
                if previous != score {
                    p.remove(at);
                    let slot = packed_slot(p, Score(score), member);
                    p.insert(slot, &pack_entry(score, member));
                }
                return Some(previous);
            }
            if p.len() < PACKED_ENTRIES && member.len() <= PACKED_VALUE {
                self.heap += element_cost(member.len());
                let slot = packed_slot(p, Score(score), member);
                p.insert(slot, &pack_entry(score, member));
                return None;
            }
            self.unpack();
        }
        let Form::Tree(tree) = &mut self.form else {
            unreachable!("unpacked above")
        };
        let Tree { scores, order } = &mut **tree;
        match scores.get_mut(member) {
            Some(old) => {
                let previous = *old;
                if previous != score {
                    *old = score;
                    let key = (Score(previous), Box::<[u8]>::from(member));
                    order.remove(&key);
                    order.insert((Score(score), key.1));
                }
                Some(previous)
            }
            None => {
                self.heap += element_cost(member.len());
                scores.insert(member.into(), score);
                order.insert((Score(score), member.into()));
                None
            }
        }
    }
    /// Converts the packed form to the tree form (past a limit; never back, as Redis).
    fn unpack(&mut self) {
        let Form::Packed(p) = &mut self.form else {
            return;
        };
        let mut scores = HashMap::with_capacity_and_hasher(p.len() + 1, Hasher::default());
        let mut order = BTreeSet::new();
        for (m, s) in p.iter().map(unpack_entry) {
            scores.insert(Box::from(m), s);
            order.insert((Score(s), Box::from(m)));
        }
        self.form = Form::Tree(Box::new(Tree { scores, order }));
    }
    /// Removes `member`; returns its score.
    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        let score = match &mut self.form {
            Form::Packed(p) => {
                let (at, score) = packed_find(p, member)?;
                p.remove(at);
                score
            }
            Form::Tree(tree) => {
                let Tree { scores, order } = &mut **tree;
                let score = scores.remove(member)?;
                order.remove(&(Score(score), Box::<[u8]>::from(member)));
                score
            }
        };
        self.heap -= element_cost(member.len());
        Some(score)
    }
    /// Removes up to `count` members from the highest scores down (`max`) or the lowest up;
    /// returns them with their scores in that order (ZPOPMIN/MAX, BZPOP*, ZMPOP).
    pub fn pop_ends(&mut self, max: bool, count: usize) -> Vec<(Vec<u8>, f64)> {
        if let Form::Packed(p) = &mut self.form {
            let count = count.min(p.len());
            let taken: Vec<Box<[u8]>> = (0..count)
                .filter_map(|_| if max { p.pop_back() } else { p.pop_front() })
                .collect();
            return taken
                .iter()
                .map(|e| {
                    let (m, s) = unpack_entry(e);
                    self.heap -= element_cost(m.len());
                    (m.to_vec(), s)
                })
                .collect();
        }
        let picked: Vec<(Vec<u8>, f64)> = if max {
            self.iter()
                .rev()
                .take(count)
                .map(|(m, s)| (m.to_vec(), s))
                .collect()
        } else {
            self.iter()
                .take(count)
                .map(|(m, s)| (m.to_vec(), s))
                .collect()
        };
        for (m, _) in &picked {
            self.remove(m);
        }
        picked
    }
    /// Members in order (lowest score first), with their scores.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&[u8], f64)> {
        match &self.form {
            Form::Packed(p) => Either::Packed(p.iter().map(unpack_entry)),
            Form::Tree(t) => Either::Tree(t.order.iter().map(entry)),
        }
    }
    /// Members from the first whose score is >= `min` on (O(log n) to the start).
    pub fn from_score(&self, min: f64) -> impl Iterator<Item = (&[u8], f64)> {
        match &self.form {
            Form::Packed(p) => Either::Packed(
                p.iter()
                    .map(unpack_entry)
                    .skip_while(move |&(_, s)| Score(s) < Score(min)),
            ),
            Form::Tree(t) => {
                let order = &t.order;
                let start = (Score(min), Box::<[u8]>::from(&[][..]));
                Either::Tree(order.range(start..).map(entry))
            }
        }
    }
    /// Members from the last whose score is <= `max` down (O(log n) to the start).
    pub fn down_from_score(&self, max: f64) -> impl Iterator<Item = (&[u8], f64)> {
        // Everything below (the next score up, no member): every member scored <= max.
        match &self.form {
            Form::Packed(p) => Either::Packed(
                p.iter()
                    .rev()
                    .map(unpack_entry)
                    .skip_while(move |&(_, s)| s > max),
            ),
            Form::Tree(t) => {
                let order = &t.order;
                let end = if max == f64::INFINITY {
                    Bound::Unbounded
                } else {
                    Bound::Excluded((Score(max.next_up()), Box::<[u8]>::from(&[][..])))
                };
                Either::Tree(order.range((Bound::Unbounded, end)).rev().map(entry))
            }
        }
    }
    /// The 0-based position of `member` in score order.
    pub fn rank(&self, member: &[u8]) -> Option<usize> {
        match &self.form {
            Form::Packed(p) => packed_find(p, member).map(|(at, _)| at),
            Form::Tree(t) => {
                let order = &t.order;
                let score = self.score(member)?;
                Some(
                    order
                        .range(..(Score(score), Box::<[u8]>::from(member)))
                        .count(),
                )
            }
        }
    }
    pub(crate) fn memory(&self) -> usize {
        match &self.form {
            // One buffer: the members and their scores, with a few bytes of length each.
            Form::Packed(p) => p.memory(),
            // Hash slot (16 + 8 + control) plus a tree entry (24 + node share); two copies.
            Form::Tree(t) => {
                std::mem::size_of::<Tree>()
                    + t.scores.capacity() * 33
                    + t.order.len() * 40
                    + 2 * self.heap
            }
        }
    }
}

#[cfg(test)]
#[path = "zset_tests.rs"]
mod tests;
