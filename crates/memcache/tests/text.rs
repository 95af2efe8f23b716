//! Classic text commands: every accepted form, every error path, noreply handling.

mod common;

use common::*;
use memcache::{parse, Error, Parsed, Request, StoreKind, MAX_LINE_LEN};

// ---- retrieval ----

#[test]
fn get_single_and_multi() {
    let req = whole(b"get foo\r\n");
    assert!(matches!(
        req,
        Request::Get {
            with_cas: false,
            ..
        }
    ));
    assert_eq!(keys(&req), [b"foo".to_vec()]);

    let req = whole(b"gets a  bb   ccc \r\n");
    assert!(matches!(req, Request::Get { with_cas: true, .. }));
    assert_eq!(keys(&req), [b"a".to_vec(), b"bb".to_vec(), b"ccc".to_vec()]);

    // A bare \n ends a line too, and leading spaces are skipped.
    assert_eq!(keys(&whole(b"  get x\n")), [b"x".to_vec()]);
    // memcached's ancient alias.
    assert_eq!(keys(&whole(b"bget k\r\n")), [b"k".to_vec()]);
}

#[test]
fn get_leaves_following_bytes() {
    let (req, n) = ok(b"get a\r\nget b\r\n");
    assert_eq!(keys(&req), [b"a".to_vec()]);
    assert_eq!(n, 7);
}

#[test]
fn get_without_key_is_error() {
    assert_eq!(err(b"get\r\n"), unknown(5));
    assert_eq!(err(b"gets   \r\n"), unknown(9));
}

#[test]
fn get_key_rules() {
    let long = format!("get {}\r\n", "k".repeat(250));
    assert_eq!(keys(&whole(long.as_bytes()))[0].len(), 250);
    let too_long = format!("get a {}\r\n", "k".repeat(251));
    assert_eq!(
        err(too_long.as_bytes()),
        client("bad command line format", too_long.len(), false)
    );
    for bad in [
        &b"get a\tb\r\n"[..],
        b"get a\x01\r\n",
        b"get \x7f\r\n",
        b"get ok a\x00b\r\n",
    ] {
        assert_eq!(
            err(bad),
            client("bad command line format", bad.len(), false)
        );
    }
    // Bytes above ASCII are not control characters.
    assert_eq!(
        keys(&whole("get clé\r\n".as_bytes())),
        ["clé".as_bytes().to_vec()]
    );
}

#[test]
fn gat_and_gats() {
    let req = whole(b"gat 100 a b\r\n");
    assert!(matches!(
        req,
        Request::GetAndTouch {
            exptime: 100,
            with_cas: false,
            ..
        }
    ));
    assert_eq!(keys(&req), [b"a".to_vec(), b"b".to_vec()]);
    let req = whole(b"gats -1 a\r\n");
    assert!(matches!(
        req,
        Request::GetAndTouch {
            exptime: -1,
            with_cas: true,
            ..
        }
    ));
    // memcached answers a keyless gat with a bare END.
    let req = whole(b"gat 5\r\n");
    assert!(keys(&req).is_empty());
    assert_eq!(err(b"gat\r\n"), unknown(5));
    assert_eq!(
        err(b"gat x a\r\n"),
        client("invalid exptime argument", 9, false)
    );
    assert_eq!(
        err(b"gat 2147483648 a\r\n"),
        client("invalid exptime argument", 18, false)
    );
    let too_long = format!("gats 1 {}\r\n", "k".repeat(251));
    assert_eq!(
        err(too_long.as_bytes()),
        client("bad command line format", too_long.len(), false)
    );
}

// ---- storage ----

fn store(input: &[u8]) -> (StoreKind, Vec<u8>, u32, i64, Vec<u8>, u64, bool) {
    match whole(input) {
        Request::Store {
            kind,
            key,
            flags,
            exptime,
            data,
            cas_unique,
            noreply,
        } => (
            kind,
            key.to_vec(),
            flags,
            exptime,
            data.to_vec(),
            cas_unique,
            noreply,
        ),
        other => panic!("not a store: {other:?}"),
    }
}

