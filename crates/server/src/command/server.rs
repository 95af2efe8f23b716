//! Connection and server commands: PING, ECHO, HELLO, AUTH, QUIT, SELECT, CONFIG, CLIENT,
//! COMMAND, TIME (INFO and ROLE are in `info`).

use std::sync::atomic::Ordering::Relaxed;

use resp::reply::Version;
use store::glob;

use super::{flags, parse_i64, Ctx, COMMANDS, NOT_INTEGER, SYNTAX};
use crate::config::parse_size;

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

/// CONFIG GET values, by parameter name.
fn config_values(ctx: &Ctx<'_, '_>) -> Vec<(&'static str, String)> {
    let cfg = &ctx.shared.config;
    let s = &ctx.shared.settings;
    let path = |p: &Option<std::path::PathBuf>| {
        p.as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    };
    vec![
        ("bind", cfg.bind.clone()),
        ("port", cfg.port.to_string()),
        ("unixsocket", path(&cfg.unixsocket)),
        (
            "unixsocketperm",
            cfg.unixsocketperm
                .map(|p| format!("{p:o}"))
                .unwrap_or_else(|| "0".into()),
        ),
        ("memcache-port", cfg.memcache_port.to_string()),
        ("memcache-unixsocket", path(&cfg.memcache_unixsocket)),
        ("threads", cfg.threads.to_string()),
        ("io-model", cfg.io_model.name().to_string()),
        ("workers", cfg.workers.to_string()),
        ("maxmemory", ctx.shared.store.maxmemory().to_string()),
        (
            "maxmemory-policy",
            if ctx.shared.store.evicts() {
                "evict"
            } else {
                "noeviction"
            }
            .to_string(),
        ),
        ("maxclients", s.maxclients.load(Relaxed).to_string()),
        (
            "requirepass",
            s.requirepass()
                .map(|p| String::from_utf8_lossy(&p).into_owned())
                .unwrap_or_default(),
        ),
        ("loglevel", cfg.loglevel.clone()),
        ("max-value-size", s.max_value_size.load(Relaxed).to_string()),
        (
            "client-query-buffer-limit",
            s.client_query_buffer_limit.load(Relaxed).to_string(),
        ),
        (
            "client-output-limit",
            s.output_limits.read().normal.hard.to_string(),
        ),
        (
            "client-output-buffer-limit",
            s.output_limits.read().render(),
        ),
        (
            "slowlog-log-slower-than",
            s.slowlog_log_slower_than.load(Relaxed).to_string(),
        ),
        (
            "slowlog-max-len",
            s.slowlog_max_len.load(Relaxed).to_string(),
        ),
        (
            "latency-monitor-threshold",
            s.latency_monitor_threshold.load(Relaxed).to_string(),
        ),
        ("databases", "1".into()),
        ("save", String::new()),
        ("appendonly", "no".into()),
    ]
}

fn config_set(ctx: &mut Ctx<'_, '_>, name: &str, value: &[u8]) -> Result<(), String> {
    let text = std::str::from_utf8(value).map_err(|_| "value is not valid UTF-8".to_string())?;
    let shared = ctx.shared;
    match name {
        "maxmemory" => shared.store.set_maxmemory(parse_size(text)?),
        "maxmemory-policy" => match text.to_ascii_lowercase().as_str() {
            "evict" | "allkeys-lru" | "allkeys-lfu" | "allkeys-random" => {
                shared.store.set_evict(true)
            }
            "noeviction" => shared.store.set_evict(false),
            _ => return Err(format!("invalid policy '{text}'")),
        },
        "maxclients" => shared
            .settings
            .maxclients
            .store(crate::config::parse_maxclients(text)?, Relaxed),
        "requirepass" => shared.settings.set_requirepass(Some(value)),
        "client-output-limit" => {
            let hard = parse_size(text)?;
            shared
                .settings
                .output_limits
                .write()
                .update(&format!("normal {hard} 0 0"))?
        }
        "client-output-buffer-limit" => shared.settings.output_limits.write().update(text)?,
        "max-value-size" => shared
            .settings
            .max_value_size
            .store(crate::config::parse_max_value_size(text)?, Relaxed),
        "client-query-buffer-limit" => shared
            .settings
            .client_query_buffer_limit
            .store(crate::config::parse_query_buffer_limit(text)?, Relaxed),
        "slowlog-log-slower-than" => shared
            .settings
            .slowlog_log_slower_than
            .store(crate::config::parse_slowlog_log_slower_than(text)?, Relaxed),
        "slowlog-max-len" => shared
            .settings
            .slowlog_max_len
            .store(crate::config::parse_non_negative(text)?, Relaxed),
        "latency-monitor-threshold" => shared
            .settings
            .latency_monitor_threshold
            .store(crate::config::parse_non_negative(text)?, Relaxed),
        _ => {
            return Err(format!(
                "Unknown option or number of arguments for CONFIG SET - '{name}'"
            ))
        }
    }
    Ok(())
}

