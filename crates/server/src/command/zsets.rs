//! Sorted set commands other than the range family (`zrange`): ZADD, ZREM, ZSCORE, ZMSCORE,
//! ZINCRBY, ZCARD, ZRANK, ZREVRANK (WITHSCORE), ZPOPMIN/MAX, ZSCAN, ZRANDMEMBER, ZUNION, ZINTER,
//! ZDIFF, ZINTERCARD and the STORE forms,
//! on the store's out-of-line sorted sets (`store::collection`).

use std::collections::HashMap;

use store::collection::ZSet;
use store::{glob, Collection, Kind};

use super::collections::{self as coll, Change, Fail};
use super::{parse_f64, parse_i64, Ctx, NOT_FLOAT, SYNTAX};

pub fn as_zset(c: &Collection) -> &ZSet {
    match c {
        Collection::ZSet(z) => z,
        _ => unreachable!("a record of kind zset holds a sorted set"),
    }
}

pub fn as_zset_mut(c: &mut Collection) -> &mut ZSet {
    match c {
        Collection::ZSet(z) => z,
        _ => unreachable!("a record of kind zset holds a sorted set"),
    }
}

/// Replies with (member, score) pairs: flat in RESP2 (scores as bulk strings), as two-element
/// arrays in RESP3 when `nested` (what Redis 7 does for WITHSCORES and counted pops).
pub fn reply_pairs(
    ctx: &mut Ctx<'_, '_>,
    pairs: &[(Vec<u8>, f64)],
    with_scores: bool,
    nested: bool,
) {
    let resp3 = ctx.conn.version == resp::reply::Version::Resp3;
    if !with_scores {
        ctx.array(pairs.len());
        pairs.iter().for_each(|(m, _)| ctx.bulk(m));
    } else if resp3 && nested {
        ctx.array(pairs.len());
        for (m, s) in pairs {
            ctx.array(2);
            ctx.bulk(m);
            ctx.double(*s);
        }
    } else {
        ctx.array(pairs.len() * 2);
        for (m, s) in pairs {
            ctx.bulk(m);
            ctx.double(*s);
        }
    }
}

#[derive(Default)]
struct AddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    ch: bool,
    incr: bool,
}

pub fn zadd(ctx: &mut Ctx<'_, '_>) {
    let mut f = AddFlags::default();
    let mut i = 2;
    while i < ctx.argc() {
        match ctx.arg(i).to_ascii_lowercase().as_slice() {
            b"nx" => f.nx = true,
            b"xx" => f.xx = true,
            b"gt" => f.gt = true,
            b"lt" => f.lt = true,
            b"ch" => f.ch = true,
            b"incr" => f.incr = true,
            _ => break,
        }
        i += 1;
    }
    let rest = ctx.argc() - i;
    if rest == 0 || !rest.is_multiple_of(2) {
        return ctx.err(SYNTAX);
    }
    if f.nx && f.xx {
        return ctx.err(b"ERR XX and NX options at the same time are not compatible");
    }
    if (f.nx && (f.gt || f.lt)) || (f.gt && f.lt) {
        return ctx.err(b"ERR GT, LT, and/or NX options at the same time are not compatible");
    }
    if f.incr && rest > 2 {
        return ctx.err(b"ERR INCR option supports a single increment-element pair");
    }
    let mut pairs = Vec::with_capacity(rest / 2);
    for p in (i..ctx.argc()).step_by(2) {
        match parse_f64(ctx.arg(p)) {
            Some(score) => pairs.push((score, ctx.arg(p + 1))),
            None => return ctx.err(NOT_FLOAT),
        }
    }
    let key = ctx.arg(1);
    let change = if f.xx { Change::Grow } else { Change::Create };
    let result = coll::write(&mut ctx.db, key, Kind::ZSet, change, |c| {
        let z = as_zset_mut(c);
        let (mut added, mut updated) = (0, 0);
        let mut incr_result = None;
        for &(score, member) in &pairs {
            let current = z.score(member);
            let new = match (current, f.incr) {
                (Some(cur), true) => cur + score,
                _ => score,
            };
            if new.is_nan() {
                return (Err(()), added + updated > 0);
            }
            match current {
                Some(_) if f.nx => continue,
                None if f.xx => continue,
                Some(cur) if (f.gt && new <= cur) || (f.lt && new >= cur) => continue,
                Some(cur) => {
                    if cur != new {
                        z.insert(member, new);
                        updated += 1;
                    }
                }
                None => {
                    z.insert(member, new);
                    added += 1;
                }
            }
            incr_result = Some(new);
        }
        let changed = added + updated > 0;
        (Ok((added, updated, incr_result)), changed)
    });
    // A client blocked in BZPOPMIN / BZPOPMAX on the key may now pop.
    ctx.shared.blocking.key_ready(ctx.args.get(1));
    match result {
        Err(fail) => fail.reply(ctx),
        Ok(Some(Err(()))) => ctx.err(b"ERR resulting score is not a number (NaN)"),
        Ok(None) if f.incr => ctx.nil(),
        Ok(None) => ctx.int(0),
        Ok(Some(Ok((_, _, score)))) if f.incr => match score {
            Some(s) => ctx.double(s),
            None => ctx.nil(),
        },
        Ok(Some(Ok((added, updated, _)))) => ctx.int(if f.ch { added + updated } else { added }),
    }
}

