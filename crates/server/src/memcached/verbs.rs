//! memcached verbs on the command table: each request runs through the command path
//! (`command::call`) as the RESP command it maps onto, or, where RESP has no command that does
//! the same, as the verb's own memcached-only entry (`command::table::MEMCACHED_ONLY`): it
//! counts in INFO commandstats (its error replies in errorstats), shows in CLIENT LIST `cmd=`
//! and to the observers (MONITOR, slow log) under that entry's name.
//!
//! A verb maps onto a RESP command when that command expresses the verb's plain form: `get` and
//! `gets` read any number of keys as MGET does, `set`/`add`/`replace` are SET / SET NX / SET XX,
//! `delete` is DEL, `incr`/`decr` are INCRBY/DECRBY, `touch` is EXPIRE, `flush_all` FLUSHALL.
//! `cas`, `prepend`, `gat(s)` and the meta commands (whose flags combine several operations)
//! keep their own names.

use std::sync::OnceLock;

use memcache::{Request, StoreKind};

use crate::command::{self, Command};
use crate::stats;

/// Entry names, in the order of the indexes `index` returns.
const NAMES: [&str; 22] = [
    "mget",
    "gat",
    "set",
    "cas",
    "append",
    "prepend",
    "del",
    "incrby",
    "decrby",
    "expire",
    "flushall",
    "quit",
    "version",
    "verbosity",
    "cache_memlimit",
    "stats",
    "mg",
    "ms",
    "md",
    "ma",
    "mn",
    "me",
];

fn index(request: &Request<'_>) -> usize {
    match request {
        Request::Get { .. } => 0,
        Request::GetAndTouch { .. } => 1,
        Request::Store { kind, .. } => match kind {
            StoreKind::Set | StoreKind::Add | StoreKind::Replace => 2,
            StoreKind::Cas => 3,
            StoreKind::Append => 4,
            StoreKind::Prepend => 5,
        },
        Request::Delete { .. } => 6,
        Request::Incr { .. } => 7,
        Request::Decr { .. } => 8,
        Request::Touch { .. } => 9,
        Request::FlushAll { .. } => 10,
        Request::Quit => 11,
        Request::Version => 12,
        Request::Verbosity { .. } => 13,
        Request::CacheMemlimit { .. } => 14,
        Request::Stats { .. } => 15,
        Request::MetaGet { .. } => 16,
        Request::MetaSet { .. } => 17,
        Request::MetaDelete { .. } => 18,
        Request::MetaArithmetic { .. } => 19,
        Request::MetaNoop => 20,
        Request::MetaDebug { .. } => 21,
    }
}

