//! Connection and server commands: PING, ECHO, HELLO, AUTH, QUIT, SELECT, CONFIG, CLIENT,
//! TIME (INFO and ROLE are in `info`, COMMAND in `introspect`).

use std::sync::atomic::Ordering::Relaxed;

use resp::reply::Version;

use super::{parse_i64, Ctx, NOT_INTEGER, SYNTAX};

/// The Redis version cairn reports, so that clients enable the features it implements.
pub const REDIS_COMPAT_VERSION: &str = "7.4.0";

fn wrong_args(ctx: &mut Ctx<'_, '_>) {
    let name = super::lower(ctx.arg(0));
    ctx.err(format!("ERR wrong number of arguments for '{name}' command").as_bytes())
}

pub fn ping(ctx: &mut Ctx<'_, '_>) {
    if ctx.conn.subscribed_resp2() && ctx.argc() <= 2 {
        let msg = if ctx.argc() == 2 {
            ctx.args.get(1)
        } else {
            b""
        };
        ctx.array(2);
        ctx.bulk(b"pong");
        return ctx.bulk(msg);
    }
    match ctx.argc() {
        1 => ctx.simple(b"PONG"),
        2 => ctx.bulk(ctx.args.get(1)),
        _ => wrong_args(ctx),
    }
}

pub fn echo(ctx: &mut Ctx<'_, '_>) {
    ctx.bulk(ctx.args.get(1))
}

pub fn quit(ctx: &mut Ctx<'_, '_>) {
    ctx.conn.close = true;
    ctx.ok()
}

pub fn select(ctx: &mut Ctx<'_, '_>) {
    match parse_i64(ctx.arg(1)) {
        Some(0) => ctx.ok(),
        Some(_) => ctx.err(b"ERR DB index is out of range"),
        None => ctx.err(NOT_INTEGER),
    }
}

pub fn time(ctx: &mut Ctx<'_, '_>) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    ctx.array(2);
    ctx.bulk(now.as_secs().to_string().as_bytes());
    ctx.bulk(now.subsec_micros().to_string().as_bytes());
}

/// Authenticates as Redis's `default` user. Without `requirepass` that user has no password
/// (`nopass`): `AUTH default <anything>` succeeds, as `redis://default:pw@host` URLs need, while
/// the one-argument form is refused because it is surely a configuration mistake.
fn try_auth(ctx: &mut Ctx<'_, '_>, user: Option<&[u8]>, pass: &[u8]) -> bool {
    let required = ctx.shared.settings.auth_required();
    if user.is_none() && !required {
        ctx.err(b"ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?");
        return false;
    }
    if user.is_none_or(|u| u == b"default")
        && (!required || ctx.shared.settings.password_matches(pass))
    {
        ctx.conn.authenticated = true;
        true
    } else {
        ctx.err(b"WRONGPASS invalid username-password pair or user is disabled.");
        false
    }
}

pub fn auth(ctx: &mut Ctx<'_, '_>) {
    let ok = match ctx.argc() {
        2 => try_auth(ctx, None, ctx.args.get(1)),
        3 => try_auth(ctx, Some(ctx.args.get(1)), ctx.args.get(2)),
        _ => return ctx.err(SYNTAX),
    };
    if ok {
        ctx.ok()
    }
}

pub fn hello(ctx: &mut Ctx<'_, '_>) {
    let mut version = ctx.conn.version;
    let mut i = 1;
    if ctx.argc() > 1 {
        version = match parse_i64(ctx.arg(1)) {
            Some(2) => Version::Resp2,
            Some(3) => Version::Resp3,
            Some(_) => return ctx.err(b"NOPROTO unsupported protocol version"),
            None => return ctx.err(b"ERR Protocol version is not an integer or out of range"),
        };
        i = 2;
    }
    // As Redis: every option is parsed (and a name checked) before authenticating.
    let (mut name, mut credentials) = (None, None);
    while i < ctx.argc() {
        match ctx.arg(i).to_ascii_lowercase().as_slice() {
            b"auth" if i + 2 < ctx.argc() => {
                credentials = Some((ctx.args.get(i + 1), ctx.args.get(i + 2)));
                i += 3;
            }
            b"setname" if i + 1 < ctx.argc() => {
                let n = ctx.args.get(i + 1);
                if !super::client_cmd::valid_name(ctx, n) {
                    return;
                }
                name = Some(n);
                i += 2;
            }
            _ => {
                let msg = format!(
                    "ERR Syntax error in HELLO option '{}'",
                    String::from_utf8_lossy(ctx.arg(i))
                );
                return ctx.err(msg.as_bytes());
            }
        }
    }
    if let Some((user, pass)) = credentials {
        if !try_auth(ctx, Some(user), pass) {
            return;
        }
    }
    if ctx.conn.auth_pending(&ctx.shared.settings) {
        return ctx.err(b"NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time");
    }
    if let Some(name) = name {
        super::client_cmd::set_name(ctx, name);
    }
    ctx.conn.version = version;
    ctx.conn
        .client
        .resp_version
        .store(if version == Version::Resp3 { 3 } else { 2 }, Relaxed);
    ctx.map(7);
    ctx.bulk(b"server");
    ctx.bulk(b"redis");
    ctx.bulk(b"version");
    ctx.bulk(REDIS_COMPAT_VERSION.as_bytes());
    ctx.bulk(b"proto");
    ctx.int(if version == Version::Resp3 { 3 } else { 2 });
    ctx.bulk(b"id");
    ctx.int(ctx.conn.client.id as i64);
    ctx.bulk(b"mode");
    ctx.bulk(b"standalone");
    ctx.bulk(b"role");
    ctx.bulk(b"master");
    ctx.bulk(b"modules");
    ctx.array(0);
}

