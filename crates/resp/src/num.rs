//! Hand-rolled integer parsing for length headers and integer replies.

/// Redis's `string2ll`: the request parser must reject exactly what Redis
/// rejects, so no `+` sign, no leading zeros, no `-0`, no surrounding space,
/// and nothing that would not fit an `i64`.
pub(crate) fn string2ll(s: &[u8]) -> Option<i64> {
    // 21 is Redis's LONG_STR_SIZE: anything that long cannot be an i64.
    if s.is_empty() || s.len() >= 21 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (negative, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    let magnitude = parse_digits(digits)?;
    apply_sign(negative, magnitude)
}

/// A more forgiving parser for replies coming from a server we do not
/// control: an optional sign and at least one digit.
pub(crate) fn parse_i64(s: &[u8]) -> Option<i64> {
    let (negative, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, s),
    };
    if digits.is_empty() {
        return None;
    }
    let magnitude = parse_digits(digits)?;
    apply_sign(negative, magnitude)
}

fn parse_digits(digits: &[u8]) -> Option<u64> {
    let mut v: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    Some(v)
}

fn apply_sign(negative: bool, magnitude: u64) -> Option<i64> {
    if negative {
        // i64::MIN has no positive counterpart, hence the detour via i128.
        i64::try_from(-i128::from(magnitude)).ok()
    } else {
        i64::try_from(magnitude).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string2ll_accepts_canonical_integers() {
        assert_eq!(string2ll(b"0"), Some(0));
        assert_eq!(string2ll(b"7"), Some(7));
        assert_eq!(string2ll(b"-1"), Some(-1));
        assert_eq!(string2ll(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(string2ll(b"-9223372036854775808"), Some(i64::MIN));
    }

    #[test]
    fn string2ll_rejects_what_redis_rejects() {
        for bad in [
            &b""[..],
            b"-",
            b"-0",
            b"00",
            b"01",
            b"+1",
            b" 1",
            b"1 ",
            b"1a",
            b"9223372036854775808",
            b"-9223372036854775809",
            b"000000000000000000001",
        ] {
            assert_eq!(string2ll(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn parse_i64_is_lenient_about_form_only() {
        assert_eq!(parse_i64(b"+5"), Some(5));
        assert_eq!(parse_i64(b"-0"), Some(0));
        assert_eq!(parse_i64(b"007"), Some(7));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64(b"9223372036854775808"), None);
        assert_eq!(parse_i64(b"-"), None);
        assert_eq!(parse_i64(b""), None);
        assert_eq!(parse_i64(b"1.0"), None);
    }
}
