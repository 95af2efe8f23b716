//! The bytes of an SQL snapshot: self-describing and versioned, so that a reader refuses what it
//! does not understand (another file, a newer version, damage) with a clear error instead of
//! handing SQLite a broken image. Version 1, all integers little-endian:
//!
//! | bytes  | field                                                                          |
//! |--------|--------------------------------------------------------------------------------|
//! | 8      | magic `CAIRNSQL`                                                               |
//! | 4      | format version (1)                                                             |
//! | 8      | position: number of the last SQL change included (the SQL change log's seq)    |
//! | 4      | n: tables with expiry rules                                                    |
//! | 24 × n | per table: rules id (i64), operation count (u64), last write sequence (u64)     |
//! | 8      | L: length of the database image                                                |
//! | L      | the SQLite database image (see `snapshot.rs` for what it holds)                |
//! | 8      | checksum of every byte before it ([`checksum`])                                |
//!
//! The per-table counters are the engine's in-memory expiry state (`registry.rs`): the OPS
//! rule's operation count and the next row-write sequence number; everything else the rules
//! need (rules, per-row metadata, row counts) is in the image.

use crate::{ErrorKind, SqlError};

const MAGIC: &[u8; 8] = b"CAIRNSQL";
/// The format version this engine writes and the only one it reads.
pub(crate) const VERSION: u32 = 1;
/// Bytes before the per-table counters: magic, version, position, table count.
const FIXED: usize = 8 + 4 + 8 + 4;
const PER_TABLE: usize = 24;

/// One table's in-memory expiry counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Counters {
    pub id: i64,
    pub ops: u64,
    pub seq: u64,
}

/// A checked snapshot, borrowing its image from the bytes.
#[derive(Debug)]
pub(crate) struct Parsed<'a> {
    pub position: u64,
    pub counters: Vec<Counters>,
    pub image: &'a [u8],
}

fn bad(message: impl Into<String>) -> SqlError {
    SqlError::new(ErrorKind::BadSnapshot, message)
}

/// Everything before the image, in a buffer with room for the image and the checksum: the
/// writer copies the image straight in behind it ([`seal`] then appends the checksum).
pub(crate) fn header(position: u64, counters: &[Counters], image_len: usize) -> Vec<u8> {
    let len = FIXED + PER_TABLE * counters.len() + 8;
    let mut out = Vec::with_capacity(len + image_len + 8);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&position.to_le_bytes());
    out.extend_from_slice(&(counters.len() as u32).to_le_bytes());
    for c in counters {
        out.extend_from_slice(&c.id.to_le_bytes());
        out.extend_from_slice(&c.ops.to_le_bytes());
        out.extend_from_slice(&c.seq.to_le_bytes());
    }
    out.extend_from_slice(&(image_len as u64).to_le_bytes());
    out
}

/// Appends the checksum of everything so far: the snapshot is complete.
pub(crate) fn seal(bytes: &mut Vec<u8>) {
    let sum = checksum(bytes);
    bytes.extend_from_slice(&sum.to_le_bytes());
}

/// Reads `N` bytes at `at` (the caller checked the length).
fn take<const N: usize>(bytes: &[u8], at: usize) -> [u8; N] {
    bytes[at..at + N].try_into().expect("length checked")
}

/// Checks and splits a snapshot: magic, version, exact length, checksum.
pub(crate) fn parse(bytes: &[u8]) -> Result<Parsed<'_>, SqlError> {
    if bytes.len() < 12 || &bytes[..8] != MAGIC {
        return Err(bad("not a cairn SQL snapshot (bad magic)"));
    }
    let version = u32::from_le_bytes(take(bytes, 8));
    if version > VERSION {
        return Err(bad(format!(
            "SQL snapshot format version {version} is newer than this cairn reads (version {VERSION}); load it with a newer cairn"
        )));
    }
    if version != VERSION {
        return Err(bad(format!(
            "unknown SQL snapshot format version {version} (this cairn reads version {VERSION})"
        )));
    }
    let truncated = || bad(format!("SQL snapshot truncated ({} bytes)", bytes.len()));
    if bytes.len() < FIXED {
        return Err(truncated());
    }
    let position = u64::from_le_bytes(take(bytes, 12));
    let tables = u32::from_le_bytes(take(bytes, 20)) as usize;
    // Checked before anything is allocated for them: a damaged count cannot ask for memory.
    let image_at = tables
        .checked_mul(PER_TABLE)
        .and_then(|n| n.checked_add(FIXED + 8))
        .filter(|&end| end <= bytes.len())
        .ok_or_else(truncated)?;
    let image_len = u64::from_le_bytes(take(bytes, image_at - 8));
    let end = usize::try_from(image_len)
        .ok()
        .and_then(|l| l.checked_add(image_at))
        .ok_or_else(truncated)?;
    match bytes.len().checked_sub(8) {
        Some(body) if body < end => return Err(truncated()),
        Some(body) if body > end => {
            return Err(bad(format!(
                "SQL snapshot damaged: {} unexpected bytes after its end",
                body - end
            )))
        }
        _ => {}
    }
    if checksum(&bytes[..end]) != u64::from_le_bytes(take(bytes, end)) {
        return Err(bad("SQL snapshot damaged: checksum mismatch"));
    }
    let counters = (0..tables)
        .map(|i| {
            let at = FIXED + i * PER_TABLE;
            Counters {
                id: i64::from_le_bytes(take(bytes, at)),
                ops: u64::from_le_bytes(take(bytes, at + 8)),
                seq: u64::from_le_bytes(take(bytes, at + 16)),
            }
        })
        .collect();
    Ok(Parsed {
        position,
        counters,
        image: &bytes[image_at..end],
    })
}

