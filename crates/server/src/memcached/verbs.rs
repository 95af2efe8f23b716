//! memcached verbs on the command table: each request counts in INFO commandstats (and its
//! error replies in errorstats) as the RESP command it maps onto, or, where RESP has no command
//! that does the same, as the verb's own memcached-only entry (`command::table::MEMCACHED_ONLY`).
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

/// Counts one request that ran and replied `reply`: an `ERROR`, `CLIENT_ERROR` or
/// `SERVER_ERROR` reply makes it a failed call (and goes to errorstats); NOT_STORED, EXISTS,
/// NOT_FOUND and the meta `NS`/`EX`/`NF`/`EN` are outcomes, not errors.
pub(crate) fn count(command: &'static Command, started: std::time::Instant, reply: &[u8]) {
    let nanos = started.elapsed().as_nanos() as u64;
    let failed = record_refusal(reply);
    stats::record(command, nanos, failed);
}

/// Counts `reply` in errorstats when it is an error (`ERROR`, `CLIENT_ERROR`, `SERVER_ERROR`);
/// returns whether it was.
pub(crate) fn record_refusal(reply: &[u8]) -> bool {
    let failed = [&b"ERROR\r"[..], b"CLIENT_ERROR ", b"SERVER_ERROR "]
        .iter()
        .any(|p| reply.starts_with(p));
    if failed {
        let end = reply
            .iter()
            .position(|&b| b == b'\r')
            .unwrap_or(reply.len());
        stats::record_error(&reply[..end]);
    }
    failed
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
}
