//! The settings table: every setting of the server declared once, with its name, help, default,
//! parser, renderer and, for those CONFIG SET may change, how it reaches the running server.
//!
//! The table drives the command-line flags (`--NAME`), the TOML file's keys (`NAME`, dashes or
//! underscores), `CONFIG GET` / `CONFIG SET` / `CONFIG REWRITE`, and the settings memcached's
//! `stats settings` shows. A new setting is one entry here (and a field of [`Config`]).

use super::cores;
use super::live::Settings;
use super::parse::*;
use super::{ClassLimit, Config};

/// One setting.
pub struct Setting {
    /// The name of the flag (`--name`), the file's key and CONFIG's parameter.
    pub name: &'static str,
    /// What `--help` shows for the value (`SIZE`, `N`, ...).
    pub value_name: &'static str,
    pub help: &'static str,
    pub default: DefaultValue,
    /// How the TOML file writes the value (CONFIG REWRITE).
    pub kind: Kind,
    /// Parses `text` into the setting's field of a [`Config`]: the one parser of defaults,
    /// flags, the file and CONFIG SET.
    pub parse: fn(&mut Config, &str) -> Result<(), String>,
    /// The value as CONFIG GET shows it and CONFIG REWRITE writes it; `parse` reads it back.
    pub render: fn(&Config) -> String,
    /// For a setting CONFIG SET may change: how the running server holds it. None: fixed at
    /// start.
    pub live: Option<Live>,
}

/// A setting's default.
#[derive(Clone, Copy)]
pub enum DefaultValue {
    /// This text, parsed as a flag would be.
    Text(&'static str),
    /// The number of available cores.
    Cores,
    /// The reactor's default event loops for the available cores (`config::cores::default_threads`).
    IoThreads,
    /// None of its own: the setting is a shorthand for a part of the named setting (applied
    /// after it when given), and CONFIG REWRITE writes that setting instead.
    PartOf(&'static str),
}

/// How a value is written in the TOML file.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    /// A bare TOML integer.
    Int,
    /// A TOML string.
    Text,
}

/// How the running server holds a mutable setting.
#[derive(Clone, Copy)]
pub struct Live {
    /// Copies the running value into the field of a [`Config`].
    pub read: fn(&Settings, &mut Config),
    /// Makes the field's value (already parsed and validated) the running one.
    pub write: fn(&Settings, &Config),
}

impl Setting {
    pub fn mutable(&self) -> bool {
        self.live.is_some()
    }

    /// The default's text, as [`Setting::parse`] takes it (None for a shorthand).
    pub fn default_text(&self) -> Option<String> {
        match self.default {
            DefaultValue::Text(t) => Some(t.to_string()),
            DefaultValue::Cores => Some(cores::available_cores().to_string()),
            DefaultValue::IoThreads => {
                Some(cores::default_threads(cores::available_cores()).to_string())
            }
            DefaultValue::PartOf(_) => None,
        }
    }

    /// The default as `--help` and the README describe it.
    pub fn default_doc(&self) -> String {
        match self.default {
            DefaultValue::Text("") => "none".to_string(),
            DefaultValue::Text(t) => t.to_string(),
            DefaultValue::Cores => "available cores".to_string(),
            DefaultValue::IoThreads => "one per two available cores, at least 1".to_string(),
            DefaultValue::PartOf(of) => format!("part of {of}"),
        }
    }
}

/// Other names settings answer to, as Redis keeps a setting's old name working: (alias,
/// setting). CONFIG GET lists an alias under its own name when asked for it (or matched by a
/// pattern), as Redis does; CONFIG SET, the command line and the file accept it.
pub const ALIASES: &[(&str, &str)] = &[
    ("lua-time-limit", "busy-reply-threshold"),
    ("hash-max-ziplist-entries", "hash-max-listpack-entries"),
    ("hash-max-ziplist-value", "hash-max-listpack-value"),
    ("zset-max-ziplist-entries", "zset-max-listpack-entries"),
    ("zset-max-ziplist-value", "zset-max-listpack-value"),
    ("list-max-ziplist-size", "list-max-listpack-size"),
];

/// The setting named `name` or one of its aliases (case-insensitive; in a file, underscores
/// stand for dashes).
pub fn lookup(name: &str) -> Option<&'static Setting> {
    let name = ALIASES
        .iter()
        .find(|(alias, _)| alias.eq_ignore_ascii_case(name))
        .map_or(name, |(_, setting)| setting);
    SETTINGS.iter().find(|s| s.name.eq_ignore_ascii_case(name))
}

use std::sync::atomic::Ordering::Relaxed;

const fn fixed(
    name: &'static str,
    value_name: &'static str,
    help: &'static str,
    default: DefaultValue,
    kind: Kind,
    parse: fn(&mut Config, &str) -> Result<(), String>,
    render: fn(&Config) -> String,
) -> Setting {
    Setting {
        name,
        value_name,
        help,
        default,
        kind,
        parse,
        render,
        live: None,
    }
}

const fn mutable(
    setting: Setting,
    read: fn(&Settings, &mut Config),
    write: fn(&Settings, &Config),
) -> Setting {
    Setting {
        live: Some(Live { read, write }),
        ..setting
    }
}

fn path_text(p: &Option<std::path::PathBuf>) -> String {
    p.as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_default()
}

