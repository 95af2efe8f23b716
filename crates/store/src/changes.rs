//! The ordered change stream: every change to the keyspace, numbered per shard, handed to the
//! tap (client tracking) under the shard's lock and, while a cursor consumer is registered, kept
//! in a bounded per-shard backlog that cursors read in order. The design and its invariants are
//! in docs/architecture.md, "The change stream".

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::item::{Item, ItemPtr};
use crate::shard::charge;
use crate::{Author, Store};

/// `Store::taps` bits: the tap is called (one bit per [`Listener`] that wants it).
pub(crate) const TAP_LISTENER: u8 = 1 | 4 | 8;
/// `Store::taps` bit: changes are copied into the backlogs (a cursor is registered).
pub(crate) const TAP_BACKLOG: u8 = 2;

/// Who wants the tap called: each says so on its own (`Store::set_listening`), and the tap
/// is called while any does. The tap itself decides what each is told.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Listener {
    /// Client tracking (CLIENT TRACKING clients exist).
    Tracking,
    /// Write-behind (a mapping to a database exists).
    WriteBack,
    /// Replication (a primary encodes every change into its replication stream).
    Replication,
}

impl Listener {
    pub(crate) fn bit(self) -> u8 {
        match self {
            Listener::Tracking => 1,
            Listener::WriteBack => 4,
            Listener::Replication => 8,
        }
    }
}

/// What one change did, as seen while its shard is still locked.
#[derive(Clone, Copy)]
pub enum ChangeKind<'a> {
    /// A new record under the key (SET, INCR, APPEND, a hash field, new tags...): the whole
    /// record as it now is (value, kind, deadline, flags, tags, CAS).
    Set(Item<'a>),
    /// The existing record's deadline changed (EXPIRE, PERSIST, TOUCH, GAT) and with it its CAS
    /// (`cas`, the one clients now see); its value, flags and tags did not.
    Ttl { expire_at: Option<u64>, cas: u64 },
    /// The CAS clients see was set to `cas` (memcached meta `E`) right after the write before.
    Cas(u64),
    /// Removed by a command (DEL, a TAG.DEL group, RENAME's source...).
    Delete,
    /// Removed because its deadline passed (lazily on access, by the expiry thread, or found
    /// expired by a group delete).
    Expire,
    /// Removed to make room under the memory limit.
    Evict,
    /// Every record of the shard was removed (FLUSHALL, flush_all); the key is empty.
    Flush,
    /// An SQL statement that changed the tables: the key is the statement's text. Lives in
    /// the SQL log, not in a shard's.
    Sql,
}

impl ChangeKind<'_> {
    /// The owned form's kind (what a backlog record says).
    pub fn record_kind(&self) -> RecordKind {
        match *self {
            ChangeKind::Set(_) => RecordKind::Set,
            ChangeKind::Ttl { expire_at, cas } => RecordKind::Ttl { expire_at, cas },
            ChangeKind::Cas(cas) => RecordKind::Cas(cas),
            ChangeKind::Delete => RecordKind::Delete,
            ChangeKind::Expire => RecordKind::Expire,
            ChangeKind::Evict => RecordKind::Evict,
            ChangeKind::Flush => RecordKind::Flush,
            ChangeKind::Sql => RecordKind::Sql,
        }
    }
}

/// One change, borrowed: valid while its shard's exclusive lock is held.
#[derive(Clone, Copy)]
pub struct Change<'a> {
    /// Its number in its log: one more than the change before it there.
    pub seq: u64,
    /// Its log: the shard's index, or `Store::sql_log()` for SQL statements.
    pub log: usize,
    /// Whose command made it ([`Author::SERVER`] for expiry, eviction, a delayed flush).
    pub author: Author,
    pub key: &'a [u8],
    pub kind: ChangeKind<'a>,
}

