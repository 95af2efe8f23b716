//! Decimal tokens as memcached's `safe_strto*` helpers read them, minus their silent truncations.

// memcached accepts what `strtoul`/`strtol` accept: an optional sign, then
// digits. A leading `-` on an unsigned field is refused there (the value wraps
// negative), so it is refused here. Where memcached would silently truncate a
// 64-bit `long` into a 32-bit field, we refuse instead: a client sending
// flags of 2^32 gets an error rather than flags of 0.

/// Value of a non-empty run of ASCII digits, or `None` on any other byte or overflow.
fn digits(tok: &[u8]) -> Option<u64> {
    if tok.is_empty() {
        return None;
    }
    let mut v: u64 = 0;
    for &b in tok {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    Some(v)
}

/// An unsigned 64-bit value (cas unique, delta, `C`/`E`/`D`/`J` tokens).
pub(crate) fn parse_u64(tok: &[u8]) -> Option<u64> {
    digits(tok.strip_prefix(b"+").unwrap_or(tok))
}

/// An unsigned 32-bit value (client flags, verbosity level, `F` token).
pub(crate) fn parse_u32(tok: &[u8]) -> Option<u32> {
    parse_u64(tok).and_then(|v| u32::try_from(v).ok())
}

/// A signed 32-bit value (exptime, data length, `T`/`N`/`R` tokens).
pub(crate) fn parse_i32(tok: &[u8]) -> Option<i32> {
    match tok.split_first() {
        Some((b'-', rest)) => {
            let v = digits(rest)?;
            // -2^31 has no positive counterpart, so negate in i64.
            i32::try_from(-(i64::try_from(v).ok()?)).ok()
        }
        Some((b'+', rest)) => digits(rest).and_then(|v| i32::try_from(v).ok()),
        _ => digits(tok).and_then(|v| i32::try_from(v).ok()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsigned() {
        assert_eq!(parse_u64(b"0"), Some(0));
        assert_eq!(parse_u64(b"+7"), Some(7));
        assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_u64(b"18446744073709551616"), None);
        assert_eq!(parse_u64(b"-1"), None);
        assert_eq!(parse_u64(b""), None);
        assert_eq!(parse_u64(b"+"), None);
        assert_eq!(parse_u64(b"++1"), None);
        assert_eq!(parse_u64(b"1a"), None);
        assert_eq!(parse_u32(b"4294967295"), Some(u32::MAX));
        assert_eq!(parse_u32(b"4294967296"), None);
    }

    #[test]
    fn signed() {
        assert_eq!(parse_i32(b"-1"), Some(-1));
        assert_eq!(parse_i32(b"+1"), Some(1));
        assert_eq!(parse_i32(b"-2147483648"), Some(i32::MIN));
        assert_eq!(parse_i32(b"2147483647"), Some(i32::MAX));
        assert_eq!(parse_i32(b"2147483648"), None);
        assert_eq!(parse_i32(b"-2147483649"), None);
        assert_eq!(parse_i32(b"-"), None);
        assert_eq!(parse_i32(b"--1"), None);
        assert_eq!(parse_i32(b"-+1"), None);
        assert_eq!(parse_i32(b"1 "), None);
    }
}
