//! memcached front end: the text protocol (`get`, `set`, `incr`, ...) and the meta protocol
//! (`mg`, `ms`, `md`, `ma`, `mn`, `me`) over the shared keyspace.
//!
//! Framing and validation live in the `memcache` crate; this module runs requests against the
//! store and writes the replies. Storage commands go through `command::ops`, so a memcached `set`
//! and a RESP SET run the same code. Semantics follow memcached 1.6's `protocol.txt` and
//! `proto_text.c`; the few deliberate differences are noted where they are made.
//!
//! Records of kind `Hash` (RESP HSET) have no memcached representation: reads treat them as
//! misses, `append`/`prepend` answer NOT_STORED and `incr`/`decr` the non-numeric error.
//! Keyspace-wide operations (`set`, `delete`, `touch`, `flush_all`) act on them as RESP's SET,
//! DEL and EXPIRE do.

mod meta;
mod stats;
mod text;
mod verbs;

#[cfg(test)]
mod tests;

use std::sync::atomic::Ordering::{AcqRel, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64};
use std::sync::Arc;

use memcache::{Error, Parsed, Request};
use store::{Entry, Kind};

use crate::clients::ClientInfo;
use crate::shared::Shared;

/// What `version` answers: a memcached version clients can parse, then ours.
pub const VERSION: &str = concat!("1.6.21-cairn-", env!("CARGO_PKG_VERSION"));

/// Relative expiry times above this many seconds (30 days) are absolute Unix times.
const REALTIME_MAXDELTA: i64 = 60 * 60 * 24 * 30;

/// Once a call has produced this much output, `process` returns so the runtime can flush it;
/// the rest of the input is handled on the next call. It counts this call's output only: output
/// still unsent from earlier calls must never stop the loop, or the connection would sit with
/// complete requests buffered and nothing left to wake it.
const OUT_SOFT_LIMIT: usize = 1 << 20;

macro_rules! counters {
    ($($name:ident),* $(,)?) => {
        /// Per-connection tallies, flushed into [`McStats`] at the end of each `process` call so
        /// that requests do not each touch shared cache lines.
        #[derive(Default, Clone, Copy)]
        pub(crate) struct Counters {
            $(pub $name: u64,)*
        }

        /// memcached `stats` counters, shared by every connection (relaxed atomics).
        #[derive(Default)]
        pub struct McStats {
            $(pub $name: AtomicU64,)*
            /// The pending delayed `flush_all`, if any.
            pub(crate) flush_timer: Arc<FlushTimer>,
            /// `verbosity` level (0 to 2), shown by `stats settings`.
            pub(crate) verbosity: AtomicU32,
            /// The store's write count at the last `stats reset` (`total_items` counts from it).
            pub(crate) total_items_base: AtomicU64,
        }

        impl Counters {
            fn flush_into(&mut self, stats: &McStats) {
                $(
                    if self.$name != 0 {
                        stats.$name.fetch_add(self.$name, Relaxed);
                    }
                )*
                *self = Counters::default();
            }
        }

        impl McStats {
            fn snapshot(&self) -> Counters {
                Counters { $($name: self.$name.load(Relaxed),)* }
            }

            fn reset(&self) {
                $(self.$name.store(0, Relaxed);)*
            }
        }
    };
}

counters!(
    cmd_get,
    cmd_set,
    cmd_flush,
    cmd_touch,
    cmd_meta,
    get_hits,
    get_misses,
    delete_hits,
    delete_misses,
    incr_hits,
    incr_misses,
    decr_hits,
    decr_misses,
    cas_hits,
    cas_misses,
    cas_badval,
    touch_hits,
    touch_misses,
    store_too_large,
    store_no_memory,
);

/// memcached keeps a single flush deadline: a delayed `flush_all` replaces the pending one and
/// an immediate one cancels it. At most one timer thread runs.
#[derive(Default)]
pub(crate) struct FlushTimer {
    /// Unix ms of the pending flush; 0 when none.
    at: AtomicU64,
    running: AtomicBool,
}

