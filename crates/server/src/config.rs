//! Server configuration: command-line flags (clap) and an optional TOML file (`--config FILE`).
//!
//! The file's keys are the long flag names, with dashes or underscores (`max-value-size` or
//! `max_value_size`); values are strings or integers (`maxmemory = "2gb"`, `port = 6390`).
//! The file is turned into `--key=value` arguments placed before the real command line, so the
//! file and the flags share one parser and one set of validation rules, and flags win.

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;

use clap::{CommandFactory, Parser, ValueEnum};

/// How connections are served.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum IoModel {
    /// `--threads` event loops, each owning its connections and running commands inline.
    Reactor,
    /// One network thread for all socket I/O; commands run on a pool of `--workers` threads.
    Dispatch,
}

impl IoModel {
    pub fn name(self) -> &'static str {
        match self {
            IoModel::Reactor => "reactor",
            IoModel::Dispatch => "dispatch",
        }
    }
}

/// What to do when `maxmemory` is reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MaxmemoryPolicy {
    /// Evict keys (approximate LRU) to make room.
    Evict,
    /// Refuse writes that need more memory.
    NoEviction,
}

impl MaxmemoryPolicy {
    pub fn name(self) -> &'static str {
        match self {
            MaxmemoryPolicy::Evict => "evict",
            MaxmemoryPolicy::NoEviction => "noeviction",
        }
    }
}

/// The effective configuration, after merging the file, the flags and the defaults.
#[derive(Clone, Debug)]
pub struct Config {
    /// The `--config` file, if any.
    pub config_file: Option<PathBuf>,
    pub bind: String,
    /// RESP TCP port; 0 = no RESP TCP listener.
    pub port: u16,
    pub unixsocket: Option<PathBuf>,
    pub unixsocketperm: Option<u32>,
    /// memcached TCP port; 0 = off. See [`Config::memcache_tcp_enabled`].
    pub memcache_port: u16,
    /// Whether `memcache-port` was given on the command line or in the file.
    pub memcache_port_explicit: bool,
    pub memcache_unixsocket: Option<PathBuf>,
    pub threads: usize,
    pub io_model: IoModel,
    pub workers: usize,
    /// Bytes; 0 = unlimited.
    pub maxmemory: u64,
    pub maxmemory_policy: MaxmemoryPolicy,
    pub maxclients: usize,
    pub requirepass: Option<String>,
    /// Normalised: one of trace, debug, verbose, info, notice, warning, error, nothing.
    pub loglevel: String,
    pub max_value_size: usize,
    /// Largest input buffer of one client (see [`effective_query_buffer_limit`]).
    pub client_query_buffer_limit: usize,
    /// Unsent-output limits per client class (Redis `client-output-buffer-limit`).
    pub client_output_limits: OutputLimits,
    pub max_tags_per_record: usize,
    pub tracking_table_max_keys: usize,
    pub sql_timeout: std::time::Duration,
    pub sql_max_result: usize,
    pub sql_maxmemory: u64,
    /// SLOWLOG threshold in microseconds (0: every command, negative: none).
    pub slowlog_log_slower_than: i64,
    pub slowlog_max_len: u64,
    /// LATENCY threshold in milliseconds (0: off).
    pub latency_monitor_threshold: u64,
}

const DEFAULT_PORT: u16 = 6380;
const DEFAULT_MEMCACHE_PORT: u16 = 11212;

#[derive(Parser, Debug)]
#[command(
    name = "cairn-server",
    version,
    about = "cairn: a multi-threaded in-memory cache server speaking RESP (Redis) and memcached",
    args_override_self = true
)]
struct Args {
    /// TOML configuration file (keys are the long flag names); flags override it.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,

    /// Address(es) to listen on (space or comma separated).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1")]
    bind: String,

    /// RESP (Redis protocol) TCP port; 0 disables it.
    #[arg(long, value_name = "PORT", default_value_t = DEFAULT_PORT)]
    port: u16,

    /// RESP unix socket path.
    #[arg(long, value_name = "PATH")]
    unixsocket: Option<PathBuf>,

