//! Server-side request framing: one RESP multibulk or inline command per call, as argument ranges.
//!
//! The parser is stateless: on `Incomplete` the caller reads more and calls
//! again with the same buffer start. Errors and their messages follow Redis 7
//! (`processMultibulkBuffer` / `processInlineBuffer` in networking.c).

mod inline;
#[cfg(test)]
mod tests;

use crate::num::string2ll;
use std::ops::Range;

pub use crate::ProtocolError;

/// Bounds on what a client may make the server buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest accepted `$<len>` (Redis `proto-max-bulk-len`).
    pub max_bulk_len: usize,
    /// Largest accepted `*<n>` (Redis 7: `INT_MAX`; what a request may really hold is bounded
    /// by the caller's input buffer limit, since every argument takes at least 6 bytes).
    pub max_multibulk_len: usize,
    /// Longest inline line, and longest `*`/`$` header line, without a
    /// terminator before the request is rejected (Redis `PROTO_INLINE_MAX_SIZE`).
    pub max_inline_len: usize,
    /// The client has not authenticated on a server that requires it: like Redis, refuse
    /// more than [`UNAUTH_MAX_MULTIBULK`] arguments and bulks longer than
    /// [`UNAUTH_MAX_BULK`], so that strangers cannot make the server buffer much.
    pub unauthenticated: bool,
}

/// Most arguments an unauthenticated client may send in one request.
pub const UNAUTH_MAX_MULTIBULK: usize = 10;
/// Longest argument an unauthenticated client may send.
pub const UNAUTH_MAX_BULK: usize = 16 * 1024;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bulk_len: 512 * 1024 * 1024,
            max_multibulk_len: i32::MAX as usize,
            max_inline_len: 64 * 1024,
            unauthenticated: false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed {
    /// A whole request was parsed; this many bytes of the buffer belong to it.
    /// Zero arguments (`*0`, `*-1`, an empty inline line) is a valid result
    /// that the caller should skip.
    Complete(usize),
    /// More bytes are needed. `need` is, when known, the buffer length below
    /// which calling again cannot make progress (once inside the last
    /// argument's payload it is the exact frame length), so the caller can
    /// reserve capacity and avoid pointless re-parsing of huge values.
    Incomplete { need: Option<usize> },
}

/// Which byte slice the argument ranges index into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgSource {
    /// Ranges index the `buf` passed to [`parse_request`].
    Buffer,
    /// Ranges index `scratch`: the inline line had quotes, so its arguments
    /// had to be decoded and are no longer substrings of the input.
    Scratch,
}

/// Where an incomplete multibulk request stopped, so that the next call, given the same bytes
/// plus more, goes on from there instead of parsing the arguments it already has again (a
/// request of millions of arguments arriving over many reads would otherwise cost quadratic
/// time).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Resume {
    /// Offset of the next argument's `$` header; 0 when there is nothing to resume.
    pos: usize,
    /// Arguments still to parse.
    remaining: usize,
}

impl Resume {
    /// Whether a partial request is remembered (and `args` holds its first arguments).
    pub fn is_active(&self) -> bool {
        self.pos != 0
    }
}

/// Parses one request (a RESP array of bulk strings, or an inline command
/// line) from the start of `buf`.
///
/// On `Complete`, `args` holds one range per argument (into `buf` or
/// `scratch`, as the returned [`ArgSource`] says). On anything else `args`
/// is left empty. Neither vector is shrunk, so reusing them across calls
/// keeps the steady state allocation-free.
pub fn parse_request(
    buf: &[u8],
    limits: &Limits,
    args: &mut Vec<Range<usize>>,
    scratch: &mut Vec<u8>,
) -> Result<(Parsed, ArgSource), ProtocolError> {
    let result = parse_request_resumable(buf, limits, args, scratch, &mut Resume::default());
    if !matches!(result, Ok((Parsed::Complete(_), _))) {
        args.clear();
    }
    result
}

/// [`parse_request`] for a caller that keeps `args` and `resume` between calls: when a
/// multibulk request is incomplete, `args` keeps the arguments parsed so far and `resume`
/// where they end, and the next call (whose `buf` must start with the same bytes) parses only
/// what follows. Any other outcome leaves `resume` inactive (and `args` empty unless
/// `Complete`).
pub fn parse_request_resumable(
    buf: &[u8],
    limits: &Limits,
    args: &mut Vec<Range<usize>>,
    scratch: &mut Vec<u8>,
    resume: &mut Resume,
) -> Result<(Parsed, ArgSource), ProtocolError> {
    if resume.is_active() && (buf.first() != Some(&b'*') || buf.len() < resume.pos) {
        // Not the request that was remembered: start over.
        *resume = Resume::default();
    }
    if !resume.is_active() {
        args.clear();
    }
    let result = match buf.first() {
        None => Ok((Parsed::Incomplete { need: None }, ArgSource::Buffer)),
        Some(b'*') => multibulk(buf, limits, args, resume).map(|p| (p, ArgSource::Buffer)),
        Some(_) => inline::parse(buf, limits, args, scratch),
    };
    match result {
        Ok((Parsed::Complete(_), _)) => {}
        Ok((Parsed::Incomplete { .. }, _)) if resume.is_active() => {}
        _ => {
            *resume = Resume::default();
            args.clear();
        }
    }
    result
}

