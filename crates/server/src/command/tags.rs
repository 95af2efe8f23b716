//! Typed tag commands: TAG.SET, TAG.ADD, TAG.REM, TAG.OF and the group commands TAG.GET,
//! TAG.KEYS, TAG.COUNT and TAG.DEL over queries `WHERE type op value [AND ...]`.
//!
//! Group replies are `[cursor, items]`, like SCAN: items come in key order, `LIMIT n` cuts a page
//! and `CURSOR c` resumes after the key the cursor names ("0" when nothing is left).

use std::collections::BTreeSet;

use store::{now_ms, Item, Kind, Op, Predicate, Query, Tag, TagWrite, MAX_PREDICATES};

use super::{parse_i64, Ctx, OOM, SYNTAX};
use crate::keyspace::{self as ops, Cond, StoreArgs, StoreOutcome, Ttl};

fn too_many_tags(max: usize) -> Vec<u8> {
    format!("ERR too many tags for one record (max-tags-per-record is {max})").into_bytes()
}

fn parse_tag(ty: &[u8], value: &[u8]) -> Option<Tag> {
    let ty = std::str::from_utf8(ty).ok()?.parse::<u32>().ok()?;
    Some(Tag {
        ty,
        value: parse_i64(value)?,
    })
}

const BAD_TAG: &[u8] =
    b"ERR tag type must be an unsigned 32-bit integer and value a signed 64-bit integer";

/// Parses `type value` pairs from argument 2 on, handing each to `each`, which may stop the
/// walk with an error (a list of more distinct tags than a record may hold is refused after
/// `max + 1` of them, not after reading it all).
fn tag_pairs(
    ctx: &Ctx<'_, '_>,
    mut each: impl FnMut(Tag) -> Result<(), Vec<u8>>,
) -> Result<(), Vec<u8>> {
    if !(ctx.argc() - 2).is_multiple_of(2) {
        return Err(SYNTAX.to_vec());
    }
    for i in (2..ctx.argc()).step_by(2) {
        each(parse_tag(ctx.arg(i), ctx.arg(i + 1)).ok_or_else(|| BAD_TAG.to_vec())?)?;
    }
    Ok(())
}

/// The distinct tags of TAG.ADD's pairs, in order. Stops once there are more distinct tags
/// than a record may hold, so no input makes this quadratic or long (O(n log max)).
fn distinct_pairs(ctx: &Ctx<'_, '_>, max: usize) -> Result<Vec<Tag>, Vec<u8>> {
    let mut seen = BTreeSet::new();
    let mut tags = Vec::new();
    tag_pairs(ctx, |t| {
        if seen.insert(t) {
            if tags.len() == max {
                return Err(too_many_tags(max));
            }
            tags.push(t);
        }
        Ok(())
    })?;
    Ok(tags)
}

fn max_tags(ctx: &Ctx<'_, '_>) -> usize {
    ctx.shared
        .settings
        .max_tags_per_record
        .load(std::sync::atomic::Ordering::Relaxed)
}

