//! Property tests: request round-trips and split frames, reply round-trips, and arbitrary input never panicking.

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use resp::reply::{self, Version};
use resp::request::{ArgSource, Limits, Parsed};
use resp::value::{encode_command, parse_value, skip_value, Value};

mod checked;

use checked::{parse_checked as parse_with, Outcome};

fn parse(buf: &[u8]) -> Outcome {
    parse_with(buf, &Limits::default())
}

fn refs(args: &[Vec<u8>]) -> Vec<&[u8]> {
    args.iter().map(Vec::as_slice).collect()
}

/// The inverse of `sdssplitargs` for one argument, like Redis's `sdscatrepr`.
fn quote(arg: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &b in arg {
        match b {
            b'\\' | b'"' => out.extend_from_slice(&[b'\\', b]),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x20..=0x7e => out.push(b),
            _ => out.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
        }
    }
    out.push(b'"');
}

/// Bytes drawn mostly from protocol punctuation, so that random input gets
/// past the first checks far more often than uniform bytes would.
fn protocolish(alphabet: &'static [u8], max: usize) -> impl Strategy<Value = Vec<u8>> {
    vec(prop_oneof![4 => select(alphabet), 1 => any::<u8>()], 0..max)
}

const REQUEST_ALPHABET: &[u8] = b"*$\r\n\r\n0123-+ ab\"'\\x\t";
const REPLY_ALPHABET: &[u8] = b"*%~>|$!=+-:_,#(\r\n\r\n012-tfx.:";

const SEPARATORS: &[&[u8]] = &[b" ", b"\t", b"  \t "];

fn tiny_limits() -> Limits {
    Limits {
        max_bulk_len: 16,
        max_multibulk_len: 4,
        max_inline_len: 8,
        unauthenticated: false,
    }
}

