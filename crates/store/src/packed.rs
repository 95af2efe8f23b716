//! A small collection's elements in one contiguous byte buffer (the shape of Redis's listpack).
//!
//! Each entry is its length as a varint, its bytes, then the same length written backwards
//! (so that the buffer can be walked from either end). A small list or set keeps its elements
//! here instead of one heap box per element: some 2 bytes of overhead per element instead of
//! 16 for the box plus the allocator's rounding. Finding an element by position or value scans
//! the buffer and inserting moves the bytes after it, which is why the owners convert to their
//! large form past a small limit (see `list` and `set`).

/// Entries in one buffer, in order.
#[derive(Default, Clone)]
pub struct Packed {
    buf: Vec<u8>,
    len: u32,
}

/// Bytes a varint of `v` takes.
fn varint_len(v: usize) -> usize {
    crate::varint::len(v as u64)
}

/// The bytes of one entry holding `value`, appended to `out`.
fn encode_entry(out: &mut Vec<u8>, value: &[u8]) {
    let start = out.len();
    let mut v = value.len();
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
    let head = out.len() - start;
    out.extend_from_slice(value);
    // The back-length: the varint's bytes in reverse, read from the end toward the front.
    for i in (0..head).rev() {
        out.push(out[start + i]);
    }
}

/// Bytes one entry of `len` value bytes takes.
pub fn entry_size(len: usize) -> usize {
    len + 2 * varint_len(len)
}

/// The entry starting at `at`: (value start, value end, next entry's start).
fn entry_at(buf: &[u8], at: usize) -> (usize, usize, usize) {
    let mut len = 0usize;
    let mut i = at;
    let mut shift = 0;
    loop {
        let b = buf[i];
        len |= ((b & 0x7f) as usize) << shift;
        i += 1;
        shift += 7;
        if b < 0x80 {
            break;
        }
    }
    let head = i - at;
    (i, i + len, i + len + head)
}

/// The entry ending at `end` (exclusive): (entry start, value start, value end).
fn entry_before(buf: &[u8], end: usize) -> (usize, usize, usize) {
    let mut len = 0usize;
    let mut i = end;
    let mut shift = 0;
    loop {
        i -= 1;
        let b = buf[i];
        len |= ((b & 0x7f) as usize) << shift;
        shift += 7;
        if b < 0x80 {
            break;
        }
    }
    let head = end - i;
    let value_end = i;
    let value_start = value_end - len;
    (value_start - head, value_start, value_end)
}

impl Packed {
    pub fn len(&self) -> usize {
        self.len as usize
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Heap bytes the buffer holds.
    pub fn memory(&self) -> usize {
        self.buf.capacity()
    }
    /// Makes room for `additional` bytes, growing by a quarter rather than doubling: the
    /// packed form is there to save memory, and an insert moves the buffer's bytes anyway.
    fn grow(&mut self, additional: usize) {
        if self.buf.len() + additional > self.buf.capacity() {
            self.buf
                .reserve_exact(additional.max(self.buf.len() / 4).max(16));
        }
    }
    /// Gives back spare room after a large removal.
    fn trim(&mut self) {
        if self.buf.capacity() > 64 && self.buf.len() < self.buf.capacity() / 2 {
            self.buf.shrink_to(self.buf.len() + self.buf.len() / 4);
        }
    }
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            buf: &self.buf,
            front: 0,
            back: self.buf.len(),
            left: self.len(),
        }
    }
    /// Byte offset of entry `index` (`len` gives the end of the buffer). Walks from the
    /// nearer end.
    fn offset(&self, index: usize) -> usize {
        let n = self.len();
        if index >= n {
            return self.buf.len();
        }
        if index <= n / 2 {
            let mut at = 0;
            for _ in 0..index {
                at = entry_at(&self.buf, at).2;
            }
            at
        } else {
            let mut at = self.buf.len();
            for _ in index..n {
                at = entry_before(&self.buf, at).0;
            }
            at
        }
    }
    pub fn get(&self, index: usize) -> Option<&[u8]> {
        if index >= self.len() {
            return None;
        }
        let (a, b, _) = entry_at(&self.buf, self.offset(index));
        Some(&self.buf[a..b])
    }
    /// The index of the first entry equal to `value`.
    pub fn position(&self, value: &[u8]) -> Option<usize> {
        self.iter().position(|e| e == value)
    }
    pub fn push_back(&mut self, value: &[u8]) {
        self.grow(entry_size(value.len()));
        encode_entry(&mut self.buf, value);
        self.len += 1;
    }
    pub fn push_front(&mut self, value: &[u8]) {
        self.insert(0, value);
    }
    /// Inserts `value` before entry `index` (at the end when `index >= len`).
    pub fn insert(&mut self, index: usize, value: &[u8]) {
        if index >= self.len() {
            return self.push_back(value);
        }
        let at = self.offset(index);
        let mut entry = Vec::with_capacity(entry_size(value.len()));
        encode_entry(&mut entry, value);
        self.grow(entry.len());
        self.buf.splice(at..at, entry);
        self.len += 1;
    }
    /// Replaces entry `index`; false when out of range.
    pub fn set(&mut self, index: usize, value: &[u8]) -> bool {
        if index >= self.len() {
            return false;
        }
        let at = self.offset(index);
        let end = entry_at(&self.buf, at).2;
        let mut entry = Vec::with_capacity(entry_size(value.len()));
        encode_entry(&mut entry, value);
        self.grow(entry.len().saturating_sub(end - at));
        self.buf.splice(at..end, entry);
        true
    }
    pub fn remove(&mut self, index: usize) -> Option<Box<[u8]>> {
        if index >= self.len() {
            return None;
        }
        let at = self.offset(index);
        let (a, b, end) = entry_at(&self.buf, at);
        let value: Box<[u8]> = self.buf[a..b].into();
        self.buf.drain(at..end);
        self.len -= 1;
        self.trim();
        Some(value)
    }
    pub fn pop_front(&mut self) -> Option<Box<[u8]>> {
        self.remove(0)
    }
    pub fn pop_back(&mut self) -> Option<Box<[u8]>> {
        if self.is_empty() {
            return None;
        }
        let (start, a, b) = entry_before(&self.buf, self.buf.len());
        let value: Box<[u8]> = self.buf[a..b].into();
        self.buf.truncate(start);
        self.len -= 1;
        self.trim();
        Some(value)
    }
    /// Keeps only the entries in `start..end` (clamped to the length).
    pub fn keep_range(&mut self, start: usize, end: usize) {
        let end = end.min(self.len());
        let start = start.min(end);
        let (from, to) = (self.offset(start), self.offset(end));
        self.buf.truncate(to);
        self.buf.drain(..from);
        self.len = (end - start) as u32;
        self.trim();
    }
    /// Keeps the entries for which `keep` (given index and value) says true; returns how many
    /// went.
    pub fn retain(&mut self, mut keep: impl FnMut(usize, &[u8]) -> bool) -> usize {
        let mut kept = Vec::new();
        let mut count = 0u32;
        for (i, e) in self.iter().enumerate() {
            if keep(i, e) {
                encode_entry(&mut kept, e);
                count += 1;
            }
        }
        let gone = self.len() - count as usize;
        if gone > 0 {
            self.buf.clear();
            self.buf.extend_from_slice(&kept);
            self.len = count;
            self.trim();
        }
        gone
    }
}

