//! Lists: one packed buffer while small, a ring buffer of boxed elements past that.
//!
//! The forms and the moments they change follow Redis 7.4's listpack and quicklist with the
//! default `list-max-listpack-size -2` (the store does not see the server's settings): the
//! list keeps a running count of the bytes Redis's listpack would take for it
//! ([`listpack_entry_bytes`]); a push converts the packed form when those bytes plus the raw
//! bytes being added pass [`PACKED_BYTES`], and a removal converts back once they are at most
//! half of it, so that alternating pushes and pops at the limit cannot convert on every write.
//! Each conversion is O(size) once; no write in the large form is. Both forms behave alike.

use std::collections::VecDeque;

use crate::collection::element_cost;
use crate::intset::canonical_int;
use crate::packed::Packed;

/// The most bytes a packed list's listpack may take (Redis's 8 KiB node for fill -2).
pub const PACKED_BYTES: usize = 8192;
/// A packed list converts whatever a caller does once it passes this (a bound on the buffer
/// when a caller pushes many elements one at a time).
const HARD_BYTES: usize = 4 * PACKED_BYTES;
/// An empty listpack's bytes: its header (6) and end mark (1).
pub const LISTPACK_EMPTY: usize = 7;

/// Bytes one element takes in a Redis listpack: its encoding (an integer packed small, a
/// string with a 1, 2 or 5 byte header) and the back-length of that.
pub fn listpack_entry_bytes(e: &[u8]) -> usize {
    let encoded = match canonical_int(e) {
        Some(v) if (0..=127).contains(&v) => 1,
        Some(v) if (-4096..4096).contains(&v) => 2,
        Some(v) if (-32768..32768).contains(&v) => 3,
        Some(v) if (-(1 << 23)..(1 << 23)).contains(&v) => 4,
        Some(v) if (i64::from(i32::MIN)..=i64::from(i32::MAX)).contains(&v) => 5,
        Some(_) => 9,
        None if e.len() < 64 => 1 + e.len(),
        None if e.len() < 4096 => 2 + e.len(),
        None => 5 + e.len(),
    };
    let back = match encoded {
        0..=127 => 1,
        128..=16383 => 2,
        16384..=2097151 => 3,
        2097152..=268435455 => 4,
        _ => 5,
    };
    encoded + back
}

/// The large form: each element boxed, O(1) push and pop at both ends.
#[derive(Default)]
struct Deque {
    items: VecDeque<Box<[u8]>>,
    /// Heap bytes of the elements themselves.
    heap: usize,
}

enum Form {
    Packed(Packed),
    Deque(Box<Deque>),
}

/// A list of byte strings.
pub struct List {
    form: Form,
    /// Bytes Redis's listpack would take for these elements (its header included).
    listpack: usize,
}

impl Default for List {
    fn default() -> List {
        List {
            form: Form::Packed(Packed::default()),
            listpack: LISTPACK_EMPTY,
        }
    }
}

/// One of two walks (the forms'), itself a walk.
enum Walk<A, B> {
    Packed(A),
    Deque(B),
}

impl<'a, A, B> Iterator for Walk<A, B>
where
    A: Iterator<Item = &'a [u8]>,
    B: Iterator<Item = &'a [u8]>,
{
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        match self {
            Walk::Packed(a) => a.next(),
            Walk::Deque(b) => b.next(),
        }
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            Walk::Packed(a) => a.size_hint(),
            Walk::Deque(b) => b.size_hint(),
        }
    }
}

impl<'a, A, B> DoubleEndedIterator for Walk<A, B>
where
    A: DoubleEndedIterator<Item = &'a [u8]>,
    B: DoubleEndedIterator<Item = &'a [u8]>,
{
    fn next_back(&mut self) -> Option<&'a [u8]> {
        match self {
            Walk::Packed(a) => a.next_back(),
            Walk::Deque(b) => b.next_back(),
        }
    }
}

