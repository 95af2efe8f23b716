//! Registry of connected clients: ids, CLIENT LIST data, and killing connections.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{
    AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering::Relaxed,
};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::protocol::Protocol;

/// Wakes the thread that owns a connection, from any thread. The network runtime implements it
/// (one per I/O thread), so the registry and its mailbox need not know the runtime.
pub trait OwnerWaker: Send + Sync {
    /// A client of that thread was killed: it should look for it and close it.
    fn request_kill_scan(&self);
    /// The client `client_id` in slot `token` of that thread has mail (see [`ClientInfo::post`]).
    fn request_mail(&self, token: usize, client_id: u64);
}

/// Bound on the wakes one event-loop turn defers (past it, a wake goes at once).
const MAX_DEFERRED_WAKES: usize = 1024;

thread_local! {
    /// Wakes of replicas' connections held back until the end of this thread's event-loop
    /// turn (`Some` while an event loop runs a turn here): a turn of pipelined writes then
    /// wakes each replica's thread once, as Redis writes to replicas once per loop turn.
    static DEFERRED_WAKES: std::cell::RefCell<Option<Vec<DeferredWake>>> =
        const { std::cell::RefCell::new(None) };
}

/// A wake held back: the connection's thread, its slot and its client id.
type DeferredWake = (Arc<dyn OwnerWaker>, usize, u64);

/// Starts deferring stream wakes on this thread (an event loop, once).
pub fn defer_stream_wakes() {
    DEFERRED_WAKES.with(|d| d.borrow_mut().get_or_insert_with(Vec::new).clear());
}

/// Work a producer leaves for the end of its thread's event-loop turn (the replication
/// stream's writes to its replicas, once per turn as Redis does in `beforeSleep`).
pub trait TurnEnd: Send + Sync {
    fn turn_end(&self);
}

thread_local! {
    /// The hooks to run at the end of this thread's turn (each once, however often it asked).
    static TURN_END: std::cell::RefCell<Vec<Arc<dyn TurnEnd>>> =
        const { std::cell::RefCell::new(Vec::new()) };
    /// This thread's event loop polls no longer than [`poll_timeout`] says.
    static TURN_END_TIMERS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// The latest time by which a turn must end (its hooks run), asked with [`at_turn_end_by`].
    static TURN_END_BY: std::cell::Cell<Option<Instant>> = const { std::cell::Cell::new(None) };
    /// Whether this thread's event loop's last poll found nothing to do (see [`polled`]).
    static POLL_IDLE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// The hook last added to `TURN_END` this turn (its address; null when none): a producer
    /// asks at every change (every SET on a primary with replicas), so a repeated ask costs
    /// one compare instead of a look through the list.
    static LAST_ASKED: std::cell::Cell<*const ()> = const { std::cell::Cell::new(std::ptr::null()) };
}

/// Marks this thread's event loop as one that bounds its poll with [`poll_timeout`].
pub fn allow_turn_end_timers() {
    TURN_END_TIMERS.with(|t| t.set(true));
}

/// Runs `hook` at the end of the next turn, if this thread's event loop has more input ready
/// now, and by `at` at the latest; false (nothing kept: the caller does the work now) when the
/// loop's last poll found nothing to do, or this thread cannot promise that. Work held is thus
/// held only while input keeps coming: the loop polls without waiting ([`poll_timeout`]), and
/// a poll that finds nothing ends the hold (an idle loop never sleeps on held work).
pub fn at_turn_end_by(hook: &Arc<dyn TurnEnd>, at: Instant) -> bool {
    if !TURN_END_TIMERS.with(|t| t.get()) || POLL_IDLE.with(|i| i.get()) || !at_turn_end(hook) {
        return false;
    }
    TURN_END_BY.with(|by| by.set(Some(by.get().map_or(at, |b| b.min(at)))));
    true
}

/// An event loop's poll timeout: `timeout`, or none at all while a hook holds work (the poll
/// only looks whether more input is ready; see [`at_turn_end_by`]).
pub fn poll_timeout(timeout: Option<Duration>) -> Option<Duration> {
    match TURN_END_BY.with(|by| by.get()) {
        None => timeout,
        Some(_) => Some(Duration::ZERO),
    }
}

/// An event loop tells what its poll found: `idle` when nothing (no event at all).
pub fn polled(idle: bool) {
    POLL_IDLE.with(|i| i.set(idle));
}

/// Runs `hook` at the end of this thread's event-loop turn; false (nothing kept) when this
/// thread runs no event loop, so the caller does the work now.
pub fn at_turn_end(hook: &Arc<dyn TurnEnd>) -> bool {
    let key = Arc::as_ptr(hook) as *const ();
    if LAST_ASKED.with(|last| last.get()) == key {
        return true;
    }
    let in_loop = DEFERRED_WAKES.with(|d| d.borrow().is_some());
    if in_loop {
        TURN_END.with(|t| {
            let mut t = t.borrow_mut();
            if !t.iter().any(|h| Arc::ptr_eq(h, hook)) {
                t.push(hook.clone());
            }
        });
        LAST_ASKED.with(|last| last.set(key));
    }
    in_loop
}

