//! Unit tests for request framing: Redis's error messages and edge cases.

use super::*;

type Outcome = Result<(Parsed, ArgSource, Vec<Vec<u8>>), ProtocolError>;

fn parse_with(buf: &[u8], limits: &Limits) -> Outcome {
    let mut args = vec![0..0; 3];
    let mut scratch = b"stale".to_vec();
    let (parsed, source) = parse_request(buf, limits, &mut args, &mut scratch)?;
    let base: &[u8] = match source {
        ArgSource::Buffer => buf,
        ArgSource::Scratch => &scratch,
    };
    let owned = args.iter().map(|r| base[r.clone()].to_vec()).collect();
    Ok((parsed, source, owned))
}

fn parse(buf: &[u8]) -> Outcome {
    parse_with(buf, &Limits::default())
}

fn complete(buf: &[u8]) -> (usize, ArgSource, Vec<Vec<u8>>) {
    match parse(buf) {
        Ok((Parsed::Complete(n), source, args)) => (n, source, args),
        other => panic!(
            "expected Complete for {:?}, got {other:?}",
            String::from_utf8_lossy(buf)
        ),
    }
}

fn args_of(list: &[&[u8]]) -> Vec<Vec<u8>> {
    list.iter().map(|a| a.to_vec()).collect()
}

fn error_of(buf: &[u8]) -> String {
    error_with(buf, &Limits::default())
}

fn error_with(buf: &[u8], limits: &Limits) -> String {
    match parse_with(buf, limits) {
        Err(ProtocolError(msg)) => msg,
        other => panic!(
            "expected an error for {:?}, got {other:?}",
            String::from_utf8_lossy(buf)
        ),
    }
}

fn is_incomplete(buf: &[u8]) -> bool {
    matches!(parse(buf), Ok((Parsed::Incomplete { .. }, ArgSource::Buffer, ref a)) if a.is_empty())
}

const INVALID_MBULK: &str = "Protocol error: invalid multibulk length";
const INVALID_BULK: &str = "Protocol error: invalid bulk length";

#[test]
fn limits_default_to_redis_values() {
    let l = Limits::default();
    assert_eq!(l.max_bulk_len, 512 * 1024 * 1024);
    // Redis 7 accepts up to INT_MAX arguments (MSET of a million pairs is 2,000,001).
    assert_eq!(l.max_multibulk_len, i32::MAX as usize);
    assert_eq!(l.max_inline_len, 64 * 1024);
}

#[test]
fn multibulk_request_yields_buffer_ranges() {
    let buf = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n";
    let mut args = Vec::new();
    let mut scratch = Vec::new();
    let got = parse_request(buf, &Limits::default(), &mut args, &mut scratch).unwrap();
    assert_eq!(got, (Parsed::Complete(buf.len()), ArgSource::Buffer));
    assert_eq!(args, vec![8..11, 17..18]);
}

#[test]
fn multibulk_consumes_only_the_first_of_pipelined_requests() {
    let buf = b"*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPING\r\n";
    assert_eq!(complete(buf), (14, ArgSource::Buffer, args_of(&[b"PING"])));
}

#[test]
fn bulk_payload_is_binary_safe() {
    let buf = b"*2\r\n$3\r\nSET\r\n$6\r\n\r\n\0*$\xff\r\n";
    assert_eq!(complete(buf).2, args_of(&[b"SET", b"\r\n\0*$\xff"]));
}

#[test]
fn empty_bulk_argument() {
    assert_eq!(
        complete(b"*1\r\n$0\r\n\r\n"),
        (10, ArgSource::Buffer, args_of(&[b""]))
    );
}

#[test]
fn zero_or_negative_count_is_an_empty_request() {
    assert_eq!(complete(b"*0\r\n"), (4, ArgSource::Buffer, vec![]));
    assert_eq!(complete(b"*-1\r\n"), (5, ArgSource::Buffer, vec![]));
    assert_eq!(complete(b"*-7\r\n*1\r\n"), (5, ArgSource::Buffer, vec![]));
}

#[test]
fn every_proper_prefix_of_a_multibulk_request_is_incomplete() {
    let buf = b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nva\r\nl\r\n";
    for cut in 0..buf.len() {
        assert!(is_incomplete(&buf[..cut]), "prefix of {cut} bytes");
    }
    assert_eq!(complete(buf).2, args_of(&[b"SET", b"key", b"va\r\nl"]));
}