impl FlushTimer {
    /// Flushes `store` at `at` (Unix ms), replacing any pending flush.
    pub fn schedule(self: &Arc<Self>, store: &Arc<store::Store>, at: u64) {
        self.at.store(at, Relaxed);
        if self.running.swap(true, AcqRel) {
            return;
        }
        let timer = Arc::clone(self);
        let target = Arc::clone(store);
        let spawned = std::thread::Builder::new()
            .name("mc-flush".into())
            .spawn(move || timer.run(&target));
        if spawned.is_err() {
            // No timer: flush now rather than never.
            self.running.store(false, Release);
            self.cancel();
            store.flush();
        }
    }

    /// Drops the pending flush (an immediate `flush_all` supersedes it).
    pub fn cancel(&self) {
        self.at.store(0, Relaxed);
    }

    fn run(&self, store: &store::Store) {
        loop {
            let at = self.at.load(Relaxed);
            if at == 0 {
                self.running.store(false, Release);
                // A flush scheduled while we were stopping has no thread to run it: take over.
                if self.at.load(Relaxed) != 0 && !self.running.swap(true, AcqRel) {
                    continue;
                }
                return;
            }
            let now = store::now_ms();
            if now >= at {
                if self.at.compare_exchange(at, 0, Relaxed, Relaxed).is_ok() {
                    store.flush();
                }
                continue;
            }
            std::thread::sleep(std::time::Duration::from_millis((at - now).min(100)));
        }
    }
}

/// One connection's memcached state: buffers reused across requests, the bytes still to be
/// swallowed after a refused data block, and the counters not yet published.
#[derive(Default)]
pub struct McState {
    /// Bytes of a refused data block still to discard as they arrive.
    skip: usize,
    /// Decoded base64 (`b` flag) key.
    key_buf: Vec<u8>,
    counters: Counters,
}

/// What one request sees while it runs.
pub(crate) struct Exec<'a> {
    pub shared: &'a Shared,
    pub client: &'a ClientInfo,
    pub c: &'a mut Counters,
    pub key_buf: &'a mut Vec<u8>,
}

impl McState {
    /// Handles every complete request in `input`, appending the replies to `out`.
    /// Returns (bytes consumed, close the connection, requests run).
    pub fn process(
        &mut self,
        shared: &Shared,
        client: &Arc<ClientInfo>,
        input: &[u8],
        out: &mut Vec<u8>,
    ) -> (usize, bool, u64) {
        let mut pos = self.skip.min(input.len());
        self.skip -= pos;
        let max_value = shared.settings.max_value_size.load(Relaxed);
        let mut commands = 0u64;
        let mut close = false;
        let mut last = "";
        let mut ex = Exec {
            shared,
            client,
            c: &mut self.counters,
            key_buf: &mut self.key_buf,
        };
        let base = out.len();
        while pos < input.len() && out.len() - base < OUT_SOFT_LIMIT {
            let rest = &input[pos..];
            match memcache::parse(rest, max_value) {
                Ok(Parsed::Incomplete { .. }) => break,
                Ok(Parsed::Complete(request, used)) => {
                    pos += used;
                    commands += 1;
                    last = command_name(&request);
                    // Counted in commandstats as its command-table entry, as RESP commands are.
                    let entry = verbs::entry(&request);
                    let (started, before) = (std::time::Instant::now(), out.len());
                    let shown = request.clone();
                    let quit = ex.run(request, out);
                    verbs::count(entry, started, &out[before..]);
                    crate::observe::after_memcached(shared, client, entry, &shown, started);
                    if quit {
                        close = true;
                        break;
                    }
                }
                Err(err) => {
                    if let Error::TooLarge { .. } = err {
                        ex.c.store_too_large += 1;
                        ex.drop_refused_set(rest);
                    }
                    let before = out.len();
                    err.write_reply(out);
                    // A request refused unparsed has no entry to count under; as a RESP
                    // unknown command, its error still shows in errorstats.
                    verbs::record_refusal(&out[before..]);
                    let used = err.consumed();
                    if used > rest.len() {
                        self.skip = used - rest.len();
                        pos = input.len();
                    } else {
                        pos += used;
                    }
                    if err.close() {
                        close = true;
                        break;
                    }
                }
            }
        }
        ex.c.flush_into(&shared.stats.memcache);
        if commands > 0 {
            // Once per batch: CLIENT LIST shows the last command run.
            client.set_last_command(last);
        }
        (pos, close, commands)
    }
}

