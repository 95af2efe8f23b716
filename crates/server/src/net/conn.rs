//! One connection's buffers and I/O state machine, independent of the event loop that drives it.
//!
//! The loop (reactor or dispatch; a future io_uring backend would be a third) reports readiness
//! with [`Conn::on_event`] and then calls [`Conn::drive`], which reads, runs the session and
//! writes until the connection has to wait. Readiness is edge-triggered: `read_ready` and
//! `write_ready` stay set until a syscall shows the socket drained or full.
//!
//! Buffers come from a per-thread [`BufPool`] and go back as soon as they are empty, so an idle
//! connection holds no buffer at all, and a busy one cycles the same few pooled buffers.

use std::io::{ErrorKind, Read, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use crate::clients::ClientInfo;
use crate::config::OutputLimits;
use crate::session::{Progress, Session};
use crate::shared::{Settings, Shared};

use super::limits::OutputGuard;
use super::listen::Stream;
use super::pool::BufPool;
use super::pool::IN_BUF;

/// Reads per `drive` call before yielding to other connections.
const READ_BUDGET: usize = 16;

/// Per-thread context for driving connections: the buffer pool, limits, and counters that are
/// added to [`crate::stats::ServerStats`] once per loop turn.
pub struct Ctx {
    pub pool: BufPool,
    /// Largest input buffer (`config::effective_query_buffer_limit`).
    pub max_input: usize,
    /// Unsent-output limits per client class.
    pub limits: OutputLimits,
    /// The normal class has no limit: a connection whose socket is full stops reading and
    /// processing requests until the peer reads (with a limit, it goes on and is cut past it,
    /// as in Redis).
    pub backpressure: bool,
    /// [`crate::clients::now_ms`] at the start of this loop turn.
    pub now_ms: u64,
    pub in_bytes: u64,
    pub out_bytes: u64,
    /// Written to replicas (INFO counts them apart, as Redis does).
    pub repl_out_bytes: u64,
    pub output_limit_closes: u64,
    /// Reads and writes that moved bytes, and closes at the input limit (INFO stats).
    pub reads: u64,
    pub writes: u64,
    pub input_limit_closes: u64,
    /// Change of the connections' buffer bytes this turn (see [`Conn::account`]).
    pub client_mem: i64,
}

impl Ctx {
    pub fn new(settings: &Settings) -> Ctx {
        let mut ctx = Ctx {
            pool: BufPool::default(),
            max_input: 0,
            limits: OutputLimits::default(),
            backpressure: true,
            now_ms: 0,
            in_bytes: 0,
            out_bytes: 0,
            repl_out_bytes: 0,
            output_limit_closes: 0,
            reads: 0,
            writes: 0,
            input_limit_closes: 0,
            client_mem: 0,
        };
        ctx.refresh(settings);
        ctx
    }

    /// Reads the limits (CONFIG SET may change them) and the clock; once per loop turn.
    pub fn refresh(&mut self, settings: &Settings) {
        self.max_input = crate::config::effective_query_buffer_limit(
            settings.client_query_buffer_limit.load(Relaxed),
            settings.max_value_size.load(Relaxed),
        )
        .max(IN_BUF);
        self.limits = *settings.output_limits.read();
        self.backpressure = self.limits.normal.is_unlimited();
        self.now_ms = crate::clients::now_ms();
    }

    pub fn flush_stats(&mut self, shared: &Shared) {
        if self.client_mem != 0 {
            // Client buffers count against --maxmemory (the store's limit check sees them).
            shared
                .store
                .account_external(std::mem::take(&mut self.client_mem));
        }
        let stats = &shared.stats;
        if self.in_bytes != 0 {
            stats
                .net_input_bytes
                .fetch_add(std::mem::take(&mut self.in_bytes), Relaxed);
        }
        if self.out_bytes != 0 {
            stats
                .net_output_bytes
                .fetch_add(std::mem::take(&mut self.out_bytes), Relaxed);
        }
        if self.repl_out_bytes != 0 {
            shared
                .replication
                .sent_bytes
                .fetch_add(std::mem::take(&mut self.repl_out_bytes), Relaxed);
        }
        for (local, total) in [
            (&mut self.reads, &stats.total_reads_processed),
            (&mut self.writes, &stats.total_writes_processed),
            (
                &mut self.input_limit_closes,
                &stats.client_query_buffer_limit_disconnections,
            ),
        ] {
            if *local != 0 {
                total.fetch_add(std::mem::take(local), Relaxed);
            }
        }
        if self.output_limit_closes != 0 {
            stats
                .client_output_limit_disconnections
                .fetch_add(std::mem::take(&mut self.output_limit_closes), Relaxed);
        }
    }
}

/// Why a connection is being closed (for debug logs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// QUIT, protocol error, or EOF, after flushing.
    Done,
    Io(ErrorKind),
    OutputLimit,
    InputLimit,
    Panic,
    Killed,
    Shutdown,
}