#[test]
fn need_is_reported_once_a_bulk_header_is_read() {
    let buf = b"*2\r\n$1\r\na\r\n$10\r\n0123456789\r\n";
    let need = |cut: usize| match parse(&buf[..cut]) {
        Ok((Parsed::Incomplete { need }, ..)) => need,
        other => panic!("{other:?}"),
    };
    assert_eq!(need(3), None);
    assert_eq!(need(6), None, "inside the first bulk header");
    assert_eq!(need(8), Some(11), "first argument's payload outstanding");
    assert_eq!(need(13), None, "inside the last bulk header");
    assert_eq!(need(17), Some(buf.len()), "last payload: the whole frame");
    assert_eq!(need(buf.len() - 1), Some(buf.len()));
}

#[test]
fn invalid_multibulk_length() {
    for buf in [
        &b"*x\r\n"[..],
        b"*\r\n",
        b"*01\r\n",
        b"*+1\r\n",
        b"*-0\r\n",
        b"* 1\r\n",
        b"*1 \r\n",
        b"*99999999999999999999\r\n",
        // Past INT_MAX, as Redis 7; 2,000,001 (MSET of a million pairs) is fine.
        b"*2147483648\r\n",
        // Redis skips the byte after `\r` unchecked; we insist on `\n`.
        b"*1\rX$1\r\na\r\n",
    ] {
        assert_eq!(
            error_of(buf),
            INVALID_MBULK,
            "{:?}",
            String::from_utf8_lossy(buf)
        );
    }
    assert!(
        is_incomplete(b"*1048576\r\n"),
        "the limit itself is allowed"
    );
    let small = Limits {
        max_multibulk_len: 2,
        ..Limits::default()
    };
    assert_eq!(error_with(b"*3\r\n", &small), INVALID_MBULK);
    assert!(matches!(
        parse_with(b"*2\r\n", &small),
        Ok((Parsed::Incomplete { .. }, ..))
    ));
}

#[test]
fn expected_dollar_names_the_byte_found() {
    assert_eq!(
        error_of(b"*1\r\n:3\r\n"),
        "Protocol error: expected '$', got ':'"
    );
    assert_eq!(
        error_of(b"*2\r\n$1\r\na\r\nfoo\r\n"),
        "Protocol error: expected '$', got 'f'"
    );
    // Redis turns CR/LF in error messages into spaces.
    assert_eq!(
        error_of(b"*1\r\n\r\n"),
        "Protocol error: expected '$', got ' '"
    );
    assert_eq!(
        error_of(b"*1\r\n\xff\r\n"),
        "Protocol error: expected '$', got '\\xff'"
    );
}

#[test]
fn wrong_type_byte_waits_for_the_header_line_like_redis() {
    assert!(is_incomplete(b"*1\r\nfoo"));
    assert!(is_incomplete(b"*1\r\nfoo\r"));
}

#[test]
fn invalid_bulk_length() {
    for buf in [
        &b"*1\r\n$-1\r\n"[..],
        b"*1\r\n$x\r\n",
        b"*1\r\n$\r\n",
        b"*1\r\n$01\r\n",
        b"*1\r\n$+1\r\n",
        b"*1\r\n$1 \r\n",
        b"*1\r\n$99999999999999999999\r\n",
        b"*1\r\n$536870913\r\n",
        b"*1\r\n$3\rXfoo\r\n",
    ] {
        assert_eq!(
            error_of(buf),
            INVALID_BULK,
            "{:?}",
            String::from_utf8_lossy(buf)
        );
    }
    assert!(
        is_incomplete(b"*1\r\n$536870912\r\n"),
        "the limit itself is allowed"
    );
    let small = Limits {
        max_bulk_len: 3,
        ..Limits::default()
    };
    assert_eq!(error_with(b"*1\r\n$4\r\n", &small), INVALID_BULK);
    assert_eq!(
        parse_with(b"*1\r\n$3\r\nabc\r\n", &small).unwrap().2,
        args_of(&[b"abc"])
    );
}

