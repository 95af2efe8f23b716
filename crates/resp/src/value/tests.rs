//! Unit tests for reply parsing, skipping and command encoding.

use super::*;

fn parsed(buf: &[u8]) -> (Value, usize) {
    let got = parse_value(buf).unwrap().expect("complete");
    assert_eq!(skip_value(buf), Ok(Some(got.1)), "skip_value must agree");
    got
}

fn value(buf: &[u8]) -> Value {
    let (v, n) = parsed(buf);
    assert_eq!(n, buf.len(), "whole input consumed");
    v
}

fn error(buf: &[u8]) -> String {
    let skipped = skip_value(buf);
    match parse_value(buf) {
        Err(e) => {
            assert_eq!(skipped, Err(e.clone()), "skip_value must agree");
            e.0
        }
        other => panic!(
            "expected an error for {:?}, got {other:?}",
            String::from_utf8_lossy(buf)
        ),
    }
}

fn bulk(s: &[u8]) -> Value {
    Value::Bulk(s.to_vec())
}

#[test]
fn resp2_scalars() {
    assert_eq!(value(b"+OK\r\n"), Value::Simple(b"OK".to_vec()));
    assert_eq!(value(b"+\r\n"), Value::Simple(vec![]));
    assert_eq!(value(b"-ERR bad\r\n"), Value::Error(b"ERR bad".to_vec()));
    assert_eq!(value(b":-12\r\n"), Value::Integer(-12));
    assert_eq!(value(b":9223372036854775807\r\n"), Value::Integer(i64::MAX));
    assert_eq!(value(b"$5\r\na\r\nb\0\r\n"), bulk(b"a\r\nb\0"));
    assert_eq!(value(b"$0\r\n\r\n"), bulk(b""));
    assert_eq!(value(b"$-1\r\n"), Value::Null);
    assert_eq!(value(b"*-1\r\n"), Value::Null);
}

#[test]
fn resp3_scalars() {
    assert_eq!(value(b"_\r\n"), Value::Null);
    assert_eq!(value(b",1.5\r\n"), Value::Double(1.5));
    assert_eq!(value(b",-inf\r\n"), Value::Double(f64::NEG_INFINITY));
    assert_eq!(value(b",3\r\n"), Value::Double(3.0));
    assert!(matches!(value(b",nan\r\n"), Value::Double(d) if d.is_nan()));
    assert_eq!(value(b"#t\r\n"), Value::Boolean(true));
    assert_eq!(value(b"#f\r\n"), Value::Boolean(false));
    assert_eq!(
        value(b"=9\r\ntxt:a\r\nbc\r\n"),
        Value::Verbatim(b"a\r\nbc".to_vec())
    );
    assert_eq!(
        value(b"(-123456789012345678901234\r\n"),
        Value::BigNumber(b"-123456789012345678901234".to_vec())
    );
    assert_eq!(
        value(b"!8\r\nERR a\r\nb\r\n"),
        Value::Error(b"ERR a\r\nb".to_vec())
    );
}

#[test]
fn aggregates() {
    assert_eq!(value(b"*0\r\n"), Value::Array(vec![]));
    assert_eq!(
        value(b"*3\r\n:1\r\n*1\r\n$1\r\nx\r\n_\r\n"),
        Value::Array(vec![
            Value::Integer(1),
            Value::Array(vec![bulk(b"x")]),
            Value::Null
        ])
    );
    assert_eq!(
        value(b"%2\r\n+a\r\n:1\r\n+b\r\n#f\r\n"),
        Value::Map(vec![
            (Value::Simple(b"a".to_vec()), Value::Integer(1)),
            (Value::Simple(b"b".to_vec()), Value::Boolean(false)),
        ])
    );
    assert_eq!(value(b"%0\r\n"), Value::Map(vec![]));
    assert_eq!(
        value(b"~2\r\n:1\r\n:2\r\n"),
        Value::Set(vec![Value::Integer(1), Value::Integer(2)])
    );
    assert_eq!(
        value(b">2\r\n$7\r\nmessage\r\n$2\r\nhi\r\n"),
        Value::Push(vec![bulk(b"message"), bulk(b"hi")])
    );
}

#[test]
fn attributes_are_skipped_but_counted() {
    assert_eq!(value(b"|1\r\n+key\r\n:1\r\n:42\r\n"), Value::Integer(42));
    assert_eq!(value(b"|0\r\n:42\r\n"), Value::Integer(42));
    assert_eq!(
        value(b"*2\r\n|1\r\n+a\r\n*1\r\n:0\r\n:1\r\n:2\r\n"),
        Value::Array(vec![Value::Integer(1), Value::Integer(2)])
    );
    // Two attributes in a row, then the value.
    assert_eq!(
        value(b"|1\r\n+a\r\n:0\r\n|1\r\n+b\r\n:1\r\n$1\r\nz\r\n"),
        bulk(b"z")
    );
    assert_eq!(
        parse_value(b"|1\r\n+a\r\n:1\r\n"),
        Ok(None),
        "the annotated value is still owed"
    );
    // An attribute's own value may carry an attribute; the top value is still owed.
    assert_eq!(
        parse_value(b"|1\r\n+a\r\n|1\r\n+b\r\n:1\r\n$1\r\nz\r\n"),
        Ok(None)
    );
}