    /// Permissions of the unix socket files, in octal (e.g. 700 or 0770).
    #[arg(long, value_name = "OCTAL", value_parser = parse_octal_perm)]
    unixsocketperm: Option<u32>,

    /// memcached TCP port; 0 disables it [default: 11212; off when requirepass is set unless
    /// given explicitly].
    #[arg(long, value_name = "PORT")]
    memcache_port: Option<u16>,

    /// memcached unix socket path.
    #[arg(long, value_name = "PATH")]
    memcache_unixsocket: Option<PathBuf>,

    /// Event-loop threads for --io-model reactor [default: available cores].
    #[arg(long, value_name = "N", value_parser = parse_positive)]
    threads: Option<usize>,

    /// Connection handling model.
    #[arg(long, value_enum, value_name = "MODEL", default_value_t = IoModel::Reactor)]
    io_model: IoModel,

    /// Command worker threads for --io-model dispatch [default: available cores].
    #[arg(long, value_name = "N", value_parser = parse_positive)]
    workers: Option<usize>,

    /// Memory limit for data (e.g. 64mb, 2gb, 100k); 0 = unlimited.
    #[arg(long, value_name = "SIZE", default_value = "0", value_parser = parse_size)]
    maxmemory: u64,

    /// Policy at the memory limit: evict (also allkeys-lru/-lfu/-random) or noeviction.
    /// A cache evicts by default, as memcached does.
    #[arg(long, value_name = "POLICY", default_value = "evict", value_parser = parse_policy)]
    maxmemory_policy: MaxmemoryPolicy,

    /// Maximum number of connected clients (1 to 4294967295).
    #[arg(long, value_name = "N", default_value_t = 10000, value_parser = parse_maxclients)]
    maxclients: usize,

    /// Password clients must send with AUTH (RESP only).
    #[arg(long, value_name = "PASSWORD")]
    requirepass: Option<String>,

    /// Log level: debug, verbose, info, notice, warning, error, nothing (or trace).
    #[arg(long, value_name = "LEVEL", default_value = "info", value_parser = parse_loglevel)]
    loglevel: String,

    /// Largest value or request frame accepted (at least 1 byte).
    #[arg(long, value_name = "SIZE", default_value = "64mb", value_parser = parse_max_value_size)]
    max_value_size: usize,

    /// Unprocessed input a client may buffer (one request's arguments; at least 1mb, as Redis's
    /// client-query-buffer-limit). A request needing more closes the connection. The buffer
    /// still grows as far as one --max-value-size argument needs.
    #[arg(long, value_name = "SIZE", default_value = "1gb", value_parser = parse_query_buffer_limit)]
    client_query_buffer_limit: usize,

    /// Hard limit of the normal class's unsent output (shorthand for
    /// `--client-output-buffer-limit "normal SIZE 0 0"`); 0 = none.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    client_output_limit: Option<u64>,

    /// Unsent-output limits per client class, as Redis's `client-output-buffer-limit`:
    /// `<class> <hard> <soft> <soft-seconds>` groups, class normal, replica (slave) or pubsub.
    #[arg(long, value_name = "LIMITS", default_value = "", value_parser = OutputLimits::parse)]
    client_output_buffer_limit: OutputLimits,

    /// Keys the client-tracking table remembers; past it, the oldest are invalidated and dropped.
    #[arg(long, value_name = "N", default_value_t = 1_000_000, value_parser = parse_positive)]
    tracking_table_max_keys: usize,

    /// Longest an SQL statement may run before it is interrupted (e.g. 1s, 500ms).
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    sql_timeout: std::time::Duration,

    /// Largest SQL result; a bigger one is cut off with an error.
    #[arg(long, value_name = "SIZE", default_value = "64mb", value_parser = parse_size_usize)]
    sql_max_result: usize,

    /// Memory limit of the SQL tables (0 = unlimited); at the limit SQL writes fail with OOM.
    /// SQLite's whole heap (caches, temporary b-trees) is capped at it plus half of it (at
    /// least 32 MiB); a statement needing more fails.
    #[arg(long, value_name = "SIZE", default_value = "0", value_parser = parse_size)]
    sql_maxmemory: u64,