/// TAG.SET key value [EX s | PX ms] [TAG type value ...]
pub fn set(ctx: &mut Ctx<'_, '_>) {
    let max = max_tags(ctx);
    let mut deadline = None;
    let mut tags = Vec::new();
    // Repeated tags count once; the check against `max` is made as tags arrive, so an
    // oversized list is refused after at most `max + 1` distinct tags.
    let mut seen = BTreeSet::new();
    let mut i = 3;
    while i < ctx.argc() {
        let opt = ctx.arg(i).to_ascii_lowercase();
        match opt.as_slice() {
            b"ex" | b"px" if i + 1 < ctx.argc() && deadline.is_none() => {
                let unit = if opt == b"ex" { 1000 } else { 1 };
                match parse_i64(ctx.arg(i + 1))
                    .and_then(|n| (n > 0).then_some(n))
                    .and_then(|n| ops::deadline(n, unit, false, now_ms()))
                {
                    Some(d) => deadline = Some(d as u64),
                    None => return ctx.err(b"ERR invalid expire time in 'tag.set' command"),
                }
                i += 2;
            }
            b"tag" if i + 2 < ctx.argc() => {
                match parse_tag(ctx.arg(i + 1), ctx.arg(i + 2)) {
                    Some(t) if seen.insert(t) => {
                        if tags.len() == max {
                            return ctx.err(&too_many_tags(max));
                        }
                        tags.push(t);
                    }
                    Some(_) => {}
                    None => return ctx.err(BAD_TAG),
                }
                i += 3;
            }
            _ => return ctx.err(SYNTAX),
        }
    }
    let args = StoreArgs {
        value: ctx.arg(2),
        cond: Cond::Always,
        ttl: Ttl::Set(deadline),
        flags: 0,
        cas: None,
    };
    match ctx
        .db
        .write(ctx.arg(1), |e| ops::store_tagged(e, &args, &tags))
    {
        StoreOutcome::OutOfMemory => ctx.err(OOM),
        _ => ctx.ok(),
    }
}

/// Rewrites the record at argument 1 with its tag list changed by `change`; replies with the
/// number `change` returns, 0 for a missing key.
fn retag(ctx: &mut Ctx<'_, '_>, change: impl FnOnce(&mut Vec<Tag>) -> usize) {
    let max = max_tags(ctx);
    let key = ctx.arg(1);
    let result = ctx.db.write(key, |e| {
        let Some(item) = e.item() else { return Ok(0) };
        let mut tags: Vec<Tag> = item.tags().collect();
        let changed = change(&mut tags);
        if changed == 0 {
            return Ok(0);
        }
        if tags.len() > max {
            return Err(too_many_tags(max));
        }
        let (kind, len, deadline, flags) = (
            item.kind(),
            item.value().len(),
            item.expire_at(),
            item.flags(),
        );
        e.put_record(
            kind,
            len,
            deadline,
            flags,
            TagWrite::Set(&tags),
            |buf, old| buf.copy_from_slice(old.expect("record being retagged").value()),
        )
        .map(|_| changed)
        .map_err(|_| OOM.to_vec())
    });
    match result {
        Ok(n) => ctx.int(n as i64),
        Err(msg) => ctx.err(&msg),
    }
}

/// TAG.ADD key type value [type value ...]
pub fn add(ctx: &mut Ctx<'_, '_>) {
    // Parsed and de-duplicated before the shard is locked; under the lock the work is bounded
    // by the record's tags and at most `max` new ones.
    let new = match distinct_pairs(ctx, max_tags(ctx)) {
        Ok(new) => new,
        Err(msg) => return ctx.err(&msg),
    };
    retag(ctx, |tags| {
        let before = tags.len();
        let mut have: Vec<Tag> = tags.clone();
        have.sort_unstable();
        tags.extend(new.into_iter().filter(|t| have.binary_search(t).is_err()));
        tags.len() - before
    })
}

/// TAG.REM key type value [type value ...]
pub fn rem(ctx: &mut Ctx<'_, '_>) {
    // Sorted outside the lock, so that the lock is held for a binary search per record tag.
    let mut gone = Vec::new();
    if let Err(msg) = tag_pairs(ctx, |t| {
        gone.push(t);
        Ok(())
    }) {
        return ctx.err(&msg);
    }
    gone.sort_unstable();
    gone.dedup();
    retag(ctx, |tags| {
        let before = tags.len();
        tags.retain(|t| gone.binary_search(t).is_err());
        before - tags.len()
    })
}

/// TAG.OF key: the record's tags as [type, value] pairs.
pub fn of(ctx: &mut Ctx<'_, '_>) {
    let key = ctx.arg(1);
    let out = &mut *ctx.out;
    ctx.db.read(key, |item| {
        let tags: Vec<Tag> = item.map(|i| i.tags().collect()).unwrap_or_default();
        resp::reply::array_len(out, tags.len());
        for t in tags {
            resp::reply::array_len(out, 2);
            resp::reply::integer(out, t.ty as i64);
            resp::reply::integer(out, t.value);
        }
    })
}

