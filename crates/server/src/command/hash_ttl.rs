//! Hash field expiry (Redis 7.4): HEXPIRE HPEXPIRE HEXPIREAT HPEXPIREAT set a deadline on
//! fields, HTTL HPTTL HEXPIRETIME HPEXPIRETIME read it, HPERSIST removes it. Every reply is an
//! array with one code per field, as Redis's: -2 no such field (or no such key), -1 no
//! deadline, 0 condition (NX XX GT LT) not met, 1 set, 2 deleted (the deadline is not in the
//! future). The deadlines live in the hash's value (`store::hash`), so snapshots, copies and
//! the change stream carry them; the store removes expired fields (`Entry` on a write, the
//! expiry thread otherwise) and readers never see them (`hash::live`).

use store::{hash, now_ms, Kind};

use super::{parse_i64, Ctx, WRONGTYPE};

/// The latest deadline Redis accepts (`HFE_MAX_ABS_TIME_MSEC`: its 48-bit deadlines / 4).
const MAX_DEADLINE_MS: i64 = ((1u64 << 48) - 1) as i64 >> 2;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Condition {
    Always,
    Nx,
    Xx,
    Gt,
    Lt,
}

/// Reads `FIELDS numfields field...` from argument `at` (the keyword's position); the error
/// is Redis's (`bad_count` is the command's own text for a count that is not positive).
fn fields_arg<'a>(
    ctx: &Ctx<'a, '_>,
    at: usize,
    bad_count: &'static [u8],
) -> Result<Vec<&'a [u8]>, &'static [u8]> {
    if at + 1 >= ctx.argc() || !ctx.arg(at).eq_ignore_ascii_case(b"fields") {
        return Err(b"ERR Mandatory argument FIELDS is missing or not at the right position");
    }
    let count = match parse_i64(ctx.arg(at + 1)) {
        Some(n) if n >= 1 => n as usize,
        _ => return Err(bad_count),
    };
    if count != ctx.argc() - at - 2 {
        return Err(b"ERR The `numfields` parameter must match the number of arguments");
    }
    Ok(ctx.args.tail(at + 2).collect())
}

/// HEXPIRE's arguments: the absolute deadline in ms, the condition, the fields.
type ExpireArgs<'a> = (i64, Condition, Vec<&'a [u8]>);

/// Parses the deadline and options of HEXPIRE and family: (absolute deadline in ms,
/// condition, fields).
fn expire_args<'a>(
    ctx: &Ctx<'a, '_>,
    name: &str,
    unit_ms: i64,
    base: i64,
) -> Result<ExpireArgs<'a>, Vec<u8>> {
    let Some(mut when) = parse_i64(ctx.arg(2)) else {
        return Err(super::NOT_INTEGER.to_vec());
    };
    if when < 0 {
        return Err(b"ERR invalid expire time, must be >= 0".to_vec());
    }
    let bad_time = || format!("ERR invalid expire time in '{name}' command").into_bytes();
    if unit_ms == 1000 {
        if when > MAX_DEADLINE_MS / 1000 {
            return Err(bad_time());
        }
        when *= 1000;
    }
    if when > MAX_DEADLINE_MS - base {
        return Err(bad_time());
    }
    let option = ctx.arg(3).to_ascii_lowercase();
    let condition = match option.as_slice() {
        b"nx" => Condition::Nx,
        b"xx" => Condition::Xx,
        b"gt" => Condition::Gt,
        b"lt" => Condition::Lt,
        _ => Condition::Always,
    };
    let at = if condition == Condition::Always { 3 } else { 4 };
    let fields = fields_arg(
        ctx,
        at,
        b"ERR Parameter `numFields` should be greater than 0",
    )
    .map_err(<[u8]>::to_vec)?;
    Ok((when + base, condition, fields))
}

/// What one field's new deadline does, as Redis decides it.
fn expire_one(current: Option<u64>, deadline: u64, condition: Condition, now: u64) -> i64 {
    let met = match (condition, current) {
        (Condition::Always, _) => true,
        (Condition::Nx, had) => had.is_none(),
        (Condition::Xx, had) => had.is_some(),
        // A field without a deadline counts as one infinitely far away.
        (Condition::Gt, None) => false,
        (Condition::Gt, Some(had)) => deadline > had,
        (Condition::Lt, None) => true,
        (Condition::Lt, Some(had)) => deadline < had,
    };
    match met {
        false => 0,
        true if deadline <= now => 2,
        true => 1,
    }
}

fn expire_generic(ctx: &mut Ctx<'_, '_>, unit_ms: i64, relative: bool) {
    let now = now_ms();
    let name = super::lower(ctx.arg(0));
    let base = if relative { now as i64 } else { 0 };
    let parsed = expire_args(ctx, &name, unit_ms, base);
    let key = ctx.arg(1);
    let out = &mut *ctx.out;
    ctx.db.write(key, |e| {
        let old = match e.item() {
            Some(i) if i.kind() != Kind::Hash => return resp::reply::error(out, WRONGTYPE),
            Some(i) => i.value(),
            None => &[],
        };
        let (deadline, condition, fields) = match parsed {
            Ok(p) => p,
            Err(msg) => return resp::reply::error(out, &msg),
        };
        let deadline = deadline as u64;
        resp::reply::array_len(out, fields.len());
        let mut changes: Vec<(&[u8], Option<u64>)> = Vec::new();
        let mut deleted: Vec<&[u8]> = Vec::new();
        for field in &fields {
            // Earlier fields of this command count (a field named twice sees its first change).
            let current = match changes.iter().rev().find(|(f, _)| f == field) {
                _ if deleted.contains(field) => None,
                Some((_, d)) => Some(*d),
                None => hash::deadline(old, field),
            };
            let Some(current) = current else {
                resp::reply::integer(out, -2);
                continue;
            };
            let code = expire_one(current, deadline, condition, now);
            match code {
                1 => changes.push((field, Some(deadline))),
                2 => deleted.push(field),
                _ => {}
            }
            resp::reply::integer(out, code);
        }
        if changes.is_empty() && deleted.is_empty() {
            return;
        }
        let mut timed = Vec::with_capacity(old.len() + 16);
        hash::set_deadlines(old, &changes, &mut timed);
        let mut rest = Vec::with_capacity(timed.len());
        hash::delete(&timed, &deleted, &mut rest);
        if rest.is_empty() {
            e.remove();
        } else {
            let (expire_at, flags) = e.item().map_or((None, 0), |i| (i.expire_at(), i.flags()));
            // The value grows by a few bytes at most: allowed past the limit, as HDEL's
            // shrinking is, rather than failing half-way through the fields.
            let _ = e.put(Kind::Hash, &rest, expire_at, flags);
        }
    })
}

