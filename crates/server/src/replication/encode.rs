//! The replication stream's commands: each change of the store's change stream becomes
//! one RESP array of an internal command, which a replica runs through the command path
//! (`command::replication_cmd` holds their handlers; ordinary clients cannot send them).
//! Every command names the primary's log (shard, or the SQL log) and the record's sequence
//! number there, so that a replica fed from a snapshot can skip the records the snapshot
//! already holds (`sync_cut`: those at or below the cut of the snapshot's part that holds the
//! record's key). REPL.PUT, one per SET, carries them as varints in its one argument, before
//! the record (`put_place` reads them): 15 bytes and two decimal numbers fewer per change.
//!
//! ```text
//! REPL.PUT   place                   log and seq as varints, then a new record in the
//!                                    snapshot's record encoding
//! REPL.TTL   log seq key deadline cas   deadline: absolute Unix ms, or -1 for none
//! REPL.CAS   log seq key cas
//! REPL.DEL   log seq key             a deletion, an expiry or an eviction on the primary
//! REPL.FLUSH seq0 seq1 ... seqN      every shard flushed (FLUSHALL), each at its seq
//! REPL.SQL   log seq command         the RESP command that replays an SQL change
//! ```

use resp::reply;
use store::{varint, Change, ChangeKind};

/// Room left for REPL.PUT's bulk header before its argument is encoded after it: `$NN\r\n`,
/// an argument of 10 to 99 bytes (a small SET's). Another length moves the argument once its
/// length is known.
const RECORD_HEAD: usize = 5;

/// Appends the command for `change`; a shard's flush (told once for every shard, see
/// `encode_flush`) appends nothing and returns false.
pub fn encode_change(change: &Change<'_>, out: &mut Vec<u8>) -> bool {
    // The array's length and the command's name are constants: one copy instead of two
    // formatted headers; the log and the seq are written from one stack buffer each (every
    // SET on a primary with replicas comes through here).
    let header = |out: &mut Vec<u8>, head: &[u8]| {
        out.extend_from_slice(head);
        bulk_u64(out, change.log as u64);
        bulk_u64(out, change.seq);
    };
    match change.kind {
        ChangeKind::Set(item) => {
            // The argument is encoded in place, after room for its bulk header (no buffer
            // between, no second copy of it); the command's head, that room and the two varints
            // go in one copy from the stack.
            let mut prefix = [0u8; PUT_HEAD.len() + RECORD_HEAD + 20];
            prefix[..PUT_HEAD.len()].copy_from_slice(PUT_HEAD);
            let mut at = PUT_HEAD.len() + RECORD_HEAD;
            at = varint_into(&mut prefix, at, change.log as u64);
            at = varint_into(&mut prefix, at, change.seq);
            let head_at = out.len() + PUT_HEAD.len();
            out.extend_from_slice(&prefix[..at]);
            store::snapshot::encode_record(item, out);
            let len = out.len() - head_at - RECORD_HEAD;
            let mut head = [0u8; 24];
            let head = bulk_head(len, &mut head);
            if head.len() != RECORD_HEAD {
                // Not a two-digit length: the record moves to just after its real header.
                let record = head_at + RECORD_HEAD..out.len();
                if head.len() > RECORD_HEAD {
                    out.resize(out.len() + head.len() - RECORD_HEAD, 0);
                }
                out.copy_within(record, head_at + head.len());
                out.truncate(head_at + head.len() + len);
            }
            out[head_at..head_at + head.len()].copy_from_slice(head);
            out.extend_from_slice(b"\r\n");
        }
        ChangeKind::Ttl { expire_at, cas } => {
            header(out, b"*6\r\n$8\r\nREPL.TTL\r\n");
            reply::bulk(out, change.key);
            match expire_at {
                Some(deadline) => reply::bulk(out, itoa(deadline, &mut [0; 20])),
                None => reply::bulk(out, b"-1"),
            }
            reply::bulk(out, itoa(cas, &mut [0; 20]));
        }
        ChangeKind::Cas(cas) => {
            header(out, b"*5\r\n$8\r\nREPL.CAS\r\n");
            reply::bulk(out, change.key);
            reply::bulk(out, itoa(cas, &mut [0; 20]));
        }
        ChangeKind::Delete | ChangeKind::Expire | ChangeKind::Evict => {
            header(out, b"*4\r\n$8\r\nREPL.DEL\r\n");
            reply::bulk(out, change.key);
        }
        ChangeKind::Sql => {
            header(out, b"*4\r\n$8\r\nREPL.SQL\r\n");
            reply::bulk(out, change.key);
        }
        ChangeKind::Flush => return false,
    }
    true
}

