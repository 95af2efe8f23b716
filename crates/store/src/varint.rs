//! LEB128 varints (7 bits a byte, low bits first), the one encoding of lengths and small numbers
//! in records, collections, snapshots and the replication stream.

/// Bytes the varint of `v` takes (1 to 10).
#[inline]
pub fn len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// Writes the varint of `v` at the start of `buf` (which has room: `len(v)` bytes); returns the
/// bytes written.
#[inline]
pub fn put(buf: &mut [u8], mut v: u64) -> usize {
    let mut i = 0;
    while v >= 0x80 {
        buf[i] = (v as u8) | 0x80;
        v >>= 7;
        i += 1;
    }
    buf[i] = v as u8;
    i + 1
}

/// Appends the varint of `v` to `out`.
#[inline]
pub fn push(out: &mut Vec<u8>, v: u64) {
    let mut buf = [0u8; 10];
    let n = put(&mut buf, v);
    out.extend_from_slice(&buf[..n]);
}

/// Reads a varint at the start of `buf`: its value and the bytes it took; None when `buf` ends
/// first or the varint runs past 10 bytes.
#[inline]
pub fn get(buf: &[u8]) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for (i, &b) in buf.iter().enumerate().take(10) {
        v |= ((b & 0x7f) as u64) << (7 * i);
        if b < 0x80 {
            return Some((v, i + 1));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_lengths() {
        for v in [
            0u64,
            1,
            127,
            128,
            300,
            16_383,
            16_384,
            u32::MAX as u64,
            u64::MAX,
        ] {
            let mut buf = [0u8; 10];
            let n = put(&mut buf, v);
            assert_eq!(n, len(v), "{v}");
            assert_eq!(get(&buf[..n]), Some((v, n)), "{v}");
            let mut out = Vec::new();
            push(&mut out, v);
            assert_eq!(out, buf[..n]);
        }
        assert_eq!(len(u64::MAX), 10);
        assert_eq!(get(&[0x80, 0x80]), None);
        assert_eq!(get(&[]), None);
    }
}
