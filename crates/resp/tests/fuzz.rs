//! Fuzz targets for the RESP parsers: requests (multibulk and inline) and replies, time-bounded.
//!
//! `make test` runs each for a few seconds (`CAIRN_FUZZ_SECS`, default 5), `make fuzz` for minutes
//! with a fresh seed. prop.rs checks round trips of generated frames; these mutate valid frames
//! and check, on whatever comes out: no panic; a complete frame lies within the input and parses
//! the same from exactly its own bytes; its prefixes are incomplete; a stated `need` holds; a
//! stream fed in random pieces parses as the whole does; allocation stays proportional to the
//! input (none at all for `skip_value`), so a declared huge length cannot reserve memory.

mod checked;
mod fuzzkit;

use fuzzkit::{allocated_by, budget, hash, random_pieces, run, CountingAlloc, Rng};
use resp::request::{Limits, Parsed};
use resp::value::{parse_value, skip_value, Value};
use resp::ProtocolError;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

const DEFAULT_SECS: f64 = 5.0;

type Request = Result<(Parsed, Vec<Vec<u8>>), ProtocolError>;

/// One checked parse (`checked::parse_checked`), without the argument source.
fn parse_one(buf: &[u8], limits: &Limits) -> Request {
    checked::parse_checked(buf, limits).map(|(parsed, _, args)| (parsed, args))
}

/// What a connection does: append each piece, run every whole request, stop at an error.
fn drive_requests(stream: &[u8], pieces: &[usize]) -> (Vec<Vec<Vec<u8>>>, Option<ProtocolError>) {
    let limits = Limits::default();
    let mut pending: Vec<u8> = Vec::new();
    let mut seen = Vec::new();
    let mut rest = stream;
    for &size in pieces.iter().chain(std::iter::once(&usize::MAX)) {
        let (piece, tail) = rest.split_at(size.min(rest.len()));
        rest = tail;
        pending.extend_from_slice(piece);
        loop {
            match parse_one(&pending, &limits) {
                Ok((Parsed::Complete(n), args)) => {
                    if !args.is_empty() {
                        seen.push(args);
                    }
                    pending.drain(..n);
                }
                Ok((Parsed::Incomplete { .. }, _)) => break,
                Err(e) => return (seen, Some(e)),
            }
        }
        if rest.is_empty() {
            break;
        }
    }
    (seen, None)
}

fn check_request(input: &[u8], rng: &mut Rng) -> u64 {
    let limits = Limits::default();
    let (whole, allocated) = allocated_by(|| parse_one(input, &limits));
    // Arguments are ranges, 16 bytes each, and take at least 2 input bytes; the scratch copy of a
    // quoted line is never longer than the line. Vectors may double: 64 per byte is generous,
    // and far below what a header like `$536870912` would cost if it reserved its length.
    assert!(
        allocated <= 64 * input.len() + 1024,
        "{allocated} bytes allocated parsing {} bytes",
        input.len()
    );
    let signature = match &whole {
        Ok((Parsed::Complete(n), args)) => {
            assert_eq!(
                parse_one(&input[..*n], &limits).as_ref(),
                Ok(&(Parsed::Complete(*n), args.clone())),
                "the frame alone parses differently"
            );
            for _ in 0..3 {
                let cut = rng.below(*n);
                let prefix = parse_one(&input[..cut], &limits);
                assert!(
                    matches!(prefix, Ok((Parsed::Incomplete { .. }, _))),
                    "prefix of {cut} bytes of a {n}-byte frame: {prefix:?}"
                );
            }
            hash(format!("complete {} {}", args.len().min(4), input[0] == b'*').as_bytes())
        }
        Ok((Parsed::Incomplete { need }, _)) => {
            if let Some(need) = *need {
                // Nothing short of `need` bytes can complete the frame (the caller may wait
                // for them without parsing again).
                if need - input.len() <= 4096 {
                    let mut longer = input.to_vec();
                    while longer.len() < need - 1 {
                        longer.push(rng.next() as u8);
                    }
                    let r = parse_one(&longer, &limits);
                    assert!(
                        matches!(r, Ok((Parsed::Incomplete { .. }, _))),
                        "need {need}, yet {} bytes gave {r:?}",
                        longer.len()
                    );
                }
            }
            hash(format!("incomplete {}", need.is_some()).as_bytes())
        }
        Err(e) => hash(e.0.as_bytes()),
    };
    // Split anywhere, the stream means the same.
    let all_at_once = drive_requests(input, &[input.len()]);
    let pieces = random_pieces(rng, input.len());
    assert_eq!(
        drive_requests(input, &pieces),
        all_at_once,
        "read in pieces {pieces:?}"
    );
    // Tiny limits reach every limit check; only safety and bounds are asserted there.
    let tiny = Limits {
        max_bulk_len: 1 + rng.below(16),
        max_multibulk_len: 1 + rng.below(4),
        max_inline_len: 1 + rng.below(16),
        unauthenticated: rng.below(2) == 0,
    };
    let _ = parse_one(input, &tiny);
    signature ^ hash(format!("stream {}", all_at_once.0.len().min(3)).as_bytes())
}

