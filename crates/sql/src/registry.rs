//! In-memory index of the tables that have expiry rules, with their operation and write
//! counters (kept here, not in SQL: they change on every statement and need no durability).

use crate::ExpiryRules;
use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// Row count, then `written_ms` and `op_stamp` of the least recently written row (if any).
pub(crate) type Head = (i64, Option<i64>, Option<i64>);

/// One table's rules as the engine threads see them; replaced (never mutated) on change.
#[derive(Debug)]
pub(crate) struct TableRules {
    pub id: i64,
    /// The table's name as the schema spells it.
    pub name: String,
    pub rules: ExpiryRules,
    /// Shared by every version of the entry, so renames and rule changes keep counting.
    stamps: Arc<Stamps>,
    /// The table's `Head` as last read, with the data epoch it was read at: readers reuse it
    /// until the writer changes data, so a read-mostly table costs no extra SQL per statement.
    head: Mutex<Option<(u64, Head)>>,
}

#[derive(Debug, Default)]
struct Stamps {
    /// Operations started on the table.
    ops: AtomicU64,
    /// Last write sequence number handed to a row.
    seq: AtomicU64,
}

impl TableRules {
    pub fn new(id: i64, name: String, rules: ExpiryRules) -> TableRules {
        TableRules {
            id,
            name,
            rules,
            stamps: Arc::default(),
            head: Mutex::new(None),
        }
    }

    /// The same table under a (possibly) new name or new rules.
    pub fn with(&self, name: String, rules: ExpiryRules) -> TableRules {
        TableRules {
            id: self.id,
            name,
            rules,
            stamps: self.stamps.clone(),
            head: Mutex::new(None),
        }
    }

    pub fn ops(&self) -> u64 {
        self.stamps.ops.load(Relaxed)
    }

    /// Counts one operation; returns the count before it, the basis to judge OPS by.
    pub fn count_op(&self) -> u64 {
        self.stamps.ops.fetch_add(1, Relaxed)
    }

    /// The last write sequence number handed out.
    pub fn seq(&self) -> u64 {
        self.stamps.seq.load(Relaxed)
    }

    /// Sets the counters of a table restored from a snapshot (before anyone uses it).
    pub fn restore_counters(&self, ops: u64, seq: u64) {
        self.stamps.ops.store(ops, Relaxed);
        self.stamps.seq.store(seq, Relaxed);
    }

    pub fn cached_head(&self, epoch: u64) -> Option<Head> {
        match *self.head.lock() {
            Some((e, h)) if e == epoch => Some(h),
            _ => None,
        }
    }

    pub fn cache_head(&self, epoch: u64, head: Head) {
        *self.head.lock() = Some((epoch, head));
    }

    fn next_seq(&self) -> u64 {
        self.stamps.seq.fetch_add(1, Relaxed) + 1
    }
}

#[derive(Default)]
pub(crate) struct Registry {
    maps: RwLock<Maps>,
}

#[derive(Default)]
struct Maps {
    by_name: HashMap<String, Arc<TableRules>>,
    by_id: HashMap<i64, Arc<TableRules>>,
}

impl Registry {
    /// Rules of a table by lower-case name.
    pub fn get(&self, lower: &str) -> Option<Arc<TableRules>> {
        let maps = self.maps.read();
        if maps.by_name.is_empty() {
            return None;
        }
        maps.by_name.get(lower).cloned()
    }

    /// For `_cairn_ops(id)`: the table's operation count.
    pub fn ops_of(&self, id: i64) -> u64 {
        self.maps.read().by_id.get(&id).map_or(0, |t| t.ops())
    }

    /// For `_cairn_seq(id)`: a fresh write sequence number, larger than all before it.
    pub fn seq_of(&self, id: i64) -> u64 {
        self.maps.read().by_id.get(&id).map_or(0, |t| t.next_seq())
    }

    pub fn all(&self) -> Vec<Arc<TableRules>> {
        self.maps.read().by_id.values().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.maps.read().by_id.len()
    }

    pub fn put(&self, t: TableRules) -> Arc<TableRules> {
        let t = Arc::new(t);
        let mut maps = self.maps.write();
        if let Some(old) = maps.by_id.insert(t.id, t.clone()) {
            maps.by_name.remove(&old.name.to_ascii_lowercase());
        }
        maps.by_name.insert(t.name.to_ascii_lowercase(), t.clone());
        t
    }

    pub fn remove(&self, id: i64) {
        let mut maps = self.maps.write();
        if let Some(old) = maps.by_id.remove(&id) {
            maps.by_name.remove(&old.name.to_ascii_lowercase());
        }
    }
}
