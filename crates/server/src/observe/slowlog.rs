//! The slow log (SLOWLOG GET / LEN / RESET / HELP): the latest commands that ran at least
//! `slowlog-log-slower-than` microseconds, newest first, at most `slowlog-max-len` of them.
//! Entries have Redis's shape, arguments capped as Redis caps them, so that a huge request
//! costs the log a bounded amount of memory.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use parking_lot::Mutex;

use crate::clients::ClientInfo;

/// Arguments an entry keeps: the first 31, then `... (N more arguments)` (Redis's
/// SLOWLOG_ENTRY_MAX_ARGC).
pub const MAX_ARGS: usize = 32;
/// Bytes an argument keeps, then `... (N more bytes)` (SLOWLOG_ENTRY_MAX_STRING).
pub const MAX_ARG_BYTES: usize = 128;
/// Entries SLOWLOG GET returns without a count.
pub const DEFAULT_COUNT: usize = 10;

/// One slow command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Filled in when the entry is logged.
    pub id: u64,
    /// Unix time (seconds) it was logged.
    pub time: u64,
    pub micros: u64,
    pub args: Vec<Vec<u8>>,
    /// The client's address and name, as CLIENT LIST shows them.
    pub addr: String,
    pub name: Vec<u8>,
}

impl Entry {
    pub fn new(args: &[&[u8]], micros: u64, client: &ClientInfo) -> Entry {
        let name = client.name.lock().clone().unwrap_or_default();
        Entry::with_capped(capped_args(args), micros, client.addr.clone(), name)
    }

    /// An entry whose arguments went through [`capped_args`] already.
    pub fn with_capped(args: Vec<Vec<u8>>, micros: u64, addr: String, name: Vec<u8>) -> Entry {
        Entry {
            id: 0,
            time: store::now_ms() / 1000,
            micros,
            args,
            addr,
            name,
        }
    }
}

/// `args` as an entry keeps them (see [`MAX_ARGS`], [`MAX_ARG_BYTES`]).
pub fn capped_args(args: &[&[u8]]) -> Vec<Vec<u8>> {
    let kept = args.len().min(MAX_ARGS);
    let mut out = Vec::with_capacity(kept);
    for (j, arg) in args.iter().take(kept).enumerate() {
        if kept != args.len() && j == kept - 1 {
            let more = args.len() - kept + 1;
            out.push(format!("... ({more} more arguments)").into_bytes());
        } else if arg.len() > MAX_ARG_BYTES {
            let mut s = arg[..MAX_ARG_BYTES].to_vec();
            let more = arg.len() - MAX_ARG_BYTES;
            s.extend_from_slice(format!("... ({more} more bytes)").as_bytes());
            out.push(s);
        } else {
            out.push(arg.to_vec());
        }
    }
    out
}

/// The log: entries newest first.
#[derive(Default)]
pub struct SlowLog {
    next_id: AtomicU64,
    entries: Mutex<VecDeque<Entry>>,
}

impl SlowLog {
    /// Logs `entry` (giving it the next id) and drops the oldest past `max_len`.
    pub fn push(&self, mut entry: Entry, max_len: usize) {
        let mut entries = self.entries.lock();
        entry.id = self.next_id.fetch_add(1, Relaxed);
        entries.push_front(entry);
        entries.truncate(max_len);
    }

    pub fn len(&self) -> usize {
        self.entries.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn reset(&self) {
        self.entries.lock().clear();
    }

    /// The `count` newest entries.
    pub fn latest(&self, count: usize) -> Vec<Entry> {
        self.entries.lock().iter().take(count).cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_capped_like_redis() {
        let long = vec![b'x'; 200];
        let capped = capped_args(&[b"set", &long, b"v"]);
        assert_eq!(capped.len(), 3);
        let mut want = vec![b'x'; 128];
        want.extend_from_slice(b"... (72 more bytes)");
        assert_eq!(capped[1], want);
        // 128 bytes exactly are kept whole.
        assert_eq!(capped_args(&[&[b'y'; 128]])[0].len(), 128);

        let many: Vec<Vec<u8>> = (0..41).map(|i| i.to_string().into_bytes()).collect();
        let refs: Vec<&[u8]> = many.iter().map(Vec::as_slice).collect();
        let capped = capped_args(&refs);
        assert_eq!(capped.len(), 32);
        assert_eq!(capped[30], b"30");
        assert_eq!(capped[31], b"... (10 more arguments)");
        // 32 arguments exactly are kept whole.
        assert_eq!(capped_args(&refs[..32])[31], b"31");
    }

    #[test]
    fn log_keeps_the_newest() {
        let log = SlowLog::default();
        for i in 0..5u64 {
            log.push(
                Entry::with_capped(vec![b"get".to_vec()], i, "a:1".into(), vec![]),
                3,
            );
        }
        assert_eq!(log.len(), 3);
        let ids: Vec<u64> = log.latest(10).iter().map(|e| e.id).collect();
        assert_eq!(ids, [4, 3, 2]);
        assert_eq!(log.latest(1)[0].micros, 4);
        log.reset();
        assert!(log.is_empty());
        log.push(Entry::with_capped(vec![], 0, String::new(), vec![]), 3);
        assert_eq!(log.latest(1)[0].id, 5, "ids go on after a reset");
    }
}