    /// Most typed tags one record may carry (1 to 255).
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u8).range(1..))]
    max_tags_per_record: u8,

    /// SLOWLOG logs commands that run at least this many microseconds (0: every command,
    /// -1: none).
    #[arg(long, value_name = "MICROSECONDS", default_value_t = 10_000, allow_negative_numbers = true,
          value_parser = parse_slowlog_log_slower_than)]
    slowlog_log_slower_than: i64,

    /// Entries the SLOWLOG keeps (0: none).
    #[arg(long, value_name = "N", default_value_t = 128, value_parser = parse_non_negative)]
    slowlog_max_len: u64,

    /// LATENCY samples events that last at least this many milliseconds (0: off).
    #[arg(long, value_name = "MILLISECONDS", default_value_t = 0, value_parser = parse_non_negative)]
    latency_monitor_threshold: u64,
}

/// Why the configuration could not be loaded.
#[derive(Debug)]
pub enum ConfigError {
    /// Bad command line, or `--help` / `--version`: call `exit()` on it.
    Args(clap::Error),
    /// The configuration file could not be read or is invalid.
    File(String),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Args(e) => write!(f, "{e}"),
            ConfigError::File(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for ConfigError {}

impl Default for Config {
    fn default() -> Config {
        Config::from_args(["cairn-server"]).expect("defaults parse")
    }
}

impl Config {
    /// Parses the process's command line (and the `--config` file it names).
    pub fn load() -> Result<Config, ConfigError> {
        Config::from_args(std::env::args_os())
    }

    /// Parses `args` (the first item is the program name) and the `--config` file they name.
    pub fn from_args<I, T>(args: I) -> Result<Config, ConfigError>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        let argv: Vec<OsString> = args.into_iter().map(Into::into).collect();
        let cli = Args::try_parse_from(&argv).map_err(ConfigError::Args)?;
        let Some(path) = cli.config.clone() else {
            return Ok(Config::from_parsed(cli));
        };
        let text = std::fs::read_to_string(&path).map_err(|e| {
            ConfigError::File(format!("cannot read config file {}: {e}", path.display()))
        })?;
        let file_args = file_to_args(&text)
            .map_err(|e| ConfigError::File(format!("config file {}: {e}", path.display())))?;
        let program = argv
            .first()
            .cloned()
            .unwrap_or_else(|| "cairn-server".into());
        // Validate the file alone first so its errors name the file.
        Args::try_parse_from(std::iter::once(program.clone()).chain(file_args.iter().cloned()))
            .map_err(|e| {
                let msg = e.to_string();
                let first = msg
                    .lines()
                    .next()
                    .unwrap_or("")
                    .trim_start_matches("error: ");
                ConfigError::File(format!("config file {}: {first}", path.display()))
            })?;
        let merged = std::iter::once(program)
            .chain(file_args)
            .chain(argv.into_iter().skip(1));
        let args = Args::try_parse_from(merged).map_err(ConfigError::Args)?;
        Ok(Config::from_parsed(args))
    }

    fn from_parsed(a: Args) -> Config {
        let cores = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        let client_output_limits = a.client_output_limits();
        Config {
            config_file: a.config,
            bind: a.bind,
            port: a.port,
            unixsocket: a.unixsocket,
            unixsocketperm: a.unixsocketperm,
            memcache_port: a.memcache_port.unwrap_or(DEFAULT_MEMCACHE_PORT),
            memcache_port_explicit: a.memcache_port.is_some(),
            memcache_unixsocket: a.memcache_unixsocket,
            threads: a.threads.unwrap_or(cores),
            io_model: a.io_model,
            workers: a.workers.unwrap_or(cores),
            maxmemory: a.maxmemory,
            maxmemory_policy: a.maxmemory_policy,
            maxclients: a.maxclients,
            requirepass: a.requirepass.filter(|p| !p.is_empty()),
            loglevel: a.loglevel,
            max_value_size: a.max_value_size,
            client_query_buffer_limit: a.client_query_buffer_limit,
            client_output_limits,
            max_tags_per_record: a.max_tags_per_record as usize,
            tracking_table_max_keys: a.tracking_table_max_keys,
            sql_timeout: a.sql_timeout,
            sql_max_result: a.sql_max_result,
            sql_maxmemory: a.sql_maxmemory,
            slowlog_log_slower_than: a.slowlog_log_slower_than,
            slowlog_max_len: a.slowlog_max_len,
            latency_monitor_threshold: a.latency_monitor_threshold,
        }
    }

    /// Whether the memcached TCP listener runs: it has no authentication, so with `requirepass`
    /// set it only runs when `--memcache-port` was given explicitly.
    pub fn memcache_tcp_enabled(&self) -> bool {
        self.memcache_port != 0 && (self.requirepass.is_none() || self.memcache_port_explicit)
    }

    /// The `tracing` level for `loglevel`.
    pub fn level_filter(&self) -> tracing::level_filters::LevelFilter {
        use tracing::level_filters::LevelFilter;
        match self.loglevel.as_str() {
            "trace" => LevelFilter::TRACE,
            "debug" | "verbose" => LevelFilter::DEBUG,
            "info" | "notice" => LevelFilter::INFO,
            "warning" => LevelFilter::WARN,
            "error" => LevelFilter::ERROR,
            _ => LevelFilter::OFF,
        }
    }
}

impl Args {
    /// `--client-output-buffer-limit`, then `--client-output-limit` over its normal class.
    fn client_output_limits(&self) -> OutputLimits {
        let mut limits = self.client_output_buffer_limit;
        if let Some(hard) = self.client_output_limit {
            limits.normal = ClassLimit {
                hard,
                soft: 0,
                soft_secs: 0,
            };
        }
        limits
    }
}

/// Unsent-output limits of one client class: past `hard` bytes the client is disconnected at
/// once, past `soft` bytes when it stays there for `soft_secs` seconds; 0 = no such limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassLimit {
    pub hard: u64,
    pub soft: u64,
    pub soft_secs: u64,
}