enum Line {
    /// Index of the `\r`; at least one byte follows it.
    Cr(usize),
    Incomplete,
    TooBig,
}

/// Redis looks for the `\r` anywhere in the unparsed input and only calls a
/// header "too big" when there is none and more than the inline limit is
/// buffered; a long header that does end in `\r` fails number parsing
/// instead. Mirroring that keeps our error messages identical to Redis's.
fn header_line(buf: &[u8], start: usize, max_line: usize) -> Line {
    let rest = buf.get(start..).unwrap_or_default();
    match memchr::memchr(b'\r', rest) {
        None if rest.len() > max_line => Line::TooBig,
        None => Line::Incomplete,
        Some(i) if i + 1 >= rest.len() => Line::Incomplete,
        Some(i) => Line::Cr(start + i),
    }
}

/// The number between the type byte at `start` and the `\r` at `cr`,
/// provided the `\r` is really followed by `\n`. Redis skips that byte
/// unchecked; we refuse it so a desynchronised stream fails loudly.
fn header_number(buf: &[u8], start: usize, cr: usize) -> Option<i64> {
    if buf.get(cr + 1) != Some(&b'\n') {
        return None;
    }
    string2ll(buf.get(start + 1..cr)?)
}

fn multibulk(
    buf: &[u8],
    limits: &Limits,
    args: &mut Vec<Range<usize>>,
    resume: &mut Resume,
) -> Result<Parsed, ProtocolError> {
    let (mut pos, count) = if resume.is_active() {
        (resume.pos, resume.remaining)
    } else {
        match multibulk_header(buf, limits)? {
            Header::Incomplete => return Ok(Parsed::Incomplete { need: None }),
            Header::Empty(n) => return Ok(Parsed::Complete(n)),
            Header::Count { count, first } => (first, count),
        }
    };
    for done in 0..count {
        // Remembered before each argument, so an incomplete one is parsed again from its
        // header next time (and so is the only one parsed twice).
        *resume = Resume {
            pos,
            remaining: count - done,
        };
        let cr = match header_line(buf, pos, limits.max_inline_len) {
            Line::Cr(cr) => cr,
            Line::Incomplete => return Ok(Parsed::Incomplete { need: None }),
            Line::TooBig => {
                return Err(ProtocolError::new(
                    "Protocol error: too big bulk count string",
                ))
            }
        };
        // Header lines are found before the type byte is checked, as in Redis.
        let kind = buf.get(pos).copied().unwrap_or(b'\r');
        if kind != b'$' {
            return Err(expected_dollar(kind));
        }
        let len = header_number(buf, pos, cr)
            .and_then(|n| usize::try_from(n).ok())
            .filter(|&n| n <= limits.max_bulk_len)
            .ok_or_else(|| ProtocolError::new("Protocol error: invalid bulk length"))?;
        if limits.unauthenticated && len > UNAUTH_MAX_BULK {
            return Err(ProtocolError::new(
                "Protocol error: unauthenticated bulk length",
            ));
        }
        let start = cr + 2;
        let end = start.saturating_add(len);
        let frame_end = end.saturating_add(2);
        match buf.get(end..frame_end) {
            None => {
                return Ok(Parsed::Incomplete {
                    need: Some(frame_end),
                })
            }
            Some(b"\r\n") => {}
            Some(_) => {
                return Err(ProtocolError::new(
                    "Protocol error: expected CRLF after bulk data",
                ))
            }
        }
        args.push(start..end);
        pos = frame_end;
    }
    *resume = Resume::default();
    Ok(Parsed::Complete(pos))
}

enum Header {
    Incomplete,
    /// `*0` or a negative count: a request of no arguments, this many bytes long.
    Empty(usize),
    /// `count` arguments, the first starting at offset `first`.
    Count {
        count: usize,
        first: usize,
    },
}

fn multibulk_header(buf: &[u8], limits: &Limits) -> Result<Header, ProtocolError> {
    let cr = match header_line(buf, 0, limits.max_inline_len) {
        Line::Cr(cr) => cr,
        Line::Incomplete => return Ok(Header::Incomplete),
        Line::TooBig => {
            return Err(ProtocolError::new(
                "Protocol error: too big mbulk count string",
            ))
        }
    };
    let count = match header_number(buf, 0, cr) {
        Some(n) if n <= 0 => return Ok(Header::Empty(cr + 2)),
        Some(n) => usize::try_from(n)
            .ok()
            .filter(|&n| n <= limits.max_multibulk_len),
        None => None,
    }
    .ok_or_else(|| ProtocolError::new("Protocol error: invalid multibulk length"))?;
    if limits.unauthenticated && count > UNAUTH_MAX_MULTIBULK {
        return Err(ProtocolError::new(
            "Protocol error: unauthenticated multibulk length",
        ));
    }
    Ok(Header::Count {
        count,
        first: cr + 2,
    })
}

fn expected_dollar(got: u8) -> ProtocolError {
    let mut msg = String::from("Protocol error: expected '$', got '");
    crate::error::push_byte(&mut msg, got);
    msg.push('\'');
    ProtocolError(msg)
}
