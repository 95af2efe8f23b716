//! Fuzz targets for the memcached parser: classic text commands and meta commands, time-bounded.
//!
//! `make test` runs each for a few seconds (`CAIRN_FUZZ_SECS`, default 5), `make fuzz` for minutes
//! with a fresh seed (the engine is resp's `tests/fuzzkit`). roundtrip.rs checks generated
//! requests; these mutate valid requests and check, on whatever comes out: no panic and no
//! allocation at all; a request lies within the input and parses the same from exactly its own
//! bytes, its prefixes are incomplete, a stated `need` holds; errors always make progress; keys,
//! data blocks and meta flags hold what the server relies on (typed flag getters answer for every
//! flag present, base64 keys decode); a stream fed in random pieces parses as the whole does.

#[path = "../../resp/tests/fuzzkit/mod.rs"]
mod fuzzkit;

use fuzzkit::{allocated_by, budget, hash, random_pieces, run, CountingAlloc, Rng};
use memcache::{
    decode_base64_key, parse, Error, MetaFlags, Parsed, Request, MAX_KEY_LEN, MAX_LINE_LEN,
    MAX_OPAQUE_LEN,
};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

const DEFAULT_SECS: f64 = 5.0;

/// Value size limits the server may run with; 0 and tiny ones reach the "too large" paths.
const MAX_VALUE_SIZES: &[usize] = &[0, 3, 16, 1024, 1 << 20];

fn within(input: &[u8], part: &[u8]) -> bool {
    let (start, end) = (
        input.as_ptr() as usize,
        input.as_ptr() as usize + input.len(),
    );
    let p = part.as_ptr() as usize;
    part.is_empty() || (p >= start && p + part.len() <= end)
}

fn text_key_ok(key: &[u8]) -> bool {
    !key.is_empty() && key.len() <= MAX_KEY_LEN && key.iter().all(|&b| b > b' ' && b != 0x7f)
}

/// What the server takes for granted about a parsed meta request's flags.
fn check_flags(key: &[u8], flags: &MetaFlags<'_>) {
    for f in flags.iter() {
        let typed = match f.flag {
            b'N' | b'T' | b'R' => flags.i64(f.flag).is_some(),
            b'C' | b'E' | b'D' | b'J' => flags.u64(f.flag).is_some(),
            b'F' => flags.u32(f.flag).is_some(),
            b'M' => f.token.len() == 1,
            _ => true,
        };
        assert!(
            typed,
            "flag {} with token {:?} passed",
            f.flag as char, f.token
        );
    }
    assert!(flags.opaque().is_none_or(|o| o.len() <= MAX_OPAQUE_LEN));
    assert!(key.len() <= MAX_KEY_LEN, "key of {} bytes", key.len());
    if flags.base64_key() {
        let mut decoded = Vec::new();
        assert!(
            decode_base64_key(key, &mut decoded),
            "b key {key:?} does not decode"
        );
        assert!(!decoded.is_empty() && decoded.len() <= key.len());
    } else {
        assert!(text_key_ok(key), "meta key {key:?}");
    }
}

/// Invariants of one complete request taken from `input`.
fn check_request(input: &[u8], req: &Request<'_>, max_value_size: usize) {
    match req {
        Request::Get { keys, .. } | Request::GetAndTouch { keys, .. } => {
            for key in keys.clone() {
                assert!(text_key_ok(key) && within(input, key), "get key {key:?}");
            }
        }
        Request::Store { key, data, .. } => {
            assert!(text_key_ok(key), "store key {key:?}");
            assert!(data.len() <= max_value_size && within(input, data));
        }
        Request::Delete { key, .. }
        | Request::Incr { key, .. }
        | Request::Decr { key, .. }
        | Request::Touch { key, .. } => assert!(text_key_ok(key), "key {key:?}"),
        Request::MetaGet { key, flags }
        | Request::MetaDelete { key, flags }
        | Request::MetaArithmetic { key, flags } => check_flags(key, flags),
        Request::MetaSet { key, data, flags } => {
            check_flags(key, flags);
            assert!(data.len() <= max_value_size && within(input, data));
        }
        _ => {}
    }
}

