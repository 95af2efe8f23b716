//! Hash commands, for partial updates of cached objects. A hash is one record whose value is
//! the packed field list of `store::hash`.

use store::{hash, Item, Kind};

use super::{parse_f64, parse_i64, Ctx, OOM, WRONGTYPE};

fn hash_value<'a>(item: Option<Item<'a>>) -> Result<&'a [u8], ()> {
    match item {
        None => Ok(&[]),
        Some(i) if i.kind() == Kind::Hash => Ok(i.value()),
        Some(_) => Err(()),
    }
}

fn wrong_args(ctx: &mut Ctx<'_, '_>) {
    let name = super::lower(ctx.arg(0));
    ctx.err(format!("ERR wrong number of arguments for '{name}' command").as_bytes())
}

/// Applies field updates; replies with the number of fields added (or OK for HMSET).
fn set_fields(ctx: &mut Ctx<'_, '_>, only_if_new: bool) -> Option<i64> {
    let updates: Vec<(&[u8], &[u8])> = (2..ctx.argc())
        .step_by(2)
        .map(|i| (ctx.args.get(i), ctx.args.get(i + 1)))
        .collect();
    let key = ctx.arg(1);
    let out = &mut *ctx.out;
    ctx.db.write(key, |e| {
        let Ok(old) = hash_value(e.item()) else {
            resp::reply::error(out, WRONGTYPE);
            return None;
        };
        if only_if_new && hash::get(old, updates[0].0).is_some() {
            return Some(0);
        }
        let mut encoded = Vec::with_capacity(old.len() + 64);
        let added = hash::set(old, &updates, &mut encoded);
        let deadline = e.item().and_then(|i| i.expire_at());
        match e.put(Kind::Hash, &encoded, deadline, 0) {
            Ok(_) => Some(added as i64),
            Err(_) => {
                resp::reply::error(out, OOM);
                None
            }
        }
    })
}

pub fn hset(ctx: &mut Ctx<'_, '_>) {
    if !ctx.argc().is_multiple_of(2) {
        return wrong_args(ctx);
    }
    if let Some(added) = set_fields(ctx, false) {
        ctx.int(added)
    }
}

pub fn hmset(ctx: &mut Ctx<'_, '_>) {
    if !ctx.argc().is_multiple_of(2) {
        return wrong_args(ctx);
    }
    if set_fields(ctx, false).is_some() {
        ctx.ok()
    }
}

pub fn hsetnx(ctx: &mut Ctx<'_, '_>) {
    if let Some(added) = set_fields(ctx, true) {
        ctx.int(added)
    }
}

/// Runs `f` on the hash at argument 1, replying WRONGTYPE for other kinds.
fn with_hash(ctx: &mut Ctx<'_, '_>, f: impl FnOnce(&[u8], &mut Vec<u8>, resp::reply::Version)) {
    let key = ctx.arg(1);
    let out = &mut *ctx.out;
    let version = ctx.conn.version;
    ctx.db.read(key, |item| match hash_value(item) {
        Ok(encoded) => f(encoded, out, version),
        Err(()) => resp::reply::error(out, WRONGTYPE),
    })
}

pub fn hget(ctx: &mut Ctx<'_, '_>) {
    let field = ctx.arg(2);
    with_hash(ctx, |h, out, v| match hash::get(h, field) {
        Some(value) => resp::reply::bulk(out, value),
        None => resp::reply::null(out, v),
    })
}

pub fn hmget(ctx: &mut Ctx<'_, '_>) {
    let args = ctx.args;
    with_hash(ctx, |h, out, v| {
        resp::reply::array_len(out, args.len() - 2);
        for field in args.tail(2) {
            match hash::get(h, field) {
                Some(value) => resp::reply::bulk(out, value),
                None => resp::reply::null(out, v),
            }
        }
    })
}

pub fn hgetall(ctx: &mut Ctx<'_, '_>) {
    with_hash(ctx, |h, out, v| {
        resp::reply::map_len(out, hash::len(h), v);
        for (field, value) in hash::fields(h) {
            resp::reply::bulk(out, field);
            resp::reply::bulk(out, value);
        }
    })
}

pub fn hkeys(ctx: &mut Ctx<'_, '_>) {
    with_hash(ctx, |h, out, _| {
        resp::reply::array_len(out, hash::len(h));
        hash::fields(h).for_each(|(f, _)| resp::reply::bulk(out, f));
    })
}

