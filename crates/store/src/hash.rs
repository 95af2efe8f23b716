//! Encoding of a hash record's value: its field/value pairs packed back to back, each part
//! prefixed with its varint length, and, only when some field has a deadline (HEXPIRE and
//! family), a trailer with every field's deadline. Hashes in a cache hold the fields of one
//! cached object, so a flat encoding (one allocation, rewritten on change) beats a table per
//! record in memory; a write costs O(size of the hash).
//!
//! ```text
//! value   = (len:varint field len:varint value)* [trailer]
//! trailer = 0x80 0x00 (deadline_unix_ms:varint)*   one per field, in order; 0 = none
//! ```
//! The trailer's mark is a non-canonical varint (zero written in two bytes), which no field
//! length ever is, so a reader finds it where the next field would start. A hash without field
//! deadlines has no trailer and costs nothing more; the deadlines travel with the value, so a
//! snapshot, a copy and the change stream carry them as they are.

use std::borrow::Cow;

use crate::varint;

const MARK: [u8; 2] = [0x80, 0x00];

fn put_varint(out: &mut Vec<u8>, v: usize) {
    varint::push(out, v as u64);
}

fn get_varint(buf: &[u8]) -> Option<(usize, usize)> {
    let (v, n) = varint::get(buf)?;
    Some((usize::try_from(v).ok()?, n))
}

/// Iterates the (field, value) pairs of an encoded hash (expired fields included: see `live`).
pub struct Fields<'a> {
    rest: &'a [u8],
}

pub fn fields(encoded: &[u8]) -> Fields<'_> {
    Fields { rest: encoded }
}

impl<'a> Fields<'a> {
    fn part(&mut self) -> Option<&'a [u8]> {
        let (len, n) = get_varint(self.rest)?;
        let part = self.rest.get(n..n.checked_add(len)?)?;
        self.rest = &self.rest[n + len..];
        Some(part)
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = (&'a [u8], &'a [u8]);
    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.starts_with(&MARK) {
            return None;
        }
        let field = self.part()?;
        let value = self.part()?;
        Some((field, value))
    }
}

/// The deadlines trailer (after its mark), if the hash has one.
fn trailer(encoded: &[u8]) -> Option<&[u8]> {
    let mut parts = fields(encoded);
    while parts.next().is_some() {}
    parts.rest.strip_prefix(&MARK)
}

/// Reads the trailer's deadlines one by one (None once they run out).
struct Deadlines<'a>(&'a [u8]);

impl Iterator for Deadlines<'_> {
    type Item = Option<u64>;
    fn next(&mut self) -> Option<Option<u64>> {
        let (v, n) = get_varint(self.0)?;
        self.0 = &self.0[n..];
        Some((v != 0).then_some(v as u64))
    }
}

/// The (field, value, deadline) triples of an encoded hash, expired fields included.
pub fn entries(encoded: &[u8]) -> impl Iterator<Item = (&[u8], &[u8], Option<u64>)> {
    let mut deadlines = Deadlines(trailer(encoded).unwrap_or_default());
    fields(encoded).map(move |(f, v)| (f, v, deadlines.next().flatten()))
}

/// Whether any field has a deadline.
pub fn has_deadlines(encoded: &[u8]) -> bool {
    trailer(encoded).is_some()
}

/// The nearest field deadline, if any field has one.
pub fn next_deadline(encoded: &[u8]) -> Option<u64> {
    Deadlines(trailer(encoded)?).flatten().min()
}

/// A field's deadline: None when there is no such field, Some(None) when it has none.
pub fn deadline(encoded: &[u8], field: &[u8]) -> Option<Option<u64>> {
    entries(encoded)
        .find(|(f, _, _)| *f == field)
        .map(|(_, _, d)| d)
}

/// The hash as clients see it at `now`: without the fields whose deadline passed (borrowed as
/// is when none did, which is always the case for a hash without deadlines).
pub fn live(encoded: &[u8], now: u64) -> Cow<'_, [u8]> {
    match next_deadline(encoded) {
        Some(d) if d <= now => {
            let mut out = Vec::with_capacity(encoded.len());
            encode(
                entries(encoded).filter(|(_, _, d)| d.is_none_or(|d| d > now)),
                &mut out,
            );
            Cow::Owned(out)
        }
        _ => Cow::Borrowed(encoded),
    }
}

