//! Reply encoding: appends RESP2/RESP3 replies to a caller-owned output buffer.
//!
//! Every function takes the protocol version where RESP2 and RESP3 differ, so
//! command code states its intent once (`map_len`, `null`, `double`) and the
//! downgrade to RESP2 follows Redis's own conventions.

use std::io::Write;

/// The protocol a connection negotiated with `HELLO`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    Resp2,
    Resp3,
}

pub const OK: &[u8] = b"+OK\r\n";
pub const PONG: &[u8] = b"+PONG\r\n";
pub const QUEUED: &[u8] = b"+QUEUED\r\n";
pub const ZERO: &[u8] = b":0\r\n";
pub const ONE: &[u8] = b":1\r\n";
pub const EMPTY_ARRAY: &[u8] = b"*0\r\n";
pub const EMPTY_BULK: &[u8] = b"$0\r\n\r\n";
pub const NULL_BULK_RESP2: &[u8] = b"$-1\r\n";
pub const NULL_ARRAY_RESP2: &[u8] = b"*-1\r\n";
pub const NULL_RESP3: &[u8] = b"_\r\n";
pub const ERR_SYNTAX: &[u8] = b"-ERR syntax error\r\n";
pub const ERR_NOT_INTEGER: &[u8] = b"-ERR value is not an integer or out of range\r\n";
pub const ERR_NOT_FLOAT: &[u8] = b"-ERR value is not a valid float\r\n";
pub const ERR_WRONGTYPE: &[u8] =
    b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";

/// `+OK`
pub fn ok(out: &mut Vec<u8>) {
    out.extend_from_slice(OK);
}

/// A status line. CR and LF in `s` become spaces: a line-oriented type
/// cannot carry them, and letting them through would desynchronise the client.
pub fn simple(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'+');
    line_body(out, s);
}

/// `-<msg>`, where `msg` starts with the error code (`ERR ...`,
/// `WRONGTYPE ...`). CR and LF become spaces, as Redis does for errors.
pub fn error(out: &mut Vec<u8>, msg: &[u8]) {
    out.push(b'-');
    line_body(out, msg);
}

/// The line body plus CRLF, with CR/LF in `s` replaced by spaces.
pub(crate) fn line_body(out: &mut Vec<u8>, s: &[u8]) {
    let start = out.len();
    out.extend_from_slice(s);
    for b in &mut out[start..] {
        if *b == b'\r' || *b == b'\n' {
            *b = b' ';
        }
    }
    out.extend_from_slice(b"\r\n");
}

fn header(out: &mut Vec<u8>, kind: u8, n: usize) {
    out.push(kind);
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    out.extend_from_slice(b"\r\n");
}

pub fn integer(out: &mut Vec<u8>, i: i64) {
    out.push(b':');
    out.extend_from_slice(itoa::Buffer::new().format(i).as_bytes());
    out.extend_from_slice(b"\r\n");
}