/// What the event loop must do after [`Conn::drive`].
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Wait for the next readiness event (sync the WRITABLE interest first).
    Wait,
    /// More work is ready but this connection used its budget: drive it again next turn.
    Yield,
    /// Input is ready to process and the loop runs sessions elsewhere: take a [`Job`].
    Submit,
    Close(CloseReason),
}

pub struct Conn {
    pub stream: Stream,
    pub client: Arc<ClientInfo>,
    session: Option<Box<Session>>,
    /// Input bytes `start..end` of `inbuf` are unprocessed; `inbuf` is empty (no allocation)
    /// when there are none. `inbuf.len()` is its usable size (it is zero-filled, never shrunk).
    inbuf: Vec<u8>,
    start: usize,
    end: usize,
    /// Output bytes `out_pos..` are unsent.
    out: Vec<u8>,
    out_pos: usize,
    read_ready: bool,
    /// The peer shut down its side: read until EOF even after short reads.
    rdhup: bool,
    write_ready: bool,
    /// WRITABLE is registered with the poller.
    pub writable_interest: bool,
    /// Unprocessed input may hold complete requests.
    dirty: bool,
    eof: bool,
    /// Flush the output, then close.
    closing: bool,
    /// The session is out on a worker (dispatch).
    pub in_flight: bool,
    /// The session waits for a deferred reply (posted by another thread as mail): input stays
    /// buffered, unread, until it comes.
    waiting: bool,
    /// Applies the output-buffer limits.
    guard: OutputGuard,
    /// Buffer bytes this connection has added to `Ctx::client_mem`.
    accounted: usize,
}

impl Conn {
    pub fn new(stream: Stream, client: Arc<ClientInfo>, session: Box<Session>) -> Conn {
        Conn {
            stream,
            client,
            session: Some(session),
            inbuf: Vec::new(),
            start: 0,
            end: 0,
            out: Vec::new(),
            out_pos: 0,
            read_ready: false,
            rdhup: false,
            write_ready: true,
            writable_interest: false,
            dirty: false,
            eof: false,
            closing: false,
            in_flight: false,
            waiting: false,
            guard: OutputGuard::default(),
            accounted: 0,
        }
    }

    /// Records readiness reported by the poller.
    #[inline]
    pub fn on_event(&mut self, readable: bool, writable: bool, read_closed: bool, error: bool) {
        if readable || read_closed || error {
            self.read_ready = true;
        }
        if read_closed {
            self.rdhup = true;
        }
        if writable || error {
            self.write_ready = true;
        }
    }

    /// Whether the poller should report WRITABLE for this connection.
    #[inline]
    pub fn wants_writable(&self) -> bool {
        self.out_pos < self.out.len() && !self.write_ready
    }

    /// Stop reading and processing; flush what is pending, then close (shutdown).
    pub fn start_closing(&mut self) {
        self.closing = true;
        self.dirty = false;
    }

    /// Reads, processes (inline when `inline`, else returns [`Step::Submit`]) and writes until
    /// the connection must wait for the socket.
    pub fn drive(&mut self, ctx: &mut Ctx, inline: bool) -> Step {
        if self.in_flight {
            return Step::Wait;
        }
        let step = self.drive_inner(ctx, inline);
        if !self.in_flight {
            self.account(ctx);
        }
        step
    }

    /// Publishes the change of this connection's buffer sizes (input buffer plus output
    /// capacity) to the per-turn total that the store's memory limit sees.
    fn account(&mut self, ctx: &mut Ctx) {
        let now = self.inbuf.len() + self.out.capacity();
        ctx.client_mem += now as i64 - self.accounted as i64;
        self.accounted = now;
    }

