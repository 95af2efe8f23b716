//! Network runtime: listeners, the accept thread, event loops and (dispatch model) workers.
//!
//! Threads:
//! - `cairn-accept`: one mio Poll over every listener. Each accepted connection is registered
//!   in the [`crate::clients::ClientRegistry`] and sent, round-robin, over a channel to an
//!   event loop, which is woken once per batch by its [`Notifier`] (a `mio::Waker`).
//! - `--io-model reactor`: `--threads` event loops (`cairn-io-N`), each with its own Poll over
//!   its own connections, running `Session::process` inline; by default one per two available
//!   cores ([`threads`]).
//! - `--io-model dispatch`: one event loop (`cairn-net`) does all socket I/O and hands each
//!   connection's input, with its session, to `--workers` threads (`cairn-worker-N`) through a
//!   queue; results come back through a vector plus the loop's waker. At most one job per
//!   connection is in flight, so replies stay in order.
//!
//! The socket-level logic lives in [`conn`] (buffers, reads, writes, limits) and is driven by
//! [`event_loop`]; another backend (io_uring) would drive the same `Conn` state machine.

mod accept;
mod conn;
mod dispatch;
mod event_loop;
mod limits;
mod listen;
mod pool;

use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mio::{Poll, Token, Waker};
use tracing::{info, warn};

use crate::clients::OwnerWaker;
use crate::config::IoModel;
use crate::protocol::Protocol;
use crate::shared::Shared;

use accept::{Acceptor, LoopHandle};
use dispatch::{DispatchLink, DoneQueue, JobQueue};
use event_loop::EventLoop;
use listen::{Listener, Stream};

/// Token of each Poll's waker.
const WAKER: usize = usize::MAX;
/// How long event loops keep flushing pending replies at shutdown.
const DRAIN_TIMEOUT: Duration = Duration::from_millis(500);

/// Wakes one thread's Poll: new connections, finished jobs, kills, shutdown.
pub struct Notifier {
    waker: Waker,
    kill_scan: AtomicBool,
    /// (token, client id) of connections with mail waiting.
    mail: parking_lot::Mutex<Vec<(usize, u64)>>,
}

impl Notifier {
    fn new(poll: &Poll) -> io::Result<Arc<Notifier>> {
        Ok(Arc::new(Notifier {
            waker: Waker::new(poll.registry(), Token(WAKER))?,
            kill_scan: AtomicBool::new(false),
            mail: parking_lot::Mutex::new(Vec::new()),
        }))
    }

    pub fn wake(&self) {
        if let Err(e) = self.waker.wake() {
            warn!("waker: {e}");
        }
    }

    fn take_mail(&self, into: &mut Vec<(usize, u64)>) {
        std::mem::swap(&mut *self.mail.lock(), into);
    }

    fn take_kill_scan(&self) -> bool {
        self.kill_scan.load(Relaxed) && self.kill_scan.swap(false, Relaxed)
    }
}

/// The registry reaches a client's thread through its notifier.
impl OwnerWaker for Notifier {
    /// A client of this thread was killed: look for it and close it.
    fn request_kill_scan(&self) {
        self.kill_scan.store(true, Relaxed);
        self.wake();
    }

    /// A client of this thread has mail (see `ClientInfo::post`).
    fn request_mail(&self, token: usize, client_id: u64) {
        let first = {
            let mut mail = self.mail.lock();
            mail.push((token, client_id));
            mail.len() == 1
        };
        if first {
            self.wake();
        }
    }
}

/// A connection on its way from the accept thread to an event loop.
pub(crate) struct NewConn {
    stream: Stream,
    client: Arc<crate::clients::ClientInfo>,
    protocol: Protocol,
}

/// The running network side of the server.
pub struct Server {
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
    accept_notifier: Option<Arc<Notifier>>,
    loops: Vec<JoinHandle<()>>,
    loop_notifiers: Vec<Arc<Notifier>>,
    jobs: Option<Arc<JobQueue>>,
    workers: Vec<JoinHandle<()>>,
    unix_paths: Vec<PathBuf>,
    /// What is listening, e.g. "resp=127.0.0.1:6380".
    pub endpoints: Vec<String>,
}

fn spawn(name: String, f: impl FnOnce() + Send + 'static) -> io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name(name).spawn(f)
}

fn bind_listeners(shared: &Shared) -> io::Result<Vec<Listener>> {
    let cfg = &shared.config;
    let mut listeners = Vec::new();
    let ctx = |what: String| move |e: io::Error| io::Error::new(e.kind(), format!("{what}: {e}"));
    if cfg.port != 0 {
        for addr in listen::resolve(&cfg.bind, cfg.port)? {
            listeners.push(
                Listener::tcp(addr, Protocol::Resp)
                    .map_err(ctx(format!("cannot listen on {addr}")))?,
            );
        }
    }
    if let Some(path) = &cfg.unixsocket {
        listeners.push(
            Listener::unix(path, cfg.unixsocketperm, Protocol::Resp).map_err(ctx(format!(
                "cannot listen on unix socket {}",
                path.display()
            )))?,
        );
    }
    if cfg.memcache_port != 0 {
        if cfg.memcache_tcp_enabled() {
            if cfg.requirepass.is_some() {
                warn!(
                    "the memcached listener on port {} has no authentication: requirepass does not protect it",
                    cfg.memcache_port
                );
            }
            for addr in listen::resolve(&cfg.bind, cfg.memcache_port)? {
                listeners.push(
                    Listener::tcp(addr, Protocol::Memcache)
                        .map_err(ctx(format!("cannot listen on {addr}")))?,
                );
            }
        } else {
            info!(
                "memcached TCP listener disabled: requirepass is set and the memcached protocol has no \
                 authentication (pass --memcache-port explicitly to enable it)"
            );
        }
    }
    if let Some(path) = &cfg.memcache_unixsocket {
        listeners.push(
            Listener::unix(path, cfg.unixsocketperm, Protocol::Memcache).map_err(ctx(format!(
                "cannot listen on unix socket {}",
                path.display()
            )))?,
        );
    }
    if listeners.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "no listener configured",
        ));
    }
    Ok(listeners)
}