#[test]
fn payload_must_be_followed_by_crlf() {
    let msg = "Protocol error: expected CRLF after bulk data";
    assert_eq!(error_of(b"*1\r\n$3\r\nfooXY"), msg);
    assert_eq!(error_of(b"*1\r\n$3\r\nfoo\rX"), msg);
    assert_eq!(error_of(b"*1\r\n$3\r\nfoo\n\r"), msg);
    assert_eq!(error_of(b"*2\r\n$3\r\nfoo\r\n$1\r\nabc\r\n"), msg);
}

#[test]
fn header_without_cr_is_too_big_only_past_the_inline_limit() {
    let limit = Limits::default().max_inline_len;
    let mut buf = vec![b'*'];
    buf.resize(limit, b'1');
    assert!(is_incomplete(&buf), "exactly the limit: keep waiting");
    buf.push(b'1');
    assert_eq!(error_of(&buf), "Protocol error: too big mbulk count string");

    let mut buf = b"*1\r\n$".to_vec();
    buf.resize(4 + limit, b'1');
    assert!(is_incomplete(&buf));
    buf.push(b'1');
    assert_eq!(error_of(&buf), "Protocol error: too big bulk count string");
}

#[test]
fn long_header_that_does_end_is_an_invalid_length_not_too_big() {
    let mut buf = vec![b'*'];
    buf.resize(70_000, b'1');
    buf.extend_from_slice(b"\r\n");
    assert_eq!(error_of(&buf), INVALID_MBULK);
}

#[test]
fn header_limit_follows_max_inline_len() {
    let small = Limits {
        max_inline_len: 4,
        ..Limits::default()
    };
    assert_eq!(
        error_with(b"*1234", &small),
        "Protocol error: too big mbulk count string"
    );
    assert!(matches!(
        parse_with(b"*123", &small),
        Ok((Parsed::Incomplete { .. }, ..))
    ));
}

#[test]
fn inline_plain_words_are_buffer_ranges() {
    assert_eq!(
        complete(b"PING\r\n"),
        (6, ArgSource::Buffer, args_of(&[b"PING"]))
    );
    assert_eq!(
        complete(b"PING\n"),
        (5, ArgSource::Buffer, args_of(&[b"PING"]))
    );
    assert_eq!(
        complete(b"  set\t k  v \r\nGET k\r\n"),
        (14, ArgSource::Buffer, args_of(&[b"set", b"k", b"v"]))
    );
    let mut args = Vec::new();
    let mut scratch = Vec::new();
    let got = parse_request(b"GET key\r\n", &Limits::default(), &mut args, &mut scratch).unwrap();
    assert_eq!(got, (Parsed::Complete(9), ArgSource::Buffer));
    assert_eq!(args, vec![0..3, 4..7]);
}

#[test]
fn inline_empty_lines_are_empty_requests() {
    assert_eq!(complete(b"\r\n"), (2, ArgSource::Buffer, vec![]));
    assert_eq!(complete(b"\n"), (1, ArgSource::Buffer, vec![]));
    assert_eq!(complete(b" \t \r\n"), (5, ArgSource::Buffer, vec![]));
}

#[test]
fn inline_whitespace_follows_sdssplitargs() {
    // Leading \v and \f are skipped as blanks but do not end a word.
    assert_eq!(
        complete(b"\x0b a\x0bb\x0cc d\r\n").2,
        args_of(&[b"a\x0bb\x0cc", b"d"])
    );
    // Only one \r before \n is the terminator; any other \r separates words.
    assert_eq!(complete(b"a\rb\r\r\n").2, args_of(&[b"a", b"b"]));
    // Backslashes are literal outside quotes.
    assert_eq!(complete(b"a\\nb\r\n").2, args_of(&[b"a\\nb"]));
}

#[test]
fn inline_nul_byte_is_ordinary_data() {
    assert_eq!(complete(b"a\0b c\r\n").2, args_of(&[b"a\0b", b"c"]));
}

#[test]
fn inline_every_prefix_is_incomplete() {
    let buf = b"SET \"a b\" c\r\n";
    for cut in 0..buf.len() {
        assert!(is_incomplete(&buf[..cut]), "prefix of {cut} bytes");
    }
}

#[test]
fn inline_quotes_decode_into_scratch() {
    let (n, source, args) = complete(b"set \"a b\" 'c d' e\r\n");
    assert_eq!((n, source), (19, ArgSource::Scratch));
    assert_eq!(args, args_of(&[b"set", b"a b", b"c d", b"e"]));
}