impl ClassLimit {
    pub fn is_unlimited(&self) -> bool {
        self.hard == 0 && self.soft == 0
    }
}

/// Redis's `client-output-buffer-limit` classes. Normal clients have no limit by default (their
/// output only grows while they send requests, and the runtime stops reading those while the
/// socket is full); pub/sub and tracking messages pile up without the client asking, so that
/// class is bounded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutputLimits {
    pub normal: ClassLimit,
    /// Declared for CONFIG compatibility; cairn has no replicas yet.
    pub replica: ClassLimit,
    pub pubsub: ClassLimit,
}

impl Default for OutputLimits {
    fn default() -> OutputLimits {
        OutputLimits {
            normal: ClassLimit::default(),
            replica: ClassLimit {
                hard: 256 << 20,
                soft: 64 << 20,
                soft_secs: 60,
            },
            pubsub: ClassLimit {
                hard: 32 << 20,
                soft: 8 << 20,
                soft_secs: 60,
            },
        }
    }
}

impl OutputLimits {
    /// The defaults with the given `<class> <hard> <soft> <soft-seconds>` groups applied.
    pub fn parse(text: &str) -> Result<OutputLimits, String> {
        let mut limits = OutputLimits::default();
        limits.update(text)?;
        Ok(limits)
    }

    /// Applies `<class> <hard> <soft> <soft-seconds>` groups (CONFIG SET); all or nothing.
    pub fn update(&mut self, text: &str) -> Result<(), String> {
        let words: Vec<&str> = text.split_whitespace().collect();
        if !words.len().is_multiple_of(4) {
            return Err("Wrong number of arguments in buffer limit configuration.".into());
        }
        let mut next = *self;
        for group in words.chunks(4) {
            let class = match group[0].to_ascii_lowercase().as_str() {
                "normal" => &mut next.normal,
                "replica" | "slave" => &mut next.replica,
                "pubsub" => &mut next.pubsub,
                _ => {
                    return Err(
                        "Invalid client class specified in buffer limit configuration.".into(),
                    )
                }
            };
            let hard = parse_size(group[1]);
            let soft = parse_size(group[2]);
            let secs = group[3].parse::<u64>();
            let (Ok(hard), Ok(soft), Ok(soft_secs)) = (hard, soft, secs) else {
                return Err(
                    "Error in hard, soft or soft_seconds setting in buffer limit configuration."
                        .into(),
                );
            };
            *class = ClassLimit {
                hard,
                soft,
                soft_secs,
            };
        }
        *self = next;
        Ok(())
    }

