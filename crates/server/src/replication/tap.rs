//! The primary's side of the change stream: the store's tap hands every change here under its
//! shard's lock, and it is encoded as a stream command (`encode`) straight into the backlog
//! and onto the connections of the replicas that are caught up (`Replication::push`), as
//! Redis appends to its backlog in `call()`. Nothing polls: a write is on its way to the
//! replicas before its command replies. The ticker thread only does what time asks for:
//! PINGs on an idle stream, WAIT deadlines, dropping replicas silent past `repl-timeout`.
//!
//! The stream's order is the order of the appends, which for one key (one shard) is the
//! order of its changes. A FLUSHALL locks every shard at once and is told once, with every
//! shard's number of its flush, so it is one `REPL.FLUSH` at one point of the stream.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use store::{Change, Listener};

use super::{encode, Replication};

/// How often the ticker looks at the clock.
const TICK: Duration = Duration::from_millis(10);

impl Replication {
    /// Starts the stream unless it runs: from this call on every change is encoded into the
    /// backlog, at an offset past the current one.
    pub(crate) fn start_stream(self: &Arc<Self>) {
        // The ring's memory is taken here (a replica's sync), not by the tap on a write.
        let (capacity, allocated) = {
            let feed = self.backlog.lock();
            (feed.ring.capacity(), feed.ring.allocated())
        };
        if !allocated {
            let buf = super::backlog::Backlog::memory_for(capacity);
            self.backlog.lock().ring.provide(buf);
        }
        self.store.set_listening(Listener::Replication, true);
        self.start_ticker();
    }

    /// Starts the ticker unless it runs, without encoding changes: a WAIT on a primary that
    /// never had a replica needs its deadline kept, not a stream (its offset stays 0, as
    /// Redis's does until a first replica creates the backlog).
    pub(crate) fn start_ticker(self: &Arc<Self>) {
        let generation = self.generation();
        let previous = self.fed.swap(generation, Relaxed);
        if previous == generation {
            return;
        }
        let this = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name("cairn-repl-ticker".into())
            .spawn(move || {
                this.tick(generation);
                // A later role may have started the stream meanwhile: leave its mark.
                let _ = this
                    .fed
                    .compare_exchange(generation, super::NOT_FED, Relaxed, Relaxed);
            });
        if let Err(e) = spawned {
            tracing::error!("cannot start the replication ticker: {e}");
            self.fed.store(super::NOT_FED, Relaxed);
        }
    }

    /// The tap: changes just made under their shards' locks (a replica's own changes are its
    /// primary's stream, which it forwards as it came).
    pub(crate) fn changed(&self, changes: &[Change<'_>]) {
        if !self.feeding() {
            return;
        }
        let mut feed = self.backlog.lock();
        let mut out = std::mem::take(&mut feed.scratch);
        out.clear();
        for change in changes {
            encode::encode_change(change, &mut out);
        }
        if !out.is_empty() {
            self.push(&mut feed, &out);
        }
        feed.scratch = out;
    }

    /// The tap: every shard was flushed, each at its number in `seqs`.
    pub(crate) fn flushed(&self, seqs: &[u64]) {
        if !self.feeding() {
            return;
        }
        let mut out = Vec::new();
        encode::encode_flush(seqs, &mut out);
        self.push(&mut self.backlog.lock(), &out);
    }

    fn tick(self: &Arc<Self>, generation: u64) {
        let mut last_end = self.offset();
        let mut last_sent = Instant::now();
        while self.generation() == generation {
            let end = self.offset();
            if end != last_end {
                last_end = end;
                last_sent = Instant::now();
            }
            let period = Duration::from_secs(self.config.read().repl_ping_replica_period.max(1));
            if last_sent.elapsed() >= period && self.connected_replicas() > 0 {
                let mut out = Vec::new();
                encode::encode_command(&[b"PING"], &mut out);
                self.forward(&out);
            }
            if self.waiting.load(Relaxed) > 0 {
                self.serve_waiters();
            }
            self.drop_silent_replicas();
            self.apply_backlog_size(&mut self.backlog.lock());
            std::thread::sleep(TICK);
        }
    }
}