/// Runs the turn-end hooks, then sends the wakes deferred during this turn (an event loop,
/// before it polls).
pub fn send_deferred_wakes() {
    TURN_END_BY.with(|by| by.set(None));
    // The list is taken (a hook may ask for the next turn) and its space given back after,
    // so a turn allocates nothing for it.
    let mut hooks = TURN_END.with(|t| std::mem::take(&mut *t.borrow_mut()));
    LAST_ASKED.with(|last| last.set(std::ptr::null()));
    for hook in hooks.drain(..) {
        hook.turn_end();
    }
    TURN_END.with(|t| {
        let mut t = t.borrow_mut();
        if t.is_empty() {
            *t = hooks;
        }
    });
    let wakes = DEFERRED_WAKES.with(|d| d.borrow_mut().as_mut().map(std::mem::take));
    for (waker, token, id) in wakes.into_iter().flatten() {
        waker.request_mail(token, id);
    }
}

static EPOCH: OnceLock<Instant> = OnceLock::new();

/// Milliseconds since the process's clock epoch (the first call). `last_active_ms` uses it.
pub fn now_ms() -> u64 {
    EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// One connected client, shared by its connection, the registry and CLIENT commands.
pub struct ClientInfo {
    pub id: u64,
    /// Peer address: "127.0.0.1:5555", or "/path/sock:0" for unix sockets.
    pub addr: String,
    /// Local address: "127.0.0.1:6380", or "/path/sock:0".
    pub laddr: String,
    pub fd: i32,
    pub created: Instant,
    pub protocol: Protocol,
    /// CLIENT SETNAME.
    pub name: Mutex<Option<Vec<u8>>>,
    /// [`now_ms`] at the last read of input (kept up to date by the network runtime).
    pub last_active_ms: AtomicU64,
    /// RESP protocol version (2 or 3; HELLO).
    pub resp_version: AtomicU8,
    /// Unprocessed input bytes, published by the runtime after each batch.
    pub qbuf: AtomicU64,
    /// Unsent output bytes, published by the runtime after each batch.
    pub omem: AtomicU64,
    last_cmd: Mutex<&'static str>,
    killed: AtomicBool,
    notifier: Option<Arc<dyn OwnerWaker>>,
    /// The connection's slot in its event loop, so that mail finds it without a scan.
    pub token: AtomicUsize,
    mailbox: Mutex<Mail>,
    /// Mail is waiting (checked before the connection's input is processed, so replies never
    /// overtake messages posted earlier).
    has_mail: AtomicBool,
    /// Channels plus patterns the client is subscribed to (RESP2 tracking messages need one).
    pub subscriptions: AtomicUsize,
    /// The connection is gone (left the registry): a tracking REDIRECT to it is broken.
    closed: AtomicBool,
    /// `flush_stream` is writing to the fd (changed under the mailbox lock).
    writing: AtomicBool,
    /// CLIENT REPLY OFF/SKIP covers the command now running: if it replies later from another
    /// thread (SQL), that reply is dropped. Set by the session before each command.
    mute_deferred: AtomicBool,
    /// CLIENT SETINFO lib-name / lib-ver (CLIENT LIST `lib-name=`, `lib-ver=`).
    pub lib_name: Mutex<Option<Vec<u8>>>,
    pub lib_ver: Mutex<Option<Vec<u8>>>,
    /// Free space of the input buffer (CLIENT LIST `qbuf-free`), published with `qbuf`.
    pub qbuf_free: AtomicU64,
    /// The session's state as CLIENT LIST shows it.
    pub state: PublishedState,
}

/// Bits of [`PublishedState::flags`]: CLIENT LIST `flags=` letters.
pub mod client_flags {
    /// `P`: subscribed to channels or patterns.
    pub const PUBSUB: u32 = 1;
    /// `x`: inside MULTI.
    pub const MULTI: u32 = 1 << 1;
    /// `t`: CLIENT TRACKING on.
    pub const TRACKING: u32 = 1 << 2;
    /// `B`: tracking in broadcast mode.
    pub const BCAST: u32 = 1 << 3;
    /// `c`: closes after the current reply (QUIT).
    pub const CLOSE_AFTER_REPLY: u32 = 1 << 4;
    /// `e`: CLIENT NO-EVICT on.
    pub const NO_EVICT: u32 = 1 << 5;
    /// `T`: CLIENT NO-TOUCH on.
    pub const NO_TOUCH: u32 = 1 << 6;
    /// `b`: waiting for a reply another thread computes (an SQL statement), as Redis marks
    /// clients blocked in a command.
    pub const BLOCKED: u32 = 1 << 7;
    /// `O`: in MONITOR mode.
    pub const MONITOR: u32 = 1 << 8;
    /// `S`: a replica's connection (it sent PSYNC).
    pub const REPLICA: u32 = 1 << 9;
    /// `M`: this server's link to its primary.
    pub const MASTER: u32 = 1 << 10;
}

/// A connection's state that only its session changes but CLIENT LIST and INFO (on any
/// thread) read: the session publishes it after each batch of commands.
pub struct PublishedState {
    /// [`client_flags`] bits.
    pub flags: AtomicU32,
    pub sub: AtomicU32,
    pub psub: AtomicU32,
    /// Commands queued in MULTI; -1 outside a transaction.
    pub multi: AtomicI64,
    /// Bytes of the queued commands' arguments.
    pub multi_mem: AtomicU64,
    /// Keys under WATCH.
    pub watch: AtomicU32,
    /// CLIENT TRACKING redirect id (0: itself); -1 when not tracking.
    pub redir: AtomicI64,
}

impl Default for PublishedState {
    fn default() -> Self {
        PublishedState {
            flags: AtomicU32::new(0),
            sub: AtomicU32::new(0),
            psub: AtomicU32::new(0),
            multi: AtomicI64::new(-1),
            multi_mem: AtomicU64::new(0),
            watch: AtomicU32::new(0),
            redir: AtomicI64::new(-1),
        }
    }
}

/// Client classes of CLIENT LIST TYPE / CLIENT KILL TYPE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientType {
    Normal,
    Pubsub,
    /// Replication links: this server's link to its primary, and its replicas' connections.
    Master,
    Replica,
}

