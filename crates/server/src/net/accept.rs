//! The accept thread: one mio Poll over every listener; new connections go round-robin to the
//! event loops through their channel, with one wake-up per loop per batch.

use std::io::{self, Write};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::{Events, Interest, Poll, Token};
use tracing::{debug, error, warn};

use super::listen::{Listener, Stream};
use super::{NewConn, Notifier, WAKER};
use crate::clients::ClientInfo;
use crate::protocol::Protocol;
use crate::shared::Shared;

/// An event loop that receives connections.
pub(crate) struct LoopHandle {
    pub notifier: Arc<Notifier>,
    pub tx: Sender<NewConn>,
}

pub(crate) struct Acceptor {
    poll: Poll,
    listeners: Vec<Listener>,
    loops: Vec<LoopHandle>,
    shared: Arc<Shared>,
    next: usize,
    to_wake: Vec<bool>,
    /// After EMFILE and the like: retry accepting then (edge-triggered: no new event comes).
    retry_at: Option<Instant>,
    last_warning: Option<Instant>,
}

impl Acceptor {
    pub fn new(
        poll: Poll,
        mut listeners: Vec<Listener>,
        loops: Vec<LoopHandle>,
        shared: Arc<Shared>,
    ) -> io::Result<Acceptor> {
        for (i, l) in listeners.iter_mut().enumerate() {
            poll.registry()
                .register(l.source(), Token(i), Interest::READABLE)?;
        }
        let n = loops.len();
        Ok(Acceptor {
            poll,
            listeners,
            loops,
            shared,
            next: 0,
            to_wake: vec![false; n],
            retry_at: None,
            last_warning: None,
        })
    }

    pub fn run(mut self) {
        let mut events = Events::with_capacity(64);
        loop {
            let timeout = self
                .retry_at
                .map(|t| t.saturating_duration_since(Instant::now()));
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() != io::ErrorKind::Interrupted {
                    error!("accept poll: {e}");
                    std::thread::sleep(Duration::from_millis(10));
                }
                continue;
            }
            if self.shared.shutdown.load(Relaxed) {
                break;
            }
            let mut accepted = 0;
            if self.retry_at.is_some_and(|t| Instant::now() >= t) {
                self.retry_at = None;
                for i in 0..self.listeners.len() {
                    accepted += self.accept_all(i);
                }
            }
            for ev in events.iter() {
                let t = ev.token().0;
                if t != WAKER && t < self.listeners.len() {
                    accepted += self.accept_all(t);
                }
            }
            if accepted != 0 {
                self.shared
                    .stats
                    .total_connections_received
                    .fetch_add(accepted, Relaxed);
            }
            for (i, w) in self.to_wake.iter_mut().enumerate() {
                if std::mem::take(w) {
                    self.loops[i].notifier.wake();
                }
            }
        }
        // Dropping the listeners closes them; the unix socket files are removed by the server.
    }

    /// Accepts until the listener would block; returns how many connections were handed out.
    fn accept_all(&mut self, i: usize) -> u64 {
        let mut n = 0;
        loop {
            let acc = match self.listeners[i].accept() {
                Ok(a) => a,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted
                    ) =>
                {
                    continue
                }
                Err(e) => {
                    // EMFILE, ENFILE, ENOBUFS, ENOMEM...: the pending connection stays queued;
                    // try again shortly.
                    if self
                        .last_warning
                        .is_none_or(|t| t.elapsed() >= Duration::from_secs(1))
                    {
                        warn!("accept on {}: {e}", self.listeners[i].display);
                        self.last_warning = Some(Instant::now());
                    }
                    self.retry_at = Some(Instant::now() + Duration::from_millis(100));
                    break;
                }
            };
            let protocol = self.listeners[i].protocol;
            let clients = &self.shared.clients;
            if clients.count() >= self.shared.settings.maxclients.load(Relaxed) {
                reject(&acc.stream, protocol);
                self.shared.stats.rejected_connections.fetch_add(1, Relaxed);
                debug!(addr = %acc.addr, "rejected: max number of clients reached");
                continue;
            }
            let target = self.next % self.loops.len();
            self.next = self.next.wrapping_add(1);
            let fd = acc.stream.fd();
            let client = Arc::new(ClientInfo::new(
                clients.next_id(),
                acc.addr,
                acc.laddr,
                fd,
                protocol,
                Some(self.loops[target].notifier.clone()),
            ));
            clients.register(client.clone());
            let id = client.id;
            if self.loops[target]
                .tx
                .send(NewConn {
                    stream: acc.stream,
                    client,
                    protocol,
                })
                .is_err()
            {
                clients.unregister(id);
                continue;
            }
            self.to_wake[target] = true;
            n += 1;
        }
        n
    }
}

/// Tells a client over the limit why it is being disconnected (best effort, non-blocking).
fn reject(stream: &Stream, protocol: Protocol) {
    let msg: &[u8] = match protocol {
        Protocol::Resp => b"-ERR max number of clients reached\r\n",
        Protocol::Memcache => b"SERVER_ERROR max number of clients reached\r\n",
    };
    let mut s = stream;
    let _ = s.write(msg);
}
