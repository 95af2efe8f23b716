//! Client-side caching support (Redis's CLIENT TRACKING): remembers which clients read which
//! keys and pushes an invalidation to them when a key changes, from either protocol and on
//! expiry, eviction, TAG.DEL and FLUSHALL.
//!
//! Default mode keeps a table key → clients, filled by the tracked clients' reads and emptied
//! for a key when it changes (one invalidation per read, as in Redis). BCAST mode matches changed
//! keys against registered prefixes instead; as Redis batches them per event-loop cycle, the keys
//! a batch of commands ([`batch`]) changes go out as one message per client and prefix. The table
//! holds at most `--tracking-table-max-keys` keys; when full, the oldest-inserted shard entry
//! goes, and its clients are told (never silence). A client whose REDIRECT target disconnected
//! gets Redis's `tracking-redir-broken` push (RESP3) instead of each invalidation. Nothing here
//! runs for writes while no client tracks: the store checks one flag.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use resp::reply::{self, Version};

use crate::clients::ClientInfo;
use crate::pubsub::version_of;

const TABLE_SHARDS: usize = 64;
pub const INVALIDATE_CHANNEL: &[u8] = b"__redis__:invalidate";

thread_local! {
    /// BCAST invalidations held back until the batch of commands running on this thread ends.
    static PENDING: RefCell<Pending> = RefCell::new(Pending::default());
}

/// A BCAST client's keys changed under one of its prefixes.
type Bucket = (Arc<Tracker>, Vec<Vec<u8>>);

#[derive(Default)]
struct Pending {
    /// Open [`Batch`] guards on this thread.
    depth: usize,
    /// (tracker address, prefix index) → changed keys matching that prefix.
    buckets: HashMap<(usize, usize), Bucket>,
}

/// Holds BCAST invalidations back while alive (nested guards: until the outermost drops), then
/// sends each client one message per prefix with every key changed meanwhile, as Redis does
/// once per event-loop cycle. Sessions hold one around each batch of input they process.
pub struct Batch(());

/// Starts (or joins) this thread's batch of BCAST invalidations.
pub fn batch() -> Batch {
    PENDING.with(|p| p.borrow_mut().depth += 1);
    Batch(())
}

impl Drop for Batch {
    fn drop(&mut self) {
        let buckets = PENDING.with(|p| {
            let mut p = p.borrow_mut();
            p.depth -= 1;
            if p.depth == 0 && !p.buckets.is_empty() {
                std::mem::take(&mut p.buckets)
            } else {
                HashMap::new()
            }
        });
        if buckets.is_empty() {
            return;
        }
        let mut buckets: Vec<_> = buckets.into_iter().collect();
        // Deterministic order: by client, then by prefix (Redis walks its prefixes in order).
        buckets.sort_by_key(|((_, prefix), (t, _))| (t.id, *prefix));
        let mut buf = Vec::new();
        for (_, (tracker, mut keys)) in buckets {
            if !tracker.enabled.load(Relaxed) {
                continue; // turned off since (CLIENT TRACKING OFF later in the batch)
            }
            keys.sort_unstable();
            keys.dedup();
            let keys: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
            deliver(&mut buf, &tracker, Some(&keys));
        }
    }
}

/// One client's tracking settings, shared by the table entries it created.
pub struct Tracker {
    /// The tracking client.
    pub id: u64,
    /// The tracking client's connection (told when its redirect target is gone).
    pub owner: Arc<ClientInfo>,
    /// Who receives its invalidations (itself, or the REDIRECT client).
    pub target: Arc<ClientInfo>,
    pub noloop: bool,
    /// Turned off (CLIENT TRACKING OFF, disconnect): stale table entries are skipped.
    pub enabled: AtomicBool,
    /// BCAST prefixes, sorted; `""` matches every key.
    pub bcast_prefixes: Vec<Vec<u8>>,
    /// The REDIRECT target disconnected (CLIENT TRACKINGINFO `broken_redirect`).
    pub broken_redirect: AtomicBool,
}