impl ClientType {
    /// Parses a TYPE argument as Redis does (`slave` is `replica`); None if unknown.
    pub fn parse(name: &[u8]) -> Option<ClientType> {
        match name.to_ascii_lowercase().as_slice() {
            b"normal" => Some(ClientType::Normal),
            b"pubsub" => Some(ClientType::Pubsub),
            b"master" => Some(ClientType::Master),
            b"replica" | b"slave" => Some(ClientType::Replica),
            _ => None,
        }
    }
}

/// Output produced for a connection by another thread: a deferred reply, or pushed messages.
#[derive(Default)]
pub struct Mail {
    pub bytes: Vec<u8>,
    /// The session was waiting for a deferred reply and may go on with its input.
    pub resume: bool,
    /// Bytes of `bytes` that are pushed messages (pub/sub, tracking), not replies: the output
    /// limits of the pubsub class apply to them.
    pub pushed: usize,
}

impl ClientInfo {
    /// A client owned by the I/O thread that `notifier` wakes.
    pub fn new(
        id: u64,
        addr: String,
        laddr: String,
        fd: i32,
        protocol: Protocol,
        notifier: Option<Arc<dyn OwnerWaker>>,
    ) -> ClientInfo {
        ClientInfo {
            id,
            addr,
            laddr,
            fd,
            created: Instant::now(),
            protocol,
            name: Mutex::new(None),
            last_active_ms: AtomicU64::new(now_ms()),
            resp_version: AtomicU8::new(2),
            qbuf: AtomicU64::new(0),
            omem: AtomicU64::new(0),
            last_cmd: Mutex::new(""),
            killed: AtomicBool::new(false),
            notifier,
            token: AtomicUsize::new(usize::MAX),
            mailbox: Mutex::new(Mail::default()),
            has_mail: AtomicBool::new(false),
            subscriptions: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            writing: AtomicBool::new(false),
            mute_deferred: AtomicBool::new(false),
            lib_name: Mutex::new(None),
            lib_ver: Mutex::new(None),
            qbuf_free: AtomicU64::new(0),
            state: PublishedState::default(),
        }
    }

    /// The client's class for CLIENT LIST / KILL TYPE: subscribed clients are `pubsub`, all
    /// others (memcached connections included) `normal`; cairn has no masters or replicas.
    pub fn client_type(&self) -> ClientType {
        let flags = self.state.flags.load(Relaxed);
        if flags & client_flags::REPLICA != 0 {
            ClientType::Replica
        } else if flags & client_flags::MASTER != 0 {
            ClientType::Master
        } else if self.subscriptions.load(Relaxed) > 0 {
            ClientType::Pubsub
        } else {
            ClientType::Normal
        }
    }

    /// A client with no connection behind it (tests, internal callers).
    pub fn detached(id: u64, protocol: Protocol) -> ClientInfo {
        ClientInfo::new(id, "?:0".into(), "?:0".into(), -1, protocol, None)
    }

    /// Records the command being run (CLIENT LIST `cmd=`).
    #[inline]
    pub fn set_last_command(&self, name: &'static str) {
        *self.last_cmd.lock() = name;
    }

