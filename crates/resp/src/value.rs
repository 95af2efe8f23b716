//! Client side: parsing replies (RESP2 and RESP3) into values, skipping them cheaply, and encoding commands.

mod scan;
#[cfg(test)]
mod tests;

use crate::ProtocolError;
use scan::{read_item, Agg, Item};

/// One reply. Payloads are bytes, never `String`: replies are binary-safe.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Simple(Vec<u8>),
    /// `-...` and RESP3 blob errors `!...`, code included (`ERR foo`).
    Error(Vec<u8>),
    Integer(i64),
    Bulk(Vec<u8>),
    /// `$-1`, `*-1` and RESP3 `_`.
    Null,
    Array(Vec<Value>),
    Map(Vec<(Value, Value)>),
    Set(Vec<Value>),
    Push(Vec<Value>),
    Double(f64),
    Boolean(bool),
    /// The text of a verbatim string, without its `txt:`-style format prefix.
    Verbatim(Vec<u8>),
    BigNumber(Vec<u8>),
}

/// Parses one reply from the start of `buf`: `Ok(None)` if it is not all
/// there yet, otherwise the value and the number of bytes it used.
/// Attributes (`|`) are read and dropped; the bytes reported include them.
pub fn parse_value(buf: &[u8]) -> Result<Option<(Value, usize)>, ProtocolError> {
    // Validating the whole frame first means nothing is allocated for a
    // reply that is still arriving, and the build below cannot run short.
    let Some(len) = skip_value(buf)? else {
        return Ok(None);
    };
    let value = build(buf.get(..len).unwrap_or_default())?;
    Ok(Some((value, len)))
}

/// Deepest aggregate nesting accepted. Real replies nest a handful of
/// levels; the bound keeps hostile input from costing unbounded memory, and
/// keeps the recursive `Drop` of a parsed [`Value`] well within the stack.
pub const MAX_DEPTH: usize = 128;

/// The length of the first complete reply in `buf`, or `Ok(None)` if it is
/// incomplete, without allocating. Accepts and rejects exactly what
/// [`parse_value`] does.
pub fn skip_value(buf: &[u8]) -> Result<Option<usize>, ProtocolError> {
    // owed[d]: values still expected at nesting level d.
    let mut owed = [0usize; MAX_DEPTH + 1];
    owed[0] = 1;
    let mut depth = 0;
    let mut pos = 0;
    loop {
        let Some((item, next)) = read_item(buf, pos)? else {
            return Ok(None);
        };
        pos = next;
        let children = match item {
            // An attribute annotates the value after it, which is still owed.
            Item::Aggregate(Agg::Attribute, n) => n.saturating_mul(2),
            Item::Aggregate(agg, n) => {
                owed[depth] -= 1;
                if agg == Agg::Map {
                    n.saturating_mul(2)
                } else {
                    n
                }
            }
            _ => {
                owed[depth] -= 1;
                0
            }
        };
        if children > 0 {
            depth += 1;
            let Some(slot) = owed.get_mut(depth) else {
                return Err(ProtocolError::new(
                    "Protocol error: reply nested too deeply",
                ));
            };
            *slot = children;
        }
        while owed[depth] == 0 {
            if depth == 0 {
                return Ok(Some(pos));
            }
            depth -= 1;
        }
    }
}

struct Frame {
    agg: Agg,
    left: usize,
    items: Vec<Value>,
}

/// Builds the value of a frame that [`skip_value`] has already validated,
/// with an explicit stack so that nesting costs no recursion.
fn build(buf: &[u8]) -> Result<Value, ProtocolError> {
    let truncated = || ProtocolError::new("Protocol error: truncated reply");
    let mut stack: Vec<Frame> = Vec::new();
    let mut pos = 0;
    loop {
        let (item, next) = read_item(buf, pos)?.ok_or_else(truncated)?;
        pos = next;
        let mut value = match item {
            Item::Aggregate(agg, n) if n > 0 => {
                let left = match agg {
                    Agg::Map | Agg::Attribute => n.saturating_mul(2),
                    _ => n,
                };
                // Each element takes at least 3 bytes, which bounds the
                // allocation by the input whatever count the header claims.
                let capacity = left.min(buf.len().saturating_sub(pos) / 3);
                stack.push(Frame {
                    agg,
                    left,
                    items: Vec::with_capacity(capacity),
                });
                continue;
            }
            Item::Aggregate(Agg::Attribute, _) => continue,
            Item::Aggregate(agg, _) => finish(agg, Vec::new()),
            scalar => scalar.to_value(),
        };
        loop {
            let Some(top) = stack.last_mut() else {
                return Ok(value);
            };
            top.items.push(value);
            top.left = top.left.saturating_sub(1);
            if top.left > 0 {
                break;
            }
            let Some(frame) = stack.pop() else {
                return Err(truncated());
            };
            if let Agg::Attribute = frame.agg {
                // Dropped; the value it annotates is read next.
                break;
            }
            value = finish(frame.agg, frame.items);
        }
    }
}

fn finish(agg: Agg, items: Vec<Value>) -> Value {
    match agg {
        Agg::Array => Value::Array(items),
        Agg::Set => Value::Set(items),
        Agg::Push => Value::Push(items),
        Agg::Map | Agg::Attribute => {
            let mut pairs = Vec::with_capacity(items.len() / 2);
            let mut it = items.into_iter();
            while let (Some(k), Some(v)) = (it.next(), it.next()) {
                pairs.push((k, v));
            }
            Value::Map(pairs)
        }
    }
}

/// Appends `args` as a RESP array of bulk strings, the only request form
/// Redis accepts for binary data.
pub fn encode_command(out: &mut Vec<u8>, args: &[&[u8]]) {
    let payload: usize = args.iter().map(|a| a.len() + 16).sum();
    out.reserve(payload + 16);
    crate::reply::array_len(out, args.len());
    for arg in args {
        crate::reply::bulk(out, arg);
    }
}
