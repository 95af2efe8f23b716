//! RESET: the connection back to the state it had when it was opened (Redis 6.2's
//! `clearClientConnectionState`); also the way out of MONITOR and subscribed mode.

use std::sync::atomic::Ordering::Relaxed;

use resp::reply::Version;

use super::Ctx;
use crate::clients::client_flags::{MONITOR, NO_EVICT, NO_TOUCH};

pub fn reset(ctx: &mut Ctx<'_, '_>) {
    let conn = &mut *ctx.conn;
    // Subscriptions, tracking and MONITOR end.
    conn.release(ctx.shared);
    conn.monitor = false;
    conn.multi = None;
    conn.multi_dirty = false;
    conn.watched.clear();
    conn.reply_off = false;
    conn.reply_skip_next = false;
    conn.version = Version::Resp2;
    conn.authenticated = !ctx.shared.settings.auth_required();
    let client = &conn.client;
    client.resp_version.store(2, Relaxed);
    *client.name.lock() = None;
    client
        .state
        .flags
        .fetch_and(!(MONITOR | NO_EVICT | NO_TOUCH), Relaxed);
    ctx.simple(b"RESET")
}