    pub fn last_command(&self) -> &'static str {
        *self.last_cmd.lock()
    }

    /// Marks the activity time (the runtime does this on every read).
    #[inline]
    pub fn touch(&self) {
        self.last_active_ms.store(now_ms(), Relaxed);
    }

    /// Asks the connection's thread to close it. Killing the client whose command is running
    /// lets that command's reply be flushed first.
    pub fn kill(&self) {
        if !self.killed.swap(true, Relaxed) {
            if let Some(n) = &self.notifier {
                n.request_kill_scan();
            }
        }
    }

    pub fn killed(&self) -> bool {
        self.killed.load(Relaxed)
    }

    /// Appends `bytes` to this client's output from any thread and wakes the thread that owns
    /// the connection. `resume` completes a deferred reply: the session goes on with its input.
    /// Returns the pushed-message bytes now waiting in the mailbox (a monitor is cut past its
    /// limit).
    pub fn post(&self, bytes: &[u8], resume: bool) -> usize {
        // The deferred reply of a command run under CLIENT REPLY OFF/SKIP is dropped; the
        // resume still goes through. Pushes (resume false) are always delivered, as in Redis.
        let bytes = if resume && self.mute_deferred.swap(false, Relaxed) {
            &[][..]
        } else {
            bytes
        };
        if resume {
            self.state.flags.fetch_and(!client_flags::BLOCKED, Relaxed);
        }
        let (first, waiting) = {
            let mut mail = self.mailbox.lock();
            let first = mail.bytes.is_empty() && !mail.resume;
            mail.bytes.extend_from_slice(bytes);
            mail.resume |= resume;
            if !resume {
                mail.pushed += bytes.len();
            }
            self.has_mail.store(true, Relaxed);
            (first, mail.pushed)
        };
        if first {
            if let Some(n) = &self.notifier {
                n.request_mail(self.token.load(Relaxed), self.id);
            }
        }
        waiting
    }

    /// Takes the mail posted so far (the owning thread, when woken).
    pub fn take_mail(&self) -> Mail {
        let mut mail = self.mailbox.lock();
        if self.writing.load(Relaxed) {
            // `flush_stream` is writing earlier bytes: these wait for it (it wakes us after).
            return Mail::default();
        }
        self.has_mail.store(false, Relaxed);
        if self.state.flags.load(Relaxed) & client_flags::REPLICA != 0 {
            // Counted as unsent until the owner publishes its output buffer (which then holds
            // these bytes): `flush_stream` must not write past them in the meantime.
            self.omem.fetch_add(mail.bytes.len() as u64, Relaxed);
        }
        std::mem::take(&mut *mail)
    }

    /// Bytes posted and not yet delivered, plus the connection's unsent output: what a
    /// producer that streams to this client (a replica's sync) waits on before posting more.
    pub fn pending_output(&self) -> usize {
        self.mailbox.lock().bytes.len() + self.omem.load(Relaxed) as usize
    }

    /// Appends stream bytes (a replica's feed) to the output: replies, not pushed messages,
    /// so the pubsub output class does not cut the replica; the producer bounds them with
    /// [`pending_output`](Self::pending_output), which this returns (read as it posts).
    pub fn post_stream(&self, bytes: &[u8]) -> usize {
        let (first, pending) = {
            let mut mail = self.mailbox.lock();
            let first = mail.bytes.is_empty() && !mail.resume;
            mail.bytes.extend_from_slice(bytes);
            self.has_mail.store(true, Relaxed);
            (first, mail.bytes.len() + self.omem.load(Relaxed) as usize)
        };
        if first {
            self.wake_for_stream();
        }
        pending
    }

    /// Wakes the connection's thread for stream mail, at the end of this thread's event-loop
    /// turn when it runs one.
    fn wake_for_stream(&self) {
        if let Some(n) = &self.notifier {
            let token = self.token.load(Relaxed);
            let deferred = DEFERRED_WAKES.with(|d| match d.borrow_mut().as_mut() {
                Some(list) if list.len() < MAX_DEFERRED_WAKES => {
                    list.push((n.clone(), token, self.id));
                    true
                }
                _ => false,
            });
            if !deferred {
                n.request_mail(token, self.id);
            }
        }
    }

    /// Queues stream bytes (`parts`, in order) for a replica's connection, as
    /// [`post_stream`](Self::post_stream) does; with `wake` false its thread is not woken: the
    /// caller sends them with [`flush_stream`](Self::flush_stream) once it holds no lock.
    /// Returns the bytes left unsent; None when the connection is closed.
    pub fn queue_stream(&self, parts: [&[u8]; 2], wake: bool) -> Option<usize> {
        let mut mail = self.mailbox.lock();
        if self.closed() {
            return None;
        }
        let first = mail.bytes.is_empty() && !mail.resume;
        for part in parts {
            mail.bytes.extend_from_slice(part);
        }
        self.has_mail.store(true, Relaxed);
        let pending = mail.bytes.len() + self.omem.load(Relaxed) as usize;
        drop(mail);
        if wake && first {
            self.wake_for_stream();
        }
        Some(pending)
    }

    /// Writes a replica connection's queued stream bytes to its socket from this thread when
    /// nothing else waits to go out on it (its output buffer is empty), which saves waking the
    /// connection's own thread; otherwise, or for what the socket does not take, that thread
    /// is woken to write them. The write holds no lock (a thread descheduled in it stalls
    /// nobody): `writing` keeps the owner from taking mail meanwhile, and the connection from
    /// closing its fd. Returns the bytes written here.
    pub fn flush_stream(&self) -> usize {
        let bytes = {
            let mut mail = self.mailbox.lock();
            if self.closed() || self.writing.load(Relaxed) || mail.bytes.is_empty() {
                return 0;
            }
            if mail.resume || self.omem.load(Relaxed) != 0 || self.fd < 0 {
                drop(mail);
                self.wake_for_stream();
                return 0;
            }
            self.writing.store(true, Relaxed);
            self.has_mail.store(false, Relaxed);
            std::mem::take(&mut mail.bytes)
        };
        let written = send_nonblocking(self.fd, [&bytes, &[]]);
        let mut mail = self.mailbox.lock();
        self.writing.store(false, Relaxed);
        if written < bytes.len() {
            let mut rest = bytes[written..].to_vec();
            rest.extend_from_slice(&mail.bytes);
            mail.bytes = rest;
        } else if mail.bytes.is_empty() {
            // Its space serves the next turn.
            let mut bytes = bytes;
            bytes.clear();
            mail.bytes = bytes;
        }
        if !mail.bytes.is_empty() {
            self.has_mail.store(true, Relaxed);
            drop(mail);
            self.wake_for_stream();
        }
        written
    }

    #[inline]
    pub fn has_mail(&self) -> bool {
        self.has_mail.load(Relaxed)
    }

    /// Whether a deferred reply of the command about to run is dropped (CLIENT REPLY).
    #[inline]
    pub fn set_mute_deferred(&self, mute: bool) {
        self.mute_deferred.store(mute, Relaxed);
    }

    /// The connection has left the registry (disconnected).
    /// Whether `other` is served by the same event loop (the same owner thread).
    pub fn same_loop(&self, other: &ClientInfo) -> bool {
        match (&self.notifier, &other.notifier) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    pub fn closed(&self) -> bool {
        self.closed.load(Relaxed)
    }

    /// One line of CLIENT LIST (without the trailing newline), with Redis 7.4's fields in
    /// Redis's order.
    pub fn info_line(&self) -> String {
        let now = now_ms();
        let age = self.created.elapsed().as_secs();
        let idle = now.saturating_sub(self.last_active_ms.load(Relaxed)) / 1000;
        let text = |m: &Mutex<Option<Vec<u8>>>| {
            m.lock()
                .as_deref()
                .map(|n| String::from_utf8_lossy(n).into_owned())
                .unwrap_or_default()
        };
        let cmd = match self.last_command() {
            "" => "NULL",
            c => c,
        };
        let st = &self.state;
        let qbuf = self.qbuf.load(Relaxed);
        let qbuf_free = self.qbuf_free.load(Relaxed);
        let omem = self.omem.load(Relaxed);
        let multi_mem = st.multi_mem.load(Relaxed);
        // The connection's buffers and queued commands, plus what it costs before any of them.
        let tot_mem = qbuf + qbuf_free + omem + multi_mem + client_base_mem();
        let mut s = String::with_capacity(320);
        let _ = write!(
            s,
            "id={} addr={} laddr={} fd={} name={} age={age} idle={idle} flags={} db=0 sub={} psub={} \
             ssub=0 multi={} watch={} qbuf={qbuf} qbuf-free={qbuf_free} argv-mem=0 multi-mem={multi_mem} \
             rbs=0 rbp=0 obl=0 oll=0 omem={omem} tot-mem={tot_mem} events={} cmd={cmd} user=default \
             redir={} resp={} lib-name={} lib-ver={}",
            self.id,
            self.addr,
            self.laddr,
            self.fd,
            text(&self.name),
            self.flags_text(),
            st.sub.load(Relaxed),
            st.psub.load(Relaxed),
            st.multi.load(Relaxed),
            st.watch.load(Relaxed),
            if omem > 0 { "rw" } else { "r" },
            st.redir.load(Relaxed),
            self.resp_version.load(Relaxed),
            text(&self.lib_name),
            text(&self.lib_ver),
        );
        s
    }

    /// CLIENT LIST `flags=`: the letters Redis uses, in its order; `N` when none applies.
    pub fn flags_text(&self) -> String {
        use client_flags::*;
        let bits = self.state.flags.load(Relaxed);
        let mut f = String::new();
        for (bit, letter) in [
            (REPLICA, 'S'),
            (MASTER, 'M'),
            (MONITOR, 'O'),
            (PUBSUB, 'P'),
            (MULTI, 'x'),
            (BLOCKED, 'b'),
            (TRACKING, 't'),
            (BCAST, 'B'),
            (CLOSE_AFTER_REPLY, 'c'),
        ] {
            if bits & bit != 0 {
                f.push(letter);
            }
        }
        if self.laddr.starts_with('/') {
            f.push('U');
        }
        if bits & NO_EVICT != 0 {
            f.push('e');
        }
        if bits & NO_TOUCH != 0 {
            f.push('T');
        }
        if f.is_empty() {
            f.push('N');
        }
        f
    }
}

