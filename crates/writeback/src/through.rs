//! Write-through's waiting replies: a command that changed keys of a `mode = "through"`
//! mapping has its reply held until the flusher settles each of its records: committed to the
//! database (the reply goes as it was), refused by the database (the reply becomes an error and
//! the server puts the key's previous record back), or not committed within the mapping's
//! `through_timeout` (an error saying the write stays queued).
//!
//! Each record is one [`Waiter`] on its mapping's list, all of a command's records one
//! [`Group`]: the group's `done` runs once, when its last record is settled. The flusher is the
//! only one that settles (after a batch, or when a deadline passes while it waits for the
//! database), so a record is never both committed and reported as failed.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

/// What the server needs to undo one write the database refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Undo {
    pub key: Vec<u8>,
    /// The key's record before the command (the store's record encoding), `Some(None)` when
    /// the key was absent, `None` when it was not noted (then it cannot be put back).
    pub prev: Option<Option<Vec<u8>>>,
    /// The CAS the write gave the key (None: the write deleted it). The previous record is put
    /// back only while the key still has it, i.e. no other write changed the key since.
    pub cas: Option<u64>,
}

/// One record of a command that was not committed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failed {
    pub undo: Undo,
    /// The database's message, or why the reply stopped waiting.
    pub reason: String,
    /// The database refused the row (undo the write); false: timed out, the write stays
    /// queued and will reach the database (keep the cache as it is).
    pub refused: bool,
}

/// Called once a command's records are all settled, with those that failed.
pub type Done = Box<dyn FnOnce(Vec<Failed>) + Send>;

struct GroupState {
    left: usize,
    failed: Vec<Failed>,
    done: Option<Done>,
}

/// The records of one command.
pub(crate) struct Group(Mutex<GroupState>);

impl Group {
    pub(crate) fn new(records: usize) -> Arc<Group> {
        Arc::new(Group(Mutex::new(GroupState {
            left: records,
            failed: Vec::new(),
            done: None,
        })))
    }

    /// One more record of the command waits.
    pub(crate) fn add_one(&self) {
        self.0.lock().left += 1;
    }

    fn settle_one(&self, failure: Option<Failed>) {
        let call = {
            let mut st = self.0.lock();
            st.failed.extend(failure);
            st.left = st.left.saturating_sub(1);
            if st.left == 0 {
                st.done.take().map(|d| (d, std::mem::take(&mut st.failed)))
            } else {
                None
            }
        };
        if let Some((done, failed)) = call {
            done(failed);
        }
    }

    /// Sets what runs when every record is settled; runs it now if they already are (the
    /// flusher may be quicker than the command's thread). Called once the command has
    /// captured all its records.
    pub(crate) fn then(&self, done: Done) {
        let failed = {
            let mut st = self.0.lock();
            if st.left > 0 {
                st.done = Some(done);
                return;
            }
            std::mem::take(&mut st.failed)
        };
        done(failed);
    }
}

/// One record whose writer waits.
pub(crate) struct Waiter {
    pub lsn: u64,
    pub deadline: Instant,
    pub undo: Undo,
    pub group: Arc<Group>,
}

/// A mapping's waiting records. Bounded by the clients: a waiting client sends nothing more
/// until its reply goes, so each has at most one command's records here.
#[derive(Default)]
pub(crate) struct Waiters {
    list: Mutex<Vec<Waiter>>,
}

impl Waiters {
    pub(crate) fn add(&self, w: Waiter) {
        self.list.lock().push(w);
    }

    pub(crate) fn len(&self) -> usize {
        self.list.lock().len()
    }

    /// The earliest deadline of a waiting record.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.list.lock().iter().map(|w| w.deadline).min()
    }

    fn take(&self, pick: impl Fn(&Waiter) -> bool) -> Vec<Waiter> {
        let mut list = self.list.lock();
        let (picked, kept) = std::mem::take(&mut *list).into_iter().partition(pick);
        *list = kept;
        picked
    }

    /// The database committed every record up to `upto`, except those in `refused` (number
    /// and the database's message). Returns the numbers of `refused` that had a waiting
    /// writer (told; the others are the flusher's dead letters).
    pub(crate) fn settle(&self, upto: u64, refused: &HashMap<u64, String>) -> HashSet<u64> {
        let mut told = HashSet::new();
        for w in self.take(|w| w.lsn <= upto) {
            let failure = refused.get(&w.lsn).map(|why| {
                told.insert(w.lsn);
                Failed {
                    undo: w.undo,
                    reason: why.clone(),
                    refused: true,
                }
            });
            w.group.settle_one(failure);
        }
        told
    }

    /// Stops the wait of records whose deadline passed (or all, `now` None): their writers get
    /// `why`; the records stay in the log.
    pub(crate) fn expire(&self, now: Option<Instant>, why: &str) {
        for w in self.take(|w| now.is_none_or(|n| w.deadline <= n)) {
            w.group.settle_one(Some(Failed {
                undo: w.undo,
                reason: why.to_string(),
                refused: false,
            }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn undo(key: &str) -> Undo {
        Undo {
            key: key.into(),
            prev: Some(None),
            cas: Some(1),
        }
    }

    fn outcome() -> (Arc<Mutex<Option<Vec<Failed>>>>, Done) {
        let got = Arc::new(Mutex::new(None));
        let g = got.clone();
        (got, Box::new(move |f| *g.lock() = Some(f)))
    }

    #[test]
    fn a_group_answers_once_all_its_records_settle() {
        let w = Waiters::default();
        let group = Group::new(2);
        let far = Instant::now() + Duration::from_secs(60);
        for (lsn, key) in [(3, "a"), (5, "b")] {
            w.add(Waiter {
                lsn,
                deadline: far,
                undo: undo(key),
                group: group.clone(),
            });
        }
        let (got, done) = outcome();
        group.then(done);
        let refused: HashMap<u64, String> = [(5, "check".to_string())].into();
        assert!(w.settle(4, &refused).is_empty());
        assert!(got.lock().is_none(), "one record is still waiting");
        assert_eq!(w.settle(9, &refused), HashSet::from([5]));
        let failed = got.lock().take().expect("answered");
        assert_eq!(failed.len(), 1);
        assert_eq!(failed[0].undo.key, b"b");
        assert!(failed[0].refused);
        assert_eq!(w.len(), 0);
    }

    #[test]
    fn settled_before_the_reply_is_set_answers_at_once() {
        let w = Waiters::default();
        let group = Group::new(1);
        w.add(Waiter {
            lsn: 1,
            deadline: Instant::now() + Duration::from_secs(60),
            undo: undo("a"),
            group: group.clone(),
        });
        w.settle(1, &HashMap::new());
        let (got, done) = outcome();
        group.then(done);
        assert_eq!(got.lock().take(), Some(vec![]));
    }

    #[test]
    fn a_passed_deadline_fails_without_undo() {
        let w = Waiters::default();
        let group = Group::new(1);
        let now = Instant::now();
        w.add(Waiter {
            lsn: 1,
            deadline: now,
            undo: undo("a"),
            group: group.clone(),
        });
        let (got, done) = outcome();
        group.then(done);
        w.expire(Some(now - Duration::from_millis(1)), "late");
        assert!(got.lock().is_none(), "not due yet");
        w.expire(Some(now), "late");
        let failed = got.lock().take().unwrap();
        assert!(!failed[0].refused);
        assert_eq!(failed[0].reason, "late");
    }
}