pub fn bulk(out: &mut Vec<u8>, data: &[u8]) {
    out.reserve(data.len() + 16);
    header(out, b'$', data.len());
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// A missing value where a string was expected (GET of a missing key).
pub fn null(out: &mut Vec<u8>, v: Version) {
    out.extend_from_slice(match v {
        Version::Resp2 => NULL_BULK_RESP2,
        Version::Resp3 => NULL_RESP3,
    });
}

/// A missing value where an aggregate was expected (e.g. timed-out BLPOP).
pub fn null_array(out: &mut Vec<u8>, v: Version) {
    out.extend_from_slice(match v {
        Version::Resp2 => NULL_ARRAY_RESP2,
        Version::Resp3 => NULL_RESP3,
    });
}

/// Header of an array; the `n` elements must follow.
pub fn array_len(out: &mut Vec<u8>, n: usize) {
    header(out, b'*', n);
}

/// Header of a map of `n_pairs` key/value pairs; RESP2 sees a flat array.
pub fn map_len(out: &mut Vec<u8>, n_pairs: usize, v: Version) {
    match v {
        Version::Resp2 => header(out, b'*', n_pairs.saturating_mul(2)),
        Version::Resp3 => header(out, b'%', n_pairs),
    }
}

pub fn set_len(out: &mut Vec<u8>, n: usize, v: Version) {
    match v {
        Version::Resp2 => header(out, b'*', n),
        Version::Resp3 => header(out, b'~', n),
    }
}

/// Out-of-band message header (pub/sub, invalidation).
pub fn push_len(out: &mut Vec<u8>, n: usize, v: Version) {
    match v {
        Version::Resp2 => header(out, b'*', n),
        Version::Resp3 => header(out, b'>', n),
    }
}

/// RESP3 `,<double>`; RESP2 gets the same text as a bulk string.
pub fn double(out: &mut Vec<u8>, d: f64, v: Version) {
    let mut text = [0u8; 32];
    let mut cursor = &mut text[..];
    // Most doubles fit in 32 bytes; huge magnitudes print hundreds of digits
    // without an exponent, and those take the slower path.
    if write_double(&mut cursor, d).is_ok() {
        let len = 32 - cursor.len();
        double_text(out, &text[..len], v);
    } else {
        let mut long = Vec::new();
        format_double(d, &mut long);
        double_text(out, &long, v);
    }
}

fn double_text(out: &mut Vec<u8>, text: &[u8], v: Version) {
    match v {
        Version::Resp2 => bulk(out, text),
        Version::Resp3 => {
            out.push(b',');
            out.extend_from_slice(text);
            out.extend_from_slice(b"\r\n");
        }
    }
}

/// Appends `d` the way `INCRBYFLOAT` / `HINCRBYFLOAT` print it: `inf`,
/// `-inf`, `nan`, otherwise the shortest text that reads back as the same
/// double, never with an exponent and without a trailing `.0` (`10.5`, `3`,
/// `5000`, `0.0001`). Negative zero prints as `0`, as in Redis.
pub fn format_double(d: f64, out: &mut Vec<u8>) {
    // Writing to a Vec cannot fail.
    let _ = write_double(out, d);
}

fn write_double(w: &mut impl Write, d: f64) -> std::io::Result<()> {
    if d.is_nan() {
        w.write_all(b"nan")
    } else if d.is_infinite() {
        w.write_all(if d > 0.0 { b"inf" } else { b"-inf" })
    } else if d == 0.0 {
        w.write_all(b"0")
    } else {
        // Rust's Display for f64 is shortest-round-trip and never uses an
        // exponent, which is exactly Redis's human-readable form.
        write!(w, "{d}")
    }
}

/// RESP3 `#t`/`#f`; RESP2 `:1`/`:0`.
pub fn boolean(out: &mut Vec<u8>, b: bool, v: Version) {
    out.extend_from_slice(match (v, b) {
        (Version::Resp2, true) => ONE,
        (Version::Resp2, false) => ZERO,
        (Version::Resp3, true) => b"#t\r\n",
        (Version::Resp3, false) => b"#f\r\n",
    });
}

/// RESP3 verbatim string (`=<len>\r\n<fmt>:<text>\r\n`, `fmt` e.g. `txt`);
/// RESP2 gets `text` as a plain bulk string.
pub fn verbatim(out: &mut Vec<u8>, format: &[u8; 3], text: &[u8], v: Version) {
    match v {
        Version::Resp2 => bulk(out, text),
        Version::Resp3 => {
            header(out, b'=', text.len().saturating_add(4));
            out.extend_from_slice(format);
            out.push(b':');
            out.extend_from_slice(text);
            out.extend_from_slice(b"\r\n");
        }
    }
}

/// RESP3 `(<digits>`; RESP2 gets the digits as a bulk string, as in Redis.
pub fn big_number(out: &mut Vec<u8>, digits: &[u8], v: Version) {
    match v {
        Version::Resp2 => bulk(out, digits),
        Version::Resp3 => {
            out.push(b'(');
            line_body(out, digits);
        }
    }
}

#[cfg(test)]
mod tests;