/// Size of a connection's protocol state (its session), which the session module sets: the
/// registry sits below the sessions and cannot name their type.
static SESSION_MEM: AtomicU64 = AtomicU64::new(0);

/// Records the size of one connection's protocol state (see [`client_base_mem`]).
pub fn set_session_mem(bytes: usize) {
    SESSION_MEM.store(bytes as u64, Relaxed);
}

/// Memory a connection holds besides its buffers (its shared record and session), for
/// `tot-mem`.
pub fn client_base_mem() -> u64 {
    std::mem::size_of::<ClientInfo>() as u64 + SESSION_MEM.load(Relaxed)
}

/// Which clients CLIENT KILL selects; every given criterion must match.
#[derive(Default, Clone, Debug)]
pub struct KillFilter<'a> {
    pub id: Option<u64>,
    pub addr: Option<&'a str>,
    pub laddr: Option<&'a str>,
    pub protocol: Option<Protocol>,
    pub kind: Option<ClientType>,
    /// Only clients connected for at least this many seconds (MAXAGE).
    pub min_age_secs: Option<u64>,
    /// Never kill this client (SKIPME yes: the caller's id).
    pub skip_id: Option<u64>,
}

impl KillFilter<'_> {
    fn matches(&self, c: &ClientInfo) -> bool {
        self.id.is_none_or(|id| c.id == id)
            && self.addr.is_none_or(|a| c.addr == a)
            && self.laddr.is_none_or(|a| c.laddr == a)
            && self.protocol.is_none_or(|p| c.protocol == p)
            && self.kind.is_none_or(|k| c.client_type() == k)
            && self
                .min_age_secs
                .is_none_or(|age| c.created.elapsed().as_secs() >= age)
            && self.skip_id != Some(c.id)
    }
}

