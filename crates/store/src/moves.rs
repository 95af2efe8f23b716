//! Moving and cloning a whole record to another key, whatever its kind (RENAME, RENAMENX,
//! COPY). The new record carries the old one's kind, value, deadline, memcached flags and typed
//! tags; it gets a fresh CAS. In the change stream a move is the `Delete` of the old key followed
//! by the `Set` of the new one (so tracking invalidates both), a copy is the `Set` of the new key.
//! A move frees the old record before writing the new one, so that under `noeviction` at the
//! limit a RENAME still fits (as in Redis, which moves the object without allocating); if the
//! new one does not fit after all, the old one is put back and the move fails with OOM.
//!
//! The value travels as the record's portable bytes (`Item::portable_value`, read back by
//! `Entry::put_portable`), so a collection held out of line is copied, never shared. A move of
//! a collection therefore costs O(its size), where Redis hands the object over in O(1).

use crate::item::{Item, Kind};
use crate::shard::{OutOfMemory, TagWrite};
use crate::tags::Tag;
use crate::{Db, Locked};

/// What a move or a copy did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Moved {
    /// The source key has no live record.
    NoSource,
    /// The destination exists and was to be kept (RENAMENX, COPY without REPLACE).
    DestinationExists,
    Done,
}

/// A record's content, detached from its allocation.
struct Detached {
    kind: Kind,
    value: Vec<u8>,
    expire_at: Option<u64>,
    flags: u32,
    tags: Vec<Tag>,
}

fn put(e: &mut crate::Entry<'_>, record: &Detached) -> Result<u64, OutOfMemory> {
    e.put_portable(
        record.kind,
        &record.value,
        record.expire_at,
        record.flags,
        TagWrite::Set(&record.tags),
    )
    // The bytes came from a live record of that kind, so they decode.
    .map(|cas| cas.expect("portable bytes of a live record decode"))
}

fn detach(item: Item<'_>) -> Detached {
    Detached {
        kind: item.kind(),
        value: item.portable_value().into_owned(),
        expire_at: item.expire_at(),
        flags: item.flags(),
        tags: item.tags().collect(),
    }
}

impl Locked<'_> {
    /// Writes a copy of the record under `from` to `to` (both keys' shards must be held),
    /// replacing what `to` holds when `replace`; removes `from` after when `remove_source`.
    /// `from == to` is the caller's case (Redis answers it differently per command).
    pub fn clone_record(
        &mut self,
        from: &[u8],
        to: &[u8],
        replace: bool,
        remove_source: bool,
    ) -> Result<Moved, OutOfMemory> {
        let Some(record) = self.peek(from, |item| item.map(detach)) else {
            return Ok(Moved::NoSource);
        };
        if !replace && self.peek(to, |item| item.is_some()) {
            return Ok(Moved::DestinationExists);
        }
        if remove_source {
            self.write(from, |e| e.remove());
        }
        let written = self.write(to, |e| put(e, &record));
        if written.is_err() && remove_source {
            // Best effort: the old record's room was just freed.
            let _ = self.write(from, |e| put(e, &record));
        }
        written.map(|_| Moved::Done)
    }
}

impl Db<'_, '_> {
    /// As `Locked::clone_record`, locking both keys' shards when the keyspace is shared.
    pub fn clone_record(
        &mut self,
        from: &[u8],
        to: &[u8],
        replace: bool,
        remove_source: bool,
    ) -> Result<Moved, OutOfMemory> {
        match self {
            Db::Shared(store, author) => {
                store
                    .lock_keys(*author, [from, to])
                    .clone_record(from, to, replace, remove_source)
            }
            Db::Locked(locked) => locked.clone_record(from, to, replace, remove_source),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::changes::RecordKind;
    use crate::{Author, Store, StoreConfig, Tag};

    fn store() -> std::sync::Arc<Store> {
        Store::new(StoreConfig {
            shards: 4,
            background: false,
            ..StoreConfig::default()
        })
    }

    #[test]
    fn a_move_keeps_kind_deadline_flags_and_tags_and_records_delete_and_set() {
        let s = store();
        let mut cursor = s.subscribe();
        let tag = Tag { ty: 1, value: 7 };
        let deadline = crate::now_ms() + 60_000;
        s.write(Author(3), b"src", |e| {
            e.put_record(
                Kind::Hash,
                3,
                Some(deadline),
                42,
                TagWrite::Set(&[tag]),
                |b, _| b.copy_from_slice(b"abc"),
            )
            .unwrap()
        });
        let mut locked = s.lock_keys(Author(4), [&b"src"[..], b"dst"]);
        assert_eq!(
            locked.clone_record(b"src", b"dst", true, true),
            Ok(Moved::Done)
        );
        assert_eq!(
            locked.clone_record(b"src", b"dst", true, true),
            Ok(Moved::NoSource)
        );
        drop(locked);
        s.read(b"dst", |item| {
            let item = item.unwrap();
            assert_eq!(
                (item.kind(), item.value(), item.expire_at(), item.flags()),
                (Kind::Hash, &b"abc"[..], Some(deadline), 42)
            );
            assert_eq!(item.tags().collect::<Vec<_>>(), vec![tag]);
        });
        assert!(s.read(b"src", |i| i.is_none()));
        let mut seen = Vec::new();
        for log in 0..cursor.logs() {
            cursor
                .read(log, usize::MAX, |r| {
                    seen.push((r.key().to_vec(), r.kind, r.author))
                })
                .unwrap();
        }
        assert!(seen.contains(&(b"dst".to_vec(), RecordKind::Set, Author(4))));
        assert!(seen.contains(&(b"src".to_vec(), RecordKind::Delete, Author(4))));
    }

    /// Under noeviction at the limit a move still fits: the old record makes room for the new.
    #[test]
    fn a_move_fits_at_the_limit_without_eviction() {
        let s = Store::new(StoreConfig {
            shards: 1,
            maxmemory: 64 * 1024,
            policy: crate::EvictionPolicy::NoEviction,
            background: false,
            ..StoreConfig::default()
        });
        let mut i = 0;
        while s
            .write(Author(1), format!("k{i}").as_bytes(), |e| {
                e.put(Kind::String, &[7; 200], None, 0)
            })
            .is_ok()
        {
            i += 1;
        }
        let mut db = Db::Shared(&s, Author(1));
        assert_eq!(db.clone_record(b"k0", b"z0", true, true), Ok(Moved::Done));
        assert_eq!(db.clone_record(b"k1", b"z1", true, false), Err(OutOfMemory));
        assert!(s.read(b"z0", |i| i.is_some_and(|i| i.value() == [7; 200])));
        assert!(s.read(b"k0", |i| i.is_none()) && s.read(b"k1", |i| i.is_some()));
    }

    #[test]
    fn a_copy_without_replace_keeps_the_destination() {
        let s = store();
        for (k, v) in [(&b"a"[..], &b"1"[..]), (b"b", b"2")] {
            s.write(Author(1), k, |e| e.put(Kind::String, v, None, 0).unwrap());
        }
        let mut db = Db::Shared(&s, Author(1));
        assert_eq!(
            db.clone_record(b"a", b"b", false, false),
            Ok(Moved::DestinationExists)
        );
        assert_eq!(db.clone_record(b"a", b"c", false, false), Ok(Moved::Done));
        assert_eq!(db.clone_record(b"a", b"b", true, false), Ok(Moved::Done));
        for k in [&b"a"[..], b"b", b"c"] {
            assert_eq!(
                s.read(k, |i| i.map(|i| i.value().to_vec())),
                Some(b"1".to_vec())
            );
        }
    }
}
