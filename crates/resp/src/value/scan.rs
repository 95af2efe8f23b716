//! Reading one reply item (a scalar, or an aggregate's header) at a position, shared by skipping and parsing.

use crate::num::parse_i64;
use crate::ProtocolError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Agg {
    Array,
    Map,
    Set,
    Push,
    Attribute,
}

/// Scalars borrow from the input so that skipping never copies.
#[derive(Debug, PartialEq)]
pub(super) enum Item<'a> {
    Simple(&'a [u8]),
    Error(&'a [u8]),
    Integer(i64),
    Bulk(&'a [u8]),
    Null,
    Double(f64),
    Boolean(bool),
    Verbatim(&'a [u8]),
    BigNumber(&'a [u8]),
    /// An aggregate header with its element count (pairs for maps and
    /// attributes); the elements follow.
    Aggregate(Agg, usize),
}

impl Item<'_> {
    pub(super) fn to_value(&self) -> super::Value {
        use super::Value;
        match *self {
            Item::Simple(s) => Value::Simple(s.to_vec()),
            Item::Error(s) => Value::Error(s.to_vec()),
            Item::Integer(i) => Value::Integer(i),
            Item::Bulk(s) => Value::Bulk(s.to_vec()),
            Item::Null => Value::Null,
            Item::Double(d) => Value::Double(d),
            Item::Boolean(b) => Value::Boolean(b),
            Item::Verbatim(s) => Value::Verbatim(s.to_vec()),
            Item::BigNumber(s) => Value::BigNumber(s.to_vec()),
            // Aggregates are assembled from their elements by the caller.
            Item::Aggregate(..) => Value::Null,
        }
    }
}

fn error(what: &str) -> ProtocolError {
    ProtocolError(format!("Protocol error: {what}"))
}

/// The line after the type byte at `pos`, and the position after its CRLF.
fn line(buf: &[u8], pos: usize) -> Result<Option<(&[u8], usize)>, ProtocolError> {
    let body_start = pos + 1;
    let Some(rest) = buf.get(body_start..) else {
        return Ok(None);
    };
    let Some(nl) = memchr::memchr(b'\n', rest) else {
        return Ok(None);
    };
    match nl.checked_sub(1).and_then(|cr| rest.get(..=cr)) {
        Some([body @ .., b'\r']) => Ok(Some((body, body_start + nl + 1))),
        _ => Err(error("expected CRLF at end of line")),
    }
}

/// A length header: `Ok(None)` in the inner option means `-1` (null).
fn length(body: &[u8]) -> Result<Option<usize>, ProtocolError> {
    match parse_i64(body) {
        Some(-1) => Ok(None),
        Some(n) => usize::try_from(n)
            .map(Some)
            .map_err(|_| error("invalid length")),
        None => Err(error("invalid length")),
    }
}

/// Reads the item at `pos`: `Ok(None)` if it is incomplete, else the item
/// and the position just after it (after the payload, for strings).
pub(super) fn read_item(
    buf: &[u8],
    pos: usize,
) -> Result<Option<(Item<'_>, usize)>, ProtocolError> {
    let Some(&kind) = buf.get(pos) else {
        return Ok(None);
    };
    if !matches!(
        kind,
        b'+' | b'-'
            | b':'
            | b'_'
            | b','
            | b'#'
            | b'('
            | b'$'
            | b'!'
            | b'='
            | b'*'
            | b'%'
            | b'~'
            | b'>'
            | b'|'
    ) {
        let mut msg = String::from("Protocol error: invalid reply type byte '");
        crate::error::push_byte(&mut msg, kind);
        msg.push('\'');
        return Err(ProtocolError(msg));
    }
    let Some((body, next)) = line(buf, pos)? else {
        return Ok(None);
    };
    let item = match kind {
        b'+' => Item::Simple(body),
        b'-' => Item::Error(body),
        b':' => Item::Integer(parse_i64(body).ok_or_else(|| error("invalid integer"))?),
        b'_' if body.is_empty() => Item::Null,
        b'_' => return Err(error("invalid null")),
        b',' => Item::Double(
            std::str::from_utf8(body)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| error("invalid double"))?,
        ),
        b'#' => match body {
            b"t" => Item::Boolean(true),
            b"f" => Item::Boolean(false),
            _ => return Err(error("invalid boolean")),
        },
        b'(' => match body.strip_prefix(b"-").unwrap_or(body) {
            digits if !digits.is_empty() && digits.iter().all(u8::is_ascii_digit) => {
                Item::BigNumber(body)
            }
            _ => return Err(error("invalid big number")),
        },
        b'$' | b'!' | b'=' => return blob(buf, kind, body, next),
        _ => {
            let agg = match kind {
                b'*' => Agg::Array,
                b'%' => Agg::Map,
                b'~' => Agg::Set,
                b'>' => Agg::Push,
                _ => Agg::Attribute,
            };
            match (length(body)?, agg) {
                (Some(n), _) => Item::Aggregate(agg, n),
                // RESP2's null array; RESP3 has `_` for every other type.
                (None, Agg::Array) => Item::Null,
                (None, _) => return Err(error("invalid length")),
            }
        }
    };
    Ok(Some((item, next)))
}

/// The payload of a length-prefixed string whose header ended at `start`.
fn blob<'a>(
    buf: &'a [u8],
    kind: u8,
    header: &[u8],
    start: usize,
) -> Result<Option<(Item<'a>, usize)>, ProtocolError> {
    let len = match (length(header)?, kind) {
        (Some(len), _) => len,
        (None, b'$') => return Ok(Some((Item::Null, start))),
        (None, _) => return Err(error("invalid length")),
    };
    let end = start.saturating_add(len);
    let Some(framed) = buf.get(start..end.saturating_add(2)) else {
        return Ok(None);
    };
    let Some(payload) = framed.strip_suffix(b"\r\n") else {
        return Err(error("expected CRLF after bulk data"));
    };
    let item = match kind {
        b'$' => Item::Bulk(payload),
        b'!' => Item::Error(payload),
        _ => match payload {
            [_, _, _, b':', text @ ..] => Item::Verbatim(text),
            _ => return Err(error("invalid verbatim string")),
        },
    };
    Ok(Some((item, end + 2)))
}
