//! Meta commands: flags, tokens, base64 keys, and memcached's error strings and swallowing rules.

mod common;

use common::*;
use memcache::{decode_base64_key, ArithMode, Error, MetaFlag, MetaFlags, Request, StoreKind};

fn flag_list(flags: &MetaFlags<'_>) -> Vec<(u8, Vec<u8>)> {
    flags
        .iter()
        .map(|MetaFlag { flag, token }| (flag, token.to_vec()))
        .collect()
}

// ---- mg ----

#[test]
fn mg_keeps_flag_order_and_tokens() {
    match whole(b"mg foo s v T30 N-1 R5 O123 k q c f t h l u E7\r\n") {
        Request::MetaGet { key, flags } => {
            assert_eq!(key, b"foo");
            let letters: Vec<u8> = flags.iter().map(|f| f.flag).collect();
            assert_eq!(letters, b"svTNROkqcfthluE");
            assert_eq!(flags.i64(b'T'), Some(30));
            assert_eq!(flags.i64(b'N'), Some(-1));
            assert_eq!(flags.i64(b'R'), Some(5));
            assert_eq!(flags.token(b'O'), Some(&b"123"[..]));
            assert_eq!(flags.opaque(), Some(&b"O123"[..]));
            assert_eq!(flags.u64(b'E'), Some(7));
            assert!(flags.has(b'v') && flags.quiet() && !flags.has(b'x'));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn mg_without_flags() {
    match whole(b"mg foo\r\n") {
        Request::MetaGet { key, flags } => {
            assert_eq!(key, b"foo");
            assert!(flags.is_empty());
        }
        other => panic!("{other:?}"),
    }
    match whole(b"mg foo   \n") {
        Request::MetaGet { flags, .. } => assert!(flags.is_empty()),
        other => panic!("{other:?}"),
    }
}

#[test]
fn mg_errors() {
    assert_eq!(err(b"mg\r\n"), unknown(4));
    let line = format!("mg {} v\r\n", "k".repeat(251));
    assert_eq!(
        err(line.as_bytes()),
        client("bad command line format", line.len(), false)
    );
    assert_eq!(
        err(b"mg a\x01 v\r\n"),
        client("bad command line format", 9, false)
    );
    assert_eq!(err(b"mg k v v\r\n"), client("duplicate flag", 10, false));
    assert_eq!(err(b"mg k v z\r\n"), client("invalid flag", 10, false));
    assert_eq!(err(b"mg k 5\r\n"), client("invalid flag", 8, false));
    assert_eq!(
        err(b"mg k Tx\r\n"),
        client("bad token in command line format", 9, false)
    );
    assert_eq!(
        err(b"mg k N\r\n"),
        client("bad token in command line format", 8, false)
    );
    assert_eq!(
        err(b"mg k E-1\r\n"),
        client("bad token in command line format", 10, false)
    );
    // Errors are reported even with q: meta commands only quiet nominal replies.
    assert_eq!(
        err(b"mg k q Tx\r\n"),
        client("bad token in command line format", 11, false)
    );
}

#[test]
fn mg_flag_count_limit() {
    // 17 flags fit (20 tokens with command, key and memcached's sentinel); 18 do not.
    let flags17 = "v c f t k q s h l u T1 N1 R1 O1 E1 P L";
    let line = format!("mg k {flags17}\r\n");
    assert!(matches!(whole(line.as_bytes()), Request::MetaGet { .. }));
    let line = format!("mg k {flags17} x\r\n");
    assert_eq!(
        err(line.as_bytes()),
        client("options flags are too long", line.len(), false)
    );
}

#[test]
fn opaque_length() {
    let ok_opaque = format!("mg k O{}\r\n", "o".repeat(31));
    assert!(matches!(
        whole(ok_opaque.as_bytes()),
        Request::MetaGet { .. }
    ));
    let long = format!("mg k O{}\r\n", "o".repeat(32));
    assert_eq!(
        err(long.as_bytes()),
        client("opaque token too long", long.len(), false)
    );
    let long = format!("md k O{}\r\n", "o".repeat(32));
    assert_eq!(
        err(long.as_bytes()),
        client("opaque token too long", long.len(), false)
    );
    let long = format!("ma k O{}\r\n", "o".repeat(32));
    assert_eq!(
        err(long.as_bytes()),
        client("opaque token too long", long.len(), false)
    );
}

#[test]
fn base64_keys() {
    match whole(b"mg Zm9vYmFy b v\r\n") {
        Request::MetaGet { key, flags } => {
            assert!(flags.base64_key());
            let mut out = Vec::new();
            assert!(decode_base64_key(key, &mut out));
            assert_eq!(out, b"foobar");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        err(b"mg Zm9v! b\r\n"),
        client("error decoding key", 12, false)
    );
    assert_eq!(
        err(b"mg Zm9 b\r\n"),
        client("error decoding key", 10, false)
    );
    assert_eq!(
        err(b"md Zm9 b\r\n"),
        client("invalid or duplicate flag", 10, false)
    );
    assert_eq!(
        err(b"ma Zm9 b\r\n"),
        client("invalid or duplicate flag", 10, false)
    );
}

// ---- ms ----

#[test]
fn ms_basic() {
    match whole(b"ms foo 2 T90 F1 c\r\nhi\r\n") {
        Request::MetaSet { key, data, flags } => {
            assert_eq!(key, b"foo");
            assert_eq!(data, b"hi");
            assert_eq!(
                flag_list(&flags),
                [
                    (b'T', b"90".to_vec()),
                    (b'F', b"1".to_vec()),
                    (b'c', vec![])
                ]
            );
            assert_eq!(flags.u32(b'F'), Some(1));
            assert_eq!(flags.set_mode(), StoreKind::Set);
        }
        other => panic!("{other:?}"),
    }
    match whole(b"ms k 0\r\n\r\n") {
        Request::MetaSet { data, flags, .. } => {
            assert!(data.is_empty() && flags.is_empty());
        }
        other => panic!("{other:?}"),
    }
    match whole(b"ms k 4 MA I C5 q\r\n\r\n\r\n\r\n") {
        Request::MetaSet { data, flags, .. } => {
            assert_eq!(data, b"\r\n\r\n");
            assert_eq!(flags.set_mode(), StoreKind::Append);
            assert_eq!(flags.u64(b'C'), Some(5));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn ms_modes() {
    for (m, kind) in [
        ("E", StoreKind::Add),
        ("A", StoreKind::Append),
        ("P", StoreKind::Prepend),
        ("R", StoreKind::Replace),
        ("S", StoreKind::Set),
    ] {
        let input = format!("ms k 1 M{m}\r\nx\r\n");
        match whole(input.as_bytes()) {
            Request::MetaSet { flags, .. } => assert_eq!(flags.set_mode(), kind),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn ms_line_errors_do_not_swallow() {
    assert_eq!(err(b"ms\r\n"), unknown(4));
    assert_eq!(
        err(b"ms k\r\nx\r\n"),
        client("bad command line format", 6, false)
    );
    assert_eq!(
        err(b"ms k x\r\n"),
        client("bad command line format", 8, false)
    );
    assert_eq!(
        err(b"ms k -1\r\n"),
        client("bad command line format", 9, false)
    );
    let line = format!("ms {} 1\r\n", "k".repeat(251));
    assert_eq!(
        err(line.as_bytes()),
        client("bad command line format", line.len(), false)
    );
    // 16 flags fit after the data length; 17 do not.
    let flags16 = "c k q s I T1 F1 C1 E1 O1 MS N1 b h l t";
    let line = format!("ms Zm9v 1 {flags16}\r\nx\r\n");
    assert!(matches!(whole(line.as_bytes()), Request::MetaSet { .. }));
    let line = format!("ms Zm9v 1 {flags16} v\r\n");
    assert_eq!(
        err(line.as_bytes()),
        client("options flags too long", line.len(), false)
    );
}

#[test]
fn ms_flag_errors_swallow_the_block() {
    // Line is 13 bytes; the 5-byte block and its \r\n are swallowed too, arrived or not.
    for (line, msg) in [
        ("ms k 5 z\r\n", "invalid flag"),
        ("ms k 5 T\r\n", "bad token in command line format"),
        ("ms k 5 Fx\r\n", "bad command line format"),
        ("ms k 5 MX\r\n", "invalid mode for ms M token"),
        ("ms k 5 MAA\r\n", "incorrect length for M token"),
        ("ms k 5 c c\r\n", "duplicate flag"),
        ("ms !! 5 b\r\n", "error decoding key"),
    ] {
        let total = line.len() + 7;
        assert_eq!(err(line.as_bytes()), client(msg, total, false), "{line}");
        let with_block = format!("{line}hello\r\nmn\r\n");
        assert_eq!(err(with_block.as_bytes()).consumed(), total);
    }
    let line = format!("ms k 1 O{}\r\n", "o".repeat(32));
    assert_eq!(
        err(line.as_bytes()),
        client("opaque token too long", line.len() + 3, false)
    );
    // A bad mode is reported ahead of a long opaque, as in memcached.
    let line = format!("ms k 1 O{} MZ\r\n", "o".repeat(32));
    assert_eq!(
        err(line.as_bytes()),
        client("invalid mode for ms M token", line.len() + 3, false)
    );
}

#[test]
fn ms_block_errors() {
    // q does not silence errors.
    assert_eq!(
        err(b"ms k 1 q\r\nxy\r\n"),
        client("bad data chunk", 13, false)
    );
    let line = format!("ms k {} q\r\n", MAX + 1);
    assert_eq!(
        err(line.as_bytes()),
        Error::TooLarge {
            consumed: line.len() + MAX + 3,
            noreply: false
        }
    );
    let input = b"ms k 3 T1\r\nabc\r\n";
    for cut in 11..input.len() {
        assert_eq!(need(&input[..cut]), Some(input.len()));
    }
}

// ---- md ----

#[test]
fn md_forms_and_errors() {
    match whole(b"md k q I T30 C9 x k O1\r\n") {
        Request::MetaDelete { key, flags } => {
            assert_eq!(key, b"k");
            assert_eq!(flags.iter().map(|f| f.flag).collect::<Vec<_>>(), b"qITCxkO");
            assert_eq!(flags.u64(b'C'), Some(9));
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(whole(b"md k\r\n"), Request::MetaDelete { .. }));
    assert_eq!(err(b"md\r\n"), unknown(4));
    // md and ma replace memcached's specific reasons with one message.
    for line in [
        &b"md k z\r\n"[..],
        b"md k q q\r\n",
        b"md k Cx\r\n",
        b"md k MXY\r\n",
    ] {
        assert_eq!(
            err(line),
            client("invalid or duplicate flag", line.len(), false)
        );
    }
    let line = "md k q I T1 C1 x k O1 h l t u s f c v E1 N1\r\n";
    assert!(
        matches!(whole(line.as_bytes()), Request::MetaDelete { .. }),
        "17 flags fit"
    );
    let line = "md k q I T1 C1 x k O1 h l t u s f c v E1 N1 R1\r\n";
    assert_eq!(
        err(line.as_bytes()),
        client("options flags too long", line.len(), false)
    );
}

// ---- ma ----

#[test]
fn ma_forms_and_errors() {
    match whole(b"ma k v N0 J10 D5 MD t c\r\n") {
        Request::MetaArithmetic { key, flags } => {
            assert_eq!(key, b"k");
            assert_eq!(flags.arith_mode(), ArithMode::Decr);
            assert_eq!(flags.u64(b'J'), Some(10));
            assert_eq!(flags.u64(b'D'), Some(5));
            assert_eq!(flags.i64(b'N'), Some(0));
        }
        other => panic!("{other:?}"),
    }
    for (m, mode) in [
        ("I", ArithMode::Incr),
        ("+", ArithMode::Incr),
        ("D", ArithMode::Decr),
        ("-", ArithMode::Decr),
    ] {
        let line = format!("ma k M{m}\r\n");
        match whole(line.as_bytes()) {
            Request::MetaArithmetic { flags, .. } => assert_eq!(flags.arith_mode(), mode),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(
        err(b"ma k MX\r\n"),
        client("invalid mode for ma M token", 9, false)
    );
    assert_eq!(
        err(b"ma k D-1\r\n"),
        client("invalid or duplicate flag", 10, false)
    );
    assert_eq!(
        err(b"ma k Jx\r\n"),
        client("invalid or duplicate flag", 9, false)
    );
    assert_eq!(err(b"ma\r\n"), unknown(4));
}

// ---- mn, me, unknown ----

#[test]
fn mn_and_me() {
    assert_eq!(whole(b"mn\r\n"), Request::MetaNoop);
    assert_eq!(whole(b"mn ignored\r\n"), Request::MetaNoop);
    match whole(b"me foo\r\n") {
        Request::MetaDebug { key, flags } => {
            assert_eq!(key, b"foo");
            assert!(flags.is_empty());
        }
        other => panic!("{other:?}"),
    }
    match whole(b"me Zm9v b\r\n") {
        Request::MetaDebug { key, flags } => {
            assert_eq!(key, b"Zm9v");
            assert!(flags.base64_key());
        }
        other => panic!("{other:?}"),
    }
    // Only a bare "b" right after the key counts.
    match whole(b"me foo x b\r\n") {
        Request::MetaDebug { flags, .. } => assert!(flags.is_empty()),
        other => panic!("{other:?}"),
    }
    assert_eq!(err(b"me\r\n"), client("bad command line format", 4, false));
    assert_eq!(
        err(b"me !! b\r\n"),
        client("bad command line format", 9, false)
    );
    let line = format!("me {}\r\n", "k".repeat(251));
    assert_eq!(
        err(line.as_bytes()),
        client("bad command line format", line.len(), false)
    );
}

#[test]
fn unknown_meta_commands() {
    assert_eq!(err(b"mx k\r\n"), unknown(6));
    assert_eq!(err(b"m\r\n"), unknown(3));
    assert_eq!(err(b"mgg k\r\n"), unknown(7));
    assert_eq!(err(b"MG k\r\n"), unknown(6));
}
