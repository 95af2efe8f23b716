//! String commands: GET, SET and its variants, counters, APPEND and ranges.

use store::{now_ms, Kind};

use super::{parse_f64, parse_i64, Ctx, NOT_FLOAT, NOT_INTEGER, OOM, SYNTAX, WRONGTYPE};
use crate::keyspace::{self as ops, Cond, StoreArgs, StoreOutcome, Ttl};

const TOO_BIG: &[u8] = b"ERR string exceeds maximum allowed size (max-value-size)";

fn max_value_size(ctx: &Ctx<'_, '_>) -> usize {
    ctx.shared
        .settings
        .max_value_size
        .load(std::sync::atomic::Ordering::Relaxed)
}

pub fn get(ctx: &mut Ctx<'_, '_>) {
    let key = ctx.arg(1);
    let out = &mut *ctx.out;
    let version = ctx.conn.version;
    ctx.db.read(key, |item| match ops::string_value(item) {
        Ok(Some(v)) => resp::reply::bulk(out, v),
        Ok(None) => resp::reply::null(out, version),
        Err(_) => resp::reply::error(out, WRONGTYPE),
    })
}

/// Parsed expiry options of SET / GETEX. `At` keeps the option and its unvalidated amount: as in
/// Redis, the amount is checked only once every option has parsed (a syntax error wins), and
/// GETEX checks it only after the key's type.
enum ExpireOpt<'a> {
    None,
    Keep,
    Persist,
    At(&'a [u8], &'a [u8]),
}

impl ExpireOpt<'_> {
    fn is_timed(&self) -> bool {
        matches!(self, ExpireOpt::At(..))
    }
}

/// The absolute deadline of an EX/PX/EXAT/PXAT amount, or the error Redis replies
/// (`getExpireMillisecondsOrReply`).
fn expire_deadline(opt: &[u8], value: &[u8], command: &str) -> Result<u64, Vec<u8>> {
    let Some(n) = parse_i64(value) else {
        return Err(NOT_INTEGER.to_vec());
    };
    let (unit, absolute) = match opt.to_ascii_lowercase().as_slice() {
        b"ex" => (1000, false),
        b"px" => (1, false),
        b"exat" => (1000, true),
        _ => (1, true),
    };
    match ops::deadline(n, unit, absolute, now_ms()) {
        Some(d) if n > 0 && d > 0 => Ok(d as u64),
        _ => Err(format!("ERR invalid expire time in '{command}' command").into_bytes()),
    }
}

/// Parses EX/PX/EXAT/PXAT seconds-or-ms argument into an absolute deadline, replying with the
/// error on failure.
fn parse_expire(ctx: &mut Ctx<'_, '_>, opt: &[u8], value: &[u8], command: &str) -> Option<u64> {
    match expire_deadline(opt, value, command) {
        Ok(d) => Some(d),
        Err(msg) => {
            ctx.err(&msg);
            None
        }
    }
}

/// Redis's `parseExtendedStringArgumentsOrReply`: options may repeat (`NX NX`, `EX 1 EX 2`, the
/// last amount wins) but not conflict (`NX XX`, `EX 1 PX 2`, `KEEPTTL EX 1`). `set` selects
/// SET's options (NX XX GET KEEPTTL) over GETEX's (PERSIST). None: a syntax error.
fn parse_string_options<'a>(
    args: &super::Args<'a>,
    from: usize,
    set: bool,
) -> Option<(Cond, bool, ExpireOpt<'a>)> {
    let mut cond = Cond::Always;
    let mut expire = ExpireOpt::None;
    let mut get_old = false;
    let mut i = from;
    while i < args.len() {
        let opt = args.get(i);
        let next = (i + 1 < args.len()).then(|| args.get(i + 1));
        let lower = opt.to_ascii_lowercase();
        // A timed option may repeat itself but not follow another kind of expiry.
        let timed_ok = |expire: &ExpireOpt<'_>| match expire {
            ExpireOpt::None => true,
            ExpireOpt::At(prev, _) => prev.eq_ignore_ascii_case(opt),
            _ => false,
        };
        match lower.as_slice() {
            b"nx" if set && cond != Cond::IfPresent => cond = Cond::IfAbsent,
            b"xx" if set && cond != Cond::IfAbsent => cond = Cond::IfPresent,
            b"get" if set => get_old = true,
            b"keepttl" if set && !expire.is_timed() => expire = ExpireOpt::Keep,
            b"persist" if !set && !expire.is_timed() => expire = ExpireOpt::Persist,
            b"ex" | b"px" | b"exat" | b"pxat" if timed_ok(&expire) => {
                let value = next?;
                expire = ExpireOpt::At(opt, value);
                i += 1;
            }
            _ => return None,
        }
        i += 1;
    }
    Some((cond, get_old, expire))
}