proptest! {
    #[test]
    fn encoded_commands_parse_back(
        args in vec(vec(any::<u8>(), 0..40), 1..8),
        tail in vec(any::<u8>(), 0..8),
    ) {
        let mut buf = Vec::new();
        encode_command(&mut buf, &refs(&args));
        let len = buf.len();
        for cut in 0..len {
            let prefix = parse(&buf[..cut]);
            prop_assert!(matches!(prefix, Ok((Parsed::Incomplete { .. }, ..))), "cut {}: {:?}", cut, prefix);
        }
        buf.extend_from_slice(&tail);
        prop_assert_eq!(parse(&buf), Ok((Parsed::Complete(len), ArgSource::Buffer, args)));
    }

    #[test]
    fn need_is_never_beyond_the_frame(args in vec(vec(any::<u8>(), 0..300), 1..5), cut in any::<prop::sample::Index>()) {
        let mut buf = Vec::new();
        encode_command(&mut buf, &refs(&args));
        let cut = cut.index(buf.len());
        match parse(&buf[..cut]) {
            Ok((Parsed::Incomplete { need: Some(need) }, ..)) => {
                prop_assert!(need > cut && need <= buf.len(), "need {} cut {} len {}", need, cut, buf.len());
            }
            Ok((Parsed::Incomplete { need: None }, ..)) => {}
            other => prop_assert!(false, "{:?}", other),
        }
    }

    #[test]
    fn quoted_inline_commands_parse_back(
        args in vec(vec(any::<u8>(), 0..20), 1..6),
        crlf in any::<bool>(),
    ) {
        let mut line = Vec::new();
        for arg in &args {
            quote(arg, &mut line);
            line.push(b' ');
        }
        line.extend_from_slice(if crlf { b"\r\n" } else { b"\n" });
        for cut in 0..line.len() {
            let prefix = parse(&line[..cut]);
            prop_assert!(matches!(prefix, Ok((Parsed::Incomplete { need: None }, ..))), "cut {}: {:?}", cut, prefix);
        }
        prop_assert_eq!(parse(&line), Ok((Parsed::Complete(line.len()), ArgSource::Scratch, args)));
    }

    #[test]
    fn plain_inline_words_are_buffer_ranges(
        words in vec(vec(select(&b"abcXYZ019-_:$\\"[..]), 1..10), 1..6),
        seps in vec(select(SEPARATORS), 6),
    ) {
        let mut line = Vec::new();
        for (word, sep) in words.iter().zip(&seps) {
            line.extend_from_slice(word);
            line.extend_from_slice(sep);
        }
        line.extend_from_slice(b"\r\n");
        prop_assert_eq!(parse(&line), Ok((Parsed::Complete(line.len()), ArgSource::Buffer, words)));
    }

    #[test]
    fn chunked_request_stream_parses_like_whole_requests(
        commands in vec(vec(vec(any::<u8>(), 0..12), 1..4), 1..6),
        chunk in 1usize..20,
    ) {
        let mut stream = Vec::new();
        for cmd in &commands {
            encode_command(&mut stream, &refs(cmd));
        }
        // What a connection does: append what arrived, drain whole requests.
        let mut pending = Vec::new();
        let mut seen = Vec::new();
        for piece in stream.chunks(chunk) {
            pending.extend_from_slice(piece);
            while let Ok((Parsed::Complete(n), _, args)) = parse(&pending) {
                seen.push(args);
                pending.drain(..n);
            }
        }
        prop_assert!(pending.is_empty());
        prop_assert_eq!(seen, commands);
    }

    #[test]
    fn arbitrary_requests_never_panic(bytes in vec(any::<u8>(), 0..300), tiny in any::<bool>()) {
        let limits = if tiny { tiny_limits() } else { Limits::default() };
        let _ = parse_with(&bytes, &limits);
    }

    #[test]
    fn protocolish_requests_never_panic(bytes in protocolish(REQUEST_ALPHABET, 200), tiny in any::<bool>()) {
        let limits = if tiny { tiny_limits() } else { Limits::default() };
        let _ = parse_with(&bytes, &limits);
    }

    #[test]
    fn arbitrary_replies_never_panic_and_skip_agrees(bytes in vec(any::<u8>(), 0..300)) {
        check_skip_agrees(&bytes)?;
    }

    #[test]
    fn protocolish_replies_never_panic_and_skip_agrees(bytes in protocolish(REPLY_ALPHABET, 200)) {
        check_skip_agrees(&bytes)?;
    }

    #[test]
    fn replies_round_trip(tree in reply_tree(), next in reply_tree()) {
        for version in [Version::Resp2, Version::Resp3] {
            let mut buf = Vec::new();
            encode(&tree, version, &mut buf);
            let len = buf.len();
            for cut in 0..len {
                prop_assert_eq!(parse_value(&buf[..cut]), Ok(None));
            }
            // A following reply must not be swallowed.
            encode(&next, version, &mut buf);
            prop_assert_eq!(skip_value(&buf), Ok(Some(len)));
            prop_assert_eq!(parse_value(&buf), Ok(Some((expected(&tree, version), len))));
        }
    }
}

fn check_skip_agrees(bytes: &[u8]) -> Result<(), TestCaseError> {
    match (skip_value(bytes), parse_value(bytes)) {
        (Ok(None), Ok(None)) => {}
        (Ok(Some(n)), Ok(Some((_, m)))) => {
            prop_assert_eq!(n, m);
            prop_assert!(n > 0 && n <= bytes.len());
        }
        (Err(a), Err(b)) => prop_assert_eq!(a, b),
        (s, p) => prop_assert!(false, "skip {:?} vs parse {:?}", s, p),
    }
    Ok(())
}

/// What a server command might emit, in terms of the reply encoders.
#[derive(Debug, Clone)]
enum Reply {
    Simple(Vec<u8>),
    Error(Vec<u8>),
    Integer(i64),
    Bulk(Vec<u8>),
    Null,
    NullArray,
    Double(f64),
    Boolean(bool),
    Verbatim([u8; 3], Vec<u8>),
    BigNumber(Vec<u8>),
    Array(Vec<Reply>),
    Map(Vec<(Reply, Reply)>),
    Set(Vec<Reply>),
    Push(Vec<Reply>),
}

