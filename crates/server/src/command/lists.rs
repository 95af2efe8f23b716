//! List commands (LPUSH ... RPOPLPUSH), on the store's out-of-line lists (`store::collection`):
//! pushes and pops at either end are O(1).

use store::collection::List;
use store::{Collection, Kind};

use super::collections::{self as coll, Change, Fail};
use super::{parse_i64, Ctx, NOT_INTEGER, SYNTAX};

fn as_list(c: &Collection) -> &List {
    match c {
        Collection::List(l) => l,
        _ => unreachable!("a record of kind list holds a list"),
    }
}

fn as_list_mut(c: &mut Collection) -> &mut List {
    match c {
        Collection::List(l) => l,
        _ => unreachable!("a record of kind list holds a list"),
    }
}

pub use crate::blocking::{move_element, End};

/// LEFT or RIGHT.
pub fn parse_end(arg: &[u8]) -> Option<End> {
    if arg.eq_ignore_ascii_case(b"left") {
        Some(End::Left)
    } else if arg.eq_ignore_ascii_case(b"right") {
        Some(End::Right)
    } else {
        None
    }
}

fn push(ctx: &mut Ctx<'_, '_>, end: End, change: Change) {
    let args = ctx.args;
    let result = coll::write(&mut ctx.db, ctx.args.get(1), Kind::List, change, |c| {
        let l = as_list_mut(c);
        let values: Vec<&[u8]> = args.tail(2).collect();
        l.push_all(end == End::Left, &values);
        (l.len() as i64, true)
    });
    match result {
        Ok(n) => {
            if n.is_some() {
                ctx.shared.blocking.key_ready(ctx.args.get(1));
            }
            ctx.int(n.unwrap_or(0))
        }
        Err(f) => f.reply(ctx),
    }
}

pub fn lpush(ctx: &mut Ctx<'_, '_>) {
    push(ctx, End::Left, Change::Create)
}
pub fn rpush(ctx: &mut Ctx<'_, '_>) {
    push(ctx, End::Right, Change::Create)
}
pub fn lpushx(ctx: &mut Ctx<'_, '_>) {
    push(ctx, End::Left, Change::Grow)
}
pub fn rpushx(ctx: &mut Ctx<'_, '_>) {
    push(ctx, End::Right, Change::Grow)
}

/// Pops up to `count` elements from `end` of the list under `key` (None: no such key).
pub fn pop_from(
    db: &mut store::Db<'_, '_>,
    key: &[u8],
    end: End,
    count: usize,
) -> Result<Option<Vec<Box<[u8]>>>, Fail> {
    coll::write(db, key, Kind::List, Change::Shrink, |c| {
        let l = as_list_mut(c);
        let popped: Vec<Box<[u8]>> = (0..count)
            .map_while(|_| match end {
                End::Left => l.pop_front(),
                End::Right => l.pop_back(),
            })
            .collect();
        let changed = !popped.is_empty();
        (popped, changed)
    })
}

fn pop(ctx: &mut Ctx<'_, '_>, end: End) {
    let count = match coll::pop_count(ctx) {
        Ok(count) => count,
        Err(msg) => return ctx.err(msg),
    };
    match (
        pop_from(&mut ctx.db, ctx.args.get(1), end, count.unwrap_or(1)),
        count,
    ) {
        (Err(f), _) => f.reply(ctx),
        (Ok(popped), None) => ctx.bulk_opt(popped.as_ref().and_then(|p| p.first()).map(|v| &**v)),
        (Ok(None), Some(_)) => ctx.nil_array(),
        (Ok(Some(popped)), Some(_)) => {
            ctx.array(popped.len());
            popped.iter().for_each(|v| ctx.bulk(v));
        }
    }
}

pub fn lpop(ctx: &mut Ctx<'_, '_>) {
    pop(ctx, End::Left)
}
pub fn rpop(ctx: &mut Ctx<'_, '_>) {
    pop(ctx, End::Right)
}

/// Runs `f` on the list at argument 1 (None when missing), replying WRONGTYPE for others.
fn with_list(
    ctx: &mut Ctx<'_, '_>,
    f: impl FnOnce(Option<&List>, &mut Vec<u8>, resp::reply::Version),
) {
    let out = &mut *ctx.out;
    let v = ctx.conn.version;
    if let Err(fail) = coll::read(&mut ctx.db, ctx.args.get(1), Kind::List, |c| {
        f(c.map(as_list), out, v)
    }) {
        fail.reply(ctx)
    }
}