impl Tracker {
    /// Whether invalidations cannot be delivered because the REDIRECT target is gone.
    fn redirect_broken(&self) -> bool {
        self.target.id != self.id && self.target.closed()
    }
}

#[derive(Default)]
struct TableShard {
    keys: HashMap<Vec<u8>, Vec<Arc<Tracker>>>,
    /// Insertion order, for dropping keys when the table is full.
    order: std::collections::VecDeque<Vec<u8>>,
}

pub struct Tracking {
    shards: Box<[Mutex<TableShard>]>,
    hasher: RandomState,
    keys: AtomicUsize,
    max_keys: usize,
    bcast: RwLock<Vec<Arc<Tracker>>>,
    /// Every enabled tracker (for the flush message).
    trackers: RwLock<Vec<Arc<Tracker>>>,
    store: Arc<store::Store>,
}

impl Tracking {
    pub fn new(store: Arc<store::Store>, max_keys: usize) -> Tracking {
        Tracking {
            shards: (0..TABLE_SHARDS).map(|_| Mutex::default()).collect(),
            hasher: RandomState::new(),
            keys: AtomicUsize::new(0),
            max_keys: max_keys.max(1),
            bcast: RwLock::new(Vec::new()),
            trackers: RwLock::new(Vec::new()),
            store,
        }
    }

    fn shard(&self, key: &[u8]) -> &Mutex<TableShard> {
        &self.shards[self.hasher.hash_one(key) as usize % TABLE_SHARDS]
    }

    /// Keys in the table (INFO tracking_total_keys).
    pub fn table_keys(&self) -> usize {
        self.keys.load(Relaxed)
    }

    /// Starts delivering invalidations for `tracker`; `bcast` matches every changed key against
    /// its prefixes (all keys when it has none) instead of remembering reads.
    pub fn enable(&self, tracker: Arc<Tracker>, bcast: bool) {
        if bcast {
            self.bcast.write().push(tracker.clone());
        }
        self.trackers.write().push(tracker);
        self.store.set_listening(store::Listener::Tracking, true);
    }

    pub fn disable(&self, tracker: &Arc<Tracker>) {
        tracker.enabled.store(false, Relaxed);
        self.bcast.write().retain(|t| !Arc::ptr_eq(t, tracker));
        let mut trackers = self.trackers.write();
        trackers.retain(|t| !Arc::ptr_eq(t, tracker));
        if trackers.is_empty() {
            self.store.set_listening(store::Listener::Tracking, false);
        }
    }

    /// Remembers that `tracker`'s client read `key`.
    pub fn remember(&self, key: &[u8], tracker: &Arc<Tracker>) {
        let mut dropped = None;
        {
            let mut shard = self.shard(key).lock();
            let shard = &mut *shard;
            match shard.keys.get_mut(key) {
                Some(list) => {
                    if !list.iter().any(|t| Arc::ptr_eq(t, tracker)) {
                        list.push(tracker.clone());
                    }
                }
                None => {
                    shard.keys.insert(key.to_vec(), vec![tracker.clone()]);
                    shard.order.push_back(key.to_vec());
                    if self.keys.fetch_add(1, Relaxed) + 1 > self.max_keys {
                        dropped = pop_oldest(shard);
                    }
                }
            }
        }
        if let Some((key, trackers)) = dropped {
            self.keys.fetch_sub(1, Relaxed);
            send(&group(&[(&key, trackers)], 0));
        }
    }

    /// `keys` changed; `author` (the writing client, named by the store's notification) is not
    /// told when it tracks with NOLOOP.
    fn changed(&self, keys: &[&[u8]], author: store::Author) {
        let author = author.0;
        let mut hits: Vec<(&[u8], Vec<Arc<Tracker>>)> = Vec::new();
        for &key in keys {
            let mut shard = self.shard(key).lock();
            if let Some(trackers) = shard.keys.remove(key) {
                self.keys.fetch_sub(1, Relaxed);
                hits.push((key, trackers));
            }
        }
        if !hits.is_empty() {
            send(&group(&hits, author));
        }
        let bcast = self.bcast.read();
        if !bcast.is_empty() {
            broadcast(&bcast, keys, author);
        }
    }