#[test]
fn inline_double_quote_escapes() {
    let (_, _, args) = complete(b"\"\\n\\r\\t\\b\\a\\\\\\\"\\x41\\xfF\\x00\\xzz\\q\"\r\n");
    assert_eq!(args, args_of(&[b"\n\r\t\x08\x07\\\"A\xff\0xzzq"]));
}

#[test]
fn inline_single_quotes_only_escape_the_quote() {
    assert_eq!(
        complete(b"'it\\'s' '\\n\\x41\"'\r\n").2,
        args_of(&[b"it's", b"\\n\\x41\""])
    );
}

#[test]
fn inline_quotes_can_open_mid_word_and_be_empty() {
    assert_eq!(
        complete(b"foo\"bar baz\" \"\" ''\r\n").2,
        args_of(&[b"foobar baz", b"", b""])
    );
    // Any blank may follow a closing quote.
    assert_eq!(
        complete(b"\"a\"\tb '\\''\x0bc\r\n").2,
        args_of(&[b"a", b"b", b"'", b"c"])
    );
}

#[test]
fn inline_unbalanced_quotes() {
    for buf in [
        &b"\"abc\r\n"[..],
        b"'abc\r\n",
        b"\"foo\"bar\r\n",
        b"'foo'bar\r\n",
        b"\"abc\\\"\r\n",
        b"\"abc\\\r\n",
        b"'abc\\'\r\n",
        b"ok \"x\"\"y\"\n",
    ] {
        assert_eq!(
            error_of(buf),
            "Protocol error: unbalanced quotes in request",
            "{:?}",
            String::from_utf8_lossy(buf)
        );
    }
}

#[test]
fn inline_too_big_only_without_newline_past_the_limit() {
    let limit = Limits::default().max_inline_len;
    let mut buf = vec![b'a'; limit];
    assert!(is_incomplete(&buf));
    buf.push(b'a');
    assert_eq!(error_of(&buf), "Protocol error: too big inline request");
    buf.push(b'\n');
    assert_eq!(
        complete(&buf).2.len(),
        1,
        "a long line that has ended is accepted"
    );
}

#[test]
fn args_are_cleared_unless_complete() {
    let mut args = vec![1..2, 3..4];
    let mut scratch = Vec::new();
    let limits = Limits::default();
    let r = parse_request(b"*2\r\n$1\r\na\r\n", &limits, &mut args, &mut scratch);
    assert_eq!(
        r,
        Ok((Parsed::Incomplete { need: None }, ArgSource::Buffer))
    );
    assert!(args.is_empty());
    args.push(0..1);
    assert!(parse_request(b"*1\r\n$1\r\nabc", &limits, &mut args, &mut scratch).is_err());
    assert!(args.is_empty());
    args.push(0..1);
    let r = parse_request(b"", &limits, &mut args, &mut scratch);
    assert_eq!(
        r,
        Ok((Parsed::Incomplete { need: None }, ArgSource::Buffer))
    );
    assert!(args.is_empty());
}

#[test]
fn scratch_is_reset_between_quoted_requests() {
    let mut args = Vec::new();
    let mut scratch = Vec::new();
    let limits = Limits::default();
    parse_request(b"'aaaa'\r\n", &limits, &mut args, &mut scratch).unwrap();
    let r = parse_request(b"'b'\r\n", &limits, &mut args, &mut scratch).unwrap();
    assert_eq!(r, (Parsed::Complete(5), ArgSource::Scratch));
    assert_eq!(scratch, b"b");
    assert_eq!(args.len(), 1);
    assert_eq!(args[0], 0..1);
}

#[test]
fn mixed_pipeline_parses_request_by_request() {
    let stream = b"PING\r\n*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\n\r\n'x y'\n*0\r\n";
    let mut rest = &stream[..];
    let mut seen = Vec::new();
    while !rest.is_empty() {
        let (n, _, args) = complete(rest);
        seen.push(args);
        rest = &rest[n..];
    }
    assert_eq!(
        seen,
        vec![
            args_of(&[b"PING"]),
            args_of(&[b"ECHO", b"hi"]),
            vec![],
            args_of(&[b"x y"]),
            vec![]
        ]
    );
}

fn resumable(
    buf: &[u8],
    args: &mut Vec<Range<usize>>,
    resume: &mut Resume,
) -> Result<(Parsed, ArgSource), ProtocolError> {
    parse_request_resumable(buf, &Limits::default(), args, &mut Vec::new(), resume)
}