pub fn lrange(ctx: &mut Ctx<'_, '_>) {
    let (Some(start), Some(stop)) = (parse_i64(ctx.arg(2)), parse_i64(ctx.arg(3))) else {
        return ctx.err(NOT_INTEGER);
    };
    with_list(ctx, |l, out, _| {
        let range = l.and_then(|l| coll::index_range(start, stop, l.len()).map(|r| (l, r)));
        let Some((l, (from, to))) = range else {
            return resp::reply::array_len(out, 0);
        };
        resp::reply::array_len(out, to - from);
        (from..to).for_each(|i| resp::reply::bulk(out, l.get(i).expect("in range")));
    })
}

pub fn llen(ctx: &mut Ctx<'_, '_>) {
    with_list(ctx, |l, out, _| {
        resp::reply::integer(out, l.map_or(0, List::len) as i64)
    })
}

/// A Redis list index (negative from the end) as a position, if it is inside `len`.
fn position(index: i64, len: usize) -> Option<usize> {
    let i = if index < 0 { len as i64 + index } else { index };
    (0..len as i64).contains(&i).then_some(i as usize)
}

pub fn lindex(ctx: &mut Ctx<'_, '_>) {
    let Some(index) = ctx.int_arg(2) else { return };
    with_list(ctx, |l, out, v| {
        match l.and_then(|l| position(index, l.len()).and_then(|i| l.get(i))) {
            Some(value) => resp::reply::bulk(out, value),
            None => resp::reply::null(out, v),
        }
    })
}

pub fn lset(ctx: &mut Ctx<'_, '_>) {
    let Some(index) = ctx.int_arg(2) else { return };
    let value = ctx.arg(3);
    let key = ctx.arg(1);
    let result = coll::write(&mut ctx.db, key, Kind::List, Change::Grow, |c| {
        let l = as_list_mut(c);
        let done = position(index, l.len()).is_some_and(|i| l.set(i, value));
        (done, done)
    });
    match result {
        Err(f) => f.reply(ctx),
        Ok(None) => ctx.err(b"ERR no such key"),
        Ok(Some(false)) => ctx.err(b"ERR index out of range"),
        Ok(Some(true)) => ctx.ok(),
    }
}

pub fn lrem(ctx: &mut Ctx<'_, '_>) {
    let Some(count) = ctx.int_arg(2) else { return };
    let value = ctx.arg(3);
    let key = ctx.arg(1);
    let result = coll::write(&mut ctx.db, key, Kind::List, Change::Shrink, |c| {
        let l = as_list_mut(c);
        let limit = if count == 0 {
            usize::MAX
        } else {
            count.unsigned_abs() as usize
        };
        // Matches counted from the end the count says; only the first `limit` go.
        let matches: Vec<usize> = l
            .iter()
            .enumerate()
            .filter(|(_, v)| *v == value)
            .map(|(i, _)| i)
            .collect();
        let doomed: std::collections::HashSet<usize> = if count < 0 {
            matches.iter().rev().take(limit).copied().collect()
        } else {
            matches.iter().take(limit).copied().collect()
        };
        let removed = l.retain(|i, _| !doomed.contains(&i));
        (removed as i64, removed > 0)
    });
    match result {
        Ok(n) => ctx.int(n.unwrap_or(0)),
        Err(f) => f.reply(ctx),
    }
}

pub fn ltrim(ctx: &mut Ctx<'_, '_>) {
    let (Some(start), Some(stop)) = (parse_i64(ctx.arg(2)), parse_i64(ctx.arg(3))) else {
        return ctx.err(NOT_INTEGER);
    };
    let key = ctx.arg(1);
    let result = coll::write(&mut ctx.db, key, Kind::List, Change::Shrink, |c| {
        let l = as_list_mut(c);
        let before = l.len();
        match coll::index_range(start, stop, l.len()) {
            Some((from, to)) => l.keep_range(from, to),
            None => l.keep_range(0, 0),
        }
        ((), l.len() != before)
    });
    match result {
        Ok(_) => ctx.ok(),
        Err(f) => f.reply(ctx),
    }
}