impl Server {
    /// Binds every listener and starts the threads.
    pub fn start(shared: Arc<Shared>) -> io::Result<Server> {
        let listeners = bind_listeners(&shared)?;
        let unix_paths: Vec<PathBuf> = listeners
            .iter()
            .filter_map(|l| l.unix_path().map(PathBuf::from))
            .collect();
        let endpoints: Vec<String> = listeners
            .iter()
            .map(|l| {
                let proto = match l.protocol {
                    Protocol::Resp => "resp",
                    Protocol::Memcache => "memcache",
                };
                format!("{proto}={}", l.display)
            })
            .collect();
        let mut server = Server {
            shared: shared.clone(),
            accept: None,
            accept_notifier: None,
            loops: Vec::new(),
            loop_notifiers: Vec::new(),
            jobs: None,
            workers: Vec::new(),
            unix_paths,
            endpoints,
        };
        match server.start_threads(listeners) {
            Ok(()) => Ok(server),
            Err(e) => {
                server.shutdown();
                Err(e)
            }
        }
    }

    fn start_threads(&mut self, listeners: Vec<Listener>) -> io::Result<()> {
        let shared = &self.shared;
        let cfg = &shared.config;
        let (n_loops, dispatch) = match cfg.io_model {
            IoModel::Reactor => (cfg.threads.max(1), false),
            IoModel::Dispatch => (1, true),
        };
        let mut handles = Vec::with_capacity(n_loops);
        for i in 0..n_loops {
            let poll = Poll::new()?;
            let notifier = Notifier::new(&poll)?;
            let (tx, rx) = mpsc::channel();
            let link = if dispatch {
                let jobs = Arc::new(JobQueue::new(cfg.workers.max(1)));
                let done = Arc::new(DoneQueue::new(notifier.clone()));
                for w in 0..cfg.workers.max(1) {
                    let (jobs, done) = (jobs.clone(), done.clone());
                    self.workers
                        .push(spawn(format!("cairn-worker-{w}"), move || {
                            dispatch::worker(jobs, done)
                        })?);
                }
                self.jobs = Some(jobs.clone());
                Some(DispatchLink::new(jobs, done))
            } else {
                None
            };
            let event_loop = EventLoop::new(poll, notifier.clone(), rx, shared.clone(), link);
            let name = if dispatch {
                "cairn-net".to_string()
            } else {
                format!("cairn-io-{i}")
            };
            self.loops.push(spawn(name, move || event_loop.run())?);
            self.loop_notifiers.push(notifier.clone());
            handles.push(LoopHandle { notifier, tx });
        }
        let poll = Poll::new()?;
        self.accept_notifier = Some(Notifier::new(&poll)?);
        let acceptor = Acceptor::new(poll, listeners, handles, shared.clone())?;
        self.accept = Some(spawn("cairn-accept".into(), move || acceptor.run())?);
        let model = match cfg.io_model {
            IoModel::Reactor => format!("io-model=reactor threads={n_loops}"),
            IoModel::Dispatch => format!("io-model=dispatch workers={}", cfg.workers.max(1)),
        };
        info!(
            "ready to accept connections: {} ({model})",
            self.endpoints.join(" ")
        );
        Ok(())
    }

    /// Stops accepting, lets the event loops flush pending replies (at most [`DRAIN_TIMEOUT`]),
    /// stops the workers and removes the unix socket files.
    pub fn shutdown(mut self) {
        self.shared.shutdown.store(true, Relaxed);
        if let Some(n) = &self.accept_notifier {
            n.wake();
        }
        for n in &self.loop_notifiers {
            n.wake();
        }
        let deadline = Instant::now() + DRAIN_TIMEOUT + Duration::from_millis(200);
        let mut threads: Vec<JoinHandle<()>> = self.accept.take().into_iter().collect();
        threads.append(&mut self.loops);
        join_until(threads, deadline);
        if let Some(jobs) = &self.jobs {
            jobs.stop();
        }
        join_until(
            std::mem::take(&mut self.workers),
            deadline + Duration::from_millis(100),
        );
        for p in &self.unix_paths {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Joins the threads that finish before `deadline`; the others are left behind.
fn join_until(threads: Vec<JoinHandle<()>>, deadline: Instant) {
    for t in threads {
        while !t.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
        if t.is_finished() {
            let _ = t.join();
        } else {
            warn!(
                "thread {} did not stop in time",
                t.thread().name().unwrap_or("?")
            );
        }
    }
}