/// Told about every change as it happens, under the changed shard's lock: it must be quick and
/// must not call back into the store. Client tracking is one.
pub trait ChangeTap: Send + Sync {
    /// Changes made under one hold of their shards' locks (one for most writes, a group
    /// delete's together), in order per log. Per-shard [`ChangeKind::Flush`] changes are not
    /// passed here: [`ChangeTap::flushed`] says it once per flush.
    fn changed(&self, changes: &[Change<'_>]);
    /// Every shard was flushed by `author` (FLUSHALL, flush_all): called once, after, with
    /// every shard still locked; `seqs` holds each shard's number of its flush, in shard order.
    fn flushed(&self, author: Author, seqs: &[u64]);
}

/// What a backlog record says happened (see [`ChangeKind`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordKind {
    Set,
    Ttl { expire_at: Option<u64>, cas: u64 },
    Cas(u64),
    Delete,
    Expire,
    Evict,
    Flush,
    Sql,
}

/// One change, owned: what the backlog keeps and cursors read.
pub struct ChangeRecord {
    pub seq: u64,
    pub author: Author,
    pub kind: RecordKind,
    /// Set: a byte copy of the new record (its key inside); otherwise the key (SQL: the
    /// statement; Flush: nothing).
    bytes: Box<[u8]>,
}

/// Bytes a backlog record costs beyond its key or record copy: the record in the ring.
pub const RECORD_OVERHEAD: usize = std::mem::size_of::<ChangeRecord>();

impl ChangeRecord {
    pub(crate) fn of(change: &Change<'_>) -> ChangeRecord {
        let bytes: Box<[u8]> = match change.kind {
            ChangeKind::Set(item) => item.ptr().portable_bytes(),
            _ => change.key.into(),
        };
        ChangeRecord {
            seq: change.seq,
            author: change.author,
            kind: change.kind.record_kind(),
            bytes,
        }
    }

    /// The changed key (empty for a flush; the statement for SQL).
    pub fn key(&self) -> &[u8] {
        match self.item() {
            Some(item) => item.key(),
            None => &self.bytes,
        }
    }

    /// For a set, the new record (value, kind, deadline, flags, tags, CAS).
    pub fn item(&self) -> Option<Item<'_>> {
        (self.kind == RecordKind::Set)
            .then(|| Item::new(ItemPtr::from_addr(self.bytes.as_ptr() as usize)))
    }

    /// Bytes this record holds in the backlog.
    pub fn memory(&self) -> usize {
        RECORD_OVERHEAD + charge(self.bytes.len())
    }
}

/// The cursor's position is no longer in the backlog (it was overwritten, or no consumer held
/// it): the consumer must start over from a full copy (a resync).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lagged {
    pub log: usize,
    /// The sequence number the cursor needed next.
    pub wanted: u64,
    /// The oldest the backlog still holds.
    pub oldest: u64,
}

/// One log's numbering and backlog: each shard has one (under its lock), the SQL log another.
#[derive(Default)]
pub(crate) struct Log {
    /// The sequence number of the last change (0: none yet).
    pub seq: u64,
    records: VecDeque<ChangeRecord>,
    bytes: usize,
}

impl Log {
    /// The oldest sequence number a cursor can still read from.
    fn oldest(&self) -> u64 {
        self.records.front().map_or(self.seq + 1, |r| r.seq)
    }

    /// Keeps `record`, dropping the oldest until the log holds at most `limit` bytes. A record
    /// larger than `limit` empties the log: cursors behind it are lagged.
    fn push(&mut self, store: &Store, record: ChangeRecord, limit: usize) {
        let size = record.memory();
        let before = self.bytes;
        while self.bytes + size > limit {
            let Some(old) = self.records.pop_front() else {
                break;
            };
            self.bytes -= old.memory();
        }
        if size <= limit {
            self.records.push_back(record);
            self.bytes += size;
        }
        store.account_backlog(self.bytes as isize - before as isize);
    }

    pub fn clear(&mut self, store: &Store) {
        store.account_backlog(-(self.bytes as isize));
        self.records = VecDeque::new();
        self.bytes = 0;
    }

