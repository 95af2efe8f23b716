//! Replication's state and its primary side: the role (primary, or replica of a host and
//! port), the replication id and offset, the backlog of the replication stream and the
//! replicas fed from it as it grows (`Feed`), the store's tap that encodes every change into
//! it (`tap`), the replicas attached here and their catching up (`primary`), WAIT, INFO
//! replication and ROLE.
//!
//! The replica side (the link to a primary, which applies the stream through the command
//! path) is `crate::replica_link`, above the command layer; REPLICAOF reaches it through
//! [`LinkStarter`]. The design is in docs/replication.md ("Design").

pub mod backlog;
pub mod encode;
mod primary;
pub mod sync_cut;
mod tap;

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, RwLock};

use crate::clients::{ClientInfo, TurnEnd};
use crate::config::ReplConfig;
use backlog::Backlog;

pub use primary::PsyncError;

/// Starts the link to a primary (implemented by `crate::replica_link`): a thread that runs
/// until the replication generation moves past `generation`.
pub trait LinkStarter: Send + Sync {
    fn start(&self, generation: u64, host: String, port: u16);
}

/// The replication ids: the current one and the one it replaced (PSYNC2: replicas of the old
/// primary may continue with it up to `second_offset`).
struct Ids {
    replid: String,
    replid2: String,
    /// The first offset the old id does not cover (-1: none).
    second_offset: i64,
}

/// A replica attached here (one PSYNC).
pub struct ReplicaInfo {
    pub client: Arc<ClientInfo>,
    pub ip: String,
    pub port: AtomicU64,
    /// `wait_bgsave` (0), `send_bulk` (1) or `online` (2).
    pub state: AtomicU8,
    /// The offset it acknowledged last (REPLCONF ACK).
    pub ack_offset: AtomicU64,
    /// When it acknowledged last (`Instant` of `Replication::started`, in ms).
    pub ack_ms: AtomicU64,
    /// Whether it is in `Feed::live` (caught up: each append is posted to it).
    live: AtomicBool,
    /// Where its sender goes on from after the stream outran its connection.
    resume_at: AtomicU64,
}

/// Unsent bytes a replica's connection may hold before the stream stops posting to it and
/// its sender goes on from the backlog at the connection's pace.
pub(crate) const MAX_PENDING: usize = 16 << 20;

/// The replication stream as it grows: the backlog, and the replicas that are caught up, which
/// are sent what was appended at the end of the appending thread's event-loop turn (at once on
/// other threads), under this lock (so none misses or repeats a byte when its sender hands it
/// over).
pub(crate) struct Feed {
    pub ring: Backlog,
    live: Vec<Live>,
    /// The tap's encoding space, kept between changes.
    scratch: Vec<u8>,
    /// When live replicas were last sent the stream.
    sent_at: Instant,
    /// Connections queued to with their wake left to `flush_direct`.
    to_flush: Vec<Arc<ClientInfo>>,
}

/// Unsent stream bytes that are sent at a turn's end whatever `repl-send-delay-us` says.
const SEND_AT_ONCE: u64 = 64 << 10;

/// A caught-up replica and the stream offset it has been sent up to.
struct Live {
    info: Arc<ReplicaInfo>,
    sent: u64,
}

/// The turn-end hook that sends live replicas the stream appended during the turn.
struct SendAtTurnEnd(Weak<Replication>);

impl TurnEnd for SendAtTurnEnd {
    fn turn_end(&self) {
        if let Some(replication) = self.0.upgrade() {
            replication.turn_end();
        }
    }
}

/// What a replica's connection announced in its handshake.
struct Announced {
    client: u64,
    port: u16,
    ip: Option<String>,
}

/// `Replication::fed` when no role feeds the stream.
const NOT_FED: u64 = u64::MAX;

const STATE_NAMES: [&str; 3] = ["wait_bgsave", "send_bulk", "online"];

/// A client waiting in WAIT.
struct Waiter {
    client: Arc<ClientInfo>,
    /// The stream offset that holds its writes (the stream's end when it called WAIT).
    target: u64,
    want: usize,
    deadline: Option<Instant>,
}

