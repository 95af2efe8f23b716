//! Set commands (SADD ... SINTERCARD), on the store's out-of-line sets (`store::collection`).

use std::collections::HashSet;

use store::collection::Set;
use store::{glob, Collection, Kind};

use super::collections::{self as coll, Change, Fail};
use super::{parse_i64, Ctx};

fn as_set(c: &Collection) -> &Set {
    match c {
        Collection::Set(s) => s,
        _ => unreachable!("a record of kind set holds a set"),
    }
}

fn as_set_mut(c: &mut Collection) -> &mut Set {
    match c {
        Collection::Set(s) => s,
        _ => unreachable!("a record of kind set holds a set"),
    }
}

/// Replies with `members` as a set (RESP3 `~`, RESP2 array).
fn reply_set<'m>(ctx: &mut Ctx<'_, '_>, members: impl ExactSizeIterator<Item = &'m [u8]>) {
    ctx.set(members.len());
    for m in members {
        ctx.bulk(m);
    }
}

pub fn sadd(ctx: &mut Ctx<'_, '_>) {
    let args = ctx.args;
    let key = ctx.arg(1);
    let result = coll::write(&mut ctx.db, key, Kind::Set, Change::Create, |c| {
        let s = as_set_mut(c);
        s.expect(args.len().saturating_sub(2), args.get(2));
        let added = args.tail(2).filter(|m| s.insert(m)).count();
        (added as i64, added > 0)
    });
    match result {
        Ok(n) => ctx.int(n.unwrap_or(0)),
        Err(f) => f.reply(ctx),
    }
}

pub fn srem(ctx: &mut Ctx<'_, '_>) {
    let args = ctx.args;
    let key = ctx.arg(1);
    let result = coll::write(&mut ctx.db, key, Kind::Set, Change::Shrink, |c| {
        let s = as_set_mut(c);
        let removed = args.tail(2).filter(|m| s.remove(m)).count();
        (removed as i64, removed > 0)
    });
    match result {
        Ok(n) => ctx.int(n.unwrap_or(0)),
        Err(f) => f.reply(ctx),
    }
}

pub fn smembers(ctx: &mut Ctx<'_, '_>) {
    let out = &mut *ctx.out;
    let v = ctx.conn.version;
    let result = coll::read(&mut ctx.db, ctx.args.get(1), Kind::Set, |c| {
        let Some(s) = c.map(as_set) else {
            return resp::reply::set_len(out, 0, v);
        };
        resp::reply::set_len(out, s.len(), v);
        s.iter().for_each(|m| resp::reply::bulk(out, &m));
    });
    if let Err(f) = result {
        f.reply(ctx)
    }
}

pub fn sismember(ctx: &mut Ctx<'_, '_>) {
    let member = ctx.arg(2);
    match coll::read(&mut ctx.db, ctx.args.get(1), Kind::Set, |c| {
        c.is_some_and(|c| as_set(c).contains(member))
    }) {
        Ok(found) => ctx.int(i64::from(found)),
        Err(f) => f.reply(ctx),
    }
}

pub fn smismember(ctx: &mut Ctx<'_, '_>) {
    let args = ctx.args;
    match coll::read(&mut ctx.db, ctx.args.get(1), Kind::Set, |c| {
        args.tail(2)
            .map(|m| c.is_some_and(|c| as_set(c).contains(m)))
            .collect::<Vec<_>>()
    }) {
        Ok(found) => {
            ctx.array(found.len());
            found.into_iter().for_each(|f| ctx.int(i64::from(f)));
        }
        Err(f) => f.reply(ctx),
    }
}

pub fn scard(ctx: &mut Ctx<'_, '_>) {
    match coll::read(&mut ctx.db, ctx.args.get(1), Kind::Set, |c| {
        c.map_or(0, Collection::len)
    }) {
        Ok(n) => ctx.int(n as i64),
        Err(f) => f.reply(ctx),
    }
}

