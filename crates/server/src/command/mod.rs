//! The command table (name, arity, flags, key positions, handler) and what a handler sees.
//!
//! RESP requests are looked up here by name; memcached requests are mapped onto entries of the
//! same table by `crate::memcached`, so both protocols run the same handlers' logic
//! (`crate::keyspace`) on the same keyspace, and both go through the same command path (`call`).
//! Handlers append their reply to the connection's output buffer and never touch sockets.

mod args;
mod blocking_cmd;
mod call;
mod client_cmd;
mod client_info;
pub(crate) mod collections;
mod encoding;
mod hash_ttl;
mod hashes;
mod info;
mod introspect;
mod keys;
pub(crate) mod lists;
mod memory_cmd;
mod mpop;
mod object;
mod observe_cmd;
pub(crate) mod observe_hook;
pub mod persist_cmd;
mod pubsub;
mod read_through;
mod replication_cmd;
mod reset;
mod scripting;
mod server;
mod sets;
mod spec;
mod spec_table;
mod sql;
mod strings;
mod table;
mod tags;
mod tags_del;
mod timing;
mod tracking_cmd;
pub mod txn;
mod wb;
mod zrange;
mod zsets;

use std::sync::Arc;

use resp::reply::{self, Version};
use store::Db;

pub use args::{Args, OwnedArgs};
pub use call::{call, dispatch, Body, Caller, Resp};
pub use persist_cmd::shutdown_save;
pub use table::{by_slot, lookup, memcached_only_entry, Command, COMMANDS};
pub use timing::init as init_clock;

use crate::clients::ClientInfo;
use crate::shared::Shared;
use crate::stats;

/// Flags of a command-table entry.
pub mod flags {
    pub const WRITE: u16 = 1;
    pub const READONLY: u16 = 1 << 1;
    pub const FAST: u16 = 1 << 2;
    pub const ADMIN: u16 = 1 << 3;
    /// Allowed before AUTH.
    pub const NOAUTH: u16 = 1 << 4;
    /// Runs immediately even inside MULTI (MULTI, EXEC, DISCARD, WATCH...).
    pub const NOQUEUE: u16 = 1 << 5;
    /// Sees the whole keyspace (KEYS, SCAN, FLUSHALL...).
    pub const KEYSPACE: u16 = 1 << 6;
    /// Not allowed inside MULTI (WATCH).
    pub const NOMULTI: u16 = 1 << 7;
    /// Allowed while a RESP2 connection is subscribed to channels.
    pub const PUBSUB: u16 = 1 << 8;
    /// Replies later from another thread (SQL): cannot be queued by MULTI.
    pub const DEFERRED: u16 = 1 << 9;
    /// Its keys are found by its key specs from the arguments (a key count: SINTERCARD,
    /// ZUNIONSTORE...), not by the table's fixed positions (Redis's `movablekeys`).
    pub const MOVABLE: u16 = 1 << 10;
    /// Runs a Lua script (EVAL...): it makes itself atomic (`crate::scripts`), so the
    /// command path neither locks its keys nor gates it, and no script may run it.
    pub const SCRIPTING: u16 = 1 << 11;
    /// Runs while a script is busy (Redis's `allow-busy`): it never waits on a script.
    pub const ALLOW_BUSY: u16 = 1 << 12;
    /// Internal: only the replication link runs it (`Caller::Replication`); a client gets
    /// "unknown command".
    pub const INTERNAL: u16 = 1 << 13;
}

pub const WRONGTYPE: &[u8] = crate::blocking::Fail::WrongType.message();
pub const NOT_INTEGER: &[u8] = b"ERR value is not an integer or out of range";
pub const NOT_FLOAT: &[u8] = b"ERR value is not a valid float";
pub const SYNTAX: &[u8] = b"ERR syntax error";
pub const OOM: &[u8] = crate::blocking::Fail::Oom.message();

