//! A small set of integers as one sorted array of the narrowest width that holds them all
//! (Redis's intset): 2, 4 or 8 bytes a member, found by binary search. A member is an integer
//! only in its canonical decimal text ([`canonical_int`]), so that the set gives back exactly
//! the bytes it was given.

/// The members, sorted, at one width.
#[derive(Clone)]
pub enum IntSet {
    I16(Vec<i16>),
    I32(Vec<i32>),
    I64(Vec<i64>),
}

impl Default for IntSet {
    fn default() -> IntSet {
        IntSet::I16(Vec::new())
    }
}

/// `text` as an integer when it is one in canonical form (no sign but a leading `-`, no
/// leading zero, no `-0`), the form the set prints it back in.
pub fn canonical_int(text: &[u8]) -> Option<i64> {
    if text.is_empty() || text.len() > 20 {
        return None;
    }
    let v: i64 = std::str::from_utf8(text).ok()?.parse().ok()?;
    (Decimal::of(v).as_bytes() == text).then_some(v)
}

/// An integer's decimal text, without a heap allocation.
#[derive(Clone, Copy)]
pub struct Decimal {
    digits: [u8; 20],
    len: u8,
}

impl Decimal {
    pub fn of(v: i64) -> Decimal {
        let mut digits = [0u8; 20];
        let mut n = v.unsigned_abs();
        let mut at = 20;
        loop {
            at -= 1;
            digits[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        if v < 0 {
            at -= 1;
            digits[at] = b'-';
        }
        digits.copy_within(at.., 0);
        Decimal {
            digits,
            len: (20 - at) as u8,
        }
    }
    pub fn as_bytes(&self) -> &[u8] {
        &self.digits[..self.len as usize]
    }
}

/// Inserts into a sorted vector; false when present.
fn insert_sorted<T: Ord + Copy>(v: &mut Vec<T>, x: T) -> bool {
    match v.binary_search(&x) {
        Ok(_) => false,
        Err(at) => {
            if v.len() == v.capacity() {
                // Grow by a quarter: the small form is there to save memory.
                v.reserve_exact((v.len() / 4).max(4));
            }
            v.insert(at, x);
            true
        }
    }
}

fn remove_sorted<T: Ord + Copy>(v: &mut Vec<T>, x: T) -> bool {
    match v.binary_search(&x) {
        Ok(at) => {
            v.remove(at);
            true
        }
        Err(_) => false,
    }
}

fn widen<T: Copy, U: From<T>>(v: &[T]) -> Vec<U> {
    let mut out = Vec::with_capacity(v.len() + 1);
    out.extend(v.iter().map(|&x| U::from(x)));
    out
}

impl IntSet {
    pub fn len(&self) -> usize {
        match self {
            IntSet::I16(v) => v.len(),
            IntSet::I32(v) => v.len(),
            IntSet::I64(v) => v.len(),
        }
    }
    pub fn contains(&self, x: i64) -> bool {
        match self {
            IntSet::I16(v) => i16::try_from(x).is_ok_and(|x| v.binary_search(&x).is_ok()),
            IntSet::I32(v) => i32::try_from(x).is_ok_and(|x| v.binary_search(&x).is_ok()),
            IntSet::I64(v) => v.binary_search(&x).is_ok(),
        }
    }
    /// Adds `x`, widening every member first when `x` needs more bytes; false when present.
    pub fn insert(&mut self, x: i64) -> bool {
        if let IntSet::I16(v) = self {
            if i16::try_from(x).is_err() {
                *self = IntSet::I32(widen(v));
            }
        }
        if let IntSet::I32(v) = self {
            if i32::try_from(x).is_err() {
                *self = IntSet::I64(widen(v));
            }
        }
        match self {
            IntSet::I16(v) => insert_sorted(v, x as i16),
            IntSet::I32(v) => insert_sorted(v, x as i32),
            IntSet::I64(v) => insert_sorted(v, x),
        }
    }
    /// Removes `x` (the width stays, as Redis's intset); false when absent.
    pub fn remove(&mut self, x: i64) -> bool {
        match self {
            IntSet::I16(v) => i16::try_from(x).is_ok_and(|x| remove_sorted(v, x)),
            IntSet::I32(v) => i32::try_from(x).is_ok_and(|x| remove_sorted(v, x)),
            IntSet::I64(v) => remove_sorted(v, x),
        }
    }
    /// The member at `index` (0..len, ascending).
    pub fn get(&self, index: usize) -> Option<i64> {
        match self {
            IntSet::I16(v) => v.get(index).map(|&x| x.into()),
            IntSet::I32(v) => v.get(index).map(|&x| x.into()),
            IntSet::I64(v) => v.get(index).copied(),
        }
    }
    pub fn take(&mut self, index: usize) -> Option<i64> {
        let x = self.get(index)?;
        self.remove(x);
        Some(x)
    }
    /// Heap bytes the array holds.
    pub fn memory(&self) -> usize {
        match self {
            IntSet::I16(v) => v.capacity() * 2,
            IntSet::I32(v) => v.capacity() * 4,
            IntSet::I64(v) => v.capacity() * 8,
        }
    }
    /// The smallest and largest member.
    pub fn bounds(&self) -> Option<(i64, i64)> {
        Some((self.get(0)?, self.get(self.len().checked_sub(1)?)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn only_canonical_text_is_an_integer() {
        assert_eq!(canonical_int(b"12"), Some(12));
        assert_eq!(canonical_int(b"-9223372036854775808"), Some(i64::MIN));
        for text in [
            &b"012"[..],
            b"+1",
            b"-0",
            b"1 ",
            b"",
            b"99999999999999999999",
            b"1.0",
        ] {
            assert_eq!(canonical_int(text), None, "{text:?}");
        }
        assert_eq!(Decimal::of(0).as_bytes(), b"0");
        assert_eq!(Decimal::of(i64::MAX).as_bytes(), b"9223372036854775807");
    }

    proptest! {
        #[test]
        fn behaves_as_a_sorted_set(ops in proptest::collection::vec((any::<bool>(), prop_oneof![-300i64..300, any::<i64>(), -70000i64..70000]), 0..200)) {
            let mut s = IntSet::default();
            let mut model = std::collections::BTreeSet::new();
            for (add, x) in ops {
                if add {
                    prop_assert_eq!(s.insert(x), model.insert(x));
                } else {
                    prop_assert_eq!(s.remove(x), model.remove(&x));
                }
                prop_assert_eq!(s.len(), model.len());
                prop_assert!(model.iter().all(|&m| s.contains(m)));
            }
            let got: Vec<i64> = (0..s.len()).map(|i| s.get(i).unwrap()).collect();
            prop_assert_eq!(got, model.into_iter().collect::<Vec<_>>());
        }
    }
}
