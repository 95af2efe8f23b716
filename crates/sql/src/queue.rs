//! A closable FIFO job queue shared by a group of engine threads, with a second lane for jobs
//! known to be heavy that only some of the threads take (issue 11, item 4: a queue of slow
//! statements must not hold up a quick one).

use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::time::Instant;

pub(crate) struct Queue<T> {
    state: Mutex<State<T>>,
    ready: Condvar,
}

struct State<T> {
    jobs: VecDeque<T>,
    /// Jobs expected to run long: taken by [`Queue::pop`] after the others, never by
    /// [`Queue::pop_light`].
    heavy: VecDeque<T>,
    closed: bool,
}

pub(crate) enum Pop<T> {
    Job(T),
    /// The deadline passed with no job (lets the writer run its periodic expiry sweep).
    Idle,
    Closed,
}

impl<T> Queue<T> {
    pub fn new() -> Queue<T> {
        Queue {
            state: Mutex::new(State {
                jobs: VecDeque::new(),
                heavy: VecDeque::new(),
                closed: false,
            }),
            ready: Condvar::new(),
        }
    }

    /// Jobs waiting, both lanes (the SQL queue depth metric).
    pub fn len(&self) -> usize {
        let st = self.state.lock();
        st.jobs.len() + st.heavy.len()
    }

    /// Appends `job`; hands it back when the queue is closed so the caller can fail it.
    pub fn push(&self, job: T) -> Result<(), T> {
        self.push_at(job, Lane::Back)
    }

    /// Puts `job` ahead of the others: used for expiry a reader is waiting on.
    pub fn push_front(&self, job: T) -> Result<(), T> {
        self.push_at(job, Lane::Front)
    }

    /// Appends a job expected to run long to the heavy lane.
    pub fn push_heavy(&self, job: T) -> Result<(), T> {
        self.push_at(job, Lane::Heavy)
    }

    fn push_at(&self, job: T, lane: Lane) -> Result<(), T> {
        let mut st = self.state.lock();
        if st.closed {
            return Err(job);
        }
        match lane {
            Lane::Front => st.jobs.push_front(job),
            Lane::Back => st.jobs.push_back(job),
            Lane::Heavy => st.heavy.push_back(job),
        }
        drop(st);
        self.ready.notify_one();
        Ok(())
    }

    /// Waits for a job, until `deadline` if one is given; light jobs first, then heavy ones.
    /// Jobs queued before `close` are still handed out, so `Closed` means closed and drained.
    pub fn pop(&self, deadline: Option<Instant>) -> Pop<T> {
        let mut st = self.state.lock();
        loop {
            if let Some(job) = st.jobs.pop_front().or_else(|| st.heavy.pop_front()) {
                return Pop::Job(job);
            }
            if st.closed {
                return Pop::Closed;
            }
            match deadline {
                Some(d) => {
                    if self.ready.wait_until(&mut st, d).timed_out()
                        && st.jobs.is_empty()
                        && st.heavy.is_empty()
                    {
                        return if st.closed { Pop::Closed } else { Pop::Idle };
                    }
                }
                None => self.ready.wait(&mut st),
            }
        }
    }

    /// Waits for a light job (the express reader): heavy jobs are left to [`Queue::pop`].
    pub fn pop_light(&self) -> Pop<T> {
        let mut st = self.state.lock();
        loop {
            if let Some(job) = st.jobs.pop_front() {
                return Pop::Job(job);
            }
            if st.closed {
                return Pop::Closed;
            }
            if !st.heavy.is_empty() {
                // The wake-up may have been meant for a heavy job: pass it on to a thread
                // that takes those (if none waits, a busy one finds the job when it is done).
                self.ready.notify_one();
            }
            self.ready.wait(&mut st);
        }
    }

    /// Refuses new jobs and returns those not yet started.
    pub fn close(&self) -> Vec<T> {
        let mut st = self.state.lock();
        st.closed = true;
        let mut left: Vec<T> = st.jobs.drain(..).collect();
        left.extend(st.heavy.drain(..));
        drop(st);
        self.ready.notify_all();
        left
    }
}

#[derive(Clone, Copy)]
enum Lane {
    Front,
    Back,
    Heavy,
}
