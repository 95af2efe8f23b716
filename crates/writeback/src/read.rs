//! Read-through: a read of a missing key of a `read_through` mapping loads the key's row from
//! the database. This module owns what that needs besides the cache itself: the loads in
//! flight (one database query per key however many readers wait: single-flight), the keys
//! remembered as missing (`negative_ttl`), the keys whose latest change is still in the log
//! (the database's row is older than the cache there), and the loader threads.
//!
//! The server decides which reads load and stores what a load found (a [`Sink`]); readers
//! wait through a [`Waiter`] called when their key's load is over, never on their I/O thread.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::config::ValueShape;
use crate::db::{self, Driver};
use crate::Mapping;

/// Told once when the load a reader waits on is over: `Err` carries why it failed.
pub type Waiter = Box<dyn FnOnce(Result<(), String>) + Send>;

/// What a load found, ready for the cache.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Loaded {
    String(Vec<u8>),
    /// The row's non-null columns other than the key column: (field, value).
    Hash(Vec<(String, String)>),
}

/// Stores loaded records in the cache (the server's store; this crate knows none).
pub trait Sink: Send + Sync {
    /// Stores `record` under `key`, expiring after `ttl`, as the server's own write (not
    /// written back), only if the key is absent and `unchanged()`, asked under the key's lock,
    /// says no write of the key came since the load began.
    fn store(
        &self,
        key: &[u8],
        record: &Loaded,
        ttl: Option<Duration>,
        unchanged: &mut dyn FnMut() -> bool,
    );
}

/// What a miss of a key leads to.
pub enum Miss {
    /// The key is known missing (remembered, or deleted with the delete still in the log):
    /// the read answers as a miss, now.
    Absent,
    /// A load is under way: the waiter will be called.
    Wait,
    /// The load cannot start (too many in flight): the read answers this error.
    Refused(&'static str),
}

/// Loads in flight per mapping at most; past it a read of another missing key is refused.
pub const MAX_LOADING: usize = 10_000;
/// Keys remembered as missing per mapping at most; past it (after dropping expired ones) a
/// missing row is not remembered.
pub const MAX_NEGATIVES: usize = 100_000;
/// Loader threads per mapping: database queries of different keys run side by side.
pub const LOADERS: usize = 4;

/// Counters (WB.INFO).
#[derive(Default)]
pub struct ReadStats {
    /// Database queries run.
    pub loads: AtomicU64,
    /// Queries that found the row.
    pub load_hits: AtomicU64,
    /// Queries that found no row.
    pub load_misses: AtomicU64,
    /// Loads that failed (database down, query refused, timed out).
    pub load_errors: AtomicU64,
    /// Reads that joined a load already in flight instead of querying.
    pub load_joins: AtomicU64,
    /// Reads answered as misses from the remembered missing keys or a pending delete.
    pub negative_hits: AtomicU64,
}

/// One key's load: its waiters.
struct Flight {
    waiters: Vec<Waiter>,
}

#[derive(Default)]
struct State {
    /// Keys whose latest change may not be in the database yet: (its log number, a delete).
    /// Dropped once the checkpoint passes it, unless the key is loading (a load compares
    /// the entry before and after its query to see whether a write came meanwhile).
    pending: HashMap<Vec<u8>, (u64, bool)>,
    loading: HashMap<Vec<u8>, Flight>,
    /// Keys remembered missing, until this instant.
    negatives: HashMap<Vec<u8>, Instant>,
}

/// A mapping's read-through state.
#[derive(Default)]
pub struct Reads {
    state: Mutex<State>,
    /// Keys whose load waits for a loader thread.
    queue: Mutex<VecDeque<Vec<u8>>>,
    ready: Condvar,
    pub stats: ReadStats,
}

impl Reads {
    /// A change of `key` was captured (under its shard lock): its row in the database is
    /// older until the change is applied, and a remembered miss is wrong now.
    pub(crate) fn captured(&self, key: &[u8], lsn: u64, deleted: bool) {
        let mut s = self.state.lock();
        s.negatives.remove(key);
        match s.pending.get_mut(key) {
            Some(e) => *e = (lsn, deleted),
            None => {
                s.pending.insert(key.to_vec(), (lsn, deleted));
            }
        }
    }