/// A count argument that must be >= 0 (SPOP), or the error replied.
fn positive_count(ctx: &mut Ctx<'_, '_>, i: usize) -> Option<usize> {
    match parse_i64(ctx.arg(i)) {
        Some(n) if n >= 0 => Some(n as usize),
        _ => {
            ctx.err(b"ERR value is out of range, must be positive");
            None
        }
    }
}

pub fn spop(ctx: &mut Ctx<'_, '_>) {
    if ctx.argc() > 3 {
        return ctx.err(super::SYNTAX);
    }
    let count = if ctx.argc() == 3 {
        match positive_count(ctx, 2) {
            Some(n) => Some(n),
            None => return,
        }
    } else {
        None
    };
    let key = ctx.arg(1);
    let result = coll::write(&mut ctx.db, key, Kind::Set, Change::Shrink, |c| {
        let s = as_set_mut(c);
        let n = count.unwrap_or(1).min(s.len());
        let popped: Vec<Box<[u8]>> = (0..n)
            .filter_map(|_| s.take_index(coll::random_below(s.len())))
            .collect();
        // Redis keeps the few members left in a new set (its SPOP "case 3"), so a hash set
        // emptied this way is small again, as OBJECT ENCODING shows.
        if count.is_some() && !s.is_empty() && s.len() * 5 <= n {
            s.rebuild_small();
        }
        let changed = !popped.is_empty();
        (popped, changed)
    });
    match (result, count) {
        (Err(f), _) => f.reply(ctx),
        (Ok(popped), None) => ctx.bulk_opt(popped.as_ref().and_then(|p| p.first()).map(|m| &**m)),
        (Ok(popped), Some(_)) => {
            let popped = popped.unwrap_or_default();
            reply_set(ctx, popped.iter().map(|m| &**m));
        }
    }
}

pub fn srandmember(ctx: &mut Ctx<'_, '_>) {
    if ctx.argc() > 3 {
        return ctx.err(super::SYNTAX);
    }
    let count = if ctx.argc() == 3 {
        match parse_i64(ctx.arg(2)) {
            Some(n) if n > -i64::MAX => Some(n),
            Some(_) => return ctx.err(b"ERR value is out of range"),
            None => return ctx.err(super::NOT_INTEGER),
        }
    } else {
        None
    };
    let result = coll::read(&mut ctx.db, ctx.args.get(1), Kind::Set, |c| {
        let Some(s) = c.map(as_set) else {
            return Vec::new();
        };
        match count {
            None if s.is_empty() => Vec::new(),
            None => vec![s.get_index(coll::random_below(s.len())).unwrap().to_vec()],
            Some(n) if n < 0 && s.len() <= store::collection::SMALL_SET => {
                // A small set's member at an index is a scan: list them once.
                let members: Vec<_> = s.iter().collect();
                (0..n.unsigned_abs())
                    .map(|_| members[coll::random_below(members.len())].to_vec())
                    .collect()
            }
            Some(n) if n < 0 => (0..n.unsigned_abs())
                .map(|_| s.get_index(coll::random_below(s.len())).unwrap().to_vec())
                .collect(),
            Some(n) if n as usize >= s.len() => s.iter().map(|m| m.to_vec()).collect(),
            Some(n) => {
                // Distinct members: a partial shuffle of the indexes.
                let mut picked = HashSet::new();
                while picked.len() < n as usize {
                    picked.insert(coll::random_below(s.len()));
                }
                picked
                    .into_iter()
                    .map(|i| s.get_index(i).unwrap().to_vec())
                    .collect()
            }
        }
    });
    match (result, count) {
        (Err(f), _) => f.reply(ctx),
        (Ok(members), None) => ctx.bulk_opt(members.first().map(Vec::as_slice)),
        (Ok(members), Some(_)) => {
            ctx.array(members.len());
            members.iter().for_each(|m| ctx.bulk(m));
        }
    }
}

