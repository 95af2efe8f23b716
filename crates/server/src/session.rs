//! One connection's protocol state: frames requests out of input bytes, runs them through the
//! command table and appends the replies. The network runtime owns the bytes and the socket.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use crate::clients::ClientInfo;
use crate::command::{self, flags, Args, Conn, OwnedArgs};
use crate::memcached::McState;
use crate::shared::Shared;

/// Output size after which `process` returns early so that the runtime can flush it.
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
        while consumed < input.len() {
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
                    if out.len() >= OUTPUT_BATCH {
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
        let Some(command) = command::lookup(args.get(0)) else {
            let msg = command::unknown_command_error(&args);
            return self.reject(out, &msg);
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

impl Drop for Session {
    fn drop(&mut self) {
        self.conn.release(&self.shared);
    }
}
