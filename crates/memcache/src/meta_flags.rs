//! Meta-command flags: the `<flag><token>` words after the key, their validation and typed reads.

use std::fmt;

use crate::base64::is_base64_key;
use crate::number::{parse_i32, parse_u32, parse_u64};
use crate::request::{ArithMode, Keys, StoreKind};

/// Longest opaque (`O`) word memcached echoes, counting the `O` itself.
pub const MAX_OPAQUE_LEN: usize = 32;

/// One flag word: the flag letter and whatever followed it up to the next space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetaFlag<'a> {
    pub flag: u8,
    pub token: &'a [u8],
}

/// The flags of one meta request, in the order the client sent them.
///
/// A `MetaFlags` coming out of [`crate::parse`] has been validated the way
/// memcached does it: every flag is known and appears once, and every
/// numeric token parses. So the typed getters below return `Some` exactly
/// when the flag is present. Responses must echo flags in request order,
/// hence the iterator.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct MetaFlags<'a> {
    raw: &'a [u8],
}

impl<'a> MetaFlags<'a> {
    pub(crate) fn new(raw: &'a [u8]) -> Self {
        MetaFlags { raw }
    }

    /// The flag words in request order.
    pub fn iter(&self) -> impl Iterator<Item = MetaFlag<'a>> + 'a {
        Keys::new(self.raw).filter_map(|w| {
            let (&flag, token) = w.split_first()?;
            Some(MetaFlag { flag, token })
        })
    }

    /// The flags as they appeared on the wire.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.raw
    }

    pub fn is_empty(&self) -> bool {
        self.iter().next().is_none()
    }

    pub fn has(&self, flag: u8) -> bool {
        self.token(flag).is_some()
    }

    /// The token after `flag` (possibly empty), if the flag is present.
    pub fn token(&self, flag: u8) -> Option<&'a [u8]> {
        self.iter().find(|f| f.flag == flag).map(|f| f.token)
    }

    /// `flag`'s token as an unsigned 64-bit number (`C`, `E`, `D`, `J`).
    pub fn u64(&self, flag: u8) -> Option<u64> {
        self.token(flag).and_then(parse_u64)
    }

    /// `flag`'s token as an unsigned 32-bit number (`F`).
    pub fn u32(&self, flag: u8) -> Option<u32> {
        self.token(flag).and_then(parse_u32)
    }

    /// `flag`'s token as a signed time in seconds (`T`, `N`, `R`); within i32 range.
    pub fn i64(&self, flag: u8) -> Option<i64> {
        self.token(flag).and_then(parse_i32).map(i64::from)
    }

    /// The opaque word to echo back, `O` included (memcached copies it verbatim).
    pub fn opaque(&self) -> Option<&'a [u8]> {
        let word = Keys::new(self.raw).find(|w| w.first() == Some(&b'O'))?;
        Some(word)
    }

    /// `q`: suppress the nominal reply (HD for ms/md/ma, EN for mg).
    pub fn quiet(&self) -> bool {
        self.has(b'q')
    }

    /// `b`: the key is base64; decode it with [`crate::decode_base64_key`].
    pub fn base64_key(&self) -> bool {
        self.has(b'b')
    }

    /// The `ms` mode from `M`: `E` add, `A` append, `P` prepend, `R` replace,
    /// `S` or absent set. memcached upgrades Set/Replace to a CAS store when
    /// `C` is present; that choice is left to the caller.
    pub fn set_mode(&self) -> StoreKind {
        match self.token(b'M') {
            Some(b"E") => StoreKind::Add,
            Some(b"A") => StoreKind::Append,
            Some(b"P") => StoreKind::Prepend,
            Some(b"R") => StoreKind::Replace,
            _ => StoreKind::Set,
        }
    }

    /// The `ma` mode from `M`: `D`/`-` decrement, `I`/`+` or absent increment.
    pub fn arith_mode(&self) -> ArithMode {
        match self.token(b'M') {
            Some(b"D") | Some(b"-") => ArithMode::Decr,
            _ => ArithMode::Incr,
        }
    }
}

impl fmt::Debug for MetaFlags<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MetaFlags(\"{}\")", self.raw.escape_ascii())
    }
}