/// Per-connection state that commands read and change.
pub struct Conn {
    pub version: Version,
    pub authenticated: bool,
    pub client: Arc<ClientInfo>,
    /// Close the connection after this reply (QUIT).
    pub close: bool,
    /// Commands queued since MULTI; None outside a transaction.
    pub multi: Option<Vec<OwnedArgs>>,
    /// A command failed to queue: EXEC must abort.
    pub multi_dirty: bool,
    /// Keys under WATCH with the CAS they had (None: absent).
    pub watched: Vec<(Vec<u8>, Option<u64>)>,
    /// Subscribed channels and patterns.
    pub channels: Vec<Vec<u8>>,
    pub patterns: Vec<Vec<u8>>,
    /// CLIENT TRACKING state, when on.
    pub tracking: Option<tracking_cmd::TrackingState>,
    /// The command handed its work to another thread, which will post the reply
    /// (`ClientInfo::post` with `resume`); the session stops until then.
    pub waiting: bool,
    /// Read-through: the request just dispatched waits for loads and must run again when
    /// the reply's resume comes, so the session keeps it unconsumed.
    pub retry: bool,
    /// The loads the kept request waits for (their outcome, for its second run).
    pub loaded: Option<Arc<read_through::Wait>>,
    /// CLIENT REPLY OFF: no replies until CLIENT REPLY ON.
    pub reply_off: bool,
    /// CLIENT REPLY SKIP: the reply of the command now running is dropped...
    pub reply_skip: bool,
    /// ...and so is the next command's (the session moves this into `reply_skip`).
    pub reply_skip_next: bool,
    /// The last command the client ran (CLIENT LIST `cmd=`), published by `publish_state`
    /// once per batch rather than per command.
    pub last_command: &'static str,
    published_command: &'static str,
    /// MONITOR mode: receives every command run; may not touch the keyspace.
    pub monitor: bool,
    /// EXEC is running the queue: blocking commands do not block (as in Redis).
    pub in_exec: bool,
    /// A REPLICAOF queued in MULTI (Redis Sentinel's failover sends `MULTI, SLAVEOF, CONFIG
    /// REWRITE, CLIENT KILL, EXEC`): the role changes once EXEC has released the keyspace it
    /// holds, since a promotion takes every shard's lock itself.
    pub role_after_exec: Option<replication_cmd::RoleChange>,
}

impl Conn {
    pub fn new(client: Arc<ClientInfo>, authenticated: bool) -> Conn {
        Conn {
            version: Version::Resp2,
            authenticated,
            client,
            close: false,
            multi: None,
            multi_dirty: false,
            watched: Vec::new(),
            channels: Vec::new(),
            patterns: Vec::new(),
            tracking: None,
            waiting: false,
            retry: false,
            loaded: None,
            reply_off: false,
            reply_skip: false,
            reply_skip_next: false,
            last_command: "",
            published_command: "",
            monitor: false,
            in_exec: false,
            role_after_exec: None,
        }
    }

    /// The author of this connection's writes, as the store's change notifications name it.
    #[inline]
    pub fn author(&self) -> store::Author {
        store::Author(self.client.id)
    }

    /// Whether the running command's reply is dropped (CLIENT REPLY OFF or SKIP).
    #[inline]
    pub fn replies_muted(&self) -> bool {
        self.reply_off || self.reply_skip
    }

    /// Whether the client must still AUTH: it has not, and a password is set. Clearing
    /// `requirepass` lets waiting connections through (as Redis's default user becomes nopass).
    pub fn auth_pending(&self, settings: &crate::shared::Settings) -> bool {
        !self.authenticated && settings.auth_required()
    }

    /// Whether a RESP2 connection is in subscribed mode (only pub/sub commands allowed).
    pub fn subscribed_resp2(&self) -> bool {
        self.version == Version::Resp2 && !(self.channels.is_empty() && self.patterns.is_empty())
    }

    /// Publishes the last command (CLIENT LIST `cmd=`) if it changed since it was last published.
    pub fn publish_last_command(&mut self) {
        if !std::ptr::eq(self.last_command, self.published_command) {
            self.client.set_last_command(self.last_command);
            self.published_command = self.last_command;
        }
    }