    /// As CONFIG GET shows it (Redis's form and class order).
    pub fn render(&self) -> String {
        [
            ("normal", self.normal),
            ("slave", self.replica),
            ("pubsub", self.pubsub),
        ]
        .iter()
        .map(|(name, c)| format!("{name} {} {} {}", c.hard, c.soft, c.soft_secs))
        .collect::<Vec<_>>()
        .join(" ")
    }
}

/// Converts the TOML file into `--key=value` arguments.
fn file_to_args(text: &str) -> Result<Vec<OsString>, String> {
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| e.message().to_string())?;
    let cmd = Args::command();
    let mut out = Vec::with_capacity(table.len());
    for (key, value) in table {
        let flag = key.replace('_', "-");
        let known = cmd
            .get_arguments()
            .any(|a| a.get_long() == Some(flag.as_str()) && flag != "config");
        if !known {
            return Err(format!("unknown key '{key}'"));
        }
        let v = match value {
            toml::Value::String(s) => s,
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            other => {
                return Err(format!(
                    "key '{key}': expected a string or an integer, got {}",
                    other.type_str()
                ))
            }
        };
        out.push(OsString::from(format!("--{flag}={v}")));
    }
    Ok(out)
}

/// Parses a size: a number with an optional case-insensitive suffix b, k/kb, m/mb, g/gb, t/tb
/// (all powers of 1024).
/// Parses a duration: `1s`, `500ms`, `2m`, or a bare number of milliseconds.
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let t = s.trim().to_ascii_lowercase();
    let (digits, unit_ms) = if let Some(d) = t.strip_suffix("ms") {
        (d, 1)
    } else if let Some(d) = t.strip_suffix('s') {
        (d, 1000)
    } else if let Some(d) = t.strip_suffix('m') {
        (d, 60_000)
    } else {
        (t.as_str(), 1)
    };
    let n: u64 = digits
        .trim()
        .parse()
        .map_err(|_| format!("invalid duration '{s}' (e.g. 1s, 500ms)"))?;
    n.checked_mul(unit_ms)
        .filter(|&ms| ms > 0)
        .map(std::time::Duration::from_millis)
        .ok_or_else(|| format!("invalid duration '{s}' (must be positive)"))
}

pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    if num.is_empty() {
        return Err(format!(
            "invalid size '{s}' (expected e.g. 1024, 100k, 64mb, 2gb)"
        ));
    }
    let n: u64 = num
        .parse()
        .map_err(|_| format!("size '{s}' is too large"))?;
    let mult: u64 = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1 << 10,
        "m" | "mb" => 1 << 20,
        "g" | "gb" => 1 << 30,
        "t" | "tb" => 1 << 40,
        _ => {
            return Err(format!(
                "invalid size suffix in '{s}' (use k, kb, m, mb, g or gb)"
            ))
        }
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("size '{s}' is too large"))
}

fn parse_size_usize(s: &str) -> Result<usize, String> {
    let n = parse_size(s)?;
    usize::try_from(n).map_err(|_| format!("size '{s}' is too large"))
}

/// `maxclients`: 1 to 4294967295, as Redis (0 would refuse every connection).
pub fn parse_maxclients(s: &str) -> Result<usize, String> {
    let n: u64 = s
        .trim()
        .parse()
        .map_err(|_| "argument couldn't be parsed into an integer".to_string())?;
    match usize::try_from(n) {
        Ok(n) if (1..=u32::MAX as usize).contains(&n) => Ok(n),
        _ => Err("argument must be between 1 and 4294967295 inclusive".to_string()),
    }
}

/// `slowlog-log-slower-than`: microseconds, -1 or more (Redis's range and messages).
pub fn parse_slowlog_log_slower_than(s: &str) -> Result<i64, String> {
    let n: i64 = s
        .trim()
        .parse()
        .map_err(|_| "argument couldn't be parsed into an integer".to_string())?;
    if n < -1 {
        return Err("argument must be between -1 and 9223372036854775807 inclusive".into());
    }
    Ok(n)
}

