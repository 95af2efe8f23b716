//! Encoding of a hash record's value: its field/value pairs packed back to back, each part
//! prefixed with its varint length. Hashes in a cache hold the fields of one cached object, so a
//! flat encoding (one allocation, rewritten on change) beats a table per record in memory; a
//! write costs O(size of the hash).

fn put_varint(out: &mut Vec<u8>, mut v: usize) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(buf: &[u8]) -> Option<(usize, usize)> {
    let mut v = 0usize;
    for (i, &b) in buf.iter().enumerate().take(10) {
        v |= ((b & 0x7f) as usize) << (7 * i);
        if b < 0x80 {
            return Some((v, i + 1));
        }
    }
    None
}

/// Iterates the (field, value) pairs of an encoded hash.
pub struct Fields<'a> {
    rest: &'a [u8],
}

pub fn fields(encoded: &[u8]) -> Fields<'_> {
    Fields { rest: encoded }
}

impl<'a> Fields<'a> {
    fn part(&mut self) -> Option<&'a [u8]> {
        let (len, n) = get_varint(self.rest)?;
        let part = self.rest.get(n..n + len)?;
        self.rest = &self.rest[n + len..];
        Some(part)
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = (&'a [u8], &'a [u8]);
    fn next(&mut self) -> Option<Self::Item> {
        let field = self.part()?;
        let value = self.part()?;
        Some((field, value))
    }
}

pub fn get<'a>(encoded: &'a [u8], field: &[u8]) -> Option<&'a [u8]> {
    fields(encoded).find(|(f, _)| *f == field).map(|(_, v)| v)
}

pub fn len(encoded: &[u8]) -> usize {
    fields(encoded).count()
}

/// Whether `encoded` is a whole, well-formed encoding (pairs of length-prefixed parts, nothing
/// left over): a snapshot being loaded is checked with it before a record is built.
pub fn is_well_formed(encoded: &[u8]) -> bool {
    let mut parts = Fields { rest: encoded };
    while !parts.rest.is_empty() {
        if parts.next().is_none() {
            return false;
        }
    }
    true
}

pub fn push(out: &mut Vec<u8>, field: &[u8], value: &[u8]) {
    put_varint(out, field.len());
    out.extend_from_slice(field);
    put_varint(out, value.len());
    out.extend_from_slice(value);
}

/// Encodes `old` with `updates` applied (a later update of the same field wins) into `out`.
/// Returns how many fields were added (not present before).
pub fn set(old: &[u8], updates: &[(&[u8], &[u8])], out: &mut Vec<u8>) -> usize {
    out.clear();
    let latest = |field: &[u8]| {
        updates
            .iter()
            .rev()
            .find(|(f, _)| *f == field)
            .map(|(_, v)| *v)
    };
    for (field, value) in fields(old) {
        push(out, field, latest(field).unwrap_or(value));
    }
    let mut added = 0;
    for (i, (field, _)) in updates.iter().enumerate() {
        let seen_before = updates[..i].iter().any(|(f, _)| f == field);
        if !seen_before && get(old, field).is_none() {
            push(out, field, latest(field).unwrap_or_default());
            added += 1;
        }
    }
    added
}

/// Encodes `old` without `remove` into `out`; returns how many fields went.
pub fn delete(old: &[u8], remove: &[&[u8]], out: &mut Vec<u8>) -> usize {
    out.clear();
    let mut removed = 0;
    for (field, value) in fields(old) {
        if remove.contains(&field) {
            removed += 1;
        } else {
            push(out, field, value);
        }
    }
    removed
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
