//! One connection's protocol state: frames requests out of input bytes, runs them through the
//! command table and appends the replies. The network runtime owns the bytes and the socket.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use crate::clients::ClientInfo;
use crate::command::{self, flags, Args, Conn, OwnedArgs};
use crate::memcached::McState;
use crate::shared::Shared;

/// Output produced by one `process` call after which it returns early so that the runtime can
/// flush it.
pub const OUTPUT_BATCH: usize = 1024 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Resp,
    Memcache,
}

/// What `Session::process` did with the input it was given.
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    /// Bytes of input fully handled; the caller drops them from its buffer.
    pub consumed: usize,
    /// Close the connection once `out` has been flushed (QUIT, protocol error).
    pub close: bool,
    /// A command's reply will come later from another thread (`ClientInfo::post` with
    /// `resume`): do not call `process` again until then, so replies stay in order.
    pub waiting: bool,
}

pub struct Session {
    protocol: Protocol,
    shared: Arc<Shared>,
    conn: Conn,
    limits: resp::request::Limits,
    ranges: Vec<std::ops::Range<usize>>,
    scratch: Vec<u8>,
    memcache: McState,
}

impl Session {
    pub fn new(protocol: Protocol, shared: Arc<Shared>, client: Arc<ClientInfo>) -> Session {
        let authenticated = !shared.settings.auth_required();
        let limits = resp::request::Limits::default();
        Session {
            protocol,
            shared,
            conn: Conn::new(client, authenticated),
            limits,
            ranges: Vec::new(),
            scratch: Vec::new(),
            memcache: McState::default(),
        }
    }

    /// Handles every complete request at the start of `input`, appending each reply to `out`.
    /// Incomplete trailing bytes are left unconsumed for the next call.
    pub fn process(&mut self, input: &[u8], out: &mut Vec<u8>) -> Progress {
        match self.protocol {
            Protocol::Resp => self.process_resp(input, out),
            Protocol::Memcache => {
                let (consumed, close, commands) =
                    self.memcache
                        .process(&self.shared, &self.conn.client, input, out);
                self.count(commands);
                Progress {
                    consumed,
                    close,
                    waiting: false,
                }
            }
        }
    }

    fn count(&self, commands: u64) {
        if commands > 0 {
            self.shared
                .stats
                .total_commands_processed
                .fetch_add(commands, Relaxed);
        }
    }

    fn process_resp(&mut self, input: &[u8], out: &mut Vec<u8>) -> Progress {
        // An argument past --max-value-size is refused at its header, before its bytes are
        // buffered (CONFIG SET may change the limit at any time).
        self.limits.max_bulk_len = self.shared.settings.max_value_size.load(Relaxed);
        let mut consumed = 0;
        let mut commands = 0;
        let mut ranges = std::mem::take(&mut self.ranges);
        let mut scratch = std::mem::take(&mut self.scratch);
        let mut close = false;
        let base = out.len();
        while consumed < input.len() {
            // Checked per request: an AUTH earlier in the same batch lifts the limits.
            self.limits.unauthenticated =
                !self.conn.authenticated && self.shared.settings.auth_required();
            let rest = &input[consumed..];
            match resp::request::parse_request(rest, &self.limits, &mut ranges, &mut scratch) {
                Err(err) => {
                    err.write_reply(out);
                    consumed = input.len();
                    close = true;
                    break;
                }
                Ok((resp::request::Parsed::Incomplete { .. }, _)) => break,
                Ok((resp::request::Parsed::Complete(n), source)) => {
                    consumed += n;
                    if ranges.is_empty() {
                        continue;
                    }
                    let buf = match source {
                        resp::request::ArgSource::Buffer => rest,
                        resp::request::ArgSource::Scratch => &scratch[..],
                    };
                    commands += 1;
                    self.dispatch(Args::new(buf, &ranges), out);
                    if self.conn.close {
                        close = true;
                        break;
                    }
                    if self.conn.waiting {
                        break;
                    }
                    // Let the runtime write (and apply the output limit) before producing more.
                    if out.len() - base >= OUTPUT_BATCH {
                        break;
                    }
                }
            }
        }
        self.ranges = ranges;
        self.scratch = scratch;
        self.count(commands);
        let waiting = std::mem::take(&mut self.conn.waiting);
        Progress {
            consumed,
            close,
            waiting,
        }
    }

    fn dispatch(&mut self, args: Args<'_>, out: &mut Vec<u8>) {
        if is_http_attack(args.get(0)) {
            security_warning(&self.conn.client.addr);
            self.conn.close = true;
            return;
        }
        let Some(command) = command::lookup(args.get(0)) else {
            let mut msg = format!(
                "ERR unknown command '{}', with args beginning with: ",
                String::from_utf8_lossy(args.get(0))
            );
            for arg in args.tail(1) {
                msg.push_str(&format!(
                    "'{}' ",
                    String::from_utf8_lossy(&arg[..arg.len().min(128)])
                ));
            }
            return self.reject(out, msg.as_bytes());
        };
        if !command.arity_ok(args.len()) {
            let msg = format!(
                "ERR wrong number of arguments for '{}' command",
                command.name
            );
            return self.reject(out, msg.as_bytes());
        }
        if !self.conn.authenticated && !command.has(flags::NOAUTH) {
            return self.reject(out, b"NOAUTH Authentication required.");
        }
        if self.conn.subscribed_resp2() && !command.has(flags::PUBSUB) {
            let msg = format!(
                "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
                command.name
            );
            return self.reject(out, msg.as_bytes());
        }
        self.conn.client.set_last_command(command.name);
        if let Some(queue) = self.conn.multi.as_mut() {
            if command.has(flags::DEFERRED) {
                let msg = format!("ERR '{}' cannot run inside MULTI", command.name);
                return self.reject(out, msg.as_bytes());
            }
            if !command.has(flags::NOQUEUE) {
                queue.push(OwnedArgs::copy(&args));
                return resp::reply::simple(out, b"QUEUED");
            }
        }
        command::execute(command, args, &self.shared, &mut self.conn, out);
    }

    /// Replies with an error for a command that could not run; inside MULTI this also dooms
    /// the transaction, as in Redis.
    fn reject(&mut self, out: &mut Vec<u8>, msg: &[u8]) {
        if self.conn.multi.is_some() {
            self.conn.multi_dirty = true;
        }
        resp::reply::error(out, msg)
    }
}

/// `POST` and `Host:` are how an HTTP request starts: a web page made the browser send one to
/// the cache (cross-protocol scripting). Redis closes such connections without running
/// anything more; so do we.
fn is_http_attack(name: &[u8]) -> bool {
    name.eq_ignore_ascii_case(b"post") || name.eq_ignore_ascii_case(b"host:")
}

/// Logs Redis's warning, at most once a minute.
fn security_warning(addr: &str) {
    static LAST: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let now = crate::clients::now_ms().max(1);
    let last = LAST.load(Relaxed);
    let due = last == 0 || now.saturating_sub(last) >= 60_000;
    if due && LAST.compare_exchange(last, now, Relaxed, Relaxed).is_ok() {
        tracing::warn!(
            client = addr,
            "Possible SECURITY ATTACK detected. It looks like somebody is sending POST or Host: \
             commands to Redis. This is likely due to an attacker attempting to use Cross \
             Protocol Scripting to compromise your Redis instance. Connection aborted."
        );
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.conn.release(&self.shared);
    }
}