/// The server's replication state (one per server, in `Shared`).
pub struct Replication {
    store: Arc<store::Store>,
    sql: Option<Arc<sql::SqlEngine>>,
    persistence: Arc<crate::snapshot::Persistence>,
    pub config: Arc<RwLock<ReplConfig>>,
    /// Bumped at every role change: threads of the old role (ticker, link, senders) stop.
    generation: AtomicU64,
    replica: AtomicBool,
    master: Mutex<Option<(String, u16)>>,
    ids: Mutex<Ids>,
    pub(crate) backlog: Mutex<Feed>,
    /// Signalled when a replica leaves `Feed::live` or the generation changes.
    pub(crate) grown: Condvar,
    replicas: Mutex<Vec<Arc<ReplicaInfo>>>,
    /// What connections that have not sent PSYNC yet announced (REPLCONF).
    announced: Mutex<Vec<Announced>>,
    waiters: Mutex<Vec<Waiter>>,
    waiting: AtomicUsize,
    /// The generation the stream is fed for (`NOT_FED`: none): the tap encodes changes
    /// while it is the current one.
    fed: AtomicU64,
    link_starter: OnceLock<Arc<dyn LinkStarter>>,
    started: Instant,
    // The replica link's state, for INFO and -MASTERDOWN.
    pub link_up: AtomicBool,
    pub sync_in_progress: AtomicBool,
    pub last_io_ms: AtomicU64,
    pub sync_full: AtomicU64,
    pub sync_partial_ok: AtomicU64,
    pub sync_partial_err: AtomicU64,
    /// The largest CAS the stream brought: a promoted replica gives larger ones.
    pub max_cas: AtomicU64,
    /// `SendAtTurnEnd` for this one.
    turn_end: Arc<dyn TurnEnd>,
    /// Bytes written to replicas' sockets, by their connections' threads and by the stream's
    /// direct writes (INFO `total_net_repl_output_bytes`, as Redis counts them apart).
    pub sent_bytes: AtomicU64,
    /// Bytes the replica link read from its primary (INFO `total_net_repl_input_bytes`).
    pub received_bytes: AtomicU64,
}

/// 40 random hex digits (a replication id).
pub fn random_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut out = String::with_capacity(48);
    while out.len() < 40 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos(),
        );
        let _ = write!(out, "{:016x}", h.finish());
    }
    out.truncate(40);
    out
}

impl Replication {
    pub fn new(
        store: Arc<store::Store>,
        sql: Option<Arc<sql::SqlEngine>>,
        persistence: Arc<crate::snapshot::Persistence>,
        config: Arc<RwLock<ReplConfig>>,
    ) -> Arc<Replication> {
        let size = config.read().repl_backlog_size.max(1) as usize;
        Arc::new_cyclic(|me| Replication {
            turn_end: Arc::new(SendAtTurnEnd(me.clone())),
            store,
            sql,
            persistence,
            config,
            generation: AtomicU64::new(0),
            replica: AtomicBool::new(false),
            master: Mutex::new(None),
            ids: Mutex::new(Ids {
                replid: random_id(),
                replid2: "0".repeat(40),
                second_offset: -1,
            }),
            backlog: Mutex::new(Feed {
                ring: Backlog::new(size, 0),
                live: Vec::new(),
                scratch: Vec::new(),
                sent_at: Instant::now(),
                to_flush: Vec::new(),
            }),
            grown: Condvar::new(),
            replicas: Mutex::new(Vec::new()),
            announced: Mutex::new(Vec::new()),
            waiters: Mutex::new(Vec::new()),
            waiting: AtomicUsize::new(0),
            fed: AtomicU64::new(NOT_FED),
            link_starter: OnceLock::new(),
            started: Instant::now(),
            link_up: AtomicBool::new(false),
            sync_in_progress: AtomicBool::new(false),
            last_io_ms: AtomicU64::new(0),
            sync_full: AtomicU64::new(0),
            sync_partial_ok: AtomicU64::new(0),
            sync_partial_err: AtomicU64::new(0),
            max_cas: AtomicU64::new(0),
            sent_bytes: AtomicU64::new(0),
            received_bytes: AtomicU64::new(0),
        })
    }