/// `HOST PORT`, or empty / `no one` for none.
fn parse_replicaof(v: &str) -> Result<Option<(String, u16)>, String> {
    let parts: Vec<&str> = v.split_whitespace().collect();
    match parts.as_slice() {
        [] => Ok(None),
        [no, one] if no.eq_ignore_ascii_case("no") && one.eq_ignore_ascii_case("one") => Ok(None),
        [host, port] => Ok(Some((host.to_string(), parse_port(port)?))),
        _ => Err(format!("replicaof '{v}': expected HOST PORT")),
    }
}

fn parse_yes_no(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "yes" | "true" => Ok(true),
        "no" | "false" => Ok(false),
        _ => Err("argument must be 'yes' or 'no'".into()),
    }
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

fn no_op_read(_: &Settings, _: &mut Config) {}
fn no_op_write(_: &Settings, _: &Config) {}

fn read_output_limits(s: &Settings, c: &mut Config) {
    c.client_output_limits = *s.output_limits.read();
}
fn write_output_limits(s: &Settings, c: &Config) {
    *s.output_limits.write() = c.client_output_limits;
}

fn read_encoding_limits(s: &Settings, c: &mut Config) {
    c.encoding_limits = *s.encoding_limits.read();
}
fn write_encoding_limits(s: &Settings, c: &Config) {
    *s.encoding_limits.write() = c.encoding_limits;
}

/// One of Redis's small-collection thresholds (`config::EncodingLimits`): a live integer.
const fn encoding_limit(
    name: &'static str,
    help: &'static str,
    default: &'static str,
    parse: fn(&mut Config, &str) -> Result<(), String>,
    render: fn(&Config) -> String,
) -> Setting {
    mutable(
        fixed(
            name,
            "N",
            help,
            DefaultValue::Text(default),
            Kind::Int,
            parse,
            render,
        ),
        read_encoding_limits,
        write_encoding_limits,
    )
}