pub fn set(ctx: &mut Ctx<'_, '_>) {
    let Some((cond, get_old, expire)) = parse_string_options(&ctx.args, 3, true) else {
        return ctx.err(SYNTAX);
    };
    let ttl = match expire {
        ExpireOpt::Keep => Ttl::Keep,
        ExpireOpt::At(opt, value) => match parse_expire(ctx, opt, value, "set") {
            Some(d) => Ttl::Set(Some(d)),
            None => return,
        },
        _ => Ttl::Set(None),
    };
    // EXAT/PXAT in the past: the write happens (NX/XX, GET and the reply as usual) and the key
    // is gone at once, as Redis deletes it on its next access; keeping it would count it in
    // DBSIZE until the reaper comes.
    let expired = matches!(ttl, Ttl::Set(Some(d)) if d <= now_ms());
    let key = ctx.arg(1);
    let value = ctx.arg(2);
    let args = StoreArgs {
        value,
        cond,
        ttl,
        flags: 0,
        cas: None,
    };
    let out = &mut *ctx.out;
    let version = ctx.conn.version;
    ctx.db.write(key, |e| {
        let store = |e: &mut store::Entry<'_>| {
            let outcome = ops::store(e, &args);
            if expired && matches!(outcome, StoreOutcome::Stored(_)) {
                e.remove();
            }
            outcome
        };
        if get_old {
            match ops::string_value(e.item()) {
                Err(_) => resp::reply::error(out, WRONGTYPE),
                Ok(old) => {
                    let old = old.map(|v| v.to_vec());
                    if store(e) == StoreOutcome::OutOfMemory {
                        return resp::reply::error(out, OOM);
                    }
                    match old {
                        Some(v) => resp::reply::bulk(out, &v),
                        None => resp::reply::null(out, version),
                    }
                }
            }
        } else {
            match store(e) {
                StoreOutcome::Stored(_) => resp::reply::ok(out),
                StoreOutcome::OutOfMemory => resp::reply::error(out, OOM),
                _ => resp::reply::null(out, version),
            }
        }
    })
}

fn store_simple(
    ctx: &mut Ctx<'_, '_>,
    key: &[u8],
    value: &[u8],
    cond: Cond,
    deadline: Option<u64>,
) -> StoreOutcome {
    let args = StoreArgs {
        value,
        cond,
        ttl: Ttl::Set(deadline),
        flags: 0,
        cas: None,
    };
    ctx.db.write(key, |e| ops::store(e, &args))
}

pub fn setnx(ctx: &mut Ctx<'_, '_>) {
    match store_simple(ctx, ctx.arg(1), ctx.arg(2), Cond::IfAbsent, None) {
        StoreOutcome::Stored(_) => ctx.int(1),
        StoreOutcome::OutOfMemory => ctx.err(OOM),
        _ => ctx.int(0),
    }
}

fn setex_with(ctx: &mut Ctx<'_, '_>, unit: &[u8], name: &str) {
    let Some(d) = parse_expire(ctx, unit, ctx.arg(2), name) else {
        return;
    };
    match store_simple(ctx, ctx.arg(1), ctx.arg(3), Cond::Always, Some(d)) {
        StoreOutcome::OutOfMemory => ctx.err(OOM),
        _ => ctx.ok(),
    }
}

pub fn setex(ctx: &mut Ctx<'_, '_>) {
    setex_with(ctx, b"ex", "setex")
}

pub fn psetex(ctx: &mut Ctx<'_, '_>) {
    setex_with(ctx, b"px", "psetex")
}

pub fn getset(ctx: &mut Ctx<'_, '_>) {
    let (key, value) = (ctx.arg(1), ctx.arg(2));
    let out = &mut *ctx.out;
    let version = ctx.conn.version;
    ctx.db.write(key, |e| {
        let old = match ops::string_value(e.item()) {
            Err(_) => return resp::reply::error(out, WRONGTYPE),
            Ok(old) => old.map(|v| v.to_vec()),
        };
        let args = StoreArgs {
            value,
            cond: Cond::Always,
            ttl: Ttl::Set(None),
            flags: 0,
            cas: None,
        };
        if ops::store(e, &args) == StoreOutcome::OutOfMemory {
            return resp::reply::error(out, OOM);
        }
        match old {
            Some(v) => resp::reply::bulk(out, &v),
            None => resp::reply::null(out, version),
        }
    })
}

pub fn getdel(ctx: &mut Ctx<'_, '_>) {
    let key = ctx.arg(1);
    let out = &mut *ctx.out;
    let version = ctx.conn.version;
    ctx.db.write(key, |e| match ops::string_value(e.item()) {
        Err(_) => resp::reply::error(out, WRONGTYPE),
        Ok(None) => resp::reply::null(out, version),
        Ok(Some(v)) => {
            resp::reply::bulk(out, v);
            e.remove();
        }
    })
}

