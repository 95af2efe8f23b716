//! Clients blocked in BLPOP / BRPOP / BLMOVE / BRPOPLPUSH / BLMPOP until one of their lists
//! has an element, or in BZPOPMIN / BZPOPMAX / BZMPOP until one of their sorted sets has a member, or their
//! timeout passes (or CLIENT UNBLOCK).
//!
//! A blocked client does not hold its I/O thread: its command registers a waiter here and
//! marks the connection waiting (as an SQL statement does); the reply comes later through the
//! client's mailbox (`ClientInfo::post`), which resumes the connection. Commands that push to
//! a list say so (`key_ready`); the command path serves the ready keys after the pushing
//! command is done and its keys unlocked (`serve`), popping for the waiters of each key in the
//! order they blocked (FIFO per key, as Redis). A timer thread answers timed-out waiters with
//! the null reply.
//!
//! It also owns the list move that LMOVE, RPOPLPUSH and BLMOVE share with serving a blocked
//! BLMOVE (`move_element`), and so the two ways a collection command is refused (`Fail`, and
//! the error texts `command::WRONGTYPE` and `command::OOM` are made from): the command layer
//! sits above this module and uses them from here.
//!
//! Lock order: `serving` (held by whoever serves or expires waiters), then a shard, then
//! `inner`; `key_ready` and `block` take `inner` alone, so a command holding shards may call
//! them.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use resp::reply::{self, Version};
use store::collection::List;
use store::{Author, Collection, Db, Kind, Store};

use crate::clients::{peer_gone, ClientInfo};

/// An end of a list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    Left,
    Right,
}

/// What a waiter does once one of its keys has an element.
#[derive(Clone, Debug)]
pub enum Op {
    /// BLPOP / BRPOP: pop from this end; replies `[key, element]`.
    Pop(End),
    /// BLMOVE: pop from `from`, push to `to` of `dst`; replies the element.
    Move { dst: Vec<u8>, from: End, to: End },
    /// BZPOPMIN / BZPOPMAX (`max`): pop the lowest / highest member; replies `[key, member,
    /// score]`.
    ZPop { max: bool },
    /// BLMPOP: pop up to `count` from this end; replies `[key, [element...]]`.
    MPop { end: End, count: usize },
    /// BZMPOP: pop up to `count` lowest / highest members; replies `[key, [[member, score]...]]`.
    ZMPop { max: bool, count: usize },
}

struct Waiter {
    client: Weak<ClientInfo>,
    keys: Vec<Vec<u8>>,
    op: Op,
    deadline: Option<Instant>,
    version: Version,
}

#[derive(Default)]
struct Inner {
    waiters: HashMap<u64, Waiter>,
    /// Per key, the tickets of its waiters in the order they blocked.
    by_key: HashMap<Vec<u8>, VecDeque<u64>>,
    /// Keys pushed to since the last `serve`.
    ready: Vec<Vec<u8>>,
    next_ticket: u64,
}

#[derive(Default)]
pub struct Blocking {
    inner: Mutex<Inner>,
    serving: Mutex<()>,
    /// Wakes the timer thread when a waiter with an earlier deadline arrives.
    timer: Condvar,
    /// Waiters now: `key_ready` does nothing while there are none.
    count: AtomicUsize,
    /// `ready` is not empty: `serve` has work.
    pending: AtomicBool,
    timer_started: AtomicBool,
}

/// Pops one element from `end` of the list under `key`, as `author`; None when there is none
/// (no key, an empty or a non-list key).
fn pop_one(store: &Store, author: Author, key: &[u8], end: End) -> Option<Box<[u8]>> {
    store.write(author, key, |e| {
        if e.item()?.kind() != Kind::List {
            return None;
        }
        e.shrink_collection(|c| {
            let Collection::List(l) = c else {
                return (None, false);
            };
            let v = take(l, end);
            let changed = v.is_some();
            (v, changed)
        })?
    })
}

/// Pops up to `count` of the lowest (or, with `max`, highest) members of the sorted set under
/// `key`, as `author`; None when there is none (no key, or not a sorted set).
fn zpop_some(
    store: &Store,
    author: Author,
    key: &[u8],
    max: bool,
    count: usize,
) -> Option<Vec<(Vec<u8>, f64)>> {
    store.write(author, key, |e| {
        if e.item()?.kind() != Kind::ZSet {
            return None;
        }
        e.shrink_collection(|c| {
            let Collection::ZSet(z) = c else {
                return (None, false);
            };
            let picked = z.pop_ends(max, count);
            let changed = !picked.is_empty();
            (changed.then_some(picked), changed)
        })?
    })
}

