//! The dispatch model's worker pool: the network thread queues [`Job`]s (a connection's session
//! and input), workers run them and send [`Done`]s back, waking the network thread.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use super::conn::{Done, Job};
use super::Notifier;

/// Jobs waiting for a worker.
pub(crate) struct JobQueue {
    queue: Mutex<VecDeque<Job>>,
    cond: Condvar,
    stop: AtomicBool,
    workers: usize,
}

impl JobQueue {
    pub fn new(workers: usize) -> JobQueue {
        JobQueue {
            queue: Mutex::new(VecDeque::new()),
            cond: Condvar::new(),
            stop: AtomicBool::new(false),
            workers,
        }
    }

    /// Workers exit once the queue is empty.
    pub fn stop(&self) {
        self.stop.store(true, Relaxed);
        let _guard = self.queue.lock();
        self.cond.notify_all();
    }
}

/// Finished jobs on their way back to the network thread.
pub(crate) struct DoneQueue {
    done: Mutex<Vec<Done>>,
    notifier: Arc<Notifier>,
}

impl DoneQueue {
    pub fn new(notifier: Arc<Notifier>) -> DoneQueue {
        DoneQueue {
            done: Mutex::new(Vec::new()),
            notifier,
        }
    }
}

/// A worker thread's body.
pub(crate) fn worker(jobs: Arc<JobQueue>, done: Arc<DoneQueue>) {
    // A job is a turn: stream sends and wakes it causes go once, when it ends.
    crate::clients::defer_stream_wakes();
    loop {
        let job = {
            let mut q = jobs.queue.lock();
            loop {
                if let Some(job) = q.pop_front() {
                    break job;
                }
                if jobs.stop.load(Relaxed) {
                    return;
                }
                jobs.cond.wait(&mut q);
            }
        };
        let result = job.run();
        crate::clients::send_deferred_wakes();
        let was_empty = {
            let mut d = done.done.lock();
            let was_empty = d.is_empty();
            d.push(result);
            was_empty
        };
        // The network thread takes the whole vector on each wake-up, so only the push that
        // makes it non-empty needs to wake it.
        if was_empty {
            done.notifier.wake();
        }
    }
}

/// The network thread's side of the pool.
pub(crate) struct DispatchLink {
    jobs: Arc<JobQueue>,
    done: Arc<DoneQueue>,
    /// Jobs gathered during one loop turn, queued together by [`DispatchLink::submit`].
    pub pending: Vec<Job>,
    spare: Vec<Done>,
}

impl DispatchLink {
    pub fn new(jobs: Arc<JobQueue>, done: Arc<DoneQueue>) -> DispatchLink {
        DispatchLink {
            jobs,
            done,
            pending: Vec::new(),
            spare: Vec::new(),
        }
    }

    /// Queues this turn's jobs under one lock and wakes as many workers as needed.
    pub fn submit(&mut self) {
        let n = self.pending.len();
        if n == 0 {
            return;
        }
        self.jobs.queue.lock().extend(self.pending.drain(..));
        if n >= self.jobs.workers {
            self.jobs.cond.notify_all();
        } else {
            for _ in 0..n {
                self.jobs.cond.notify_one();
            }
        }
    }

    /// All finished jobs (the returned vector should be handed back with `give_back`).
    pub fn take_done(&mut self) -> Vec<Done> {
        let mut v = std::mem::take(&mut self.spare);
        std::mem::swap(&mut *self.done.done.lock(), &mut v);
        v
    }

    pub fn give_back(&mut self, v: Vec<Done>) {
        self.spare = v;
    }
}
