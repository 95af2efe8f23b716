//! memcached front end: the text protocol (`get`, `set`, `incr`, ...) and the meta protocol
//! (`mg`, `ms`, `md`, `ma`, `mn`, `me`) over the shared keyspace.
//!
//! Framing and validation live in the `memcache` crate; this module runs requests against the
//! store and writes the replies. Storage commands go through `crate::keyspace`, so a memcached `set`
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

use std::sync::atomic::Ordering::Relaxed;

use memcache::{Error, Parsed, Request};
use store::{Entry, Kind};

use crate::clients::ClientInfo;
use crate::command::{self, Caller};
use crate::shared::Shared;
use crate::stats::memcache::Counters;

/// What `version` answers: a memcached version clients can parse, then ours.
pub const VERSION: &str = concat!("1.6.21-cairn-", env!("CARGO_PKG_VERSION"));

/// Relative expiry times above this many seconds (30 days) are absolute Unix times.
const REALTIME_MAXDELTA: i64 = 60 * 60 * 24 * 30;

/// Once a call has produced this much output, `process` returns so the runtime can flush it;
/// the rest of the input is handled on the next call. It counts this call's output only: output
/// still unsent from earlier calls must never stop the loop, or the connection would sit with
/// complete requests buffered and nothing left to wake it.
const OUT_SOFT_LIMIT: usize = 1 << 20;

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
    /// Who the request's writes are by: the connection, as the command path names it.
    author: store::Author,
    pub c: &'a mut Counters,
    pub key_buf: &'a mut Vec<u8>,
}

/// One memcached request on the command path (`command::call`): its body runs the request
/// with this front end's executor, which writes memcached replies.
struct McCall<'q, 'r, 'm> {
    request: &'q Request<'r>,
    counters: &'m mut Counters,
    key_buf: &'m mut Vec<u8>,
    /// The request was `quit`: close the connection.
    quit: bool,
}

impl command::Body for McCall<'_, '_, '_> {
    #[inline]
    fn args(&self) -> Option<command::Args<'_>> {
        None
    }

    fn for_each_arg(&self, f: &mut dyn FnMut(&[u8])) {
        verbs::for_each_arg(self.request, f)
    }

    fn for_each_key(&self, _command: &'static command::Command, f: &mut dyn FnMut(&[u8])) {
        // The keys a request writes or reads (a base64 meta key is checked as sent:
        // write-behind prefixes are plain text, so an encoded key is matched after decoding by
        // the tap, and is not read through).
        match self.request {
            Request::Get { keys, .. } => keys.clone().for_each(f),
            Request::MetaGet { key, .. } => f(key),
            Request::Store { key, .. }
            | Request::Delete { key, .. }
            | Request::Incr { key, .. }
            | Request::Decr { key, .. }
            | Request::Touch { key, .. }
            | Request::MetaSet { key, .. }
            | Request::MetaDelete { key, .. }
            | Request::MetaArithmetic { key, .. } => f(key),
            _ => {}
        }
    }

    #[inline]
    fn run<'s>(
        &mut self,
        _command: &'static command::Command,
        db: store::Db<'_, 's>,
        shared: &'s Shared,
        conn: &mut command::Conn,
        out: &mut Vec<u8>,
    ) {
        // The handlers write through `shared.store` as the author the command path chose
        // (memcached requests lock no keys together: `db` is the shared keyspace).
        let mut ex = Exec {
            shared,
            client: &conn.client,
            author: db.author(),
            c: self.counters,
            key_buf: self.key_buf,
        };
        self.quit = ex.run(self.request, out);
    }

    #[inline]
    fn error_in(reply: &[u8]) -> Option<&[u8]> {
        verbs::error_in(reply)
    }

    fn refuse(out: &mut Vec<u8>, msg: &[u8]) {
        // Write-behind's refusals (a full queue, a write-through the database refused) and,
        // were they reached, the client checks' read as memcached's own errors do; Redis's
        // generic `ERR ` code means nothing here.
        out.extend_from_slice(b"SERVER_ERROR ");
        out.extend_from_slice(msg.strip_prefix(b"ERR ").unwrap_or(msg));
        out.extend_from_slice(b"\r\n");
    }
}

impl McState {
    /// Handles every complete request in `input`, appending the replies to `out`: each runs
    /// through `command::call` as the command-table entry its verb maps onto (`verbs`).
    /// Returns (bytes consumed, close the connection, requests run).
    pub fn process(
        &mut self,
        shared: &Shared,
        conn: &mut command::Conn,
        input: &[u8],
        out: &mut Vec<u8>,
    ) -> (usize, bool, u64) {
        let mut pos = self.skip.min(input.len());
        self.skip -= pos;
        let max_value = shared.settings.max_value_size.load(Relaxed);
        let mut commands = 0u64;
        let mut close = false;
        let base = out.len();
        while pos < input.len() && out.len() - base < OUT_SOFT_LIMIT {
            let rest = &input[pos..];
            match memcache::parse(rest, max_value) {
                Ok(Parsed::Incomplete { .. }) => break,
                Ok(Parsed::Complete(request, used)) => {
                    pos += used;
                    commands += 1;
                    let entry = verbs::entry(&request);
                    let mut body = McCall {
                        request: &request,
                        counters: &mut self.counters,
                        key_buf: &mut self.key_buf,
                        quit: false,
                    };
                    command::call(shared, conn, out, entry, &mut body, Caller::Client);
                    if body.quit {
                        close = true;
                        break;
                    }
                    // The reply waits (write-behind's `wb-fsync always`, or a read-through
                    // load): no more until then.
                    if conn.waiting {
                        if std::mem::take(&mut conn.retry) {
                            // Read-through: the request runs again when its loads are over.
                            pos -= used;
                            commands -= 1;
                        }
                        break;
                    }
                }
                Err(err) => {
                    if let Error::TooLarge { .. } = err {
                        let mut ex = Exec {
                            shared,
                            client: &conn.client,
                            author: conn.author(),
                            c: &mut self.counters,
                            key_buf: &mut self.key_buf,
                        };
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
        self.counters.flush_into(&shared.stats.memcache);
        (pos, close, commands)
    }
}

impl Exec<'_> {
    /// The author of this request's writes, named explicitly to the store so that a tracking
    /// client on the same thread never mistakes the write for its own.
    fn author(&self) -> store::Author {
        self.author
    }

    /// Runs one request; returns true when the connection must close (`quit`).
    fn run(&mut self, request: &Request<'_>, out: &mut Vec<u8>) -> bool {
        match *request {
            Request::Get { ref keys, with_cas } => self.get(keys.clone(), with_cas, out),
            Request::GetAndTouch {
                exptime,
                ref keys,
                with_cas,
            } => self.gat(exptime, keys.clone(), with_cas, out),
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
            Request::Stats { group, ref args } => {
                // Publish this connection's tallies first so that it sees its own requests.
                self.c.flush_into(&self.shared.stats.memcache);
                stats::stats(self, group, args.clone(), out);
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
