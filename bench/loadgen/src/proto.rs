//! Request encoders and reply framers for RESP and memcached text.
//!
//! Encoders append to a caller-owned buffer; framers look at the front of a
//! read buffer and say how long the first reply is and what it meant, without
//! allocating or copying payloads.

use std::fmt;
use std::str::FromStr;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Resp,
    Memcache,
}

impl FromStr for Protocol {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "resp" | "redis" => Ok(Protocol::Resp),
            "memcache" | "memcached" | "mc" => Ok(Protocol::Memcache),
            _ => Err(format!("unknown protocol {s:?} (resp or memcache)")),
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Protocol::Resp => "resp",
            Protocol::Memcache => "memcache",
        })
    }
}

/// What the null transaction is on the memcached protocol (RESP always uses PING).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum McNull {
    /// `mn` (meta no-op): answered `MN`.
    Mn,
    /// `version`: answered `VERSION x.y.z`.
    Version,
}

impl FromStr for McNull {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "mn" => Ok(McNull::Mn),
            "version" => Ok(McNull::Version),
            _ => Err(format!(
                "unknown memcached null command {s:?} (mn or version)"
            )),
        }
    }
}

/// The kind of a request, remembered until its reply arrives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Get,
    Set,
    Null,
}

/// What a reply meant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reply {
    /// A successful non-read reply (`+OK`, `STORED`, `+PONG`, `MN`, ...).
    Ok,
    /// A read that found its key.
    Hit,
    /// A read that did not.
    Miss,
    /// An error reply (`-ERR ...`, `SERVER_ERROR ...`, `NOT_STORED`, ...).
    Error,
}

/// Encodes requests for one protocol.
#[derive(Clone, Debug)]
pub struct Encoder {
    protocol: Protocol,
    null: McNull,
    /// The expiry writes carry, as decimal text.
    ttl: Option<Vec<u8>>,
    /// Whether `ttl` is an absolute Unix time (EXAT) rather than seconds (EX).
    absolute: bool,
}

/// When written keys expire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expiry {
    Never,
    /// Seconds after the write.
    In(u64),
    /// At this Unix time (seconds), for every key at once.
    At(u64),
}

impl Encoder {
    pub fn new(protocol: Protocol, null: McNull, expiry: Expiry) -> Encoder {
        let (ttl, absolute) = match expiry {
            Expiry::Never => (None, false),
            Expiry::In(s) => (Some(s), false),
            // memcached reads exptimes above 30 days as Unix times.
            Expiry::At(t) => (Some(t), true),
        };
        Encoder {
            protocol,
            null,
            ttl: ttl.map(|t| t.to_string().into_bytes()),
            absolute,
        }
    }

    #[inline]
    pub fn get(&self, out: &mut Vec<u8>, key: &[u8]) {
        match self.protocol {
            Protocol::Resp => resp::value::encode_command(out, &[b"GET", key]),
            Protocol::Memcache => {
                out.extend_from_slice(b"get ");
                out.extend_from_slice(key);
                out.extend_from_slice(b"\r\n");
            }
        }
    }

    #[inline]
    pub fn set(&self, out: &mut Vec<u8>, key: &[u8], value: &[u8]) {
        match self.protocol {
            Protocol::Resp => match &self.ttl {
                None => resp::value::encode_command(out, &[b"SET", key, value]),
                Some(t) => {
                    let how: &[u8] = if self.absolute { b"EXAT" } else { b"EX" };
                    resp::value::encode_command(out, &[b"SET", key, value, how, t])
                }
            },
            Protocol::Memcache => {
                out.reserve(key.len() + value.len() + 40);
                out.extend_from_slice(b"set ");
                out.extend_from_slice(key);
                out.extend_from_slice(b" 0 ");
                match &self.ttl {
                    None => out.push(b'0'),
                    Some(t) => out.extend_from_slice(t),
                }
                out.push(b' ');
                out.extend_from_slice(itoa::Buffer::new().format(value.len()).as_bytes());
                out.extend_from_slice(b"\r\n");
                out.extend_from_slice(value);
                out.extend_from_slice(b"\r\n");
            }
        }
    }