    /// The flusher applied the log up to `checkpoint`.
    pub(crate) fn applied(&self, checkpoint: u64) {
        let mut s = self.state.lock();
        let State {
            pending, loading, ..
        } = &mut *s;
        pending.retain(|k, (lsn, _)| *lsn > checkpoint || loading.contains_key(k));
    }

    /// A read found `key` missing in the cache: decides what it leads to, and if a load is
    /// needed starts it (or joins the one in flight) with `waiter`.
    pub fn miss(&self, key: &[u8], checkpoint: u64, waiter: Waiter) -> Miss {
        let mut s = self.state.lock();
        if let Some(&(lsn, true)) = s.pending.get(key) {
            if lsn > checkpoint {
                // Deleted in the cache; the database still has the row until the delete
                // is applied.
                self.stats.negative_hits.fetch_add(1, Relaxed);
                return Miss::Absent;
            }
        }
        if let Some(&until) = s.negatives.get(key) {
            if until > Instant::now() {
                self.stats.negative_hits.fetch_add(1, Relaxed);
                return Miss::Absent;
            }
            s.negatives.remove(key);
        }
        if let Some(flight) = s.loading.get_mut(key) {
            flight.waiters.push(waiter);
            self.stats.load_joins.fetch_add(1, Relaxed);
            return Miss::Wait;
        }
        if s.loading.len() >= MAX_LOADING {
            return Miss::Refused("too many loads in flight");
        }
        s.loading.insert(
            key.to_vec(),
            Flight {
                waiters: vec![waiter],
            },
        );
        drop(s);
        self.queue.lock().push_back(key.to_vec());
        self.ready.notify_one();
        Miss::Wait
    }

    /// Keys remembered missing now (WB.INFO).
    pub fn negatives(&self) -> usize {
        self.state.lock().negatives.len()
    }

    fn pending(&self, key: &[u8]) -> Option<(u64, bool)> {
        self.state.lock().pending.get(key).copied()
    }

    /// Whether no change of `key` was captured since `seen` was its pending entry's number.
    fn unchanged(&self, key: &[u8], seen: u64) -> bool {
        self.state.lock().pending.get(key).map_or(0, |e| e.0) == seen
    }

    /// Remembers `key` as missing for `ttl`, unless a write of it came since `seen`.
    fn remember_missing(&self, key: &[u8], seen: u64, ttl: Duration) {
        if ttl.is_zero() {
            return;
        }
        let mut s = self.state.lock();
        if s.pending.get(key).map_or(0, |e| e.0) != seen {
            return;
        }
        let now = Instant::now();
        if s.negatives.len() >= MAX_NEGATIVES {
            s.negatives.retain(|_, until| *until > now);
        }
        if s.negatives.len() < MAX_NEGATIVES {
            s.negatives.insert(key.to_vec(), now + ttl);
        }
    }

    /// The next key to load, waiting up to `wait`.
    fn next(&self, wait: Duration) -> Option<Vec<u8>> {
        let mut q = self.queue.lock();
        if q.is_empty() {
            self.ready.wait_for(&mut q, wait);
        }
        q.pop_front()
    }

    /// The load of `key` is over: its waiters are told.
    fn finish(&self, key: &[u8], outcome: Result<(), String>) {
        let flight = self.state.lock().loading.remove(key);
        for w in flight.map(|f| f.waiters).unwrap_or_default() {
            w(outcome.clone());
        }
    }