pub fn config(ctx: &mut Ctx<'_, '_>) {
    match super::lower(ctx.arg(1)).as_str() {
        "get" if ctx.argc() >= 3 => {
            let values = config_values(ctx);
            let patterns: Vec<Vec<u8>> = ctx.args.tail(2).map(|p| p.to_ascii_lowercase()).collect();
            let matched: Vec<_> = values
                .iter()
                .filter(|(n, _)| patterns.iter().any(|p| glob::matches(p, n.as_bytes())))
                .collect();
            ctx.map(matched.len());
            for (name, value) in matched {
                ctx.bulk(name.as_bytes());
                ctx.bulk(value.as_bytes());
            }
        }
        "set" if ctx.argc() >= 4 && ctx.argc().is_multiple_of(2) => {
            for i in (2..ctx.argc()).step_by(2) {
                let name = super::lower(ctx.args.get(i));
                if let Err(why) = config_set(ctx, &name, ctx.args.get(i + 1)) {
                    let msg = if why.starts_with("Unknown option") {
                        format!("ERR {why}")
                    } else {
                        format!(
                            "ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"
                        )
                    };
                    return ctx.err(msg.as_bytes());
                }
            }
            ctx.ok()
        }
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
            super::stats::reset();
            ctx.ok()
        }
        "get" | "set" | "resetstat" => wrong_args_sub(ctx, "config"),
        _ => unknown_subcommand(ctx, "CONFIG"),
    }
}

fn wrong_args_sub(ctx: &mut Ctx<'_, '_>, command: &str) {
    let sub = super::lower(ctx.arg(1));
    ctx.err(format!("ERR wrong number of arguments for '{command}|{sub}' command").as_bytes())
}

fn unknown_subcommand(ctx: &mut Ctx<'_, '_>, command: &str) {
    let sub = String::from_utf8_lossy(ctx.arg(1)).into_owned();
    ctx.err(format!("ERR unknown subcommand '{sub}'. Try {command} HELP.").as_bytes())
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
        "reply" if ctx.argc() == 3 => super::client_cmd::reply(ctx),
        "setinfo" if ctx.argc() == 4 => super::client_info::setinfo(ctx),
        "no-evict" | "no-touch" if ctx.argc() == 3 => super::client_info::mode(ctx),
        "tracking" if ctx.argc() >= 3 => super::tracking_cmd::tracking(ctx),
        "caching" if ctx.argc() == 3 => super::tracking_cmd::caching(ctx),
        "getredir" if ctx.argc() == 2 => super::tracking_cmd::getredir(ctx),
        "trackinginfo" if ctx.argc() == 2 => super::tracking_cmd::trackinginfo(ctx),
        "id" | "getname" | "setname" | "info" | "kill" | "reply" | "setinfo" | "tracking"
        | "caching" | "getredir" | "trackinginfo" | "no-evict" | "no-touch" => {
            wrong_args_sub(ctx, "client")
        }
        _ => unknown_subcommand(ctx, "CLIENT"),
    }
}

fn command_info(ctx: &mut Ctx<'_, '_>, c: &super::Command) {
    let names: &[(u16, &[u8])] = &[
        (flags::WRITE, b"write"),
        (flags::READONLY, b"readonly"),
        (flags::FAST, b"fast"),
        (flags::ADMIN, b"admin"),
        (flags::NOAUTH, b"no_auth"),
        (flags::NOMULTI, b"no_multi"),
    ];
    ctx.array(10);
    ctx.bulk(c.name.as_bytes());
    ctx.int(c.arity as i64);
    let set: Vec<&[u8]> = names
        .iter()
        .filter(|(f, _)| c.has(*f))
        .map(|(_, n)| *n)
        .collect();
    ctx.set(set.len());
    for n in set {
        ctx.simple(n);
    }
    ctx.int(c.first_key as i64);
    ctx.int(c.last_key as i64);
    ctx.int(c.step as i64);
    ctx.set(0);
    ctx.array(0);
    ctx.array(0);
    ctx.array(0);
}

pub fn command(ctx: &mut Ctx<'_, '_>) {
    let sub = if ctx.argc() > 1 {
        super::lower(ctx.arg(1))
    } else {
        String::new()
    };
    match sub.as_str() {
        "" => {
            ctx.array(COMMANDS.len());
            for c in COMMANDS {
                command_info(ctx, c);
            }
        }
        "count" => ctx.int(COMMANDS.len() as i64),
        "list" => {
            ctx.array(COMMANDS.len());
            for c in COMMANDS {
                ctx.bulk(c.name.as_bytes());
            }
        }
        "info" => {
            let all = ctx.argc() == 2;
            let wanted: Vec<Option<&'static super::Command>> = if all {
                COMMANDS.iter().map(Some).collect()
            } else {
                ctx.args.tail(2).map(super::lookup).collect()
            };
            ctx.array(wanted.len());
            for c in wanted {
                match c {
                    Some(c) => command_info(ctx, c),
                    None => ctx.nil_array(),
                }
            }
        }
        "docs" => {
            let wanted: Vec<&'static super::Command> = if ctx.argc() == 2 {
                COMMANDS.iter().collect()
            } else {
                ctx.args.tail(2).filter_map(super::lookup).collect()
            };
            ctx.map(wanted.len());
            for c in wanted {
                ctx.bulk(c.name.as_bytes());
                ctx.map(3);
                ctx.bulk(b"summary");
                ctx.bulk(c.summary.as_bytes());
                ctx.bulk(b"since");
                ctx.bulk(b"1.0.0");
                ctx.bulk(b"group");
                ctx.bulk(b"generic");
            }
        }
        _ => unknown_subcommand(ctx, "COMMAND"),
    }
}