#[test]
fn storage_commands() {
    assert_eq!(
        store(b"set foo 5 100 3\r\nbar\r\n"),
        (
            StoreKind::Set,
            b"foo".to_vec(),
            5,
            100,
            b"bar".to_vec(),
            0,
            false
        )
    );
    for (name, kind) in [
        ("add", StoreKind::Add),
        ("replace", StoreKind::Replace),
        ("append", StoreKind::Append),
        ("prepend", StoreKind::Prepend),
    ] {
        let line = format!("{name} k 0 0 1 noreply\r\nx\r\n");
        assert_eq!(
            store(line.as_bytes()),
            (kind, b"k".to_vec(), 0, 0, b"x".to_vec(), 0, true)
        );
    }
    assert_eq!(
        store(b"cas k 4294967295 -1 2 18446744073709551615\r\nhi\r\n"),
        (
            StoreKind::Cas,
            b"k".to_vec(),
            u32::MAX,
            -1,
            b"hi".to_vec(),
            u64::MAX,
            false
        )
    );
    assert_eq!(
        store(b"cas k 0 0 0 7 noreply\r\n\r\n"),
        (StoreKind::Cas, b"k".to_vec(), 0, 0, Vec::new(), 7, true)
    );
}

#[test]
fn storage_data_is_binary_safe() {
    let (.., data, _, _) = store(b"set k 0 0 8\r\n\r\n\0\xff\nab\r\r\n");
    assert_eq!(data, b"\r\n\0\xff\nab\r");
    // The line may end in a bare \n; the block may not.
    let (.., data, _, _) = store(b"set k 0 0 2\nhi\r\n");
    assert_eq!(data, b"hi");
}

#[test]
fn storage_trailing_word_other_than_noreply_is_ignored() {
    // memcached only looks for "noreply" in the last position.
    let (.., noreply) = store(b"set k 0 0 1 please\r\nx\r\n");
    assert!(!noreply);
}

#[test]
fn storage_token_count() {
    for line in [
        &b"set k 0 0\r\n"[..],
        b"set k 0 0 1 noreply extra\r\n",
        b"cas k 0 0 1\r\n",
        b"set\r\n",
    ] {
        assert_eq!(err(line), unknown(line.len()));
    }
    // Only the line is consumed: the data that follows is read as a command, as in memcached.
    let input = b"set k 0\r\nab\r\n";
    assert_eq!(err(input), unknown(9));
    assert_eq!(err(&input[9..]), unknown(4));
}

#[test]
fn storage_bad_numbers() {
    for line in [
        &b"set k x 0 1\r\n"[..],
        b"set k -1 0 1\r\n",
        b"set k 4294967296 0 1\r\n",
        b"set k 0 x 1\r\n",
        b"set k 0 2147483648 1\r\n",
        b"set k 0 0 x\r\n",
        b"set k 0 0 -1\r\n",
        b"set k 0 0 2147483647\r\n",
        b"cas k 0 0 1 x\r\n",
        b"cas k 0 0 1 -1\r\n",
    ] {
        assert_eq!(
            err(line),
            client("bad command line format", line.len(), false)
        );
        // The data line is not swallowed.
        let mut with_data = line.to_vec();
        with_data.extend_from_slice(b"x\r\n");
        assert_eq!(err(&with_data).consumed(), line.len());
    }
}

#[test]
fn storage_errors_under_noreply_are_silent() {
    let line = b"set k x 0 1 noreply\r\n";
    let e = err(line);
    assert_eq!(e, client("bad command line format", line.len(), true));
    let mut out = Vec::new();
    e.write_reply(&mut out);
    assert!(out.is_empty());
    // "noreply" in the bytes position: memcached still reads it as noreply.
    assert_eq!(
        err(b"set k 0 0 noreply\r\n"),
        client("bad command line format", 19, true)
    );
}

