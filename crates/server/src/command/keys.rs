//! Keyspace commands: DEL, EXISTS, TYPE, the expiry family, SCAN, KEYS, DBSIZE, FLUSHALL,
//! RENAME, RENAMENX, COPY and RANDOMKEY.

use store::{glob, now_ms, Kind, Moved};

use super::{parse_i64, Ctx, OOM, SYNTAX};
use crate::keyspace as ops;

pub fn del(ctx: &mut Ctx<'_, '_>) {
    let mut removed = 0;
    for i in 1..ctx.argc() {
        removed += i64::from(ctx.db.write(ctx.args.get(i), |e| e.remove()));
    }
    ctx.int(removed)
}

pub fn exists(ctx: &mut Ctx<'_, '_>) {
    let mut found = 0;
    for i in 1..ctx.argc() {
        found += i64::from(ctx.db.read(ctx.args.get(i), |item| item.is_some()));
    }
    ctx.int(found)
}

pub fn type_of(ctx: &mut Ctx<'_, '_>) {
    let kind = ctx.db.read(ctx.args.get(1), |item| item.map(|i| i.kind()));
    ctx.simple(kind.map_or(b"none", kind_name))
}

fn expire_generic(ctx: &mut Ctx<'_, '_>, unit_ms: i64, absolute: bool) {
    // Options are checked before the amount, as in Redis.
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for i in 3..ctx.argc() {
        match ctx.arg(i).to_ascii_lowercase().as_slice() {
            b"nx" => nx = true,
            b"xx" => xx = true,
            b"gt" => gt = true,
            b"lt" => lt = true,
            _ => {
                // As Redis formats it: the option up to a NUL, trailing CR/LF trimmed.
                let mut msg = b"ERR Unsupported option ".to_vec();
                msg.extend_from_slice(super::c_str(ctx.arg(i)));
                while matches!(msg.last(), Some(b'\r' | b'\n')) {
                    msg.pop();
                }
                return ctx.err(&msg);
            }
        }
    }
    if nx && (xx || gt || lt) {
        return ctx.err(b"ERR NX and XX, GT or LT options at the same time are not compatible");
    }
    if gt && lt {
        return ctx.err(b"ERR GT and LT options at the same time are not compatible");
    }
    let Some(amount) = ctx.int_arg(2) else { return };
    let now = now_ms();
    let Some(deadline) = ops::deadline(amount, unit_ms, absolute, now) else {
        let name = super::lower(ctx.arg(0));
        return ctx.err(format!("ERR invalid expire time in '{name}' command").as_bytes());
    };
    let key = ctx.arg(1);
    let changed = ctx.db.write(key, |e| {
        let Some(item) = e.item() else { return false };
        let current = item.expire_at();
        let new = deadline.max(0) as u64;
        let skip = (nx && current.is_some())
            || (xx && current.is_none())
            || (gt && current.is_none_or(|c| new <= c))
            || (lt && current.is_some_and(|c| new >= c));
        if skip {
            return false;
        }
        if deadline <= now as i64 {
            e.remove()
        } else {
            e.set_expire(Some(new))
        }
    });
    ctx.int(i64::from(changed))
}

pub fn expire(ctx: &mut Ctx<'_, '_>) {
    expire_generic(ctx, 1000, false)
}
pub fn pexpire(ctx: &mut Ctx<'_, '_>) {
    expire_generic(ctx, 1, false)
}
pub fn expireat(ctx: &mut Ctx<'_, '_>) {
    expire_generic(ctx, 1000, true)
}
pub fn pexpireat(ctx: &mut Ctx<'_, '_>) {
    expire_generic(ctx, 1, true)
}

/// TTL-style replies: -2 no key, -1 no deadline, else `f(deadline_ms)`.
fn ttl_generic(ctx: &mut Ctx<'_, '_>, f: impl FnOnce(u64) -> i64) {
    let state = ctx
        .db
        .read(ctx.args.get(1), |item| item.map(|i| i.expire_at()));
    ctx.int(match state {
        None => -2,
        Some(None) => -1,
        Some(Some(deadline)) => f(deadline),
    })
}