/// A parsed group request: the query and, for GET/KEYS, the page.
struct GroupRequest {
    query: Query,
    limit: usize,
    after: Option<Vec<u8>>,
}

/// Parses `WHERE type op value [AND ...] [LIMIT n] [CURSOR c]` from argument 1 on. Errors name
/// the argument (counting the command as 0) that is wrong.
fn parse_group(ctx: &Ctx<'_, '_>, paging: bool) -> Result<GroupRequest, String> {
    let n = ctx.argc();
    let word = |i: usize| -> String { String::from_utf8_lossy(ctx.arg(i)).into_owned() };
    let bad = |i: usize, want: &str| -> String {
        if i < n {
            format!(
                "ERR tag query: argument {i} ('{}'): expected {want}",
                word(i)
            )
        } else {
            format!("ERR tag query: missing {want} after argument {}", i - 1)
        }
    };
    let int_at = |i: usize| -> Result<i64, String> {
        (i < n)
            .then(|| parse_i64(ctx.arg(i)))
            .flatten()
            .ok_or_else(|| bad(i, "an integer value"))
    };
    if n < 2 || !ctx.arg(1).eq_ignore_ascii_case(b"where") {
        return Err(bad(1, "WHERE"));
    }
    let mut query = Query::default();
    let mut i = 2;
    loop {
        let ty = (i < n)
            .then(|| std::str::from_utf8(ctx.arg(i)).ok()?.parse::<u32>().ok())
            .flatten()
            .ok_or_else(|| bad(i, "a tag type (unsigned integer)"))?;
        let op_at = i + 1;
        let op_word = if op_at < n {
            ctx.arg(op_at).to_ascii_lowercase()
        } else {
            Vec::new()
        };
        let (op, next) = match op_word.as_slice() {
            b"any" => (Op::Any, op_at + 1),
            b"=" | b"==" => (Op::Eq(int_at(op_at + 1)?), op_at + 2),
            b"<" => (Op::Lt(int_at(op_at + 1)?), op_at + 2),
            b"<=" => (Op::Le(int_at(op_at + 1)?), op_at + 2),
            b">" => (Op::Gt(int_at(op_at + 1)?), op_at + 2),
            b">=" => (Op::Ge(int_at(op_at + 1)?), op_at + 2),
            b"between" => (
                Op::Between(int_at(op_at + 1)?, int_at(op_at + 2)?),
                op_at + 3,
            ),
            _ => return Err(bad(op_at, "an operator (= < <= > >= BETWEEN ANY)")),
        };
        if query.predicates.len() == MAX_PREDICATES {
            return Err(format!(
                "ERR tag query: too many AND clauses (at most {MAX_PREDICATES})"
            ));
        }
        query.predicates.push(Predicate { ty, op });
        i = next;
        if i < n && ctx.arg(i).eq_ignore_ascii_case(b"and") {
            i += 1;
            continue;
        }
        break;
    }
    let mut request = GroupRequest {
        query,
        limit: usize::MAX,
        after: None,
    };
    while i < n {
        match ctx.arg(i).to_ascii_lowercase().as_slice() {
            b"limit" if paging => {
                let v = int_at(i + 1)?;
                if v < 1 {
                    return Err(bad(i + 1, "a positive LIMIT"));
                }
                request.limit = v as usize;
            }
            b"cursor" if paging && i + 1 < n => {
                let c = ctx.arg(i + 1);
                if c != b"0" {
                    request.after = Some(
                        decode_cursor(c)
                            .ok_or_else(|| bad(i + 1, "a cursor from an earlier reply"))?,
                    );
                }
            }
            _ => {
                return Err(bad(
                    i,
                    if paging {
                        "AND, LIMIT or CURSOR"
                    } else {
                        "AND"
                    },
                ))
            }
        }
        i += 2;
    }
    Ok(request)
}