pub fn sscan(ctx: &mut Ctx<'_, '_>) {
    let Some(cursor) = coll::scan_cursor(ctx.arg(2)) else {
        return ctx.err(b"ERR invalid cursor");
    };
    let pattern = match coll::scan_options(ctx, 3) {
        Ok(p) => p,
        Err(msg) => return ctx.err(msg),
    };
    let result = coll::read(&mut ctx.db, ctx.args.get(1), Kind::Set, |c| {
        let Some(s) = c.map(as_set).filter(|_| cursor == 0) else {
            return Vec::new();
        };
        s.iter()
            .filter(|m| pattern.as_deref().is_none_or(|p| glob::matches(p, m)))
            .map(|m| m.to_vec())
            .collect()
    });
    match result {
        Err(f) => f.reply(ctx),
        Ok(members) => {
            ctx.array(2);
            ctx.bulk(b"0");
            ctx.array(members.len());
            members.iter().for_each(|m| ctx.bulk(m));
        }
    }
}

pub fn smove(ctx: &mut Ctx<'_, '_>) {
    let (src, dst, member) = (ctx.arg(1), ctx.arg(2), ctx.arg(3));
    // Both types are checked before anything moves, as in Redis.
    if coll::wrong_type(&mut ctx.db, src, Kind::Set)
        || coll::wrong_type(&mut ctx.db, dst, Kind::Set)
    {
        return Fail::WrongType.reply(ctx);
    }
    if src == dst {
        let found = coll::read(&mut ctx.db, src, Kind::Set, |c| {
            c.is_some_and(|c| as_set(c).contains(member))
        });
        return ctx.int(i64::from(found.unwrap_or(false)));
    }
    match coll::read(&mut ctx.db, src, Kind::Set, |c| {
        c.is_some_and(|c| as_set(c).contains(member))
    }) {
        Err(f) => return f.reply(ctx),
        Ok(false) => return ctx.int(0),
        Ok(true) => {}
    }
    // Into `dst` first, out of `src` after: a destination refused at the memory limit leaves
    // the member where it was.
    let added = coll::write(&mut ctx.db, dst, Kind::Set, Change::Create, |c| {
        let added = as_set_mut(c).insert(member);
        ((), added)
    });
    if let Err(f) = added {
        return f.reply(ctx);
    }
    let removed = coll::write(&mut ctx.db, src, Kind::Set, Change::Shrink, |c| {
        let removed = as_set_mut(c).remove(member);
        ((), removed)
    });
    match removed {
        Ok(_) => ctx.int(1),
        Err(f) => f.reply(ctx),
    }
}

