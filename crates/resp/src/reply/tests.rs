//! Unit tests for reply encoding: exact bytes for both protocol versions.

use super::*;
use Version::{Resp2, Resp3};

fn encode(f: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut out = b"prev".to_vec();
    f(&mut out);
    assert_eq!(&out[..4], b"prev", "encoders must append, not overwrite");
    out.split_off(4)
}

fn text(d: f64) -> String {
    let mut out = Vec::new();
    format_double(d, &mut out);
    String::from_utf8(out).unwrap()
}

#[test]
fn status_and_error_lines() {
    assert_eq!(encode(ok), b"+OK\r\n");
    assert_eq!(encode(|o| simple(o, b"PONG")), PONG);
    assert_eq!(
        encode(|o| error(o, b"ERR unknown command")),
        b"-ERR unknown command\r\n"
    );
    assert_eq!(
        encode(|o| error(o, b"ERR a\r\nb\rc\nd")),
        b"-ERR a  b c d\r\n"
    );
    assert_eq!(encode(|o| simple(o, b"x\r\ny")), b"+x  y\r\n");
    assert_eq!(encode(|o| error(o, b"")), b"-\r\n");
}

#[test]
fn protocol_error_reply_has_err_prefix() {
    let e = crate::ProtocolError("Protocol error: expected '$', got '\r'".into());
    assert_eq!(
        encode(|o| e.write_reply(o)),
        b"-ERR Protocol error: expected '$', got ' '\r\n"
    );
}

#[test]
fn integers_and_bulks() {
    assert_eq!(encode(|o| integer(o, 0)), ZERO);
    assert_eq!(encode(|o| integer(o, -42)), b":-42\r\n");
    assert_eq!(
        encode(|o| integer(o, i64::MIN)),
        b":-9223372036854775808\r\n"
    );
    assert_eq!(encode(|o| bulk(o, b"")), EMPTY_BULK);
    assert_eq!(encode(|o| bulk(o, b"a\r\n\0")), b"$4\r\na\r\n\0\r\n");
}

#[test]
fn nulls_depend_on_version() {
    assert_eq!(encode(|o| null(o, Resp2)), b"$-1\r\n");
    assert_eq!(encode(|o| null(o, Resp3)), b"_\r\n");
    assert_eq!(encode(|o| null_array(o, Resp2)), b"*-1\r\n");
    assert_eq!(encode(|o| null_array(o, Resp3)), b"_\r\n");
}

#[test]
fn aggregate_headers() {
    assert_eq!(encode(|o| array_len(o, 0)), EMPTY_ARRAY);
    assert_eq!(encode(|o| array_len(o, 12)), b"*12\r\n");
    assert_eq!(encode(|o| map_len(o, 3, Resp2)), b"*6\r\n");
    assert_eq!(encode(|o| map_len(o, 3, Resp3)), b"%3\r\n");
    assert_eq!(encode(|o| set_len(o, 3, Resp2)), b"*3\r\n");
    assert_eq!(encode(|o| set_len(o, 3, Resp3)), b"~3\r\n");
    assert_eq!(encode(|o| push_len(o, 3, Resp2)), b"*3\r\n");
    assert_eq!(encode(|o| push_len(o, 3, Resp3)), b">3\r\n");
}

#[test]
fn resp3_scalars_and_their_resp2_fallbacks() {
    assert_eq!(encode(|o| boolean(o, true, Resp3)), b"#t\r\n");
    assert_eq!(encode(|o| boolean(o, false, Resp3)), b"#f\r\n");
    assert_eq!(encode(|o| boolean(o, true, Resp2)), b":1\r\n");
    assert_eq!(encode(|o| boolean(o, false, Resp2)), b":0\r\n");
    assert_eq!(
        encode(|o| verbatim(o, b"txt", b"hi\r\n", Resp3)),
        b"=8\r\ntxt:hi\r\n\r\n"
    );
    assert_eq!(
        encode(|o| verbatim(o, b"mkd", b"hi", Resp2)),
        b"$2\r\nhi\r\n"
    );
    assert_eq!(
        encode(|o| big_number(o, b"-12345678901234567890", Resp3)),
        b"(-12345678901234567890\r\n"
    );
    assert_eq!(encode(|o| big_number(o, b"123", Resp2)), b"$3\r\n123\r\n");
}

#[test]
fn doubles() {
    assert_eq!(encode(|o| double(o, 10.5, Resp3)), b",10.5\r\n");
    assert_eq!(encode(|o| double(o, 10.5, Resp2)), b"$4\r\n10.5\r\n");
    assert_eq!(encode(|o| double(o, f64::INFINITY, Resp3)), b",inf\r\n");
    assert_eq!(
        encode(|o| double(o, f64::NEG_INFINITY, Resp2)),
        b"$4\r\n-inf\r\n"
    );
    assert_eq!(encode(|o| double(o, f64::NAN, Resp3)), b",nan\r\n");
    // Too long for the stack buffer: must still be complete and exact.
    let huge = encode(|o| double(o, 1e300, Resp3));
    assert_eq!(huge.len(), 1 + 301 + 2);
    assert_eq!(&huge[..5], b",1000");
    assert_eq!(&huge[huge.len() - 3..], b"0\r\n");
    let tiny = encode(|o| double(o, -1.5e-300, Resp2));
    assert!(
        tiny.starts_with(b"$304\r\n-0.000"),
        "{:?}",
        String::from_utf8_lossy(&tiny)
    );
}

#[test]
fn format_double_is_incrbyfloat_style() {
    assert_eq!(text(10.5), "10.5");
    assert_eq!(text(3.0), "3");
    assert_eq!(text(5000.0), "5000");
    assert_eq!(text(-2.0), "-2");
    assert_eq!(text(0.1), "0.1");
    assert_eq!(text(0.1 + 0.2), "0.30000000000000004");
    assert_eq!(text(1.0 / 3.0), "0.3333333333333333");
    assert_eq!(text(1e21), "1000000000000000000000");
    assert_eq!(text(1e-7), "0.0000001");
    assert_eq!(text(0.0), "0");
    assert_eq!(text(-0.0), "0");
    assert_eq!(text(f64::INFINITY), "inf");
    assert_eq!(text(f64::NEG_INFINITY), "-inf");
    assert_eq!(text(f64::NAN), "nan");
}

#[test]
fn format_double_round_trips() {
    for d in [
        f64::MAX,
        f64::MIN_POSITIVE,
        5e-324,
        123456.789,
        -9.87654321e-5,
    ] {
        assert_eq!(text(d).parse::<f64>().unwrap(), d);
    }
}
