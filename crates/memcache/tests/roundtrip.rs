//! Property tests: composed requests parse back to what was composed, whole or
//! pipelined, every prefix is Incomplete, and no input makes parse misbehave.

use memcache::{encode_base64, parse, MetaFlags, Parsed, Request, StoreKind};
use proptest::prelude::*;

const MAX: usize = 512;

/// An owned request, the form requests are generated and compared in.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Model {
    Get {
        keys: Vec<Vec<u8>>,
        cas: bool,
    },
    Gat {
        exptime: i32,
        keys: Vec<Vec<u8>>,
        cas: bool,
    },
    Store {
        kind: StoreKind,
        key: Vec<u8>,
        flags: u32,
        exptime: i32,
        data: Vec<u8>,
        cas: u64,
        noreply: bool,
    },
    Delete {
        key: Vec<u8>,
        noreply: bool,
    },
    Incr {
        key: Vec<u8>,
        delta: u64,
        noreply: bool,
    },
    Decr {
        key: Vec<u8>,
        delta: u64,
        noreply: bool,
    },
    Touch {
        key: Vec<u8>,
        exptime: i32,
        noreply: bool,
    },
    FlushAll {
        delay: i32,
        noreply: bool,
    },
    Version,
    Verbosity {
        level: u32,
        noreply: bool,
    },
    CacheMemlimit {
        megabytes: u32,
        noreply: bool,
    },
    Stats {
        args: Vec<Vec<u8>>,
    },
    Quit,
    Meta {
        cmd: u8,
        key: Vec<u8>,
        data: Option<Vec<u8>>,
        flags: Vec<(u8, Vec<u8>)>,
    },
    MetaNoop,
    MetaDebug {
        key: Vec<u8>,
        b: bool,
    },
}

/// Wire spelling: separator width and line ending vary, data blocks always end in \r\n.
#[derive(Debug, Clone, Copy)]
struct Style {
    sep: usize,
    crlf: bool,
}

fn compose(m: &Model, st: Style, out: &mut Vec<u8>) {
    let mut words: Vec<Vec<u8>> = Vec::new();
    let num = |n: &dyn ToString| n.to_string().into_bytes();
    let mut data: Option<&[u8]> = None;
    match m {
        Model::Get { keys, cas } => {
            words.push(if *cas {
                b"gets".to_vec()
            } else {
                b"get".to_vec()
            });
            words.extend(keys.iter().cloned());
        }
        Model::Gat { exptime, keys, cas } => {
            words.push(if *cas {
                b"gats".to_vec()
            } else {
                b"gat".to_vec()
            });
            words.push(num(exptime));
            words.extend(keys.iter().cloned());
        }
        Model::Store {
            kind,
            key,
            flags,
            exptime,
            data: d,
            cas,
            noreply,
        } => {
            let name: &[u8] = match kind {
                StoreKind::Set => b"set",
                StoreKind::Add => b"add",
                StoreKind::Replace => b"replace",
                StoreKind::Append => b"append",
                StoreKind::Prepend => b"prepend",
                StoreKind::Cas => b"cas",
            };
            words.extend([
                name.to_vec(),
                key.clone(),
                num(flags),
                num(exptime),
                num(&d.len()),
            ]);
            if *kind == StoreKind::Cas {
                words.push(num(cas));
            }
            if *noreply {
                words.push(b"noreply".to_vec());
            }
            data = Some(d);
        }
        Model::Delete { key, noreply } => {
            words.extend([b"delete".to_vec(), key.clone()]);
            if *noreply {
                words.push(b"noreply".to_vec());
            }
        }
        Model::Incr {
            key,
            delta,
            noreply,
        }
        | Model::Decr {
            key,
            delta,
            noreply,
        } => {
            let name = if matches!(m, Model::Incr { .. }) {
                b"incr".to_vec()
            } else {
                b"decr".to_vec()
            };
            words.extend([name, key.clone(), num(delta)]);
            if *noreply {
                words.push(b"noreply".to_vec());
            }
        }
        Model::Touch {
            key,
            exptime,
            noreply,
        } => {
            words.extend([b"touch".to_vec(), key.clone(), num(exptime)]);
            if *noreply {
                words.push(b"noreply".to_vec());
            }
        }
        Model::FlushAll { delay, noreply } => {
            words.push(b"flush_all".to_vec());
            if *delay != 0 {
                words.push(num(delay));
            }
            if *noreply {
                words.push(b"noreply".to_vec());
            }
        }
        Model::Version => words.push(b"version".to_vec()),
        Model::Quit => words.push(b"quit".to_vec()),
        Model::Verbosity { level, noreply } => {
            words.extend([b"verbosity".to_vec(), num(level)]);
            if *noreply {
                words.push(b"noreply".to_vec());
            }
        }
        Model::CacheMemlimit { megabytes, noreply } => {
            words.extend([b"cache_memlimit".to_vec(), num(megabytes)]);
            if *noreply {
                words.push(b"noreply".to_vec());
            }
        }
        Model::Stats { args } => {
            words.push(b"stats".to_vec());
            words.extend(args.iter().cloned());
        }
        Model::Meta {
            cmd,
            key,
            data: d,
            flags,
        } => {
            words.extend([vec![b'm', *cmd], key.clone()]);
            if let Some(d) = d {
                words.push(num(&d.len()));
                data = Some(d);
            }
            for (f, tok) in flags {
                let mut w = vec![*f];
                w.extend_from_slice(tok);
                words.push(w);
            }
        }
        Model::MetaNoop => words.push(b"mn".to_vec()),
        Model::MetaDebug { key, b } => {
            words.extend([b"me".to_vec(), key.clone()]);
            if *b {
                words.push(b"b".to_vec());
            }
        }
    }
    let sep = vec![b' '; st.sep];
    out.extend_from_slice(&words.join(&sep[..]));
    out.extend_from_slice(if st.crlf { b"\r\n" } else { b"\n" });
    if let Some(d) = data {
        out.extend_from_slice(d);
        out.extend_from_slice(b"\r\n");
    }
}