#[test]
fn storage_key_rules() {
    let line = format!("set {} 0 0 1\r\nx\r\n", "k".repeat(251));
    let line_len = line.len() - 3;
    assert_eq!(
        err(line.as_bytes()),
        client("bad command line format", line_len, false)
    );
    assert_eq!(
        err(b"set a\x02 0 0 1\r\nx\r\n"),
        client("bad command line format", 14, false)
    );
}

#[test]
fn storage_incomplete_data() {
    let input = b"set k 0 0 5\r\nhello\r\n";
    for cut in 13..input.len() {
        assert_eq!(need(&input[..cut]), Some(input.len()), "cut at {cut}");
    }
    assert_eq!(need(b"set k 0 0 5"), None);
}

#[test]
fn storage_bad_data_chunk() {
    let input = b"set k 0 0 3\r\nabcd\r\n";
    // Line plus 3 bytes plus the two that should have been \r\n.
    assert_eq!(err(input), client("bad data chunk", 18, false));
    assert_eq!(
        err(b"set k 0 0 1 noreply\r\nxy\r\n"),
        client("bad data chunk", 24, true)
    );
    assert_eq!(
        err(b"set k 0 0 0\r\n\n\r"),
        client("bad data chunk", 15, false)
    );
}

#[test]
fn storage_too_large() {
    let line = format!("set k 0 0 {}\r\n", MAX + 1);
    let consumed = line.len() + MAX + 3;
    assert_eq!(
        err(line.as_bytes()),
        Error::TooLarge {
            consumed,
            noreply: false
        }
    );
    let line = format!("add k 0 0 {} noreply\r\n", MAX + 1);
    let e = err(line.as_bytes());
    assert_eq!(
        e,
        Error::TooLarge {
            consumed: line.len() + MAX + 3,
            noreply: true
        }
    );
    // Exactly the limit is fine.
    let mut input = format!("set k 0 0 {MAX}\r\n").into_bytes();
    input.extend(std::iter::repeat_n(b'v', MAX));
    input.extend_from_slice(b"\r\n");
    assert!(matches!(whole(&input), Request::Store { data, .. } if data.len() == MAX));
}

// ---- delete ----

#[test]
fn delete_forms() {
    assert_eq!(
        whole(b"delete k\r\n"),
        Request::Delete {
            key: b"k",
            noreply: false
        }
    );
    assert_eq!(
        whole(b"delete k noreply\r\n"),
        Request::Delete {
            key: b"k",
            noreply: true
        }
    );
    assert_eq!(
        whole(b"delete k 0\r\n"),
        Request::Delete {
            key: b"k",
            noreply: false
        }
    );
    assert_eq!(
        whole(b"delete k 0 noreply\r\n"),
        Request::Delete {
            key: b"k",
            noreply: true
        }
    );
}

#[test]
fn delete_errors() {
    const USAGE: &str = "bad command line format.  Usage: delete <key> [noreply]";
    assert_eq!(err(b"delete k 5\r\n"), client(USAGE, 12, false));
    assert_eq!(err(b"delete k 0 0\r\n"), client(USAGE, 14, false));
    assert_eq!(err(b"delete k 5 noreply\r\n"), client(USAGE, 20, true));
    assert_eq!(err(b"delete\r\n"), unknown(8));
    assert_eq!(err(b"delete k 0 noreply x\r\n"), unknown(22));
    let line = format!("delete {} noreply\r\n", "k".repeat(251));
    assert_eq!(
        err(line.as_bytes()),
        client("bad command line format", line.len(), true)
    );
}

// ---- incr / decr ----

#[test]
fn arithmetic_forms() {
    assert_eq!(
        whole(b"incr k 1\r\n"),
        Request::Incr {
            key: b"k",
            delta: 1,
            noreply: false
        }
    );
    assert_eq!(
        whole(b"decr k 18446744073709551615 noreply\r\n"),
        Request::Decr {
            key: b"k",
            delta: u64::MAX,
            noreply: true
        }
    );
}

