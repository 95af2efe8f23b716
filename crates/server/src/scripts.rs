//! What the server keeps for Lua scripting outside the interpreters: the script cache (SCRIPT
//! LOAD / EVALSHA, bounded and counted in memory), the state of the script running now (SCRIPT
//! KILL, -BUSY) and the gates that make a script atomic.
//!
//! Atomicity: every client command runs holding its thread's gate shared (`command::call`); a
//! script holds every gate exclusively for its whole run. So while a script runs no other
//! client command is inside the keyspace, on any shard, and no client sees a script half done
//! (as in Redis, where a script blocks everyone). A client command that finds the gates taken
//! waits at most until the script has run `busy-reply-threshold` milliseconds; past that it is
//! refused with -BUSY, so an I/O thread never waits on a script for long. The interpreters
//! themselves (one per thread that runs scripts) live in `command::scripting`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock, RwLockReadGuard};

use crate::clients::ClientInfo;
use crate::protocol::Protocol;

/// The most gates: threads take the gate of their thread number modulo the count. A script
/// takes them all, so fewer is cheaper for scripts; threads sharing a gate only share a read
/// lock's cache line.
const MAX_GATES: usize = 64;

/// The most bytes of script bodies the cache keeps. Past it, scripts that came with EVAL (not
/// SCRIPT LOAD) are forgotten first, as Redis 7.4 does; they are compiled again when sent again.
pub const MAX_CACHE_BYTES: usize = 64 << 20;

/// The reply to a client whose command meets a script that has run too long.
pub const BUSY: &[u8] =
    b"BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";

const UNKILLABLE: &[u8] = b"UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.";

/// One cached script.
pub struct Cached {
    pub body: Arc<[u8]>,
    /// Came with SCRIPT LOAD (kept); else with EVAL (may be forgotten when the cache is full).
    pub loaded: bool,
}

#[derive(Default)]
struct Cache {
    /// By SHA, hashed with aHash: every EVALSHA looks here (SipHash cost it measurably).
    by_sha: HashMap<[u8; 40], Cached, ahash::RandomState>,
    bytes: usize,
}

/// The script running now.
pub struct Running {
    pub started: Instant,
    /// SCRIPT KILL asked it to stop (its interpreter's hook raises the error).
    pub kill: AtomicBool,
    /// It has run a write command: it can no longer be killed.
    pub wrote: AtomicBool,
}

pub struct Scripts {
    cache: Mutex<Cache>,
    gates: Box<[RwLock<()>]>,
    running: Mutex<Option<Arc<Running>>>,
    /// Bumped by SCRIPT FLUSH and when the cache forgets scripts: interpreters drop their
    /// compiled functions when it changes.
    pub epoch: AtomicU64,
    /// The client MONITOR shows for commands a script runs (`[0 lua]`).
    pub lua_client: Arc<ClientInfo>,
    /// Bytes the interpreters (one per thread that ran a script) hold (INFO used_memory_lua).
    pub vm_memory: AtomicUsize,
}

impl Default for Scripts {
    fn default() -> Self {
        Scripts::new(MAX_GATES)
    }
}

impl Scripts {
    /// With about one gate per thread that runs commands (`threads`, rounded up to a power of
    /// two, at most 64).
    pub fn new(threads: usize) -> Scripts {
        let gates = threads.max(1).next_power_of_two().min(MAX_GATES);
        Scripts {
            cache: Mutex::default(),
            gates: (0..gates).map(|_| RwLock::new(())).collect(),
            running: Mutex::new(None),
            epoch: AtomicU64::new(0),
            vm_memory: AtomicUsize::new(0),
            lua_client: Arc::new(ClientInfo::new(
                0,
                "lua".into(),
                "lua".into(),
                -1,
                Protocol::Resp,
                None,
            )),
        }
    }
}

/// A client command's pass through its gate: held while the command runs.
pub type Pass<'a> = RwLockReadGuard<'a, ()>;

/// A script's hold on every gate.
pub struct Exclusive<'a> {
    _gates: Gates<'a>,
    scripts: &'a Scripts,
    pub running: Arc<Running>,
}