pub fn hvals(ctx: &mut Ctx<'_, '_>) {
    with_hash(ctx, |h, out, _| {
        resp::reply::array_len(out, hash::len(h));
        hash::fields(h).for_each(|(_, v)| resp::reply::bulk(out, v));
    })
}

pub fn hlen(ctx: &mut Ctx<'_, '_>) {
    with_hash(ctx, |h, out, _| {
        resp::reply::integer(out, hash::len(h) as i64)
    })
}

pub fn hexists(ctx: &mut Ctx<'_, '_>) {
    let field = ctx.arg(2);
    with_hash(ctx, |h, out, _| {
        resp::reply::integer(out, i64::from(hash::get(h, field).is_some()))
    })
}

pub fn hstrlen(ctx: &mut Ctx<'_, '_>) {
    let field = ctx.arg(2);
    with_hash(ctx, |h, out, _| {
        resp::reply::integer(out, hash::get(h, field).map_or(0, |v| v.len() as i64))
    })
}

pub fn hdel(ctx: &mut Ctx<'_, '_>) {
    let fields: Vec<&[u8]> = ctx.args.tail(2).collect();
    let key = ctx.arg(1);
    let out = &mut *ctx.out;
    ctx.db.write(key, |e| {
        let Ok(old) = hash_value(e.item()) else {
            return resp::reply::error(out, WRONGTYPE);
        };
        let mut encoded = Vec::with_capacity(old.len());
        let removed = hash::delete(old, &fields, &mut encoded);
        if removed > 0 {
            if encoded.is_empty() {
                e.remove();
            } else {
                let deadline = e.item().and_then(|i| i.expire_at());
                // Shrinking never needs room, so this cannot fail for memory.
                let _ = e.put(Kind::Hash, &encoded, deadline, 0);
            }
        }
        resp::reply::integer(out, removed as i64)
    })
}

/// Read-modify-write of one numeric field.
fn incr_field<T>(
    ctx: &mut Ctx<'_, '_>,
    parse: fn(&[u8]) -> Option<T>,
    bad_value: &'static [u8],
    apply: impl FnOnce(T) -> Result<Vec<u8>, &'static [u8]>,
    reply: impl FnOnce(&mut Vec<u8>, &[u8]),
) where
    T: Default,
{
    let (key, field) = (ctx.arg(1), ctx.arg(2));
    let out = &mut *ctx.out;
    ctx.db.write(key, |e| {
        let Ok(old) = hash_value(e.item()) else {
            return resp::reply::error(out, WRONGTYPE);
        };
        let current = match hash::get(old, field) {
            None => T::default(),
            Some(v) => match parse(v) {
                Some(n) => n,
                None => return resp::reply::error(out, bad_value),
            },
        };
        let text = match apply(current) {
            Ok(t) => t,
            Err(msg) => return resp::reply::error(out, msg),
        };
        let mut encoded = Vec::with_capacity(old.len() + 32);
        hash::set(old, &[(field, &text)], &mut encoded);
        let deadline = e.item().and_then(|i| i.expire_at());
        match e.put(Kind::Hash, &encoded, deadline, 0) {
            Ok(_) => reply(out, &text),
            Err(_) => resp::reply::error(out, OOM),
        }
    })
}

pub fn hincrby(ctx: &mut Ctx<'_, '_>) {
    let Some(delta) = ctx.int_arg(3) else { return };
    incr_field(
        ctx,
        parse_i64,
        b"ERR hash value is not an integer",
        |n: i64| match n.checked_add(delta) {
            Some(next) => Ok(itoa::Buffer::new().format(next).as_bytes().to_vec()),
            None => Err(b"ERR increment or decrement would overflow"),
        },
        |out, text| resp::reply::integer(out, parse_i64(text).unwrap_or_default()),
    )
}

pub fn hincrbyfloat(ctx: &mut Ctx<'_, '_>) {
    // As Redis: the increment is checked before the key's type.
    let Some(delta) = parse_f64(ctx.arg(3)) else {
        return ctx.err(super::NOT_FLOAT);
    };
    // Redis refuses an infinite increment here, before looking at the key.
    if !delta.is_finite() {
        return ctx.err(b"ERR value is NaN or Infinity");
    }
    incr_field(
        ctx,
        parse_f64,
        b"ERR hash value is not a float",
        |n: f64| {
            let next = n + delta;
            if !next.is_finite() {
                return Err(b"ERR increment would produce NaN or Infinity");
            }
            let mut text = Vec::new();
            resp::reply::format_double(next, &mut text);
            Ok(text)
        },
        resp::reply::bulk,
    )
}
