//! Meta-protocol replies: `<CODE> [<size>] <flags>*\r\n[<data>\r\n]`, built in place.

use crate::base64::encode_base64;

/// The two-letter status that opens every meta reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetaCode {
    /// Value follows; use [`MetaReply::value`], which also writes the size.
    Va,
    /// Success, no value ("header only").
    Hd,
    /// Miss (`mg`, `me`).
    En,
    /// Not stored.
    Ns,
    /// CAS mismatch.
    Ex,
    /// Not found.
    Nf,
    /// Answer to `mn`.
    Mn,
    /// Answer to `me`; see [`MetaDebugReply`].
    Me,
}

impl MetaCode {
    pub fn as_bytes(self) -> &'static [u8] {
        match self {
            MetaCode::Va => b"VA",
            MetaCode::Hd => b"HD",
            MetaCode::En => b"EN",
            MetaCode::Ns => b"NS",
            MetaCode::Ex => b"EX",
            MetaCode::Nf => b"NF",
            MetaCode::Mn => b"MN",
            MetaCode::Me => b"ME",
        }
    }
}

/// Builds one meta reply line straight into the output buffer.
///
/// Flags are written in call order, and the protocol wants them in request
/// order, so callers typically walk [`crate::MetaFlags::iter`] and add the
/// matching return flag for each. `W`, `X` and `Z` go last, as memcached does.
///
/// ```
/// use memcache::{MetaCode, MetaReply};
/// let mut out = Vec::new();
/// MetaReply::value(&mut out, 2).flag_num(b'c', 7).flag_int(b't', -1).finish_with_data(b"hi");
/// MetaReply::new(&mut out, MetaCode::Hd).flag(b'W').finish();
/// assert_eq!(out, b"VA 2 c7 t-1\r\nhi\r\nHD W\r\n");
/// ```
#[must_use = "a meta reply is incomplete until finish() writes its line end"]
pub struct MetaReply<'o> {
    out: &'o mut Vec<u8>,
}

impl<'o> MetaReply<'o> {
    /// Starts a reply with `code`. For `VA`, use [`MetaReply::value`] so the size comes first.
    pub fn new(out: &'o mut Vec<u8>, code: MetaCode) -> Self {
        out.extend_from_slice(code.as_bytes());
        MetaReply { out }
    }

    /// Starts `VA <size>`; finish with [`MetaReply::finish_with_data`].
    pub fn value(out: &'o mut Vec<u8>, size: usize) -> Self {
        out.extend_from_slice(b"VA ");
        out.extend_from_slice(itoa::Buffer::new().format(size).as_bytes());
        MetaReply { out }
    }

    /// ` <f>`: a bare flag such as `W`, `X`, `Z` or `b`.
    pub fn flag(self, f: u8) -> Self {
        self.out.extend_from_slice(&[b' ', f]);
        self
    }

    /// ` <f><n>`, e.g. ` c123`, ` f0`, ` s5`.
    pub fn flag_num(self, f: u8, n: u64) -> Self {
        self.out.extend_from_slice(&[b' ', f]);
        self.out
            .extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
        self
    }

    /// ` <f><n>` for signed values, e.g. ` t-1` for an item that never expires.
    pub fn flag_int(self, f: u8, n: i64) -> Self {
        self.out.extend_from_slice(&[b' ', f]);
        self.out
            .extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
        self
    }

    /// ` <f><bytes>`, e.g. ` Oabc` from `flag_bytes(b'O', token)`.
    pub fn flag_bytes(self, f: u8, bytes: &[u8]) -> Self {
        self.out.extend_from_slice(&[b' ', f]);
        self.out.extend_from_slice(bytes);
        self
    }

    /// ` k<key>`; a binary key (stored from a `b` request) goes out as
    /// base64 followed by ` b`, which tells the client how to read it.
    pub fn key(self, key: &[u8], binary: bool) -> Self {
        self.out.extend_from_slice(b" k");
        if binary {
            encode_base64(key, self.out);
            self.out.extend_from_slice(b" b");
        } else {
            self.out.extend_from_slice(key);
        }
        self
    }

    /// Ends the line.
    pub fn finish(self) {
        self.out.extend_from_slice(b"\r\n");
    }

    /// Ends the line and appends the data block with its `\r\n`.
    pub fn finish_with_data(self, data: &[u8]) {
        self.out.extend_from_slice(b"\r\n");
        self.out.extend_from_slice(data);
        self.out.extend_from_slice(b"\r\n");
    }
}

/// Builds the `me` reply: `ME <key> <name>=<value>*\r\n`.
///
/// ```
/// use memcache::MetaDebugReply;
/// let mut out = Vec::new();
/// MetaDebugReply::new(&mut out, b"foo", false).int("exp", -1).num("la", 3).field("fetch", "no").finish();
/// assert_eq!(out, b"ME foo exp=-1 la=3 fetch=no\r\n");
/// ```
#[must_use = "a meta reply is incomplete until finish() writes its line end"]
pub struct MetaDebugReply<'o> {
    out: &'o mut Vec<u8>,
}

impl<'o> MetaDebugReply<'o> {
    /// Starts the line; a binary key is written base64-encoded, as memcached does.
    pub fn new(out: &'o mut Vec<u8>, key: &[u8], binary: bool) -> Self {
        out.extend_from_slice(b"ME ");
        if binary {
            encode_base64(key, out);
        } else {
            out.extend_from_slice(key);
        }
        MetaDebugReply { out }
    }

    /// ` <name>=<value>`.
    pub fn field(self, name: &str, value: impl AsRef<[u8]>) -> Self {
        self.out.push(b' ');
        self.out.extend_from_slice(name.as_bytes());
        self.out.push(b'=');
        self.out.extend_from_slice(value.as_ref());
        self
    }

    pub fn num(self, name: &str, n: u64) -> Self {
        let mut buf = itoa::Buffer::new();
        let s = buf.format(n);
        self.field(name, s)
    }

    pub fn int(self, name: &str, n: i64) -> Self {
        let mut buf = itoa::Buffer::new();
        let s = buf.format(n);
        self.field(name, s)
    }

    pub fn finish(self) {
        self.out.extend_from_slice(b"\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_flags() {
        let mut out = Vec::new();
        for code in [
            MetaCode::Hd,
            MetaCode::En,
            MetaCode::Ns,
            MetaCode::Ex,
            MetaCode::Nf,
            MetaCode::Mn,
        ] {
            MetaReply::new(&mut out, code).finish();
        }
        assert_eq!(out, b"HD\r\nEN\r\nNS\r\nEX\r\nNF\r\nMN\r\n");

        out.clear();
        MetaReply::new(&mut out, MetaCode::Hd)
            .flag_num(b'f', 0)
            .flag_bytes(b'O', b"123")
            .key(b"foo", false)
            .flag(b'W')
            .flag(b'X')
            .flag(b'Z')
            .finish();
        assert_eq!(out, b"HD f0 O123 kfoo W X Z\r\n");
    }

    #[test]
    fn value_and_binary_key() {
        let mut out = Vec::new();
        MetaReply::value(&mut out, 0)
            .key(b"\x00\xff", true)
            .finish_with_data(b"");
        assert_eq!(out, b"VA 0 kAP8= b\r\n\r\n");
    }

    #[test]
    fn debug_reply_binary_key() {
        let mut out = Vec::new();
        MetaDebugReply::new(&mut out, b"foo", true)
            .num("cas", 9)
            .finish();
        assert_eq!(out, b"ME Zm9v cas=9\r\n");
    }
}
