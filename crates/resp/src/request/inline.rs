//! Inline commands: one text line split into arguments the way Redis's `sdssplitargs` does.

use super::{ArgSource, Limits, Parsed};
use crate::ProtocolError;
use std::ops::Range;

pub(super) fn parse(
    buf: &[u8],
    limits: &Limits,
    args: &mut Vec<Range<usize>>,
    scratch: &mut Vec<u8>,
) -> Result<(Parsed, ArgSource), ProtocolError> {
    let newline = match memchr::memchr(b'\n', buf) {
        Some(i) => i,
        None if buf.len() > limits.max_inline_len => {
            return Err(ProtocolError::new("Protocol error: too big inline request"))
        }
        None => return Ok((Parsed::Incomplete { need: None }, ArgSource::Buffer)),
    };
    let line_end = match newline.checked_sub(1) {
        Some(i) if buf.get(i) == Some(&b'\r') => i,
        _ => newline,
    };
    let line = buf.get(..line_end).unwrap_or_default();
    let consumed = Parsed::Complete(newline + 1);
    // Only quoting can make an argument differ from its bytes in the line.
    if line.iter().any(|&b| b == b'"' || b == b'\'') {
        scratch.clear();
        split_quoted(line, args, scratch)?;
        Ok((consumed, ArgSource::Scratch))
    } else {
        split_plain(line, args);
        Ok((consumed, ArgSource::Buffer))
    }
}

/// C's `isspace` in the "C" locale, which is what skips blanks between
/// arguments and what must follow a closing quote.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

/// A narrower set than [`is_space`]: Redis ends an unquoted argument only on
/// these, so `a\vb` is one argument although a leading `\v` is skipped.
fn ends_token(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

fn split_plain(line: &[u8], args: &mut Vec<Range<usize>>) {
    let mut p = 0;
    loop {
        while line.get(p).is_some_and(|&b| is_space(b)) {
            p += 1;
        }
        if p >= line.len() {
            return;
        }
        let start = p;
        while line.get(p).is_some_and(|&b| !ends_token(b)) {
            p += 1;
        }
        args.push(start..p);
    }
}

fn unbalanced() -> ProtocolError {
    ProtocolError::new("Protocol error: unbalanced quotes in request")
}

fn hex_value(b: Option<&u8>) -> Option<u8> {
    match *b? {
        d @ b'0'..=b'9' => Some(d - b'0'),
        d @ b'a'..=b'f' => Some(d - b'a' + 10),
        d @ b'A'..=b'F' => Some(d - b'A' + 10),
        _ => None,
    }
}

/// A closing quote glued to more text (`"foo"bar`) is an error in Redis.
fn check_after_quote(line: &[u8], next: usize) -> Result<(), ProtocolError> {
    match line.get(next) {
        Some(&b) if !is_space(b) => Err(unbalanced()),
        _ => Ok(()),
    }
}

/// A port of `sdssplitargs`, decoding into `scratch`. The end of the line
/// plays the role of C's terminating NUL; an embedded NUL byte is ordinary
/// data here, where Redis would silently truncate the line at it.
fn split_quoted(
    line: &[u8],
    args: &mut Vec<Range<usize>>,
    scratch: &mut Vec<u8>,
) -> Result<(), ProtocolError> {
    let mut p = 0;
    loop {
        while line.get(p).is_some_and(|&b| is_space(b)) {
            p += 1;
        }
        if p >= line.len() {
            return Ok(());
        }
        let start = scratch.len();
        let (mut in_double, mut in_single) = (false, false);
        loop {
            let c = line.get(p).copied();
            if in_double {
                match c {
                    None => return Err(unbalanced()),
                    Some(b'\\') => {
                        let hex = (hex_value(line.get(p + 2)), hex_value(line.get(p + 3)));
                        match (line.get(p + 1), hex) {
                            (Some(b'x'), (Some(hi), Some(lo))) => {
                                scratch.push(hi << 4 | lo);
                                p += 4;
                            }
                            (Some(&e), _) => {
                                scratch.push(match e {
                                    b'n' => b'\n',
                                    b'r' => b'\r',
                                    b't' => b'\t',
                                    b'b' => b'\x08',
                                    b'a' => b'\x07',
                                    other => other,
                                });
                                p += 2;
                            }
                            // A trailing backslash is kept; the missing
                            // closing quote then fails on the next turn.
                            (None, _) => {
                                scratch.push(b'\\');
                                p += 1;
                            }
                        }
                    }
                    Some(b'"') => {
                        check_after_quote(line, p + 1)?;
                        p += 1;
                        break;
                    }
                    Some(b) => {
                        scratch.push(b);
                        p += 1;
                    }
                }
            } else if in_single {
                match c {
                    None => return Err(unbalanced()),
                    Some(b'\\') if line.get(p + 1) == Some(&b'\'') => {
                        scratch.push(b'\'');
                        p += 2;
                    }
                    Some(b'\'') => {
                        check_after_quote(line, p + 1)?;
                        p += 1;
                        break;
                    }
                    Some(b) => {
                        scratch.push(b);
                        p += 1;
                    }
                }
            } else {
                match c {
                    None => break,
                    Some(b) if ends_token(b) => {
                        p += 1;
                        break;
                    }
                    // A quote may open mid-argument: `foo"bar baz"` is one
                    // argument, `foobar baz`.
                    Some(b'"') => {
                        in_double = true;
                        p += 1;
                    }
                    Some(b'\'') => {
                        in_single = true;
                        p += 1;
                    }
                    Some(b) => {
                        scratch.push(b);
                        p += 1;
                    }
                }
            }
        }
        args.push(start..scratch.len());
    }
}