#[test]
fn arithmetic_errors() {
    const BAD: &str = "invalid numeric delta argument";
    assert_eq!(err(b"incr k -1\r\n"), client(BAD, 11, false));
    assert_eq!(
        err(b"incr k 18446744073709551616\r\n"),
        client(BAD, 29, false)
    );
    assert_eq!(err(b"decr k x noreply\r\n"), client(BAD, 18, true));
    assert_eq!(err(b"incr k\r\n"), unknown(8));
    assert_eq!(err(b"incr k 1 noreply x\r\n"), unknown(20));
    let line = format!("incr {} 1\r\n", "k".repeat(251));
    assert_eq!(
        err(line.as_bytes()),
        client("bad command line format", line.len(), false)
    );
}

// ---- touch ----

#[test]
fn touch_forms_and_errors() {
    assert_eq!(
        whole(b"touch k 10\r\n"),
        Request::Touch {
            key: b"k",
            exptime: 10,
            noreply: false
        }
    );
    assert_eq!(
        whole(b"touch k -1 noreply\r\n"),
        Request::Touch {
            key: b"k",
            exptime: -1,
            noreply: true
        }
    );
    assert_eq!(
        err(b"touch k x\r\n"),
        client("invalid exptime argument", 11, false)
    );
    assert_eq!(
        err(b"touch k x noreply\r\n"),
        client("invalid exptime argument", 19, true)
    );
    assert_eq!(err(b"touch k\r\n"), unknown(9));
    assert_eq!(err(b"touch k 1 2 3\r\n"), unknown(15));
}

// ---- flush_all, version, verbosity, stats, quit ----

#[test]
fn flush_all_forms() {
    assert_eq!(
        whole(b"flush_all\r\n"),
        Request::FlushAll {
            delay: 0,
            noreply: false
        }
    );
    assert_eq!(
        whole(b"flush_all 30\r\n"),
        Request::FlushAll {
            delay: 30,
            noreply: false
        }
    );
    assert_eq!(
        whole(b"flush_all noreply\r\n"),
        Request::FlushAll {
            delay: 0,
            noreply: true
        }
    );
    assert_eq!(
        whole(b"flush_all 30 noreply\r\n"),
        Request::FlushAll {
            delay: 30,
            noreply: true
        }
    );
    assert_eq!(
        whole(b"flush_all -1\r\n"),
        Request::FlushAll {
            delay: -1,
            noreply: false
        }
    );
    // memcached reads the first token as the delay and ignores a second that is not noreply.
    assert_eq!(
        whole(b"flush_all 5 x\r\n"),
        Request::FlushAll {
            delay: 5,
            noreply: false
        }
    );
}

#[test]
fn flush_all_errors() {
    assert_eq!(
        err(b"flush_all x\r\n"),
        client("invalid exptime argument", 13, false)
    );
    assert_eq!(
        err(b"flush_all x noreply\r\n"),
        client("invalid exptime argument", 21, true)
    );
    assert_eq!(err(b"flush_all 1 2 3\r\n"), unknown(17));
}

#[test]
fn simple_commands() {
    assert_eq!(whole(b"version\r\n"), Request::Version);
    assert_eq!(whole(b"version ignored\r\n"), Request::Version);
    assert_eq!(whole(b"quit\r\n"), Request::Quit);
    assert_eq!(
        whole(b"verbosity 1\r\n"),
        Request::Verbosity {
            level: 1,
            noreply: false
        }
    );
    assert_eq!(
        whole(b"verbosity 2 noreply\r\n"),
        Request::Verbosity {
            level: 2,
            noreply: true
        }
    );
    assert_eq!(
        err(b"verbosity x\r\n"),
        client("bad command line format", 13, false)
    );
    assert_eq!(
        err(b"verbosity noreply\r\n"),
        client("bad command line format", 19, true)
    );
    assert_eq!(err(b"verbosity\r\n"), unknown(11));
    assert_eq!(err(b"verbosity 1 2 3\r\n"), unknown(17));
}