pub fn zincrby(ctx: &mut Ctx<'_, '_>) {
    let Some(delta) = parse_f64(ctx.arg(2)) else {
        return ctx.err(NOT_FLOAT);
    };
    let member = ctx.arg(3);
    let key = ctx.arg(1);
    let result = coll::write(&mut ctx.db, key, Kind::ZSet, Change::Create, |c| {
        let z = as_zset_mut(c);
        let new = z.score(member).unwrap_or(0.0) + delta;
        if new.is_nan() {
            return (None, false);
        }
        z.insert(member, new);
        (Some(new), true)
    });
    ctx.shared.blocking.key_ready(ctx.args.get(1));
    match result {
        Err(f) => f.reply(ctx),
        Ok(Some(Some(score))) => ctx.double(score),
        Ok(_) => ctx.err(b"ERR resulting score is not a number (NaN)"),
    }
}

pub fn zrem(ctx: &mut Ctx<'_, '_>) {
    let args = ctx.args;
    let key = ctx.arg(1);
    let result = coll::write(&mut ctx.db, key, Kind::ZSet, Change::Shrink, |c| {
        let z = as_zset_mut(c);
        let removed = args.tail(2).filter(|m| z.remove(m).is_some()).count();
        (removed as i64, removed > 0)
    });
    match result {
        Ok(n) => ctx.int(n.unwrap_or(0)),
        Err(f) => f.reply(ctx),
    }
}

pub fn zscore(ctx: &mut Ctx<'_, '_>) {
    let member = ctx.arg(2);
    match coll::read(&mut ctx.db, ctx.args.get(1), Kind::ZSet, |c| {
        c.and_then(|c| as_zset(c).score(member))
    }) {
        Ok(Some(s)) => ctx.double(s),
        Ok(None) => ctx.nil(),
        Err(f) => f.reply(ctx),
    }
}

pub fn zmscore(ctx: &mut Ctx<'_, '_>) {
    let args = ctx.args;
    match coll::read(&mut ctx.db, ctx.args.get(1), Kind::ZSet, |c| {
        args.tail(2)
            .map(|m| c.and_then(|c| as_zset(c).score(m)))
            .collect::<Vec<_>>()
    }) {
        Ok(scores) => {
            ctx.array(scores.len());
            for s in scores {
                match s {
                    Some(s) => ctx.double(s),
                    None => ctx.nil(),
                }
            }
        }
        Err(f) => f.reply(ctx),
    }
}

pub fn zcard(ctx: &mut Ctx<'_, '_>) {
    match coll::read(&mut ctx.db, ctx.args.get(1), Kind::ZSet, |c| {
        c.map_or(0, Collection::len)
    }) {
        Ok(n) => ctx.int(n as i64),
        Err(f) => f.reply(ctx),
    }
}

/// ZRANK / ZREVRANK key member [WITHSCORE] (WITHSCORE: Redis 7.2, `[rank, score]`).
fn rank(ctx: &mut Ctx<'_, '_>, reverse: bool) {
    if ctx.argc() > 4 {
        let name = super::lower(ctx.arg(0));
        return ctx.err(format!("ERR wrong number of arguments for '{name}' command").as_bytes());
    }
    let with_score = ctx.argc() == 4;
    if with_score && !ctx.arg(3).eq_ignore_ascii_case(b"withscore") {
        return ctx.err(SYNTAX);
    }
    let member = ctx.arg(2);
    match coll::read(&mut ctx.db, ctx.args.get(1), Kind::ZSet, |c| {
        let z = as_zset(c?);
        let r = z.rank(member)?;
        let score = z.score(member)?;
        Some((if reverse { z.len() - 1 - r } else { r }, score))
    }) {
        Ok(Some((r, score))) if with_score => {
            ctx.array(2);
            ctx.int(r as i64);
            ctx.double(score)
        }
        Ok(Some((r, _))) => ctx.int(r as i64),
        Ok(None) if with_score => ctx.nil_array(),
        Ok(None) => ctx.nil(),
        Err(f) => f.reply(ctx),
    }
}