pub fn getex(ctx: &mut Ctx<'_, '_>) {
    let Some((_, _, expire)) = parse_string_options(&ctx.args, 2, false) else {
        return ctx.err(SYNTAX);
    };
    let key = ctx.arg(1);
    let out = &mut *ctx.out;
    let version = ctx.conn.version;
    ctx.db.write(key, |e| {
        // Redis's order: a missing key, then the type, then the expiry amount.
        let value = match ops::string_value(e.item()) {
            Err(_) => return resp::reply::error(out, WRONGTYPE),
            Ok(None) => return resp::reply::null(out, version),
            Ok(Some(v)) => v,
        };
        let deadline = match expire {
            ExpireOpt::At(opt, amount) => match expire_deadline(opt, amount, "getex") {
                Ok(d) => Some(d),
                Err(msg) => return resp::reply::error(out, &msg),
            },
            _ => None,
        };
        resp::reply::bulk(out, value);
        match (expire, deadline) {
            // Only a removed deadline is a change (for WATCH and tracking), as in Redis.
            (ExpireOpt::Persist, _) if e.item().is_some_and(|i| i.expire_at().is_some()) => {
                e.set_expire(None);
            }
            (_, Some(d)) if d <= now_ms() => drop(e.remove()),
            (_, Some(d)) => drop(e.set_expire(Some(d))),
            _ => {}
        }
    })
}

pub fn mget(ctx: &mut Ctx<'_, '_>) {
    let n = ctx.argc() - 1;
    ctx.array(n);
    for i in 1..=n {
        let key = ctx.arg(i);
        let out = &mut *ctx.out;
        let version = ctx.conn.version;
        ctx.db.read(key, |item| match ops::string_value(item) {
            Ok(Some(v)) => resp::reply::bulk(out, v),
            _ => resp::reply::null(out, version),
        })
    }
}

fn mset_with(ctx: &mut Ctx<'_, '_>, only_if_none: bool) -> Option<bool> {
    if ctx.argc().is_multiple_of(2) {
        let name = super::lower(ctx.arg(0));
        ctx.err(format!("ERR wrong number of arguments for '{name}' command").as_bytes());
        return None;
    }
    if only_if_none {
        for i in (1..ctx.argc()).step_by(2) {
            if ctx.db.read(ctx.args.get(i), |item| item.is_some()) {
                return Some(false);
            }
        }
    }
    for i in (1..ctx.argc()).step_by(2) {
        if let StoreOutcome::OutOfMemory = store_simple(
            ctx,
            ctx.args.get(i),
            ctx.args.get(i + 1),
            Cond::Always,
            None,
        ) {
            ctx.err(OOM);
            return None;
        }
    }
    Some(true)
}

pub fn mset(ctx: &mut Ctx<'_, '_>) {
    if mset_with(ctx, false).is_some() {
        ctx.ok();
    }
}

pub fn msetnx(ctx: &mut Ctx<'_, '_>) {
    if let Some(done) = mset_with(ctx, true) {
        ctx.int(i64::from(done));
    }
}

fn incr_by(ctx: &mut Ctx<'_, '_>, delta: i64) {
    let key = ctx.arg(1);
    let out = &mut *ctx.out;
    ctx.db.write(key, |e| {
        let current = match ops::string_value(e.item()) {
            Err(_) => return resp::reply::error(out, WRONGTYPE),
            Ok(None) => 0,
            Ok(Some(v)) => match parse_i64(v) {
                Some(n) => n,
                None => return resp::reply::error(out, NOT_INTEGER),
            },
        };
        let Some(next) = current.checked_add(delta) else {
            return resp::reply::error(out, b"ERR increment or decrement would overflow");
        };
        let mut digits = itoa::Buffer::new();
        match ops::rewrite(e, digits.format(next).as_bytes()) {
            Ok(_) => resp::reply::integer(out, next),
            Err(_) => resp::reply::error(out, OOM),
        }
    })
}

pub fn incr(ctx: &mut Ctx<'_, '_>) {
    incr_by(ctx, 1)
}

pub fn decr(ctx: &mut Ctx<'_, '_>) {
    incr_by(ctx, -1)
}

pub fn incrby(ctx: &mut Ctx<'_, '_>) {
    if let Some(d) = ctx.int_arg(2) {
        incr_by(ctx, d)
    }
}

pub fn decrby(ctx: &mut Ctx<'_, '_>) {
    match ctx.int_arg(2) {
        Some(i64::MIN) => ctx.err(b"ERR decrement would overflow"),
        Some(d) => incr_by(ctx, -d),
        None => {}
    }
}

