//! Requests of other protocols on the memcached port: HTTP lines and binary-protocol packets.

mod common;

use common::*;
use memcache::Error;

#[test]
fn http_request_lines_close_silently() {
    for input in [
        &b"POST / HTTP/1.1\r\nHost: x\r\n\r\nset k 0 0 1\r\n1\r\n"[..],
        b"GET /index.html HTTP/1.0\r\n",
        b"OPTIONS * HTTP/1.1 \r\n",
    ] {
        let e = err(input);
        assert!(e.close(), "{e:?}");
        assert_eq!(e.consumed(), input.len());
        let mut out = Vec::new();
        e.write_reply(&mut out);
        assert!(out.is_empty(), "memcached writes nothing before closing");
    }
    // Not an HTTP line: still an unknown command.
    assert_eq!(err(b"POST / HTTP\r\n"), unknown(13));
}

#[test]
fn binary_packet_answered_in_binary_then_closed() {
    let mut packet = vec![0x80, 0x0c, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 9, 8, 7, 6];
    packet.extend_from_slice(&[0; 8]);
    // The whole header is needed to echo its opaque.
    assert_eq!(need(&packet[..10]), Some(24));
    packet.push(b'k');
    let e = err(&packet);
    assert!(e.close());
    assert_eq!(e.consumed(), packet.len());
    assert!(matches!(
        e,
        Error::Binary {
            opcode: 0x0c,
            opaque: 0x0908_0706,
            ..
        }
    ));
    let mut out = Vec::new();
    e.write_reply(&mut out);
    assert_eq!(&out[..8], &[0x81, 0x0c, 0, 0, 0, 0, 0, 0x83]);
    let body_len = u32::from_be_bytes(out[8..12].try_into().unwrap()) as usize;
    assert_eq!(&out[12..16], &[9, 8, 7, 6]);
    assert_eq!(out.len(), 24 + body_len);
    assert!(out[24..].starts_with(b"binary protocol not supported"));
}