    /// Installs the replica side (once, at start).
    pub fn set_link_starter(&self, starter: Arc<dyn LinkStarter>) {
        let _ = self.link_starter.set(starter);
    }

    pub(crate) fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    pub fn generation(&self) -> u64 {
        self.generation.load(Relaxed)
    }

    #[inline]
    pub fn is_replica(&self) -> bool {
        self.replica.load(Relaxed)
    }

    pub fn master(&self) -> Option<(String, u16)> {
        self.master.lock().clone()
    }

    pub fn replid(&self) -> String {
        self.ids.lock().replid.clone()
    }

    /// The stream offset (Redis's `master_repl_offset`).
    pub fn offset(&self) -> u64 {
        self.backlog.lock().ring.end()
    }

    /// Bytes the backlog's ring holds allocated (INFO `mem_replication_backlog`).
    pub fn backlog_memory(&self) -> u64 {
        self.backlog.lock().ring.memory() as u64
    }

    /// Whether this primary's changes are encoded into the stream (the current role's).
    pub(crate) fn feeding(&self) -> bool {
        self.fed.load(Relaxed) == self.generation()
    }

    /// REPLICAOF host port: becomes (or moves) a replica. Its replicas are dropped (they
    /// reconnect and resync from the new data), the stream stops, the store turns to replica
    /// mode (no expiry nor eviction of its own) and the link starts.
    pub fn replicaof(self: &Arc<Self>, host: String, port: u16) {
        let generation = {
            let mut master = self.master.lock();
            *master = Some((host.clone(), port));
            self.config.write().replicaof = Some((host.clone(), port));
            self.replica.store(true, Relaxed);
            self.store.set_replica_mode(true);
            if let Some(sql) = &self.sql {
                sql.set_expiry_paused(true);
            }
            self.generation.fetch_add(1, Relaxed) + 1
        };
        self.link_up.store(false, Relaxed);
        self.drop_replicas();
        self.grown.notify_all();
        if let Some(starter) = self.link_starter.get() {
            starter.start(generation, host, port);
        }
    }

    /// REPLICAOF NO ONE: a replica becomes a primary. Its replication id becomes the second
    /// id (replicas of the same old primary can continue from it: PSYNC2), a new id is drawn,
    /// and the stream starts at once so every write from now on is in it.
    pub fn promote(self: &Arc<Self>) {
        if !self.is_replica() {
            return;
        }
        {
            let _mark = self.persistence.repl_mark.lock();
            let mut master = self.master.lock();
            *master = None;
            self.config.write().replicaof = None;
            self.generation.fetch_add(1, Relaxed);
            self.replica.store(false, Relaxed);
            self.store.set_replica_mode(false);
            if let Some(sql) = &self.sql {
                sql.set_expiry_paused(false);
            }
            let offset = self.offset();
            let mut ids = self.ids.lock();
            ids.replid2 = std::mem::replace(&mut ids.replid, random_id());
            ids.second_offset = offset as i64 + 1;
        }
        *self.persistence.repl_mark.lock() = None;
        self.store.raise_cas_above(self.max_cas.load(Relaxed));
        self.link_up.store(false, Relaxed);
        self.sync_in_progress.store(false, Relaxed);
        self.grown.notify_all();
        self.start_stream();
    }

    /// The replica link finished a full sync from `replid` at `offset`: the stream (and the
    /// backlog sub-replicas are fed from) goes on from there; sub-replicas resync.
    pub fn synced(&self, replid: &str, offset: u64) {
        let size = self.config.read().repl_backlog_size.max(1) as usize;
        {
            // The replicas fed from the old stream are dropped below: nothing more goes to them.
            let mut feed = self.backlog.lock();
            feed.ring.reset(offset, size);
            for r in feed.live.drain(..) {
                r.info.live.store(false, Relaxed);
            }
        }
        self.grown.notify_all();
        let mut ids = self.ids.lock();
        ids.replid = replid.to_string();
        ids.replid2 = "0".repeat(40);
        ids.second_offset = -1;
        drop(ids);
        self.drop_replicas();
    }