#[test]
fn reports_only_the_first_value_length() {
    assert_eq!(parsed(b":1\r\n:2\r\n"), (Value::Integer(1), 4));
    assert_eq!(parsed(b"*1\r\n+a\r\n+b\r\n").1, 8);
}

#[test]
fn every_proper_prefix_is_incomplete() {
    let buf: &[u8] =
        b"*4\r\n$3\r\na\r\n\r\n%1\r\n+k\r\n,1.5\r\n|1\r\n+x\r\n+y\r\n=5\r\ntxt:z\r\n_\r\n";
    let full = value(buf);
    assert!(matches!(full, Value::Array(ref items) if items.len() == 4));
    for cut in 0..buf.len() {
        assert_eq!(parse_value(&buf[..cut]), Ok(None), "prefix of {cut} bytes");
        assert_eq!(skip_value(&buf[..cut]), Ok(None), "prefix of {cut} bytes");
    }
}

#[test]
fn malformed_replies() {
    assert_eq!(
        error(b"?x\r\n"),
        "Protocol error: invalid reply type byte '?'"
    );
    assert_eq!(
        error(b"\xfe\r\n"),
        "Protocol error: invalid reply type byte '\\xfe'"
    );
    assert_eq!(
        error(b"*1\r\n@\r\n"),
        "Protocol error: invalid reply type byte '@'"
    );
    assert_eq!(
        error(b"+OK\n"),
        "Protocol error: expected CRLF at end of line"
    );
    assert_eq!(
        error(b"+\n"),
        "Protocol error: expected CRLF at end of line"
    );
    assert_eq!(error(b":12a\r\n"), "Protocol error: invalid integer");
    assert_eq!(error(b":\r\n"), "Protocol error: invalid integer");
    assert_eq!(error(b"_x\r\n"), "Protocol error: invalid null");
    assert_eq!(error(b",one\r\n"), "Protocol error: invalid double");
    assert_eq!(error(b"#x\r\n"), "Protocol error: invalid boolean");
    assert_eq!(error(b"(12a\r\n"), "Protocol error: invalid big number");
    assert_eq!(error(b"(\r\n"), "Protocol error: invalid big number");
    assert_eq!(error(b"$-2\r\n"), "Protocol error: invalid length");
    assert_eq!(error(b"$x\r\n"), "Protocol error: invalid length");
    assert_eq!(error(b"!-1\r\n"), "Protocol error: invalid length");
    assert_eq!(error(b"%-1\r\n"), "Protocol error: invalid length");
    assert_eq!(error(b"*-2\r\n"), "Protocol error: invalid length");
    assert_eq!(
        error(b"$1\r\nab\r\n"),
        "Protocol error: expected CRLF after bulk data"
    );
    assert_eq!(
        error(b"=3\r\ntxt\r\n"),
        "Protocol error: invalid verbatim string"
    );
    assert_eq!(
        error(b"=4\r\ntxt-\r\n"),
        "Protocol error: invalid verbatim string"
    );
}

#[test]
fn errors_inside_aggregates_are_found_before_the_end() {
    // The array claims more elements than are present, but the bad one is
    // already visible: report it rather than wait.
    assert_eq!(
        error(b"*5\r\n:1\r\n:x\r\n"),
        "Protocol error: invalid integer"
    );
}

#[test]
fn huge_counts_neither_allocate_nor_overflow() {
    assert_eq!(parse_value(b"*9223372036854775807\r\n:1\r\n"), Ok(None));
    assert_eq!(
        skip_value(b"%9223372036854775807\r\n|9223372036854775807\r\n"),
        Ok(None)
    );
}

#[test]
fn nesting_is_bounded() {
    let nested = |depth: usize| {
        let mut buf = b"*1\r\n".repeat(depth);
        buf.extend_from_slice(b":7\r\n");
        buf
    };
    let buf = nested(MAX_DEPTH);
    let mut cur = &value(&buf);
    let mut seen = 0;
    while let Value::Array(items) = cur {
        cur = &items[0];
        seen += 1;
    }
    assert_eq!((seen, cur), (MAX_DEPTH, &Value::Integer(7)));

    let too_deep = "Protocol error: reply nested too deeply";
    assert_eq!(error(&nested(MAX_DEPTH + 1)), too_deep);
    // Found while the input is still arriving, with no stack to exhaust.
    assert_eq!(
        skip_value(&b"*1\r\n".repeat(1_000_000)).unwrap_err().0,
        too_deep
    );
    // Attribute contents count as a level too.
    let mut buf = b"*1\r\n".repeat(MAX_DEPTH);
    buf.extend_from_slice(b"|1\r\n+k\r\n+v\r\n:1\r\n");
    assert_eq!(error(&buf), too_deep);
}

#[test]
fn encode_command_writes_a_multibulk_request() {
    let mut out = b"x".to_vec();
    encode_command(&mut out, &[b"SET", b"k", b"a\r\nb", b""]);
    assert_eq!(
        out,
        b"x*4\r\n$3\r\nSET\r\n$1\r\nk\r\n$4\r\na\r\nb\r\n$0\r\n\r\n"
    );
}
