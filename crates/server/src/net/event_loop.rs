//! The mio event loop that owns connections: a reactor thread (sessions run inline) or the
//! dispatch model's network thread (sessions run on workers, see [`super::dispatch`]).

use std::io;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::{Events, Interest, Poll, Token};
use tracing::{debug, error};

use super::conn::{CloseReason, Conn, Ctx, Step};
use super::dispatch::DispatchLink;
use super::{NewConn, Notifier, DRAIN_TIMEOUT, WAKER};
use crate::session::Session;
use crate::shared::Shared;

/// Connections by token, with reuse of free slots.
struct Slab {
    entries: Vec<Option<Conn>>,
    free: Vec<usize>,
    len: usize,
}

impl Slab {
    fn new() -> Slab {
        Slab {
            entries: Vec::new(),
            free: Vec::new(),
            len: 0,
        }
    }

    fn next_key(&self) -> usize {
        self.free.last().copied().unwrap_or(self.entries.len())
    }

    fn insert(&mut self, c: Conn) -> usize {
        self.len += 1;
        match self.free.pop() {
            Some(k) => {
                self.entries[k] = Some(c);
                k
            }
            None => {
                self.entries.push(Some(c));
                self.entries.len() - 1
            }
        }
    }

    fn get_mut(&mut self, k: usize) -> Option<&mut Conn> {
        self.entries.get_mut(k).and_then(Option::as_mut)
    }

    fn remove(&mut self, k: usize) -> Option<Conn> {
        let c = self.entries.get_mut(k)?.take()?;
        self.free.push(k);
        self.len -= 1;
        Some(c)
    }

    fn keys(&self) -> Vec<usize> {
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, c)| c.is_some())
            .map(|(k, _)| k)
            .collect()
    }
}

pub(crate) struct EventLoop {
    poll: Poll,
    notifier: Arc<Notifier>,
    rx: Receiver<NewConn>,
    shared: Arc<Shared>,
    conns: Slab,
    ctx: Ctx,
    /// Connections that yielded with work left, driven again next turn.
    again: Vec<usize>,
    again_next: Vec<usize>,
    /// Set at shutdown: stop by then.
    deadline: Option<Instant>,
    /// Some in the dispatch model.
    dispatch: Option<DispatchLink>,
    /// Reused list of connections with mail.
    mail: Vec<(usize, u64)>,
}

impl EventLoop {
    pub fn new(
        poll: Poll,
        notifier: Arc<Notifier>,
        rx: Receiver<NewConn>,
        shared: Arc<Shared>,
        dispatch: Option<DispatchLink>,
    ) -> EventLoop {
        let ctx = Ctx::new(&shared.settings);
        EventLoop {
            poll,
            notifier,
            rx,
            shared,
            conns: Slab::new(),
            ctx,
            again: Vec::new(),
            again_next: Vec::new(),
            deadline: None,
            dispatch,
            mail: Vec::new(),
        }
    }