/// A server's read loop: append each piece, act on whole requests and errors (a refused data
/// block is swallowed as it streams in), stop at a closing error. Outcomes in debug form.
fn drive(stream: &[u8], pieces: &[usize], max_value_size: usize) -> Vec<String> {
    let mut pending: Vec<u8> = Vec::new();
    let mut skip = 0usize;
    let mut seen = Vec::new();
    let mut rest = stream;
    for &size in pieces.iter().chain(std::iter::once(&usize::MAX)) {
        let (piece, tail) = rest.split_at(size.min(rest.len()));
        rest = tail;
        let dropped = skip.min(piece.len());
        skip -= dropped;
        pending.extend_from_slice(&piece[dropped..]);
        loop {
            let used = match parse(&pending, max_value_size) {
                Ok(Parsed::Complete(req, n)) => {
                    seen.push(format!("{req:?}"));
                    n
                }
                Ok(Parsed::Incomplete { .. }) => break,
                Err(e) => {
                    // (Only the count is blanked: other numbers, such as a binary opaque, stay.)
                    let consumed = format!("consumed: {}", e.consumed());
                    seen.push(format!("{e:?}").replace(&consumed, "consumed: _"));
                    if e.close() {
                        return seen;
                    }
                    let n = e.consumed();
                    assert!(n >= 1, "an error that consumes nothing: {e:?}");
                    if n > pending.len() {
                        skip = n - pending.len();
                        pending.len()
                    } else {
                        n
                    }
                }
            };
            pending.drain(..used);
        }
        if rest.is_empty() {
            break;
        }
    }
    seen
}

/// memcached drops a connection whose unterminated line outgrows its limit, so a line that
/// arrives in pieces may close where the same line read at once is served: compare up to there.
fn until_close(mut outcomes: Vec<String>) -> Vec<String> {
    if let Some(i) = outcomes.iter().position(|o| o.contains("line too long")) {
        outcomes.truncate(i);
    }
    outcomes
}

/// A request's kind and options, without its keys and data, for outcome signatures.
fn shape(req: &Request<'_>) -> String {
    let name = format!("{req:?}");
    let name = name.split([' ', '(']).next().unwrap_or_default().to_owned();
    match req {
        Request::MetaGet { flags, .. }
        | Request::MetaSet { flags, .. }
        | Request::MetaDelete { flags, .. }
        | Request::MetaArithmetic { flags, .. } => {
            let mut letters: Vec<u8> = flags.iter().map(|f| f.flag).collect();
            letters.sort_unstable();
            format!("{name} {}", letters.escape_ascii())
        }
        Request::Store { kind, noreply, .. } => format!("{name} {kind:?} {noreply}"),
        Request::Get { keys, with_cas } => {
            format!("{name} {} {with_cas}", keys.clone().count().min(3))
        }
        _ => name,
    }
}

fn check(input: &[u8], rng: &mut Rng) -> u64 {
    let max = *rng.pick(MAX_VALUE_SIZES);
    let (parsed, allocated) = allocated_by(|| parse(input, max));
    assert_eq!(allocated, 0, "parse allocated {allocated} bytes");
    let signature = match &parsed {
        Ok(Parsed::Complete(req, n)) => {
            assert!(
                *n >= 1 && *n <= input.len(),
                "consumed {n} of {}",
                input.len()
            );
            check_request(input, req, max);
            assert_eq!(
                parse(&input[..*n], max).as_ref(),
                Ok(&Parsed::Complete(req.clone(), *n)),
                "the request alone parses differently"
            );
            for _ in 0..3 {
                let cut = rng.below(*n);
                match parse(&input[..cut], max) {
                    Ok(Parsed::Incomplete { .. }) => {}
                    // A long line cut before its newline: memcached closes too.
                    Err(e) if e.close() && cut > MAX_LINE_LEN => {}
                    other => panic!("prefix of {cut} bytes of a {n}-byte request: {other:?}"),
                }
            }
            hash(shape(req).as_bytes())
        }
        Ok(Parsed::Incomplete { need }) => {
            match *need {
                // Waiting for a data block: nothing short of `need` bytes completes it.
                Some(need) => {
                    assert!(need > input.len(), "need {need} of {}", input.len());
                    if need - input.len() <= 4096 {
                        let mut longer = input.to_vec();
                        while longer.len() < need - 1 {
                            longer.push(rng.next() as u8);
                        }
                        let r = parse(&longer, max);
                        assert!(
                            matches!(r, Ok(Parsed::Incomplete { .. })),
                            "need {need}, yet {} bytes gave {r:?}",
                            longer.len()
                        );
                    }
                }
                // Waiting for a newline.
                None => assert!(!input.contains(&b'\n'), "incomplete with a whole line"),
            }
            hash(format!("incomplete {}", need.is_some()).as_bytes())
        }
        Err(e) => {
            assert!(e.consumed() >= 1);
            match e {
                Error::UnknownCommand { consumed } => {
                    assert!(*consumed <= input.len() && input[consumed - 1] == b'\n');
                }
                // Closing errors (a binary-protocol packet too) swallow all that arrived.
                Error::Client {
                    close: true,
                    consumed,
                    ..
                }
                | Error::Binary { consumed, .. } => {
                    assert_eq!(*consumed, input.len());
                }
                // A refused block may be swallowed beyond what has arrived, never short of
                // the line.
                Error::Client { consumed, .. } | Error::TooLarge { consumed, .. } => {
                    let line_end = input.iter().position(|&b| b == b'\n').map(|i| i + 1);
                    assert!(line_end.is_some_and(|end| *consumed >= end));
                }
            }
            let mut reply = Vec::new();
            e.write_reply(&mut reply);
            hash(&reply) ^ hash(format!("{}", e.close()).as_bytes())
        }
    };
    let all_at_once = until_close(drive(input, &[input.len()], max));
    let pieces = random_pieces(rng, input.len());
    let in_pieces = until_close(drive(input, &pieces, max));
    let common = all_at_once.len().min(in_pieces.len());
    assert_eq!(
        in_pieces[..common],
        all_at_once[..common],
        "read in pieces {pieces:?}"
    );
    signature ^ hash(format!("stream {}", all_at_once.len().min(3)).as_bytes())
}

