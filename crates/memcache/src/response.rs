//! Text-protocol replies, appended to a caller-owned buffer.

fn line(out: &mut Vec<u8>, s: &[u8]) {
    out.extend_from_slice(s);
    out.extend_from_slice(b"\r\n");
}

fn num(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// `VALUE <key> <flags> <bytes> [<cas>]\r\n` alone, for callers that send the data block separately.
pub fn value_header(out: &mut Vec<u8>, key: &[u8], flags: u32, len: usize, cas: Option<u64>) {
    out.extend_from_slice(b"VALUE ");
    out.extend_from_slice(key);
    out.push(b' ');
    num(out, u64::from(flags));
    out.push(b' ');
    num(out, len as u64);
    if let Some(cas) = cas {
        out.push(b' ');
        num(out, cas);
    }
    out.extend_from_slice(b"\r\n");
}

/// One retrieval hit: the `VALUE` line, then `data` and its `\r\n`.
pub fn value(out: &mut Vec<u8>, key: &[u8], flags: u32, data: &[u8], cas: Option<u64>) {
    value_header(out, key, flags, data.len(), cas);
    line(out, data);
}

/// `END\r\n`: closes a retrieval or `stats` reply.
pub fn end(out: &mut Vec<u8>) {
    line(out, b"END");
}

pub fn stored(out: &mut Vec<u8>) {
    line(out, b"STORED");
}

pub fn not_stored(out: &mut Vec<u8>) {
    line(out, b"NOT_STORED");
}

pub fn exists(out: &mut Vec<u8>) {
    line(out, b"EXISTS");
}

pub fn not_found(out: &mut Vec<u8>) {
    line(out, b"NOT_FOUND");
}

pub fn deleted(out: &mut Vec<u8>) {
    line(out, b"DELETED");
}

pub fn touched(out: &mut Vec<u8>) {
    line(out, b"TOUCHED");
}

pub fn ok(out: &mut Vec<u8>) {
    line(out, b"OK");
}

/// `ERROR\r\n`: unknown command.
pub fn error(out: &mut Vec<u8>) {
    line(out, b"ERROR");
}

/// `CLIENT_ERROR <msg>\r\n`.
pub fn client_error(out: &mut Vec<u8>, msg: &str) {
    out.extend_from_slice(b"CLIENT_ERROR ");
    line(out, msg.as_bytes());
}

/// `SERVER_ERROR <msg>\r\n`.
pub fn server_error(out: &mut Vec<u8>, msg: &str) {
    out.extend_from_slice(b"SERVER_ERROR ");
    line(out, msg.as_bytes());
}

/// `<n>\r\n`: the new value after `incr`/`decr`.
pub fn number(out: &mut Vec<u8>, n: u64) {
    num(out, n);
    out.extend_from_slice(b"\r\n");
}

/// `VERSION <v>\r\n`.
pub fn version(out: &mut Vec<u8>, v: &str) {
    out.extend_from_slice(b"VERSION ");
    line(out, v.as_bytes());
}

/// `STAT <name> <value>\r\n`.
pub fn stat(out: &mut Vec<u8>, name: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
    out.extend_from_slice(b"STAT ");
    out.extend_from_slice(name.as_ref());
    out.push(b' ');
    line(out, value.as_ref());
}

/// `STAT <name> <n>\r\n` without formatting through a string.
pub fn stat_num(out: &mut Vec<u8>, name: impl AsRef<[u8]>, n: u64) {
    out.extend_from_slice(b"STAT ");
    out.extend_from_slice(name.as_ref());
    out.push(b' ');
    number(out, n);
}

/// A binary-protocol response with status 0x83 ("not supported") and a text body, so that a
/// client speaking the binary protocol reports a clear error.
pub fn binary_not_supported(out: &mut Vec<u8>, opcode: u8, opaque: u32) {
    const BODY: &[u8] = b"binary protocol not supported: use the text or meta protocol";
    out.extend_from_slice(&[0x81, opcode, 0, 0, 0, 0, 0x00, 0x83]);
    out.extend_from_slice(&(BODY.len() as u32).to_be_bytes());
    out.extend_from_slice(&opaque.to_be_bytes());
    out.extend_from_slice(&[0; 8]);
    out.extend_from_slice(BODY);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(f: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let mut out = Vec::new();
        f(&mut out);
        out
    }

    #[test]
    fn lines() {
        assert_eq!(
            w(|o| value(o, b"k", 5, b"a\r\nb", None)),
            b"VALUE k 5 4\r\na\r\nb\r\n"
        );
        assert_eq!(
            w(|o| value(o, b"k", 0, b"", Some(u64::MAX))),
            b"VALUE k 0 0 18446744073709551615\r\n\r\n"
        );
        assert_eq!(
            w(|o| value_header(o, b"k", u32::MAX, 3, None)),
            b"VALUE k 4294967295 3\r\n"
        );
        assert_eq!(w(end), b"END\r\n");
        assert_eq!(w(stored), b"STORED\r\n");
        assert_eq!(w(not_stored), b"NOT_STORED\r\n");
        assert_eq!(w(exists), b"EXISTS\r\n");
        assert_eq!(w(not_found), b"NOT_FOUND\r\n");
        assert_eq!(w(deleted), b"DELETED\r\n");
        assert_eq!(w(touched), b"TOUCHED\r\n");
        assert_eq!(w(ok), b"OK\r\n");
        assert_eq!(w(error), b"ERROR\r\n");
        assert_eq!(
            w(|o| client_error(o, "bad data chunk")),
            b"CLIENT_ERROR bad data chunk\r\n"
        );
        assert_eq!(
            w(|o| server_error(o, "out of memory")),
            b"SERVER_ERROR out of memory\r\n"
        );
        assert_eq!(w(|o| number(o, 0)), b"0\r\n");
        assert_eq!(w(|o| version(o, "1.6.0")), b"VERSION 1.6.0\r\n");
        assert_eq!(w(|o| stat(o, "pid", "42")), b"STAT pid 42\r\n");
        assert_eq!(w(|o| stat_num(o, "uptime", 7)), b"STAT uptime 7\r\n");
    }
}