/// All connected clients, by id.
pub struct ClientRegistry {
    next_id: AtomicU64,
    count: AtomicUsize,
    map: Mutex<BTreeMap<u64, Arc<ClientInfo>>>,
}

impl Default for ClientRegistry {
    fn default() -> Self {
        ClientRegistry::new()
    }
}

impl ClientRegistry {
    pub fn new() -> ClientRegistry {
        ClientRegistry {
            next_id: AtomicU64::new(1),
            count: AtomicUsize::new(0),
            map: Mutex::new(BTreeMap::new()),
        }
    }

    /// A fresh client id (1, 2, ...).
    pub fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Relaxed)
    }

    pub fn register(&self, client: Arc<ClientInfo>) {
        let mut map = self.map.lock();
        if map.insert(client.id, client).is_none() {
            self.count.fetch_add(1, Relaxed);
        }
    }

    pub fn unregister(&self, id: u64) -> Option<Arc<ClientInfo>> {
        let removed = self.map.lock().remove(&id);
        if let Some(c) = &removed {
            // Under its mailbox lock, once no `flush_stream` writes to its fd: none starts
            // after this, and the fd is closed after it.
            loop {
                let _mail = c.mailbox.lock();
                if !c.writing.load(Relaxed) {
                    c.closed.store(true, Relaxed);
                    break;
                }
                drop(_mail);
                std::thread::yield_now();
            }
            self.count.fetch_sub(1, Relaxed);
        }
        removed
    }

    /// Connected clients (lock-free).
    pub fn count(&self) -> usize {
        self.count.load(Relaxed)
    }

    pub fn get(&self, id: u64) -> Option<Arc<ClientInfo>> {
        self.map.lock().get(&id).cloned()
    }

    /// Snapshot of all clients, ordered by id.
    pub fn list(&self) -> Vec<Arc<ClientInfo>> {
        self.map.lock().values().cloned().collect()
    }

    /// Kills the client with this id; false if there is none.
    pub fn kill_by_id(&self, id: u64) -> bool {
        match self.get(id) {
            Some(c) => {
                c.kill();
                true
            }
            None => false,
        }
    }

    /// Kills the clients whose peer address is `addr` (except `skip_id`); returns how many.
    pub fn kill_by_addr(&self, addr: &str, skip_id: Option<u64>) -> usize {
        self.kill(&KillFilter {
            addr: Some(addr),
            skip_id,
            ..Default::default()
        })
    }

    /// Kills the clients connected to local address `laddr` (except `skip_id`); returns how many.
    pub fn kill_by_laddr(&self, laddr: &str, skip_id: Option<u64>) -> usize {
        self.kill(&KillFilter {
            laddr: Some(laddr),
            skip_id,
            ..Default::default()
        })
    }

    /// Kills every client matching `filter`; returns how many.
    pub fn kill(&self, filter: &KillFilter<'_>) -> usize {
        let victims: Vec<Arc<ClientInfo>> = {
            let map = self.map.lock();
            if let Some(id) = filter.id {
                map.get(&id)
                    .filter(|c| filter.matches(c))
                    .cloned()
                    .into_iter()
                    .collect()
            } else {
                map.values()
                    .filter(|c| filter.matches(c))
                    .cloned()
                    .collect()
            }
        };
        for c in &victims {
            c.kill();
        }
        victims.len()
    }
}

