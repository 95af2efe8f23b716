//! The sorted set range family: ZRANGE (BYSCORE BYLEX REV LIMIT WITHSCORES), ZRANGESTORE,
//! ZRANGEBYSCORE, ZREVRANGE, ZREVRANGEBYSCORE, ZRANGEBYLEX, ZREVRANGEBYLEX, ZCOUNT,
//! ZLEXCOUNT and ZREMRANGEBYSCORE/RANK/LEX: one parser of ranges and one selection.

use store::collection::ZSet;
use store::{Collection, Kind};

use super::collections::{self as coll, Change, Fail};
use super::zsets::{as_zset, as_zset_mut, reply_pairs};
use super::{parse_f64, parse_i64, Ctx, NOT_INTEGER, SYNTAX};

/// One end of a score range.
#[derive(Clone, Copy)]
struct ScoreBound {
    value: f64,
    exclusive: bool,
}

fn score_bound(arg: &[u8]) -> Option<ScoreBound> {
    let (exclusive, text) = match arg.strip_prefix(b"(") {
        Some(rest) => (true, rest),
        None => (false, arg),
    };
    let value = parse_f64(text)?;
    Some(ScoreBound { value, exclusive })
}

/// One end of a lexicographic range.
#[derive(Clone)]
enum LexBound {
    Min,
    Max,
    Inclusive(Vec<u8>),
    Exclusive(Vec<u8>),
}

fn lex_bound(arg: &[u8]) -> Option<LexBound> {
    match arg {
        b"-" => Some(LexBound::Min),
        b"+" => Some(LexBound::Max),
        [b'[', rest @ ..] => Some(LexBound::Inclusive(rest.to_vec())),
        [b'(', rest @ ..] => Some(LexBound::Exclusive(rest.to_vec())),
        _ => None,
    }
}

/// What a range selects.
#[derive(Clone)]
enum Range {
    Rank(i64, i64),
    Score(ScoreBound, ScoreBound),
    Lex(LexBound, LexBound),
}

fn above_min(score: f64, min: ScoreBound) -> bool {
    if min.exclusive {
        score > min.value
    } else {
        score >= min.value
    }
}

fn below_max(score: f64, max: ScoreBound) -> bool {
    if max.exclusive {
        score < max.value
    } else {
        score <= max.value
    }
}

fn lex_above(m: &[u8], min: &LexBound) -> bool {
    match min {
        LexBound::Min => true,
        LexBound::Max => false,
        LexBound::Inclusive(v) => m >= v.as_slice(),
        LexBound::Exclusive(v) => m > v.as_slice(),
    }
}

fn lex_below(m: &[u8], max: &LexBound) -> bool {
    match max {
        LexBound::Min => false,
        LexBound::Max => true,
        LexBound::Inclusive(v) => m <= v.as_slice(),
        LexBound::Exclusive(v) => m < v.as_slice(),
    }
}

/// The members `range` selects, in order (descending when `rev`), after skipping `offset`
/// and keeping `count` (None: all).
fn select(
    z: &ZSet,
    range: &Range,
    rev: bool,
    offset: usize,
    count: Option<usize>,
) -> Vec<(Vec<u8>, f64)> {
    let take = count.unwrap_or(usize::MAX);
    let own = |(m, s): (&[u8], f64)| (m.to_vec(), s);
    match range {
        Range::Rank(start, stop) => {
            let Some((from, to)) = coll::index_range(*start, *stop, z.len()) else {
                return Vec::new();
            };
            if rev {
                z.iter().rev().skip(from).take(to - from).map(own).collect()
            } else {
                z.iter().skip(from).take(to - from).map(own).collect()
            }
        }
        Range::Score(min, max) => {
            let (min, max) = (*min, *max);
            if rev {
                z.down_from_score(max.value)
                    .skip_while(|&(_, s)| !below_max(s, max))
                    .take_while(|&(_, s)| above_min(s, min))
                    .skip(offset)
                    .take(take)
                    .map(own)
                    .collect()
            } else {
                z.from_score(min.value)
                    .skip_while(|&(_, s)| !above_min(s, min))
                    .take_while(|&(_, s)| below_max(s, max))
                    .skip(offset)
                    .take(take)
                    .map(own)
                    .collect()
            }
        }
        Range::Lex(min, max) => {
            let inside = |&(m, _): &(&[u8], f64)| lex_above(m, min) && lex_below(m, max);
            if rev {
                z.iter()
                    .rev()
                    .filter(inside)
                    .skip(offset)
                    .take(take)
                    .map(own)
                    .collect()
            } else {
                z.iter()
                    .filter(inside)
                    .skip(offset)
                    .take(take)
                    .map(own)
                    .collect()
            }
        }
    }
}