fn owned_flags(f: &MetaFlags<'_>) -> Vec<(u8, Vec<u8>)> {
    f.iter().map(|f| (f.flag, f.token.to_vec())).collect()
}

fn model_of(r: &Request<'_>) -> Model {
    let v = |s: &[u8]| s.to_vec();
    let i32_of = |n: i64| i32::try_from(n).expect("exptime out of i32 range");
    match r {
        Request::Get { keys, with_cas } => Model::Get {
            keys: keys.clone().map(v).collect(),
            cas: *with_cas,
        },
        Request::GetAndTouch {
            exptime,
            keys,
            with_cas,
        } => Model::Gat {
            exptime: i32_of(*exptime),
            keys: keys.clone().map(v).collect(),
            cas: *with_cas,
        },
        Request::Store {
            kind,
            key,
            flags,
            exptime,
            data,
            cas_unique,
            noreply,
        } => Model::Store {
            kind: *kind,
            key: v(key),
            flags: *flags,
            exptime: i32_of(*exptime),
            data: v(data),
            cas: *cas_unique,
            noreply: *noreply,
        },
        Request::Delete { key, noreply } => Model::Delete {
            key: v(key),
            noreply: *noreply,
        },
        Request::Incr {
            key,
            delta,
            noreply,
        } => Model::Incr {
            key: v(key),
            delta: *delta,
            noreply: *noreply,
        },
        Request::Decr {
            key,
            delta,
            noreply,
        } => Model::Decr {
            key: v(key),
            delta: *delta,
            noreply: *noreply,
        },
        Request::Touch {
            key,
            exptime,
            noreply,
        } => Model::Touch {
            key: v(key),
            exptime: i32_of(*exptime),
            noreply: *noreply,
        },
        Request::FlushAll { delay, noreply } => Model::FlushAll {
            delay: i32_of(*delay),
            noreply: *noreply,
        },
        Request::Version => Model::Version,
        Request::Quit => Model::Quit,
        Request::Verbosity { level, noreply } => Model::Verbosity {
            level: *level,
            noreply: *noreply,
        },
        Request::CacheMemlimit { megabytes, noreply } => Model::CacheMemlimit {
            megabytes: *megabytes,
            noreply: *noreply,
        },
        Request::Stats { group, args } => Model::Stats {
            args: group.iter().copied().chain(args.clone()).map(v).collect(),
        },
        Request::MetaGet { key, flags } => Model::Meta {
            cmd: b'g',
            key: v(key),
            data: None,
            flags: owned_flags(flags),
        },
        Request::MetaSet { key, data, flags } => Model::Meta {
            cmd: b's',
            key: v(key),
            data: Some(v(data)),
            flags: owned_flags(flags),
        },
        Request::MetaDelete { key, flags } => Model::Meta {
            cmd: b'd',
            key: v(key),
            data: None,
            flags: owned_flags(flags),
        },
        Request::MetaArithmetic { key, flags } => Model::Meta {
            cmd: b'a',
            key: v(key),
            data: None,
            flags: owned_flags(flags),
        },
        Request::MetaNoop => Model::MetaNoop,
        Request::MetaDebug { key, flags } => Model::MetaDebug {
            key: v(key),
            b: flags.base64_key(),
        },
    }
}