pub fn zrank(ctx: &mut Ctx<'_, '_>) {
    rank(ctx, false)
}
pub fn zrevrank(ctx: &mut Ctx<'_, '_>) {
    rank(ctx, true)
}

fn pop(ctx: &mut Ctx<'_, '_>, max: bool) {
    let count = match coll::pop_count(ctx) {
        Ok(count) => count,
        Err(msg) => return ctx.err(msg),
    };
    let key = ctx.arg(1);
    let result = coll::write(&mut ctx.db, key, Kind::ZSet, Change::Shrink, |c| {
        let z = as_zset_mut(c);
        let n = count.unwrap_or(1).min(z.len());
        let picked = z.pop_ends(max, n);
        let changed = !picked.is_empty();
        (picked, changed)
    });
    match result {
        Err(f) => f.reply(ctx),
        Ok(popped) => reply_pairs(ctx, &popped.unwrap_or_default(), true, count.is_some()),
    }
}

/// Pops up to `count` of the lowest (or, with `max`, highest) members of the sorted set under
/// `key`, in that order: None when there is no key (BZPOPMIN, ZMPOP and BZMPOP try it before
/// they block).
pub fn zpop_from(
    db: &mut super::Db<'_, '_>,
    key: &[u8],
    max: bool,
    count: usize,
) -> Result<Option<Scored>, Fail> {
    coll::write(db, key, Kind::ZSet, Change::Shrink, |c| {
        let z = as_zset_mut(c);
        let picked = z.pop_ends(max, count);
        let changed = !picked.is_empty();
        (picked, changed)
    })
}

pub fn zpopmin(ctx: &mut Ctx<'_, '_>) {
    pop(ctx, false)
}
pub fn zpopmax(ctx: &mut Ctx<'_, '_>) {
    pop(ctx, true)
}

pub fn zscan(ctx: &mut Ctx<'_, '_>) {
    let Some(cursor) = coll::scan_cursor(ctx.arg(2)) else {
        return ctx.err(b"ERR invalid cursor");
    };
    let pattern = match coll::scan_options(ctx, 3) {
        Ok(p) => p,
        Err(msg) => return ctx.err(msg),
    };
    let result = coll::read(&mut ctx.db, ctx.args.get(1), Kind::ZSet, |c| {
        let Some(z) = c.map(as_zset).filter(|_| cursor == 0) else {
            return Vec::new();
        };
        z.iter()
            .filter(|(m, _)| pattern.as_deref().is_none_or(|p| glob::matches(p, m)))
            .map(|(m, s)| (m.to_vec(), s))
            .collect()
    });
    match result {
        Err(f) => f.reply(ctx),
        Ok(pairs) => {
            ctx.array(2);
            ctx.bulk(b"0");
            ctx.array(pairs.len() * 2);
            let mut text = Vec::new();
            for (m, s) in pairs {
                ctx.bulk(&m);
                text.clear();
                resp::reply::format_double(s, &mut text);
                ctx.bulk(&text);
            }
        }
    }
}

