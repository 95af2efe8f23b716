//! CLIENT LIST / INFO (with the ID and TYPE filters), CLIENT SETINFO and CLIENT NO-EVICT /
//! NO-TOUCH: what a connection tells about itself and what the server shows of it.

use std::sync::atomic::Ordering::Relaxed;

use super::{Ctx, SYNTAX};
use crate::clients::{client_flags, ClientType};

/// CLIENT INFO: the caller's CLIENT LIST line.
pub fn info(ctx: &mut Ctx<'_, '_>) {
    // Its own state as of this command, not as of the last batch.
    ctx.conn.publish_state();
    let line = ctx.conn.client.info_line() + "\n";
    resp::reply::verbatim(ctx.out, b"txt", line.as_bytes(), ctx.conn.version)
}

/// CLIENT LIST [TYPE normal|master|replica|pubsub] [ID id [id ...]]
pub fn list(ctx: &mut Ctx<'_, '_>) {
    ctx.conn.publish_state();
    let mut clients = ctx.shared.clients.list();
    let argc = ctx.argc();
    if argc == 4 && ctx.arg(2).eq_ignore_ascii_case(b"type") {
        let Some(wanted) = ClientType::parse(ctx.arg(3)) else {
            let msg = format!(
                "ERR Unknown client type '{}'",
                String::from_utf8_lossy(ctx.arg(3))
            );
            return ctx.err(msg.as_bytes());
        };
        clients.retain(|c| c.client_type() == wanted);
    } else if argc > 3 && ctx.arg(2).eq_ignore_ascii_case(b"id") {
        let ids: Option<Vec<i64>> = ctx.args.tail(3).map(super::parse_i64).collect();
        let Some(ids) = ids else {
            return ctx.err(b"ERR Invalid client ID");
        };
        // In the order asked, as Redis (an id given twice is listed twice).
        clients = ids
            .into_iter()
            .filter_map(|id| u64::try_from(id).ok())
            .filter_map(|id| ctx.shared.clients.get(id))
            .collect();
    } else if argc != 2 {
        return ctx.err(SYNTAX);
    }
    let mut text = String::with_capacity(clients.len() * 320);
    for c in &clients {
        text.push_str(&c.info_line());
        text.push('\n');
    }
    resp::reply::verbatim(ctx.out, b"txt", text.as_bytes(), ctx.conn.version)
}

/// CLIENT SETINFO lib-name|lib-ver <value>: shown in CLIENT LIST; an empty value clears it.
pub fn setinfo(ctx: &mut Ctx<'_, '_>) {
    let attr = ctx.arg(2);
    let client = ctx.conn.client.clone();
    let slot = if attr.eq_ignore_ascii_case(b"lib-name") {
        &client.lib_name
    } else if attr.eq_ignore_ascii_case(b"lib-ver") {
        &client.lib_ver
    } else {
        let msg = format!(
            "ERR Unrecognized option '{}'",
            String::from_utf8_lossy(attr)
        );
        return ctx.err(msg.as_bytes());
    };
    let value = ctx.arg(3);
    // Like names: CLIENT LIST must stay splittable on spaces.
    if value.iter().any(|b| !(b'!'..=b'~').contains(b)) {
        let msg = format!(
            "ERR {} cannot contain spaces, newlines or special characters.",
            String::from_utf8_lossy(attr)
        );
        return ctx.err(msg.as_bytes());
    }
    *slot.lock() = (!value.is_empty()).then(|| value.to_vec());
    ctx.ok()
}

/// CLIENT NO-EVICT on|off and CLIENT NO-TOUCH on|off: recorded and shown (`e`, `T` flags).
pub fn mode(ctx: &mut Ctx<'_, '_>) {
    let bit = if ctx.arg(1).eq_ignore_ascii_case(b"no-evict") {
        client_flags::NO_EVICT
    } else {
        client_flags::NO_TOUCH
    };
    let flags = &ctx.conn.client.state.flags;
    match super::lower(ctx.arg(2)).as_str() {
        "on" => flags.fetch_or(bit, Relaxed),
        "off" => flags.fetch_and(!bit, Relaxed),
        _ => return ctx.err(SYNTAX),
    };
    ctx.ok()
}