/// The command-table entry `request` counts as.
pub(crate) fn entry(request: &Request<'_>) -> &'static Command {
    static ENTRIES: OnceLock<Vec<&'static Command>> = OnceLock::new();
    let entries = ENTRIES.get_or_init(|| {
        NAMES
            .iter()
            .map(|name| {
                command::lookup(name.as_bytes())
                    .unwrap_or_else(|| command::memcached_only_entry(name))
            })
            .collect()
    });
    entries[index(request)]
}

/// The error a reply carries, for the command path's statistics: `ERROR`, `CLIENT_ERROR` and
/// `SERVER_ERROR` make a failed call (and count in errorstats under that word); NOT_STORED,
/// EXISTS, NOT_FOUND and the meta `NS`/`EX`/`NF`/`EN` are outcomes, not errors.
pub(crate) fn error_in(reply: &[u8]) -> Option<&[u8]> {
    let failed = [&b"ERROR\r"[..], b"CLIENT_ERROR ", b"SERVER_ERROR "]
        .iter()
        .any(|p| reply.starts_with(p));
    if !failed {
        return None;
    }
    let end = reply
        .iter()
        .position(|&b| b == b'\r')
        .unwrap_or(reply.len());
    Some(&reply[..end])
}

/// Counts `reply` of a request refused unparsed in errorstats when it is an error.
pub(crate) fn record_refusal(reply: &[u8]) {
    if let Some(msg) = error_in(reply) {
        stats::record_error(msg);
    }
}

/// The request's arguments as MONITOR and the slow log show them: the name of the entry it
/// maps onto, then its arguments in memcached's order, the data block in place of its length
/// (`set k 5 60 1` + `v` is `set k 5 60 v`; `add` and `replace` end with `NX` / `XX`, a `cas`
/// with its CAS; `noreply` is left out).
pub(crate) fn for_each_arg(request: &Request<'_>, f: &mut dyn FnMut(&[u8])) {
    let num = |n: i64, f: &mut dyn FnMut(&[u8])| {
        let mut buf = [0u8; 24];
        let mut w = &mut buf[..];
        let _ = std::io::Write::write_fmt(&mut w, format_args!("{n}"));
        let len = 24 - w.len();
        f(&buf[..len])
    };
    f(entry(request).name.as_bytes());
    match request {
        Request::Get { keys, .. } => keys.clone().for_each(&mut *f),
        Request::GetAndTouch { exptime, keys, .. } => {
            num(*exptime, f);
            keys.clone().for_each(&mut *f);
        }
        Request::Store {
            kind,
            key,
            flags,
            exptime,
            data,
            cas_unique,
            ..
        } => {
            // In memcached's order, the data block in place of its length; `add` and
            // `replace`, which count as SET, end as SET's NX / XX would.
            f(key);
            num(i64::from(*flags), f);
            num(*exptime, f);
            f(data);
            match kind {
                StoreKind::Cas => num(*cas_unique as i64, f),
                StoreKind::Add => f(b"NX"),
                StoreKind::Replace => f(b"XX"),
                _ => {}
            }
        }
        Request::Delete { key, .. } => f(key),
        Request::Incr { key, delta, .. } | Request::Decr { key, delta, .. } => {
            f(key);
            num(*delta as i64, f);
        }
        Request::Touch { key, exptime, .. } => {
            f(key);
            num(*exptime, f);
        }
        Request::FlushAll { delay, .. } if *delay > 0 => num(*delay, f),
        Request::Verbosity { level, .. } => num(i64::from(*level), f),
        Request::CacheMemlimit { megabytes, .. } => num(i64::from(*megabytes), f),
        Request::Stats { group, args } => {
            group.iter().for_each(|g| f(g));
            args.clone().for_each(&mut *f);
        }
        Request::MetaGet { key, flags }
        | Request::MetaDelete { key, flags }
        | Request::MetaArithmetic { key, flags }
        | Request::MetaDebug { key, flags } => {
            f(key);
            split(flags.as_bytes(), f);
        }
        Request::MetaSet { key, data, flags } => {
            f(key);
            f(data);
            split(flags.as_bytes(), f);
        }
        Request::FlushAll { .. } | Request::Version | Request::Quit | Request::MetaNoop => {}
    }
}

/// The space-separated words of `line`.
fn split(line: &[u8], f: &mut dyn FnMut(&[u8])) {
    line.split(|&b| b == b' ')
        .filter(|w| !w.is_empty())
        .for_each(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_verb_has_an_entry() {
        for name in NAMES {
            let c = command::lookup(name.as_bytes())
                .unwrap_or_else(|| command::memcached_only_entry(name));
            assert_eq!(c.name, name);
        }
        assert_eq!(entry(&Request::MetaNoop).name, "mn");
        assert_eq!(entry(&Request::Quit).name, "quit");
    }

    /// What MONITOR and the slow log show of a memcached request: its mapped command.
    fn shown(line: &[u8]) -> Vec<String> {
        let Ok(memcache::Parsed::Complete(request, _)) = memcache::parse(line, 1 << 20) else {
            panic!("request parses");
        };
        let mut args = Vec::new();
        for_each_arg(&request, &mut |a| {
            args.push(String::from_utf8_lossy(a).into_owned())
        });
        args
    }

    #[test]
    fn requests_show_as_their_mapped_command() {
        assert_eq!(shown(b"get a b\r\n"), ["mget", "a", "b"]);
        assert_eq!(
            shown(b"add k 5 0 2\r\nhi\r\n"),
            ["set", "k", "5", "0", "hi", "NX"]
        );
        assert_eq!(
            shown(b"set k 5 60 1 noreply\r\nv\r\n"),
            ["set", "k", "5", "60", "v"]
        );
        assert_eq!(
            shown(b"replace k 0 0 1\r\nv\r\n"),
            ["set", "k", "0", "0", "v", "XX"]
        );
        assert_eq!(
            shown(b"cas k 0 0 1 77\r\nv\r\n"),
            ["cas", "k", "0", "0", "v", "77"]
        );
        assert_eq!(shown(b"delete k\r\n"), ["del", "k"]);
        assert_eq!(shown(b"mg k v t\r\n"), ["mg", "k", "v", "t"]);
        assert_eq!(shown(b"incr n 42\r\n"), ["incrby", "n", "42"]);
        assert_eq!(shown(b"touch k -1\r\n"), ["expire", "k", "-1"]);
        assert_eq!(
            shown(b"ms k 2 T10 F3\r\nhi\r\n"),
            ["ms", "k", "hi", "T10", "F3"]
        );
        assert_eq!(shown(b"flush_all\r\n"), ["flushall"]);
    }
}