/// Pops up to `count` elements from `end` of the list under `key`, as `author`; None when
/// there is none.
fn pop_some(
    store: &Store,
    author: Author,
    key: &[u8],
    end: End,
    count: usize,
) -> Option<Vec<Box<[u8]>>> {
    store.write(author, key, |e| {
        if e.item()?.kind() != Kind::List {
            return None;
        }
        e.shrink_collection(|c| {
            let Collection::List(l) = c else {
                return (None, false);
            };
            let popped: Vec<Box<[u8]>> = (0..count).map_while(|_| take(l, end)).collect();
            let changed = !popped.is_empty();
            (changed.then_some(popped), changed)
        })?
    })
}

fn take(l: &mut List, end: End) -> Option<Box<[u8]>> {
    match end {
        End::Left => l.pop_front(),
        End::Right => l.pop_back(),
    }
}

/// Why a collection command could not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fail {
    WrongType,
    Oom,
}

impl Fail {
    /// The error reply's text, as Redis words it (`command::WRONGTYPE`, `command::OOM`).
    pub const fn message(self) -> &'static [u8] {
        match self {
            Fail::WrongType => b"WRONGTYPE Operation against a key holding the wrong kind of value",
            Fail::Oom => b"OOM command not allowed when used memory > 'maxmemory'.",
        }
    }
}

/// LMOVE's work, shared with RPOPLPUSH, BLMOVE and serving a blocked BLMOVE: pops from `from`
/// of `src`, pushes to `to` of `dst`. `Ok(None)` when `src` has nothing. The element is copied
/// to `dst` first and taken from `src` after, so that a push refused at the memory limit leaves
/// both lists as they were (popping first lost the element); with `src == dst` copying then
/// popping is the same rotation.
pub fn move_element(
    db: &mut Db<'_, '_>,
    src: &[u8],
    dst: &[u8],
    from: End,
    to: End,
) -> Result<Option<Box<[u8]>>, Fail> {
    let value = db.read(src, |item| match item {
        None => Ok(None),
        Some(item) => match item.collection() {
            Some(Collection::List(l)) => Ok(match from {
                End::Left => l.iter().next().map(Box::from),
                End::Right => l.iter().next_back().map(Box::from),
            }),
            _ => Err(Fail::WrongType),
        },
    })?;
    let Some(value) = value else {
        return Ok(None);
    };
    db.write(dst, |e| match e.item() {
        Some(item) if item.kind() != Kind::List => Err(Fail::WrongType),
        Some(_) => match e.update_collection(|c| {
            if let Collection::List(l) = c {
                put(l, to, &value);
            }
            ((), true)
        }) {
            Some(Err(_)) => Err(Fail::Oom),
            _ => Ok(()),
        },
        None => {
            let mut l = List::new();
            put(&mut l, to, &value);
            e.put_collection(Collection::List(l), None)
                .map(|_| ())
                .map_err(|_| Fail::Oom)
        }
    })?;
    db.write(src, |e| {
        e.shrink_collection(|c| match c {
            Collection::List(l) => {
                let popped = take(l, from);
                ((), popped.is_some())
            }
            _ => ((), false),
        })
    });
    Ok(Some(value))
}

fn put(l: &mut List, end: End, v: &[u8]) {
    match end {
        End::Left => l.push_front(v),
        End::Right => l.push_back(v),
    }
}

/// What serving one waiter came to.
enum Served {
    /// Nothing to pop: the waiter stays.
    Nothing,
    /// The reply to post.
    Reply(Vec<u8>),
}

impl Blocking {
    /// Blocks `client` on `keys` until one has an element (`timeout` None: forever).
    pub fn block(
        self: &Arc<Self>,
        client: &Arc<ClientInfo>,
        keys: Vec<Vec<u8>>,
        op: Op,
        timeout: Option<Duration>,
        version: Version,
    ) {
        self.start_timer();
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut inner = self.inner.lock();
        let ticket = inner.next_ticket;
        inner.next_ticket += 1;
        for key in &keys {
            inner
                .by_key
                .entry(key.clone())
                .or_default()
                .push_back(ticket);
            // A push between the command's own attempt and now is not missed: look again.
            inner.ready.push(key.clone());
        }
        inner.waiters.insert(
            ticket,
            Waiter {
                client: Arc::downgrade(client),
                keys,
                op,
                deadline,
                version,
            },
        );
        self.count.fetch_add(1, Relaxed);
        self.pending.store(true, Relaxed);
        if deadline.is_some() {
            self.timer.notify_one();
        }
    }