    #[inline]
    pub fn null(&self, out: &mut Vec<u8>) {
        match (self.protocol, self.null) {
            (Protocol::Resp, _) => out.extend_from_slice(b"*1\r\n$4\r\nPING\r\n"),
            (Protocol::Memcache, McNull::Mn) => out.extend_from_slice(b"mn\r\n"),
            (Protocol::Memcache, McNull::Version) => out.extend_from_slice(b"version\r\n"),
        }
    }
}

/// Frames the first reply in `buf`, sent for a request of kind `op`:
/// `Ok(None)` while it is incomplete, else its meaning and its length.
/// `Err` means the stream is not what the protocol allows (desynchronised).
#[inline]
pub fn parse_reply(
    protocol: Protocol,
    op: Op,
    buf: &[u8],
) -> Result<Option<(Reply, usize)>, String> {
    match protocol {
        Protocol::Resp => parse_resp(op, buf),
        Protocol::Memcache => parse_mc(op, buf),
    }
}

#[inline]
fn line_end(buf: &[u8], from: usize) -> Option<usize> {
    buf.get(from..)?
        .iter()
        .position(|&b| b == b'\n')
        .map(|i| from + i)
}

fn parse_int(digits: &[u8]) -> Option<i64> {
    let (neg, d) = match digits.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, digits),
    };
    if d.is_empty() || d.len() > 18 {
        return None;
    }
    let mut v: i64 = 0;
    for &c in d {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v * 10 + (c - b'0') as i64;
    }
    Some(if neg { -v } else { v })
}

fn parse_resp(op: Op, buf: &[u8]) -> Result<Option<(Reply, usize)>, String> {
    let Some(&first) = buf.first() else {
        return Ok(None);
    };
    match first {
        b'+' | b':' | b'-' | b'_' | b',' | b'#' | b'(' => {
            let Some(nl) = line_end(buf, 1) else {
                return Ok(None);
            };
            let reply = match (first, op) {
                (b'-', _) => Reply::Error,
                (b'_', Op::Get) => Reply::Miss,
                _ => Reply::Ok,
            };
            Ok(Some((reply, nl + 1)))
        }
        b'$' => {
            let Some(nl) = line_end(buf, 1) else {
                return Ok(None);
            };
            let head = buf[1..nl].strip_suffix(b"\r").unwrap_or(&buf[1..nl]);
            let len = parse_int(head)
                .ok_or_else(|| format!("bad bulk length {:?}", String::from_utf8_lossy(head)))?;
            if len < 0 {
                let r = if op == Op::Get {
                    Reply::Miss
                } else {
                    Reply::Ok
                };
                return Ok(Some((r, nl + 1)));
            }
            let total = nl + 1 + len as usize + 2;
            if buf.len() < total {
                return Ok(None);
            }
            let r = if op == Op::Get { Reply::Hit } else { Reply::Ok };
            Ok(Some((r, total)))
        }
        _ => match resp::value::skip_value(buf) {
            Ok(None) => Ok(None),
            Ok(Some(n)) => Ok(Some((
                if first == b'!' {
                    Reply::Error
                } else {
                    Reply::Ok
                },
                n,
            ))),
            Err(e) => Err(format!("{e:?}")),
        },
    }
}