/// Every setting, in `--help` order. Shorthands come after the setting they are part of.
pub static SETTINGS: &[Setting] = &[
    fixed(
        "bind",
        "ADDR",
        "Address(es) to listen on (space or comma separated).",
        DefaultValue::Text("127.0.0.1"),
        Kind::Text,
        |c, v| {
            c.bind = v.to_string();
            Ok(())
        },
        |c| c.bind.clone(),
    ),
    fixed(
        "port",
        "PORT",
        "RESP (Redis protocol) TCP port; 0 disables it.",
        DefaultValue::Text("6380"),
        Kind::Int,
        |c, v| {
            c.port = parse_port(v)?;
            Ok(())
        },
        |c| c.port.to_string(),
    ),
    fixed(
        "unixsocket",
        "PATH",
        "RESP unix socket path.",
        DefaultValue::Text(""),
        Kind::Text,
        |c, v| {
            c.unixsocket = non_empty(v).map(Into::into);
            Ok(())
        },
        |c| path_text(&c.unixsocket),
    ),
    fixed(
        "unixsocketperm",
        "OCTAL",
        "Permissions of the unix socket files, in octal (e.g. 700 or 0770); 0 = as the umask gives.",
        DefaultValue::Text("0"),
        Kind::Text,
        |c, v| {
            c.unixsocketperm = parse_octal_perm(v)?;
            Ok(())
        },
        |c| c.unixsocketperm.map_or_else(|| "0".into(), |p| format!("{p:o}")),
    ),
    fixed(
        "memcache-port",
        "PORT",
        "memcached TCP port; 0 disables it (off when requirepass is set, unless given explicitly).",
        DefaultValue::Text("11212"),
        Kind::Int,
        |c, v| {
            c.memcache_port = parse_port(v)?;
            Ok(())
        },
        |c| c.memcache_port.to_string(),
    ),
    fixed(
        "memcache-unixsocket",
        "PATH",
        "memcached unix socket path.",
        DefaultValue::Text(""),
        Kind::Text,
        |c, v| {
            c.memcache_unixsocket = non_empty(v).map(Into::into);
            Ok(())
        },
        |c| path_text(&c.memcache_unixsocket),
    ),
    fixed(
        "threads",
        "N",
        "Event-loop threads for --io-model reactor.",
        DefaultValue::IoThreads,
        Kind::Int,
        |c, v| {
            c.threads = parse_positive(v)?;
            Ok(())
        },
        |c| c.threads.to_string(),
    ),
    fixed(
        "io-model",
        "MODEL",
        "Connection handling: reactor (--threads event loops running commands inline) or \
         dispatch (one network thread, commands on --workers threads).",
        DefaultValue::Text("reactor"),
        Kind::Text,
        |c, v| {
            c.io_model = parse_io_model(v)?;
            Ok(())
        },
        |c| c.io_model.name().to_string(),
    ),
    fixed(
        "workers",
        "N",
        "Command worker threads for --io-model dispatch.",
        DefaultValue::Cores,
        Kind::Int,
        |c, v| {
            c.workers = parse_positive(v)?;
            Ok(())
        },
        |c| c.workers.to_string(),
    ),
    mutable(
        fixed(
            "maxmemory",
            "SIZE",
            "Memory limit for data (e.g. 64mb, 2gb, 100k); 0 = unlimited.",
            DefaultValue::Text("0"),
            Kind::Int,
            |c, v| {
                c.maxmemory = parse_size(v)?;
                Ok(())
            },
            |c| c.maxmemory.to_string(),
        ),
        |s, c| c.maxmemory = s.store().maxmemory(),
        |s, c| s.store().set_maxmemory(c.maxmemory),
    ),
    mutable(
        fixed(
            "maxmemory-policy",
            "POLICY",
            "Policy at the memory limit, by Redis's names: noeviction, allkeys-lru, allkeys-lfu, \
             allkeys-random, volatile-lru, volatile-lfu, volatile-random, volatile-ttl (`evict` is \
             an alias of allkeys-lru). A cache evicts by default, as memcached does.",
            DefaultValue::Text("allkeys-lru"),
            Kind::Text,
            |c, v| {
                c.maxmemory_policy = parse_policy(v)?;
                Ok(())
            },
            |c| c.maxmemory_policy.name().to_string(),
        ),
        |s, c| c.maxmemory_policy = s.store().policy(),
        |s, c| s.store().set_policy(c.maxmemory_policy),
    ),
    fixed(
        "cas",
        "yes|no",
        "Records carry a CAS (memcached gets/cas, meta c/C). `no` saves 4 bytes a record and \
         answers as memcached -C does: CAS 0, cas and ms C fail with EXISTS; WATCH then compares \
         a per-shard change number, so a change to another key of the shard aborts it too.",
        DefaultValue::Text("yes"),
        Kind::Text,
        |c, v| {
            c.cas = parse_yes_no(v)?;
            Ok(())
        },
        |c| yes_no(c.cas).into(),
    ),
    mutable(
        fixed(
            "maxclients",
            "N",
            "Maximum number of connected clients (1 to 4294967295).",
            DefaultValue::Text("10000"),
            Kind::Int,
            |c, v| {
                c.maxclients = parse_maxclients(v)?;
                Ok(())
            },
            |c| c.maxclients.to_string(),
        ),
        |s, c| c.maxclients = s.maxclients.load(Relaxed),
        |s, c| s.maxclients.store(c.maxclients, Relaxed),
    ),
    mutable(
        fixed(
            "requirepass",
            "PASSWORD",
            "Password clients must send with AUTH (RESP only); empty = none.",
            DefaultValue::Text(""),
            Kind::Text,
            |c, v| {
                c.requirepass = non_empty(v);
                Ok(())
            },
            |c| c.requirepass.clone().unwrap_or_default(),
        ),
        |s, c| {
            c.requirepass = s
                .requirepass()
                .map(|p| String::from_utf8_lossy(&p).into_owned())
        },
        |s, c| s.set_requirepass(c.requirepass.as_deref().map(str::as_bytes)),
    ),
    fixed(
        "loglevel",
        "LEVEL",
        "Log level: debug, verbose, info, notice, warning, error, nothing (or trace).",
        DefaultValue::Text("info"),
        Kind::Text,
        |c, v| {
            c.loglevel = parse_loglevel(v)?;
            Ok(())
        },
        |c| c.loglevel.clone(),
    ),
    fixed(
        "log-format",
        "FORMAT",
        "Log lines as text (for people) or json (one object per line: time, level, fields).",
        DefaultValue::Text("text"),
        Kind::Text,
        |c, v| {
            c.log_format = match v.to_ascii_lowercase().as_str() {
                "text" => super::LogFormat::Text,
                "json" => super::LogFormat::Json,
                _ => return Err(format!("log-format '{v}': expected text or json")),
            };
            Ok(())
        },
        |c| c.log_format.name().into(),
    ),
    fixed(
        "logfile",
        "PATH",
        "Append logs to this file instead of stderr; SIGHUP reopens it (log rotation).",
        DefaultValue::Text(""),
        Kind::Text,
        |c, v| {
            c.logfile = non_empty(v).map(Into::into);
            Ok(())
        },
        |c| path_text(&c.logfile),
    ),
    fixed(
        "metrics-port",
        "PORT",
        "TCP port of the metrics endpoint (/metrics for Prometheus, /healthz, /readyz); 0 = off.",
        DefaultValue::Text("0"),
        Kind::Int,
        |c, v| {
            c.metrics_port = parse_port(v)?;
            Ok(())
        },
        |c| c.metrics_port.to_string(),
    ),
    fixed(
        "metrics-bind",
        "ADDR",
        "Address the metrics endpoint listens on.",
        DefaultValue::Text("127.0.0.1"),
        Kind::Text,
        |c, v| {
            c.metrics_bind = v.to_string();
            Ok(())
        },
        |c| c.metrics_bind.clone(),
    ),
    mutable(
        fixed(
            "max-value-size",
            "SIZE",
            "Largest value or request frame accepted (at least 1 byte).",
            DefaultValue::Text("64mb"),
            Kind::Int,
            |c, v| {
                c.max_value_size = parse_max_value_size(v)?;
                Ok(())
            },
            |c| c.max_value_size.to_string(),
        ),
        |s, c| c.max_value_size = s.max_value_size.load(Relaxed),
        |s, c| s.max_value_size.store(c.max_value_size, Relaxed),
    ),
    mutable(
        fixed(
            "client-query-buffer-limit",
            "SIZE",
            "Unprocessed input a client may buffer (one request's arguments; at least 1mb, as \
             Redis's). A request needing more closes the connection. The buffer still grows as \
             far as one --max-value-size argument needs.",
            DefaultValue::Text("1gb"),
            Kind::Int,
            |c, v| {
                c.client_query_buffer_limit = parse_query_buffer_limit(v)?;
                Ok(())
            },
            |c| c.client_query_buffer_limit.to_string(),
        ),
        |s, c| c.client_query_buffer_limit = s.client_query_buffer_limit.load(Relaxed),
        |s, c| s.client_query_buffer_limit.store(c.client_query_buffer_limit, Relaxed),
    ),
    mutable(
        fixed(
            "client-output-buffer-limit",
            "LIMITS",
            "Unsent-output limits per client class, as Redis's: `<class> <hard> <soft> \
             <soft-seconds>` groups, class normal, replica (slave) or pubsub.",
            DefaultValue::Text(""),
            Kind::Text,
            |c, v| c.client_output_limits.update(v),
            |c| c.client_output_limits.render(),
        ),
        read_output_limits,
        write_output_limits,
    ),
    mutable(
        fixed(
            "client-output-limit",
            "SIZE",
            "Hard limit of the normal class's unsent output (shorthand for \
             --client-output-buffer-limit \"normal SIZE 0 0\"); 0 = none.",
            DefaultValue::PartOf("client-output-buffer-limit"),
            Kind::Int,
            |c, v| {
                let hard = parse_size(v)?;
                c.client_output_limits.normal = ClassLimit {
                    hard,
                    soft: 0,
                    soft_secs: 0,
                };
                Ok(())
            },
            |c| c.client_output_limits.normal.hard.to_string(),
        ),
        read_output_limits,
        write_output_limits,
    ),
    mutable(
        fixed(
            "max-tags-per-record",
            "N",
            "Most typed tags one record may carry (1 to 255).",
            DefaultValue::Text("16"),
            Kind::Int,
            |c, v| {
                c.max_tags_per_record = parse_int_in(v, 1, 255)? as usize;
                Ok(())
            },
            |c| c.max_tags_per_record.to_string(),
        ),
        |s, c| c.max_tags_per_record = s.max_tags_per_record.load(Relaxed),
        |s, c| s.max_tags_per_record.store(c.max_tags_per_record, Relaxed),
    ),
    fixed(
        "tracking-table-max-keys",
        "N",
        "Keys the client-tracking table remembers; past it, the oldest are invalidated and dropped.",
        DefaultValue::Text("1000000"),
        Kind::Int,
        |c, v| {
            c.tracking_table_max_keys = parse_positive(v)?;
            Ok(())
        },
        |c| c.tracking_table_max_keys.to_string(),
    ),
    mutable(
        fixed(
            "changes-backlog-size",
            "SIZE",
            "Bytes of recent changes the change stream keeps for its cursor consumers (all \
             shards together), only while one is registered; a consumer further behind must \
             resync.",
            DefaultValue::Text("1mb"),
            Kind::Int,
            |c, v| {
                c.changes_backlog_size = parse_size(v)?;
                Ok(())
            },
            |c| c.changes_backlog_size.to_string(),
        ),
        |s, c| c.changes_backlog_size = s.store().change_backlog(),
        |s, c| s.store().set_change_backlog(c.changes_backlog_size),
    ),
    fixed(
        "sql-timeout",
        "DURATION",
        "Longest an SQL statement may run before it is interrupted (e.g. 1s, 500ms).",
        DefaultValue::Text("1s"),
        Kind::Text,
        |c, v| {
            c.sql_timeout = parse_duration(v)?;
            Ok(())
        },
        |c| render_duration(c.sql_timeout),
    ),
    fixed(
        "sql-max-result",
        "SIZE",
        "Largest SQL result; a bigger one is cut off with an error.",
        DefaultValue::Text("64mb"),
        Kind::Int,
        |c, v| {
            c.sql_max_result = parse_size_usize(v)?;
            Ok(())
        },
        |c| c.sql_max_result.to_string(),
    ),
    fixed(
        "sql-maxmemory",
        "SIZE",
        "Memory limit of the SQL tables (0 = unlimited); at the limit SQL writes fail with OOM. \
         SQLite's whole heap (caches, temporary b-trees) is capped at it plus half of it (at \
         least 32 MiB); a statement needing more fails.",
        DefaultValue::Text("0"),
        Kind::Int,
        |c, v| {
            c.sql_maxmemory = parse_size(v)?;
            Ok(())
        },
        |c| c.sql_maxmemory.to_string(),
    ),
    fixed(
        "sql-inline-steps",
        "N",
        "Step budget (SQLite VM steps) of a read-only SQL.QUERY run on the I/O thread itself; \
         past it the query goes to the SQL engine threads. 0 = always the engine threads.",
        DefaultValue::Text("1000"),
        Kind::Int,
        |c, v| {
            c.sql_inline_steps = parse_int_in(v, 0, 1_000_000)? as u32;
            Ok(())
        },
        |c| c.sql_inline_steps.to_string(),
    ),
    mutable(
        fixed(
            "slowlog-log-slower-than",
            "MICROS",
            "Commands running longer than this many microseconds go to the SLOWLOG; 0 logs \
             every command, -1 none.",
            DefaultValue::Text("10000"),
            Kind::Int,
            |c, v| {
                c.slowlog_log_slower_than = parse_int_in(v, -1, i64::MAX)?;
                Ok(())
            },
            |c| c.slowlog_log_slower_than.to_string(),
        ),
        |s, c| c.slowlog_log_slower_than = s.slowlog_log_slower_than.load(Relaxed),
        |s, c| s.slowlog_log_slower_than.store(c.slowlog_log_slower_than, Relaxed),
    ),
    mutable(
        fixed(
            "busy-reply-threshold",
            "MILLIS",
            "Milliseconds a Lua script may run before other clients get -BUSY and SCRIPT KILL \
             may stop it (Redis's name; formerly lua-time-limit).",
            DefaultValue::Text("5000"),
            Kind::Int,
            |c, v| {
                c.busy_reply_threshold = parse_int_in(v, 0, i64::MAX)? as u64;
                Ok(())
            },
            |c| c.busy_reply_threshold.to_string(),
        ),
        |s, c| c.busy_reply_threshold = s.busy_reply_threshold.load(Relaxed),
        |s, c| s.busy_reply_threshold.store(c.busy_reply_threshold, Relaxed),
    ),
    encoding_limit(
        "hash-max-listpack-entries",
        "Fields up to which Redis keeps a hash packed (OBJECT ENCODING `listpack`).",
        "512",
        |c, v| {
            c.encoding_limits.hash_entries = parse_int_in(v, 0, i64::MAX)?;
            Ok(())
        },
        |c| c.encoding_limits.hash_entries.to_string(),
    ),
    encoding_limit(
        "hash-max-listpack-value",
        "Longest field or value (bytes) of a packed hash in Redis (OBJECT ENCODING).",
        "64",
        |c, v| {
            c.encoding_limits.hash_value = parse_int_in(v, 0, i64::MAX)?;
            Ok(())
        },
        |c| c.encoding_limits.hash_value.to_string(),
    ),
    encoding_limit(
        "set-max-intset-entries",
        "Members up to which Redis keeps a set of integers as an `intset` (OBJECT ENCODING).",
        "512",
        |c, v| {
            c.encoding_limits.set_intset_entries = parse_int_in(v, 0, i64::MAX)?;
            Ok(())
        },
        |c| c.encoding_limits.set_intset_entries.to_string(),
    ),
    encoding_limit(
        "set-max-listpack-entries",
        "Members up to which Redis keeps a set packed (OBJECT ENCODING `listpack`).",
        "128",
        |c, v| {
            c.encoding_limits.set_entries = parse_int_in(v, 0, i64::MAX)?;
            Ok(())
        },
        |c| c.encoding_limits.set_entries.to_string(),
    ),
    encoding_limit(
        "set-max-listpack-value",
        "Longest member (bytes) of a packed set in Redis (OBJECT ENCODING).",
        "64",
        |c, v| {
            c.encoding_limits.set_value = parse_int_in(v, 0, i64::MAX)?;
            Ok(())
        },
        |c| c.encoding_limits.set_value.to_string(),
    ),
    encoding_limit(
        "zset-max-listpack-entries",
        "Members up to which Redis keeps a sorted set packed (OBJECT ENCODING `listpack`).",
        "128",
        |c, v| {
            c.encoding_limits.zset_entries = parse_int_in(v, 0, i64::MAX)?;
            Ok(())
        },
        |c| c.encoding_limits.zset_entries.to_string(),
    ),
    encoding_limit(
        "zset-max-listpack-value",
        "Longest member (bytes) of a packed sorted set in Redis (OBJECT ENCODING).",
        "64",
        |c, v| {
            c.encoding_limits.zset_value = parse_int_in(v, 0, i64::MAX)?;
            Ok(())
        },
        |c| c.encoding_limits.zset_value.to_string(),
    ),
    encoding_limit(
        "list-max-listpack-size",
        "Size of a packed list node in Redis: positive, entries; -1..-5, 4..64 KiB (OBJECT \
         ENCODING `listpack` while the list fits one node).",
        "-2",
        |c, v| {
            c.encoding_limits.list_size = parse_int_in(v, -5, i64::from(i16::MAX))?;
            Ok(())
        },
        |c| c.encoding_limits.list_size.to_string(),
    ),
    mutable(
        fixed(
            "slowlog-max-len",
            "N",
            "Entries the SLOWLOG keeps; the oldest go first.",
            DefaultValue::Text("128"),
            Kind::Int,
            |c, v| {
                c.slowlog_max_len = parse_int_in(v, 0, i64::MAX)? as u64;
                Ok(())
            },
            |c| c.slowlog_max_len.to_string(),
        ),
        |s, c| c.slowlog_max_len = s.slowlog_max_len.load(Relaxed),
        |s, c| s.slowlog_max_len.store(c.slowlog_max_len, Relaxed),
    ),
    mutable(
        fixed(
            "latency-monitor-threshold",
            "MILLIS",
            "Events lasting at least this many milliseconds are recorded for LATENCY; 0 = off.",
            DefaultValue::Text("0"),
            Kind::Int,
            |c, v| {
                c.latency_monitor_threshold = parse_int_in(v, 0, i64::MAX)? as u64;
                Ok(())
            },
            |c| c.latency_monitor_threshold.to_string(),
        ),
        |s, c| c.latency_monitor_threshold = s.latency_monitor_threshold.load(Relaxed),
        |s, c| s.latency_monitor_threshold.store(c.latency_monitor_threshold, Relaxed),
    ),
    fixed(
        "databases",
        "N",
        "Number of databases, for Redis clients that ask: cairn has one (db 0).",
        DefaultValue::Text("1"),
        Kind::Int,
        |_, v| only(v, &["1"], "cairn has one database (db 0)"),
        |_| "1".to_string(),
    ),
    mutable(
        fixed(
            "dir",
            "PATH",
            "Directory of the snapshot file (and its temporary files while saving) and of the \
             write-behind logs (DIR/wb/). Given explicitly, it turns save-on-shutdown on by \
             default.",
            DefaultValue::Text("."),
            Kind::Text,
            |c, v| {
                if v.is_empty() {
                    return Err("dir must not be empty".into());
                }
                c.persist.dir = v.into();
                Ok(())
            },
            |c| c.persist.dir.display().to_string(),
        ),
        |s, c| c.persist.dir = s.persist.read().dir.clone(),
        |s, c| s.persist.write().dir = c.persist.dir.clone(),
    ),
    mutable(
        fixed(
            "dbfilename",
            "NAME",
            "File name of the snapshot inside dir.",
            DefaultValue::Text("dump.cairn"),
            Kind::Text,
            |c, v| {
                if v.is_empty() || v.contains('/') || v == "." || v == ".." {
                    return Err("dbfilename can't be a path, just a filename".into());
                }
                c.persist.dbfilename = v.into();
                Ok(())
            },
            |c| c.persist.dbfilename.clone(),
        ),
        |s, c| c.persist.dbfilename = s.persist.read().dbfilename.clone(),
        |s, c| s.persist.write().dbfilename = c.persist.dbfilename.clone(),
    ),
    mutable(
        fixed(
            "save",
            "RULES",
            "Automatic snapshots, as Redis's: \"SECONDS CHANGES [SECONDS CHANGES ...]\" saves in \
             the background when at least CHANGES changes were made and SECONDS passed since \
             the last save; \"\" = never.",
            DefaultValue::Text(""),
            Kind::Text,
            |c, v| {
                c.persist.save = parse_rules(v)?;
                Ok(())
            },
            |c| render_rules(&c.persist.save),
        ),
        |s, c| c.persist.save = s.persist.read().save.clone(),
        |s, c| s.persist.write().save = c.persist.save.clone(),
    ),
    mutable(
        fixed(
            "save-on-shutdown",
            "yes|no|auto",
            "Save a snapshot when stopped by SIGTERM, SIGINT or SHUTDOWN; auto = yes when dir \
             was given or save rules are set.",
            DefaultValue::Text("auto"),
            Kind::Text,
            |c, v| {
                c.persist.save_on_shutdown = match v.to_ascii_lowercase().as_str() {
                    "auto" => None,
                    other => Some(parse_yes_no(other)?),
                };
                Ok(())
            },
            |c| match c.persist.save_on_shutdown {
                None => "auto".into(),
                Some(b) => yes_no(b).into(),
            },
        ),
        |s, c| c.persist.save_on_shutdown = s.persist.read().save_on_shutdown,
        |s, c| s.persist.write().save_on_shutdown = c.persist.save_on_shutdown,
    ),
    mutable(
        fixed(
            "stop-writes-on-bgsave-error",
            "yes|no",
            "After a failed background save (with save rules set), refuse writes with -MISCONF \
             until a save succeeds, as Redis does.",
            DefaultValue::Text("yes"),
            Kind::Text,
            |c, v| {
                c.persist.stop_writes_on_bgsave_error = parse_yes_no(v)?;
                Ok(())
            },
            |c| yes_no(c.persist.stop_writes_on_bgsave_error).into(),
        ),
        |s, c| {
            c.persist.stop_writes_on_bgsave_error = s.persist.read().stop_writes_on_bgsave_error
        },
        |s, c| {
            s.persist.write().stop_writes_on_bgsave_error = c.persist.stop_writes_on_bgsave_error
        },
    ),
    fixed(
        "load-damaged",
        "refuse|skip",
        "A snapshot with damaged blocks at start-up: refuse it (the server does not start, the \
         message names the block) or skip the damaged blocks (logged) and load the rest.",
        DefaultValue::Text("refuse"),
        Kind::Text,
        |c, v| {
            c.persist.load_damaged_skip = match v.to_ascii_lowercase().as_str() {
                "refuse" => false,
                "skip" => true,
                _ => return Err("load-damaged is refuse or skip".into()),
            };
            Ok(())
        },
        |c| if c.persist.load_damaged_skip { "skip" } else { "refuse" }.into(),
    ),
    mutable(
        fixed(
            "rdb-key-save-delay",
            "MICROS",
            "Test aid (Redis's name): pause this many microseconds per record saved.",
            DefaultValue::Text("0"),
            Kind::Int,
            |c, v| {
                c.persist.rdb_key_save_delay = parse_int_in(v, 0, 1_000_000)? as u64;
                Ok(())
            },
            |c| c.persist.rdb_key_save_delay.to_string(),
        ),
        |s, c| c.persist.rdb_key_save_delay = s.persist.read().rdb_key_save_delay,
        |s, c| s.persist.write().rdb_key_save_delay = c.persist.rdb_key_save_delay,
    ),
    mutable(
        fixed(
            "key-load-delay",
            "MICROS",
            "Test aid (Redis's name): pause this many microseconds per record loaded.",
            DefaultValue::Text("0"),
            Kind::Int,
            |c, v| {
                c.persist.key_load_delay = parse_int_in(v, 0, 1_000_000)? as u64;
                Ok(())
            },
            |c| c.persist.key_load_delay.to_string(),
        ),
        |s, c| c.persist.key_load_delay = s.persist.read().key_load_delay,
        |s, c| s.persist.write().key_load_delay = c.persist.key_load_delay,
    ),
    mutable(
        fixed(
            "appendonly",
            "no",
            "Append-only file, for Redis clients that set it: cairn keeps no files, so only no \
             is accepted.",
            DefaultValue::Text("no"),
            Kind::Text,
            |_, v| only(v, &["no", "false"], "cairn keeps no append-only file (only no is accepted)"),
            |_| "no".to_string(),
        ),
        no_op_read,
        no_op_write,
    ),
    mutable(
        fixed(
            "wb-fsync",
            "POLICY",
            "When the write-behind log is fsynced: always (the reply waits for a group fsync) or \
             everysec (once a second; a machine crash may lose the last second, a crash of cairn \
             loses nothing).",
            DefaultValue::Text("everysec"),
            Kind::Text,
            |c, v| {
                c.wb_fsync = match v.to_ascii_lowercase().as_str() {
                    "always" => writeback::Fsync::Always,
                    "everysec" => writeback::Fsync::Everysec,
                    _ => return Err(format!("wb-fsync '{v}': expected always or everysec")),
                };
                Ok(())
            },
            |c| match c.wb_fsync {
                writeback::Fsync::Always => "always".into(),
                writeback::Fsync::Everysec => "everysec".into(),
            },
        ),
        |s, c| c.wb_fsync = s.writeback.settings().fsync,
        |s, c| s.writeback.set_fsync(c.wb_fsync),
    ),
    mutable(
        fixed(
            "wb-max-bytes",
            "SIZE",
            "Bytes one write-behind mapping's log may hold (at least 64kb); past it, writes to \
             its keys meet --wb-on-full.",
            DefaultValue::Text("1gb"),
            Kind::Int,
            |c, v| {
                let n = parse_size(v)?;
                if n < 64 << 10 {
                    return Err(format!("wb-max-bytes '{v}': at least 64kb"));
                }
                c.wb_max_bytes = n;
                Ok(())
            },
            |c| c.wb_max_bytes.to_string(),
        ),
        |s, c| c.wb_max_bytes = s.writeback.settings().max_bytes,
        |s, c| s.writeback.set_max_bytes(c.wb_max_bytes),
    ),
    mutable(
        fixed(
            "wb-on-full",
            "POLICY",
            "A write to a mapped key when its write-behind log is full: error (-BUSY \
             write-behind queue full) or block (waits for room, stalling its I/O thread).",
            DefaultValue::Text("error"),
            Kind::Text,
            |c, v| {
                c.wb_on_full = match v.to_ascii_lowercase().as_str() {
                    "error" => writeback::OnFull::Error,
                    "block" => writeback::OnFull::Block,
                    _ => return Err(format!("wb-on-full '{v}': expected error or block")),
                };
                Ok(())
            },
            |c| match c.wb_on_full {
                writeback::OnFull::Error => "error".into(),
                writeback::OnFull::Block => "block".into(),
            },
        ),
        |s, c| c.wb_on_full = s.writeback.settings().on_full,
        |s, c| s.writeback.set_on_full(c.wb_on_full),
    ),
    // Replication (docs/replication.md). `replicaof` is where the server starts; REPLICAOF
    // changes the role while it runs.
    fixed(
        "replicaof",
        "HOST PORT",
        "Start as a replica of the primary at HOST PORT (empty: start as a primary).",
        DefaultValue::Text(""),
        Kind::Text,
        |c, v| {
            c.repl.replicaof = parse_replicaof(v)?;
            Ok(())
        },
        |c| {
            c.repl
                .replicaof
                .as_ref()
                .map(|(h, p)| format!("{h} {p}"))
                .unwrap_or_default()
        },
    ),
    mutable(
        fixed(
            "masterauth",
            "PASSWORD",
            "Password a replica sends with AUTH to its primary; empty = none.",
            DefaultValue::Text(""),
            Kind::Text,
            |c, v| {
                c.repl.masterauth = non_empty(v);
                Ok(())
            },
            |c| c.repl.masterauth.clone().unwrap_or_default(),
        ),
        |s, c| c.repl.masterauth = s.repl.read().masterauth.clone(),
        |s, c| s.repl.write().masterauth = c.repl.masterauth.clone(),
    ),
    mutable(
        fixed(
            "masteruser",
            "USER",
            "User name a replica sends with AUTH to its primary (with masterauth); empty = none.",
            DefaultValue::Text(""),
            Kind::Text,
            |c, v| {
                c.repl.masteruser = non_empty(v);
                Ok(())
            },
            |c| c.repl.masteruser.clone().unwrap_or_default(),
        ),
        |s, c| c.repl.masteruser = s.repl.read().masteruser.clone(),
        |s, c| s.repl.write().masteruser = c.repl.masteruser.clone(),
    ),
    mutable(
        fixed(
            "replica-announce-ip",
            "IP",
            "The address a replica announces to its primary (REPLCONF ip-address), shown in the \
             primary's INFO and to Sentinel; empty = the connection's source address.",
            DefaultValue::Text(""),
            Kind::Text,
            |c, v| {
                c.repl.replica_announce_ip = non_empty(v);
                Ok(())
            },
            |c| c.repl.replica_announce_ip.clone().unwrap_or_default(),
        ),
        |s, c| c.repl.replica_announce_ip = s.repl.read().replica_announce_ip.clone(),
        |s, c| s.repl.write().replica_announce_ip = c.repl.replica_announce_ip.clone(),
    ),
    mutable(
        fixed(
            "replica-announce-port",
            "PORT",
            "The port a replica announces to its primary (REPLCONF listening-port); 0 = its own.",
            DefaultValue::Text("0"),
            Kind::Int,
            |c, v| {
                c.repl.replica_announce_port = parse_int_in(v, 0, 65535)? as u16;
                Ok(())
            },
            |c| c.repl.replica_announce_port.to_string(),
        ),
        |s, c| c.repl.replica_announce_port = s.repl.read().replica_announce_port,
        |s, c| s.repl.write().replica_announce_port = c.repl.replica_announce_port,
    ),
    mutable(
        fixed(
            "replica-read-only",
            "yes|no",
            "A replica refuses clients' writes with -READONLY.",
            DefaultValue::Text("yes"),
            Kind::Text,
            |c, v| {
                c.repl.replica_read_only = parse_yes_no(v)?;
                Ok(())
            },
            |c| yes_no(c.repl.replica_read_only).into(),
        ),
        |s, c| c.repl.replica_read_only = s.repl.read().replica_read_only,
        |s, c| s.repl.write().replica_read_only = c.repl.replica_read_only,
    ),
    mutable(
        fixed(
            "replica-serve-stale-data",
            "yes|no",
            "A replica whose link to its primary is down (or still syncing) serves reads; no: \
             -MASTERDOWN.",
            DefaultValue::Text("yes"),
            Kind::Text,
            |c, v| {
                c.repl.replica_serve_stale_data = parse_yes_no(v)?;
                Ok(())
            },
            |c| yes_no(c.repl.replica_serve_stale_data).into(),
        ),
        |s, c| c.repl.replica_serve_stale_data = s.repl.read().replica_serve_stale_data,
        |s, c| s.repl.write().replica_serve_stale_data = c.repl.replica_serve_stale_data,
    ),
    mutable(
        fixed(
            "min-replicas-to-write",
            "N",
            "A primary refuses writes with -NOREPLICAS unless this many replicas acknowledged \
             within min-replicas-max-lag seconds (0: off).",
            DefaultValue::Text("0"),
            Kind::Int,
            |c, v| {
                c.repl.min_replicas_to_write = parse_int_in(v, 0, i64::MAX)? as u64;
                Ok(())
            },
            |c| c.repl.min_replicas_to_write.to_string(),
        ),
        |s, c| c.repl.min_replicas_to_write = s.min_replicas_to_write.load(Relaxed),
        |s, c| {
            s.min_replicas_to_write
                .store(c.repl.min_replicas_to_write, Relaxed)
        },
    ),
    mutable(
        fixed(
            "min-replicas-max-lag",
            "SECONDS",
            "Seconds since a replica's last acknowledgement for it to count toward \
             min-replicas-to-write.",
            DefaultValue::Text("10"),
            Kind::Int,
            |c, v| {
                c.repl.min_replicas_max_lag = parse_int_in(v, 0, i64::MAX)? as u64;
                Ok(())
            },
            |c| c.repl.min_replicas_max_lag.to_string(),
        ),
        |s, c| c.repl.min_replicas_max_lag = s.repl.read().min_replicas_max_lag,
        |s, c| s.repl.write().min_replicas_max_lag = c.repl.min_replicas_max_lag,
    ),
    mutable(
        fixed(
            "repl-backlog-size",
            "SIZE",
            "Bytes of the replication stream kept for partial resyncs (+CONTINUE) of replicas \
             that reconnect.",
            DefaultValue::Text("1mb"),
            Kind::Int,
            |c, v| {
                c.repl.repl_backlog_size = parse_size(v)?.max(16 * 1024);
                Ok(())
            },
            |c| c.repl.repl_backlog_size.to_string(),
        ),
        |s, c| c.repl.repl_backlog_size = s.repl.read().repl_backlog_size,
        |s, c| s.repl.write().repl_backlog_size = c.repl.repl_backlog_size,
    ),
    mutable(
        fixed(
            "repl-send-delay-us",
            "MICROSECONDS",
            "Microseconds a primary may hold the stream for replicas it sent to less than that \
             ago, while its event loop has more input ready, to send it in fewer, larger writes \
             (0: at the end of every event-loop turn).",
            DefaultValue::Text("200"),
            Kind::Int,
            |c, v| {
                c.repl.repl_send_delay_us = parse_int_in(v, 0, 1_000_000)? as u64;
                Ok(())
            },
            |c| c.repl.repl_send_delay_us.to_string(),
        ),
        |s, c| c.repl.repl_send_delay_us = s.repl.read().repl_send_delay_us,
        |s, c| s.repl.write().repl_send_delay_us = c.repl.repl_send_delay_us,
    ),
    mutable(
        fixed(
            "repl-ping-replica-period",
            "SECONDS",
            "Seconds between the PINGs a primary sends its replicas when it has nothing else \
             to send.",
            DefaultValue::Text("10"),
            Kind::Int,
            |c, v| {
                c.repl.repl_ping_replica_period = parse_int_in(v, 1, i64::MAX)? as u64;
                Ok(())
            },
            |c| c.repl.repl_ping_replica_period.to_string(),
        ),
        |s, c| c.repl.repl_ping_replica_period = s.repl.read().repl_ping_replica_period,
        |s, c| s.repl.write().repl_ping_replica_period = c.repl.repl_ping_replica_period,
    ),
    mutable(
        fixed(
            "repl-timeout",
            "SECONDS",
            "Seconds without data from the other end before a replication link is dropped \
             (and retried).",
            DefaultValue::Text("60"),
            Kind::Int,
            |c, v| {
                c.repl.repl_timeout = parse_int_in(v, 1, i64::MAX)? as u64;
                Ok(())
            },
            |c| c.repl.repl_timeout.to_string(),
        ),
        |s, c| c.repl.repl_timeout = s.repl.read().repl_timeout,
        |s, c| s.repl.write().repl_timeout = c.repl.repl_timeout,
    ),
    mutable(
        fixed(
            "replica-priority",
            "N",
            "A replica's priority for Redis Sentinel (INFO slave_priority): the lowest non-zero \
             one is promoted first; 0: never promoted.",
            DefaultValue::Text("100"),
            Kind::Int,
            |c, v| {
                c.repl.replica_priority = parse_int_in(v, 0, i64::MAX)? as u64;
                Ok(())
            },
            |c| c.repl.replica_priority.to_string(),
        ),
        |s, c| c.repl.replica_priority = s.repl.read().replica_priority,
        |s, c| s.repl.write().replica_priority = c.repl.replica_priority,
    ),
];
