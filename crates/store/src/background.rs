//! The store's two helper threads: active expiry, and the reaper that frees large records and
//! flushed tables off the request path. Both stop when the store is dropped.

use std::sync::mpsc::Receiver;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crate::{now_ms, Garbage, Store};

/// Longest time the expiry thread holds one shard's lock.
const SLICE: Duration = Duration::from_millis(1);
/// Pause between expiry rounds over all shards.
const ROUND_PAUSE: Duration = Duration::from_millis(100);

pub(crate) fn spawn(store: &Arc<Store>, garbage: Receiver<Garbage>) {
    std::thread::Builder::new()
        .name("cairn-reaper".into())
        .spawn(move || garbage.into_iter().for_each(drop))
        .expect("spawn reaper thread");
    let weak = Arc::downgrade(store);
    std::thread::Builder::new()
        .name("cairn-expiry".into())
        .spawn(move || expiry_loop(weak))
        .expect("spawn expiry thread");
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
    /// than a quarter of what it scans is expired, never holding a lock past `SLICE`.
    pub fn expire_round(&self) -> usize {
        if self.replica_mode() {
            // A replica's records go when its primary's deletions arrive.
            return 0;
        }
        let round = Instant::now();
        let mut removed_total = 0;
        for index in 0..self.shard_count() {
            let cell = self.cell(index);
            loop {
                let mut shard = cell.lock.write();
                let started = Instant::now();
                let budget = (shard.table.capacity() / 8).max(256);
                let mut scanned = 0;
                let mut removed = 0;
                while scanned < budget && started.elapsed() < SLICE {
                    let (s, r) = shard.expire_some(self, 256, now_ms());
                    scanned += s;
                    removed += r;
                    if s == 0 {
                        break;
                    }
                }
                // Hashes with field deadlines: as many as the slots' budget, in the same slice.
                let mut fields_visited = 0;
                while fields_visited < budget && started.elapsed() < SLICE {
                    let (v, _) = shard.expire_fields_some(self, 64, now_ms());
                    fields_visited += v;
                    if v < 64 || fields_visited >= shard.hashes_with_deadlines.len() {
                        break;
                    }
                }
                drop(shard);
                cell.expired
                    .fetch_add(removed as u64, std::sync::atomic::Ordering::Relaxed);
                removed_total += removed;
                if removed * 4 <= scanned {
                    break;
                }
            }
        }
        self.cycle_took(crate::Cycle::Expire, round.elapsed());
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
}