    /// The primary answered +CONTINUE with a new id (it was promoted): continue under it.
    pub fn continued(&self, replid: &str) {
        let offset = self.offset();
        let mut ids = self.ids.lock();
        if ids.replid != replid {
            ids.replid2 = std::mem::replace(&mut ids.replid, replid.to_string());
            ids.second_offset = offset as i64 + 1;
        }
    }

    /// Bytes the replica link received and applied: forwarded as they are to sub-replicas.
    pub fn forward(&self, bytes: &[u8]) {
        self.push(&mut self.backlog.lock(), bytes);
    }

    /// Appends stream bytes to the backlog. The caught-up replicas are sent them at the end of
    /// this thread's event-loop turn, with everything else the turn appended (one write per
    /// replica per turn, as Redis writes to replicas in `beforeSleep`), or at once on a thread
    /// that runs no event loop.
    pub(crate) fn push(&self, feed: &mut Feed, bytes: &[u8]) {
        if feed.live.is_empty() {
            feed.ring.append(bytes);
            return;
        }
        let (end, room) = (feed.ring.end(), feed.ring.capacity() as u64);
        let unsent = feed.live.iter().map(|r| end - r.sent).max().unwrap_or(0);
        if unsent + bytes.len() as u64 > room {
            // The ring would drop bytes not sent yet: send what waits, then these from here.
            self.send_live(feed, false);
            feed.ring.append(bytes);
            let end = feed.ring.end();
            let parts = |_| Some([bytes, &[]]);
            Self::deliver_to(&mut feed.live, &self.grown, parts, end, None);
            return;
        }
        feed.ring.append(bytes);
        if !crate::clients::at_turn_end(&self.turn_end) {
            self.send_live(feed, false);
        }
    }

    /// The end of an event-loop turn that appended to the stream: the live replicas are sent
    /// it now, unless they were sent some less than `repl-send-delay-us` ago; then it waits
    /// for a later turn's end on this thread, at the latest when that delay is over (the loop
    /// polls no longer), and goes in one write with what the turns in between appended: fewer,
    /// larger writes, less CPU per change, at most that delay more lag, and no other thread
    /// woken for it.
    fn turn_end(&self) {
        let delay = Duration::from_micros(self.config.read().repl_send_delay_us);
        let mut feed = self.backlog.lock();
        let end = feed.ring.end();
        let unsent = feed.live.iter().map(|r| end - r.sent).max().unwrap_or(0);
        if unsent == 0 {
            return;
        }
        let due = feed.sent_at + delay;
        let now = Instant::now();
        if unsent >= SEND_AT_ONCE
            || now >= due
            || !crate::clients::at_turn_end_by(&self.turn_end, due)
        {
            self.send_live(&mut feed, true);
            drop(feed);
            self.flush_direct();
        }
    }

    /// Writes what `send_live(.., true)` queued, holding no lock of the stream.
    fn flush_direct(&self) {
        let mut clients = std::mem::take(&mut self.backlog.lock().to_flush);
        let mut sent = 0;
        for client in clients.drain(..) {
            sent += client.flush_stream();
        }
        self.sent_bytes.fetch_add(sent as u64, Relaxed);
        // The list's space serves the next turn (none allocated per turn).
        let mut feed = self.backlog.lock();
        if feed.to_flush.is_empty() {
            feed.to_flush = clients;
        }
    }

    /// Takes a changed `repl-backlog-size` (CONFIG SET): the ring keeps its newest bytes that
    /// fit, after the live replicas were sent what it held for them.
    fn apply_backlog_size(&self, feed: &mut Feed) {
        let size = self.config.read().repl_backlog_size.max(1) as usize;
        if size != feed.ring.capacity() {
            self.send_live(feed, false);
            feed.ring.resize(size);
        }
    }

