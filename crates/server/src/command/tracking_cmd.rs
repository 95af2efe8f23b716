//! CLIENT TRACKING, CLIENT CACHING, CLIENT GETREDIR and CLIENT TRACKINGINFO.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
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

/// CLIENT TRACKING options, parsed the same way for ON and OFF (as Redis does).
struct Options {
    redirect: Option<u64>,
    bcast: bool,
    optin: bool,
    optout: bool,
    noloop: bool,
    prefixes: Vec<Vec<u8>>,
}

/// Parses the options after ON/OFF; replies with the error and returns None on a bad one.
fn parse_options(ctx: &mut Ctx<'_, '_>) -> Option<Options> {
    let mut o = Options {
        redirect: None,
        bcast: false,
        optin: false,
        optout: false,
        noloop: false,
        prefixes: Vec::new(),
    };
    let mut i = 3;
    while i < ctx.argc() {
        let more = i + 1 < ctx.argc();
        match super::lower(ctx.arg(i)).as_str() {
            "redirect" if more => {
                i += 1;
                if o.redirect.is_some() {
                    ctx.err(b"ERR A client can only redirect to a single other client");
                    return None;
                }
                let id = super::parse_i64(ctx.arg(i));
                let Some(id) = id else {
                    ctx.err(super::NOT_INTEGER);
                    return None;
                };
                // The target must exist now (it may still disconnect later).
                if id <= 0 || ctx.shared.clients.get(id as u64).is_none() {
                    ctx.err(b"ERR The client ID you want redirect to does not exist");
                    return None;
                }
                o.redirect = Some(id as u64);
            }
            "prefix" if more => {
                i += 1;
                o.prefixes.push(ctx.arg(i).to_vec());
            }
            "bcast" => o.bcast = true,
            "optin" => o.optin = true,
            "optout" => o.optout = true,
            "noloop" => o.noloop = true,
            _ => {
                ctx.err(super::SYNTAX);
                return None;
            }
        }
        i += 1;
    }
    Some(o)
}

pub fn tracking(ctx: &mut Ctx<'_, '_>) {
    let Some(options) = parse_options(ctx) else {
        return;
    };
    match super::lower(ctx.arg(2)).as_str() {
        "on" => tracking_on(ctx, options),
        "off" => {
            if let Some(state) = ctx.conn.tracking.take() {
                ctx.shared.tracking.disable(&state.tracker);
            }
            ctx.ok()
        }
        _ => ctx.err(super::SYNTAX),
    }
}

/// Two prefixes overlap when one starts with the other: a key would match both.
fn overlaps(a: &[u8], b: &[u8]) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

fn tracking_on(ctx: &mut Ctx<'_, '_>, o: Options) {
    if !o.prefixes.is_empty() && !o.bcast {
        return ctx.err(b"ERR PREFIX option requires BCAST mode to be enabled");
    }
    let old = ctx.conn.tracking.as_ref();
    if old.is_some_and(|t| t.bcast != o.bcast) {
        return ctx.err(b"ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.");
    }
    if o.bcast && (o.optin || o.optout) {
        return ctx.err(b"ERR OPTIN and OPTOUT are not compatible with BCAST");
    }
    if o.optin && o.optout {
        return ctx.err(b"ERR You can't specify both OPTIN mode and OPTOUT mode");
    }
    if old.is_some_and(|t| (o.optin && t.optout) || (o.optout && t.optin)) {
        return ctx.err(b"ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.");
    }
    // As Redis, a BCAST client's prefixes accumulate over CLIENT TRACKING ON calls, and no two
    // of them may overlap (a key would be announced twice).
    let existing: &[Vec<u8>] = old.map_or(&[], |t| &t.tracker.bcast_prefixes);
    for (i, a) in o.prefixes.iter().enumerate() {
        if let Some(b) = existing.iter().find(|b| overlaps(a, b)) {
            let msg = format!(
                "ERR Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.",
                String::from_utf8_lossy(a),
                String::from_utf8_lossy(b)
            );
            return ctx.err(msg.as_bytes());
        }
        if let Some(b) = o.prefixes[i + 1..].iter().find(|b| overlaps(a, b)) {
            let msg = format!(
                "ERR Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.",
                String::from_utf8_lossy(a),
                String::from_utf8_lossy(b)
            );
            return ctx.err(msg.as_bytes());
        }
    }
    let redirect = o.redirect.unwrap_or(0);
    let target = if redirect == 0 {
        ctx.conn.client.clone()
    } else {
        match ctx.shared.clients.get(redirect) {
            Some(c) => c,
            None => return ctx.err(b"ERR The client ID you want redirect to does not exist"),
        }
    };
    let mut prefixes = existing.to_vec();
    if o.bcast {
        // No PREFIX means the empty prefix: every key (Redis lists it as "").
        let new = if o.prefixes.is_empty() {
            vec![Vec::new()]
        } else {
            o.prefixes
        };
        prefixes.extend(new);
        prefixes.sort();
        prefixes.dedup();
    }
    if let Some(old) = ctx.conn.tracking.take() {
        ctx.shared.tracking.disable(&old.tracker);
    }
    let tracker = Arc::new(Tracker {
        id: ctx.conn.client.id,
        owner: ctx.conn.client.clone(),
        target,
        noloop: o.noloop,
        enabled: AtomicBool::new(true),
        bcast_prefixes: prefixes,
        broken_redirect: AtomicBool::new(false),
    });
    ctx.shared.tracking.enable(tracker.clone(), o.bcast);
    ctx.conn.tracking = Some(TrackingState {
        tracker,
        redirect,
        bcast: o.bcast,
        optin: o.optin,
        optout: o.optout,
        caching: None,
    });
    ctx.ok()
}

pub fn caching(ctx: &mut Ctx<'_, '_>) {
    // As Redis: the tracking mode is checked before the argument is.
    if !ctx
        .conn
        .tracking
        .as_ref()
        .is_some_and(|s| s.optin || s.optout)
    {
        return ctx.err(b"ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled");
    }
    let yes = match super::lower(ctx.arg(2)).as_str() {
        "yes" => true,
        "no" => false,
        _ => return ctx.err(b"ERR syntax error"),
    };
    let Some(state) = ctx.conn.tracking.as_mut() else {
        return;
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
                (s.tracker.broken_redirect.load(Relaxed), b"broken_redirect"),
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