/// The gates a script has taken, released when dropped. Every EVALSHA takes them, so they are
/// held as a count over the gates (their guards forgotten) rather than a collection of guards.
struct Gates<'a> {
    gates: &'a [RwLock<()>],
    taken: usize,
}

impl Drop for Gates<'_> {
    fn drop(&mut self) {
        for gate in &self.gates[..self.taken] {
            // SAFETY: the first `taken` gates were write-locked by `exclusive_within` for this
            // hold, which forgot their guards; nothing else unlocks them.
            unsafe { gate.force_unlock_write() };
        }
    }
}

impl Drop for Exclusive<'_> {
    fn drop(&mut self) {
        *self.scripts.running.lock() = None;
    }
}

/// This thread's number, from which its gate is chosen.
fn thread_number() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static NUMBER: usize = NEXT.fetch_add(1, Relaxed);
    }
    NUMBER.with(|s| *s)
}

impl Scripts {
    /// Lets a client command in: at once when no script runs; else when the script ends, but
    /// no later than `threshold` after it started (then None: the caller replies -BUSY).
    #[inline]
    pub fn enter(&self, threshold: Duration) -> Option<Pass<'_>> {
        let gate = &self.gates[thread_number() % self.gates.len()];
        if let Some(pass) = gate.try_read() {
            return Some(pass);
        }
        loop {
            let started = self.running.lock().as_ref().map(|r| r.started);
            let wait = match started {
                // Between scripts, or a script taking the gates: wait a little and look again.
                None => Duration::from_millis(1),
                Some(at) => match threshold.checked_sub(at.elapsed()) {
                    Some(left) if !left.is_zero() => left,
                    _ => return gate.try_read(),
                },
            };
            if let Some(pass) = gate.try_read_for(wait) {
                return Some(pass);
            }
        }
    }

    /// Takes every gate for a script (waiting for the client commands inside to finish) and
    /// marks it running until the returned hold is dropped.
    #[cfg(test)]
    pub fn exclusive(&self) -> Exclusive<'_> {
        self.exclusive_within(Duration::MAX).expect("no limit")
    }

    /// As `exclusive`, but gives up (None: the caller replies -BUSY) when another script
    /// holds the gates and has run `threshold` already.
    pub fn exclusive_within(&self, threshold: Duration) -> Option<Exclusive<'_>> {
        let mut gates = Gates {
            gates: &self.gates,
            taken: 0,
        };
        for gate in self.gates.iter() {
            loop {
                if let Some(g) = gate.try_write_for(Duration::from_millis(1)) {
                    std::mem::forget(g);
                    gates.taken += 1;
                    break;
                }
                let started = self.running.lock().as_ref().map(|r| r.started);
                if started.is_some_and(|at| at.elapsed() >= threshold) {
                    return None;
                }
            }
        }
        let running = Arc::new(Running {
            started: Instant::now(),
            kill: AtomicBool::new(false),
            wrote: AtomicBool::new(false),
        });
        *self.running.lock() = Some(running.clone());
        Some(Exclusive {
            _gates: gates,
            scripts: self,
            running,
        })
    }

    /// The script running now, if any (SCRIPT KILL).
    pub fn running(&self) -> Option<Arc<Running>> {
        self.running.lock().clone()
    }

    /// SCRIPT KILL: asks the running script to stop; the error (without its `-`) when none
    /// runs or it has written (then it cannot be stopped).
    pub fn kill(&self) -> Result<(), &'static [u8]> {
        match self.running() {
            None => Err(b"NOTBUSY No scripts in execution right now."),
            Some(r) if r.wrote.load(Relaxed) => Err(UNKILLABLE),
            Some(r) => {
                r.kill.store(true, Relaxed);
                Ok(())
            }
        }
    }

    /// The body of the script with this (lowercase hex) SHA1, if cached.
    pub fn get(&self, sha: &[u8; 40]) -> Option<Arc<[u8]>> {
        self.cache.lock().by_sha.get(sha).map(|c| c.body.clone())
    }

    pub fn contains(&self, sha: &[u8; 40]) -> bool {
        self.cache.lock().by_sha.contains_key(sha)
    }

    /// Caches `body` under `sha`, forgetting EVAL-sent scripts when over the bound. Returns
    /// the change in bytes held (for the memory accounting) or None when it does not fit.
    pub fn insert(&self, sha: [u8; 40], body: &[u8], loaded: bool) -> Option<isize> {
        let mut cache = self.cache.lock();
        if let Some(c) = cache.by_sha.get_mut(&sha) {
            c.loaded |= loaded;
            return Some(0);
        }
        let cost = entry_cost(body.len());
        let mut freed = 0isize;
        if cache.bytes + cost > MAX_CACHE_BYTES {
            let evictable: Vec<[u8; 40]> = cache
                .by_sha
                .iter()
                .filter(|(_, c)| !c.loaded)
                .map(|(k, _)| *k)
                .collect();
            for k in evictable {
                if cache.bytes + cost <= MAX_CACHE_BYTES {
                    break;
                }
                if let Some(c) = cache.by_sha.remove(&k) {
                    let n = entry_cost(c.body.len());
                    cache.bytes -= n;
                    freed += n as isize;
                }
            }
            if freed > 0 {
                // Interpreters keep compiled scripts by SHA (EVALSHA runs them without looking
                // here): they drop them, so a forgotten script answers NOSCRIPT.
                self.epoch.fetch_add(1, Relaxed);
            }
            if cache.bytes + cost > MAX_CACHE_BYTES {
                return None;
            }
        }
        cache.bytes += cost;
        cache.by_sha.insert(
            sha,
            Cached {
                body: body.into(),
                loaded,
            },
        );
        Some(cost as isize - freed)
    }

    /// Forgets every script; returns the bytes freed.
    pub fn flush(&self) -> usize {
        let mut cache = self.cache.lock();
        let bytes = cache.bytes;
        *cache = Cache::default();
        self.epoch.fetch_add(1, Relaxed);
        bytes
    }

    /// (number of scripts, bytes) for INFO.
    pub fn usage(&self) -> (usize, usize) {
        let cache = self.cache.lock();
        (cache.by_sha.len(), cache.bytes)
    }
}