    /// Every load not done fails with `why` (the mapping is removed).
    pub(crate) fn fail_all(&self, why: &str) {
        self.queue.lock().clear();
        let flights: Vec<Flight> = self.state.lock().loading.drain().map(|(_, f)| f).collect();
        for w in flights.into_iter().flat_map(|f| f.waiters) {
            w(Err(why.to_string()));
        }
    }
}

/// A loader thread of `m`: takes keys to load until the mapping stops.
pub(crate) fn run_loader(m: Arc<Mapping>, sink: Arc<dyn Sink>) {
    let mut driver: Option<Box<dyn Driver>> = None;
    while !m.stopped() {
        let Some(key) = m.reads.next(Duration::from_millis(200)) else {
            continue;
        };
        let outcome = load(&m, &mut driver, &*sink, &key);
        if outcome.is_err() {
            m.reads.stats.load_errors.fetch_add(1, Relaxed);
        }
        m.reads.finish(&key, outcome);
    }
}

/// Loads `key`'s row and stores it (or remembers it missing).
fn load(
    m: &Mapping,
    driver: &mut Option<Box<dyn Driver>>,
    sink: &dyn Sink,
    key: &[u8],
) -> Result<(), String> {
    let deadline = Instant::now() + db::LOAD_TIMEOUT;
    // A change of the key still in the log (the record was evicted or expired before the
    // flusher applied it): the row is older than what was acknowledged. Wait for the flusher.
    let seen = loop {
        match m.reads.pending(key) {
            Some((lsn, _)) if lsn > m.stats.checkpoint.load(Relaxed) => {
                if Instant::now() >= deadline {
                    return Err("the key's last write is not in the database yet".into());
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            Some((lsn, _)) => break lsn,
            None => break 0,
        }
    };
    let id = String::from_utf8_lossy(&key[m.config.prefix.len().min(key.len())..]).into_owned();
    let d = match driver {
        Some(d) => d,
        None => driver.insert(db::connect_for_loads(&m.config).map_err(|e| e.message)?),
    };
    m.reads.stats.loads.fetch_add(1, Relaxed);
    let row = match d.load(&m.config, &id) {
        Ok(row) => row,
        Err(e) => {
            if e.connection {
                *driver = None;
            }
            return Err(e.message);
        }
    };
    let record = row.and_then(|cols| match &m.config.value {
        // A row whose value columns are all null makes no hash (Redis has no empty hash).
        ValueShape::Hash => (!cols.is_empty()).then_some(Loaded::Hash(cols)),
        ValueShape::String { column } => cols
            .into_iter()
            .find(|(c, _)| c == column)
            .map(|(_, v)| Loaded::String(v.into_bytes())),
    });
    match record {
        Some(r) => {
            m.reads.stats.load_hits.fetch_add(1, Relaxed);
            sink.store(key, &r, m.config.ttl, &mut || m.reads.unchanged(key, seen));
        }
        None => {
            m.reads.stats.load_misses.fetch_add(1, Relaxed);
            m.reads.remember_missing(key, seen, m.config.negative_ttl);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noop() -> Waiter {
        Box::new(|_| {})
    }

    #[test]
    fn one_flight_per_key_and_bounded() {
        let r = Reads::default();
        assert!(matches!(r.miss(b"k", 0, noop()), Miss::Wait));
        assert!(matches!(r.miss(b"k", 0, noop()), Miss::Wait));
        assert_eq!(
            r.queue.lock().len(),
            1,
            "a second miss joins the first load"
        );
        assert_eq!(r.stats.load_joins.load(Relaxed), 1);
        let told = Arc::new(AtomicU64::new(0));
        let t = told.clone();
        r.miss(
            b"k",
            0,
            Box::new(move |o| {
                assert!(o.is_ok());
                t.fetch_add(1, Relaxed);
            }),
        );
        r.finish(b"k", Ok(()));
        assert_eq!(told.load(Relaxed), 1);
        assert!(r.state.lock().loading.is_empty());
    }

    #[test]
    fn pending_delete_and_negatives_answer_absent() {
        let r = Reads::default();
        r.captured(b"k", 5, true);
        assert!(matches!(r.miss(b"k", 4, noop()), Miss::Absent));
        // Applied: the database has no row now, so a load is right again.
        assert!(matches!(r.miss(b"k", 5, noop()), Miss::Wait));
        r.finish(b"k", Ok(()));
        r.remember_missing(b"m", 0, Duration::from_secs(60));
        assert!(matches!(r.miss(b"m", 0, noop()), Miss::Absent));
        // A write forgets the remembered miss.
        r.captured(b"m", 6, false);
        assert!(matches!(r.miss(b"m", 6, noop()), Miss::Wait));
        // A miss is not remembered when a write came during its load.
        r.remember_missing(b"x", 3, Duration::from_secs(60));
        assert_eq!(r.negatives(), 0);
    }

    #[test]
    fn applied_keeps_loading_keys() {
        let r = Reads::default();
        r.captured(b"a", 1, false);
        r.captured(b"b", 2, false);
        assert!(matches!(r.miss(b"a", 0, noop()), Miss::Wait));
        r.applied(2);
        assert_eq!(r.pending(b"a"), Some((1, false)));
        assert_eq!(r.pending(b"b"), None);
    }
}