const REQUEST_CORPUS: &[&[u8]] = &[
    b"*1\r\n$4\r\nPING\r\n",
    b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n",
    b"*2\r\n$3\r\nGET\r\n$0\r\n\r\n",
    b"*0\r\n",
    b"*-1\r\n",
    b"*2\r\n$4\r\nECHO\r\n$10\r\n\x00\x01\r\n\xff\xfe\r\n\r\n",
    b"PING\r\n",
    b"SET k v\n",
    b"set \"a b\" 'c d' \"\\x41\\n\\t\\\\\"\r\n",
    b"  get   key  \r\n",
    b"\r\n",
    b"echo \"unbalanced\r\n",
    b"*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING\r\n",
    b"*2\r\n$3\r\nGET\r\n$536870912\r\nabc",
];

const REQUEST_DICTIONARY: &[&[u8]] = &[
    b"*",
    b"$",
    b"\r\n",
    b"*1\r\n",
    b"*2\r\n",
    b"$3\r\nGET\r\n",
    b"$0\r\n\r\n",
    b"$-1\r\n",
    b"*-1\r\n",
    b"\"",
    b"'",
    b"\\x4",
    b"\\x41",
    b"\\",
    b"\\'",
    b" ",
    b"\t",
    b"\x0b",
    b"PING",
    b"SET",
];

const REPLY_CORPUS: &[&[u8]] = &[
    b"+OK\r\n",
    b"-ERR unknown command\r\n",
    b":-42\r\n",
    b"$5\r\nhello\r\n",
    b"$-1\r\n",
    b"*-1\r\n",
    b"*2\r\n$1\r\na\r\n:1\r\n",
    b"*3\r\n*1\r\n+x\r\n%1\r\n+k\r\n$1\r\nv\r\n~2\r\n#t\r\n#f\r\n",
    b"_\r\n",
    b",3.25\r\n",
    b",-inf\r\n",
    b"(12345678901234567890\r\n",
    b"!9\r\nERR boom!\r\n",
    b"=8\r\ntxt:text\r\n",
    b">3\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n_\r\n",
    b"|1\r\n+ttl\r\n:3\r\n$2\r\nok\r\n",
    b"%2\r\n$6\r\nserver\r\n$5\r\ncairn\r\n$5\r\nproto\r\n:3\r\n",
    b"*1\r\n*1\r\n*1\r\n*1\r\n*0\r\n",
    b"*2\r\n$3\r\nabc\r\n",
];

const REPLY_DICTIONARY: &[&[u8]] = &[
    b"*",
    b"%",
    b"~",
    b">",
    b"|",
    b"$",
    b"!",
    b"=",
    b"+",
    b"-",
    b":",
    b"_",
    b",",
    b"#",
    b"(",
    b"\r\n",
    b"*1\r\n",
    b"*9999\r\n",
    b"%1\r\n",
    b"|1\r\n",
    b"$1\r\nx\r\n",
    b"_\r\n",
    b":1\r\n",
    b"txt:",
    b"inf",
    b"nan",
    b"1e308",
    b"#t\r\n",
];

type Reply = Result<Option<(Value, usize)>, ProtocolError>;

