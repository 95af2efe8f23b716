//! What the set, sorted set and list commands share: reading and changing a collection record
//! of the right kind (WRONGTYPE otherwise, a missing key read as empty, a new key created on
//! first write, an emptied one deleted by the store), Redis's index arithmetic, and a cheap
//! random source for SPOP / SRANDMEMBER / ZRANDMEMBER.

use std::cell::Cell;

use store::{Collection, Db, Kind};

use super::Ctx;

pub use crate::blocking::Fail;

impl Fail {
    pub fn reply(self, ctx: &mut Ctx<'_, '_>) {
        ctx.err(self.message())
    }
}

/// Runs `f` on the collection of `kind` under `key` (None when there is no key).
pub fn read<R>(
    db: &mut Db<'_, '_>,
    key: &[u8],
    kind: Kind,
    f: impl FnOnce(Option<&Collection>) -> R,
) -> Result<R, Fail> {
    db.read(key, |item| match item {
        None => Ok(f(None)),
        Some(item) if item.kind() == kind => Ok(f(item.collection())),
        Some(_) => Err(Fail::WrongType),
    })
}

/// Whether `key` holds something other than a collection of `kind`.
pub fn wrong_type(db: &mut Db<'_, '_>, key: &[u8], kind: Kind) -> bool {
    db.read(key, |item| item.is_some_and(|i| i.kind() != kind))
}

/// An empty collection of `kind`.
pub fn empty(kind: Kind) -> Collection {
    match kind {
        Kind::Set => Collection::Set(store::collection::Set::new()),
        Kind::ZSet => Collection::ZSet(store::collection::ZSet::new()),
        _ => Collection::List(store::collection::List::new()),
    }
}

/// What a change to a collection may do, which decides whether it runs over the memory limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Creates a missing key and may add (SADD, RPUSH): refused with OOM over the limit.
    Create,
    /// May add to an existing key only (RPUSHX, LSET, LINSERT, ZADD XX): refused over the limit.
    Grow,
    /// Only takes away (pops, removals, trims): runs over the limit too, as in Redis.
    Shrink,
}

/// Changes the collection of `kind` under `key` in place; `f` returns its result and whether
/// it changed anything. A missing key is created from an empty collection for
/// `Change::Create` (and kept only if `f` left something in it); otherwise `Ok(None)`.
pub fn write<R>(
    db: &mut Db<'_, '_>,
    key: &[u8],
    kind: Kind,
    change: Change,
    f: impl FnOnce(&mut Collection) -> (R, bool),
) -> Result<Option<R>, Fail> {
    db.write(key, |e| match e.item() {
        Some(item) if item.kind() != kind => Err(Fail::WrongType),
        Some(_) if change == Change::Shrink => Ok(e.shrink_collection(f)),
        Some(_) => match e.update_collection(f) {
            Some(Ok(r)) => Ok(Some(r)),
            Some(Err(_)) => Err(Fail::Oom),
            None => unreachable!("a record of a collection kind holds one"),
        },
        None if change != Change::Create => Ok(None),
        None => {
            let mut fresh = empty(kind);
            let (r, _) = f(&mut fresh);
            if !fresh.is_empty() {
                e.put_collection(fresh, None).map_err(|_| Fail::Oom)?;
            }
            Ok(Some(r))
        }
    })
}

/// Stores `collection` under `key` (replacing whatever is there, its deadline dropped), or
/// deletes the key when it is empty (the *STORE commands).
pub fn store(db: &mut Db<'_, '_>, key: &[u8], collection: Collection) -> Result<(), Fail> {
    db.write(key, |e| {
        if collection.is_empty() {
            e.remove();
            return Ok(());
        }
        e.put_collection(collection, None)
            .map(|_| ())
            .map_err(|_| Fail::Oom)
    })
}

/// The optional count of LPOP / RPOP / ZPOPMIN / ZPOPMAX (argument 2): None without one.
pub fn pop_count(ctx: &Ctx<'_, '_>) -> Result<Option<usize>, &'static [u8]> {
    match ctx.argc() {
        2 => Ok(None),
        3 => match super::parse_i64(ctx.arg(2)) {
            Some(n) if n >= 0 => Ok(Some(n as usize)),
            _ => Err(b"ERR value is out of range, must be positive"),
        },
        _ => Err(super::SYNTAX),
    }
}

/// Redis's start/stop indexes (negative from the end) over `len` items, as a half-open range;
/// None when it selects nothing.
pub fn index_range(start: i64, stop: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    let start = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let stop = if stop < 0 {
        len + stop
    } else {
        stop.min(len - 1)
    };
    (start <= stop && start < len).then_some((start as usize, stop as usize + 1))
}

thread_local! {
    static RNG: Cell<u64> = Cell::new({
        let seed = ahash::RandomState::new().hash_one(std::thread::current().id());
        seed | 1
    });
}

/// A uniform number below `n` (n > 0): xorshift64*, per thread.
pub fn random_below(n: usize) -> usize {
    RNG.with(|state| {
        let mut x = state.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        state.set(x);
        (x.wrapping_mul(0x2545_f491_4f6c_dd1d) % n as u64) as usize
    })
}

/// SCAN-family options after the cursor (MATCH, COUNT; NOVALUES/NOSCORES not taken): the
/// pattern, or the error to reply.
pub fn scan_options(ctx: &Ctx<'_, '_>, from: usize) -> Result<Option<Vec<u8>>, &'static [u8]> {
    let mut pattern = None;
    let mut i = from;
    while i < ctx.argc() {
        if i + 1 >= ctx.argc() {
            return Err(super::SYNTAX);
        }
        let value = ctx.arg(i + 1);
        match ctx.arg(i).to_ascii_lowercase().as_slice() {
            b"match" => pattern = Some(value.to_vec()),
            b"count" => match super::parse_i64(value) {
                Some(n) if n >= 1 => {}
                Some(_) => return Err(super::SYNTAX),
                None => return Err(super::NOT_INTEGER),
            },
            _ => return Err(super::SYNTAX),
        }
        i += 2;
    }
    Ok(pattern)
}

/// Checks an SSCAN/ZSCAN cursor as Redis does; the collection is answered whole at cursor 0
/// (as Redis answers its small encodings), so any cursor past 0 finds nothing more.
pub fn scan_cursor(arg: &[u8]) -> Option<u64> {
    let digits = arg.strip_prefix(b"-").unwrap_or(arg);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(arg)
        .ok()?
        .parse::<i128>()
        .ok()
        .map(|n| n as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_ranges_follow_redis() {
        assert_eq!(index_range(0, -1, 3), Some((0, 3)));
        assert_eq!(index_range(-2, -1, 3), Some((1, 3)));
        assert_eq!(index_range(-10, 1, 3), Some((0, 2)));
        assert_eq!(index_range(2, 1, 3), None);
        assert_eq!(index_range(5, 10, 3), None);
        assert_eq!(index_range(0, 100, 3), Some((0, 3)));
        assert_eq!(index_range(0, -1, 0), None);
    }

    #[test]
    fn random_numbers_cover_their_range() {
        let mut seen = [false; 5];
        for _ in 0..1000 {
            seen[random_below(5)] = true;
        }
        assert!(seen.iter().all(|&s| s));
    }
}