impl<'a, A, B> ExactSizeIterator for Walk<A, B>
where
    A: ExactSizeIterator<Item = &'a [u8]>,
    B: ExactSizeIterator<Item = &'a [u8]>,
{
}

impl List {
    pub fn new() -> List {
        List::default()
    }
    pub fn len(&self) -> usize {
        match &self.form {
            Form::Packed(p) => p.len(),
            Form::Deque(d) => d.items.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Whether the list is in its small form (OBJECT ENCODING's `listpack`; else `quicklist`).
    pub fn is_packed(&self) -> bool {
        matches!(self.form, Form::Packed(_))
    }
    pub fn get(&self, index: usize) -> Option<&[u8]> {
        match &self.form {
            Form::Packed(p) => p.get(index),
            Form::Deque(d) => d.items.get(index).map(|v| &**v),
        }
    }
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &[u8]> + ExactSizeIterator {
        match &self.form {
            Form::Packed(p) => Walk::Packed(p.iter()),
            Form::Deque(d) => Walk::Deque(d.items.iter().map(|v| &**v)),
        }
    }
    /// Before adding `count` elements of `bytes` raw bytes in all: converts the packed form
    /// when they would take it past its limit (Redis's check, on the raw lengths).
    fn grow(&mut self, bytes: usize, count: usize) {
        let Form::Packed(p) = &mut self.form else {
            return;
        };
        if self.listpack + bytes <= PACKED_BYTES || count == 0 {
            return;
        }
        let mut items = VecDeque::with_capacity(p.len() + count);
        let mut heap = 0;
        for v in p.iter() {
            heap += element_cost(v.len());
            items.push_back(v.into());
        }
        self.form = Form::Deque(Box::new(Deque { items, heap }));
    }
    /// After a removal: converts back to the packed form once at most half its limit.
    fn shrunk(&mut self) {
        let Form::Deque(d) = &mut self.form else {
            return;
        };
        if self.listpack > PACKED_BYTES / 2 {
            if d.items.capacity() > 64 && d.items.len() < d.items.capacity() / 4 {
                d.items.shrink_to_fit();
            }
            return;
        }
        let mut p = Packed::default();
        for v in &d.items {
            p.push_back(v);
        }
        self.form = Form::Packed(p);
    }
    /// Pushes `values` in order at the front (each becoming the new head) or the back, the
    /// form chosen once for them all as Redis does for one LPUSH or RPUSH.
    pub fn push_all(&mut self, front: bool, values: &[&[u8]]) {
        self.grow(values.iter().map(|v| v.len()).sum(), values.len());
        for v in values {
            self.push(front, v);
        }
    }
    pub fn push_front(&mut self, value: &[u8]) {
        self.grow(value.len(), 1);
        self.push(true, value);
    }
    pub fn push_back(&mut self, value: &[u8]) {
        self.grow(value.len(), 1);
        self.push(false, value);
    }
    fn push(&mut self, front: bool, value: &[u8]) {
        if self.listpack > HARD_BYTES {
            self.grow(usize::MAX / 2, 1);
        }
        self.listpack += listpack_entry_bytes(value);
        match &mut self.form {
            Form::Packed(p) if front => p.push_front(value),
            Form::Packed(p) => p.push_back(value),
            Form::Deque(d) => {
                d.heap += element_cost(value.len());
                if front {
                    d.items.push_front(value.into())
                } else {
                    d.items.push_back(value.into())
                }
            }
        }
    }
    /// Accounts for an element that left.
    fn left(&mut self, v: &[u8]) {
        self.listpack -= listpack_entry_bytes(v);
        if let Form::Deque(d) = &mut self.form {
            d.heap -= element_cost(v.len());
        }
    }
    pub fn pop_front(&mut self) -> Option<Box<[u8]>> {
        let v = match &mut self.form {
            Form::Packed(p) => p.pop_front(),
            Form::Deque(d) => d.items.pop_front(),
        }?;
        self.left(&v);
        self.shrunk();
        Some(v)
    }
    pub fn pop_back(&mut self) -> Option<Box<[u8]>> {
        let v = match &mut self.form {
            Form::Packed(p) => p.pop_back(),
            Form::Deque(d) => d.items.pop_back(),
        }?;
        self.left(&v);
        self.shrunk();
        Some(v)
    }
    /// Replaces the element at `index`; false when out of range.
    pub fn set(&mut self, index: usize, value: &[u8]) -> bool {
        if index >= self.len() {
            return false;
        }
        self.grow(value.len(), 1);
        let old = match &mut self.form {
            Form::Packed(p) => {
                let old = p.get(index).map(listpack_entry_bytes).unwrap_or(0);
                p.set(index, value);
                old
            }
            Form::Deque(d) => {
                let slot = &mut d.items[index];
                d.heap = d.heap - element_cost(slot.len()) + element_cost(value.len());
                let old = listpack_entry_bytes(slot);
                *slot = value.into();
                old
            }
        };
        self.listpack = self.listpack - old + listpack_entry_bytes(value);
        self.shrunk();
        true
    }
    /// Inserts `value` before the element at `index` (LINSERT).
    pub fn insert(&mut self, index: usize, value: &[u8]) {
        self.grow(value.len(), 1);
        self.listpack += listpack_entry_bytes(value);
        match &mut self.form {
            Form::Packed(p) => p.insert(index, value),
            Form::Deque(d) => {
                d.heap += element_cost(value.len());
                d.items.insert(index, value.into());
            }
        }
    }
    pub fn remove(&mut self, index: usize) -> Option<Box<[u8]>> {
        let v = match &mut self.form {
            Form::Packed(p) => p.remove(index),
            Form::Deque(d) => d.items.remove(index),
        }?;
        self.left(&v);
        self.shrunk();
        Some(v)
    }
    /// Keeps only the elements in `start..end`.
    pub fn keep_range(&mut self, start: usize, end: usize) {
        let end = end.min(self.len());
        let start = start.min(end);
        let gone: usize = self
            .iter()
            .enumerate()
            .filter(|(i, _)| *i < start || *i >= end)
            .map(|(_, v)| listpack_entry_bytes(v))
            .sum();
        self.listpack -= gone;
        match &mut self.form {
            Form::Packed(p) => p.keep_range(start, end),
            Form::Deque(d) => {
                let mut freed = 0;
                for v in d.items.drain(end..) {
                    freed += element_cost(v.len());
                }
                for v in d.items.drain(..start) {
                    freed += element_cost(v.len());
                }
                d.heap -= freed;
            }
        }
        self.shrunk();
    }
    /// Keeps the elements for which `keep` says true, in order; returns how many went.
    pub fn retain(&mut self, mut keep: impl FnMut(usize, &[u8]) -> bool) -> usize {
        let mut gone_bytes = 0;
        let gone = match &mut self.form {
            Form::Packed(p) => p.retain(|i, v| {
                let kept = keep(i, v);
                if !kept {
                    gone_bytes += listpack_entry_bytes(v);
                }
                kept
            }),
            Form::Deque(d) => {
                let before = d.items.len();
                let mut index = 0;
                let mut freed = 0;
                d.items.retain(|v| {
                    let kept = keep(index, v);
                    index += 1;
                    if !kept {
                        freed += element_cost(v.len());
                        gone_bytes += listpack_entry_bytes(v);
                    }
                    kept
                });
                d.heap -= freed;
                before - d.items.len()
            }
        };
        self.listpack -= gone_bytes;
        self.shrunk();
        gone
    }
    pub(crate) fn memory(&self) -> usize {
        match &self.form {
            Form::Packed(p) => p.memory(),
            Form::Deque(d) => std::mem::size_of::<Deque>() + d.items.capacity() * 16 + d.heap,
        }
    }
}

#[cfg(test)]
#[path = "list_tests.rs"]
mod tests;
