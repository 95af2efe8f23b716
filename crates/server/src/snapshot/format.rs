//! The snapshot file format (docs/snapshot-format.md): a header, checksummed and compressed
//! blocks, and a trailer with a checksum over the whole file. This module writes and reads the
//! frames; what the blocks hold is the business of `save` and `load` (and of the store, for
//! records).
//!
//! ```text
//! header (32 bytes): magic "CAIRNSNP" | version:u32 | header_len:u32 | created_ms:u64 |
//!                    reserved:u32 | crc32(bytes 0..28):u32
//! block frame (24 bytes): kind:u8 | codec:u8 | reserved:u16 | raw_len:u32 | stored_len:u32 |
//!                    payload_crc:u32 | item:u32 | frame_crc:u32 (crc32 of bytes 0..20)
//!                    then stored_len bytes of payload
//! ... blocks ..., an END block (no payload), then crc32 of every byte before it:u32
//! ```
//! Integers are little-endian.

use std::io::{self, Write};

pub const MAGIC: &[u8; 8] = b"CAIRNSNP";
/// The format this build writes; it reads this one and older ones. Version 2: a hash's value
/// may end with its fields' deadlines (`store::hash`), which a version-1 reader would refuse
/// as malformed; version-1 files have none and read as they are.
pub const VERSION: u32 = 2;
pub const HEADER_LEN: usize = 32;
pub const FRAME_LEN: usize = 24;
/// The most a block's payload may expand to (a bound on what a damaged or hostile length can
/// make a loader allocate).
pub const MAX_RAW_LEN: usize = u32::MAX as usize;

/// What a block holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockKind {
    /// Store records (the store's encoding, `store::snapshot`); `item` is the shard they
    /// were copied from.
    Records,
    /// A piece of the SQL tables' dump: opaque bytes, the pieces in order (`item` numbers
    /// them from 0) make the whole.
    Sql,
    /// The snapshot's description: the cuts (per-shard change positions) and counts.
    Meta,
    /// The last block: no payload; the file checksum follows it.
    End,
}

impl BlockKind {
    fn code(self) -> u8 {
        match self {
            BlockKind::Records => 1,
            BlockKind::Sql => 2,
            BlockKind::Meta => 3,
            BlockKind::End => 0xff,
        }
    }

    fn of_code(code: u8) -> Option<BlockKind> {
        Some(match code {
            1 => BlockKind::Records,
            2 => BlockKind::Sql,
            3 => BlockKind::Meta,
            0xff => BlockKind::End,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            BlockKind::Records => "records",
            BlockKind::Sql => "sql",
            BlockKind::Meta => "meta",
            BlockKind::End => "end",
        }
    }
}

const CODEC_NONE: u8 = 0;
const CODEC_LZ4: u8 = 1;

/// Writes a snapshot stream, checksumming every byte for the trailer.
pub struct Writer<W: Write> {
    out: W,
    crc: crc32fast::Hasher,
    written: u64,
    blocks: u64,
}

impl<W: Write> Writer<W> {
    /// Starts the stream with its header.
    pub fn new(out: W, created_ms: u64) -> io::Result<Writer<W>> {
        let mut w = Writer {
            out,
            crc: crc32fast::Hasher::new(),
            written: 0,
            blocks: 0,
        };
        let mut header = [0u8; HEADER_LEN];
        header[..8].copy_from_slice(MAGIC);
        header[8..12].copy_from_slice(&VERSION.to_le_bytes());
        header[12..16].copy_from_slice(&(HEADER_LEN as u32).to_le_bytes());
        header[16..24].copy_from_slice(&created_ms.to_le_bytes());
        let crc = crc32fast::hash(&header[..28]);
        header[28..32].copy_from_slice(&crc.to_le_bytes());
        w.put(&header)?;
        Ok(w)
    }

    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.crc.update(bytes);
        self.written += bytes.len() as u64;
        self.out.write_all(bytes)
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Writes one block: `raw` compressed with LZ4 (kept as is when that does not shrink it).
    pub fn block(&mut self, kind: BlockKind, item: u32, raw: &[u8]) -> io::Result<()> {
        if raw.len() > MAX_RAW_LEN {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "a {} block of {} bytes is too large",
                    kind.name(),
                    raw.len()
                ),
            ));
        }
        let compressed = lz4_flex::block::compress(raw);
        let (codec, payload) = if compressed.len() < raw.len() {
            (CODEC_LZ4, &compressed[..])
        } else {
            (CODEC_NONE, raw)
        };
        let mut frame = [0u8; FRAME_LEN];
        frame[0] = kind.code();
        frame[1] = codec;
        frame[4..8].copy_from_slice(&(raw.len() as u32).to_le_bytes());
        frame[8..12].copy_from_slice(&(payload.len() as u32).to_le_bytes());
        frame[12..16].copy_from_slice(&crc32fast::hash(payload).to_le_bytes());
        frame[16..20].copy_from_slice(&item.to_le_bytes());
        let crc = crc32fast::hash(&frame[..20]);
        frame[20..24].copy_from_slice(&crc.to_le_bytes());
        self.put(&frame)?;
        self.put(payload)?;
        self.blocks += 1;
        Ok(())
    }

    /// Ends the stream: the END block and the file checksum. Returns the writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.block(BlockKind::End, 0, &[])?;
        let crc = self.crc.clone().finalize();
        self.out.write_all(&crc.to_le_bytes())?;
        Ok(self.out)
    }
}

