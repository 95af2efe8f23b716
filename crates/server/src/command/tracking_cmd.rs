//! CLIENT TRACKING, CLIENT CACHING, CLIENT GETREDIR and CLIENT TRACKINGINFO.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use super::Ctx;
use crate::tracking::Tracker;

/// A connection's tracking mode.
pub struct TrackingState {
    pub tracker: Arc<Tracker>,
    pub redirect: u64,
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    /// CLIENT CACHING YES/NO for the next command.
    pub caching: Option<bool>,
}

impl TrackingState {
    /// Whether the reads of the command now running are remembered.
    pub fn tracks_reads(&self) -> bool {
        !self.bcast
            && match self.caching {
                Some(yes) => yes,
                None => !self.optin,
            }
    }
}

pub fn tracking(ctx: &mut Ctx<'_, '_>) {
    match super::lower(ctx.arg(2)).as_str() {
        "off" if ctx.argc() == 3 => {
            if let Some(state) = ctx.conn.tracking.take() {
                ctx.shared.tracking.disable(&state.tracker);
            }
            ctx.ok()
        }
        "on" => tracking_on(ctx),
        _ => ctx.err(b"ERR syntax error"),
    }
}

fn tracking_on(ctx: &mut Ctx<'_, '_>) {
    let (mut redirect, mut bcast, mut optin, mut optout, mut noloop) =
        (0u64, false, false, false, false);
    let mut prefixes = Vec::new();
    let mut i = 3;
    while i < ctx.argc() {
        match super::lower(ctx.arg(i)).as_str() {
            "redirect" if i + 1 < ctx.argc() => {
                match std::str::from_utf8(ctx.arg(i + 1))
                    .ok()
                    .and_then(|s| s.parse().ok())
                {
                    Some(id) => redirect = id,
                    None => return ctx.err(super::NOT_INTEGER),
                }
                i += 1;
            }
            "prefix" if i + 1 < ctx.argc() => {
                prefixes.push(ctx.arg(i + 1).to_vec());
                i += 1;
            }
            "bcast" => bcast = true,
            "optin" => optin = true,
            "optout" => optout = true,
            "noloop" => noloop = true,
            _ => return ctx.err(b"ERR syntax error"),
        }
        i += 1;
    }
    if !prefixes.is_empty() && !bcast {
        return ctx.err(b"ERR PREFIX option requires BCAST mode to be enabled");
    }
    if optin && optout {
        return ctx.err(b"ERR You can't specify both OPTIN mode and OPTOUT mode");
    }
    for (i, a) in prefixes.iter().enumerate() {
        if let Some(b) = prefixes[i + 1..]
            .iter()
            .find(|b| a.starts_with(b) || b.starts_with(a))
        {
            let msg = format!(
                "ERR Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.",
                String::from_utf8_lossy(a),
                String::from_utf8_lossy(b)
            );
            return ctx.err(msg.as_bytes());
        }
    }
    if ctx.conn.tracking.as_ref().is_some_and(|t| t.bcast != bcast) {
        return ctx.err(b"ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.");
    }
    if bcast && (optin || optout) {
        return ctx.err(b"ERR OPTIN and OPTOUT are not compatible with BCAST");
    }
    let target = if redirect == 0 {
        ctx.conn.client.clone()
    } else {
        match ctx.shared.clients.get(redirect) {
            Some(c) => c,
            None => return ctx.err(b"ERR The client ID you want redirect to does not exist"),
        }
    };
    if let Some(old) = ctx.conn.tracking.take() {
        ctx.shared.tracking.disable(&old.tracker);
    }
    let tracker = Arc::new(Tracker {
        id: ctx.conn.client.id,
        target,
        noloop,
        enabled: AtomicBool::new(true),
        bcast_prefixes: prefixes,
    });
    ctx.shared.tracking.enable(tracker.clone(), bcast);
    ctx.conn.tracking = Some(TrackingState {
        tracker,
        redirect,
        bcast,
        optin,
        optout,
        caching: None,
    });
    ctx.ok()
}

pub fn caching(ctx: &mut Ctx<'_, '_>) {
    let yes = match super::lower(ctx.arg(2)).as_str() {
        "yes" => true,
        "no" => false,
        _ => return ctx.err(b"ERR syntax error"),
    };
    let Some(state) = ctx.conn.tracking.as_mut().filter(|s| s.optin || s.optout) else {
        return ctx.err(b"ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled");
    };
    if yes && !state.optin {
        return ctx
            .err(b"ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.");
    }
    if !yes && !state.optout {
        return ctx
            .err(b"ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.");
    }
    state.caching = Some(yes);
    ctx.ok()
}

pub fn getredir(ctx: &mut Ctx<'_, '_>) {
    let redirect = ctx.conn.tracking.as_ref().map_or(-1, |s| s.redirect as i64);
    ctx.int(redirect)
}

pub fn trackinginfo(ctx: &mut Ctx<'_, '_>) {
    let mut flags: Vec<&[u8]> = Vec::new();
    let (redirect, prefixes) = match &ctx.conn.tracking {
        None => {
            flags.push(b"off");
            (-1, Vec::new())
        }
        Some(s) => {
            flags.push(b"on");
            for (on, name) in [
                (s.bcast, &b"bcast"[..]),
                (s.optin, b"optin"),
                (s.optout, b"optout"),
                (s.tracker.noloop, b"noloop"),
            ] {
                if on {
                    flags.push(name);
                }
            }
            match s.caching {
                Some(true) => flags.push(b"caching-yes"),
                Some(false) => flags.push(b"caching-no"),
                None => {}
            }
            (s.redirect as i64, s.tracker.bcast_prefixes.clone())
        }
    };
    ctx.map(3);
    ctx.bulk(b"flags");
    ctx.set(flags.len());
    flags.iter().for_each(|f| ctx.bulk(f));
    ctx.bulk(b"redirect");
    ctx.int(redirect);
    ctx.bulk(b"prefixes");
    ctx.array(prefixes.len());
    prefixes.iter().for_each(|p| ctx.bulk(p));
}
