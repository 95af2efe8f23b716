//! The store's two helper threads: active expiry, and the reaper that frees large records and
//! flushed tables off the request path. Both stop when the store is dropped.
//!
//! Both are batch work that must not raise request latency where cores are few (issue 19: a
//! million keys expiring at once cost `--threads 1` a 69 ms p99). Expiry holds a shard's lock at
//! most `HOLD` at a time, releases it fairly and frees what it removed outside the lock. Between
//! holds it used to yield only, and still took a core for about a second during a mass expiry
//! (p99 14.6 ms at `--threads 1` on 2 cores, with the load generator on the other core); now,
//! while it works without pause, it sleeps three times as long as each hold and its freeing
//! took (`DUTY_PERCENT`, the share Redis gives its active expiry), so it takes at most a quarter
//! of a core and a million records still go within a few seconds. The work is counted in the
//! thread's CPU time, so a machine loaded past its cores does not stretch the rests: at nice 10
//! expiry fell so far behind there that expired records piled up (20,000 of them were not gone
//! 5 s after their deadline), which is why it keeps the normal priority. The reaper, whose only
//! work is freeing, runs at nice 10.

use std::sync::mpsc::Receiver;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crate::{now_ms, Garbage, Store};

/// Longest time the expiry thread holds one shard's lock: a request for that shard waits at
/// most this long (plus one `STEP`), however many records expire at once.
const HOLD: Duration = Duration::from_micros(100);
/// Slots examined between two looks at the clock.
const STEP: usize = 32;
/// Pause between expiry rounds over all shards.
const ROUND_PAUSE: Duration = Duration::from_millis(100);
/// Most of one core the expiry thread takes while it works without pause: after each hold and
/// its freeing it sleeps (100 - this) / this times as long.
const DUTY_PERCENT: u32 = 25;

/// How long to rest after `worked` so that the thread works at most `DUTY_PERCENT` of the time.
fn rest_after(worked: Duration) -> Duration {
    worked * (100 - DUTY_PERCENT) / DUTY_PERCENT
}

/// The CPU time the calling thread has used, where the platform tells it. The duty cycle is
/// counted in it rather than in wall time: on a machine loaded past its cores a hold's wall
/// time grows with the wait for a core, and resting in proportion made expiry fall behind
/// (150,000 of a million records still there 3 s after their deadline at load 12 on 2 cores).
fn thread_cpu() -> Option<Duration> {
    #[cfg(target_os = "linux")]
    {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime only writes the timespec passed to it.
        if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } == 0 {
            return Some(Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32));
        }
    }
    None
}

/// The work since `began` (wall) / `began_cpu` (thread CPU): CPU time where known.
fn worked_since(began: Instant, began_cpu: Option<Duration>) -> Duration {
    match (began_cpu, thread_cpu()) {
        (Some(a), Some(b)) => b.saturating_sub(a),
        _ => began.elapsed(),
    }
}

pub(crate) fn spawn(store: &Arc<Store>, garbage: Receiver<Garbage>) {
    std::thread::Builder::new()
        .name("cairn-reaper".into())
        .spawn(move || {
            batch_thread();
            garbage.into_iter().for_each(drop)
        })
        .expect("spawn reaper thread");
    let weak = Arc::downgrade(store);
    std::thread::Builder::new()
        .name("cairn-expiry".into())
        .spawn(move || expiry_loop(weak))
        .expect("spawn expiry thread");
}

/// Lowers the calling thread's priority to nice 10. Best effort: elsewhere than Linux (where
/// nice values are per thread) the thread keeps its priority.
fn batch_thread() {
    #[cfg(target_os = "linux")]
    // SAFETY: setpriority with PRIO_PROCESS and who = 0 changes only the calling thread.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, 0, 10);
    }
}

fn expiry_loop(store: Weak<Store>) {
    loop {
        std::thread::sleep(ROUND_PAUSE);
        let Some(store) = store.upgrade() else { return };
        store.expire_round();
    }
}