    fn drive_inner(&mut self, ctx: &mut Ctx, inline: bool) -> Step {
        if self.client.has_mail() {
            self.deliver_mail(ctx);
        }
        let mut reads = 0;
        loop {
            let mut pending = self.out.len() - self.out_pos;
            if pending != 0 && self.write_ready {
                if let Err(kind) = self.write_out(ctx) {
                    return Step::Close(CloseReason::Io(kind));
                }
                pending = self.out.len() - self.out_pos;
            }
            let subscribed = || self.client.subscriptions.load(Relaxed) > 0;
            if pending != 0
                && self
                    .guard
                    .over(pending, subscribed(), &ctx.limits, ctx.now_ms)
            {
                ctx.output_limit_closes += 1;
                tracing::warn!(
                    client = self.client.id,
                    addr = %self.client.addr,
                    pending,
                    "client closed for overcoming its output buffer limit"
                );
                return Step::Close(CloseReason::OutputLimit);
            }
            if self.closing {
                return if pending == 0 {
                    Step::Close(CloseReason::Done)
                } else {
                    Step::Wait
                };
            }
            if self.waiting {
                return Step::Wait;
            }
            // The socket is full: produce no more replies until the peer reads; the WRITABLE
            // event resumes the buffered requests. Requests are still read into the input
            // buffer (up to the query-buffer limit), so a client that writes a whole pipeline
            // before it reads any reply (redis-py's `pipeline.execute()`) can finish writing
            // instead of both sides waiting on each other.
            let throttled = pending != 0 && !self.write_ready && ctx.backpressure;
            if self.dirty && !throttled {
                // Messages posted before this input was processed go out before its replies.
                if self.client.has_mail() {
                    self.deliver_mail(ctx);
                    if self.waiting {
                        return Step::Wait;
                    }
                }
                if !inline {
                    return Step::Submit;
                }
                if let Err(reason) = self.process_inline(ctx) {
                    return Step::Close(reason);
                }
                continue;
            }
            if self.read_ready && !self.eof {
                if reads == READ_BUDGET {
                    return Step::Yield;
                }
                reads += 1;
                if let Err(reason) = self.read_in(ctx) {
                    return Step::Close(reason);
                }
                continue;
            }
            if self.eof && !self.dirty {
                // (Requests still buffered behind a full socket run before the close.)
                self.closing = true;
                continue;
            }
            return Step::Wait;
        }
    }

