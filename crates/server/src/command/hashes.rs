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
        // Fields whose deadline passed are left out until the store removes them.
        Ok(encoded) => f(&hash::live(encoded, store::now_ms()), out, version),
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
            if hash::len(&encoded) == 0 {
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
        // As Redis, an increment keeps the field's deadline (HSET drops it).
        hash::set_with(old, &[(field, &text)], true, &mut encoded);
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

/// Options of HSCAN: MATCH, COUNT (checked, as Redis does), NOVALUES.
struct ScanOptions<'a> {
    pattern: Option<&'a [u8]>,
    novalues: bool,
}

fn scan_options<'a>(args: &super::Args<'a>) -> Result<ScanOptions<'a>, &'static [u8]> {
    let mut options = ScanOptions {
        pattern: None,
        novalues: false,
    };
    let mut i = 3;
    while i < args.len() {
        let name = args.get(i).to_ascii_lowercase();
        if name == b"novalues" {
            options.novalues = true;
            i += 1;
            continue;
        }
        if i + 1 >= args.len() {
            return Err(super::SYNTAX);
        }
        let value = args.get(i + 1);
        match name.as_slice() {
            b"match" => options.pattern = Some(value),
            b"count" => match parse_i64(value) {
                Some(n) if n >= 1 => {}
                Some(_) => return Err(super::SYNTAX),
                None => return Err(super::NOT_INTEGER),
            },
            _ => return Err(super::SYNTAX),
        }
        i += 2;
    }
    Ok(options)
}

/// HSCAN key cursor [MATCH pattern] [COUNT count] [NOVALUES]. A hash is one packed list, so
/// (as Redis does for its packed encodings) one call returns every field and cursor 0.
pub fn hscan(ctx: &mut Ctx<'_, '_>) {
    if super::keys::parse_cursor(ctx.arg(2)).is_none() {
        return ctx.err(b"ERR invalid cursor");
    }
    let options = scan_options(&ctx.args);
    with_hash(ctx, |h, out, _| {
        let options = match options {
            _ if h.is_empty() => ScanOptions {
                pattern: None,
                novalues: false,
            },
            Ok(options) => options,
            Err(msg) => return resp::reply::error(out, msg),
        };
        let found: Vec<(&[u8], &[u8])> = hash::fields(h)
            .filter(|(f, _)| options.pattern.is_none_or(|p| store::glob::matches(p, f)))
            .collect();
        resp::reply::array_len(out, 2);
        resp::reply::bulk(out, b"0");
        let per_field = if options.novalues { 1 } else { 2 };
        resp::reply::array_len(out, found.len() * per_field);
        for (field, value) in found {
            resp::reply::bulk(out, field);
            if !options.novalues {
                resp::reply::bulk(out, value);
            }
        }
    })
}

/// The most fields HRANDFIELD with a negative count returns (it may repeat fields, so the
/// reply's size is the client's choice): a bound on the reply buffer.
const MAX_RANDOM_FIELDS: u64 = 1 << 24;

/// HRANDFIELD key [count [WITHVALUES]]: a positive count gives distinct fields (all of them
/// when it is not smaller than the hash), a negative one |count| fields that may repeat.
pub fn hrandfield(ctx: &mut Ctx<'_, '_>) {
    let mut count = None;
    let mut withvalues = false;
    if ctx.argc() >= 3 {
        let Some(n) = ctx.int_arg(2) else { return };
        if ctx.argc() > 4 || (ctx.argc() == 4 && !ctx.arg(3).eq_ignore_ascii_case(b"withvalues")) {
            return ctx.err(super::SYNTAX);
        }
        withvalues = ctx.argc() == 4;
        if n.unsigned_abs() > MAX_RANDOM_FIELDS {
            return ctx.err(b"ERR value is out of range");
        }
        count = Some(n);
    }
    with_hash(ctx, |h, out, v| {
        let all: Vec<(&[u8], &[u8])> = hash::fields(h).collect();
        let Some(count) = count else {
            return match all.is_empty() {
                true => resp::reply::null(out, v),
                false => {
                    let i = store::random_u64() as usize % all.len();
                    resp::reply::bulk(out, all[i].0)
                }
            };
        };
        let pairs = withvalues && v == resp::reply::Version::Resp3;
        let per_field = if withvalues && !pairs { 2 } else { 1 };
        let put = |out: &mut Vec<u8>, (field, value): (&[u8], &[u8])| {
            if pairs {
                resp::reply::array_len(out, 2);
            }
            resp::reply::bulk(out, field);
            if withvalues {
                resp::reply::bulk(out, value);
            }
        };
        if count < 0 && !all.is_empty() {
            // Fields may repeat: written as drawn, never collected.
            let n = count.unsigned_abs() as usize;
            resp::reply::array_len(out, n * per_field);
            for _ in 0..n {
                put(out, all[store::random_u64() as usize % all.len()]);
            }
            return;
        }
        let picked: Vec<(&[u8], &[u8])> = if all.is_empty() || count <= 0 {
            Vec::new()
        } else if count as usize >= all.len() {
            all
        } else {
            // A partial Fisher-Yates shuffle: `count` distinct fields in random order.
            let mut all = all;
            let count = count as usize;
            for i in 0..count {
                let j = i + store::random_u64() as usize % (all.len() - i);
                all.swap(i, j);
            }
            all.truncate(count);
            all
        };
        resp::reply::array_len(out, picked.len() * per_field);
        for pair in picked {
            put(out, pair);
        }
    })
}