    /// Queues for every caught-up replica the stream bytes it has not been sent yet; `direct`:
    /// the caller writes them with `flush_direct` once it released the lock, else the
    /// connections' threads are woken to.
    fn send_live(&self, feed: &mut Feed, direct: bool) {
        let end = feed.ring.end();
        if feed.live.iter().all(|r| r.sent == end) {
            return;
        }
        feed.sent_at = Instant::now();
        let ring = &feed.ring;
        let to_flush = direct.then_some(&mut feed.to_flush);
        let parts = |from| ring.slices(from).ok();
        Self::deliver_to(&mut feed.live, &self.grown, parts, end, to_flush);
    }

    /// Sends each replica of `live` `parts(sent)` (the bytes from its offset to `end`). One
    /// whose connection holds more than `MAX_PENDING` unsent bytes leaves the live set: its
    /// sender goes on from the backlog as the connection drains.
    fn deliver_to<'a>(
        live: &mut Vec<Live>,
        grown: &Condvar,
        parts: impl Fn(u64) -> Option<[&'a [u8]; 2]>,
        end: u64,
        mut to_flush: Option<&mut Vec<Arc<ClientInfo>>>,
    ) {
        let before = live.len();
        live.retain_mut(|r| {
            let client = &r.info.client;
            let (pending, resume_at) = if r.sent == end {
                (Some(0), end)
            } else {
                match parts(r.sent) {
                    Some(parts) => {
                        if let Some(list) = to_flush.as_mut() {
                            if !list.iter().any(|c| Arc::ptr_eq(c, client)) {
                                list.push(client.clone());
                            }
                        }
                        (client.queue_stream(parts, to_flush.is_none()), end)
                    }
                    // Not held any more: its sender finds it so and drops the replica.
                    None => (None, r.sent),
                }
            };
            r.sent = end;
            if client.killed() || pending.is_none_or(|p| p > MAX_PENDING) {
                r.info.resume_at.store(resume_at, Relaxed);
                r.info.live.store(false, Relaxed);
                return false;
            }
            true
        });
        if live.len() != before {
            grown.notify_all();
        }
    }

    fn drop_replicas(&self) {
        for r in self.replicas.lock().drain(..) {
            r.client.kill();
        }
    }

    /// REPLCONF listening-port of a connection (before its PSYNC).
    pub fn set_listening_port(&self, client: u64, port: u16) {
        self.announce(client, |a| a.port = port);
    }

    /// REPLCONF ip-address of a connection (before its PSYNC): `replica-announce-ip`.
    pub fn set_announced_ip(&self, client: u64, ip: String) {
        self.announce(client, |a| a.ip = Some(ip));
    }

    fn announce(&self, client: u64, f: impl FnOnce(&mut Announced)) {
        let mut announced = self.announced.lock();
        let at = match announced.iter().position(|a| a.client == client) {
            Some(at) => at,
            None => {
                // Bounded: handshakes that never reach PSYNC are forgotten oldest first.
                if announced.len() >= 1024 {
                    announced.remove(0);
                }
                announced.push(Announced {
                    client,
                    port: 0,
                    ip: None,
                });
                announced.len() - 1
            }
        };
        f(&mut announced[at]);
    }

    /// REPLCONF ACK from a replica's connection.
    pub fn ack(&self, client: u64, offset: u64) {
        let now = self.now_ms();
        if let Some(r) = self.replicas.lock().iter().find(|r| r.client.id == client) {
            r.ack_offset.fetch_max(offset, Relaxed);
            r.ack_ms.store(now, Relaxed);
        }
        if self.waiting.load(Relaxed) > 0 {
            self.serve_waiters();
        }
    }

    /// Drops the online replicas that acknowledged nothing for `repl-timeout` seconds (they
    /// acknowledge every second), as Redis does; the replica's side drops a primary silent as
    /// long (`replica_link`).
    fn drop_silent_replicas(&self) {
        let limit = self.config.read().repl_timeout.max(1) * 1000;
        let now = self.now_ms();
        for r in self.replicas.lock().iter() {
            let silent = now.saturating_sub(r.ack_ms.load(Relaxed));
            if r.state.load(Relaxed) == 2 && silent > limit && !r.client.killed() {
                tracing::warn!(replica = %r.client.addr, "replica timed out: disconnecting");
                r.client.kill();
            }
        }
    }