    /// One read into the input buffer (edge-triggered: a short read means drained).
    fn read_in(&mut self, ctx: &mut Ctx) -> Result<(), CloseReason> {
        if self.inbuf.is_empty() {
            self.inbuf = ctx.pool.take_in();
            self.start = 0;
            self.end = 0;
        } else if self.start > 0 {
            // Move the partial request to the front.
            self.inbuf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == self.inbuf.len() {
            // Full, and the session could not complete a request from it: grow.
            if self.inbuf.len() >= ctx.max_input {
                ctx.input_limit_closes += 1;
                return Err(CloseReason::InputLimit);
            }
            let new_len = self.inbuf.len().saturating_mul(2).min(ctx.max_input);
            self.inbuf.resize(new_len, 0);
        }
        let space = self.inbuf.len() - self.end;
        loop {
            match (&self.stream).read(&mut self.inbuf[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    self.read_ready = false;
                    break;
                }
                Ok(n) => {
                    self.end += n;
                    ctx.in_bytes += n as u64;
                    ctx.reads += 1;
                    self.dirty = true;
                    if n < space && !self.rdhup {
                        self.read_ready = false;
                    }
                    self.client.last_active_ms.store(ctx.now_ms, Relaxed);
                    break;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    self.read_ready = false;
                    break;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(CloseReason::Io(e.kind())),
            }
        }
        if self.start == self.end {
            self.release_in(ctx);
        }
        Ok(())
    }

    /// One write of all pending output.
    fn write_out(&mut self, ctx: &mut Ctx) -> Result<(), ErrorKind> {
        loop {
            match (&self.stream).write(&self.out[self.out_pos..]) {
                Ok(n) => {
                    if self.client.client_type() == crate::clients::ClientType::Replica {
                        ctx.repl_out_bytes += n as u64;
                    } else {
                        ctx.out_bytes += n as u64;
                    }
                    ctx.writes += 1;
                    self.out_pos += n;
                    if self.out_pos == self.out.len() {
                        self.out_pos = 0;
                        ctx.pool.put_out(std::mem::take(&mut self.out));
                        self.client.omem.store(0, Relaxed);
                        self.guard.drained();
                    } else {
                        // A short write means the socket buffer is full.
                        self.write_ready = false;
                    }
                    return Ok(());
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    self.write_ready = false;
                    return Ok(());
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.kind()),
            }
        }
    }

    fn release_in(&mut self, ctx: &mut Ctx) {
        ctx.pool.put_in(std::mem::take(&mut self.inbuf));
        self.start = 0;
        self.end = 0;
    }

    /// Makes `out` ready for appending: a pooled buffer, unsent bytes moved to the front.
    fn prepare_out(&mut self, ctx: &mut Ctx) {
        if self.out.capacity() == 0 {
            self.out = ctx.pool.take_out();
        } else if self.out_pos > 0 && self.out_pos >= self.out.len() / 2 {
            self.out.drain(..self.out_pos);
            self.out_pos = 0;
        }
    }

    fn process_inline(&mut self, ctx: &mut Ctx) -> Result<(), CloseReason> {
        self.dirty = false;
        self.prepare_out(ctx);
        let Some(session) = self.session.as_deref_mut() else {
            return Err(CloseReason::Panic);
        };
        let input = &self.inbuf[self.start..self.end];
        let out = &mut self.out;
        match catch_unwind(AssertUnwindSafe(|| session.process(input, out))) {
            Ok(p) => self.after_process(p, ctx),
            Err(_) => {
                tracing::error!(
                    client = self.client.id,
                    "session panicked; closing the connection"
                );
                drop_quietly(self.session.take());
                Err(CloseReason::Panic)
            }
        }
    }

    fn after_process(&mut self, progress: Progress, ctx: &mut Ctx) -> Result<(), CloseReason> {
        let Progress {
            consumed,
            close,
            waiting,
        } = progress;
        self.waiting = waiting;
        let consumed = consumed.min(self.end - self.start);
        self.start += consumed;
        if close || self.client.killed() {
            self.closing = true;
        }
        if self.start == self.end {
            self.release_in(ctx);
            self.dirty = false;
        } else {
            // The session may have stopped early (e.g. to bound its output): go again.
            self.dirty = consumed > 0 && !self.closing && !waiting;
        }
        self.client
            .qbuf
            .store((self.end - self.start) as u64, Relaxed);
        self.client
            .qbuf_free
            .store((self.inbuf.len() - self.end) as u64, Relaxed);
        self.client
            .omem
            .store((self.out.len() - self.out_pos) as u64, Relaxed);
        Ok(())
    }

    /// Moves the session, the input and the output buffer out for a worker (dispatch).
    pub fn take_job(&mut self, token: usize, ctx: &mut Ctx) -> Option<Job> {
        self.dirty = false;
        self.prepare_out(ctx);
        let session = self.session.take()?;
        self.in_flight = true;
        Some(Job {
            token,
            session,
            input: std::mem::take(&mut self.inbuf),
            start: self.start,
            end: self.end,
            out: std::mem::take(&mut self.out),
        })
    }

    /// Takes back what [`Conn::take_job`] moved out, with the result.
    pub fn finish_job(&mut self, done: Done, ctx: &mut Ctx) -> Result<(), CloseReason> {
        self.in_flight = false;
        self.inbuf = done.input;
        self.start = done.start;
        self.end = done.end;
        self.out = done.out;
        if done.panicked {
            tracing::error!(
                client = self.client.id,
                "session panicked; closing the connection"
            );
            return Err(CloseReason::Panic);
        }
        self.session = done.session;
        self.after_process(done.progress, ctx)
    }

    /// Appends what other threads posted for this client; a completed deferred reply lets the
    /// session go on with the input it left buffered.
    pub fn deliver_mail(&mut self, ctx: &mut Ctx) {
        if self.in_flight {
            // The output buffer is out on a worker: the mail waits for its return (`drive`).
            return;
        }
        let mail = self.client.take_mail();
        if !mail.bytes.is_empty() {
            self.prepare_out(ctx);
            self.out.extend_from_slice(&mail.bytes);
            self.guard.pushed(mail.pushed);
            self.client
                .omem
                .store((self.out.len() - self.out_pos) as u64, Relaxed);
        }
        if mail.resume {
            self.waiting = false;
            self.dirty = self.start < self.end && !self.closing;
        }
    }

    /// Returns the buffers to the pool (the connection is being closed).
    pub fn release(mut self, ctx: &mut Ctx) {
        ctx.client_mem -= self.accounted as i64;
        if !self.inbuf.is_empty() {
            self.release_in(ctx);
        }
        if self.out.capacity() != 0 {
            ctx.pool.put_out(std::mem::take(&mut self.out));
        }
    }
}

/// A batch of input for a worker (dispatch model). At most one per connection is in flight.
pub struct Job {
    pub token: usize,
    session: Box<Session>,
    input: Vec<u8>,
    start: usize,
    end: usize,
    out: Vec<u8>,
}

/// A finished [`Job`], on its way back to the network thread.
pub struct Done {
    pub token: usize,
    session: Option<Box<Session>>,
    input: Vec<u8>,
    start: usize,
    end: usize,
    out: Vec<u8>,
    progress: Progress,
    panicked: bool,
}

impl Job {
    /// Runs the session over the input (on a worker thread).
    pub fn run(self) -> Done {
        let Job {
            token,
            mut session,
            input,
            start,
            end,
            mut out,
        } = self;
        let r = catch_unwind(AssertUnwindSafe(|| {
            session.process(&input[start..end], &mut out)
        }));
        match r {
            Ok(p) => Done {
                token,
                session: Some(session),
                input,
                start,
                end,
                out,
                progress: p,
                panicked: false,
            },
            Err(_) => {
                drop_quietly(Some(session));
                Done {
                    token,
                    session: None,
                    input,
                    start,
                    end,
                    out,
                    progress: Progress {
                        consumed: 0,
                        close: true,
                        waiting: false,
                    },
                    panicked: true,
                }
            }
        }
    }
}

/// Drops a session whose `process` panicked; its destructor may panic too.
fn drop_quietly(session: Option<Box<Session>>) {
    let _ = catch_unwind(AssertUnwindSafe(move || drop(session)));
}