    /// Publishes what CLIENT LIST and INFO show of this connection's state (read by other
    /// threads): after each batch of commands, and before the client lists itself.
    pub fn publish_state(&mut self) {
        use crate::clients::client_flags::*;
        use std::sync::atomic::Ordering::Relaxed;
        self.publish_last_command();
        let st = &self.client.state;
        // Set elsewhere: CLIENT NO-EVICT / NO-TOUCH, BLOCKED around deferred commands, the
        // replication roles (PSYNC, the replica link).
        let kept = NO_EVICT | NO_TOUCH | BLOCKED | MONITOR | REPLICA | MASTER;
        let mut flags = st.flags.load(Relaxed) & kept;
        let subscribed = !(self.channels.is_empty() && self.patterns.is_empty());
        for (on, bit) in [
            (subscribed, PUBSUB),
            (self.multi.is_some(), MULTI),
            (self.tracking.is_some(), TRACKING),
            (self.tracking.as_ref().is_some_and(|t| t.bcast), BCAST),
            (self.close, CLOSE_AFTER_REPLY),
        ] {
            if on {
                flags |= bit;
            }
        }
        st.flags.store(flags, Relaxed);
        st.sub.store(self.channels.len() as u32, Relaxed);
        st.psub.store(self.patterns.len() as u32, Relaxed);
        st.multi
            .store(self.multi.as_ref().map_or(-1, |q| q.len() as i64), Relaxed);
        if self.multi.is_none() {
            st.multi_mem.store(0, Relaxed);
        }
        st.watch.store(self.watched.len() as u32, Relaxed);
        st.redir.store(
            self.tracking.as_ref().map_or(-1, |t| t.redirect as i64),
            Relaxed,
        );
    }

    /// Drops what the connection registered elsewhere: subscriptions and tracking.
    pub fn release(&mut self, shared: &Shared) {
        for channel in self.channels.drain(..) {
            shared.pubsub.unsubscribe(&channel, self.client.id);
        }
        for pattern in self.patterns.drain(..) {
            shared.pubsub.punsubscribe(&pattern, self.client.id);
        }
        self.client
            .subscriptions
            .store(0, std::sync::atomic::Ordering::Relaxed);
        if let Some(state) = self.tracking.take() {
            shared.tracking.disable(&state.tracker);
        }
        if self.monitor {
            shared.observe.monitors.remove(self.client.id);
        }
    }
}

/// Everything a handler needs for one command.
pub struct Ctx<'a, 's> {
    pub args: Args<'a>,
    pub db: Db<'a, 's>,
    pub out: &'a mut Vec<u8>,
    pub shared: &'s Shared,
    pub conn: &'a mut Conn,
}

pub type Handler = fn(&mut Ctx<'_, '_>);