const K: u64 = 0x9e37_79b9_7f4a_7c15;

fn mix(h: u64, w: u64) -> u64 {
    (h ^ w).wrapping_mul(K).rotate_left(29)
}

/// A fast 64-bit checksum against damage (not against forgery): four independent lanes over
/// 8-byte words. Each step is a bijection of both the lane and the word, so a change confined
/// to one word always changes the sum; ~4 GB/s, so a large image costs little next to its copy.
pub(crate) fn checksum(data: &[u8]) -> u64 {
    let mut lanes = [K, K.rotate_left(16), K.rotate_left(32), K.rotate_left(48)];
    let mut chunks = data.chunks_exact(32);
    for c in &mut chunks {
        for (i, lane) in lanes.iter_mut().enumerate() {
            *lane = mix(*lane, u64::from_le_bytes(take(c, i * 8)));
        }
    }
    let mut h = data.len() as u64;
    for lane in lanes {
        h = mix(h, lane);
    }
    for &b in chunks.remainder() {
        h = mix(h, b as u64);
    }
    h ^ (h >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        let counters = [
            Counters {
                id: 1,
                ops: 7,
                seq: 9,
            },
            Counters {
                id: 4,
                ops: 0,
                seq: 2,
            },
        ];
        let image = b"pretend this is a database image";
        let mut b = header(42, &counters, image.len());
        b.extend_from_slice(image);
        seal(&mut b);
        b
    }

    #[test]
    fn round_trip() {
        let b = sample();
        let p = parse(&b).unwrap();
        assert_eq!(p.position, 42);
        assert_eq!(p.counters.len(), 2);
        assert_eq!(
            p.counters[1],
            Counters {
                id: 4,
                ops: 0,
                seq: 2
            }
        );
        assert_eq!(p.image, b"pretend this is a database image");
    }

    #[test]
    fn every_single_byte_change_and_every_cut_is_refused() {
        let b = sample();
        for i in 0..b.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut d = b.clone();
                d[i] ^= flip;
                let e = parse(&d).unwrap_err();
                assert_eq!(e.kind, ErrorKind::BadSnapshot, "byte {i}: {e}");
            }
            let e = parse(&b[..i]).unwrap_err();
            assert_eq!(e.kind, ErrorKind::BadSnapshot, "cut at {i}: {e}");
        }
        let mut longer = b.clone();
        longer.push(0);
        assert!(parse(&longer).unwrap_err().message.contains("unexpected"));
    }

    #[test]
    fn versions_and_foreign_bytes_are_named() {
        let mut b = sample();
        b[8..12].copy_from_slice(&2u32.to_le_bytes());
        let e = parse(&b).unwrap_err();
        assert!(e.message.contains("version 2 is newer"), "{e}");
        b[8..12].copy_from_slice(&0u32.to_le_bytes());
        assert!(parse(&b).unwrap_err().message.contains("unknown"));
        let e = parse(b"SQLite format 3\0 and more bytes").unwrap_err();
        assert!(e.message.contains("bad magic"), "{e}");
        // A table count that would need more bytes than there are is refused before use.
        let mut b = sample();
        b[20..24].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(parse(&b).unwrap_err().message.contains("truncated"));
        let mut b = sample();
        let at = FIXED + 2 * PER_TABLE;
        b[at..at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(parse(&b).unwrap_err().message.contains("truncated"));
    }

    #[test]
    fn checksum_sees_word_swaps_within_a_lane_and_length() {
        let a: Vec<u8> = (0..200u8).collect();
        let mut b = a.clone();
        b.swap(0, 32);
        assert_ne!(checksum(&a), checksum(&b));
        assert_ne!(checksum(&a[..199]), checksum(&a));
        assert_ne!(checksum(&[0; 64]), checksum(&[0; 65]));
    }
}
