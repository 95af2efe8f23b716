//! Sorted sets: members ordered by (score, member bytes), in one of two forms.
//!
//! A small set (at most [`PACKED_ENTRIES`] members of at most [`PACKED_VALUE`] bytes each) is
//! one vector of (score, member) kept sorted: each member is stored once, lookups by member
//! scan it and lookups by score or rank search it, which at this size costs less than the
//! hashing and tree walks of the large form and a fraction of its memory (Redis's listpack
//! plays the same part). Past either limit the set converts, once and for good, to a hash map
//! member -> score beside an ordered tree of (score, member). Both forms behave identically;
//! only their cost differs.

use std::collections::{BTreeSet, HashMap};
use std::ops::Bound;

use crate::collection::element_cost;

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
    /// Sorted by (score, member); every member is at most `PACKED_VALUE` bytes.
    Packed(Vec<(Score, Box<[u8]>)>),
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
            form: Form::Packed(Vec::new()),
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

/// Where (score, member) goes in a packed vector.
fn packed_slot(v: &[(Score, Box<[u8]>)], score: Score, member: &[u8]) -> usize {
    v.partition_point(|(s, m)| (*s, &**m) < (score, member))
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
            Form::Packed(v) => v.iter().find(|(_, m)| **m == *member).map(|(s, _)| s.0),
            Form::Tree(t) => t.scores.get(member).copied(),
        }
    }
    /// Sets `member`'s score; returns the score it had.
    pub fn insert(&mut self, member: &[u8], score: f64) -> Option<f64> {
        debug_assert!(!score.is_nan());
        let score = if score == 0.0 { 0.0 } else { score };
        if let Form::Packed(v) = &mut self.form {
            if let Some(at) = v.iter().position(|(_, m)| **m == *member) {
                let previous = v[at].0 .0;
                if previous != score {
                    let (_, kept) = v.remove(at);
                    let slot = packed_slot(v, Score(score), member);
                    v.insert(slot, (Score(score), kept));
                }
                return Some(previous);
            }
            if v.len() < PACKED_ENTRIES && member.len() <= PACKED_VALUE {
                self.heap += element_cost(member.len());
                if v.len() == v.capacity() {
                    // Grow by a quarter, not double: the small form is there to save memory,
                    // and an insert moves up to PACKED_ENTRIES slots anyway.
                    v.reserve_exact((v.len() / 4).max(1));
                }
                let slot = packed_slot(v, Score(score), member);
                v.insert(slot, (Score(score), member.into()));
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
        let Form::Packed(v) = &mut self.form else {
            return;
        };
        let packed = std::mem::take(v);
        let mut scores = HashMap::with_capacity_and_hasher(packed.len() + 1, Hasher::default());
        for (s, m) in &packed {
            scores.insert(m.clone(), s.0);
        }
        let order = packed.into_iter().collect();
        self.form = Form::Tree(Box::new(Tree { scores, order }));
    }
    /// Removes `member`; returns its score.
    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        let score = match &mut self.form {
            Form::Packed(v) => {
                let at = v.iter().position(|(_, m)| **m == *member)?;
                v.remove(at).0 .0
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
        if let Form::Packed(v) = &mut self.form {
            let count = count.min(v.len());
            let taken: Vec<(Score, Box<[u8]>)> = if max {
                v.drain(v.len() - count..).rev().collect()
            } else {
                v.drain(..count).collect()
            };
            return taken
                .into_iter()
                .map(|(s, m)| {
                    self.heap -= element_cost(m.len());
                    (m.into_vec(), s.0)
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
            Form::Packed(v) => Either::Packed(v.iter().map(entry)),
            Form::Tree(t) => Either::Tree(t.order.iter().map(entry)),
        }
    }
    /// Members from the first whose score is >= `min` on (O(log n) to the start).
    pub fn from_score(&self, min: f64) -> impl Iterator<Item = (&[u8], f64)> {
        match &self.form {
            Form::Packed(v) => {
                let start = v.partition_point(|(s, _)| *s < Score(min));
                Either::Packed(v[start..].iter().map(entry))
            }
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
            Form::Packed(v) => {
                let end = if max == f64::INFINITY {
                    v.len()
                } else {
                    v.partition_point(|(s, _)| *s < Score(max.next_up()))
                };
                Either::Packed(v[..end].iter().rev().map(entry))
            }
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
            Form::Packed(v) => v.iter().position(|(_, m)| **m == *member),
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
            // A slot: the score (8) and the member's box (16).
            Form::Packed(v) => v.capacity() * 24 + self.heap,
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