/// Why a snapshot cannot be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FormatError {
    /// Not a cairn snapshot (or its header is damaged).
    NotSnapshot(String),
    /// Written by a newer cairn.
    NewerVersion(u32),
    /// A block frame cannot be read: what follows it cannot be found either.
    Frame {
        index: usize,
        offset: usize,
        why: String,
    },
}

impl std::fmt::Display for FormatError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FormatError::NotSnapshot(why) => write!(f, "not a cairn snapshot: {why}"),
            FormatError::NewerVersion(v) => write!(
                f,
                "snapshot format version {v} is newer than this server reads (up to {VERSION}): \
                 refusing to load it (upgrade cairn, or move the file away)"
            ),
            FormatError::Frame { index, offset, why } => {
                write!(f, "block #{index} at byte {offset}: damaged frame ({why})")
            }
        }
    }
}

/// One block as found in a file: where its payload lies and what its frame says.
#[derive(Clone, Debug)]
pub struct Block {
    /// Its position among the file's blocks, from 0 (what messages name).
    pub index: usize,
    /// Byte offset of its frame in the file.
    pub offset: usize,
    pub kind: BlockKind,
    pub item: u32,
    codec: u8,
    raw_len: usize,
    payload_crc: u32,
    /// The payload's range in the file.
    pub payload: std::ops::Range<usize>,
}

impl Block {
    /// Whether the payload's checksum matches.
    pub fn checksum_ok(&self, file: &[u8]) -> bool {
        crc32fast::hash(&file[self.payload.clone()]) == self.payload_crc
    }

    /// Checks the payload's checksum and expands it into `out` (cleared first).
    pub fn decode(&self, file: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        let payload = &file[self.payload.clone()];
        if crc32fast::hash(payload) != self.payload_crc {
            return Err("checksum mismatch".into());
        }
        out.clear();
        match self.codec {
            CODEC_NONE => out.extend_from_slice(payload),
            CODEC_LZ4 => {
                out.resize(self.raw_len, 0);
                let n = lz4_flex::block::decompress_into(payload, out)
                    .map_err(|e| format!("cannot decompress: {e}"))?;
                if n != self.raw_len {
                    return Err(format!("expands to {n} bytes, not {}", self.raw_len));
                }
            }
            other => return Err(format!("unknown compression {other}")),
        }
        Ok(())
    }

    /// Describes the block for messages: "block #3 (records, shard 2) at byte 4096".
    pub fn describe(&self) -> String {
        let what = match self.kind {
            BlockKind::Records => format!("records of shard {}", self.item),
            BlockKind::Sql => format!("sql part {}", self.item),
            other => other.name().to_string(),
        };
        format!("block #{} ({what}) at byte {}", self.index, self.offset)
    }
}

/// The blocks of a file, as far as their frames could be read.
pub struct Layout {
    pub version: u32,
    pub created_ms: u64,
    pub blocks: Vec<Block>,
    /// Why the block list stops early (a damaged frame, a missing END), if it does.
    pub cut_short: Option<FormatError>,
    /// Whether the trailer's checksum over the whole file matches.
    pub file_crc_ok: bool,
}

