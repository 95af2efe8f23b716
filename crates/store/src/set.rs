//! Sets: a sorted integer array or one packed buffer while small, a hash set past that.
//!
//! The forms and when they change follow Redis 7.4's intset, listpack and hashtable with the
//! default limits (the store does not see the server's settings): a set of integers only
//! (in canonical text) is an [`IntSet`] up to [`INTS_ENTRIES`] members; a member that is not
//! an integer moves it to the packed form if it then fits (at most [`PACKED_ENTRIES`] members
//! of at most [`PACKED_VALUE`] bytes), else to the hash set. Conversions go one way only, as in
//! Redis, so a set that grew past a limit stays a hash set (O(1) add, remove and random member)
//! after it shrinks. In the small forms a lookup is a binary search or a scan of at most
//! [`PACKED_ENTRIES`] members.

use indexmap::IndexSet;

use crate::collection::element_cost;
use crate::intset::{canonical_int, Decimal, IntSet};
use crate::packed::{self, Packed};

type Hasher = ahash::RandomState;

/// Redis's `set-max-intset-entries` default.
pub const INTS_ENTRIES: usize = 512;
/// Redis's `set-max-listpack-entries` default.
pub const PACKED_ENTRIES: usize = 128;
/// Redis's `set-max-listpack-value` default.
pub const PACKED_VALUE: usize = 64;

/// The most members a set has in a small form (where a member's index is found by a scan).
pub const SMALL_SET: usize = INTS_ENTRIES;

/// The large form: insertion-ordered, so that a random index is O(1).
#[derive(Default)]
struct Table {
    members: IndexSet<Box<[u8]>, Hasher>,
    /// Heap bytes of the members themselves.
    heap: usize,
}

enum Form {
    Ints(IntSet),
    Packed(Packed),
    Table(Box<Table>),
}

/// A set of byte strings.
pub struct Set {
    form: Form,
}

impl Default for Set {
    fn default() -> Set {
        Set {
            form: Form::Ints(IntSet::default()),
        }
    }
}

/// A member as the set gives it back: its bytes, or an integer's text made on the way out.
pub enum Member<'a> {
    Bytes(&'a [u8]),
    Int(Decimal),
}

impl std::ops::Deref for Member<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Member::Bytes(b) => b,
            Member::Int(d) => d.as_bytes(),
        }
    }
}

/// The three forms' walks, as one.
enum Walk<'a> {
    Ints(&'a IntSet, std::ops::Range<usize>),
    Packed(packed::Iter<'a>),
    Table(indexmap::set::Iter<'a, Box<[u8]>>),
}

impl<'a> Iterator for Walk<'a> {
    type Item = Member<'a>;
    fn next(&mut self) -> Option<Member<'a>> {
        match self {
            Walk::Ints(s, range) => Some(Member::Int(Decimal::of(s.get(range.next()?)?))),
            Walk::Packed(p) => p.next().map(Member::Bytes),
            Walk::Table(t) => t.next().map(|m| Member::Bytes(m)),
        }
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            Walk::Ints(_, range) => range.size_hint(),
            Walk::Packed(p) => p.size_hint(),
            Walk::Table(t) => t.size_hint(),
        }
    }
}

impl ExactSizeIterator for Walk<'_> {}