/// REPL.PUT's array header and name.
const PUT_HEAD: &[u8] = b"*2\r\n$8\r\nREPL.PUT\r\n";

/// Writes `v` as a varint into `buf` at `at` (10 bytes at most); returns the index after it.
fn varint_into(buf: &mut [u8], at: usize, v: u64) -> usize {
    at + varint::put(&mut buf[at..], v)
}

/// Reads a varint at the start of `buf`: the value and the bytes after it.
fn take_varint(buf: &[u8]) -> Option<(u64, &[u8])> {
    let (v, n) = varint::get(buf)?;
    Some((v, &buf[n..]))
}

/// REPL.PUT's argument read: the log, the seq and the record after them; None when it does
/// not parse.
pub fn put_place(arg: &[u8]) -> Option<(usize, u64, &[u8])> {
    let (log, rest) = take_varint(arg)?;
    let (seq, record) = take_varint(rest)?;
    Some((usize::try_from(log).ok()?, seq, record))
}

/// The header of a bulk string of `len` bytes (`$len\r\n`), written into `buf`.
fn bulk_head(len: usize, buf: &mut [u8; 24]) -> &[u8] {
    if (10..100).contains(&len) {
        // Two digits, a small SET's REPL.PUT: no division loop.
        buf[..5].copy_from_slice(&[
            b'$',
            b'0' + (len / 10) as u8,
            b'0' + (len % 10) as u8,
            b'\r',
            b'\n',
        ]);
        return &buf[..5];
    }
    let mut digits = [0u8; 20];
    let digits = itoa(len as u64, &mut digits);
    buf[0] = b'$';
    buf[1..1 + digits.len()].copy_from_slice(digits);
    buf[1 + digits.len()..3 + digits.len()].copy_from_slice(b"\r\n");
    &buf[..3 + digits.len()]
}

/// Appends `n` as a bulk string in decimal, in one copy.
fn bulk_u64(out: &mut Vec<u8>, n: u64) {
    let mut digits = [0u8; 20];
    let digits = itoa(n, &mut digits);
    let mut buf = [0u8; 48];
    let head = bulk_head(digits.len(), (&mut buf[..24]).try_into().expect("24 bytes")).len();
    buf[head..head + digits.len()].copy_from_slice(digits);
    let end = head + digits.len();
    buf[end..end + 2].copy_from_slice(b"\r\n");
    out.extend_from_slice(&buf[..end + 2]);
}

/// `n` in decimal, written into `buf` without allocating.
fn itoa(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[at..];
        }
    }
}

/// Appends `REPL.FLUSH` with every shard's sequence number of its flush.
pub fn encode_flush(seqs: &[u64], out: &mut Vec<u8>) {
    reply::array_len(out, 1 + seqs.len());
    reply::bulk(out, b"REPL.FLUSH");
    for seq in seqs {
        reply::bulk(out, seq.to_string().as_bytes());
    }
}

/// Appends a command of plain arguments (PING, REPLCONF GETACK *).
pub fn encode_command(args: &[&[u8]], out: &mut Vec<u8>) {
    reply::array_len(out, args.len());
    for a in args {
        reply::bulk(out, a);
    }
}

/// Parses an unsigned decimal argument.
pub fn parse_u64(arg: &[u8]) -> Option<u64> {
    std::str::from_utf8(arg).ok()?.parse().ok()
}

/// What a stream command says about its place in the primary's logs: the log, the sequence
/// number and the key (if it names one) of the per-record commands, the per-shard seqs for
/// `REPL.FLUSH`. `sync_cut::SyncCut` decides from it what a replica skips.
pub enum Place<'a> {
    Record {
        log: usize,
        seq: u64,
        key: Option<&'a [u8]>,
    },
    Flush(Vec<u64>),
    /// Not a change (PING, REPLCONF): nothing to skip.
    None,
}