    /// Calls `f` with up to `max` records from sequence number `from` on; returns the next one
    /// to read.
    fn read(
        &self,
        log: usize,
        from: u64,
        max: usize,
        f: &mut impl FnMut(&ChangeRecord),
    ) -> Result<u64, Lagged> {
        let oldest = self.oldest();
        if from < oldest {
            return Err(Lagged {
                log,
                wanted: from,
                oldest,
            });
        }
        let skip = (from - oldest) as usize;
        let mut next = from;
        for record in self.records.iter().skip(skip).take(max) {
            f(record);
            next = record.seq + 1;
        }
        Ok(next)
    }
}

impl Store {
    /// Numbers a change in `log` and copies it into the backlog when a cursor consumer is
    /// registered; returns it for the tap (see `tell`). The caller holds the log's lock and
    /// has made the change (a set's new record is in the table).
    #[inline]
    pub(crate) fn number<'k>(
        &self,
        log: &mut Log,
        index: usize,
        author: Author,
        key: &'k [u8],
        kind: ChangeKind<'k>,
    ) -> Change<'k> {
        log.seq += 1;
        let change = Change {
            seq: log.seq,
            log: index,
            author,
            key,
            kind,
        };
        if self.taps.load(Ordering::Relaxed) & TAP_BACKLOG != 0 {
            log.push(self, ChangeRecord::of(&change), self.log_limit());
        }
        change
    }

    /// Hands changes just numbered to the tap, if it listens.
    #[inline]
    pub(crate) fn tell(&self, changes: &[Change<'_>]) {
        if self.taps.load(Ordering::Relaxed) & TAP_LISTENER != 0 && !changes.is_empty() {
            if let Some(tap) = self.tap.get() {
                tap.changed(changes);
            }
        }
    }

    /// One change: numbered, kept, told. With no consumer: one increment and one load.
    #[inline]
    pub(crate) fn record(
        &self,
        log: &mut Log,
        index: usize,
        author: Author,
        key: &[u8],
        kind: ChangeKind<'_>,
    ) {
        if self.taps.load(Ordering::Relaxed) == 0 {
            log.seq += 1;
            return;
        }
        let change = self.number(log, index, author, key, kind);
        if !matches!(kind, ChangeKind::Flush) {
            self.tell(std::slice::from_ref(&change));
        }
    }

    /// The index of the SQL statements' log (one past the last shard's).
    pub fn sql_log(&self) -> usize {
        self.shard_count()
    }

    /// Appends an SQL statement that changed the tables to the SQL log.
    pub fn record_sql(&self, author: Author, statement: &[u8]) {
        self.record_sql_with(author, || statement.to_vec())
    }

    /// As [`record_sql`](Self::record_sql), `describe` giving the statement only while a
    /// cursor consumer keeps changes (otherwise the change just takes its number). Checked
    /// under the SQL log's lock, as `subscribe` takes it: a cursor never reads a change
    /// without its statement.
    pub fn record_sql_with(&self, author: Author, describe: impl FnOnce() -> Vec<u8>) {
        let mut log = self.sql.lock();
        let index = self.sql_log();
        let wanted =
            self.consumers.load(Ordering::Relaxed) > 0 || self.listening(Listener::Replication);
        let statement = if wanted { describe() } else { Vec::new() };
        self.record(&mut log, index, author, &statement, ChangeKind::Sql);
    }

    /// The SQL tables were replaced by a snapshot's taken at SQL log position `position`: the
    /// SQL log goes on from there (its next change is `position + 1`, as the SQL engine numbers
    /// them), and what it kept from before the restore is dropped (cursors behind it lag).
    pub fn restart_sql_log_at(&self, position: u64) {
        let mut log = self.sql.lock();
        log.clear(self);
        log.seq = position;
    }

    /// Bytes each log's backlog may hold: the configured total shared evenly.
    fn log_limit(&self) -> usize {
        (self.change_backlog.load(Ordering::Relaxed) / (self.shard_count() as u64 + 1)) as usize
    }

    fn account_backlog(&self, delta: isize) {
        self.backlog_used.fetch_add(delta as i64, Ordering::Relaxed);
    }

    /// Bytes the change backlogs hold now (0 while no cursor is registered).
    pub fn change_backlog_memory(&self) -> u64 {
        self.backlog_used.load(Ordering::Relaxed).max(0) as u64
    }

    /// The bound on the backlogs' bytes (all logs together); takes effect as records are added.
    pub fn set_change_backlog(&self, bytes: u64) {
        self.change_backlog.store(bytes, Ordering::Relaxed);
    }

    pub fn change_backlog(&self) -> u64 {
        self.change_backlog.load(Ordering::Relaxed)
    }

    /// The last sequence number of every log (shards, then SQL), read with every shard locked:
    /// a consistent cut of the keyspace.
    pub fn positions(&self) -> Vec<u64> {
        let locked = self.lock_all(Author::SERVER);
        let sql = self.sql.lock();
        locked
            .guards
            .iter()
            .map(|(_, g)| g.log.seq)
            .chain(std::iter::once(sql.seq))
            .collect()
    }

    /// How many changes were numbered so far, all logs together (each read under its lock, not
    /// at one cut): what "changes since the last save" counts from.
    pub fn change_count(&self) -> u64 {
        let shards: u64 = (0..self.shard_count())
            .map(|i| self.cell(i).lock.read().log.seq)
            .sum();
        shards + self.sql.lock().seq
    }

    /// Registers a cursor consumer: from now on every change is kept in the backlogs until
    /// the cursor (and every other) is dropped. The cursor starts right after a consistent cut:
    /// it reads every change made after it, none made before.
    pub fn subscribe(self: &Arc<Store>) -> Cursor {
        let locked = self.lock_all(Author::SERVER);
        let sql = self.sql.lock();
        if self.consumers.fetch_add(1, Ordering::Relaxed) == 0 {
            self.taps.fetch_or(TAP_BACKLOG, Ordering::Relaxed);
        }
        let next = locked
            .guards
            .iter()
            .map(|(_, g)| g.log.seq + 1)
            .chain(std::iter::once(sql.seq + 1))
            .collect();
        Cursor {
            store: Arc::clone(self),
            next,
        }
    }

    fn unsubscribe(&self) {
        let mut locked = self.lock_all(Author::SERVER);
        let mut sql = self.sql.lock();
        if self.consumers.fetch_sub(1, Ordering::Relaxed) == 1 {
            self.taps.fetch_and(!TAP_BACKLOG, Ordering::Relaxed);
            for (_, shard) in locked.guards.iter_mut() {
                shard.log.clear(self);
            }
            sql.clear(self);
        }
    }
}