pub fn linsert(ctx: &mut Ctx<'_, '_>) {
    let after = if ctx.arg(2).eq_ignore_ascii_case(b"after") {
        true
    } else if ctx.arg(2).eq_ignore_ascii_case(b"before") {
        false
    } else {
        return ctx.err(SYNTAX);
    };
    let (pivot, value) = (ctx.arg(3), ctx.arg(4));
    let key = ctx.arg(1);
    let result = coll::write(&mut ctx.db, key, Kind::List, Change::Grow, |c| {
        let l = as_list_mut(c);
        let found = l.iter().position(|v| v == pivot);
        match found {
            None => (-1, false),
            Some(i) => {
                l.insert(if after { i + 1 } else { i }, value);
                (l.len() as i64, true)
            }
        }
    });
    match result {
        Ok(n) => ctx.int(n.unwrap_or(0)),
        Err(f) => f.reply(ctx),
    }
}

pub fn lpos(ctx: &mut Ctx<'_, '_>) {
    let element = ctx.arg(2);
    let (mut rank, mut count, mut maxlen) = (1i64, None::<usize>, 0usize);
    let mut i = 3;
    while i < ctx.argc() {
        if i + 1 >= ctx.argc() {
            return ctx.err(SYNTAX);
        }
        let Some(n) = parse_i64(ctx.arg(i + 1)) else {
            return ctx.err(NOT_INTEGER);
        };
        match ctx.arg(i).to_ascii_lowercase().as_slice() {
            b"rank" => {
                if n == i64::MIN {
                    return ctx.err(b"ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807");
                }
                if n == 0 {
                    return ctx.err(b"ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list");
                }
                rank = n;
            }
            b"count" if n < 0 => return ctx.err(b"ERR COUNT can't be negative"),
            b"count" => count = Some(n as usize),
            b"maxlen" if n < 0 => return ctx.err(b"ERR MAXLEN can't be negative"),
            b"maxlen" => maxlen = n as usize,
            _ => return ctx.err(SYNTAX),
        }
        i += 2;
    }
    with_list(ctx, |l, out, v| {
        let want = match count {
            Some(0) => usize::MAX,
            Some(n) => n,
            None => 1,
        };
        let mut found = Vec::new();
        if let Some(l) = l {
            let scan = if maxlen == 0 {
                l.len()
            } else {
                maxlen.min(l.len())
            };
            let skip = (rank.unsigned_abs() - 1) as usize;
            let indexes: Box<dyn Iterator<Item = usize>> = if rank > 0 {
                Box::new(0..scan)
            } else {
                Box::new((l.len() - scan..l.len()).rev())
            };
            found = indexes
                .filter(|&i| l.get(i) == Some(element))
                .skip(skip)
                .take(want)
                .collect();
        }
        match count {
            None => match found.first() {
                Some(&i) => resp::reply::integer(out, i as i64),
                None => resp::reply::null(out, v),
            },
            Some(_) => {
                resp::reply::array_len(out, found.len());
                found
                    .iter()
                    .for_each(|&i| resp::reply::integer(out, i as i64));
            }
        }
    })
}

fn reply_moved(ctx: &mut Ctx<'_, '_>, result: Result<Option<Box<[u8]>>, Fail>) {
    match result {
        Ok(v) => {
            if v.is_some() {
                ctx.shared.blocking.key_ready(ctx.args.get(2));
            }
            ctx.bulk_opt(v.as_deref())
        }
        Err(f) => f.reply(ctx),
    }
}

pub fn lmove(ctx: &mut Ctx<'_, '_>) {
    let (Some(from), Some(to)) = (parse_end(ctx.arg(3)), parse_end(ctx.arg(4))) else {
        return ctx.err(SYNTAX);
    };
    let result = move_element(&mut ctx.db, ctx.args.get(1), ctx.args.get(2), from, to);
    reply_moved(ctx, result)
}

pub fn rpoplpush(ctx: &mut Ctx<'_, '_>) {
    let result = move_element(
        &mut ctx.db,
        ctx.args.get(1),
        ctx.args.get(2),
        End::Right,
        End::Left,
    );
    reply_moved(ctx, result)
}
