//! Moving and cloning a whole record to another key, whatever its kind (RENAME, RENAMENX,
//! COPY). The new record carries the old one's kind, value, deadline, memcached flags and typed
//! tags; it gets a fresh CAS. In the change stream a move is the `Set` of the new key followed by
//! the `Delete` of the old one (so tracking invalidates both), a copy is the `Set` of the new key.
//!
//! The value travels as the record's portable bytes (`Item::portable_value`, read back by
//! `Entry::put_portable`), so a collection held out of line is copied, never shared.

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
        let written = self.write(to, |e| {
            if e.exists() && !replace {
                return Ok(false);
            }
            e.put_portable(
                record.kind,
                &record.value,
                record.expire_at,
                record.flags,
                TagWrite::Set(&record.tags),
            )
            // The bytes came from a live record of that kind: they decode.
            .map(|cas| cas.is_some())
        })?;
        if !written {
            return Ok(Moved::DestinationExists);
        }
        if remove_source {
            // Making room for the copy may have evicted the source already.
            self.write(from, |e| e.remove());
        }
        Ok(Moved::Done)
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
    fn a_move_keeps_kind_deadline_flags_and_tags_and_records_set_then_delete() {
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