/// The parsed form of any range command.
struct Request {
    range: Range,
    rev: bool,
    offset: usize,
    count: Option<usize>,
    with_scores: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum By {
    Rank,
    Score,
    Lex,
}

fn parse_range(by: By, min: &[u8], max: &[u8]) -> Result<Range, &'static [u8]> {
    match by {
        By::Rank => match (parse_i64(min), parse_i64(max)) {
            (Some(a), Some(b)) => Ok(Range::Rank(a, b)),
            _ => Err(NOT_INTEGER),
        },
        By::Score => match (score_bound(min), score_bound(max)) {
            (Some(a), Some(b)) => Ok(Range::Score(a, b)),
            _ => Err(b"ERR min or max is not a float"),
        },
        By::Lex => match (lex_bound(min), lex_bound(max)) {
            (Some(a), Some(b)) => Ok(Range::Lex(a, b)),
            _ => Err(b"ERR min or max not valid string range item"),
        },
    }
}

/// Parses `start stop [options]` from argument `at`: ZRANGE's options when `by` is None,
/// otherwise the fixed form of the older commands (their `by` and `rev` given).
fn parse_request(
    ctx: &Ctx<'_, '_>,
    at: usize,
    fixed: Option<(By, bool)>,
    store: bool,
) -> Result<Request, &'static [u8]> {
    let (mut by, mut rev) = fixed.unwrap_or((By::Rank, false));
    let (mut limit, mut with_scores) = (None, false);
    let mut i = at + 2;
    while i < ctx.argc() {
        let option = ctx.arg(i).to_ascii_lowercase();
        match option.as_slice() {
            b"withscores" if !store => with_scores = true,
            b"limit" if i + 2 < ctx.argc() && fixed.is_none_or(|(b, _)| b != By::Rank) => {
                let (Some(o), Some(c)) = (parse_i64(ctx.arg(i + 1)), parse_i64(ctx.arg(i + 2)))
                else {
                    return Err(NOT_INTEGER);
                };
                limit = Some((o, c));
                i += 2;
            }
            b"byscore" if fixed.is_none() => by = By::Score,
            b"bylex" if fixed.is_none() => by = By::Lex,
            b"rev" if fixed.is_none() => rev = true,
            _ => return Err(SYNTAX),
        }
        i += 1;
    }
    if limit.is_some() && by == By::Rank {
        return Err(b"ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX");
    }
    if with_scores && by == By::Lex {
        return Err(b"ERR syntax error, WITHSCORES not supported in combination with BYLEX");
    }
    // With REV, ZRANGE's BYSCORE/BYLEX bounds come max first, as the REV commands take them.
    let (first, second) = (ctx.arg(at), ctx.arg(at + 1));
    let (min, max) = if rev && by != By::Rank {
        (second, first)
    } else {
        (first, second)
    };
    let range = parse_range(by, min, max)?;
    let (offset, count) = match limit {
        None => (0, None),
        Some((o, _)) if o < 0 => (usize::MAX, Some(0)),
        Some((o, c)) => (o as usize, (c >= 0).then_some(c as usize)),
    };
    Ok(Request {
        range,
        rev,
        offset,
        count,
        with_scores,
    })
}

/// The (member, score) pairs `request` selects from the sorted set named by argument `key`
/// (none when the key is missing).
fn selected(
    ctx: &mut Ctx<'_, '_>,
    key: usize,
    request: &Request,
) -> Result<Vec<(Vec<u8>, f64)>, Fail> {
    coll::read(&mut ctx.db, ctx.args.get(key), Kind::ZSet, |c| {
        c.map(|c| {
            select(
                as_zset(c),
                &request.range,
                request.rev,
                request.offset,
                request.count,
            )
        })
        .unwrap_or_default()
    })
}