/// Encodes `entries` (field, value, deadline) into `out`, with a trailer only when some field
/// has a deadline.
pub fn encode<'a>(
    entries: impl IntoIterator<Item = (&'a [u8], &'a [u8], Option<u64>)>,
    out: &mut Vec<u8>,
) {
    out.clear();
    let mut deadlines = Vec::new();
    let mut any = false;
    for (field, value, deadline) in entries {
        push(out, field, value);
        put_varint(&mut deadlines, deadline.unwrap_or(0) as usize);
        any |= deadline.is_some();
    }
    if any {
        out.extend_from_slice(&MARK);
        out.extend_from_slice(&deadlines);
    }
}

pub fn get<'a>(encoded: &'a [u8], field: &[u8]) -> Option<&'a [u8]> {
    fields(encoded).find(|(f, _)| *f == field).map(|(_, v)| v)
}

pub fn len(encoded: &[u8]) -> usize {
    fields(encoded).count()
}

/// Whether `encoded` is a whole, well-formed encoding (pairs of length-prefixed parts, then
/// at most a trailer with one deadline per field, nothing left over): a snapshot being loaded
/// is checked with it before a record is built.
pub fn is_well_formed(encoded: &[u8]) -> bool {
    let mut parts = Fields { rest: encoded };
    let mut count = 0;
    while !parts.rest.is_empty() && !parts.rest.starts_with(&MARK) {
        if parts.next().is_none() {
            return false;
        }
        count += 1;
    }
    let Some(mut rest) = parts.rest.strip_prefix(&MARK) else {
        return true;
    };
    for _ in 0..count {
        match get_varint(rest) {
            Some((_, n)) => rest = &rest[n..],
            None => return false,
        }
    }
    rest.is_empty()
}

pub fn push(out: &mut Vec<u8>, field: &[u8], value: &[u8]) {
    put_varint(out, field.len());
    out.extend_from_slice(field);
    put_varint(out, value.len());
    out.extend_from_slice(value);
}

/// Encodes `old` with `updates` applied (a later update of the same field wins) into `out`.
/// An updated field loses its deadline (HSET), the others keep theirs. Returns how many
/// fields were added (not present before).
pub fn set(old: &[u8], updates: &[(&[u8], &[u8])], out: &mut Vec<u8>) -> usize {
    set_with(old, updates, false, out)
}

/// As `set`; with `keep_deadlines` an updated field keeps its deadline (HINCRBY).
pub fn set_with(
    old: &[u8],
    updates: &[(&[u8], &[u8])],
    keep_deadlines: bool,
    out: &mut Vec<u8>,
) -> usize {
    let latest = |field: &[u8]| {
        updates
            .iter()
            .rev()
            .find(|(f, _)| *f == field)
            .map(|(_, v)| *v)
    };
    let mut added = Vec::new();
    for (i, (field, _)) in updates.iter().enumerate() {
        let seen_before = updates[..i].iter().any(|(f, _)| f == field);
        if !seen_before && get(old, field).is_none() {
            added.push((*field, latest(field).unwrap_or_default(), None));
        }
    }
    let count = added.len();
    let kept = entries(old).map(|(f, v, d)| match latest(f) {
        Some(new) => (f, new, d.filter(|_| keep_deadlines)),
        None => (f, v, d),
    });
    encode(kept.chain(added), out);
    count
}

/// Encodes `old` without `remove` into `out`; returns how many fields went.
pub fn delete(old: &[u8], remove: &[&[u8]], out: &mut Vec<u8>) -> usize {
    let mut removed = 0;
    encode(
        entries(old).filter(|(f, _, _)| {
            let gone = remove.contains(f);
            removed += usize::from(gone);
            !gone
        }),
        out,
    );
    removed
}