pub fn zrandmember(ctx: &mut Ctx<'_, '_>) {
    let with_scores = match ctx.argc() {
        2 | 3 => false,
        4 if ctx.arg(3).eq_ignore_ascii_case(b"withscores") => true,
        _ => return ctx.err(SYNTAX),
    };
    let count = if ctx.argc() >= 3 {
        match parse_i64(ctx.arg(2)) {
            Some(n) if n > -i64::MAX / 2 => Some(n),
            Some(_) => return ctx.err(b"ERR value is out of range"),
            None => return ctx.err(super::NOT_INTEGER),
        }
    } else {
        None
    };
    let result = coll::read(&mut ctx.db, ctx.args.get(1), Kind::ZSet, |c| {
        let Some(z) = c.map(as_zset) else {
            return Vec::new();
        };
        let all: Vec<(&[u8], f64)> = z.iter().collect();
        let pick = |i: usize| (all[i].0.to_vec(), all[i].1);
        match count {
            _ if all.is_empty() => Vec::new(),
            None => vec![pick(coll::random_below(all.len()))],
            Some(n) if n < 0 => (0..n.unsigned_abs())
                .map(|_| pick(coll::random_below(all.len())))
                .collect(),
            Some(n) if n as usize >= all.len() => (0..all.len()).map(pick).collect(),
            Some(n) => {
                let mut picked = std::collections::HashSet::new();
                while picked.len() < n as usize {
                    picked.insert(coll::random_below(all.len()));
                }
                picked.into_iter().map(pick).collect()
            }
        }
    });
    match (result, count) {
        (Err(f), _) => f.reply(ctx),
        (Ok(pairs), None) => ctx.bulk_opt(pairs.first().map(|(m, _)| m.as_slice())),
        (Ok(pairs), Some(_)) => reply_pairs(ctx, &pairs, with_scores, true),
    }
}

#[derive(Clone, Copy)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

/// The members and scores of a sorted set or set (scores 1) under `key`.
/// Members with their scores, owned.
type Scored = Vec<(Vec<u8>, f64)>;

fn load_weighted(ctx: &mut Ctx<'_, '_>, key: &[u8]) -> Result<Option<Scored>, Fail> {
    ctx.db.read(key, |item| match item {
        None => Ok(None),
        Some(item) => match item.collection() {
            Some(Collection::ZSet(z)) => Ok(Some(z.iter().map(|(m, s)| (m.to_vec(), s)).collect())),
            Some(Collection::Set(s)) => Ok(Some(s.iter().map(|m| (m.to_vec(), 1.0)).collect())),
            _ => Err(Fail::WrongType),
        },
    })
}

/// The set operation of ZUNION / ZINTER / ZDIFF and their STORE forms.
#[derive(Clone, Copy, PartialEq, Eq)]
enum SetOp {
    Union,
    Inter,
    Diff,
}

/// What the command does with the result.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Output {
    /// ZUNIONSTORE...: store under argument 1, reply its size.
    Store,
    /// ZUNION...: reply the members (WITHSCORES allowed).
    Reply,
    /// ZINTERCARD: reply the size (LIMIT allowed).
    Cardinality,
}

/// ZUNION / ZINTER / ZDIFF (`numkeys key... [WEIGHTS w...] [AGGREGATE SUM|MIN|MAX]
/// [WITHSCORES]`), their STORE forms (`dst` first, no WITHSCORES) and ZINTERCARD (`[LIMIT n]`),
/// in Redis's order of checks: the count, the keys' types, then the options. ZDIFF takes
/// neither WEIGHTS nor AGGREGATE.
fn combine(ctx: &mut Ctx<'_, '_>, op: SetOp, output: Output) {
    let name = super::lower(ctx.arg(0));
    let at = if output == Output::Store { 2 } else { 1 };
    let Some(numkeys) = ctx.int_arg(at) else {
        return;
    };
    if numkeys < 1 {
        let msg = format!("ERR at least 1 input key is needed for '{name}' command");
        return ctx.err(msg.as_bytes());
    }
    if numkeys > (ctx.argc() - at - 1) as i64 {
        return ctx.err(SYNTAX);
    }
    let numkeys = numkeys as usize;
    let mut inputs = Vec::with_capacity(numkeys);
    for j in 0..numkeys {
        match load_weighted(ctx, ctx.arg(at + 1 + j)) {
            Ok(members) => inputs.push(members),
            Err(f) => return f.reply(ctx),
        }
    }
    let mut weights = vec![1.0; numkeys];
    let mut aggregate = Aggregate::Sum;
    let mut with_scores = false;
    let mut limit = 0usize;
    let mut i = at + 1 + numkeys;
    let full = op != SetOp::Diff && output != Output::Cardinality;
    while i < ctx.argc() {
        let option = ctx.arg(i).to_ascii_lowercase();
        let remaining = ctx.argc() - i;
        if full && option == b"weights" && remaining > numkeys {
            for (j, w) in weights.iter_mut().enumerate() {
                match parse_f64(ctx.arg(i + 1 + j)) {
                    Some(v) => *w = v,
                    None => return ctx.err(b"ERR weight value is not a float"),
                }
            }
            i += 1 + numkeys;
        } else if full && option == b"aggregate" && remaining >= 2 {
            aggregate = match ctx.arg(i + 1).to_ascii_lowercase().as_slice() {
                b"sum" => Aggregate::Sum,
                b"min" => Aggregate::Min,
                b"max" => Aggregate::Max,
                _ => return ctx.err(SYNTAX),
            };
            i += 2;
        } else if output == Output::Reply && option == b"withscores" {
            with_scores = true;
            i += 1;
        } else if output == Output::Cardinality && option == b"limit" && remaining >= 2 {
            match parse_i64(ctx.arg(i + 1)) {
                Some(n) if n >= 0 => limit = n as usize,
                _ => return ctx.err(b"ERR LIMIT can't be negative"),
            }
            i += 2;
        } else {
            return ctx.err(SYNTAX);
        }
    }
    let z = match op {
        SetOp::Diff => diff(inputs),
        _ => union_or_inter(inputs, &weights, aggregate, op == SetOp::Inter),
    };
    match output {
        Output::Cardinality => {
            let n = z.len();
            ctx.int(if limit > 0 { n.min(limit) } else { n } as i64)
        }
        Output::Reply => {
            let pairs: Vec<(Vec<u8>, f64)> = z.iter().map(|(m, s)| (m.to_vec(), s)).collect();
            reply_pairs(ctx, &pairs, with_scores, true)
        }
        Output::Store => {
            let n = z.len();
            ctx.shared.blocking.key_ready(ctx.args.get(1));
            match coll::store(&mut ctx.db, ctx.args.get(1), Collection::ZSet(z)) {
                Ok(()) => ctx.int(n as i64),
                Err(f) => f.reply(ctx),
            }
        }
    }
}