/// Checks flags as memcached's `_meta_flag_preparse` does, returning the
/// `CLIENT_ERROR` text on failure. An unknown or repeated flag stops the scan
/// at once; a bad token is remembered and the scan goes on, so the last bad
/// token's message wins, as in memcached. `key` is needed for the `b` flag.
pub(crate) fn preparse(flags: MetaFlags<'_>, key: &[u8]) -> Result<(), &'static str> {
    const BAD_TOKEN: &str = "bad token in command line format";
    let mut seen = [false; 128];
    let mut msg: Option<&'static str> = None;
    let mut failed = false;
    for MetaFlag { flag, token } in flags.iter() {
        let idx = usize::from(flag);
        // memcached reports bytes >= 127 as duplicates, whatever they are.
        if idx >= 127 || seen[idx] {
            return Err("duplicate flag");
        }
        seen[idx] = true;
        let bad = match flag {
            b'b' => (!is_base64_key(key)).then_some("error decoding key"),
            b'N' | b'T' | b'R' => parse_i32(token).is_none().then_some(BAD_TOKEN),
            b'C' | b'E' => parse_u64(token).is_none().then_some(BAD_TOKEN),
            b'J' => parse_u64(token)
                .is_none()
                .then_some("invalid numeric initial value"),
            b'D' => parse_u64(token)
                .is_none()
                .then_some("invalid numeric delta value"),
            b'M' => (token.len() != 1).then_some("incorrect length for M token"),
            b'F' => {
                // memcached flags the failure without setting a message of its own.
                failed |= parse_u32(token).is_none();
                None
            }
            b'c' | b'f' | b'h' | b'k' | b'l' | b'q' | b's' | b't' | b'u' | b'v' | b'x' | b'I'
            | b'L' | b'O' | b'P' => None,
            _ => return Err("invalid flag"),
        };
        if bad.is_some() {
            msg = bad;
        }
    }
    match (msg, failed) {
        (Some(m), _) => Err(m),
        (None, true) => Err("bad command line format"),
        (None, false) => Ok(()),
    }
}

/// memcached rejects an opaque word longer than [`MAX_OPAQUE_LEN`] when it builds the reply;
/// we check it up front since the outcome does not depend on the item.
pub(crate) fn opaque_too_long(flags: MetaFlags<'_>) -> bool {
    flags.opaque().is_some_and(|o| o.len() > MAX_OPAQUE_LEN)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(raw: &str) -> Result<(), &'static str> {
        preparse(MetaFlags::new(raw.as_bytes()), b"Zm9v")
    }

    #[test]
    fn accepts_known_flags() {
        assert_eq!(
            check("v c f t k O123 q s h l u T30 N-1 R5 E9 C1 D2 J3 MD F4 I x b P L"),
            Ok(())
        );
        assert_eq!(check(""), Ok(()));
        assert_eq!(check("   "), Ok(()));
    }

    #[test]
    fn rejects_unknown_and_duplicates() {
        assert_eq!(check("v z"), Err("invalid flag"));
        assert_eq!(check("1"), Err("invalid flag"));
        assert_eq!(check("v v"), Err("duplicate flag"));
        assert_eq!(check("T1 T2"), Err("duplicate flag"));
        assert_eq!(check("\u{7f}"), Err("duplicate flag"));
        // An unknown flag wins over an earlier bad token.
        assert_eq!(check("Tx z"), Err("invalid flag"));
    }

    #[test]
    fn token_messages() {
        assert_eq!(check("T"), Err("bad token in command line format"));
        assert_eq!(check("Tabc"), Err("bad token in command line format"));
        assert_eq!(
            check("N99999999999"),
            Err("bad token in command line format")
        );
        assert_eq!(check("C-1"), Err("bad token in command line format"));
        assert_eq!(check("E"), Err("bad token in command line format"));
        assert_eq!(check("Jx"), Err("invalid numeric initial value"));
        assert_eq!(check("D-1"), Err("invalid numeric delta value"));
        assert_eq!(check("M"), Err("incorrect length for M token"));
        assert_eq!(check("MEE"), Err("incorrect length for M token"));
        assert_eq!(check("F-1"), Err("bad command line format"));
        // Last bad token's message wins.
        assert_eq!(check("Dx Jx"), Err("invalid numeric initial value"));
        assert_eq!(check("Dx F-1"), Err("invalid numeric delta value"));
        assert_eq!(
            preparse(MetaFlags::new(b"b"), b"not base64"),
            Err("error decoding key")
        );
    }

    #[test]
    fn typed_reads() {
        let f = MetaFlags::new(b"v T-1 C18446744073709551615 F7 Oab MA q");
        assert!(f.has(b'v') && f.quiet() && !f.base64_key());
        assert_eq!(f.i64(b'T'), Some(-1));
        assert_eq!(f.u64(b'C'), Some(u64::MAX));
        assert_eq!(f.u32(b'F'), Some(7));
        assert_eq!(f.token(b'O'), Some(&b"ab"[..]));
        assert_eq!(f.opaque(), Some(&b"Oab"[..]));
        assert_eq!(f.token(b'v'), Some(&b""[..]));
        assert_eq!(f.token(b'k'), None);
        assert_eq!(f.set_mode(), StoreKind::Append);
        assert_eq!(MetaFlags::new(b"M-").arith_mode(), ArithMode::Decr);
        assert_eq!(MetaFlags::new(b"").arith_mode(), ArithMode::Incr);
        let order: Vec<u8> = f.iter().map(|f| f.flag).collect();
        assert_eq!(order, b"vTCFOMq");
    }
}