/// `slowlog-max-len`, `latency-monitor-threshold`: a count, 0 or more (Redis's messages).
pub fn parse_non_negative(s: &str) -> Result<u64, String> {
    let n: i64 = s
        .trim()
        .parse()
        .map_err(|_| "argument couldn't be parsed into an integer".to_string())?;
    u64::try_from(n)
        .map_err(|_| "argument must be between 0 and 9223372036854775807 inclusive".to_string())
}

/// `max-value-size`: a size of at least one byte (0 would refuse every value and request).
pub fn parse_max_value_size(s: &str) -> Result<usize, String> {
    match parse_size_usize(s)? {
        0 => Err(format!(
            "argument must be between 1 and {} inclusive",
            i64::MAX
        )),
        n => Ok(n),
    }
}

/// Smallest `client-query-buffer-limit` (Redis's minimum too).
pub const MIN_QUERY_BUFFER_LIMIT: usize = 1 << 20;

/// `client-query-buffer-limit`: at least 1mb.
pub fn parse_query_buffer_limit(s: &str) -> Result<usize, String> {
    match parse_size_usize(s)? {
        n if n < MIN_QUERY_BUFFER_LIMIT => Err(format!(
            "argument must be between {MIN_QUERY_BUFFER_LIMIT} and {} inclusive",
            i64::MAX
        )),
        n => Ok(n),
    }
}

/// The input buffer a connection may grow to: the query buffer limit, but never less than one
/// argument of `max_value_size` plus room for its request's other arguments.
pub fn effective_query_buffer_limit(query_buffer_limit: usize, max_value_size: usize) -> usize {
    query_buffer_limit.max(max_value_size.saturating_add(1 << 20))
}

fn parse_positive(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1".to_string()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("invalid number '{s}'")),
    }
}

fn parse_octal_perm(s: &str) -> Result<u32, String> {
    let t = s.trim();
    let t = t.strip_prefix("0o").unwrap_or(t);
    match u32::from_str_radix(t, 8) {
        Ok(n) if n <= 0o7777 && !t.is_empty() => Ok(n),
        _ => Err(format!(
            "invalid permissions '{s}' (expected octal, e.g. 700 or 0770)"
        )),
    }
}

fn parse_policy(s: &str) -> Result<MaxmemoryPolicy, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "evict" | "allkeys-lru" | "allkeys-lfu" | "allkeys-random" => Ok(MaxmemoryPolicy::Evict),
        "noeviction" | "no-eviction" => Ok(MaxmemoryPolicy::NoEviction),
        _ => Err(format!(
            "invalid policy '{s}' (expected evict, noeviction, allkeys-lru, allkeys-lfu or allkeys-random)"
        )),
    }
}