#[test]
fn fuzz_text_commands() {
    run(
        "memcache-text",
        budget(DEFAULT_SECS),
        &[
            b"get a b c\r\n",
            b"gets k\r\n",
            b"bget k\n",
            b"gat 10 k1 k2\r\n",
            b"gats -1 k\r\n",
            b"set k 0 0 5\r\nhello\r\n",
            b"add k 1 100 1 noreply\r\nx\r\n",
            b"replace k 4294967295 -1 0\r\n\r\n",
            b"cas k 0 0 1 99\r\ny\r\n",
            b"append k 0 0 2\r\nab\r\nprepend k 0 0 2 noreply\r\ncd\r\n",
            b"delete k\r\ndelete k 0 noreply\r\n",
            b"incr n 5\r\ndecr n 18446744073709551615 noreply\r\n",
            b"touch k 10\r\n",
            b"flush_all\r\nflush_all 10 noreply\r\nflush_all noreply\r\n",
            b"verbosity 1\r\nversion\r\nstats\r\nstats items 1\r\nquit\r\n",
            b"set big 0 0 2000000\r\n",
            b"get \x7f\r\n",
        ],
        &[
            b"get",
            b"gets",
            b"gat",
            b"set",
            b"add",
            b"cas",
            b"append",
            b"delete",
            b"incr",
            b"decr",
            b"touch",
            b"flush_all",
            b"verbosity",
            b"stats",
            b"version",
            b"quit",
            b" ",
            b"  ",
            b"\r\n",
            b"\n",
            b"noreply",
            b" 0",
            b" 0 0 1\r\nx\r\n",
            b"\x7f",
            b"\x00",
        ],
        check,
    );
}

#[test]
fn fuzz_meta_commands() {
    run(
        "memcache-meta",
        budget(DEFAULT_SECS),
        &[
            b"mg k v f t c s k O123 q\r\n",
            b"mg Zm9v b v k\r\n",
            b"mg k N30 R10 E77 T-1\r\n",
            b"ms k 5 T10 F3 C99 MS I\r\nhello\r\n",
            b"ms k 2 MA q\r\nhi\r\n",
            b"ms Zm9vYmFy 1 b\r\nx\r\n",
            b"ms k 3 Mx\r\nabc\r\n",
            b"md k q I T30\r\n",
            b"ma n MD D5 J10 N30 v\r\n",
            b"ma n M+ q O99\r\n",
            b"mn\r\n",
            b"me k\r\nme Zm9v b\r\n",
            b"mg k v v\r\n",
        ],
        &[
            b"mg",
            b"ms",
            b"md",
            b"ma",
            b"mn",
            b"me",
            b" v",
            b" q",
            b" T",
            b" N",
            b" R",
            b" C",
            b" E",
            b" D",
            b" J",
            b" F",
            b" M",
            b" O",
            b" b",
            b" k",
            b" s",
            b" f",
            b" t",
            b" c",
            b" h",
            b" l",
            b" u",
            b" I",
            b" x",
            b" P",
            b" L",
            b" MS",
            b" ME",
            b" M+",
            b" MD",
            b"Zm9v",
            b"=",
            b" ",
            b"\r\n",
            b"\n",
            b"O12345678901234567890123456789012",
        ],
        check,
    );
}
