//! BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BZPOPMIN and BZPOPMAX: the pops that wait. Each first tries as its non-blocking form
//! does; with nothing to pop it blocks the client in `crate::blocking` (outside a transaction:
//! inside EXEC it replies as a timeout at once, as Redis does).

use std::time::Duration;

use crate::blocking::{End, Op};

use super::lists::{move_element, parse_end, pop_from};
use super::zsets::zpop_from;
use super::{parse_f64, Ctx, SYNTAX};

/// A timeout in seconds (fractions allowed; 0: forever), or the error replied.
pub(super) fn timeout_arg(ctx: &mut Ctx<'_, '_>, i: usize) -> Option<Option<Duration>> {
    let Some(secs) = parse_f64(ctx.arg(i)).filter(|s| s.is_finite()) else {
        ctx.err(b"ERR timeout is not a float or out of range");
        return None;
    };
    if secs < 0.0 {
        ctx.err(b"ERR timeout is negative");
        return None;
    }
    if secs > 1e12 {
        ctx.err(b"ERR timeout is out of range");
        return None;
    }
    Some((secs > 0.0).then(|| Duration::from_secs_f64(secs)))
}

/// Parks the client: the reply comes through its mailbox (see `crate::blocking`).
pub(super) fn block(ctx: &mut Ctx<'_, '_>, keys: Vec<Vec<u8>>, op: Op, timeout: Option<Duration>) {
    use std::sync::atomic::Ordering::Relaxed;
    ctx.conn.publish_last_command();
    ctx.conn
        .client
        .state
        .flags
        .fetch_or(crate::clients::client_flags::BLOCKED, Relaxed);
    ctx.conn.waiting = true;
    let version = ctx.conn.version;
    ctx.shared
        .blocking
        .block(&ctx.conn.client, keys, op, timeout, version);
}

fn blocking_pop(ctx: &mut Ctx<'_, '_>, end: End) {
    let last = ctx.argc() - 1;
    let Some(timeout) = timeout_arg(ctx, last) else {
        return;
    };
    for i in 1..last {
        let key = ctx.args.get(i);
        match pop_from(&mut ctx.db, key, end, 1) {
            Err(f) => return f.reply(ctx),
            Ok(Some(popped)) if !popped.is_empty() => {
                ctx.array(2);
                ctx.bulk(key);
                return ctx.bulk(&popped[0]);
            }
            Ok(_) => {}
        }
    }
    if ctx.conn.in_exec {
        return ctx.nil_array();
    }
    let keys = (1..last).map(|i| ctx.args.get(i).to_vec()).collect();
    block(ctx, keys, Op::Pop(end), timeout)
}

pub fn blpop(ctx: &mut Ctx<'_, '_>) {
    blocking_pop(ctx, End::Left)
}

pub fn brpop(ctx: &mut Ctx<'_, '_>) {
    blocking_pop(ctx, End::Right)
}

pub fn blmove(ctx: &mut Ctx<'_, '_>) {
    let (Some(from), Some(to)) = (parse_end(ctx.arg(3)), parse_end(ctx.arg(4))) else {
        return ctx.err(SYNTAX);
    };
    blocking_move(ctx, from, to, 5)
}

/// BRPOPLPUSH src dst timeout: BLMOVE src dst RIGHT LEFT timeout.
pub fn brpoplpush(ctx: &mut Ctx<'_, '_>) {
    blocking_move(ctx, End::Right, End::Left, 3)
}

fn blocking_move(ctx: &mut Ctx<'_, '_>, from: End, to: End, timeout_at: usize) {
    let Some(timeout) = timeout_arg(ctx, timeout_at) else {
        return;
    };
    let (src, dst) = (ctx.args.get(1), ctx.args.get(2));
    match move_element(&mut ctx.db, src, dst, from, to) {
        Err(f) => f.reply(ctx),
        Ok(Some(v)) => {
            ctx.shared.blocking.key_ready(dst);
            ctx.bulk(&v)
        }
        Ok(None) if ctx.conn.in_exec => ctx.nil(),
        Ok(None) => {
            let op = Op::Move {
                dst: dst.to_vec(),
                from,
                to,
            };
            block(ctx, vec![src.to_vec()], op, timeout)
        }
    }
}

/// BZPOPMIN / BZPOPMAX key... timeout: `[key, member, score]` from the first non-empty
/// sorted set, or block.
fn blocking_zpop(ctx: &mut Ctx<'_, '_>, max: bool) {
    let last = ctx.argc() - 1;
    let Some(timeout) = timeout_arg(ctx, last) else {
        return;
    };
    for i in 1..last {
        let key = ctx.args.get(i);
        match zpop_from(&mut ctx.db, key, max, 1) {
            Err(f) => return f.reply(ctx),
            Ok(Some(popped)) if !popped.is_empty() => {
                let (member, score) = &popped[0];
                ctx.array(3);
                ctx.bulk(key);
                ctx.bulk(member);
                return ctx.double(*score);
            }
            Ok(_) => {}
        }
    }
    if ctx.conn.in_exec {
        return ctx.nil_array();
    }
    let keys = (1..last).map(|i| ctx.args.get(i).to_vec()).collect();
    block(ctx, keys, Op::ZPop { max }, timeout)
}

pub fn bzpopmin(ctx: &mut Ctx<'_, '_>) {
    blocking_zpop(ctx, false)
}

pub fn bzpopmax(ctx: &mut Ctx<'_, '_>) {
    blocking_zpop(ctx, true)
}