/// Reads the header and walks the block frames (payloads are checked later, per block).
pub fn layout(file: &[u8]) -> Result<Layout, FormatError> {
    if file.len() < HEADER_LEN || &file[..8] != MAGIC {
        return Err(FormatError::NotSnapshot("bad magic".into()));
    }
    let u32_at = |at: usize| u32::from_le_bytes(file[at..at + 4].try_into().expect("4 bytes"));
    if crc32fast::hash(&file[..28]) != u32_at(28) {
        return Err(FormatError::NotSnapshot("header checksum mismatch".into()));
    }
    let version = u32_at(8);
    if version > VERSION {
        return Err(FormatError::NewerVersion(version));
    }
    let header_len = u32_at(12) as usize;
    if header_len < HEADER_LEN || header_len > file.len() {
        return Err(FormatError::NotSnapshot(format!(
            "header length {header_len}"
        )));
    }
    let created_ms = u64::from_le_bytes(file[16..24].try_into().expect("8 bytes"));
    let mut blocks = Vec::new();
    let mut at = header_len;
    let mut cut_short = None;
    let mut ended_at = None;
    loop {
        let index = blocks.len();
        let damaged = |why: String| FormatError::Frame {
            index,
            offset: at,
            why,
        };
        if at + FRAME_LEN > file.len() {
            cut_short = Some(damaged("file ends before the END block".into()));
            break;
        }
        let frame = &file[at..at + FRAME_LEN];
        if crc32fast::hash(&frame[..20]) != u32_at(at + 20) {
            cut_short = Some(damaged("frame checksum mismatch".into()));
            break;
        }
        let Some(kind) = BlockKind::of_code(frame[0]) else {
            cut_short = Some(damaged(format!("unknown block kind {}", frame[0])));
            break;
        };
        let stored = u32_at(at + 8) as usize;
        let start = at + FRAME_LEN;
        if start + stored > file.len() {
            cut_short = Some(damaged("payload runs past the end of the file".into()));
            break;
        }
        if kind == BlockKind::End {
            ended_at = Some(start);
            break;
        }
        blocks.push(Block {
            index,
            offset: at,
            kind,
            item: u32_at(at + 16),
            codec: frame[1],
            raw_len: u32_at(at + 4) as usize,
            payload_crc: u32_at(at + 12),
            payload: start..start + stored,
        });
        at = start + stored;
    }
    let file_crc_ok = ended_at
        .is_some_and(|end| file.len() == end + 4 && crc32fast::hash(&file[..end]) == u32_at(end));
    Ok(Layout {
        version,
        created_ms,
        blocks,
        cut_short,
        file_crc_ok,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        let mut w = Writer::new(Vec::new(), 1234).unwrap();
        w.block(BlockKind::Records, 0, &[7u8; 10_000]).unwrap();
        w.block(BlockKind::Records, 1, b"tiny").unwrap();
        w.block(BlockKind::Sql, 0, b"opaque sql bytes").unwrap();
        w.finish().unwrap()
    }

    #[test]
    fn blocks_round_trip_compressed_or_not() {
        let file = sample();
        let l = layout(&file).unwrap();
        assert!(l.file_crc_ok && l.cut_short.is_none());
        assert_eq!(
            (l.version, l.created_ms, l.blocks.len()),
            (VERSION, 1234, 3)
        );
        assert!(l.blocks[0].payload.len() < 1000, "compressed");
        let mut out = Vec::new();
        l.blocks[0].decode(&file, &mut out).unwrap();
        assert_eq!(out, vec![7u8; 10_000]);
        l.blocks[2].decode(&file, &mut out).unwrap();
        assert_eq!(
            (l.blocks[2].kind, &out[..]),
            (BlockKind::Sql, &b"opaque sql bytes"[..])
        );
    }

    #[test]
    fn a_flipped_payload_byte_names_its_block() {
        let mut file = sample();
        let l = layout(&file).unwrap();
        let at = l.blocks[1].payload.start;
        file[at] ^= 1;
        let l = layout(&file).unwrap();
        assert!(!l.file_crc_ok);
        let mut out = Vec::new();
        assert!(l.blocks[0].decode(&file, &mut out).is_ok());
        assert_eq!(
            l.blocks[1].decode(&file, &mut out),
            Err("checksum mismatch".into())
        );
        assert!(l.blocks[1]
            .describe()
            .starts_with("block #1 (records of shard 1)"));
    }

    #[test]
    fn damaged_frames_headers_and_newer_versions_are_refused() {
        let file = sample();
        let mut frame = file.clone();
        frame[HEADER_LEN + 5] ^= 1;
        let l = layout(&frame).unwrap();
        assert!(l.blocks.is_empty());
        assert!(matches!(
            l.cut_short,
            Some(FormatError::Frame { index: 0, .. })
        ));
        let mut newer = file.clone();
        newer[8..12].copy_from_slice(&(VERSION + 1).to_le_bytes());
        let crc = crc32fast::hash(&newer[..28]);
        newer[28..32].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(
            layout(&newer).err(),
            Some(FormatError::NewerVersion(VERSION + 1))
        );
        // Version 1 (before hash field deadlines) is still read.
        let mut older = file.clone();
        older[8..12].copy_from_slice(&1u32.to_le_bytes());
        let crc = crc32fast::hash(&older[..28]);
        older[28..32].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(layout(&older).map(|l| l.version).ok(), Some(1));
        assert!(matches!(
            layout(b"REDIS0011"),
            Err(FormatError::NotSnapshot(_))
        ));
        for cut in 0..file.len() {
            if let Ok(l) = layout(&file[..cut]) {
                assert!(!l.file_crc_ok, "prefix {cut}");
            }
        }
    }
}