impl<'a> Ctx<'a, '_> {
    pub fn arg(&self, i: usize) -> &'a [u8] {
        self.args.get(i)
    }
    pub fn argc(&self) -> usize {
        self.args.len()
    }
    pub fn version(&self) -> Version {
        self.conn.version
    }
    pub fn ok(&mut self) {
        reply::ok(self.out)
    }
    pub fn simple(&mut self, s: &[u8]) {
        reply::simple(self.out, s)
    }
    pub fn err(&mut self, msg: &[u8]) {
        reply::error(self.out, msg)
    }
    pub fn int(&mut self, n: i64) {
        reply::integer(self.out, n)
    }
    pub fn bulk(&mut self, data: &[u8]) {
        reply::bulk(self.out, data)
    }
    pub fn nil(&mut self) {
        reply::null(self.out, self.conn.version)
    }
    pub fn nil_array(&mut self) {
        reply::null_array(self.out, self.conn.version)
    }
    pub fn array(&mut self, n: usize) {
        reply::array_len(self.out, n)
    }
    pub fn map(&mut self, pairs: usize) {
        reply::map_len(self.out, pairs, self.conn.version)
    }
    pub fn set(&mut self, n: usize) {
        reply::set_len(self.out, n, self.conn.version)
    }
    pub fn double(&mut self, d: f64) {
        reply::double(self.out, d, self.conn.version)
    }
    pub fn bulk_opt(&mut self, data: Option<&[u8]>) {
        match data {
            Some(d) => self.bulk(d),
            None => self.nil(),
        }
    }
    /// Redis's HELP reply of a container command (`addReplyHelp`): `<COMMAND> <subcommand>
    /// ...` then `lines`, then HELP's own two lines.
    pub fn help(&mut self, command: &str, lines: &[&str]) {
        self.array(lines.len() + 3);
        let head = format!("{command} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:");
        self.simple(head.as_bytes());
        for line in lines {
            self.simple(line.as_bytes());
        }
        self.simple(b"HELP");
        self.simple(b"    Prints this help.");
    }

    /// Redis's reply to a subcommand `command` does not know (argument 1).
    pub fn unknown_subcommand(&mut self, command: &str) {
        let sub = String::from_utf8_lossy(self.arg(1)).into_owned();
        self.err(format!("ERR unknown subcommand '{sub}'. Try {command} HELP.").as_bytes())
    }

    /// Redis's reply to a known subcommand (argument 1) with the wrong number of arguments.
    pub fn wrong_subcommand_arity(&mut self, command: &str) {
        let sub = lower(self.arg(1));
        self.err(format!("ERR wrong number of arguments for '{command}|{sub}' command").as_bytes())
    }

    /// Replies with an i64 argument parse error, returning the value otherwise.
    pub fn int_arg(&mut self, i: usize) -> Option<i64> {
        let parsed = parse_i64(self.args.get(i));
        if parsed.is_none() {
            self.err(NOT_INTEGER);
        }
        parsed
    }
}

/// Parses a decimal i64 the way Redis's string2ll does: optional '-', no '+', no spaces,
/// no leading zeros.
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, s),
    };
    if digits.is_empty() || digits.len() > 19 || (digits[0] == b'0' && (digits.len() > 1 || neg)) {
        return None;
    }
    let mut v: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v * 10 + (c - b'0') as u64;
    }
    if neg {
        if v > i64::MAX as u64 + 1 {
            None
        } else {
            Some((v as i64).wrapping_neg())
        }
    } else {
        i64::try_from(v).ok()
    }
}

/// Parses a float the way Redis's string2ld (`strtold`) does for INCRBYFLOAT: no spaces, not
/// NaN, shorter than 5 KiB, decimal or C99 hexadecimal (`0x1.8p3`). (strtold reads long doubles,
/// whose range is wider than f64's: `1e400` is a number there and infinite here.)
pub fn parse_f64(s: &[u8]) -> Option<f64> {
    if s.is_empty()
        || s.len() >= 5 * 1024
        || s[0].is_ascii_whitespace()
        || s[s.len() - 1].is_ascii_whitespace()
    {
        return None;
    }
    let text = std::str::from_utf8(s).ok()?;
    let lower = text.to_ascii_lowercase();
    if lower.contains("nan") {
        return None;
    }
    let v: f64 = match lower.as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        _ if lower.trim_start_matches(['+', '-']).starts_with("0x") => parse_hex_f64(&lower)?,
        _ => text.parse().ok()?,
    };
    // strtold's ERANGE: a finite text too large for the type is refused, not made infinite.
    if v.is_infinite() && !lower.contains("inf") {
        return None;
    }
    Some(v)
}