fn parse_loglevel(s: &str) -> Result<String, String> {
    let l = s.trim().to_ascii_lowercase();
    let norm = match l.as_str() {
        "trace" => "trace",
        "debug" => "debug",
        "verbose" => "verbose",
        "info" => "info",
        "notice" => "notice",
        "warning" | "warn" => "warning",
        "error" => "error",
        "nothing" | "off" | "none" => "nothing",
        _ => {
            return Err(format!(
                "invalid log level '{s}' (expected debug, verbose, info, notice, warning, error or nothing)"
            ))
        }
    };
    Ok(norm.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn cfg(args: &[&str]) -> Config {
        let mut v = vec!["cairn-server"];
        v.extend_from_slice(args);
        Config::from_args(v).unwrap()
    }

    fn temp_file(contents: &str) -> PathBuf {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("cairn-config-test-{}-{n}.toml", std::process::id()));
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(contents.as_bytes()).unwrap();
        path
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("1024"), Ok(1024));
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("100k"), Ok(100 * 1024));
        assert_eq!(parse_size("100KB"), Ok(100 * 1024));
        assert_eq!(parse_size("64mb"), Ok(64 << 20));
        assert_eq!(parse_size("64M"), Ok(64 << 20));
        assert_eq!(parse_size("2gb"), Ok(2 << 30));
        assert_eq!(parse_size("2Gb"), Ok(2 << 30));
        assert_eq!(parse_size("7b"), Ok(7));
        assert_eq!(parse_size(" 3 mb "), Ok(3 << 20));
        assert!(parse_size("").is_err());
        assert!(parse_size("mb").is_err());
        assert!(parse_size("-1").is_err());
        assert!(parse_size("1.5gb").is_err());
        assert!(parse_size("12xb").is_err());
        assert!(parse_size("99999999999999999999").is_err());
        assert!(parse_size("99999999999gb").is_err());
    }

    #[test]
    fn defaults() {
        let c = cfg(&[]);
        assert_eq!(c.bind, "127.0.0.1");
        assert_eq!(c.port, 6380);
        assert_eq!(c.memcache_port, 11212);
        assert!(!c.memcache_port_explicit);
        assert!(c.memcache_tcp_enabled());
        assert_eq!(c.io_model, IoModel::Reactor);
        assert!(c.threads >= 1 && c.workers >= 1);
        assert_eq!(c.maxmemory, 0);
        assert_eq!(c.maxmemory_policy, MaxmemoryPolicy::Evict);
        assert_eq!(c.maxclients, 10000);
        assert_eq!(c.requirepass, None);
        assert_eq!(c.loglevel, "info");
        assert_eq!(c.max_value_size, 64 << 20);
        assert_eq!(c.client_query_buffer_limit, 1 << 30);
        assert_eq!(c.client_output_limits, OutputLimits::default());
        assert_eq!(
            c.client_output_limits.render(),
            "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
        );
        assert_eq!(c.unixsocketperm, None);
    }

    #[test]
    fn flags() {
        let c = cfg(&[
            "--port",
            "7000",
            "--maxmemory",
            "2GB",
            "--maxmemory-policy",
            "allkeys-lru",
            "--io-model",
            "dispatch",
            "--threads",
            "3",
            "--workers=5",
            "--unixsocketperm",
            "0770",
            "--loglevel",
            "WARNING",
            "--requirepass",
            "s3cret",
        ]);
        assert_eq!(c.port, 7000);
        assert_eq!(c.maxmemory, 2 << 30);
        assert_eq!(c.maxmemory_policy, MaxmemoryPolicy::Evict);
        assert_eq!(c.io_model, IoModel::Dispatch);
        assert_eq!(c.threads, 3);
        assert_eq!(c.workers, 5);
        assert_eq!(c.unixsocketperm, Some(0o770));
        assert_eq!(c.loglevel, "warning");
        assert_eq!(c.requirepass.as_deref(), Some("s3cret"));
        // requirepass without an explicit memcache port turns the memcached TCP listener off.
        assert!(!c.memcache_tcp_enabled());
        let c = cfg(&["--requirepass", "x", "--memcache-port", "11212"]);
        assert!(c.memcache_port_explicit);
        assert!(c.memcache_tcp_enabled());
        let c = cfg(&["--port", "1", "--port", "2"]);
        assert_eq!(c.port, 2);
        assert_eq!(cfg(&["--requirepass", ""]).requirepass, None);
    }

    #[test]
    fn bad_flags() {
        for bad in [
            &["--threads", "0"][..],
            &["--maxclients", "0"],
            &["--maxclients", "4294967296"],
            &["--max-value-size", "0"],
            &["--client-query-buffer-limit", "1000"],
            &["--maxmemory", "lots"],
            &["--maxmemory-policy", "volatile-lru"],
            &["--unixsocketperm", "999"],
            &["--loglevel", "chatty"],
            &["--port", "70000"],
            &["--io-model", "uring"],
            &["--nope"],
        ] {
            let mut v = vec!["cairn-server"];
            v.extend_from_slice(bad);
            assert!(Config::from_args(v).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn file_and_flag_precedence() {
        let path = temp_file(
            "port = 7001\nmaxmemory = \"100mb\"\nmaxmemory_policy = \"evict\"\n\
             max-value-size = \"1mb\"\nmemcache_port = 11300\nunixsocketperm = 700\n\
             requirepass = \"pw\"\nthreads = 2\n",
        );
        let p = path.to_str().unwrap();
        let c = cfg(&["--config", p]);
        assert_eq!(c.config_file.as_deref(), Some(path.as_path()));
        assert_eq!(c.port, 7001);
        assert_eq!(c.maxmemory, 100 << 20);
        assert_eq!(c.maxmemory_policy, MaxmemoryPolicy::Evict);
        assert_eq!(c.max_value_size, 1 << 20);
        assert_eq!(c.memcache_port, 11300);
        assert!(c.memcache_port_explicit);
        assert!(c.memcache_tcp_enabled());
        assert_eq!(c.unixsocketperm, Some(0o700));
        assert_eq!(c.threads, 2);
        // Flags win over the file, wherever they appear.
        let c = cfg(&[
            "--port",
            "7002",
            "--config",
            p,
            "--maxmemory",
            "1gb",
            "--threads=4",
        ]);
        assert_eq!(c.port, 7002);
        assert_eq!(c.maxmemory, 1 << 30);
        assert_eq!(c.threads, 4);
        assert_eq!(c.max_value_size, 1 << 20);
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn bad_files() {
        for text in [
            "nosuchkey = 1\n",
            "config = \"other.toml\"\n",
            "port = \"notaport\"\n",
            "port = [1, 2]\n",
            "this is not toml\n",
        ] {
            let path = temp_file(text);
            let r = Config::from_args(["cairn-server", "--config", path.to_str().unwrap()]);
            std::fs::remove_file(&path).unwrap();
            match r {
                Err(ConfigError::File(msg)) => assert!(msg.contains("config file"), "{msg}"),
                other => panic!("{text:?}: {other:?}"),
            }
        }
        let r = Config::from_args(["cairn-server", "--config", "/nonexistent/cairn.toml"]);
        assert!(matches!(r, Err(ConfigError::File(_))));
    }

    #[test]
    fn loglevels() {
        use tracing::level_filters::LevelFilter;
        assert_eq!(
            cfg(&["--loglevel", "debug"]).level_filter(),
            LevelFilter::DEBUG
        );
        assert_eq!(
            cfg(&["--loglevel", "verbose"]).level_filter(),
            LevelFilter::DEBUG
        );
        assert_eq!(
            cfg(&["--loglevel", "notice"]).level_filter(),
            LevelFilter::INFO
        );
        assert_eq!(
            cfg(&["--loglevel", "warning"]).level_filter(),
            LevelFilter::WARN
        );
        assert_eq!(
            cfg(&["--loglevel", "nothing"]).level_filter(),
            LevelFilter::OFF
        );
    }

    #[test]
    fn help_and_version() {
        let e = Config::from_args(["cairn-server", "--version"]).unwrap_err();
        assert!(
            matches!(&e, ConfigError::Args(e) if e.kind() == clap::error::ErrorKind::DisplayVersion)
        );
        let e = Config::from_args(["cairn-server", "--help"]).unwrap_err();
        assert!(
            matches!(&e, ConfigError::Args(e) if e.kind() == clap::error::ErrorKind::DisplayHelp)
        );
    }

    #[test]
    fn output_buffer_limits() {
        let c = cfg(&[
            "--client-output-buffer-limit",
            "pubsub 1mb 512k 5 normal 10 0 0",
        ]);
        let l = c.client_output_limits;
        assert_eq!(
            (l.pubsub.hard, l.pubsub.soft, l.pubsub.soft_secs),
            (1 << 20, 512 << 10, 5)
        );
        assert_eq!(l.normal.hard, 10);
        assert_eq!(l.replica, OutputLimits::default().replica);
        // The old flag sets the normal class's hard limit.
        let c = cfg(&["--client-output-limit", "1mb"]);
        assert_eq!(c.client_output_limits.normal.hard, 1 << 20);
        assert_eq!(
            c.client_output_limits.pubsub,
            OutputLimits::default().pubsub
        );
        let mut l = OutputLimits::default();
        for bad in ["normal 1 2", "bogus 1 2 3", "normal x 0 0", "normal 1 1 -1"] {
            assert!(l.update(bad).is_err(), "{bad} accepted");
        }
        assert_eq!(l, OutputLimits::default());
        let bad = ["cairn-server", "--client-output-buffer-limit", "normal 1"];
        assert!(Config::from_args(bad).is_err());
    }
}