// ---- strategies ----

fn key() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(prop_oneof![0x21u8..0x7f, 0x80u8..=0xff], 1..=250)
}

fn short_word() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(0x21u8..0x7f, 1..12)
}

fn b64_key() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 1..=150).prop_map(|raw| {
        let mut out = Vec::new();
        encode_base64(&raw, &mut out);
        out
    })
}

fn data() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..=64)
}

fn store_kind() -> impl Strategy<Value = StoreKind> {
    prop::sample::select(vec![
        StoreKind::Set,
        StoreKind::Add,
        StoreKind::Replace,
        StoreKind::Append,
        StoreKind::Prepend,
        StoreKind::Cas,
    ])
}

/// Token for a meta flag, valid for what memcached checks on that letter.
fn flag_token(f: u8) -> BoxedStrategy<Vec<u8>> {
    let s = |n: &dyn ToString| n.to_string().into_bytes();
    match f {
        b'T' | b'N' | b'R' => any::<i32>().prop_map(move |n| s(&n)).boxed(),
        b'C' | b'E' | b'J' | b'D' => any::<u64>().prop_map(move |n| s(&n)).boxed(),
        b'F' => any::<u32>().prop_map(move |n| s(&n)).boxed(),
        b'O' => prop::collection::vec(0x21u8..0x7f, 0..=31).boxed(),
        b'M' => prop::sample::select(vec![b'E', b'A', b'P', b'R', b'S'])
            .prop_map(|m| vec![m])
            .boxed(),
        b'm' => prop::sample::select(vec![b'I', b'D', b'+', b'-'])
            .prop_map(|m| vec![m])
            .boxed(),
        _ => Just(Vec::new()).boxed(),
    }
}

fn meta_flags(letters: &'static [u8]) -> impl Strategy<Value = Vec<(u8, Vec<u8>)>> {
    prop::sample::subsequence(letters.to_vec(), 0..=letters.len())
        .prop_shuffle()
        .prop_flat_map(|ls| {
            ls.into_iter()
                .map(|l| {
                    // 'm' stands for ma's M, whose modes differ from ms's.
                    let flag = if l == b'm' { b'M' } else { l };
                    flag_token(l).prop_map(move |t| (flag, t))
                })
                .collect::<Vec<_>>()
        })
}

fn meta() -> impl Strategy<Value = Model> {
    let cmd = prop_oneof![
        Just((b'g', &b"vcftkqshluTNROE"[..])),
        Just((b's', &b"ckqsITFCEOM"[..])),
        Just((b'd', &b"qITCxkOE"[..])),
        Just((b'a', &b"vNJDmTtckOqEC"[..])),
    ];
    (cmd, any::<bool>(), data()).prop_flat_map(|((c, letters), b, d)| {
        let k = if b { b64_key().boxed() } else { key().boxed() };
        (k, meta_flags(letters)).prop_map(move |(key, mut flags)| {
            if b {
                flags.push((b'b', Vec::new()));
            }
            Model::Meta {
                cmd: c,
                key,
                data: (c == b's').then(|| d.clone()),
                flags,
            }
        })
    })
}

fn model() -> impl Strategy<Value = Model> {
    let keys = prop::collection::vec(key(), 1..5);
    prop_oneof![
        (keys, any::<bool>()).prop_map(|(keys, cas)| Model::Get { keys, cas }),
        (
            any::<i32>(),
            prop::collection::vec(key(), 0..4),
            any::<bool>()
        )
            .prop_map(|(exptime, keys, cas)| Model::Gat { exptime, keys, cas }),
        (
            store_kind(),
            key(),
            any::<u32>(),
            any::<i32>(),
            data(),
            any::<u64>(),
            any::<bool>()
        )
            .prop_map(
                |(kind, key, flags, exptime, data, cas, noreply)| Model::Store {
                    kind,
                    key,
                    flags,
                    exptime,
                    data,
                    cas: if kind == StoreKind::Cas { cas } else { 0 },
                    noreply,
                }
            ),
        (key(), any::<bool>()).prop_map(|(key, noreply)| Model::Delete { key, noreply }),
        (key(), any::<u64>(), any::<bool>()).prop_map(|(key, delta, noreply)| Model::Incr {
            key,
            delta,
            noreply
        }),
        (key(), any::<u64>(), any::<bool>()).prop_map(|(key, delta, noreply)| Model::Decr {
            key,
            delta,
            noreply
        }),
        (key(), any::<i32>(), any::<bool>()).prop_map(|(key, exptime, noreply)| Model::Touch {
            key,
            exptime,
            noreply
        }),
        (any::<i32>(), any::<bool>())
            .prop_map(|(delay, noreply)| Model::FlushAll { delay, noreply }),
        Just(Model::Version),
        Just(Model::Quit),
        Just(Model::MetaNoop),
        (any::<u32>(), any::<bool>())
            .prop_map(|(level, noreply)| Model::Verbosity { level, noreply }),
        (any::<u32>(), any::<bool>())
            .prop_map(|(megabytes, noreply)| Model::CacheMemlimit { megabytes, noreply }),
        prop::collection::vec(short_word(), 0..4).prop_map(|args| Model::Stats { args }),
        (any::<bool>(), key(), b64_key()).prop_map(|(b, k, bk)| Model::MetaDebug {
            key: if b { bk } else { k },
            b
        }),
        meta(),
    ]
}