/// The place of the command whose arguments are `args` (name first).
pub fn place<'a>(args: &[&'a [u8]]) -> Place<'a> {
    let name = args.first().copied().unwrap_or_default();
    if name.eq_ignore_ascii_case(b"REPL.FLUSH") {
        return Place::Flush(args[1..].iter().filter_map(|a| parse_u64(a)).collect());
    }
    if name.eq_ignore_ascii_case(b"REPL.PUT") {
        return match args.get(1).and_then(|arg| put_place(arg)) {
            Some((log, seq, record)) => Place::Record {
                log,
                seq,
                key: record_key(record),
            },
            None => Place::None,
        };
    }
    if name.len() > 5 && name[..5].eq_ignore_ascii_case(b"REPL.") && args.len() >= 3 {
        if let (Some(log), Some(seq)) = (parse_u64(args[1]), parse_u64(args[2])) {
            let key = match args.get(3) {
                _ if name.eq_ignore_ascii_case(b"REPL.SQL") => None,
                other => other.copied(),
            };
            return Place::Record {
                log: log as usize,
                seq,
                key,
            };
        }
    }
    Place::None
}

/// The key of a record in the snapshot's encoding (`kind:u8 fields:u8 klen:varint key ...`);
/// None when it does not parse (the command's handler refuses it then).
fn record_key(record: &[u8]) -> Option<&[u8]> {
    let (len, rest) = take_varint(record.get(2..)?)?;
    rest.get(..usize::try_from(len).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ops::Range;
    use std::sync::{Arc, Mutex};

    /// A tap that encodes what it is told, as the primary's does.
    #[derive(Default)]
    struct Encoder {
        out: Mutex<(Vec<u8>, usize)>,
    }

    impl store::ChangeTap for Encoder {
        fn changed(&self, changes: &[Change<'_>]) {
            let mut out = self.out.lock().unwrap();
            for c in changes {
                if encode_change(c, &mut out.0) {
                    out.1 += 1;
                }
            }
        }
        fn flushed(&self, _author: store::Author, seqs: &[u64]) {
            encode_flush(seqs, &mut self.out.lock().unwrap().0);
        }
    }

    #[test]
    fn numbers_print_in_decimal() {
        for n in [0u64, 7, 10, 99, 12345, u64::MAX] {
            assert_eq!(itoa(n, &mut [0; 20]), n.to_string().as_bytes());
        }
    }

    fn parse(buf: &[u8]) -> (Vec<Vec<u8>>, usize) {
        let (mut ranges, mut scratch): (Vec<Range<usize>>, Vec<u8>) = (Vec::new(), Vec::new());
        let limits = resp::request::Limits::default();
        match resp::request::parse_request(buf, &limits, &mut ranges, &mut scratch) {
            Ok((resp::request::Parsed::Complete(n), _)) => {
                (ranges.iter().map(|r| buf[r.clone()].to_vec()).collect(), n)
            }
            other => panic!("not one command: {:?}", other.map(|(p, _)| p)),
        }
    }

    #[test]
    fn records_encode_as_commands_that_name_their_place() {
        let store = store::Store::new(store::StoreConfig {
            shards: 4,
            background: false,
            ..store::StoreConfig::default()
        });
        let tap = Arc::new(Encoder::default());
        store.set_tap(tap.clone());
        store.set_listening(store::Listener::Replication, true);
        store.write(store::Author(7), b"k", |e| {
            e.put(store::Kind::String, b"value", Some(4_000_000_000_000), 3)
                .expect("put");
            e.set_expire(None);
            e.set_cas(99);
            e.remove();
        });
        let (out, found) = std::mem::take(&mut *tap.out.lock().unwrap());
        assert_eq!(found, 4);
        let mut at = 0;
        let mut names = Vec::new();
        let mut seqs = Vec::new();
        while at < out.len() {
            let (args, n) = parse(&out[at..]);
            at += n;
            let refs: Vec<&[u8]> = args.iter().map(|a| &a[..]).collect();
            match place(&refs) {
                Place::Record { seq, key, .. } => {
                    seqs.push(seq);
                    assert_eq!(key, Some(&b"k"[..]), "every record names its key");
                }
                _ => panic!("every record has a place"),
            }
            names.push(String::from_utf8(args[0].clone()).unwrap());
            if args[0] == b"REPL.PUT" {
                // The record reads back into another store.
                let other = store::Store::new(store::StoreConfig::default());
                let (_, _, record) = put_place(&args[1]).expect("a place");
                other
                    .put_encoded(store::Author(1), record)
                    .expect("decodes");
                other.read(b"k", |i| {
                    let i = i.expect("written");
                    assert_eq!((i.value(), i.flags()), (&b"value"[..], 3));
                    assert_eq!(i.expire_at(), Some(4_000_000_000_000));
                });
            }
            if args[0] == b"REPL.TTL" {
                assert_eq!(args[4], b"-1");
            }
        }
        assert_eq!(names, ["REPL.PUT", "REPL.TTL", "REPL.CAS", "REPL.DEL"]);
        assert_eq!(seqs, [1, 2, 3, 4]);
        // A flush is told once, with every shard's number of its flush.
        store.flush_by(store::Author(7));
        let (out, _) = std::mem::take(&mut *tap.out.lock().unwrap());
        let (args, n) = parse(&out);
        assert_eq!(n, out.len());
        let refs: Vec<&[u8]> = args.iter().map(|a| &a[..]).collect();
        let Place::Flush(seqs) = place(&refs) else {
            panic!("a flush");
        };
        assert_eq!(seqs.len(), 4);
        assert_eq!(seqs.iter().filter(|&&s| s == 5).count(), 1, "{seqs:?}");
    }

    #[test]
    fn bulk_numbers_are_bulk_strings() {
        for n in [0u64, 9, 10, 123_456_789, 1_234_567_890, u64::MAX] {
            let mut out = Vec::new();
            bulk_u64(&mut out, n);
            let mut want = Vec::new();
            reply::bulk(&mut want, n.to_string().as_bytes());
            assert_eq!(out, want);
        }
    }

    #[test]
    fn records_of_any_length_get_their_bulk_header() {
        // Records of 2, 3, 4 and 6 digits of length: the in-place header moves the record
        // unless its length has two digits.
        for value_len in [5usize, 200, 5000, 200_000] {
            let store = store::Store::new(store::StoreConfig {
                shards: 1,
                background: false,
                ..store::StoreConfig::default()
            });
            let tap = Arc::new(Encoder::default());
            store.set_tap(tap.clone());
            store.set_listening(store::Listener::Replication, true);
            let value = vec![b'v'; value_len];
            store.write(store::Author(7), b"key", |e| {
                e.put(store::Kind::String, &value, None, 0).expect("put");
            });
            let (out, _) = std::mem::take(&mut *tap.out.lock().unwrap());
            let (args, n) = parse(&out);
            assert_eq!(n, out.len(), "one command, nothing after it");
            assert_eq!(args[0], b"REPL.PUT");
            let other = store::Store::new(store::StoreConfig::default());
            let (log, seq, record) = put_place(&args[1]).expect("a place");
            assert_eq!((log, seq), (0, 1));
            other
                .put_encoded(store::Author(1), record)
                .expect("decodes");
            other.read(b"key", |i| {
                assert_eq!(i.expect("written").value(), &value[..])
            });
        }
    }

    #[test]
    fn a_put_place_that_does_not_parse_is_none() {
        let mut arg = [0u8; 23];
        let at = varint_into(&mut arg, 0, 3);
        let at = varint_into(&mut arg, at, 300);
        arg[at..at + 3].copy_from_slice(b"rec");
        let arg = &arg[..at + 3];
        assert_eq!(put_place(arg), Some((3, 300, &b"rec"[..])));
        // Cut inside the seq's varint, a varint longer than 10 bytes, nothing at all.
        assert_eq!(put_place(&arg[..2]), None);
        assert_eq!(put_place(&[0x80; 12]), None);
        assert_eq!(put_place(b""), None);
        assert!(matches!(place(&[b"REPL.PUT", &[0x80]]), Place::None));
        assert!(matches!(place(&[b"REPL.PUT"]), Place::None));
    }

    #[test]
    fn a_flush_names_every_shards_seq() {
        let mut out = Vec::new();
        encode_flush(&[3, 4], &mut out);
        let (args, n) = parse(&out);
        assert_eq!(n, out.len());
        let refs: Vec<&[u8]> = args.iter().map(|a| &a[..]).collect();
        assert!(matches!(place(&refs), Place::Flush(s) if s == [3, 4]));
    }
}