/// Replies pipelined on one connection, read in pieces.
fn drive_replies(stream: &[u8], pieces: &[usize]) -> (Vec<Value>, Option<ProtocolError>) {
    let mut pending: Vec<u8> = Vec::new();
    let mut seen = Vec::new();
    let mut rest = stream;
    for &size in pieces.iter().chain(std::iter::once(&usize::MAX)) {
        let (piece, tail) = rest.split_at(size.min(rest.len()));
        rest = tail;
        pending.extend_from_slice(piece);
        loop {
            match parse_value(&pending) {
                Ok(Some((v, n))) => {
                    assert!(n > 0 && n <= pending.len());
                    seen.push(v);
                    pending.drain(..n);
                }
                Ok(None) => break,
                Err(e) => return (seen, Some(e)),
            }
        }
        if rest.is_empty() {
            break;
        }
    }
    (seen, None)
}

/// NaN payloads never compare equal; compare the values' debug forms instead.
fn same_replies(a: &(Vec<Value>, Option<ProtocolError>), b: &(Vec<Value>, Option<ProtocolError>)) {
    assert_eq!(format!("{a:?}"), format!("{b:?}"));
}

fn check_reply(input: &[u8], rng: &mut Rng) -> u64 {
    let (skipped, skip_alloc) = allocated_by(|| skip_value(input));
    // Nothing at all, but the message of an error.
    let limit = if skipped.is_ok() { 0 } else { 256 };
    assert!(
        skip_alloc <= limit,
        "skip_value allocated {skip_alloc} bytes: {skipped:?}"
    );
    let (parsed, allocated): (Reply, usize) = allocated_by(|| parse_value(input));
    // A value is 32 bytes per element of at least 3 input bytes, maps hold pairs and build
    // them from a list, payloads are copied once: well under 64 bytes per input byte.
    assert!(
        allocated <= 64 * input.len() + 1024,
        "{allocated} bytes allocated parsing {} bytes",
        input.len()
    );
    let signature = match (&skipped, &parsed) {
        (Ok(None), Ok(None)) => hash(b"incomplete"),
        (Ok(Some(n)), Ok(Some((value, m)))) => {
            assert_eq!(n, m, "skip_value and parse_value disagree on the length");
            assert!(*n > 0 && *n <= input.len());
            let alone = parse_value(&input[..*n]);
            assert_eq!(
                format!("{alone:?}"),
                format!("{parsed:?}"),
                "the frame alone parses differently"
            );
            for _ in 0..3 {
                let cut = rng.below(*n);
                let prefix = parse_value(&input[..cut]);
                assert!(
                    matches!(prefix, Ok(None)),
                    "prefix of {cut} bytes of a {n}-byte reply: {prefix:?}"
                );
            }
            hash(format!("complete {}", kind(value)).as_bytes())
        }
        (Err(a), Err(b)) => {
            assert_eq!(a, b, "skip_value and parse_value fail differently");
            hash(a.0.as_bytes())
        }
        (s, p) => panic!("skip_value {s:?} but parse_value {p:?}"),
    };
    let all_at_once = drive_replies(input, &[input.len()]);
    same_replies(
        &drive_replies(input, &random_pieces(rng, input.len())),
        &all_at_once,
    );
    signature ^ hash(format!("stream {}", all_at_once.0.len().min(3)).as_bytes())
}

/// The outer shape of a value, for outcome signatures.
fn kind(v: &Value) -> String {
    match v {
        Value::Array(items) | Value::Set(items) | Value::Push(items) => {
            format!("agg[{}]", items.first().map(kind).unwrap_or_default())
        }
        Value::Map(pairs) => format!(
            "map[{}]",
            pairs.first().map(|p| kind(&p.0)).unwrap_or_default()
        ),
        other => format!("{:?}", std::mem::discriminant(other)),
    }
}

#[test]
fn fuzz_request_parser() {
    run(
        "resp-request",
        budget(DEFAULT_SECS),
        REQUEST_CORPUS,
        REQUEST_DICTIONARY,
        check_request,
    );
}

#[test]
fn fuzz_reply_parser() {
    run(
        "resp-reply",
        budget(DEFAULT_SECS),
        REPLY_CORPUS,
        REPLY_DICTIONARY,
        check_reply,
    );
}