impl Set {
    pub fn new() -> Set {
        Set::default()
    }
    pub fn len(&self) -> usize {
        match &self.form {
            Form::Ints(s) => s.len(),
            Form::Packed(p) => p.len(),
            Form::Table(t) => t.members.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The Redis encoding of the set's form: `intset`, `listpack` or `hashtable`.
    pub fn encoding(&self) -> &'static str {
        match &self.form {
            Form::Ints(_) => "intset",
            Form::Packed(_) => "listpack",
            Form::Table(_) => "hashtable",
        }
    }
    pub fn contains(&self, member: &[u8]) -> bool {
        match &self.form {
            Form::Ints(s) => canonical_int(member).is_some_and(|x| s.contains(x)),
            Form::Packed(p) => p.position(member).is_some(),
            Form::Table(t) => t.members.contains(member),
        }
    }
    /// Adds `member`; returns whether it was new.
    pub fn insert(&mut self, member: &[u8]) -> bool {
        match &mut self.form {
            Form::Ints(s) => match canonical_int(member) {
                Some(x) if s.len() < INTS_ENTRIES || s.contains(x) => return s.insert(x),
                Some(_) => self.convert_to_table(),
                None => {
                    // Redis's check: the integers' text as long as the widest of them.
                    let widest = s.bounds().map_or(0, |(lo, hi)| {
                        Decimal::of(lo)
                            .as_bytes()
                            .len()
                            .max(Decimal::of(hi).as_bytes().len())
                    });
                    if s.len() < PACKED_ENTRIES
                        && member.len() <= PACKED_VALUE
                        && widest <= PACKED_VALUE
                    {
                        self.convert_to_packed();
                    } else {
                        self.convert_to_table();
                    }
                }
            },
            Form::Packed(p) => {
                if p.position(member).is_some() {
                    return false;
                }
                if p.len() < PACKED_ENTRIES && member.len() <= PACKED_VALUE {
                    p.push_back(member);
                    return true;
                }
                self.convert_to_table();
            }
            Form::Table(_) => {}
        }
        match &mut self.form {
            Form::Packed(p) => {
                p.push_back(member);
                true
            }
            Form::Table(t) => {
                if t.members.contains(member) {
                    return false;
                }
                t.heap += element_cost(member.len());
                t.members.insert(member.into())
            }
            Form::Ints(_) => unreachable!("converted above"),
        }
    }
    /// Before adding `count` members, the first of them `first` (SADD): picks the form for
    /// that many as Redis does, by the count alone: an empty set starts as integers if `first`
    /// is one and they fit, else packed if they fit, else a hash set; a set in a small form
    /// that `count` members would overflow becomes a hash set now.
    pub fn expect(&mut self, count: usize, first: &[u8]) {
        let empty = self.is_empty();
        match &self.form {
            _ if empty => {
                self.form = if canonical_int(first).is_some() && count <= INTS_ENTRIES {
                    Form::Ints(IntSet::default())
                } else if count <= PACKED_ENTRIES {
                    Form::Packed(Packed::default())
                } else {
                    Form::Table(Box::default())
                }
            }
            Form::Ints(_) if count > INTS_ENTRIES => self.convert_to_table(),
            Form::Packed(_) if count > PACKED_ENTRIES => self.convert_to_table(),
            _ => {}
        }
    }
    /// After SPOP took most of a hash set: the members left are put in a fresh set, built up
    /// from the packed form (Redis's SPOP with a count near the size does this).
    pub fn rebuild_small(&mut self) {
        if let Form::Table(t) = &self.form {
            let mut fresh = Set {
                form: Form::Packed(Packed::default()),
            };
            t.members.iter().for_each(|m| {
                fresh.insert(m);
            });
            *self = fresh;
        }
    }
    fn convert_to_packed(&mut self) {
        let mut p = Packed::default();
        self.iter().for_each(|m| p.push_back(&m));
        self.form = Form::Packed(p);
    }
    fn convert_to_table(&mut self) {
        let mut t = Table::default();
        t.members.reserve(self.len() + 1);
        for m in self.iter() {
            t.heap += element_cost(m.len());
            t.members.insert((*m).into());
        }
        self.form = Form::Table(Box::new(t));
    }
    /// Removes `member`; returns whether it was there. O(1) in the large form: the last
    /// member takes its place.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        match &mut self.form {
            Form::Ints(s) => canonical_int(member).is_some_and(|x| s.remove(x)),
            Form::Packed(p) => p.position(member).and_then(|at| p.remove(at)).is_some(),
            Form::Table(t) => {
                let removed = t.members.swap_remove(member);
                if removed {
                    t.heap -= element_cost(member.len());
                }
                removed
            }
        }
    }
    /// The member at `index` (0..len) in the set's internal order (for random picks).
    pub fn get_index(&self, index: usize) -> Option<Member<'_>> {
        match &self.form {
            Form::Ints(s) => s.get(index).map(|x| Member::Int(Decimal::of(x))),
            Form::Packed(p) => p.get(index).map(Member::Bytes),
            Form::Table(t) => t.members.get_index(index).map(|m| Member::Bytes(m)),
        }
    }
    /// Removes and returns the member at `index`.
    pub fn take_index(&mut self, index: usize) -> Option<Box<[u8]>> {
        match &mut self.form {
            Form::Ints(s) => s.take(index).map(|x| Decimal::of(x).as_bytes().into()),
            Form::Packed(p) => p.remove(index),
            Form::Table(t) => {
                let member = t.members.swap_remove_index(index)?;
                t.heap -= element_cost(member.len());
                Some(member)
            }
        }
    }
    /// The members in the set's internal order (ascending for a set of integers).
    pub fn iter(&self) -> impl ExactSizeIterator<Item = Member<'_>> {
        match &self.form {
            Form::Ints(s) => Walk::Ints(s, 0..s.len()),
            Form::Packed(p) => Walk::Packed(p.iter()),
            Form::Table(t) => Walk::Table(t.members.iter()),
        }
    }
    pub(crate) fn memory(&self) -> usize {
        match &self.form {
            Form::Ints(s) => s.memory(),
            Form::Packed(p) => p.memory(),
            // A slot of the index (16-byte box + 8-byte hash) and of the hash table (8 +
            // control).
            Form::Table(t) => std::mem::size_of::<Table>() + t.members.capacity() * 33 + t.heap,
        }
    }
}

#[cfg(test)]
#[path = "set_tests.rs"]
mod tests;