    /// `key` may have got elements (a push): its waiters are served after the command.
    #[inline]
    pub fn key_ready(&self, key: &[u8]) {
        if self.count.load(Relaxed) == 0 {
            return;
        }
        let mut inner = self.inner.lock();
        if inner.by_key.contains_key(key) {
            inner.ready.push(key.to_vec());
            self.pending.store(true, Relaxed);
        }
    }

    /// Whether `serve` has anything to do (one relaxed load on the command path).
    #[inline]
    pub fn pending(&self) -> bool {
        self.pending.load(Relaxed)
    }

    /// Serves the waiters of the keys pushed to, in the order they blocked, while their lists
    /// have elements. Called with no shard locked.
    pub fn serve(&self, store: &Store) {
        let _serving = self.serving.lock();
        loop {
            let ready = {
                let mut inner = self.inner.lock();
                self.pending.store(false, Relaxed);
                std::mem::take(&mut inner.ready)
            };
            if ready.is_empty() {
                return;
            }
            for key in ready {
                self.serve_key(store, &key);
            }
        }
    }

    fn serve_key(&self, store: &Store, key: &[u8]) {
        loop {
            let (ticket, client, op, version) = {
                let mut inner = self.inner.lock();
                let Some(&ticket) = inner.by_key.get(key).and_then(|q| q.front()) else {
                    return;
                };
                let w = &inner.waiters[&ticket];
                match w
                    .client
                    .upgrade()
                    .filter(|c| !c.closed() && !peer_gone(c.fd))
                {
                    Some(c) => (ticket, c, w.op.clone(), w.version),
                    None => {
                        self.forget(&mut inner, ticket);
                        continue;
                    }
                }
            };
            let author = Author(client.id);
            let served = match &op {
                Op::Pop(end) => match pop_one(store, author, key, *end) {
                    None => Served::Nothing,
                    Some(v) => {
                        let mut out = Vec::new();
                        reply::array_len(&mut out, 2);
                        reply::bulk(&mut out, key);
                        reply::bulk(&mut out, &v);
                        Served::Reply(out)
                    }
                },
                Op::Move { dst, from, to } => self.serve_move(store, author, key, dst, *from, *to),
                Op::ZPop { max } => match zpop_some(store, author, key, *max, 1) {
                    None => Served::Nothing,
                    Some(popped) => {
                        let (member, score) = &popped[0];
                        let mut out = Vec::new();
                        reply::array_len(&mut out, 3);
                        reply::bulk(&mut out, key);
                        reply::bulk(&mut out, member);
                        reply::double(&mut out, *score, version);
                        Served::Reply(out)
                    }
                },
                Op::MPop { end, count } => match pop_some(store, author, key, *end, *count) {
                    None => Served::Nothing,
                    Some(popped) => {
                        let mut out = Vec::new();
                        reply::array_len(&mut out, 2);
                        reply::bulk(&mut out, key);
                        reply::array_len(&mut out, popped.len());
                        popped.iter().for_each(|v| reply::bulk(&mut out, v));
                        Served::Reply(out)
                    }
                },
                Op::ZMPop { max, count } => match zpop_some(store, author, key, *max, *count) {
                    None => Served::Nothing,
                    Some(popped) => {
                        let mut out = Vec::new();
                        reply::array_len(&mut out, 2);
                        reply::bulk(&mut out, key);
                        reply::array_len(&mut out, popped.len());
                        for (member, score) in &popped {
                            reply::array_len(&mut out, 2);
                            reply::bulk(&mut out, member);
                            reply::double(&mut out, *score, version);
                        }
                        Served::Reply(out)
                    }
                },
            };
            let Served::Reply(out) = served else {
                return;
            };
            let mut inner = self.inner.lock();
            self.forget(&mut inner, ticket);
            drop(inner);
            if let Op::Move { dst, .. } = &op {
                self.key_ready(dst);
            }
            client.post(&out, true);
        }
    }