/// The members of the sets under `keys` (None for a missing key), every key's type checked
/// first as Redis does.
fn load(ctx: &mut Ctx<'_, '_>, keys: &[&[u8]]) -> Result<Vec<Option<Vec<Vec<u8>>>>, Fail> {
    keys.iter()
        .map(|key| {
            coll::read(&mut ctx.db, key, Kind::Set, |c| {
                c.map(|c| as_set(c).iter().map(|m| m.to_vec()).collect())
            })
        })
        .collect()
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Algebra {
    Inter,
    Union,
    Diff,
}

/// The result of `op` over the sets under `keys`, in a stable order (the first set's).
fn compute(ctx: &mut Ctx<'_, '_>, keys: &[&[u8]], op: Algebra) -> Result<Vec<Vec<u8>>, Fail> {
    let sets = load(ctx, keys)?;
    let mut sets = sets.into_iter();
    let first = sets.next().flatten().unwrap_or_default();
    let rest: Vec<HashSet<Vec<u8>>> = sets
        .map(|s| s.unwrap_or_default().into_iter().collect())
        .collect();
    Ok(match op {
        Algebra::Inter => first
            .into_iter()
            .filter(|m| rest.iter().all(|s| s.contains(m)))
            .collect(),
        Algebra::Diff => first
            .into_iter()
            .filter(|m| !rest.iter().any(|s| s.contains(m)))
            .collect(),
        Algebra::Union => {
            let mut seen: HashSet<Vec<u8>> = first.iter().cloned().collect();
            let mut all = first;
            for s in rest {
                for m in s {
                    if seen.insert(m.clone()) {
                        all.push(m);
                    }
                }
            }
            all
        }
    })
}

fn algebra(ctx: &mut Ctx<'_, '_>, op: Algebra) {
    let keys: Vec<&[u8]> = ctx.args.tail(1).collect();
    match compute(ctx, &keys, op) {
        Ok(members) => reply_set(ctx, members.iter().map(Vec::as_slice)),
        Err(f) => f.reply(ctx),
    }
}

fn algebra_store(ctx: &mut Ctx<'_, '_>, op: Algebra) {
    let keys: Vec<&[u8]> = ctx.args.tail(2).collect();
    let members = match compute(ctx, &keys, op) {
        Ok(m) => m,
        Err(f) => return f.reply(ctx),
    };
    let mut set = Set::new();
    members.iter().for_each(|m| {
        set.insert(m);
    });
    let n = set.len();
    match coll::store(&mut ctx.db, ctx.args.get(1), Collection::Set(set)) {
        Ok(()) => ctx.int(n as i64),
        Err(f) => f.reply(ctx),
    }
}

pub fn sinter(ctx: &mut Ctx<'_, '_>) {
    algebra(ctx, Algebra::Inter)
}
pub fn sunion(ctx: &mut Ctx<'_, '_>) {
    algebra(ctx, Algebra::Union)
}
pub fn sdiff(ctx: &mut Ctx<'_, '_>) {
    algebra(ctx, Algebra::Diff)
}
pub fn sinterstore(ctx: &mut Ctx<'_, '_>) {
    algebra_store(ctx, Algebra::Inter)
}
pub fn sunionstore(ctx: &mut Ctx<'_, '_>) {
    algebra_store(ctx, Algebra::Union)
}
pub fn sdiffstore(ctx: &mut Ctx<'_, '_>) {
    algebra_store(ctx, Algebra::Diff)
}

/// `numkeys key... [LIMIT n]` (SINTERCARD, ZINTERCARD): the keys and the limit (0: none), or
/// the error replied.
pub fn numkeys_and_limit<'a>(ctx: &mut Ctx<'a, '_>) -> Option<(Vec<&'a [u8]>, usize)> {
    let numkeys = parse_i64(ctx.arg(1)).unwrap_or(0);
    if numkeys <= 0 {
        ctx.err(b"ERR numkeys should be greater than 0");
        return None;
    }
    if numkeys as usize > ctx.argc() - 2 {
        ctx.err(b"ERR Number of keys can't be greater than number of args");
        return None;
    }
    let keys: Vec<&'a [u8]> = (2..2 + numkeys as usize).map(|i| ctx.arg(i)).collect();
    let mut limit = 0;
    let mut i = 2 + numkeys as usize;
    while i < ctx.argc() {
        if ctx.arg(i).eq_ignore_ascii_case(b"limit") && i + 1 < ctx.argc() {
            match parse_i64(ctx.arg(i + 1)) {
                Some(n) if n >= 0 => limit = n as usize,
                Some(_) => {
                    ctx.err(b"ERR LIMIT can't be negative");
                    return None;
                }
                None => {
                    ctx.err(super::NOT_INTEGER);
                    return None;
                }
            }
            i += 2;
        } else {
            ctx.err(super::SYNTAX);
            return None;
        }
    }
    Some((keys, limit))
}

pub fn sintercard(ctx: &mut Ctx<'_, '_>) {
    let Some((keys, limit)) = numkeys_and_limit(ctx) else {
        return;
    };
    match compute(ctx, &keys, Algebra::Inter) {
        Ok(members) => {
            let n = if limit > 0 {
                members.len().min(limit)
            } else {
                members.len()
            };
            ctx.int(n as i64)
        }
        Err(f) => f.reply(ctx),
    }
}
