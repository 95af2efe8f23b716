//! Read-through on the command path: before a client's read command runs, each of its keys
//! that belongs to a `read_through` mapping and is missing in the cache is loaded from the
//! database (`writeback::read`: one query per key however many readers miss it). The read is
//! not answered meanwhile and its I/O thread goes on with other clients: the connection waits
//! (as for BLPOP or SQL), the session keeps the request unconsumed (`Conn::retry`), and when
//! the loads are over the request runs again and answers from the cache, hit or miss.

use std::sync::atomic::{AtomicUsize, Ordering::AcqRel};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use writeback::Miss;

use super::call::Body;
use super::{flags, Command, Conn};
use crate::clients::ClientInfo;
use crate::shared::Shared;

/// The loads one request waits for.
pub struct Wait {
    /// Loads not over yet, plus one held while they are being started.
    remaining: AtomicUsize,
    /// The first failure: the request answers it.
    error: Mutex<Option<String>>,
    client: Weak<ClientInfo>,
}

impl Wait {
    fn done(&self, outcome: Result<(), String>) {
        if let Err(e) = outcome {
            self.error.lock().get_or_insert(e);
        }
        if self.remaining.fetch_sub(1, AcqRel) == 1 {
            if let Some(client) = self.client.upgrade() {
                // Resumes the session, which runs the kept request again.
                client.post(b"", true);
            }
        }
    }
}

/// What a read does about its missing keys.
pub(super) enum Before {
    /// Run it now.
    Run,
    /// Loads are under way: the request runs again when they are over.
    Deferred,
    /// Answer this error.
    Refused(String),
}

fn refusal(e: &str) -> String {
    format!("ERR read-through: {e}")
}

/// Starts the loads a client's read `command` needs, if any. Writes do not load (a write to a
/// missing key makes the record from what it writes, as without read-through), and neither
/// do reads inside MULTI/EXEC or scripts, which must not wait (a miss answers as a miss).
pub(super) fn before<B: Body>(
    shared: &Shared,
    conn: &mut Conn,
    command: &'static Command,
    body: &B,
) -> Before {
    if let Some(wait) = conn.loaded.take() {
        // The request's second run, after its loads: it answers from the cache as it is now,
        // and loads nothing again (a record that expired meanwhile reads as a miss: no loop).
        return match wait.error.lock().take() {
            Some(e) => Before::Refused(refusal(&e)),
            None => Before::Run,
        };
    }
    if !command.has(flags::READONLY) || command.has(flags::SCRIPTING) {
        return Before::Run;
    }
    // A replica cannot write what it loads: its primary reads through for it.
    if shared.store.replica_mode() {
        return Before::Run;
    }
    let wait = Arc::new(Wait {
        remaining: AtomicUsize::new(1),
        error: Mutex::new(None),
        client: Arc::downgrade(&conn.client),
    });
    let mut deferred = false;
    let mut refused: Option<&'static str> = None;
    body.for_each_key(command, &mut |key| {
        let Some(m) = shared.writeback.mapped(key) else {
            return;
        };
        if !m.config.read_through || shared.store.peek(key, |item| item.is_some()) {
            return;
        }
        wait.remaining.fetch_add(1, AcqRel);
        let w = wait.clone();
        match m.miss(key, Box::new(move |outcome| w.done(outcome))) {
            Miss::Wait => deferred = true,
            Miss::Absent => {
                wait.remaining.fetch_sub(1, AcqRel);
            }
            Miss::Refused(e) => {
                wait.remaining.fetch_sub(1, AcqRel);
                refused.get_or_insert(e);
            }
        }
    });
    if !deferred {
        return refused.map_or(Before::Run, |e| Before::Refused(refusal(e)));
    }
    if let Some(e) = refused {
        wait.error.lock().get_or_insert(e.to_string());
    }
    conn.loaded = Some(wait.clone());
    conn.waiting = true;
    conn.retry = true;
    // Releases the hold: if every load is already over, this resumes the session at once.
    wait.done(Ok(()));
    Before::Deferred
}
