//! Standard base64 (RFC 4648, padded) for meta-protocol binary keys (the `b` flag).

// memcached's decoder silently skips bytes outside the alphabet; ours refuses
// them, so a key either round-trips exactly or the request is rejected.

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Sextet value of an alphabet byte; padding is handled by the caller.
fn sextet(b: u8) -> Option<u32> {
    let v = match b {
        b'A'..=b'Z' => b - b'A',
        b'a'..=b'z' => b - b'a' + 26,
        b'0'..=b'9' => b - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => return None,
    };
    Some(u32::from(v))
}

/// Walks `src` as base64, handing each decoded byte to `emit`; `false` on malformed input
/// or an empty result (memcached treats a zero-length decode as failure).
fn decode_with(src: &[u8], mut emit: impl FnMut(u8)) -> bool {
    if src.is_empty() || !src.len().is_multiple_of(4) {
        return false;
    }
    let quads = src.len() / 4;
    for (i, quad) in src.chunks_exact(4).enumerate() {
        let last = i + 1 == quads;
        let pad = match quad {
            [_, _, b'=', b'='] if last => 2,
            [_, _, _, b'='] if last => 1,
            _ => 0,
        };
        let mut acc = 0u32;
        for &b in &quad[..4 - pad] {
            match sextet(b) {
                Some(v) => acc = (acc << 6) | v,
                None => return false,
            }
        }
        acc <<= 6 * pad as u32;
        let bytes = acc.to_be_bytes();
        for &b in &bytes[1..4 - pad] {
            emit(b);
        }
    }
    // Only "xx==" can decode to a single byte, so the result is never empty here.
    true
}

/// Whether `src` is a well-formed, non-empty, padded base64 string.
pub fn is_base64_key(src: &[u8]) -> bool {
    decode_with(src, |_| {})
}

/// Decodes a base64 key into `out`, replacing its contents.
///
/// Returns `false` (leaving `out` holding an unspecified prefix) if `src` is
/// not well-formed padded base64 or decodes to nothing. Reusing one `out`
/// buffer per connection keeps this allocation-free in the steady state.
pub fn decode_base64_key(src: &[u8], out: &mut Vec<u8>) -> bool {
    out.clear();
    decode_with(src, |b| out.push(b))
}

/// Appends the padded base64 encoding of `src` to `out`.
pub fn encode_base64(src: &[u8], out: &mut Vec<u8>) {
    out.reserve(src.len().div_ceil(3) * 4);
    for chunk in src.chunks(3) {
        let mut buf = [0u8; 3];
        buf[..chunk.len()].copy_from_slice(chunk);
        let n = (u32::from(buf[0]) << 16) | (u32::from(buf[1]) << 8) | u32::from(buf[2]);
        let sym = |shift: u32| ALPHABET[((n >> shift) & 63) as usize];
        out.push(sym(18));
        out.push(sym(12));
        out.push(if chunk.len() > 1 { sym(6) } else { b'=' });
        out.push(if chunk.len() > 2 { sym(0) } else { b'=' });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(s: &[u8]) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        decode_base64_key(s, &mut out).then_some(out)
    }

    #[test]
    fn rfc4648_vectors() {
        let cases: [(&[u8], &[u8]); 6] = [
            (b"f", b"Zg=="),
            (b"fo", b"Zm8="),
            (b"foo", b"Zm9v"),
            (b"foob", b"Zm9vYg=="),
            (b"fooba", b"Zm9vYmE="),
            (b"foobar", b"Zm9vYmFy"),
        ];
        for (plain, enc) in cases {
            let mut out = Vec::new();
            encode_base64(plain, &mut out);
            assert_eq!(out, enc);
            assert_eq!(dec(enc).as_deref(), Some(plain));
        }
    }

    #[test]
    fn rejects_malformed() {
        for bad in [
            &b""[..],
            b"Zg",
            b"Zg=",
            b"Z===",
            b"====",
            b"Zg==Zg==",
            b"Zm9v\n",
            b"Zm 9",
            b"Zm=v",
            b"Zm9v====",
        ] {
            assert_eq!(dec(bad), None, "{:?}", bad.escape_ascii().to_string());
            assert!(!is_base64_key(bad));
        }
    }

    #[test]
    fn binary_round_trip() {
        let all: Vec<u8> = (0..=255).collect();
        let mut enc = Vec::new();
        encode_base64(&all, &mut enc);
        assert_eq!(dec(&enc), Some(all));
    }
}