    pub fn run(mut self) {
        let mut events = Events::with_capacity(1024);
        crate::clients::defer_stream_wakes();
        crate::clients::allow_turn_end_timers();
        loop {
            crate::clients::send_deferred_wakes();
            let timeout = if !self.again.is_empty() {
                Some(Duration::ZERO)
            } else {
                self.deadline.map(|d| {
                    d.saturating_duration_since(Instant::now())
                        .min(Duration::from_millis(50))
                })
            };
            // A turn-end hook that holds work (the replication stream's send delay) makes this
            // poll only look for more input; finding none, the next turn's start does the work.
            let timeout = crate::clients::poll_timeout(timeout);
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() != io::ErrorKind::Interrupted {
                    error!("poll: {e}");
                    std::thread::sleep(Duration::from_millis(10));
                }
                continue;
            }
            // Connections that yielded with input left are more input too.
            crate::clients::polled(events.is_empty() && self.again.is_empty());
            self.ctx.refresh(&self.shared.settings);
            let mut woke = false;
            for ev in events.iter() {
                let t = ev.token().0;
                if t == WAKER {
                    woke = true;
                    continue;
                }
                if let Some(c) = self.conns.get_mut(t) {
                    c.on_event(
                        ev.is_readable(),
                        ev.is_writable(),
                        ev.is_read_closed(),
                        ev.is_error(),
                    );
                    self.drive(t);
                }
            }
            if woke {
                self.on_wake();
            }
            if !self.again.is_empty() {
                std::mem::swap(&mut self.again, &mut self.again_next);
                let mut again = std::mem::take(&mut self.again_next);
                for t in again.drain(..) {
                    self.drive(t);
                }
                self.again_next = again;
            }
            if let Some(d) = &mut self.dispatch {
                d.submit();
            }
            self.ctx.flush_stats(&self.shared);
            if let Some(deadline) = self.deadline {
                if self.conns.len == 0 || Instant::now() >= deadline {
                    break;
                }
            }
        }
        for t in self.conns.keys() {
            self.close(t, CloseReason::Shutdown);
        }
        self.ctx.flush_stats(&self.shared);
    }

    fn drive(&mut self, t: usize) {
        let inline = self.dispatch.is_none();
        let Some(c) = self.conns.get_mut(t) else {
            return;
        };
        match c.drive(&mut self.ctx, inline) {
            Step::Wait => self.sync_interest(t),
            Step::Yield => {
                self.again.push(t);
                self.sync_interest(t);
            }
            Step::Submit => {
                if let (Some(job), Some(d)) = (c.take_job(t, &mut self.ctx), &mut self.dispatch) {
                    d.pending.push(job);
                } else {
                    self.close(t, CloseReason::Panic);
                }
            }
            Step::Close(reason) => self.close(t, reason),
        }
    }

    /// Registers WRITABLE only while output waits for a full socket.
    fn sync_interest(&mut self, t: usize) {
        let Some(c) = self.conns.get_mut(t) else {
            return;
        };
        let want = c.wants_writable();
        if want == c.writable_interest {
            return;
        }
        let interest = if want {
            Interest::READABLE | Interest::WRITABLE
        } else {
            Interest::READABLE
        };
        match self
            .poll
            .registry()
            .reregister(&mut c.stream, Token(t), interest)
        {
            Ok(()) => c.writable_interest = want,
            Err(e) => self.close(t, CloseReason::Io(e.kind())),
        }
    }

    fn close(&mut self, t: usize, reason: CloseReason) {
        let Some(c) = self.conns.get_mut(t) else {
            return;
        };
        if c.in_flight {
            // Its session is on a worker: close when it comes back.
            c.start_closing();
            return;
        }
        let Some(c) = self.conns.remove(t) else {
            return;
        };
        debug!(client = c.client.id, addr = %c.client.addr, ?reason, "connection closed");
        self.shared.clients.unregister(c.client.id);
        // Closing the fd removes it from the poller.
        c.release(&mut self.ctx);
    }

    fn add(&mut self, nc: NewConn) {
        let NewConn {
            stream,
            client,
            protocol,
        } = nc;
        if self.deadline.is_some() {
            self.shared.clients.unregister(client.id);
            return;
        }
        let session = Box::new(Session::new(protocol, self.shared.clone(), client.clone()));
        let mut conn = Conn::new(stream, client, session);
        let t = self.conns.next_key();
        if let Err(e) =
            self.poll
                .registry()
                .register(&mut conn.stream, Token(t), Interest::READABLE)
        {
            error!("register connection: {e}");
            self.shared.clients.unregister(conn.client.id);
            return;
        }
        conn.client.token.store(t, Relaxed);
        let k = self.conns.insert(conn);
        debug_assert_eq!(k, t);
    }

    fn on_wake(&mut self) {
        while let Ok(nc) = self.rx.try_recv() {
            self.add(nc);
        }
        let mut mail = std::mem::take(&mut self.mail);
        self.notifier.take_mail(&mut mail);
        for (t, id) in mail.drain(..) {
            if let Some(c) = self.conns.get_mut(t).filter(|c| c.client.id == id) {
                c.deliver_mail(&mut self.ctx);
                self.drive(t);
            }
        }
        self.mail = mail;
        if self.dispatch.is_some() {
            self.collect_done();
        }
        if self.notifier.take_kill_scan() {
            for t in self.conns.keys() {
                if let Some(c) = self.conns.get_mut(t) {
                    if c.client.killed() {
                        self.close(t, CloseReason::Killed);
                    }
                }
            }
        }
        if self.deadline.is_none() && self.shared.shutdown.load(Relaxed) {
            self.deadline = Some(Instant::now() + DRAIN_TIMEOUT);
            for t in self.conns.keys() {
                if let Some(c) = self.conns.get_mut(t) {
                    c.start_closing();
                }
                self.drive(t);
            }
        }
    }

    /// Takes back the dispatch model's finished jobs.
    fn collect_done(&mut self) {
        let Some(d) = &mut self.dispatch else { return };
        let mut done = d.take_done();
        for job in done.drain(..) {
            let t = job.token;
            let Some(c) = self.conns.get_mut(t) else {
                error!("finished job for unknown connection {t}");
                continue;
            };
            match c.finish_job(job, &mut self.ctx) {
                // A killed client is already closing: its output is flushed, then it closes.
                Ok(()) => self.drive(t),
                Err(reason) => self.close(t, reason),
            }
        }
        if let Some(d) = &mut self.dispatch {
            d.give_back(done);
        }
    }
}