fn range_reply(ctx: &mut Ctx<'_, '_>, fixed: Option<(By, bool)>) {
    let request = match parse_request(ctx, 2, fixed, false) {
        Ok(r) => r,
        Err(msg) => return ctx.err(msg),
    };
    let result = selected(ctx, 1, &request);
    match result {
        Ok(pairs) => reply_pairs(ctx, &pairs, request.with_scores, true),
        Err(f) => f.reply(ctx),
    }
}

pub fn zrange(ctx: &mut Ctx<'_, '_>) {
    range_reply(ctx, None)
}
pub fn zrangebyscore(ctx: &mut Ctx<'_, '_>) {
    range_reply(ctx, Some((By::Score, false)))
}
pub fn zrevrangebyscore(ctx: &mut Ctx<'_, '_>) {
    range_reply(ctx, Some((By::Score, true)))
}
pub fn zrevrange(ctx: &mut Ctx<'_, '_>) {
    range_reply(ctx, Some((By::Rank, true)))
}
pub fn zrangebylex(ctx: &mut Ctx<'_, '_>) {
    range_reply(ctx, Some((By::Lex, false)))
}
pub fn zrevrangebylex(ctx: &mut Ctx<'_, '_>) {
    range_reply(ctx, Some((By::Lex, true)))
}

pub fn zrangestore(ctx: &mut Ctx<'_, '_>) {
    let request = match parse_request(ctx, 3, None, true) {
        Ok(r) => r,
        Err(msg) => return ctx.err(msg),
    };
    let result = selected(ctx, 2, &request);
    let pairs = match result {
        Ok(p) => p,
        Err(f) => return f.reply(ctx),
    };
    let mut z = ZSet::new();
    pairs.iter().for_each(|(m, s)| {
        z.insert(m, *s);
    });
    let n = z.len();
    ctx.shared.blocking.key_ready(ctx.args.get(1));
    match coll::store(&mut ctx.db, ctx.args.get(1), Collection::ZSet(z)) {
        Ok(()) => ctx.int(n as i64),
        Err(f) => f.reply(ctx),
    }
}

fn count(ctx: &mut Ctx<'_, '_>, by: By) {
    let range = match parse_range(by, ctx.arg(2), ctx.arg(3)) {
        Ok(r) => r,
        Err(msg) => return ctx.err(msg),
    };
    match coll::read(&mut ctx.db, ctx.args.get(1), Kind::ZSet, |c| {
        c.map_or(0, |c| select(as_zset(c), &range, false, 0, None).len())
    }) {
        Ok(n) => ctx.int(n as i64),
        Err(f) => f.reply(ctx),
    }
}

pub fn zcount(ctx: &mut Ctx<'_, '_>) {
    count(ctx, By::Score)
}
pub fn zlexcount(ctx: &mut Ctx<'_, '_>) {
    count(ctx, By::Lex)
}

fn remove_range(ctx: &mut Ctx<'_, '_>, by: By) {
    let range = match parse_range(by, ctx.arg(2), ctx.arg(3)) {
        Ok(r) => r,
        Err(msg) => return ctx.err(msg),
    };
    let key = ctx.arg(1);
    let result = coll::write(&mut ctx.db, key, Kind::ZSet, Change::Shrink, |c| {
        let z = as_zset_mut(c);
        let doomed = select(z, &range, false, 0, None);
        doomed.iter().for_each(|(m, _)| {
            z.remove(m);
        });
        (doomed.len() as i64, !doomed.is_empty())
    });
    match result {
        Ok(n) => ctx.int(n.unwrap_or(0)),
        Err(f) => f.reply(ctx),
    }
}

pub fn zremrangebyscore(ctx: &mut Ctx<'_, '_>) {
    remove_range(ctx, By::Score)
}
pub fn zremrangebyrank(ctx: &mut Ctx<'_, '_>) {
    remove_range(ctx, By::Rank)
}
pub fn zremrangebylex(ctx: &mut Ctx<'_, '_>) {
    remove_range(ctx, By::Lex)
}