/// strtold's hexadecimal form, lowercased: `[+-]0x<hex>[.<hex>][p[+-]<decimal>]`.
fn parse_hex_f64(text: &str) -> Option<f64> {
    let (neg, rest) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let rest = rest.strip_prefix("0x")?;
    let (digits, exponent) = match rest.split_once('p') {
        Some((d, e)) => (d, Some(e)),
        None => (rest, None),
    };
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    // 60 significant bits, then a sticky bit for what does not fit, round once in `as f64`.
    let (mut mantissa, mut shift, mut sticky) = (0u64, 0i64, false);
    for (c, is_frac) in int
        .chars()
        .map(|c| (c, false))
        .chain(frac.chars().map(|c| (c, true)))
    {
        let d = u64::from(c.to_digit(16)?);
        if mantissa >> 56 == 0 {
            mantissa = mantissa << 4 | d;
            shift -= if is_frac { 4 } else { 0 };
        } else {
            sticky |= d != 0;
            shift += if is_frac { 0 } else { 4 };
        }
    }
    if sticky {
        mantissa |= 1;
    }
    if let Some(e) = exponent {
        let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        // Beyond a few thousand the value is 0 or infinite anyway.
        let digits = digits.trim_start_matches('0');
        let magnitude: i64 = if digits.len() > 6 {
            1_000_000
        } else {
            digits.parse().unwrap_or(0)
        };
        shift += if e.starts_with('-') {
            -magnitude
        } else {
            magnitude
        };
    }
    let shift = shift.clamp(-4000, 4000) as i32;
    // Two steps so that neither factor overflows or underflows on its own.
    let v = mantissa as f64 * 2f64.powi(shift / 2) * 2f64.powi(shift - shift / 2);
    Some(if neg { -v } else { v })
}

/// An argument as Redis's `%s` shows it inside an error message: up to its first NUL byte.
pub fn c_str(arg: &[u8]) -> &[u8] {
    arg.split(|&b| b == 0).next().unwrap_or_default()
}

/// Redis's reply to an unknown command: the name (128 bytes at most) and the first arguments,
/// quoted, until 128 bytes of them are shown (`commandCheckExistence`).
pub fn unknown_command_error(args: &Args<'_>) -> Vec<u8> {
    let name = c_str(args.get(0));
    let mut msg = b"ERR unknown command '".to_vec();
    msg.extend_from_slice(&name[..name.len().min(128)]);
    msg.extend_from_slice(b"', with args beginning with: ");
    let mut shown = 0;
    for arg in args.tail(1) {
        if shown >= 128 {
            break;
        }
        let arg = c_str(arg);
        let arg = &arg[..arg.len().min(128 - shown)];
        msg.push(b'\'');
        msg.extend_from_slice(arg);
        msg.extend_from_slice(b"' ");
        shown += arg.len() + 3;
    }
    msg
}

/// Lowercase name of a command for messages and stats.
pub fn lower(name: &[u8]) -> String {
    String::from_utf8_lossy(name).to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_parse_like_redis() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-12"), Some(-12));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"+1",
            b" 1",
            b"1 ",
            b"01",
            b"-0",
            b"9223372036854775808",
            b"1e3",
            b"-",
        ] {
            assert_eq!(parse_i64(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn floats_parse_like_redis() {
        assert_eq!(parse_f64(b"10.5"), Some(10.5));
        assert_eq!(parse_f64(b"5.0e3"), Some(5000.0));
        assert_eq!(parse_f64(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64(b" 1"), None);
        assert_eq!(parse_f64(b"nan"), None);
        assert_eq!(parse_f64(b"abc"), None);
        // strtold's hexadecimal floats, as INCRBYFLOAT accepts them in Redis.
        assert_eq!(parse_f64(b"0x10"), Some(16.0));
        assert_eq!(parse_f64(b"-0X1.8p1"), Some(-3.0));
        assert_eq!(parse_f64(b"0x.8"), Some(0.5));
        assert_eq!(parse_f64(b"+0x1p-2"), Some(0.25));
        assert_eq!(parse_f64(b"0x1fffffffffffffp0"), Some(9007199254740991.0));
        for bad in [
            &b"0x"[..],
            b"0xg",
            b"0x1p",
            b"0x1p+",
            b"0x-1",
            b"0x1.8q",
            b"0x1 ",
        ] {
            assert_eq!(parse_f64(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
        assert_eq!(parse_f64(b"1e5000"), None);
        assert_eq!(parse_f64(b"-0x1p99999"), None);
        assert_eq!(parse_f64(&[b'1'; 5119]), None);
        assert_eq!(parse_f64(&[b'1'; 5120]), None);
    }
}
