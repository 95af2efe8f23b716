//! One connection's protocol state: frames requests out of input bytes, runs them through the
//! command table and appends the replies. The network runtime owns the bytes and the socket.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use crate::clients::ClientInfo;
use crate::command::{self, Args, Conn};
use crate::memcached::McState;
use crate::protocol::Protocol;
use crate::shared::Shared;

/// Output produced by one `process` call after which it returns early so that the runtime can
/// flush it.
pub const OUTPUT_BATCH: usize = 1024 * 1024;

/// Argument ranges kept for the next request; a bigger index (one per argument of a huge
/// request) is freed once its request is done.
const RANGES_KEEP: usize = 4096;

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
    /// Where a partial request's parse stopped (`ranges` then holds its first arguments).
    resume: resp::request::Resume,
    ranges: Vec<std::ops::Range<usize>>,
    scratch: Vec<u8>,
    memcache: McState,
    /// What the client's `mute_deferred` flag was last set to (CLIENT REPLY).
    deferred_muted: bool,
}

impl Session {
    pub fn new(protocol: Protocol, shared: Arc<Shared>, client: Arc<ClientInfo>) -> Session {
        // The memcached protocol has no AUTH: its port is trusted as a whole (README, --requirepass).
        let authenticated = protocol == Protocol::Memcache || !shared.settings.auth_required();
        let limits = resp::request::Limits::default();
        // CLIENT LIST `tot-mem` counts the session; the registry cannot name its type.
        crate::clients::set_session_mem(std::mem::size_of::<Session>());
        Session {
            protocol,
            shared,
            conn: Conn::new(client, authenticated),
            limits,
            resume: resp::request::Resume::default(),
            ranges: Vec::new(),
            scratch: Vec::new(),
            memcache: McState::default(),
            deferred_muted: false,
        }
    }

    /// Handles every complete request at the start of `input`, appending each reply to `out`.
    /// Incomplete trailing bytes are left unconsumed for the next call.
    pub fn process(&mut self, input: &[u8], out: &mut Vec<u8>) -> Progress {
        // BCAST invalidations of this whole batch go out together, once per client and prefix.
        let _batch = crate::tracking::batch();
        // Write-behind: the batch's log records are written once, before its replies go (no
        // mapping: nothing to batch; one added mid-batch writes per command until the next).
        let log_batch = self.shared.writeback.active().then(writeback::log_batch);
        let base = out.len();
        let mut progress = match self.protocol {
            Protocol::Resp => self.process_resp(input, out),
            Protocol::Memcache => {
                let (consumed, close, commands) =
                    self.memcache
                        .process(&self.shared, &mut self.conn, input, out);
                self.count(commands);
                if commands > 0 {
                    self.conn.publish_state();
                }
                Progress {
                    consumed,
                    close,
                    // A reply deferred by write-behind's `wb-fsync always`.
                    waiting: std::mem::take(&mut self.conn.waiting),
                }
            }
        };
        if let Some(fsync) = log_batch.and_then(writeback::LogBatch::finish) {
            self.after_fsync(fsync, out, base, &mut progress);
        }
        progress
    }

    /// `wb-fsync always`: the batch's replies (`out` from `base` on) go once its log records
    /// are on disk, one fsync for the whole batch on the write-behind fsync thread, while
    /// this thread serves other connections. Behind a reply already deferred (write-through),
    /// before a close, or with replies muted (CLIENT REPLY), the fsync is made here instead,
    /// so that the replies keep their order and none is dropped.
    fn after_fsync(
        &mut self,
        fsync: writeback::Wait,
        out: &mut Vec<u8>,
        base: usize,
        progress: &mut Progress,
    ) {
        if progress.waiting || progress.close || self.deferred_muted {
            return fsync.wait();
        }
        let replies = out.split_off(base);
        progress.waiting = true;
        let client = Arc::downgrade(&self.conn.client);
        fsync.then(move |_| {
            if let Some(client) = client.upgrade() {
                client.post(&replies, true);
            }
        });
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
        // Each argument costs an index entry besides its bytes: a request may not announce
        // more arguments than the query buffer limit has room for entries (so the index
        // stays within the limit too).
        let query_limit = self.shared.settings.client_query_buffer_limit.load(Relaxed);
        self.limits.max_multibulk_len = (query_limit
            / std::mem::size_of::<std::ops::Range<usize>>())
        .min(resp::request::Limits::default().max_multibulk_len);
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
            match resp::request::parse_request_resumable(
                rest,
                &self.limits,
                &mut ranges,
                &mut scratch,
                &mut self.resume,
            ) {
                Err(err) => {
                    crate::stats::record_error(err.0.as_bytes());
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
                    self.dispatch_muted(Args::new(buf, &ranges), out);
                    if self.conn.close {
                        close = true;
                        break;
                    }
                    if self.conn.waiting {
                        if std::mem::take(&mut self.conn.retry) {
                            // Read-through: the request runs again when its loads are over.
                            consumed -= n;
                            commands -= 1;
                        }
                        break;
                    }
                    // Let the runtime write (and apply the output limit) before producing more.
                    if out.len() - base >= OUTPUT_BATCH {
                        break;
                    }
                }
            }
        }
        if ranges.capacity() > RANGES_KEEP && !self.resume.is_active() {
            // A request of millions of arguments is done: don't keep its index.
            ranges = Vec::new();
        }
        self.ranges = ranges;
        self.scratch = scratch;
        self.count(commands);
        if commands > 0 {
            self.conn.publish_state();
        }
        let waiting = std::mem::take(&mut self.conn.waiting);
        Progress {
            consumed,
            close,
            waiting,
        }
    }

    /// Runs one command, then applies CLIENT REPLY OFF/SKIP: a muted command's output is dropped
    /// (a deferred reply through `ClientInfo::post`), except the subscription confirmations,
    /// which Redis 7.2+ sends as pushes regardless.
    fn dispatch_muted(&mut self, args: Args<'_>, out: &mut Vec<u8>) {
        let muted = self.conn.replies_muted();
        if muted || self.deferred_muted {
            self.conn.client.set_mute_deferred(muted);
            self.deferred_muted = muted;
        }
        let start = out.len();
        self.dispatch(args, out);
        if self.conn.replies_muted() && !is_subscription(args.get(0)) {
            out.truncate(start);
        }
        self.conn.reply_skip = std::mem::take(&mut self.conn.reply_skip_next);
    }

    /// Frames end here: the command path (`command::dispatch`) does the rest.
    fn dispatch(&mut self, args: Args<'_>, out: &mut Vec<u8>) {
        if is_http_attack(args.get(0)) {
            security_warning(&self.conn.client.addr);
            self.conn.close = true;
            return;
        }
        command::dispatch(&self.shared, &mut self.conn, args, out);
    }
}

/// (P)SUBSCRIBE and (P)UNSUBSCRIBE, whose replies are pushes.
fn is_subscription(name: &[u8]) -> bool {
    ["subscribe", "unsubscribe", "psubscribe", "punsubscribe"]
        .iter()
        .any(|n| name.eq_ignore_ascii_case(n.as_bytes()))
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