/// What one cached script costs: its body and the map's entry.
fn entry_cost(body: usize) -> usize {
    body + 40 + 64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_is_bounded_and_keeps_loaded_scripts() {
        let s = Scripts::default();
        let big = vec![b'x'; MAX_CACHE_BYTES / 4];
        assert!(s.insert([b'a'; 40], &big, true).is_some());
        assert!(s.insert([b'b'; 40], &big, false).is_some());
        assert!(s.insert([b'c'; 40], &big, false).is_some());
        let epoch = s.epoch.load(Relaxed);
        // Full: an EVAL-sent one goes, the loaded one stays, and the interpreters are told
        // (they would otherwise still run the forgotten one by its SHA).
        assert!(s.insert([b'd'; 40], &big, true).is_some());
        assert!(s.contains(&[b'a'; 40]) && s.contains(&[b'd'; 40]));
        assert!(s.epoch.load(Relaxed) > epoch);
        assert!(s.usage().1 <= MAX_CACHE_BYTES);
        assert!(s.insert([b'e'; 40], &big, true).is_some());
        // Only loaded ones left: no room.
        assert!(s.insert([b'f'; 40], &big, true).is_none());
        assert!(s.flush() > 0);
        assert_eq!(s.usage(), (0, 0));
    }

    #[test]
    fn a_client_waits_for_a_script_at_most_the_threshold() {
        let s = Scripts::default();
        assert!(s.enter(Duration::from_millis(10)).is_some());
        let hold = s.exclusive();
        std::thread::scope(|scope| {
            let t = scope.spawn(|| {
                let at = Instant::now();
                let pass = s.enter(Duration::from_millis(50));
                (pass.is_none(), at.elapsed())
            });
            let (refused, waited) = t.join().unwrap();
            assert!(refused, "busy past the threshold");
            assert!(waited >= Duration::from_millis(40), "{waited:?}");
        });
        drop(hold);
        assert!(s.running().is_none());
        assert!(s.enter(Duration::from_millis(10)).is_some());
    }
}