pub fn ttl(ctx: &mut Ctx<'_, '_>) {
    ttl_generic(ctx, |d| (d.saturating_sub(now_ms()) as i64 + 500) / 1000)
}
pub fn pttl(ctx: &mut Ctx<'_, '_>) {
    ttl_generic(ctx, |d| d.saturating_sub(now_ms()) as i64)
}
pub fn expiretime(ctx: &mut Ctx<'_, '_>) {
    // Rounded to the nearest second, as Redis's TTL and EXPIRETIME both do.
    ttl_generic(ctx, |d| (d as i64 + 500) / 1000)
}
pub fn pexpiretime(ctx: &mut Ctx<'_, '_>) {
    ttl_generic(ctx, |d| d as i64)
}

pub fn persist(ctx: &mut Ctx<'_, '_>) {
    let changed = ctx.db.write(ctx.args.get(1), |e| {
        e.item().is_some_and(|i| i.expire_at().is_some()) && e.set_expire(None)
    });
    ctx.int(i64::from(changed))
}

pub(super) fn kind_name(kind: Kind) -> &'static [u8] {
    match kind {
        Kind::String => b"string",
        Kind::Hash => b"hash",
        Kind::Set => b"set",
        Kind::ZSet => b"zset",
        Kind::List => b"list",
    }
}