impl Store {
    /// One round of active expiry: each shard scans a slice of its slots (an eighth of the
    /// table, so every record is looked at within about a second), and keeps going while more
    /// than a quarter of what it scans is expired. The lock is held at most `HOLD` at a time and
    /// released fairly (a waiting request gets it before the next hold); the expired records
    /// are freed after each hold, outside the lock.
    pub fn expire_round(&self) -> usize {
        if self.replica_mode() {
            // A replica's records go when its primary's deletions arrive.
            return 0;
        }
        // Time spent working (not resting or waiting for a core), for the `expire-cycle`
        // latency event.
        let mut worked_total = Duration::ZERO;
        let mut removed_total = 0;
        let mut dead = Vec::new();
        for index in 0..self.shard_count() {
            let cell = self.cell(index);
            let (mut scanned, mut removed, mut fields_visited) = (0, 0, 0);
            loop {
                let (began, began_cpu) = (Instant::now(), thread_cpu());
                let mut shard = cell.lock.write();
                let started = Instant::now();
                let budget = (shard.table.capacity() / 8).max(256);
                let hashes = shard.hashes_with_deadlines.len();
                let mut more_slots = scanned < budget || removed * 4 > scanned;
                while more_slots && started.elapsed() < HOLD {
                    let (s, r) = shard.expire_some(self, STEP, now_ms(), &mut dead);
                    scanned += s;
                    removed += r;
                    more_slots = s > 0 && (scanned < budget || removed * 4 > scanned);
                }
                // Hashes with field deadlines: as many as the slots' budget, once the slots
                // are done.
                let mut more_fields = !more_slots && fields_visited < budget.min(hashes);
                while more_fields && started.elapsed() < HOLD {
                    let (v, _) = shard.expire_fields_some(self, STEP, now_ms());
                    fields_visited += v;
                    more_fields = v == STEP && fields_visited < budget.min(hashes);
                }
                parking_lot::RwLockWriteGuard::unlock_fair(shard);
                cell.expired
                    .fetch_add(dead.len() as u64, std::sync::atomic::Ordering::Relaxed);
                removed_total += dead.len();
                // A hold that removed records rests even when its shard is done: with many
                // shards each finished in one hold, resting only between a shard's holds let
                // the thread work without pause across the shards.
                let removed_some = !dead.is_empty();
                if removed_some {
                    self.free_dead(std::mem::take(&mut dead));
                }
                let worked = worked_since(began, began_cpu);
                worked_total += worked;
                let done = !more_slots && !more_fields;
                if removed_some || !done {
                    // The core goes back to whatever else wants it (an event loop) for a while.
                    std::thread::sleep(rest_after(worked));
                }
                if done {
                    break;
                }
            }
        }
        self.cycle_took(crate::Cycle::Expire, worked_total);
        removed_total
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use crate::{now_ms, Author, Cycle, CycleObserver, Kind, Store, StoreConfig};

    /// Remembers the cycles it is told about.
    #[derive(Default)]
    struct Seen(Mutex<Vec<Cycle>>);

    impl CycleObserver for Seen {
        fn cycle_took(&self, cycle: Cycle, _took: Duration) {
            self.0.lock().unwrap().push(cycle);
        }
    }

    #[test]
    fn expiry_rounds_and_evictions_are_timed_for_the_observer() {
        let store = Store::new(StoreConfig {
            shards: 4,
            maxmemory: 64 * 1024,
            policy: crate::EvictionPolicy::AllKeysLru,
            background: false,
            ..StoreConfig::default()
        });
        let seen = Arc::new(Seen::default());
        store.set_cycle_observer(seen.clone());
        let value = vec![7u8; 1000];
        let past = now_ms() - 1;
        for i in 0..20u32 {
            store
                .write(Author::SERVER, &i.to_le_bytes(), |e| {
                    e.put(Kind::String, &value, Some(past), 0)
                })
                .unwrap();
        }
        assert!(!seen.0.lock().unwrap().contains(&Cycle::Expire));
        store.expire_round();
        assert!(seen.0.lock().unwrap().contains(&Cycle::Expire));
        assert!(!seen.0.lock().unwrap().contains(&Cycle::Evict));
        // Writing well past the limit makes writers evict.
        for i in 0..200u32 {
            store
                .write(Author::SERVER, &(1000 + i).to_le_bytes(), |e| {
                    e.put(Kind::String, &value, None, 0)
                })
                .unwrap();
        }
        assert!(seen.0.lock().unwrap().contains(&Cycle::Evict));
    }

    /// Records that all expire at once, in a store with `background` threads or not.
    fn expiring_store(n: u32, background: bool) -> Arc<Store> {
        let store = Store::new(StoreConfig {
            background,
            ..StoreConfig::default()
        });
        let soon = now_ms() + 200;
        for i in 0..n {
            store
                .write(Author::SERVER, format!("exp:{i}").as_bytes(), |e| {
                    e.put(Kind::String, b"v", Some(soon), 0)
                })
                .unwrap();
        }
        std::thread::sleep(Duration::from_millis(300));
        store
    }

    #[test]
    fn mass_expiry_works_at_most_its_duty_share_of_the_time() {
        // Without the rests between holds the thread worked all along (issue 19).
        let store = expiring_store(200_000, false);
        let seen = Arc::new(Timed::default());
        store.set_cycle_observer(seen.clone());
        let began = std::time::Instant::now();
        let mut removed = 0;
        while removed < 200_000 {
            removed += store.expire_round();
        }
        let wall = began.elapsed();
        let worked: Duration = seen.0.lock().unwrap().iter().sum();
        assert!(
            worked * 100 <= wall * (super::DUTY_PERCENT + 10),
            "worked {worked:?} of {wall:?}"
        );
    }

    #[test]
    fn a_mass_expiry_is_over_within_seconds() {
        let store = expiring_store(300_000, true);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while store.stats().keys > 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "{} left",
                store.stats().keys
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Adds up the expiry cycles' times.
    #[derive(Default)]
    struct Timed(Mutex<Vec<Duration>>);

    impl CycleObserver for Timed {
        fn cycle_took(&self, cycle: Cycle, took: Duration) {
            if cycle == Cycle::Expire {
                self.0.lock().unwrap().push(took);
            }
        }
    }
}