fn style() -> impl Strategy<Value = Style> {
    (1usize..=3, any::<bool>()).prop_map(|(sep, crlf)| Style { sep, crlf })
}

/// What a server would do with `buf`: parse, drop what each outcome consumed, stop when Incomplete.
/// Asserts progress and bounds on every step.
fn drive(buf: &[u8]) {
    let mut at = 0;
    while at < buf.len() {
        let rest = &buf[at..];
        match parse(rest, 64) {
            Ok(Parsed::Complete(_, n)) => {
                assert!(n >= 1 && n <= rest.len());
                at += n;
            }
            Ok(Parsed::Incomplete { need }) => {
                if let Some(n) = need {
                    assert!(n > rest.len());
                } else {
                    assert!(!rest.contains(&b'\n'));
                }
                return;
            }
            Err(e) => {
                assert!(e.consumed() >= 1);
                if e.close() {
                    return;
                }
                at = at.saturating_add(e.consumed());
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn composed_requests_parse_back(m in model(), st in style()) {
        let mut wire = Vec::new();
        compose(&m, st, &mut wire);
        match parse(&wire, MAX) {
            Ok(Parsed::Complete(req, n)) => {
                prop_assert_eq!(n, wire.len());
                prop_assert_eq!(model_of(&req), m);
            }
            other => prop_assert!(false, "{:?} -> {:?}", wire.escape_ascii().to_string(), other),
        }
    }

    #[test]
    fn every_prefix_is_incomplete(m in model(), st in style()) {
        let mut wire = Vec::new();
        compose(&m, st, &mut wire);
        for cut in 0..wire.len() {
            match parse(&wire[..cut], MAX) {
                Ok(Parsed::Incomplete { need }) => {
                    prop_assert!(need.is_none() || need == Some(wire.len()), "cut {}: need {:?}", cut, need);
                }
                other => prop_assert!(false, "cut {}: {:?}", cut, other),
            }
        }
    }

    #[test]
    fn pipelined_requests_parse_in_order(ms in prop::collection::vec((model(), style()), 1..6)) {
        let mut wire = Vec::new();
        for (m, st) in &ms {
            compose(m, *st, &mut wire);
        }
        let mut at = 0;
        for (m, _) in &ms {
            match parse(&wire[at..], MAX) {
                Ok(Parsed::Complete(req, n)) => {
                    prop_assert_eq!(&model_of(&req), m);
                    at += n;
                }
                other => prop_assert!(false, "{:?}", other),
            }
        }
        prop_assert_eq!(at, wire.len());
    }

    #[test]
    fn random_bytes_never_misbehave(buf in prop::collection::vec(any::<u8>(), 0..600)) {
        drive(&buf);
    }

    #[test]
    fn protocol_shaped_noise_never_misbehaves(
        parts in prop::collection::vec(prop::sample::select(vec![
            "get", "gets", "gat", "set", "cas", "append", "delete", "incr", "touch", "flush_all",
            "verbosity", "cache_memlimit", "stats", "mg", "ms", "md", "ma", "mn", "me", " ", " ", " ", "\r\n", "\n",
            "\r", "0", "1", "5", "-1", "99999999999", "18446744073709551616", "noreply", "k", "v",
            "T", "Tx", "b", "Zm9v", "O", "MA", "MX", "q", "q", "\x00", "\x7f", "\u{e9}", "xxxxxxxxxx",
        ]), 0..40),
    ) {
        let buf: Vec<u8> = parts.concat().into_bytes();
        drive(&buf);
    }

    #[test]
    fn mutated_requests_never_misbehave(
        m in model(),
        st in style(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let mut wire = Vec::new();
        compose(&m, st, &mut wire);
        for (i, b) in edits {
            let at = i.index(wire.len());
            wire[at] = b;
        }
        drive(&wire);
        for cut in 0..wire.len() {
            drive(&wire[..cut]);
        }
    }
}