impl Exec<'_> {
    /// The author of this request's writes: this connection, named explicitly to the store so
    /// that a tracking client on the same thread never mistakes the write for its own.
    fn author(&self) -> store::Author {
        store::Author(self.client.id)
    }

    /// Runs one request; returns true when the connection must close (`quit`).
    fn run(&mut self, request: Request<'_>, out: &mut Vec<u8>) -> bool {
        match request {
            Request::Get { keys, with_cas } => self.get(keys, with_cas, out),
            Request::GetAndTouch {
                exptime,
                keys,
                with_cas,
            } => self.gat(exptime, keys, with_cas, out),
            Request::Store {
                kind,
                key,
                flags,
                exptime,
                data,
                cas_unique,
                noreply,
            } => self.store(kind, key, flags, exptime, data, cas_unique, noreply, out),
            Request::Delete { key, noreply } => self.delete(key, noreply, out),
            Request::Incr {
                key,
                delta,
                noreply,
            } => self.arith(key, delta, true, noreply, out),
            Request::Decr {
                key,
                delta,
                noreply,
            } => self.arith(key, delta, false, noreply, out),
            Request::Touch {
                key,
                exptime,
                noreply,
            } => self.touch(key, exptime, noreply, out),
            Request::FlushAll { delay, noreply } => self.flush_all(delay, noreply, out),
            Request::Version => memcache::response::version(out, VERSION),
            Request::Verbosity { level, noreply } => stats::verbosity(self, level, noreply, out),
            Request::CacheMemlimit { megabytes, noreply } => {
                stats::cache_memlimit(self, megabytes, noreply, out)
            }
            Request::Stats { group, args } => {
                // Publish this connection's tallies first so that it sees its own requests.
                self.c.flush_into(&self.shared.stats.memcache);
                stats::stats(self, group, args, out);
            }
            Request::Quit => return true,
            Request::MetaGet { key, flags } => self.mg(key, flags, out),
            Request::MetaSet { key, data, flags } => self.ms(key, data, flags, out),
            Request::MetaDelete { key, flags } => self.md(key, flags, out),
            Request::MetaArithmetic { key, flags } => self.ma(key, flags, out),
            Request::MetaNoop => {
                self.c.cmd_meta += 1;
                out.extend_from_slice(b"MN\r\n");
            }
            Request::MetaDebug { key, flags } => self.me(key, flags, out),
        }
        false
    }

    /// memcached drops the stored value when a `set` (or any `ms`) is refused for its size, so
    /// that a reader does not keep seeing data the client meant to replace.
    fn drop_refused_set(&mut self, request: &[u8]) {
        let line_end = request
            .iter()
            .position(|&b| b == b'\n')
            .unwrap_or(request.len());
        let line = &request[..line_end];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let mut tokens = line.split(|&b| b == b' ').filter(|t| !t.is_empty());
        let (Some(cmd), Some(key)) = (tokens.next(), tokens.next()) else {
            return;
        };
        let key = match cmd {
            b"set" => key,
            b"ms" => {
                // Skip the data length; a `b` flag means the key is base64.
                if tokens.skip(1).any(|t| t == b"b") {
                    if !memcache::decode_base64_key(key, self.key_buf) {
                        return;
                    }
                    &self.key_buf[..]
                } else {
                    key
                }
            }
            _ => return,
        };
        if key.len() <= memcache::MAX_KEY_LEN {
            self.shared.store.write(self.author(), key, |e| e.remove());
        }
    }
}