/// Whether the peer of socket `fd` has closed its side: a waiting connection does not read,
/// so the hang-up shows only in the socket's poll state (POLLRDHUP also covers data still
/// unread before the FIN). A client that only half-closed is treated as gone, as Redis does.
pub fn peer_gone(fd: i32) -> bool {
    if fd < 0 {
        return false;
    }
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLRDHUP,
        revents: 0,
    };
    // SAFETY: one valid pollfd, zero timeout; `fd` belongs to the live connection.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n > 0 && p.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0
}

/// One non-blocking `sendmsg` of `parts` to socket `fd`; the bytes it took (0 on any error:
/// the caller posts them, and the connection's thread meets the error itself).
fn send_nonblocking(fd: i32, parts: [&[u8]; 2]) -> usize {
    let iov = parts.map(|p| libc::iovec {
        iov_base: p.as_ptr() as *mut libc::c_void,
        iov_len: p.len(),
    });
    // SAFETY: a zeroed msghdr is valid; it points at `iov`, which lives across the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_ptr() as *mut libc::iovec;
    msg.msg_iovlen = if parts[1].is_empty() { 1 } else { 2 };
    loop {
        // SAFETY: `fd` is an open socket (the caller holds off its close) and `msg` is valid.
        let n = unsafe { libc::sendmsg(fd, &msg, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) };
        if n >= 0 {
            return n as usize;
        }
        if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Count(AtomicUsize);

    impl TurnEnd for Count {
        fn turn_end(&self) {
            self.0.fetch_add(1, Relaxed);
        }
    }

    #[test]
    fn a_turn_end_hook_runs_once_per_turn_and_holds_work_only_while_input_is_ready() {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let hook: Arc<dyn TurnEnd> = count.clone();
        // Off an event loop nothing is kept: the caller does the work now.
        assert!(!at_turn_end(&hook));
        assert!(!at_turn_end_by(&hook, Instant::now()));
        defer_stream_wakes();
        assert!(at_turn_end(&hook) && at_turn_end(&hook));
        // A loop that does not bound its poll cannot promise a time.
        assert!(!at_turn_end_by(&hook, Instant::now()));
        send_deferred_wakes();
        assert_eq!(count.0.load(Relaxed), 1);
        allow_turn_end_timers();
        assert_eq!(poll_timeout(None), None);
        assert!(at_turn_end_by(
            &hook,
            Instant::now() + Duration::from_millis(50)
        ));
        // Held: the loop only looks whether more input is ready.
        assert_eq!(poll_timeout(None), Some(Duration::ZERO));
        let short = Duration::from_millis(1);
        assert_eq!(poll_timeout(Some(short)), Some(Duration::ZERO));
        send_deferred_wakes();
        assert_eq!(count.0.load(Relaxed), 2);
        assert_eq!(poll_timeout(None), None);
        // A poll that found nothing ends every hold: the work is done now.
        polled(true);
        assert!(!at_turn_end_by(
            &hook,
            Instant::now() + Duration::from_secs(1)
        ));
        assert_eq!(poll_timeout(None), None);
        polled(false);
        assert!(at_turn_end_by(
            &hook,
            Instant::now() + Duration::from_secs(1)
        ));
        send_deferred_wakes();
    }

    #[test]
    fn hooks_asked_in_turns_run_once_each_turn() {
        let (a, b) = (
            Arc::new(Count(AtomicUsize::new(0))),
            Arc::new(Count(AtomicUsize::new(0))),
        );
        let (hook_a, hook_b): (Arc<dyn TurnEnd>, Arc<dyn TurnEnd>) = (a.clone(), b.clone());
        defer_stream_wakes();
        // Interleaved asks: each hook is listed once, whichever was asked last.
        for hook in [&hook_a, &hook_b, &hook_a, &hook_a, &hook_b] {
            assert!(at_turn_end(hook));
        }
        send_deferred_wakes();
        assert_eq!((a.0.load(Relaxed), b.0.load(Relaxed)), (1, 1));
        // The next turn's first ask lists the hook again (the last ask was of the turn before).
        assert!(at_turn_end(&hook_b));
        send_deferred_wakes();
        assert_eq!((a.0.load(Relaxed), b.0.load(Relaxed)), (1, 2));
        send_deferred_wakes();
        assert_eq!((a.0.load(Relaxed), b.0.load(Relaxed)), (1, 2));
    }

    fn client(reg: &ClientRegistry, addr: &str, laddr: &str) -> Arc<ClientInfo> {
        let c = Arc::new(ClientInfo::new(
            reg.next_id(),
            addr.into(),
            laddr.into(),
            9,
            Protocol::Resp,
            None,
        ));
        reg.register(c.clone());
        c
    }

    #[test]
    fn registry() {
        let reg = ClientRegistry::new();
        let a = client(&reg, "127.0.0.1:1000", "127.0.0.1:6380");
        let b = client(&reg, "127.0.0.1:1001", "127.0.0.1:6380");
        let c = client(&reg, "/tmp/s.sock:0", "/tmp/s.sock:0");
        assert_eq!((a.id, b.id, c.id), (1, 2, 3));
        assert_eq!(reg.count(), 3);
        assert_eq!(
            reg.list().iter().map(|c| c.id).collect::<Vec<_>>(),
            vec![1, 2, 3]
        );

        assert!(reg.kill_by_id(2));
        assert!(b.killed() && !a.killed());
        assert!(!reg.kill_by_id(99));
        assert_eq!(reg.kill_by_laddr("127.0.0.1:6380", Some(1)), 1);
        assert!(!a.killed());
        assert_eq!(reg.kill_by_addr("127.0.0.1:1000", None), 1);
        assert!(a.killed());
        assert_eq!(
            reg.kill(&KillFilter {
                id: Some(3),
                skip_id: Some(3),
                ..Default::default()
            }),
            0
        );

        assert!(reg.unregister(2).is_some());
        assert!(reg.unregister(2).is_none());
        assert_eq!(reg.count(), 2);
        assert!(reg.get(2).is_none());
    }

    #[test]
    fn kill_filters_by_kind_and_age() {
        let reg = ClientRegistry::new();
        let normal = client(&reg, "127.0.0.1:1000", "127.0.0.1:6380");
        let sub = client(&reg, "127.0.0.1:1001", "127.0.0.1:6380");
        sub.subscriptions.store(1, Relaxed);
        assert_eq!(sub.client_type(), ClientType::Pubsub);
        assert_eq!(normal.client_type(), ClientType::Normal);
        for (name, kind) in [
            ("Normal", ClientType::Normal),
            ("slave", ClientType::Replica),
            ("replica", ClientType::Replica),
            ("master", ClientType::Master),
            ("pubsub", ClientType::Pubsub),
        ] {
            assert_eq!(ClientType::parse(name.as_bytes()), Some(kind));
        }
        assert_eq!(ClientType::parse(b"x"), None);
        let by_kind = |kind| KillFilter {
            kind: Some(kind),
            ..Default::default()
        };
        assert_eq!(reg.kill(&by_kind(ClientType::Master)), 0);
        // nobody is an hour old
        let old = KillFilter {
            min_age_secs: Some(3600),
            ..Default::default()
        };
        assert_eq!(reg.kill(&old), 0);
        assert!(!normal.killed() && !sub.killed());
        assert_eq!(reg.kill(&by_kind(ClientType::Pubsub)), 1);
        assert!(sub.killed() && !normal.killed());
        // closed is set when a connection leaves the registry
        assert!(!normal.closed());
        reg.unregister(normal.id);
        assert!(normal.closed());
    }

    #[test]
    fn info_line() {
        let c = ClientInfo::new(
            7,
            "127.0.0.1:5555".into(),
            "127.0.0.1:6380".into(),
            12,
            Protocol::Resp,
            None,
        );
        *c.name.lock() = Some(b"worker".to_vec());
        let line = c.info_line();
        assert!(line.starts_with(
            "id=7 addr=127.0.0.1:5555 laddr=127.0.0.1:6380 fd=12 name=worker age=0 idle=0 flags=N"
        ));
        assert!(line.contains(" cmd=NULL "), "{line}");
        c.set_last_command("get");
        assert!(c
            .info_line()
            .contains(" cmd=get user=default redir=-1 resp=2 lib-name= lib-ver="));
        *c.lib_name.lock() = Some(b"redis-py".to_vec());
        c.state.flags.store(
            client_flags::PUBSUB | client_flags::MULTI | client_flags::TRACKING,
            Relaxed,
        );
        c.state.sub.store(2, Relaxed);
        c.state.multi.store(3, Relaxed);
        c.subscriptions.store(2, Relaxed);
        let line = c.info_line();
        assert!(
            line.contains(" flags=Pxt db=0 sub=2 psub=0 ssub=0 multi=3 "),
            "{line}"
        );
        assert!(line.ends_with(" lib-name=redis-py lib-ver="), "{line}");
        assert_eq!(c.client_type(), ClientType::Pubsub);
    }
}
