//! LMPOP, ZMPOP and their blocking forms BLMPOP, BZMPOP (Redis 7.0): pop up to COUNT elements
//! from the first non-empty list (or sorted set) among `numkeys` keys; reply `[key, elements]`
//! (a sorted set's as `[member, score]` pairs), or a null array when every key is empty. The
//! blocking forms wait as BLPOP does (`crate::blocking`).

use crate::blocking::{End, Op};

use super::blocking_cmd::{block, timeout_arg};
use super::lists::pop_from;
use super::zsets::zpop_from;
use super::{parse_i64, Ctx, SYNTAX};

/// What an MPOP command asked for: its keys' positions, the end, the count.
struct Request {
    keys: std::ops::Range<usize>,
    /// LEFT / MIN: false; RIGHT / MAX: true.
    high: bool,
    count: usize,
}

/// Parses `numkeys key... where [COUNT n]` from argument `at`, in Redis's order of checks;
/// `ends` are the two words `where` may be (LEFT RIGHT, or MIN MAX).
fn request(ctx: &mut Ctx<'_, '_>, at: usize, ends: [&[u8]; 2]) -> Option<Request> {
    let numkeys = match parse_i64(ctx.arg(at)) {
        Some(n) if n >= 1 => n as usize,
        _ => {
            ctx.err(b"ERR numkeys should be greater than 0");
            return None;
        }
    };
    let where_at = match at.checked_add(numkeys + 1) {
        Some(w) if w < ctx.argc() => w,
        _ => {
            ctx.err(SYNTAX);
            return None;
        }
    };
    let word = ctx.arg(where_at).to_ascii_lowercase();
    let high = match word.as_slice() {
        w if w == ends[0] => false,
        w if w == ends[1] => true,
        _ => {
            ctx.err(SYNTAX);
            return None;
        }
    };
    let mut count = None;
    let mut i = where_at + 1;
    while i < ctx.argc() {
        if count.is_none() && ctx.arg(i).eq_ignore_ascii_case(b"count") && i + 1 < ctx.argc() {
            match parse_i64(ctx.arg(i + 1)) {
                Some(n) if n >= 1 => count = Some(n as usize),
                _ => {
                    ctx.err(b"ERR count should be greater than 0");
                    return None;
                }
            }
            i += 2;
        } else {
            ctx.err(SYNTAX);
            return None;
        }
    }
    Some(Request {
        keys: at + 1..where_at,
        high,
        count: count.unwrap_or(1),
    })
}

/// Pops from the first non-empty key and replies; false when every key was empty.
fn pop_first(ctx: &mut Ctx<'_, '_>, req: &Request, zset: bool) -> Option<bool> {
    for i in req.keys.clone() {
        let key = ctx.args.get(i);
        if zset {
            match zpop_from(&mut ctx.db, key, req.high, req.count) {
                Err(f) => {
                    f.reply(ctx);
                    return None;
                }
                Ok(Some(popped)) if !popped.is_empty() => {
                    ctx.array(2);
                    ctx.bulk(key);
                    ctx.array(popped.len());
                    for (member, score) in &popped {
                        ctx.array(2);
                        ctx.bulk(member);
                        ctx.double(*score);
                    }
                    return Some(true);
                }
                Ok(_) => {}
            }
        } else {
            let end = if req.high { End::Right } else { End::Left };
            match pop_from(&mut ctx.db, key, end, req.count) {
                Err(f) => {
                    f.reply(ctx);
                    return None;
                }
                Ok(Some(popped)) if !popped.is_empty() => {
                    ctx.array(2);
                    ctx.bulk(key);
                    ctx.array(popped.len());
                    popped.iter().for_each(|v| ctx.bulk(v));
                    return Some(true);
                }
                Ok(_) => {}
            }
        }
    }
    Some(false)
}

fn mpop(ctx: &mut Ctx<'_, '_>, zset: bool) {
    let ends: [&[u8]; 2] = if zset {
        [b"min", b"max"]
    } else {
        [b"left", b"right"]
    };
    let Some(req) = request(ctx, 1, ends) else {
        return;
    };
    if pop_first(ctx, &req, zset) == Some(false) {
        ctx.nil_array()
    }
}

fn blocking_mpop(ctx: &mut Ctx<'_, '_>, zset: bool) {
    let ends: [&[u8]; 2] = if zset {
        [b"min", b"max"]
    } else {
        [b"left", b"right"]
    };
    // As Redis: the arguments after the timeout are checked first.
    let Some(req) = request(ctx, 2, ends) else {
        return;
    };
    let Some(timeout) = timeout_arg(ctx, 1) else {
        return;
    };
    match pop_first(ctx, &req, zset) {
        Some(false) if ctx.conn.in_exec => ctx.nil_array(),
        Some(false) => {
            let keys = req.keys.clone().map(|i| ctx.args.get(i).to_vec()).collect();
            let op = if zset {
                Op::ZMPop {
                    max: req.high,
                    count: req.count,
                }
            } else {
                Op::MPop {
                    end: if req.high { End::Right } else { End::Left },
                    count: req.count,
                }
            };
            block(ctx, keys, op, timeout)
        }
        _ => {}
    }
}

pub fn lmpop(ctx: &mut Ctx<'_, '_>) {
    mpop(ctx, false)
}

pub fn zmpop(ctx: &mut Ctx<'_, '_>) {
    mpop(ctx, true)
}

pub fn blmpop(ctx: &mut Ctx<'_, '_>) {
    blocking_mpop(ctx, false)
}

pub fn bzmpop(ctx: &mut Ctx<'_, '_>) {
    blocking_mpop(ctx, true)
}