/// Encodes `old` with the deadlines in `changes` (field, new deadline or None to persist)
/// into `out`; fields not in `old` are ignored.
pub fn set_deadlines(old: &[u8], changes: &[(&[u8], Option<u64>)], out: &mut Vec<u8>) {
    encode(
        entries(old).map(
            |(f, v, d)| match changes.iter().rev().find(|(c, _)| *c == f) {
                Some((_, new)) => (f, v, *new),
                None => (f, v, d),
            },
        ),
        out,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[test]
    fn set_get_delete() {
        let mut a = Vec::new();
        assert_eq!(
            set(
                &[],
                &[(b"f1", b"v1"), (b"f2", b"v2"), (b"f1", b"v3")],
                &mut a
            ),
            2
        );
        assert_eq!(get(&a, b"f1"), Some(&b"v3"[..]));
        assert_eq!(len(&a), 2);
        let mut b = Vec::new();
        assert_eq!(set(&a, &[(b"f2", b"x"), (b"f3", b"y")], &mut b), 1);
        assert_eq!(
            fields(&b).collect::<Vec<_>>(),
            vec![
                (&b"f1"[..], &b"v3"[..]),
                (&b"f2"[..], &b"x"[..]),
                (&b"f3"[..], &b"y"[..])
            ]
        );
        let mut c = Vec::new();
        assert_eq!(delete(&b, &[b"f1", b"nope"], &mut c), 1);
        assert_eq!(len(&c), 2);
    }

    #[test]
    fn deadlines_ride_in_a_trailer_only_when_some_field_has_one() {
        let mut a = Vec::new();
        set(&[], &[(b"f1", b"v1"), (b"f2", b"v2")], &mut a);
        assert!(!has_deadlines(&a));
        let plain_len = a.len();
        let mut b = Vec::new();
        set_deadlines(&a, &[(b"f2", Some(1_000))], &mut b);
        assert!(has_deadlines(&b) && is_well_formed(&b));
        assert_eq!(b.len(), plain_len + 2 + 1 + 2);
        assert_eq!(deadline(&b, b"f1"), Some(None));
        assert_eq!(deadline(&b, b"f2"), Some(Some(1_000)));
        assert_eq!(deadline(&b, b"nope"), None);
        assert_eq!(len(&b), 2);
        assert_eq!(next_deadline(&b), Some(1_000));
        // Not yet due: the same bytes; due: the field is gone, and so is the trailer.
        assert!(matches!(live(&b, 999), Cow::Borrowed(_)));
        assert_eq!(&*live(&b, 1_000), &a[..plain_len - 6]);
        // HSET drops a field's deadline, HINCRBY keeps it, HDEL keeps the others'.
        let mut c = Vec::new();
        set(&b, &[(b"f2", b"x")], &mut c);
        assert!(!has_deadlines(&c));
        set_with(&b, &[(b"f2", b"x")], true, &mut c);
        assert_eq!(deadline(&c, b"f2"), Some(Some(1_000)));
        delete(&b, &[b"f1"], &mut c);
        assert_eq!(
            entries(&c).collect::<Vec<_>>(),
            vec![(&b"f2"[..], &b"v2"[..], Some(1_000))]
        );
        set_deadlines(&c, &[(b"f2", None)], &mut a);
        assert!(!has_deadlines(&a));
        // A trailer with the wrong count of deadlines is malformed.
        let mut bad = b.clone();
        bad.push(5);
        assert!(!is_well_formed(&bad));
        bad.truncate(b.len() - 2);
        assert!(!is_well_formed(&bad));
    }

    proptest! {
        #[test]
        fn behaves_like_a_map(ops in proptest::collection::vec((any::<bool>(), proptest::collection::vec(0u8..4, 0..3), proptest::collection::vec(any::<u8>(), 0..200)), 0..40)) {
            let mut model = BTreeMap::new();
            let mut enc = Vec::new();
            let mut out = Vec::new();
            for (is_set, field, value) in ops {
                if is_set {
                    let added = set(&enc, &[(&field, &value)], &mut out);
                    prop_assert_eq!(added, usize::from(model.insert(field.clone(), value.clone()).is_none()));
                } else {
                    let removed = delete(&enc, &[&field], &mut out);
                    prop_assert_eq!(removed, usize::from(model.remove(&field).is_some()));
                }
                std::mem::swap(&mut enc, &mut out);
                prop_assert_eq!(len(&enc), model.len());
                for (f, v) in &model {
                    prop_assert_eq!(get(&enc, f), Some(&v[..]));
                }
            }
        }
    }
}
