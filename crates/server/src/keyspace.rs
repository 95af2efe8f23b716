//! Keyspace operations shared by RESP commands and memcached requests, in neither protocol's
//! terms: a RESP SET and a memcached `set` both end in `store`, a RESP APPEND and a memcached
//! `append` in `concat`.

use std::sync::atomic::Ordering::{AcqRel, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

use store::{Entry, Item, Kind, OutOfMemory, Tag, TagWrite};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cond {
    Always,
    /// NX, memcached `add`.
    IfAbsent,
    /// XX, memcached `replace`.
    IfPresent,
}

/// What a write does to the record's deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ttl {
    /// KEEPTTL, or memcached `append`: the old deadline stays.
    Keep,
    /// A new deadline (absolute Unix ms), or none.
    Set(Option<u64>),
}

pub struct StoreArgs<'v> {
    pub value: &'v [u8],
    pub cond: Cond,
    pub ttl: Ttl,
    pub flags: u32,
    /// memcached `cas`: store only if the record's CAS is this.
    pub cas: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreOutcome {
    Stored(u64),
    /// The condition (NX/XX, add/replace) did not hold.
    NotStored,
    /// CAS given and the record changed since.
    Exists,
    /// CAS given and there is no record.
    NotFound,
    OutOfMemory,
}

/// An overwrite: the record's old tags are dropped, as the new value is a new record.
pub fn store(e: &mut Entry<'_>, args: &StoreArgs<'_>) -> StoreOutcome {
    store_tagged(e, args, &[])
}

/// As `store`, giving the new record `tags` (TAG.SET).
pub fn store_tagged(e: &mut Entry<'_>, args: &StoreArgs<'_>, tags: &[Tag]) -> StoreOutcome {
    let old = e.item();
    if let Some(cas) = args.cas {
        match old {
            None => return StoreOutcome::NotFound,
            // Without CAS (`--cas no`) nothing matches, as with memcached's `-C`.
            Some(item) if item.cas() != cas || !item.has_cas() => return StoreOutcome::Exists,
            Some(_) => {}
        }
    }
    match (args.cond, old.is_some()) {
        (Cond::IfAbsent, true) | (Cond::IfPresent, false) => return StoreOutcome::NotStored,
        _ => {}
    }
    let deadline = match args.ttl {
        Ttl::Keep => old.and_then(|i| i.expire_at()),
        Ttl::Set(d) => d,
    };
    let value = args.value;
    match e.put_record(
        Kind::String,
        value.len(),
        deadline,
        args.flags,
        TagWrite::Set(tags),
        |buf, _| buf.copy_from_slice(value),
    ) {
        Ok(cas) => StoreOutcome::Stored(cas),
        Err(OutOfMemory) => StoreOutcome::OutOfMemory,
    }
}

/// Replaces a string's value, keeping its deadline and flags (INCR, SETRANGE).
pub fn rewrite(e: &mut Entry<'_>, value: &[u8]) -> Result<u64, OutOfMemory> {
    let (deadline, flags) = e.item().map_or((None, 0), |i| (i.expire_at(), i.flags()));
    e.put(Kind::String, value, deadline, flags)
}

/// Appends (or prepends) to an existing string, keeping deadline and flags.
/// Returns the new length, or None when the key is absent (nothing is created).
pub fn concat(e: &mut Entry<'_>, data: &[u8], prepend: bool) -> Result<Option<usize>, OutOfMemory> {
    let Some(old) = e.item() else { return Ok(None) };
    let (old_len, deadline, flags) = (old.value().len(), old.expire_at(), old.flags());
    let len = old_len + data.len();
    e.put_with(Kind::String, len, deadline, flags, |buf, old| {
        let old = old.map_or(&[][..], |o| o.value());
        if prepend {
            buf[..data.len()].copy_from_slice(data);
            buf[data.len()..].copy_from_slice(old);
        } else {
            buf[..old_len].copy_from_slice(old);
            buf[old_len..].copy_from_slice(data);
        }
    })?;
    Ok(Some(len))
}

/// The string value of a record, or Err for a record of another kind.
pub fn string_value<'a>(item: Option<Item<'a>>) -> Result<Option<&'a [u8]>, WrongType> {
    match item {
        None => Ok(None),
        Some(i) if i.kind() == Kind::String => Ok(Some(i.value())),
        Some(_) => Err(WrongType),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WrongType;

/// Deadline for a relative or absolute expiry argument, or None on overflow.
pub fn deadline(amount: i64, unit_ms: i64, absolute: bool, now: u64) -> Option<i64> {
    let ms = amount.checked_mul(unit_ms)?;
    if absolute {
        Some(ms)
    } else {
        ms.checked_add(now as i64)
    }
}

/// A delayed flush of the whole keyspace (memcached `flush_all <delay>`). memcached keeps a
/// single flush deadline: a delayed `flush_all` replaces the pending one and an immediate one
/// cancels it. At most one timer thread runs.
#[derive(Default)]
pub struct FlushTimer {
    /// Unix ms of the pending flush; 0 when none.
    at: AtomicU64,
    running: AtomicBool,
}

impl FlushTimer {
    /// Flushes `store` at `at` (Unix ms), replacing any pending flush.
    pub fn schedule(self: &Arc<Self>, store: &Arc<store::Store>, at: u64) {
        self.at.store(at, Relaxed);
        if self.running.swap(true, AcqRel) {
            return;
        }
        let timer = Arc::clone(self);
        let target = Arc::clone(store);
        let spawned = std::thread::Builder::new()
            .name("mc-flush".into())
            .spawn(move || timer.run(&target));
        if spawned.is_err() {
            // No timer: flush now rather than never.
            self.running.store(false, Release);
            self.cancel();
            store.flush();
        }
    }

    /// Drops the pending flush (an immediate `flush_all` supersedes it).
    pub fn cancel(&self) {
        self.at.store(0, Relaxed);
    }

    fn run(&self, store: &store::Store) {
        loop {
            let at = self.at.load(Relaxed);
            if at == 0 {
                self.running.store(false, Release);
                // A flush scheduled while we were stopping has no thread to run it: take over.
                if self.at.load(Relaxed) != 0 && !self.running.swap(true, AcqRel) {
                    continue;
                }
                return;
            }
            let now = store::now_ms();
            if now >= at {
                if self.at.compare_exchange(at, 0, Relaxed, Relaxed).is_ok() {
                    store.flush();
                }
                continue;
            }
            std::thread::sleep(std::time::Duration::from_millis((at - now).min(100)));
        }
    }
}