#[test]
fn cache_memlimit_forms() {
    let limit = |megabytes, noreply| Request::CacheMemlimit { megabytes, noreply };
    assert_eq!(whole(b"cache_memlimit 100\r\n"), limit(100, false));
    assert_eq!(whole(b"cache_memlimit 0\r\n"), limit(0, false));
    assert_eq!(whole(b"cache_memlimit 64 noreply\r\n"), limit(64, true));
    // memcached ignores extra tokens unless the last is noreply
    assert_eq!(whole(b"cache_memlimit 64 x\r\n"), limit(64, false));
    assert_eq!(err(b"cache_memlimit\r\n"), unknown(16));
    assert_eq!(err(b"cache_memlimit abc\r\n"), unknown(20));
    assert_eq!(err(b"cache_memlimit -5\r\n"), unknown(19));
}

#[test]
fn stats_forms() {
    match whole(b"stats\r\n") {
        Request::Stats { group: None, args } => assert!(args.is_empty()),
        other => panic!("{other:?}"),
    }
    match whole(b"stats detail dump\r\n") {
        Request::Stats {
            group: Some(g),
            args,
        } => {
            assert_eq!(g, b"detail");
            assert_eq!(args.collect::<Vec<_>>(), [b"dump"]);
        }
        other => panic!("{other:?}"),
    }
}

// ---- framing ----

#[test]
fn unknown_and_empty_lines() {
    assert_eq!(err(b"\r\n"), unknown(2));
    assert_eq!(err(b"\n"), unknown(1));
    assert_eq!(err(b"   \r\n"), unknown(5));
    assert_eq!(err(b"GET k\r\n"), unknown(7));
    assert_eq!(err(b"bogus\r\nget k\r\n"), unknown(7));
    assert_eq!(err(b"g\r\n"), unknown(3));
}

#[test]
fn unterminated_lines() {
    assert_eq!(need(b""), None);
    assert_eq!(need(b"get k"), None);
    let long = vec![b'x'; MAX_LINE_LEN];
    assert_eq!(need(&long), None);
    let longer = vec![b'x'; MAX_LINE_LEN + 1];
    let e = err(&longer);
    assert_eq!(
        e,
        Error::Client {
            msg: "line too long",
            consumed: MAX_LINE_LEN + 1,
            noreply: false,
            close: true
        }
    );
    assert!(e.close());
    let mut out = Vec::new();
    e.write_reply(&mut out);
    assert!(out.is_empty(), "memcached closes without a word");

    // Multigets may run long, as in memcached.
    let mut multiget = b"get ".to_vec();
    multiget.extend(std::iter::repeat_n(b"key ", 1000).flatten());
    assert_eq!(need(&multiget), None);
    let mut spaced = vec![b' '; 100];
    spaced.extend_from_slice(&multiget);
    assert_eq!(need(&spaced), None);
    let mut too_spaced = vec![b' '; 101];
    too_spaced.extend_from_slice(&multiget);
    assert!(err(&too_spaced).close());
    // And once the newline arrives, every key is there.
    multiget.extend_from_slice(b"\r\n");
    assert_eq!(keys(&whole(&multiget)).len(), 1000);
}

#[test]
fn error_replies() {
    let mut out = Vec::new();
    unknown(3).write_reply(&mut out);
    client("bad data chunk", 3, false).write_reply(&mut out);
    Error::TooLarge {
        consumed: 9,
        noreply: false,
    }
    .write_reply(&mut out);
    Error::TooLarge {
        consumed: 9,
        noreply: true,
    }
    .write_reply(&mut out);
    assert_eq!(
        out,
        b"ERROR\r\nCLIENT_ERROR bad data chunk\r\nSERVER_ERROR object too large for cache\r\n"
    );
    assert_eq!(client("x", 1, false).to_string(), "CLIENT_ERROR x");
}

#[test]
fn max_value_size_zero() {
    assert_eq!(
        parse(b"set k 0 0 1\r\nx\r\n", 0),
        Err(Error::TooLarge {
            consumed: 16,
            noreply: false
        })
    );
    assert!(matches!(
        parse(b"set k 0 0 0\r\n\r\n", 0),
        Ok(Parsed::Complete(_, 15))
    ));
}