pub fn incrbyfloat(ctx: &mut Ctx<'_, '_>) {
    // As Redis: the key's type is checked before the increment is parsed.
    let delta = parse_f64(ctx.arg(2));
    let key = ctx.arg(1);
    let out = &mut *ctx.out;
    ctx.db.write(key, |e| {
        let current = match ops::string_value(e.item()) {
            Err(_) => return resp::reply::error(out, WRONGTYPE),
            Ok(None) => 0.0,
            Ok(Some(v)) => match parse_f64(v) {
                Some(n) => n,
                None => return resp::reply::error(out, NOT_FLOAT),
            },
        };
        let Some(delta) = delta else {
            return resp::reply::error(out, NOT_FLOAT);
        };
        let next = current + delta;
        if !next.is_finite() {
            return resp::reply::error(out, b"ERR increment would produce NaN or Infinity");
        }
        let mut text = Vec::new();
        resp::reply::format_double(next, &mut text);
        match ops::rewrite(e, &text) {
            Ok(_) => resp::reply::bulk(out, &text),
            Err(_) => resp::reply::error(out, OOM),
        }
    })
}

pub fn append(ctx: &mut Ctx<'_, '_>) {
    let (key, data) = (ctx.arg(1), ctx.arg(2));
    let limit = max_value_size(ctx);
    let out = &mut *ctx.out;
    ctx.db.write(key, |e| {
        if e.item().is_some_and(|i| i.kind() != Kind::String) {
            return resp::reply::error(out, WRONGTYPE);
        }
        if e.item().map_or(0, |i| i.value().len()) + data.len() > limit {
            return resp::reply::error(out, TOO_BIG);
        }
        let result = match ops::concat(e, data, false) {
            Ok(None) => e.put(Kind::String, data, None, 0).map(|_| data.len()),
            Ok(Some(len)) => Ok(len),
            Err(oom) => Err(oom),
        };
        match result {
            Ok(len) => resp::reply::integer(out, len as i64),
            Err(_) => resp::reply::error(out, OOM),
        }
    })
}

pub fn strlen(ctx: &mut Ctx<'_, '_>) {
    let key = ctx.arg(1);
    let out = &mut *ctx.out;
    ctx.db.read(key, |item| match ops::string_value(item) {
        Ok(v) => resp::reply::integer(out, v.map_or(0, |v| v.len() as i64)),
        Err(_) => resp::reply::error(out, WRONGTYPE),
    })
}

pub fn getrange(ctx: &mut Ctx<'_, '_>) {
    let (Some(start), Some(end)) = (parse_i64(ctx.arg(2)), parse_i64(ctx.arg(3))) else {
        return ctx.err(NOT_INTEGER);
    };
    let key = ctx.arg(1);
    let out = &mut *ctx.out;
    ctx.db.read(key, |item| {
        let value = match ops::string_value(item) {
            Err(_) => return resp::reply::error(out, WRONGTYPE),
            Ok(v) => v.unwrap_or_default(),
        };
        let len = value.len() as i64;
        if len == 0 || (start < 0 && end < 0 && start > end) {
            return resp::reply::bulk(out, b"");
        }
        let start = if start < 0 {
            (len + start).max(0)
        } else {
            start
        };
        let end = if end < 0 {
            (len + end).max(0)
        } else {
            end.min(len - 1)
        };
        if start > end || start >= len {
            resp::reply::bulk(out, b"")
        } else {
            resp::reply::bulk(out, &value[start as usize..=end as usize])
        }
    })
}

pub fn setrange(ctx: &mut Ctx<'_, '_>) {
    let Some(offset) = ctx.int_arg(2) else { return };
    if offset < 0 {
        return ctx.err(b"ERR offset is out of range");
    }
    let offset = offset as usize;
    let (key, data) = (ctx.arg(1), ctx.arg(3));
    let limit = max_value_size(ctx);
    let out = &mut *ctx.out;
    ctx.db.write(key, |e| {
        let old = match ops::string_value(e.item()) {
            Err(_) => return resp::reply::error(out, WRONGTYPE),
            Ok(v) => v,
        };
        let old_len = old.map_or(0, |v| v.len());
        if data.is_empty() {
            return resp::reply::integer(out, old_len as i64);
        }
        if offset + data.len() > limit {
            return resp::reply::error(out, TOO_BIG);
        }
        let len = old_len.max(offset + data.len());
        let (deadline, flags) = e.item().map_or((None, 0), |i| (i.expire_at(), i.flags()));
        let result = e.put_with(Kind::String, len, deadline, flags, |buf, old| {
            let old = old.map_or(&[][..], |o| o.value());
            buf[..old.len()].copy_from_slice(old);
            buf[old.len()..].fill(0);
            buf[offset..offset + data.len()].copy_from_slice(data);
        });
        match result {
            Ok(_) => resp::reply::integer(out, len as i64),
            Err(_) => resp::reply::error(out, OOM),
        }
    })
}