#[test]
fn resumed_parse_does_not_read_earlier_arguments_again() {
    let mut buf = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nva".to_vec();
    let mut args = Vec::new();
    let mut resume = Resume::default();
    let got = resumable(&buf, &mut args, &mut resume).unwrap();
    assert_eq!(
        got.0,
        Parsed::Incomplete {
            need: Some(buf.len() + 5)
        }
    );
    assert!(resume.is_active());
    assert_eq!(args, vec![8..11, 17..18]);
    // The parsed prefix is not looked at again: overwrite it and the resumed parse still
    // completes from where it stopped.
    buf[8..11].copy_from_slice(b"XYZ");
    buf[4] = b'!';
    buf.extend_from_slice(b"lue\r\n*1\r\n");
    let got = resumable(&buf, &mut args, &mut resume).unwrap();
    assert_eq!(got, (Parsed::Complete(buf.len() - 4), ArgSource::Buffer));
    assert_eq!(args, vec![8..11, 17..18, 24..29]);
    assert!(!resume.is_active());
    // The next request starts afresh.
    let rest = b"*1\r\n$4\r\nPING\r\n";
    let got = resumable(rest, &mut args, &mut resume).unwrap();
    assert_eq!(got, (Parsed::Complete(rest.len()), ArgSource::Buffer));
    assert_eq!(args, vec![8..12]);
}

#[test]
fn resumable_parse_fed_byte_by_byte_matches_a_whole_parse() {
    let mut buf = Vec::new();
    for part in [
        &b"*4\r\n$4\r\nMSET\r\n$1\r\na\r\n$0\r\n\r\n$3\r\nxyz\r\n"[..],
        b"PING\r\n",
    ] {
        buf.extend_from_slice(part);
    }
    let whole = complete(&buf);
    let mut args = Vec::new();
    let mut resume = Resume::default();
    for cut in 0..buf.len() {
        match resumable(&buf[..cut], &mut args, &mut resume).unwrap() {
            (Parsed::Incomplete { .. }, _) => {}
            (Parsed::Complete(n), _) => {
                assert_eq!(n, whole.0, "cut {cut}");
                let got: Vec<Vec<u8>> = args.iter().map(|r| buf[r.clone()].to_vec()).collect();
                assert_eq!(got, whole.2);
                return;
            }
        }
    }
    panic!("never completed");
}

#[test]
fn resume_is_dropped_for_other_input_and_after_errors() {
    let mut args = Vec::new();
    let mut resume = Resume::default();
    resumable(b"*2\r\n$1\r\na\r\n", &mut args, &mut resume).unwrap();
    assert!(resume.is_active());
    // A shorter buffer, or one that is not a multibulk, cannot be the same request.
    let got = resumable(b"PING\r\n", &mut args, &mut resume).unwrap();
    assert_eq!(got.0, Parsed::Complete(6));
    assert!(!resume.is_active());
    assert!(matches!(
        parse(b"*2000001\r\n"),
        Ok((Parsed::Incomplete { .. }, ..))
    ));
    resumable(b"*2\r\n$1\r\na\r\n", &mut args, &mut resume).unwrap();
    assert!(resumable(b"*2\r\n$1\r\na\r\n?x\r\n", &mut args, &mut resume).is_err());
    assert!(!resume.is_active() && args.is_empty());
}

#[test]
fn unauthenticated_limits() {
    let unauth = Limits {
        unauthenticated: true,
        ..Limits::default()
    };
    assert_eq!(
        error_with(b"*11\r\n", &unauth),
        "Protocol error: unauthenticated multibulk length"
    );
    assert_eq!(
        error_with(b"*1\r\n$16385\r\n", &unauth),
        "Protocol error: unauthenticated bulk length"
    );
    assert_eq!(
        error_with(b"*1\r\n$60000000\r\n", &unauth),
        "Protocol error: unauthenticated bulk length"
    );
    assert!(matches!(
        parse_with(b"*10\r\n$16384\r\n", &unauth),
        Ok((Parsed::Incomplete { .. }, ..))
    ));
    // Authenticated clients keep the normal limits.
    assert!(matches!(
        parse_with(b"*11\r\n$60000000\r\n", &Limits::default()),
        Ok((Parsed::Incomplete { .. }, ..))
    ));
}
