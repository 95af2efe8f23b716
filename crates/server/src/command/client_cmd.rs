//! CLIENT KILL (Redis 7's filters), CLIENT UNBLOCK, CLIENT REPLY and client-name validation (CLIENT SETNAME,
//! HELLO SETNAME).

use super::{parse_i64, Ctx, SYNTAX};
use crate::clients::{ClientType, KillFilter};

/// Checks a client name as Redis does: CLIENT LIST is split on spaces and newlines, so a name
/// may only hold printable ASCII without spaces. Replies with the error and returns false.
pub fn valid_name(ctx: &mut Ctx<'_, '_>, name: &[u8]) -> bool {
    if name.iter().any(|&b| !(b'!'..=b'~').contains(&b)) {
        ctx.err(b"ERR Client names cannot contain spaces, newlines or special characters.");
        return false;
    }
    true
}

/// Sets (or, with an empty name, clears) the connection's name.
pub fn set_name(ctx: &mut Ctx<'_, '_>, name: &[u8]) {
    *ctx.conn.client.name.lock() = (!name.is_empty()).then(|| name.to_vec());
}

/// CLIENT KILL addr:port (old form: +OK or an error, may kill the caller) or
/// CLIENT KILL <filter> <value> ... (every filter must match; replies with the count; skips the
/// caller unless SKIPME no).
pub fn kill(ctx: &mut Ctx<'_, '_>) {
    let my_id = ctx.conn.client.id;
    if ctx.argc() == 3 {
        let addr = String::from_utf8_lossy(ctx.arg(2)).into_owned();
        return if ctx.shared.clients.kill_by_addr(&addr, None) > 0 {
            ctx.ok()
        } else {
            ctx.err(b"ERR No such client")
        };
    }
    let texts: Vec<String> = ctx
        .args
        .tail(2)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let mut filter = KillFilter {
        skip_id: Some(my_id),
        ..KillFilter::default()
    };
    for pair in texts.chunks(2) {
        let [option, value] = pair else {
            return ctx.err(SYNTAX);
        };
        let value = value.as_str();
        match option.to_ascii_lowercase().as_str() {
            "id" => match parse_i64(value.as_bytes()).filter(|&id| id > 0) {
                Some(id) => filter.id = Some(id as u64),
                None => return ctx.err(b"ERR client-id should be greater than 0"),
            },
            "maxage" => match parse_i64(value.as_bytes()) {
                Some(age) if age > 0 => filter.min_age_secs = Some(age as u64),
                Some(_) => return ctx.err(b"ERR maxage should be greater than 0"),
                None => return ctx.err(b"ERR maxage is not an integer or out of range"),
            },
            "type" => match ClientType::parse(value.as_bytes()) {
                Some(kind) => filter.kind = Some(kind),
                None => {
                    let msg = format!("ERR Unknown client type '{value}'");
                    return ctx.err(msg.as_bytes());
                }
            },
            "addr" => filter.addr = Some(value),
            "laddr" => filter.laddr = Some(value),
            // cairn has one user, `default`, which every connection (memcached ones too) uses.
            "user" if value == "default" => {}
            "user" => {
                let msg = format!("ERR No such user '{value}'");
                return ctx.err(msg.as_bytes());
            }
            "skipme" => match value.to_ascii_lowercase().as_str() {
                "yes" => filter.skip_id = Some(my_id),
                "no" => filter.skip_id = None,
                _ => return ctx.err(SYNTAX),
            },
            _ => return ctx.err(SYNTAX),
        }
    }
    let killed = ctx.shared.clients.kill(&filter);
    ctx.int(killed as i64)
}

/// CLIENT REPLY ON|OFF|SKIP. The session drops the output of every command these cover
/// (`Conn::replies_muted`), OFF's and SKIP's own `+OK` included, so only ON is seen to answer
/// (and an EXEC that switches replies off stays a well-formed, dropped, reply).
pub fn reply(ctx: &mut Ctx<'_, '_>) {
    match super::lower(ctx.arg(2)).as_str() {
        "on" => {
            ctx.conn.reply_off = false;
            ctx.conn.reply_skip = false;
        }
        "off" => ctx.conn.reply_off = true,
        "skip" => {
            ctx.conn.reply_skip = true;
            if !ctx.conn.reply_off {
                ctx.conn.reply_skip_next = true;
            }
        }
        _ => return ctx.err(SYNTAX),
    }
    ctx.ok()
}

/// CLIENT UNBLOCK id [TIMEOUT|ERROR]: answers a client blocked in BLPOP, BLMOVE, BZPOPMIN...
/// or WAIT as if its timeout had passed (the default) or with `-UNBLOCKED`; 1 when it was blocked.
pub fn unblock(ctx: &mut Ctx<'_, '_>) {
    let Some(id) = ctx.int_arg(2) else { return };
    let reason = if ctx.argc() == 4 {
        ctx.arg(3).to_ascii_lowercase()
    } else {
        b"timeout".to_vec()
    };
    let error: Option<&[u8]> = match reason.as_slice() {
        b"timeout" => None,
        b"error" => Some(b"UNBLOCKED client unblocked via CLIENT UNBLOCK"),
        _ => return ctx.err(b"ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR"),
    };
    let unblocked = u64::try_from(id).is_ok_and(|id| {
        ctx.shared.blocking.unblock(id, error) || ctx.shared.replication.unblock_waiter(id, error)
    });
    ctx.int(i64::from(unblocked))
}
