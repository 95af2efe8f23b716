//! The store's one change tap, shared by its listeners: client tracking (invalidations),
//! write-behind (a mapped key's new value or deletion goes to its mapping's log, in the
//! store's order, under the key's shard lock) and replication (every change is encoded into
//! the replication stream). Each is told only while it listens.
//!
//! Write-behind takes sets and deletes by commands only: expiry, eviction and flushes change
//! the cache, not the database, so a pending write is never dropped by them.

use std::sync::{Arc, OnceLock};

use store::{Change, ChangeKind, ChangeTap, Kind, Listener, Store};

/// What a record of `kind` is in a write-behind log.
pub fn op_of(kind: Kind) -> writeback::OpKind {
    match kind {
        Kind::String => writeback::OpKind::String,
        Kind::Hash => writeback::OpKind::Hash,
        Kind::Set | Kind::ZSet | Kind::List => writeback::OpKind::Collection,
    }
}

pub struct Taps {
    pub store: Arc<Store>,
    pub tracking: crate::tracking::Listener,
    pub writeback: Arc<writeback::Engine>,
    /// Set once the replication state exists (it is made after the tap).
    pub replication: OnceLock<Arc<crate::replication::Replication>>,
}

impl ChangeTap for Taps {
    fn changed(&self, changes: &[Change<'_>]) {
        if self.store.listening(Listener::Replication) {
            if let Some(replication) = self.replication.get() {
                replication.changed(changes);
            }
        }
        if self.store.listening(Listener::Tracking) {
            self.tracking.changed(changes);
        }
        // A replica's changes are its primary's, which writes them back itself.
        if self.store.listening(Listener::WriteBack) && !self.store.replica_mode() {
            // The server's own writes are not the application's: records loaded from a
            // snapshot (already in the database, or in the write-behind log) must not be
            // written back again, and are not made by a command that commits a log.
            for c in changes.iter().filter(|c| c.author != store::Author::SERVER) {
                match c.kind {
                    ChangeKind::Set(item) => {
                        let op = op_of(item.kind());
                        // Write-through keeps the new record, to undo it if refused.
                        let after = || {
                            let mut record = Vec::new();
                            store::snapshot::encode_record(item, &mut record);
                            Some((record, item.cas()))
                        };
                        // A live string's or hash's bytes are its portable form: no copy.
                        let value = match item.kind() {
                            Kind::String | Kind::Hash => std::borrow::Cow::Borrowed(item.value()),
                            _ => item.portable_value(),
                        };
                        self.writeback.capture(c.key, op, &value, after);
                    }
                    ChangeKind::Delete => {
                        self.writeback
                            .capture(c.key, writeback::OpKind::Delete, b"", || None);
                    }
                    _ => {}
                }
            }
        }
    }

    fn flushed(&self, author: store::Author, seqs: &[u64]) {
        if self.store.listening(Listener::Replication) {
            if let Some(replication) = self.replication.get() {
                replication.flushed(seqs);
            }
        }
        if self.store.listening(Listener::Tracking) {
            self.tracking.flushed(author, seqs);
        }
    }
}