pub fn hexpire(ctx: &mut Ctx<'_, '_>) {
    expire_generic(ctx, 1000, true)
}

pub fn hpexpire(ctx: &mut Ctx<'_, '_>) {
    expire_generic(ctx, 1, true)
}

pub fn hexpireat(ctx: &mut Ctx<'_, '_>) {
    expire_generic(ctx, 1000, false)
}

pub fn hpexpireat(ctx: &mut Ctx<'_, '_>) {
    expire_generic(ctx, 1, false)
}

/// HTTL and family: `show` turns a field's deadline into the reply.
fn ttl_generic(ctx: &mut Ctx<'_, '_>, show: fn(u64, u64) -> i64) {
    let now = now_ms();
    let fields = fields_arg(ctx, 2, b"ERR Number of fields must be a positive integer");
    let key = ctx.arg(1);
    let out = &mut *ctx.out;
    ctx.db.read(key, |item| {
        let value = match item {
            Some(i) if i.kind() != Kind::Hash => return resp::reply::error(out, WRONGTYPE),
            Some(i) => i.value(),
            None => &[],
        };
        let fields = match fields {
            Ok(f) => f,
            Err(msg) => return resp::reply::error(out, msg),
        };
        resp::reply::array_len(out, fields.len());
        for field in fields {
            let code = match hash::deadline(value, field) {
                None => -2,
                Some(None) => -1,
                Some(Some(d)) if d <= now => -2,
                Some(Some(d)) => show(d, now),
            };
            resp::reply::integer(out, code);
        }
    })
}

pub fn httl(ctx: &mut Ctx<'_, '_>) {
    ttl_generic(ctx, |d, now| (d - now).div_ceil(1000) as i64)
}

pub fn hpttl(ctx: &mut Ctx<'_, '_>) {
    ttl_generic(ctx, |d, now| (d - now) as i64)
}

pub fn hexpiretime(ctx: &mut Ctx<'_, '_>) {
    ttl_generic(ctx, |d, _| d.div_ceil(1000) as i64)
}

pub fn hpexpiretime(ctx: &mut Ctx<'_, '_>) {
    ttl_generic(ctx, |d, _| d as i64)
}

/// HPERSIST key FIELDS numfields field...: 1 removed, -1 had none, -2 no such field.
pub fn hpersist(ctx: &mut Ctx<'_, '_>) {
    let fields = fields_arg(ctx, 2, b"ERR Number of fields must be a positive integer");
    let key = ctx.arg(1);
    let out = &mut *ctx.out;
    ctx.db.write(key, |e| {
        let old = match e.item() {
            Some(i) if i.kind() != Kind::Hash => return resp::reply::error(out, WRONGTYPE),
            Some(i) => i.value(),
            None => &[],
        };
        let fields = match fields {
            Ok(f) => f,
            Err(msg) => return resp::reply::error(out, msg),
        };
        resp::reply::array_len(out, fields.len());
        let mut changes: Vec<(&[u8], Option<u64>)> = Vec::new();
        for field in fields {
            let code = match hash::deadline(old, field) {
                None => -2,
                Some(_) if changes.iter().any(|(f, _)| *f == field) => -1,
                Some(None) => -1,
                Some(Some(_)) => {
                    changes.push((field, None));
                    1
                }
            };
            resp::reply::integer(out, code);
        }
        if changes.is_empty() {
            return;
        }
        let mut rest = Vec::with_capacity(old.len());
        hash::set_deadlines(old, &changes, &mut rest);
        let (expire_at, flags) = e.item().map_or((None, 0), |i| (i.expire_at(), i.flags()));
        // Shrinking needs no room.
        let _ = e.put(Kind::Hash, &rest, expire_at, flags);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_follow_redis() {
        use Condition::*;
        let now = 1_000;
        assert_eq!(expire_one(None, 5_000, Always, now), 1);
        assert_eq!(expire_one(None, 5_000, Nx, now), 1);
        assert_eq!(expire_one(Some(2_000), 5_000, Nx, now), 0);
        assert_eq!(expire_one(None, 5_000, Xx, now), 0);
        assert_eq!(expire_one(Some(2_000), 5_000, Xx, now), 1);
        assert_eq!(expire_one(None, 5_000, Gt, now), 0);
        assert_eq!(expire_one(Some(2_000), 5_000, Gt, now), 1);
        assert_eq!(expire_one(Some(5_000), 5_000, Gt, now), 0);
        assert_eq!(expire_one(None, 5_000, Lt, now), 1);
        assert_eq!(expire_one(Some(2_000), 5_000, Lt, now), 0);
        assert_eq!(expire_one(Some(9_000), 500, Lt, now), 2);
        assert_eq!(expire_one(None, now, Always, now), 2);
    }
}