/// A walk over a [`Packed`] buffer from either end.
pub struct Iter<'a> {
    buf: &'a [u8],
    front: usize,
    back: usize,
    left: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        if self.left == 0 {
            return None;
        }
        let (a, b, next) = entry_at(self.buf, self.front);
        self.front = next;
        self.left -= 1;
        Some(&self.buf[a..b])
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        let (start, a, b) = entry_before(self.buf, self.back);
        self.back = start;
        self.left -= 1;
        Some(&self.buf[a..b])
    }
}

impl ExactSizeIterator for Iter<'_> {}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    #[test]
    fn long_entries_walk_both_ways() {
        let mut p = Packed::default();
        let big = vec![7u8; 300];
        p.push_back(b"a");
        p.push_back(&big);
        p.push_front(b"");
        assert_eq!(p.iter().collect::<Vec<_>>(), [&b""[..], b"a", &big]);
        assert_eq!(p.iter().rev().collect::<Vec<_>>(), [&big[..], b"a", b""]);
        assert_eq!(p.get(2), Some(&big[..]));
        assert_eq!(entry_size(300), 304);
        assert_eq!(p.pop_back().as_deref(), Some(&big[..]));
        assert_eq!(p.position(b"a"), Some(1));
    }

    proptest! {
        #[test]
        fn behaves_as_a_deque(ops in proptest::collection::vec((0u8..9, 0usize..12, proptest::collection::vec(any::<u8>(), 0..200)), 0..120)) {
            let mut p = Packed::default();
            let mut model: VecDeque<Vec<u8>> = VecDeque::new();
            for (op, i, v) in ops {
                match op {
                    0 => { p.push_front(&v); model.push_front(v); }
                    1 => { p.push_back(&v); model.push_back(v); }
                    2 => prop_assert_eq!(p.pop_front().map(Vec::from), model.pop_front()),
                    3 => prop_assert_eq!(p.pop_back().map(Vec::from), model.pop_back()),
                    4 => { p.insert(i, &v); model.insert(i.min(model.len()), v); }
                    5 => prop_assert_eq!(p.remove(i).map(Vec::from), model.remove(i)),
                    6 => {
                        let ok = i < model.len();
                        prop_assert_eq!(p.set(i, &v), ok);
                        if ok { model[i] = v; }
                    }
                    7 => {
                        let gone = p.retain(|at, e| at % 3 != 0 || e.len() > 50);
                        let before = model.len();
                        let mut at = 0;
                        model.retain(|e| { let k = at % 3 != 0 || e.len() > 50; at += 1; k });
                        prop_assert_eq!(gone, before - model.len());
                    }
                    _ => {
                        let end = (i + 3).min(model.len());
                        let start = i.min(end);
                        p.keep_range(i, i + 3);
                        model = model.drain(start..end).collect();
                    }
                }
                prop_assert_eq!(p.len(), model.len());
                prop_assert_eq!(p.iter().map(<[u8]>::to_vec).collect::<Vec<_>>(), Vec::from(model.clone()));
                let back: Vec<Vec<u8>> = p.iter().rev().map(<[u8]>::to_vec).collect();
                prop_assert_eq!(back, model.iter().rev().cloned().collect::<Vec<_>>());
                for (k, e) in model.iter().enumerate() {
                    prop_assert_eq!(p.get(k), Some(&e[..]));
                }
            }
        }
    }
}