    fn serve_move(
        &self,
        store: &Store,
        author: Author,
        src: &[u8],
        dst: &[u8],
        from: End,
        to: End,
    ) -> Served {
        let mut locked = store.lock_keys(author, [src, dst]);
        let mut out = Vec::new();
        match move_element(&mut Db::Locked(&mut locked), src, dst, from, to) {
            Ok(None) => return Served::Nothing,
            Ok(Some(v)) => reply::bulk(&mut out, &v),
            Err(fail) => reply::error(&mut out, fail.message()),
        }
        Served::Reply(out)
    }

    /// Removes waiter `ticket` from every key it waits on.
    fn forget(&self, inner: &mut Inner, ticket: u64) -> Option<Waiter> {
        let w = inner.waiters.remove(&ticket)?;
        for key in &w.keys {
            if let Some(q) = inner.by_key.get_mut(key) {
                q.retain(|&t| t != ticket);
                if q.is_empty() {
                    inner.by_key.remove(key);
                }
            }
        }
        self.count.fetch_sub(1, Relaxed);
        Some(w)
    }

    /// Unblocks the waiters of `client_id` (CLIENT UNBLOCK): with the timeout's null reply, or
    /// with `error`. Returns whether it was blocked here.
    pub fn unblock(&self, client_id: u64, error: Option<&[u8]>) -> bool {
        let _serving = self.serving.lock();
        let mut inner = self.inner.lock();
        let tickets: Vec<u64> = inner
            .waiters
            .iter()
            .filter(|(_, w)| w.client.upgrade().is_some_and(|c| c.id == client_id))
            .map(|(&t, _)| t)
            .collect();
        let mut found = false;
        for t in tickets {
            if let Some(w) = self.forget(&mut inner, t) {
                found = true;
                if let Some(c) = w.client.upgrade() {
                    let mut out = Vec::new();
                    match error {
                        Some(msg) => reply::error(&mut out, msg),
                        None => timeout_reply(&mut out, &w),
                    }
                    c.post(&out, true);
                }
            }
        }
        found
    }

    fn start_timer(self: &Arc<Self>) {
        if self.timer_started.swap(true, Relaxed) {
            return;
        }
        let weak = Arc::downgrade(self);
        std::thread::Builder::new()
            .name("cairn-blocking".into())
            .spawn(move || timer_loop(weak))
            .expect("spawn blocking timer thread");
    }

    /// Answers the waiters whose deadline passed; returns the next deadline.
    fn expire(&self, now: Instant) -> Option<Instant> {
        let _serving = self.serving.lock();
        let mut inner = self.inner.lock();
        let due: Vec<u64> = inner
            .waiters
            .iter()
            .filter(|(_, w)| {
                w.deadline.is_some_and(|d| d <= now)
                    || w.client
                        .upgrade()
                        .is_none_or(|c| c.closed() || peer_gone(c.fd))
            })
            .map(|(&t, _)| t)
            .collect();
        for t in due {
            if let Some(w) = self.forget(&mut inner, t) {
                if let Some(c) = w.client.upgrade() {
                    let mut out = Vec::new();
                    timeout_reply(&mut out, &w);
                    c.post(&out, true);
                }
            }
        }
        inner.waiters.values().filter_map(|w| w.deadline).min()
    }
}

/// The reply of a waiter whose time is up (or CLIENT UNBLOCK'd): a null array, whatever the
/// command (Redis's `replyToBlockedClientTimedOut`: BLMOVE and BRPOPLPUSH too, `*-1` in RESP2).
fn timeout_reply(out: &mut Vec<u8>, w: &Waiter) {
    reply::null_array(out, w.version)
}

fn timer_loop(blocking: Weak<Blocking>) {
    /// Longest sleep, so that the thread notices the server is gone and reaps disconnected
    /// waiters without a deadline.
    const TICK: Duration = Duration::from_millis(500);
    loop {
        let Some(b) = blocking.upgrade() else { return };
        let next = b.expire(Instant::now());
        let wake = next.map_or(Instant::now() + TICK, |d| d.min(Instant::now() + TICK));
        let mut inner = b.inner.lock();
        if inner
            .waiters
            .values()
            .all(|w| w.deadline.is_none_or(|d| d > Instant::now()))
        {
            b.timer.wait_until(&mut inner, wake);
        }
    }
}