    fn flushed(&self) {
        for shard in self.shards.iter() {
            let mut shard = shard.lock();
            let n = shard.keys.len();
            shard.keys.clear();
            shard.order.clear();
            self.keys.fetch_sub(n, Relaxed);
        }
        let mut buf = Vec::new();
        let mut seen = Vec::new();
        for t in self.trackers.read().iter() {
            if t.redirect_broken() {
                deliver(&mut buf, t, None);
                continue;
            }
            if seen.contains(&t.target.id) {
                continue;
            }
            seen.push(t.target.id);
            deliver(&mut buf, t, None);
        }
    }
}

/// Matches changed keys against the BCAST trackers' prefixes: into this thread's open batch, or
/// sent at once (one message per client and prefix) when no batch is open (expiry, eviction).
fn broadcast(bcast: &[Arc<Tracker>], keys: &[&[u8]], author: u64) {
    PENDING.with(|p| {
        let mut p = p.borrow_mut();
        let batching = p.depth > 0;
        let mut buf = Vec::new();
        for t in bcast {
            if !t.enabled.load(Relaxed) || (t.noloop && t.id == author) {
                continue;
            }
            for (i, prefix) in t.bcast_prefixes.iter().enumerate() {
                let mut matching = keys.iter().filter(|k| k.starts_with(prefix)).peekable();
                if matching.peek().is_none() {
                    continue;
                }
                if batching {
                    let slot = (Arc::as_ptr(t) as usize, i);
                    let bucket = p
                        .buckets
                        .entry(slot)
                        .or_insert_with(|| (t.clone(), Vec::new()));
                    bucket.1.extend(matching.map(|k| k.to_vec()));
                } else {
                    let keys: Vec<&[u8]> = matching.copied().collect();
                    deliver(&mut buf, t, Some(&keys));
                }
            }
        }
    })
}
/// Takes the oldest key still in the shard's table.
fn pop_oldest(shard: &mut TableShard) -> Option<(Vec<u8>, Vec<Arc<Tracker>>)> {
    while let Some(key) = shard.order.pop_front() {
        if let Some(trackers) = shard.keys.remove(&key) {
            return Some((key, trackers));
        }
    }
    None
}

/// Groups changed keys by receiving client, skipping disabled trackers and NOLOOP authors.
/// Trackers whose REDIRECT target is gone are told so instead, once each.
fn group<'k>(hits: &[(&'k [u8], Vec<Arc<Tracker>>)], author: u64) -> Vec<Delivery<'k>> {
    let mut by_target: Vec<Delivery<'k>> = Vec::new();
    for (key, trackers) in hits {
        for t in trackers {
            if !t.enabled.load(Relaxed) || (t.noloop && t.id == author) {
                continue;
            }
            if t.redirect_broken() {
                if !by_target
                    .iter()
                    .any(|d| matches!(d, Delivery::Broken(b) if Arc::ptr_eq(b, t)))
                {
                    by_target.push(Delivery::Broken(t.clone()));
                }
                continue;
            }
            let found = by_target.iter_mut().find_map(|d| match d {
                Delivery::Keys(c, keys) if c.id == t.target.id => Some(keys),
                _ => None,
            });
            match found {
                Some(keys) => {
                    if !keys.contains(key) {
                        keys.push(key)
                    }
                }
                None => by_target.push(Delivery::Keys(t.target.clone(), vec![*key])),
            }
        }
    }
    by_target
}

/// What one changed-keys notification sends to one connection.
enum Delivery<'k> {
    /// An invalidation of these keys to this receiver.
    Keys(Arc<ClientInfo>, Vec<&'k [u8]>),
    /// `tracking-redir-broken` to this tracker's own connection.
    Broken(Arc<Tracker>),
}