/// The request's command, for CLIENT LIST.
fn command_name(request: &Request<'_>) -> &'static str {
    match request {
        Request::Get {
            with_cas: false, ..
        } => "get",
        Request::Get { with_cas: true, .. } => "gets",
        Request::GetAndTouch {
            with_cas: false, ..
        } => "gat",
        Request::GetAndTouch { with_cas: true, .. } => "gats",
        Request::Store { kind, .. } => match kind {
            memcache::StoreKind::Set => "set",
            memcache::StoreKind::Add => "add",
            memcache::StoreKind::Replace => "replace",
            memcache::StoreKind::Append => "append",
            memcache::StoreKind::Prepend => "prepend",
            memcache::StoreKind::Cas => "cas",
        },
        Request::Delete { .. } => "delete",
        Request::Incr { .. } => "incr",
        Request::Decr { .. } => "decr",
        Request::Touch { .. } => "touch",
        Request::FlushAll { .. } => "flush_all",
        Request::Version => "version",
        Request::Verbosity { .. } => "verbosity",
        Request::CacheMemlimit { .. } => "cache_memlimit",
        Request::Stats { .. } => "stats",
        Request::Quit => "quit",
        Request::MetaGet { .. } => "mg",
        Request::MetaSet { .. } => "ms",
        Request::MetaDelete { .. } => "md",
        Request::MetaArithmetic { .. } => "ma",
        Request::MetaNoop => "mn",
        Request::MetaDebug { .. } => "me",
    }
}

/// An expiry time as memcached reads it, resolved against `now` (Unix ms).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Expiry {
    Never,
    At(u64),
    /// Negative, or an absolute time in the past: the record is gone at once.
    Expired,
}

impl Expiry {
    /// As [`Expiry::from_exptime`], reading the clock only when the time is not 0.
    pub fn now(exptime: i64) -> Expiry {
        if exptime == 0 {
            Expiry::Never
        } else {
            Expiry::from_exptime(exptime, store::now_ms())
        }
    }

    /// 0 = never; negative = already expired; up to 30 days = relative seconds; beyond that an
    /// absolute Unix time.
    pub fn from_exptime(exptime: i64, now: u64) -> Expiry {
        if exptime == 0 {
            Expiry::Never
        } else if exptime < 0 {
            Expiry::Expired
        } else if exptime <= REALTIME_MAXDELTA {
            Expiry::At(now.saturating_add(exptime as u64 * 1000))
        } else {
            let at = (exptime as u64).saturating_mul(1000);
            if at <= now {
                Expiry::Expired
            } else {
                Expiry::At(at)
            }
        }
    }

    /// The deadline to store: an expired record gets one in the past (and is removed by the
    /// caller right after, so it never takes memory).
    pub fn deadline(self) -> Option<u64> {
        match self {
            Expiry::Never => None,
            Expiry::At(at) => Some(at),
            // 0 means "no deadline" in a record, so use the earliest real instant.
            Expiry::Expired => Some(1),
        }
    }
}

/// Remaining TTL in whole seconds, rounded up, as the meta `t` flag reports it (-1: none).
pub(crate) fn ttl_secs(deadline: Option<u64>, now: u64) -> i64 {
    match deadline {
        None => -1,
        Some(d) => (d.saturating_sub(now).div_ceil(1000)) as i64,
    }
}

/// Changes a record's deadline the way memcached's touch does: the CAS and the meta marks stay
/// (WATCH still sees the change: the store gives the record a new WATCH version).
pub(crate) fn retime(e: &mut Entry<'_>, deadline: Option<u64>) {
    if e.item().is_some_and(|i| i.expire_at() != deadline) {
        e.set_expire_keep_cas(deadline);
    }
}

/// Whether a record can be seen from memcached.
pub(crate) fn is_string(kind: Kind) -> bool {
    kind == Kind::String
}

/// The number stored in a value, read as memcached's `safe_strtoull` does: optional leading
/// white space, an optional sign, digits, then the end or white space. A value that reads as
/// negative is refused.
pub(crate) fn parse_counter(value: &[u8]) -> Option<u64> {
    let is_space = |b: u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c);
    let start = value.iter().position(|&b| !is_space(b))?;
    let mut rest = &value[start..];
    let negative = match rest.first() {
        Some(b'-') => {
            rest = &rest[1..];
            true
        }
        Some(b'+') => {
            rest = &rest[1..];
            false
        }
        _ => false,
    };
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 {
        return None;
    }
    if let Some(&b) = rest.get(digits) {
        if !is_space(b) {
            return None;
        }
    }
    let mut n: u64 = 0;
    for &b in &rest[..digits] {
        n = n.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    if negative {
        // strtoull negates; memcached then refuses anything that reads as a negative number.
        let n = n.wrapping_neg();
        if (n as i64) < 0 {
            return None;
        }
        return Some(n);
    }
    Some(n)
}