fn encode_cursor(key: &[u8]) -> Vec<u8> {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = Vec::with_capacity(1 + 2 * key.len());
    out.push(b'k');
    for b in key {
        out.push(HEX[(b >> 4) as usize]);
        out.push(HEX[(b & 15) as usize]);
    }
    out
}

fn decode_cursor(c: &[u8]) -> Option<Vec<u8>> {
    let hex = c.strip_prefix(b"k")?;
    if hex.len() % 2 != 0 {
        return None;
    }
    let nibble = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    hex.chunks(2)
        .map(|p| Some(nibble(p[0])? << 4 | nibble(p[1])?))
        .collect()
}

/// Writes `[cursor, page]` for the matching records: `with_values` gives key/value pairs.
fn page(
    out: &mut Vec<u8>,
    version: resp::reply::Version,
    request: &GroupRequest,
    items: &mut dyn Iterator<Item = Item<'_>>,
    with_values: bool,
) {
    let mut matched: Vec<Item<'_>> = items
        .filter(|i| request.after.as_deref().is_none_or(|a| i.key() > a))
        .collect();
    let more = matched.len() > request.limit;
    if more {
        matched.select_nth_unstable_by(request.limit, |a, b| a.key().cmp(b.key()));
        matched.truncate(request.limit);
    }
    matched.sort_unstable_by(|a, b| a.key().cmp(b.key()));
    resp::reply::array_len(out, 2);
    match matched.last() {
        Some(last) if more => resp::reply::bulk(out, &encode_cursor(last.key())),
        _ => resp::reply::bulk(out, b"0"),
    }
    if with_values {
        resp::reply::map_len(out, matched.len(), version);
    } else {
        resp::reply::array_len(out, matched.len());
    }
    for item in matched {
        resp::reply::bulk(out, item.key());
        if with_values {
            match item.kind() {
                Kind::String => resp::reply::bulk(out, item.value()),
                _ => resp::reply::null(out, version),
            }
        }
    }
}

fn group(ctx: &mut Ctx<'_, '_>, paging: bool) -> Option<GroupRequest> {
    match parse_group(ctx, paging) {
        Ok(r) => Some(r),
        Err(msg) => {
            ctx.err(msg.as_bytes());
            None
        }
    }
}

pub fn get(ctx: &mut Ctx<'_, '_>) {
    let Some(request) = group(ctx, true) else {
        return;
    };
    let (out, version) = (&mut *ctx.out, ctx.conn.version);
    ctx.db.tag_read(&request.query, |items| {
        page(out, version, &request, items, true)
    })
}

pub fn keys(ctx: &mut Ctx<'_, '_>) {
    let Some(request) = group(ctx, true) else {
        return;
    };
    let (out, version) = (&mut *ctx.out, ctx.conn.version);
    ctx.db.tag_read(&request.query, |items| {
        page(out, version, &request, items, false)
    })
}

pub fn count(ctx: &mut Ctx<'_, '_>) {
    let Some(request) = group(ctx, false) else {
        return;
    };
    let n = ctx.db.tag_read(&request.query, |items| items.count());
    ctx.int(n as i64)
}

pub fn del(ctx: &mut Ctx<'_, '_>) {
    let Some(request) = group(ctx, false) else {
        return;
    };
    if super::tags_del::hand_off(ctx, &request.query) {
        return;
    }
    let n = ctx.db.tag_delete(&request.query);
    ctx.int(n as i64)
}

#[cfg(test)]
mod tests {
    use super::{decode_cursor, encode_cursor};

    #[test]
    fn cursors_round_trip_any_key() {
        for key in [&b""[..], b"a", b"\x00\xff binary \r\n"] {
            assert_eq!(decode_cursor(&encode_cursor(key)).as_deref(), Some(key));
        }
        assert_eq!(decode_cursor(b"kz1"), None);
        assert_eq!(decode_cursor(b"x00"), None);
    }
}