/// A SCAN cursor as Redis reads it (`strtoul`): an optional sign, a negative number wrapping
/// around, then digits and nothing else; an empty cursor is 0.
pub(super) fn parse_cursor(s: &[u8]) -> Option<u64> {
    let (negative, digits) = match s.first() {
        None => return Some(0),
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        Some(_) => (false, s),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some(if negative { n.wrapping_neg() } else { n })
}

pub fn scan(ctx: &mut Ctx<'_, '_>) {
    let Some(cursor) = parse_cursor(ctx.arg(1)) else {
        return ctx.err(b"ERR invalid cursor");
    };
    let (mut pattern, mut count, mut kind) = (None, 10usize, None);
    let mut i = 2;
    while i < ctx.argc() {
        if i + 1 >= ctx.argc() {
            return ctx.err(SYNTAX);
        }
        let value = ctx.args.get(i + 1);
        match ctx.arg(i).to_ascii_lowercase().as_slice() {
            b"match" => pattern = Some(value),
            b"count" => match parse_i64(value) {
                Some(n) if n >= 1 => count = n as usize,
                Some(_) => return ctx.err(SYNTAX),
                None => return ctx.err(super::NOT_INTEGER),
            },
            b"type" => kind = Some(value.to_ascii_lowercase()),
            _ => return ctx.err(SYNTAX),
        }
        i += 2;
    }
    let mut found: Vec<Vec<u8>> = Vec::new();
    let next = ctx.db.scan(cursor, count, |item| {
        let wanted_kind = kind.as_deref().is_none_or(|k| k == kind_name(item.kind()));
        if wanted_kind && pattern.is_none_or(|p| glob::matches(p, item.key())) {
            found.push(item.key().to_vec());
        }
    });
    ctx.array(2);
    ctx.bulk(itoa::Buffer::new().format(next).as_bytes());
    ctx.array(found.len());
    for key in &found {
        ctx.bulk(key);
    }
}

pub fn keys(ctx: &mut Ctx<'_, '_>) {
    let pattern = ctx.arg(1);
    let mut found: Vec<Vec<u8>> = Vec::new();
    let mut cursor = 0;
    loop {
        cursor = ctx.db.scan(cursor, 1024, |item| {
            if glob::matches(pattern, item.key()) {
                found.push(item.key().to_vec());
            }
        });
        if cursor == 0 {
            break;
        }
    }
    ctx.array(found.len());
    for key in &found {
        ctx.bulk(key);
    }
}

/// RENAME and RENAMENX: the record moves whole (kind, value, deadline, flags, typed tags); in
/// the change stream the new key is set and the old one deleted.
fn rename_generic(ctx: &mut Ctx<'_, '_>, nx: bool) {
    let (from, to) = (ctx.arg(1), ctx.arg(2));
    if from == to {
        let exists = ctx.db.peek(from, |item| item.is_some());
        return match (exists, nx) {
            (false, _) => ctx.err(b"ERR no such key"),
            (true, true) => ctx.int(0),
            (true, false) => ctx.ok(),
        };
    }
    match ctx.db.clone_record(from, to, !nx, true) {
        Ok(Moved::NoSource) => ctx.err(b"ERR no such key"),
        Ok(Moved::DestinationExists) => ctx.int(0),
        Ok(Moved::Done) if nx => ctx.int(1),
        Ok(Moved::Done) => ctx.ok(),
        Err(_) => ctx.err(OOM),
    }
}

pub fn rename(ctx: &mut Ctx<'_, '_>) {
    rename_generic(ctx, false)
}

pub fn renamenx(ctx: &mut Ctx<'_, '_>) {
    rename_generic(ctx, true)
}

/// COPY source destination [DB 0] [REPLACE]: the copy keeps the deadline and typed tags.
pub fn copy(ctx: &mut Ctx<'_, '_>) {
    let mut replace = false;
    let mut i = 3;
    while i < ctx.argc() {
        match ctx.arg(i).to_ascii_lowercase().as_slice() {
            b"replace" => replace = true,
            b"db" if i + 1 < ctx.argc() => {
                let Some(db) = ctx.int_arg(i + 1) else { return };
                // Only database 0 exists.
                if db != 0 {
                    return ctx.err(b"ERR DB index is out of range");
                }
                i += 1;
            }
            _ => return ctx.err(SYNTAX),
        }
        i += 1;
    }
    let (from, to) = (ctx.arg(1), ctx.arg(2));
    if from == to {
        return ctx.err(b"ERR source and destination objects are the same");
    }
    match ctx.db.clone_record(from, to, replace, false) {
        Ok(Moved::Done) => ctx.int(1),
        Ok(Moved::NoSource | Moved::DestinationExists) => ctx.int(0),
        Err(_) => ctx.err(OOM),
    }
}

pub fn randomkey(ctx: &mut Ctx<'_, '_>) {
    let key = ctx.db.random_key();
    ctx.bulk_opt(key.as_deref())
}

pub fn dbsize(ctx: &mut Ctx<'_, '_>) {
    let n = ctx.db.len();
    ctx.int(n as i64)
}

pub fn flushall(ctx: &mut Ctx<'_, '_>) {
    match ctx.argc() {
        1 => {}
        2 if matches!(
            ctx.arg(1).to_ascii_lowercase().as_slice(),
            b"async" | b"sync"
        ) => {}
        _ => return ctx.err(SYNTAX),
    }
    // Flushed records are always freed on the reaper thread, so SYNC and ASYNC both return at once.
    ctx.db.flush();
    ctx.ok()
}

#[cfg(test)]
mod tests {
    use super::parse_cursor;

    #[test]
    fn cursors_parse_like_strtoul() {
        assert_eq!(parse_cursor(b"0"), Some(0));
        assert_eq!(parse_cursor(b""), Some(0));
        assert_eq!(parse_cursor(b"+17"), Some(17));
        assert_eq!(parse_cursor(b"-1"), Some(u64::MAX));
        assert_eq!(parse_cursor(b"18446744073709551615"), Some(u64::MAX));
        for bad in [
            &b"18446744073709551616"[..],
            b"-",
            b"x",
            b" 1",
            b"1 ",
            b"0x10",
            b"1.0",
        ] {
            assert_eq!(
                parse_cursor(bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