pub fn config(ctx: &mut Ctx<'_, '_>) {
    match super::lower(ctx.arg(1)).as_str() {
        "get" if ctx.argc() >= 3 => {
            let patterns: Vec<Vec<u8>> = ctx.args.tail(2).map(|p| p.to_ascii_lowercase()).collect();
            let matched = ctx.shared.settings.get(&patterns);
            ctx.map(matched.len());
            for (name, value) in matched {
                ctx.bulk(name.as_bytes());
                ctx.bulk(value.as_bytes());
            }
        }
        "set" if ctx.argc() >= 4 && ctx.argc().is_multiple_of(2) => {
            let pairs: Vec<(&[u8], &[u8])> = (2..ctx.argc())
                .step_by(2)
                .map(|i| (ctx.args.get(i), ctx.args.get(i + 1)))
                .collect();
            match ctx.shared.settings.set(&pairs) {
                Ok(()) => ctx.ok(),
                Err(e) => ctx.err(e.to_string().as_bytes()),
            }
        }
        // As Redis: an odd number of arguments after SET is a syntax error.
        "set" if ctx.argc() >= 4 => ctx.err(SYNTAX),
        "rewrite" if ctx.argc() == 2 => match ctx.shared.settings.rewrite() {
            Ok(()) => {
                tracing::info!("CONFIG REWRITE executed with success");
                ctx.ok()
            }
            Err(e) => ctx.err(format!("ERR {e}").as_bytes()),
        },
        "resetstat" if ctx.argc() == 2 => {
            // Every counter INFO reports, as Redis's resetServerStats (memcached's `stats`
            // have their own `stats reset`).
            let s = &ctx.shared.stats;
            for counter in [
                &s.total_commands_processed,
                &s.total_connections_received,
                &s.rejected_connections,
                &s.net_input_bytes,
                &s.net_output_bytes,
                &s.client_output_limit_disconnections,
                &s.client_query_buffer_limit_disconnections,
                &s.total_reads_processed,
                &s.total_writes_processed,
            ] {
                counter.store(0, Relaxed);
            }
            ctx.shared.store.reset_stats();
            ctx.shared.metrics.reset();
            crate::stats::reset();
            ctx.ok()
        }
        "help" if ctx.argc() == 2 => {
            ctx.help(
                "CONFIG",
                &[
                    "GET <pattern>",
                    "    Return parameters matching the glob-like <pattern> and their values.",
                    "SET <directive> <value>",
                    "    Set the configuration <directive> to <value>.",
                    "RESETSTAT",
                    "    Reset statistics reported by the INFO command.",
                    "REWRITE",
                    "    Rewrite the configuration file.",
                ],
            );
        }
        "get" | "set" | "resetstat" | "rewrite" | "help" => ctx.wrong_subcommand_arity("config"),
        _ => ctx.unknown_subcommand("CONFIG"),
    }
}

pub fn client(ctx: &mut Ctx<'_, '_>) {
    let me = ctx.conn.client.clone();
    match super::lower(ctx.arg(1)).as_str() {
        "id" if ctx.argc() == 2 => ctx.int(me.id as i64),
        "getname" if ctx.argc() == 2 => {
            let name = me.name.lock().clone();
            ctx.bulk_opt(name.as_deref())
        }
        "setname" if ctx.argc() == 3 => {
            let name = ctx.args.get(2);
            if super::client_cmd::valid_name(ctx, name) {
                super::client_cmd::set_name(ctx, name);
                ctx.ok()
            }
        }
        "info" if ctx.argc() == 2 => super::client_info::info(ctx),
        "list" => super::client_info::list(ctx),
        "kill" if ctx.argc() >= 3 => super::client_cmd::kill(ctx),
        "unblock" if (3..=4).contains(&ctx.argc()) => super::client_cmd::unblock(ctx),
        "reply" if ctx.argc() == 3 => super::client_cmd::reply(ctx),
        "setinfo" if ctx.argc() == 4 => super::client_info::setinfo(ctx),
        "no-evict" | "no-touch" if ctx.argc() == 3 => super::client_info::mode(ctx),
        "tracking" if ctx.argc() >= 3 => super::tracking_cmd::tracking(ctx),
        "caching" if ctx.argc() == 3 => super::tracking_cmd::caching(ctx),
        "getredir" if ctx.argc() == 2 => super::tracking_cmd::getredir(ctx),
        "trackinginfo" if ctx.argc() == 2 => super::tracking_cmd::trackinginfo(ctx),
        "id" | "getname" | "setname" | "info" | "kill" | "unblock" | "reply" | "setinfo"
        | "tracking" | "caching" | "getredir" | "trackinginfo" | "no-evict" | "no-touch" => {
            ctx.wrong_subcommand_arity("client")
        }
        _ => ctx.unknown_subcommand("CLIENT"),
    }
}