fn reply_tree() -> impl Strategy<Value = Reply> {
    let bytes = || vec(any::<u8>(), 0..12);
    let leaf = prop_oneof![
        bytes().prop_map(Reply::Simple),
        bytes().prop_map(Reply::Error),
        any::<i64>().prop_map(Reply::Integer),
        bytes().prop_map(Reply::Bulk),
        Just(Reply::Null),
        Just(Reply::NullArray),
        any::<f64>()
            .prop_filter("NaN never compares equal", |d| !d.is_nan())
            .prop_map(Reply::Double),
        any::<bool>().prop_map(Reply::Boolean),
        (any::<[u8; 3]>(), bytes()).prop_map(|(f, t)| Reply::Verbatim(f, t)),
        (any::<bool>(), vec(select(&b"0123456789"[..]), 1..30)).prop_map(|(neg, mut digits)| {
            if neg {
                digits.insert(0, b'-');
            }
            Reply::BigNumber(digits)
        }),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..6).prop_map(Reply::Array),
            vec((inner.clone(), inner.clone()), 0..4).prop_map(Reply::Map),
            vec(inner.clone(), 0..6).prop_map(Reply::Set),
            vec(inner, 0..6).prop_map(Reply::Push),
        ]
    })
}

fn encode(r: &Reply, v: Version, out: &mut Vec<u8>) {
    match r {
        Reply::Simple(s) => reply::simple(out, s),
        Reply::Error(s) => reply::error(out, s),
        Reply::Integer(i) => reply::integer(out, *i),
        Reply::Bulk(b) => reply::bulk(out, b),
        Reply::Null => reply::null(out, v),
        Reply::NullArray => reply::null_array(out, v),
        Reply::Double(d) => reply::double(out, *d, v),
        Reply::Boolean(b) => reply::boolean(out, *b, v),
        Reply::Verbatim(f, t) => reply::verbatim(out, f, t, v),
        Reply::BigNumber(d) => reply::big_number(out, d, v),
        Reply::Array(items) => {
            reply::array_len(out, items.len());
            items.iter().for_each(|i| encode(i, v, out));
        }
        Reply::Map(pairs) => {
            reply::map_len(out, pairs.len(), v);
            for (k, val) in pairs {
                encode(k, v, out);
                encode(val, v, out);
            }
        }
        Reply::Set(items) => {
            reply::set_len(out, items.len(), v);
            items.iter().for_each(|i| encode(i, v, out));
        }
        Reply::Push(items) => {
            reply::push_len(out, items.len(), v);
            items.iter().for_each(|i| encode(i, v, out));
        }
    }
}

fn expected(r: &Reply, v: Version) -> Value {
    let resp3 = v == Version::Resp3;
    let line = |s: &[u8]| -> Vec<u8> {
        s.iter()
            .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b })
            .collect()
    };
    let all = |items: &[Reply]| items.iter().map(|i| expected(i, v)).collect::<Vec<_>>();
    match r {
        Reply::Simple(s) => Value::Simple(line(s)),
        Reply::Error(s) => Value::Error(line(s)),
        Reply::Integer(i) => Value::Integer(*i),
        Reply::Bulk(b) => Value::Bulk(b.clone()),
        Reply::Null | Reply::NullArray => Value::Null,
        Reply::Double(d) if resp3 => Value::Double(*d),
        Reply::Double(d) => {
            let mut text = Vec::new();
            reply::format_double(*d, &mut text);
            Value::Bulk(text)
        }
        Reply::Boolean(b) if resp3 => Value::Boolean(*b),
        Reply::Boolean(b) => Value::Integer(i64::from(*b)),
        Reply::Verbatim(_, t) if resp3 => Value::Verbatim(t.clone()),
        Reply::Verbatim(_, t) => Value::Bulk(t.clone()),
        Reply::BigNumber(d) if resp3 => Value::BigNumber(d.clone()),
        Reply::BigNumber(d) => Value::Bulk(d.clone()),
        Reply::Array(items) => Value::Array(all(items)),
        Reply::Map(pairs) if resp3 => Value::Map(
            pairs
                .iter()
                .map(|(k, val)| (expected(k, v), expected(val, v)))
                .collect(),
        ),
        Reply::Map(pairs) => Value::Array(
            pairs
                .iter()
                .flat_map(|(k, val)| [expected(k, v), expected(val, v)])
                .collect(),
        ),
        Reply::Set(items) if resp3 => Value::Set(all(items)),
        Reply::Push(items) if resp3 => Value::Push(all(items)),
        Reply::Set(items) | Reply::Push(items) => Value::Array(all(items)),
    }
}
