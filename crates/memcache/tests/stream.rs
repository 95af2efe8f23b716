//! A byte stream driven the way a server drives it: pipelined requests, errors
//! in between, data blocks swallowed across reads.

use memcache::{parse, response, Error, Parsed, Request};

/// Feeds `input` in `chunk`-byte reads and writes the replies memcached would
/// give, with `VALUE`-less stand-ins for successful requests.
fn serve(input: &[u8], chunk: usize, max_value_size: usize) -> String {
    let mut out = Vec::new();
    let mut buf: Vec<u8> = Vec::new();
    let mut skip = 0usize; // bytes still to swallow from a refused data block
    for piece in input.chunks(chunk.max(1)) {
        let mut piece = piece;
        let dropped = skip.min(piece.len());
        skip -= dropped;
        piece = &piece[dropped..];
        buf.extend_from_slice(piece);
        loop {
            let used = match parse(&buf, max_value_size) {
                Ok(Parsed::Complete(req, n)) => {
                    let name = match req {
                        Request::Store { noreply: true, .. } => String::new(),
                        Request::Store { .. } => "STORED\r\n".into(),
                        Request::Get { keys, .. } => format!("GET {}\r\n", keys.count()),
                        Request::MetaNoop => "MN\r\n".into(),
                        Request::MetaSet { data, .. } => format!("HD {}\r\n", data.len()),
                        other => format!("{other:?}\r\n"),
                    };
                    out.extend_from_slice(name.as_bytes());
                    n
                }
                Ok(Parsed::Incomplete { .. }) => break,
                Err(e) => {
                    e.write_reply(&mut out);
                    if e.close() {
                        return String::from_utf8(out).unwrap() + "<closed>";
                    }
                    let n = e.consumed();
                    if n > buf.len() {
                        skip = n - buf.len();
                        buf.len()
                    } else {
                        n
                    }
                }
            };
            buf.drain(..used);
        }
    }
    String::from_utf8(out).unwrap()
}

const SCRIPT: &[u8] = b"set a 0 0 1\r\nx\r\n\
bogus\r\n\
set b x 0 1\r\nyy\r\n\
get a b\r\n\
ms k 2 z\r\nhi\r\n\
set c 0 0 1 noreply\r\nzz\r\n\
set d 0 0 20\r\n01234567890123456789\r\n\
ms e 12 T1\r\nhello\r\nworld\r\n\
mn\r\n";

const EXPECTED: &str = "STORED\r\n\
ERROR\r\n\
CLIENT_ERROR bad command line format\r\n\
ERROR\r\n\
GET 2\r\n\
CLIENT_ERROR invalid flag\r\n\
ERROR\r\n\
SERVER_ERROR object too large for cache\r\n\
HD 12\r\n\
MN\r\n";

#[test]
fn pipelined_script_in_one_read() {
    // "set c ... noreply" with a bad chunk stays silent, as memcached does under
    // noreply; memcached took exactly 1 + 2 bytes for it ("zz\r"), so the lone
    // "\n" left over reads as an empty line and earns an ERROR.
    assert_eq!(serve(SCRIPT, SCRIPT.len(), 16), EXPECTED);
}

#[test]
fn pipelined_script_in_every_read_size() {
    for chunk in 1..=SCRIPT.len() {
        assert_eq!(serve(SCRIPT, chunk, 16), EXPECTED, "chunk {chunk}");
    }
}

#[test]
fn oversized_block_is_swallowed_before_it_arrives() {
    let mut input = b"set big 0 0 100\r\n".to_vec();
    input.extend(std::iter::repeat_n(b'v', 100));
    input.extend_from_slice(b"\r\nmn\r\n");
    // Refused as soon as the line is in, the block discarded as it streams past.
    match parse(&input[..17], 10) {
        Err(Error::TooLarge {
            consumed,
            noreply: false,
        }) => assert_eq!(consumed, 17 + 102),
        other => panic!("{other:?}"),
    }
    for chunk in [1, 7, 17, 64, input.len()] {
        assert_eq!(
            serve(&input, chunk, 10),
            "SERVER_ERROR object too large for cache\r\nMN\r\n"
        );
    }
}

#[test]
fn long_garbage_closes() {
    let input = vec![b'x'; 5000];
    assert_eq!(serve(&input, 1000, 16), "<closed>");
}

#[test]
fn responses_compose_like_memcached() {
    let mut out = Vec::new();
    response::value(&mut out, b"a", 0, b"x", Some(1));
    response::end(&mut out);
    assert_eq!(out, b"VALUE a 0 1 1\r\nx\r\nEND\r\n");
}