fn parse_mc(op: Op, buf: &[u8]) -> Result<Option<(Reply, usize)>, String> {
    let Some(nl) = line_end(buf, 0) else {
        return Ok(None);
    };
    let line = buf[..nl].strip_suffix(b"\r").unwrap_or(&buf[..nl]);
    if op == Op::Get && line.starts_with(b"VALUE ") {
        // VALUE <key> <flags> <bytes> [<cas>]
        let bytes = line
            .split(|&b| b == b' ')
            .filter(|t| !t.is_empty())
            .nth(3)
            .and_then(parse_int)
            .filter(|&n| n >= 0)
            .ok_or_else(|| format!("bad VALUE line {:?}", String::from_utf8_lossy(line)))?;
        let data_end = nl + 1 + bytes as usize + 2;
        let total = data_end + 5;
        if buf.len() < total {
            return Ok(None);
        }
        if &buf[data_end..total] != b"END\r\n" {
            return Err("expected END after a single VALUE".to_string());
        }
        return Ok(Some((Reply::Hit, total)));
    }
    let reply = match line {
        b"END" if op == Op::Get => Reply::Miss,
        b"STORED" if op == Op::Set => Reply::Ok,
        b"MN" if op == Op::Null => Reply::Ok,
        l if op == Op::Null && l.starts_with(b"VERSION ") => Reply::Ok,
        b"ERROR" | b"NOT_STORED" | b"EXISTS" | b"NOT_FOUND" => Reply::Error,
        l if l.starts_with(b"ERROR ")
            || l.starts_with(b"CLIENT_ERROR")
            || l.starts_with(b"SERVER_ERROR") =>
        {
            Reply::Error
        }
        _ => {
            return Err(format!(
                "unexpected reply {:?} to {op:?}",
                String::from_utf8_lossy(&line[..line.len().min(80)])
            ))
        }
    };
    Ok(Some((reply, nl + 1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resp_args(buf: &[u8]) -> Vec<Vec<u8>> {
        // Decode with the server's own request parser.
        let mut args = Vec::new();
        let mut scratch = Vec::new();
        match resp::request::parse_request(
            buf,
            &resp::request::Limits::default(),
            &mut args,
            &mut scratch,
        ) {
            Ok((resp::request::Parsed::Complete(n), src)) => {
                assert_eq!(n, buf.len(), "one whole request");
                let base: &[u8] = match src {
                    resp::request::ArgSource::Buffer => buf,
                    resp::request::ArgSource::Scratch => &scratch,
                };
                args.iter().map(|r| base[r.clone()].to_vec()).collect()
            }
            other => panic!("did not parse: {other:?}"),
        }
    }

    #[test]
    fn resp_encoding_round_trips_through_the_server_parser() {
        let e = Encoder::new(Protocol::Resp, McNull::Mn, Expiry::Never);
        let mut out = Vec::new();
        e.get(&mut out, b"key:000000000042");
        assert_eq!(out, b"*2\r\n$3\r\nGET\r\n$16\r\nkey:000000000042\r\n");
        assert_eq!(
            resp_args(&out),
            vec![b"GET".to_vec(), b"key:000000000042".to_vec()]
        );
        out.clear();
        let value = vec![b'v'; 1000];
        e.set(&mut out, b"k", &value);
        assert_eq!(
            resp_args(&out),
            vec![b"SET".to_vec(), b"k".to_vec(), value.clone()]
        );
        out.clear();
        e.null(&mut out);
        assert_eq!(resp_args(&out), vec![b"PING".to_vec()]);
        let t = Encoder::new(Protocol::Resp, McNull::Mn, Expiry::In(60));
        out.clear();
        t.set(&mut out, b"k", b"v");
        assert_eq!(
            resp_args(&out),
            vec![
                b"SET".to_vec(),
                b"k".to_vec(),
                b"v".to_vec(),
                b"EX".to_vec(),
                b"60".to_vec()
            ]
        );
    }

    #[test]
    fn memcache_encoding_round_trips_through_the_server_parser() {
        use memcache::{Parsed, Request, StoreKind};
        let e = Encoder::new(Protocol::Memcache, McNull::Mn, Expiry::Never);
        let mut out = Vec::new();
        e.get(&mut out, b"key:1");
        assert_eq!(out, b"get key:1\r\n");
        match memcache::parse(&out, 1 << 20).unwrap() {
            Parsed::Complete(Request::Get { .. }, consumed) => assert_eq!(consumed, out.len()),
            other => panic!("{other:?}"),
        }
        out.clear();
        e.set(&mut out, b"key:1", b"hello");
        assert_eq!(out, b"set key:1 0 0 5\r\nhello\r\n");
        match memcache::parse(&out, 1 << 20).unwrap() {
            Parsed::Complete(request, consumed) => {
                assert_eq!(consumed, out.len());
                match request {
                    Request::Store {
                        kind, key, data, ..
                    } => {
                        assert_eq!(kind, StoreKind::Set);
                        assert_eq!(key, b"key:1");
                        assert_eq!(data, b"hello");
                    }
                    other => panic!("{other:?}"),
                }
            }
            other => panic!("{other:?}"),
        }
        out.clear();
        e.null(&mut out);
        assert_eq!(out, b"mn\r\n");
        let v = Encoder::new(Protocol::Memcache, McNull::Version, Expiry::In(5));
        out.clear();
        v.null(&mut out);
        assert_eq!(out, b"version\r\n");
        out.clear();
        v.set(&mut out, b"a", b"xy");
        assert_eq!(out, b"set a 0 5 2\r\nxy\r\n");
        let at = Encoder::new(Protocol::Memcache, McNull::Mn, Expiry::At(4_000_000_000));
        out.clear();
        at.set(&mut out, b"a", b"xy");
        assert_eq!(out, b"set a 0 4000000000 2\r\nxy\r\n");
        let at = Encoder::new(Protocol::Resp, McNull::Mn, Expiry::At(4_000_000_000));
        out.clear();
        at.set(&mut out, b"a", b"xy");
        assert_eq!(
            resp_args(&out)[3..],
            [b"EXAT".to_vec(), b"4000000000".to_vec()]
        );
    }

    #[test]
    fn resp_replies_are_framed_and_classified() {
        let p = |op, b: &[u8]| parse_reply(Protocol::Resp, op, b).unwrap();
        assert_eq!(p(Op::Set, b"+OK\r\n"), Some((Reply::Ok, 5)));
        assert_eq!(p(Op::Null, b"+PONG\r\n+PONG\r\n"), Some((Reply::Ok, 7)));
        assert_eq!(p(Op::Get, b"$-1\r\n"), Some((Reply::Miss, 5)));
        assert_eq!(p(Op::Get, b"_\r\n"), Some((Reply::Miss, 3)));
        assert_eq!(p(Op::Get, b"$3\r\nabc\r\n"), Some((Reply::Hit, 9)));
        assert_eq!(p(Op::Get, b"$0\r\n\r\n"), Some((Reply::Hit, 6)));
        assert_eq!(p(Op::Get, b"$3\r\nabc\r"), None);
        assert_eq!(p(Op::Get, b"$3\r\n"), None);
        assert_eq!(p(Op::Get, b"$3"), None);
        assert_eq!(p(Op::Get, b""), None);
        assert_eq!(
            p(Op::Set, b"-OOM command not allowed\r\n"),
            Some((Reply::Error, 26))
        );
        assert_eq!(p(Op::Set, b"-ERR x"), None);
        assert_eq!(
            p(Op::Null, b"*2\r\n$1\r\na\r\n:1\r\n"),
            Some((Reply::Ok, 15))
        );
        assert_eq!(p(Op::Null, b"*2\r\n$1\r\na\r\n"), None);
        assert!(parse_reply(Protocol::Resp, Op::Get, b"$x\r\n").is_err());
        assert!(parse_reply(Protocol::Resp, Op::Get, b"?\r\n").is_err());
    }

    #[test]
    fn memcache_replies_are_framed_and_classified() {
        let p = |op, b: &[u8]| parse_reply(Protocol::Memcache, op, b).unwrap();
        assert_eq!(p(Op::Get, b"END\r\n"), Some((Reply::Miss, 5)));
        let hit = b"VALUE key:1 0 5\r\nhello\r\nEND\r\n";
        assert_eq!(p(Op::Get, hit), Some((Reply::Hit, hit.len())));
        for cut in 0..hit.len() {
            assert_eq!(p(Op::Get, &hit[..cut]), None, "cut at {cut}");
        }
        let with_cas = b"VALUE k 3 2 99\r\nab\r\nEND\r\nEND\r\n";
        assert_eq!(p(Op::Get, with_cas), Some((Reply::Hit, with_cas.len() - 5)));
        assert_eq!(p(Op::Set, b"STORED\r\n"), Some((Reply::Ok, 8)));
        assert_eq!(p(Op::Null, b"MN\r\n"), Some((Reply::Ok, 4)));
        assert_eq!(p(Op::Null, b"VERSION 1.6.21\r\n"), Some((Reply::Ok, 16)));
        assert_eq!(
            p(Op::Set, b"SERVER_ERROR out of memory storing object\r\n"),
            Some((Reply::Error, 43))
        );
        assert_eq!(p(Op::Set, b"NOT_STORED\r\n"), Some((Reply::Error, 12)));
        assert_eq!(p(Op::Get, b"ERROR\r\n"), Some((Reply::Error, 7)));
        assert_eq!(
            p(Op::Get, b"CLIENT_ERROR bad\r\n"),
            Some((Reply::Error, 18))
        );
        assert!(parse_reply(Protocol::Memcache, Op::Set, b"END\r\n").is_err());
        assert!(parse_reply(Protocol::Memcache, Op::Get, b"VALUE k 0 2\r\nab\r\nXXX\r\n").is_err());
    }
}