/// A consumer's position in every log. While any cursor exists the store keeps a backlog.
pub struct Cursor {
    store: Arc<Store>,
    /// Per log, the next sequence number to read.
    next: Box<[u64]>,
}

impl Cursor {
    /// Number of logs: one per shard, then the SQL log.
    pub fn logs(&self) -> usize {
        self.next.len()
    }

    /// The next sequence number this cursor reads, per log.
    pub fn position(&self) -> &[u64] {
        &self.next
    }

    /// Calls `f` with up to `max` records of `log` after the cursor, in order, and moves past
    /// them; returns how many. `f` runs under the log's lock: it must not call into this store.
    /// `Lagged` when the backlog no longer holds the cursor's position: the cursor stays put
    /// and the consumer needs a full resync.
    pub fn read(
        &mut self,
        log: usize,
        max: usize,
        mut f: impl FnMut(&ChangeRecord),
    ) -> Result<usize, Lagged> {
        let from = self.next[log];
        let next = if log < self.store.shard_count() {
            let shard = self.store.cell(log).lock.read();
            shard.log.read(log, from, max, &mut f)?
        } else {
            self.store.sql.lock().read(log, from, max, &mut f)?
        };
        self.next[log] = next;
        Ok((next - from) as usize)
    }
}

impl Drop for Cursor {
    fn drop(&mut self) {
        self.store.unsubscribe();
    }
}