    /// Replicas that acknowledged within `min-replicas-max-lag` seconds.
    pub fn good_replicas(&self) -> usize {
        let lag_ms = self.config.read().min_replicas_max_lag * 1000;
        let now = self.now_ms();
        self.replicas
            .lock()
            .iter()
            .filter(|r| {
                r.state.load(Relaxed) == 2 && now - r.ack_ms.load(Relaxed).min(now) <= lag_ms
            })
            .count()
    }

    /// Replicas online that acknowledged `offset`.
    pub fn acknowledged(&self, offset: u64) -> usize {
        self.replicas
            .lock()
            .iter()
            .filter(|r| r.state.load(Relaxed) == 2 && r.ack_offset.load(Relaxed) >= offset)
            .count()
    }

    pub fn connected_replicas(&self) -> usize {
        self.replicas.lock().len()
    }

    /// WAIT numreplicas timeout: replies (on `client`'s mailbox) with the number of replicas
    /// that acknowledged this client's writes, once `want` did or at the deadline. The
    /// client's writes were encoded as they were made: they are before the stream's end.
    pub fn wait(self: &Arc<Self>, client: Arc<ClientInfo>, want: usize, timeout_ms: u64) {
        // The ticker times the wait out; a primary without replicas starts it here (its
        // deadline then answers 0).
        self.start_ticker();
        let deadline =
            (timeout_ms > 0).then(|| Instant::now() + std::time::Duration::from_millis(timeout_ms));
        self.waiters.lock().push(Waiter {
            client,
            target: self.offset(),
            want,
            deadline,
        });
        self.waiting.fetch_add(1, Relaxed);
        // Replicas acknowledge at once instead of within the second (none: nothing to ask, and
        // the offset stays where it is, as Redis's does).
        if self.connected_replicas() > 0 {
            let mut out = Vec::new();
            encode::encode_command(&[b"REPLCONF", b"GETACK", b"*"], &mut out);
            let mut feed = self.backlog.lock();
            self.push(&mut feed, &out);
            // Not held for the turn's end nor `repl-send-delay-us`: the waiter waits on it.
            self.send_live(&mut feed, true);
            drop(feed);
            self.flush_direct();
        }
        self.serve_waiters();
    }

    /// CLIENT UNBLOCK of a client blocked in WAIT: answers it now, as Redis does, with the
    /// count of replicas that acknowledged its writes so far (`error` None: as at its
    /// timeout) or with the error `error`; false when the client is not waiting here.
    pub fn unblock_waiter(&self, client_id: u64, error: Option<&[u8]>) -> bool {
        let mut waiters = self.waiters.lock();
        let Some(at) = waiters.iter().position(|w| w.client.id == client_id) else {
            return false;
        };
        let w = waiters.swap_remove(at);
        drop(waiters);
        self.waiting.fetch_sub(1, Relaxed);
        let mut out = Vec::new();
        match error {
            Some(msg) => resp::reply::error(&mut out, msg),
            None => {
                let acked = self
                    .replicas
                    .lock()
                    .iter()
                    .filter(|r| {
                        r.state.load(Relaxed) == 2 && r.ack_offset.load(Relaxed) >= w.target
                    })
                    .count();
                resp::reply::integer(&mut out, acked as i64);
            }
        }
        w.client.post(&out, true);
        true
    }

    /// Answers the waiters that are done.
    fn serve_waiters(&self) {
        let mut waiters = self.waiters.lock();
        if waiters.is_empty() {
            return;
        }
        let acks: Vec<u64> = self
            .replicas
            .lock()
            .iter()
            .filter(|r| r.state.load(Relaxed) == 2)
            .map(|r| r.ack_offset.load(Relaxed))
            .collect();
        let now = Instant::now();
        waiters.retain_mut(|w| {
            let acked = acks.iter().filter(|&&a| a >= w.target).count();
            let expired = w.deadline.is_some_and(|d| now >= d);
            if acked >= w.want || expired || w.client.closed() {
                let mut out = Vec::new();
                resp::reply::integer(&mut out, acked as i64);
                w.client.post(&out, true);
                self.waiting.fetch_sub(1, Relaxed);
                return false;
            }
            true
        });
    }

