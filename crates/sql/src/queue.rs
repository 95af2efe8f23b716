//! A closable FIFO job queue shared by a group of engine threads.

use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::time::Instant;

pub(crate) struct Queue<T> {
    state: Mutex<State<T>>,
    ready: Condvar,
}

struct State<T> {
    jobs: VecDeque<T>,
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
                closed: false,
            }),
            ready: Condvar::new(),
        }
    }

    /// Appends `job`; hands it back when the queue is closed so the caller can fail it.
    pub fn push(&self, job: T) -> Result<(), T> {
        self.push_at(job, false)
    }

    /// Puts `job` ahead of the others: used for expiry a reader is waiting on.
    pub fn push_front(&self, job: T) -> Result<(), T> {
        self.push_at(job, true)
    }

    fn push_at(&self, job: T, front: bool) -> Result<(), T> {
        let mut st = self.state.lock();
        if st.closed {
            return Err(job);
        }
        if front {
            st.jobs.push_front(job);
        } else {
            st.jobs.push_back(job);
        }
        drop(st);
        self.ready.notify_one();
        Ok(())
    }

    /// Waits for a job, until `deadline` if one is given. Jobs queued before `close` are
    /// still handed out, so `Closed` means closed and drained.
    pub fn pop(&self, deadline: Option<Instant>) -> Pop<T> {
        let mut st = self.state.lock();
        loop {
            if let Some(job) = st.jobs.pop_front() {
                return Pop::Job(job);
            }
            if st.closed {
                return Pop::Closed;
            }
            match deadline {
                Some(d) => {
                    if self.ready.wait_until(&mut st, d).timed_out() && st.jobs.is_empty() {
                        return if st.closed { Pop::Closed } else { Pop::Idle };
                    }
                }
                None => self.ready.wait(&mut st),
            }
        }
    }

    /// Refuses new jobs and returns those not yet started.
    pub fn close(&self) -> Vec<T> {
        let mut st = self.state.lock();
        st.closed = true;
        let left = st.jobs.drain(..).collect();
        drop(st);
        self.ready.notify_all();
        left
    }
}
