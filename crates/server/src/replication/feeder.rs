//! The feeder: one thread on a primary that owns a cursor on the store's change stream and
//! appends each change, encoded as a stream command (`encode`), to the replication backlog.
//! It starts when the first replica attaches (or at a promotion) and runs while the server is
//! a primary.
//!
//! Logs are read in turn, each in its own order: the changes of one key (one shard) keep
//! their order; changes of different shards may interleave differently than they happened
//! (a replica converges to the same data; see docs/replication.md). A FLUSHALL (one flush per
//! shard) is gathered into one `REPL.FLUSH`: a shard's log is held from its flush until every
//! shard reached its own, so that no shard's later writes precede the flush in the stream.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use store::RecordKind;

use super::{encode, random_id, Replication};

/// Records read from one log per turn.
const BATCH: usize = 512;
/// The store's change backlog the feeder wants at least (a smaller one makes the cursor lag
/// under write bursts, and every lag is a full resync of every replica).
const MIN_CHANGE_BACKLOG: u64 = 16 << 20;
/// A flush that not every shard reached within this long (the cursor started in the middle
/// of a FLUSHALL) is sent as it is.
const FLUSH_WAIT: Duration = Duration::from_secs(1);

impl Replication {
    /// Starts the feeder unless it runs. The cursor is taken here, before this returns: every
    /// change made after the call is in the stream at an offset past the current one.
    pub(crate) fn start_feeder(self: &Arc<Self>) {
        let generation = self.generation();
        let previous = self.feeder.swap(generation, Relaxed);
        if previous == generation {
            return;
        }
        if self.store.change_backlog() < MIN_CHANGE_BACKLOG {
            self.store.set_change_backlog(MIN_CHANGE_BACKLOG);
        }
        let cursor = self.store.subscribe();
        let this = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name("cairn-repl-feeder".into())
            .spawn(move || {
                this.feed(cursor, generation);
                // A feeder of a later role may have started meanwhile: leave its mark.
                let _ =
                    this.feeder
                        .compare_exchange(generation, super::NO_FEEDER, Relaxed, Relaxed);
            });
        if let Err(e) = spawned {
            tracing::error!("cannot start the replication feeder: {e}");
            self.feeder.store(super::NO_FEEDER, Relaxed);
        }
    }

    fn feed(self: &Arc<Self>, mut cursor: store::Cursor, generation: u64) {
        let logs = cursor.logs();
        let shards = self.store.shard_count();
        let mut flushed: Vec<Option<u64>> = vec![None; logs];
        let mut held: Vec<Vec<u8>> = vec![Vec::new(); logs];
        let mut flush_since: Option<Instant> = None;
        let mut out = Vec::new();
        let mut last_sent = Instant::now();
        let mut idle_turns = 0u32;
        while self.generation() == generation {
            out.clear();
            let mut lagged = false;
            for log in 0..logs {
                if flushed[log].is_some() {
                    continue;
                }
                let (flag, hold) = (&mut flushed[log], &mut held[log]);
                let read = cursor.read(log, BATCH, |r| {
                    if flag.is_some() {
                        encode::encode_record(log, r, hold);
                    } else if r.kind == RecordKind::Flush {
                        *flag = Some(r.seq);
                    } else {
                        encode::encode_record(log, r, &mut out);
                    }
                });
                if read.is_err() {
                    lagged = true;
                    break;
                }
            }
            if lagged {
                // Changes were lost to this stream: nobody may continue from before, and every
                // replica resyncs in full (a new id makes their PSYNC fail).
                tracing::warn!(
                    "replication feeder lagged behind the change stream: replicas resync"
                );
                drop(cursor);
                {
                    let size = self.config.read().repl_backlog_size.max(1) as usize;
                    let mut backlog = self.backlog.lock();
                    let end = backlog.end();
                    backlog.reset(end, size);
                }
                self.ids.lock().replid = random_id();
                self.drop_replicas();
                cursor = self.store.subscribe();
                flushed.iter_mut().for_each(|f| *f = None);
                held.iter_mut().for_each(Vec::clear);
                continue;
            }
            let pending = flushed[..shards].iter().filter(|f| f.is_some()).count();
            if pending > 0 {
                let since = *flush_since.get_or_insert_with(Instant::now);
                if pending == shards || since.elapsed() > FLUSH_WAIT {
                    let seqs: Vec<u64> = flushed[..shards].iter().map(|f| f.unwrap_or(0)).collect();
                    encode::encode_flush(&seqs, &mut out);
                    for h in held.iter_mut() {
                        out.extend_from_slice(h);
                        h.clear();
                    }
                    flushed.iter_mut().for_each(|f| *f = None);
                    flush_since = None;
                }
            }
            let period = Duration::from_secs(self.config.read().repl_ping_replica_period.max(1));
            if out.is_empty() && last_sent.elapsed() >= period && self.connected_replicas() > 0 {
                encode::encode_command(&[b"PING"], &mut out);
            }
            if !out.is_empty() {
                self.forward(&out);
                last_sent = Instant::now();
                idle_turns = 0;
            } else {
                idle_turns = idle_turns.saturating_add(1);
            }
            if self.waiting.load(Relaxed) > 0 {
                self.serve_waiters(Some(cursor.position()));
            }
            if out.is_empty() {
                // Polling: a short pause while writes come, a longer one when idle.
                let pause = if idle_turns < 100 { 200 } else { 1000 };
                std::thread::sleep(Duration::from_micros(pause));
            }
        }
    }
}