    /// INFO's `# Replication` section, with Redis's field names.
    pub fn info(&self, t: &mut String) {
        let mut field = |name: &str, value: &dyn std::fmt::Display| {
            let _ = write!(t, "{name}:{value}\r\n");
        };
        let offset = self.offset();
        if let Some((host, port)) = self.master() {
            let up = self.link_up.load(Relaxed);
            field("role", &"slave");
            field("master_host", &host);
            field("master_port", &port);
            field("master_link_status", &if up { "up" } else { "down" });
            let io = self.now_ms().saturating_sub(self.last_io_ms.load(Relaxed)) / 1000;
            field(
                "master_last_io_seconds_ago",
                &if up { io as i64 } else { -1 },
            );
            let syncing = self.sync_in_progress.load(Relaxed);
            field("master_sync_in_progress", &(syncing as u8));
            field("slave_read_repl_offset", &offset);
            field("slave_repl_offset", &offset);
            if !up {
                // Since the last byte from the primary (-1: never linked), as Redis shows it.
                let last = self.last_io_ms.load(Relaxed);
                let down = if last == 0 { -1 } else { io as i64 };
                field("master_link_down_since_seconds", &down);
            }
            field("slave_priority", &self.config.read().replica_priority);
            field(
                "slave_read_only",
                &(self.config.read().replica_read_only as u8),
            );
            field("replica_announced", &1);
        } else {
            field("role", &"master");
        }
        let replicas = self.replicas.lock().clone();
        field("connected_slaves", &replicas.len());
        let now = self.now_ms();
        for (i, r) in replicas.iter().enumerate() {
            let state = STATE_NAMES[r.state.load(Relaxed).min(2) as usize];
            let lag = now.saturating_sub(r.ack_ms.load(Relaxed)) / 1000;
            field(
                &format!("slave{i}"),
                &format_args!(
                    "ip={},port={},state={state},offset={},lag={lag}",
                    r.ip,
                    r.port.load(Relaxed),
                    r.ack_offset.load(Relaxed)
                ),
            );
        }
        let min = self.config.read().min_replicas_to_write;
        if min > 0 {
            field("min_slaves_good_slaves", &self.good_replicas());
        }
        field("master_failover_state", &"no-failover");
        let ids = self.ids.lock();
        field("master_replid", &ids.replid);
        field("master_replid2", &ids.replid2);
        drop(ids);
        field("master_repl_offset", &offset);
        field("second_repl_offset", &self.ids.lock().second_offset);
        let mut feed = self.backlog.lock();
        self.apply_backlog_size(&mut feed);
        let b = &feed.ring;
        field(
            "repl_backlog_active",
            &((self.feeding() || self.is_replica()) as u8),
        );
        field("repl_backlog_size", &b.capacity());
        field("repl_backlog_first_byte_offset", &(b.start() + 1));
        field("repl_backlog_histlen", &b.len());
    }

    /// ROLE's reply.
    pub fn role(&self, out: &mut Vec<u8>) {
        use resp::reply;
        let offset = self.offset() as i64;
        if let Some((host, port)) = self.master() {
            reply::array_len(out, 5);
            reply::bulk(out, b"slave");
            reply::bulk(out, host.as_bytes());
            reply::integer(out, port as i64);
            let state: &[u8] = if self.link_up.load(Relaxed) {
                b"connected"
            } else if self.sync_in_progress.load(Relaxed) {
                b"sync"
            } else {
                b"connect"
            };
            reply::bulk(out, state);
            reply::integer(out, offset);
            return;
        }
        let replicas = self.replicas.lock().clone();
        reply::array_len(out, 3);
        reply::bulk(out, b"master");
        reply::integer(out, offset);
        reply::array_len(out, replicas.len());
        for r in replicas {
            reply::array_len(out, 3);
            reply::bulk(out, r.ip.as_bytes());
            reply::bulk(out, r.port.load(Relaxed).to_string().as_bytes());
            reply::bulk(out, r.ack_offset.load(Relaxed).to_string().as_bytes());
        }
    }
}