/// The members of the first input that are in none of the others, with their scores.
fn diff(inputs: Vec<Option<Scored>>) -> ZSet {
    let mut inputs = inputs.into_iter();
    let mut z = ZSet::new();
    let Some(Some(first)) = inputs.next() else {
        return z;
    };
    let others: Vec<std::collections::HashSet<Vec<u8>>> = inputs
        .flatten()
        .map(|members| members.into_iter().map(|(m, _)| m).collect())
        .collect();
    for (m, s) in first {
        if !others.iter().any(|o| o.contains(&m)) {
            z.insert(&m, s);
        }
    }
    z
}

fn union_or_inter(
    inputs: Vec<Option<Scored>>,
    weights: &[f64],
    aggregate: Aggregate,
    inter: bool,
) -> ZSet {
    let combine = |a: f64, b: f64| {
        let v = match aggregate {
            Aggregate::Sum => a + b,
            Aggregate::Min => a.min(b),
            Aggregate::Max => a.max(b),
        };
        // inf + -inf: Redis counts it as 0.
        if v.is_nan() {
            0.0
        } else {
            v
        }
    };
    let weigh = |s: f64, w: f64| {
        let v = s * w;
        if v.is_nan() {
            0.0
        } else {
            v
        }
    };
    let numkeys = inputs.len();
    let mut result: HashMap<Vec<u8>, (f64, usize)> = HashMap::new();
    for (members, &w) in inputs.iter().zip(weights) {
        for (m, s) in members.iter().flatten() {
            let s = weigh(*s, w);
            result
                .entry(m.clone())
                .and_modify(|(acc, seen)| {
                    *acc = combine(*acc, s);
                    *seen += 1;
                })
                .or_insert((s, 1));
        }
    }
    let mut z = ZSet::new();
    for (m, (s, seen)) in result {
        if !inter || seen == numkeys {
            z.insert(&m, s);
        }
    }
    z
}

pub fn zunionstore(ctx: &mut Ctx<'_, '_>) {
    combine(ctx, SetOp::Union, Output::Store)
}
pub fn zinterstore(ctx: &mut Ctx<'_, '_>) {
    combine(ctx, SetOp::Inter, Output::Store)
}
pub fn zdiffstore(ctx: &mut Ctx<'_, '_>) {
    combine(ctx, SetOp::Diff, Output::Store)
}
pub fn zunion(ctx: &mut Ctx<'_, '_>) {
    combine(ctx, SetOp::Union, Output::Reply)
}
pub fn zinter(ctx: &mut Ctx<'_, '_>) {
    combine(ctx, SetOp::Inter, Output::Reply)
}
pub fn zdiff(ctx: &mut Ctx<'_, '_>) {
    combine(ctx, SetOp::Diff, Output::Reply)
}
pub fn zintercard(ctx: &mut Ctx<'_, '_>) {
    combine(ctx, SetOp::Inter, Output::Cardinality)
}