/// Invalidation messages sent since start (the metrics endpoint's tracking pushes).
static PUSHES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Invalidation messages sent since start, to every tracking client.
pub fn pushes() -> u64 {
    PUSHES.load(Relaxed)
}

fn send(deliveries: &[Delivery<'_>]) {
    let mut buf = Vec::new();
    for d in deliveries {
        match d {
            Delivery::Keys(target, keys) => {
                buf.clear();
                write_invalidation(&mut buf, target, Some(keys.as_slice()));
                if !buf.is_empty() {
                    PUSHES.fetch_add(1, Relaxed);
                    target.post(&buf, false);
                }
            }
            Delivery::Broken(t) => deliver(&mut buf, t, None),
        }
    }
}

/// Sends `tracker`'s receiver an invalidation of `keys` (None: everything), or, when its
/// REDIRECT target has disconnected, tells the tracking client itself as Redis does: a RESP3
/// `tracking-redir-broken` push with the target's id (nothing for RESP2, which has no pushes).
fn deliver(buf: &mut Vec<u8>, tracker: &Tracker, keys: Option<&[&[u8]]>) {
    buf.clear();
    if tracker.redirect_broken() {
        tracker.broken_redirect.store(true, Relaxed);
        let owner = &tracker.owner;
        if version_of(owner) == Version::Resp3 {
            reply::push_len(buf, 2, Version::Resp3);
            reply::bulk(buf, b"tracking-redir-broken");
            reply::integer(buf, tracker.target.id as i64);
            owner.post(buf, false);
        }
        return;
    }
    write_invalidation(buf, &tracker.target, keys);
    if !buf.is_empty() {
        PUSHES.fetch_add(1, Relaxed);
        tracker.target.post(buf, false);
    }
}

/// An invalidation message in the receiver's protocol: a RESP3 `invalidate` push, or for RESP2
/// (a REDIRECT target) a message on `__redis__:invalidate`. `None` means "everything".
fn write_invalidation(buf: &mut Vec<u8>, target: &ClientInfo, keys: Option<&[&[u8]]>) {
    let version = version_of(target);
    if version == Version::Resp2 && target.subscriptions.load(Relaxed) == 0 {
        // A RESP2 client not in subscribed mode would read the message as a reply: Redis sends
        // nothing then, and so do we.
        return;
    }
    if version == Version::Resp3 {
        reply::push_len(buf, 2, version);
        reply::bulk(buf, b"invalidate");
    } else {
        reply::array_len(buf, 3);
        reply::bulk(buf, b"message");
        reply::bulk(buf, INVALIDATE_CHANNEL);
    }
    match keys {
        Some(keys) => {
            reply::array_len(buf, keys.len());
            keys.iter().for_each(|k| reply::bulk(buf, k));
        }
        None => reply::null(buf, version),
    }
}

/// Client tracking as the change stream's tap: it looks only at which keys changed and who
/// changed them (a change to a record's content, deadline or existence invalidates it; a CAS
/// chosen right after a write does not, that write already did).
pub struct Listener(pub Arc<Tracking>);

fn invalidates(change: &store::Change<'_>) -> bool {
    use store::ChangeKind::*;
    match change.kind {
        Set(_) | Ttl { .. } | Delete | Expire | Evict => true,
        Cas(_) | Flush | Sql => false,
    }
}

impl store::ChangeTap for Listener {
    fn changed(&self, changes: &[store::Change<'_>]) {
        match changes {
            [one] => {
                if invalidates(one) {
                    self.0.changed(&[one.key], one.author)
                }
            }
            // A group delete: one author, its keys invalidated together as one message.
            many => {
                let keys: Vec<&[u8]> = many
                    .iter()
                    .filter(|c| invalidates(c))
                    .map(|c| c.key)
                    .collect();
                if let (false, Some(first)) = (keys.is_empty(), many.first()) {
                    self.0.changed(&keys, first.author)
                }
            }
        }
    }
    fn flushed(&self, _author: store::Author, _seqs: &[u64]) {
        self.0.flushed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clients::ClientRegistry;
    use crate::protocol::Protocol;

    fn resp3_client(reg: &ClientRegistry) -> Arc<ClientInfo> {
        let c = Arc::new(ClientInfo::detached(reg.next_id(), Protocol::Resp));
        c.resp_version.store(3, Relaxed);
        reg.register(c.clone());
        c
    }

    fn bcast_tracker(
        owner: &Arc<ClientInfo>,
        target: &Arc<ClientInfo>,
        prefixes: &[&str],
    ) -> Arc<Tracker> {
        Arc::new(Tracker {
            id: owner.id,
            owner: owner.clone(),
            target: target.clone(),
            noloop: false,
            enabled: AtomicBool::new(true),
            bcast_prefixes: prefixes.iter().map(|p| p.as_bytes().to_vec()).collect(),
            broken_redirect: AtomicBool::new(false),
        })
    }

    /// The pushes in `bytes`, each as its list of keys.
    fn pushes(bytes: &[u8]) -> Vec<String> {
        String::from_utf8_lossy(bytes)
            .split(">2\r\n")
            .filter(|s| !s.is_empty())
            .map(|s| s.replace("\r\n", " "))
            .collect()
    }

    #[test]
    fn bcast_sends_one_push_per_prefix_for_a_batch() {
        let reg = ClientRegistry::new();
        let tracking = Tracking::new(store::Store::new(store::StoreConfig::default()), 100);
        let c = resp3_client(&reg);
        tracking.enable(bcast_tracker(&c, &c, &["a", "b"]), true);
        {
            let _batch = batch();
            tracking.changed(&[b"a2", b"b1", b"c1"], store::Author::SERVER);
            tracking.changed(&[b"a1", b"a2"], store::Author::SERVER);
            assert!(!c.has_mail(), "held back until the batch ends");
        }
        assert_eq!(
            pushes(&c.take_mail().bytes),
            ["$10 invalidate *2 $2 a1 $2 a2 ", "$10 invalidate *1 $2 b1 "]
        );
        // outside a batch (expiry, eviction): at once
        tracking.changed(&[b"a3", b"a4"], store::Author::SERVER);
        assert_eq!(
            pushes(&c.take_mail().bytes),
            ["$10 invalidate *2 $2 a3 $2 a4 "]
        );
    }

    #[test]
    fn noloop_skips_only_the_named_author() {
        let reg = ClientRegistry::new();
        let tracking = Tracking::new(store::Store::new(store::StoreConfig::default()), 100);
        let c = resp3_client(&reg);
        let t = Arc::new(Tracker {
            noloop: true,
            ..Arc::into_inner(bcast_tracker(&c, &c, &[])).unwrap()
        });
        tracking.enable(t.clone(), false);
        tracking.remember(b"k", &t);
        tracking.changed(&[b"k"], store::Author(c.id));
        assert!(!c.has_mail(), "its own write");
        tracking.remember(b"k", &t);
        // Another client's write (a memcached one on the same thread, say) is told.
        tracking.changed(&[b"k"], store::Author(c.id + 1));
        assert_eq!(pushes(&c.take_mail().bytes), ["$10 invalidate *1 $1 k "]);
    }

    #[test]
    fn broken_redirect_is_reported_to_the_tracking_client() {
        let reg = ClientRegistry::new();
        let tracking = Tracking::new(store::Store::new(store::StoreConfig::default()), 100);
        let (c, target) = (resp3_client(&reg), resp3_client(&reg));
        let t = bcast_tracker(&c, &target, &[""]);
        tracking.enable(t.clone(), true);
        reg.unregister(target.id);
        tracking.changed(&[b"k"], store::Author::SERVER);
        let expected = format!(">2\r\n$21\r\ntracking-redir-broken\r\n:{}\r\n", target.id);
        assert_eq!(c.take_mail().bytes, expected.as_bytes());
        assert!(!target.has_mail());
        assert!(t.broken_redirect.load(Relaxed));
    }
}
