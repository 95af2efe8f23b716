//! Server configuration: every setting declared once in [`table::SETTINGS`], which drives the
//! command-line flags, the TOML file (`--config FILE`), CONFIG GET / SET / REWRITE and
//! memcached's `stats settings`.
//!
//! - `table`: the settings (name, help, default, parser, renderer, mutability);
//! - `parse`: value parsers and renderers; `limits`: the output-buffer limits type;
//! - `load`: the command line and the file; `live`: the running values ([`Settings`]) and
//!   CONFIG GET / SET; `rewrite`: CONFIG REWRITE.

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

pub mod cores;
mod limits;
mod live;
mod load;
mod parse;
mod rewrite;
pub mod table;
#[cfg(test)]
mod table_tests;
#[cfg(test)]
mod tests;

pub use limits::{ClassLimit, EncodingLimits, OutputLimits};
pub use live::{SetError, Settings};
pub use parse::{
    effective_query_buffer_limit, parse_duration, parse_max_value_size, parse_maxclients,
    parse_query_buffer_limit, parse_size, MIN_QUERY_BUFFER_LIMIT,
};

/// How connections are served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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

/// How log lines are written: for people, or one JSON object per line for collectors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

impl LogFormat {
    pub fn name(self) -> &'static str {
        match self {
            LogFormat::Text => "text",
            LogFormat::Json => "json",
        }
    }
}

/// The git commit the binary was built from (build.rs; `unknown` outside a git checkout).
pub const COMMIT: &str = env!("CAIRN_COMMIT");

/// What `--version` prints after the name: the package version and the commit.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("CAIRN_COMMIT"),
    ")"
);

/// The command line's clap command (the man page is generated from it: `make man`).
pub fn clap_command() -> clap::Command {
    load::command()
}

/// What to do when `maxmemory` is reached: the store's policies, by Redis's names.
pub use store::EvictionPolicy as MaxmemoryPolicy;

/// The values of every setting (one typed field per setting of the table), plus where they
/// came from. At start it is the effective configuration (defaults, then the file, then the
/// flags); [`Settings::current`] makes one with the running values.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The `--config` file, if any (CONFIG REWRITE writes it).
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
    /// Records carry a CAS; `--cas no` drops it (8 bytes a record), as memcached's `-C`.
    pub cas: bool,
    pub maxclients: usize,
    pub requirepass: Option<String>,
    /// Normalised: one of trace, debug, verbose, info, notice, warning, error, nothing.
    pub loglevel: String,
    pub log_format: LogFormat,
    /// Where logs go; None = stderr. Reopened on SIGHUP (log rotation).
    pub logfile: Option<PathBuf>,
    /// The metrics endpoint's TCP port (`/metrics`, `/healthz`, `/readyz`); 0 = off.
    pub metrics_port: u16,
    pub metrics_bind: String,
    pub max_value_size: usize,
    /// Largest input buffer of one client (see [`effective_query_buffer_limit`]).
    pub client_query_buffer_limit: usize,
    /// Unsent-output limits per client class (Redis `client-output-buffer-limit`).
    pub client_output_limits: OutputLimits,
    /// Redis's small-collection thresholds (OBJECT ENCODING's answers).
    pub encoding_limits: EncodingLimits,
    pub max_tags_per_record: usize,
    pub tracking_table_max_keys: usize,
    /// Bytes the change stream's backlogs may hold while a cursor consumer is registered.
    pub changes_backlog_size: u64,
    pub sql_timeout: Duration,
    pub sql_max_result: usize,
    pub sql_maxmemory: u64,
    pub sql_inline_steps: u32,
    /// Microseconds (SLOWLOG); negative = log nothing.
    pub slowlog_log_slower_than: i64,
    pub slowlog_max_len: u64,
    /// Milliseconds (LATENCY); 0 = off.
    pub latency_monitor_threshold: u64,
    /// Milliseconds a Lua script runs before other clients get -BUSY and SCRIPT KILL may
    /// stop it (Redis's busy-reply-threshold, formerly lua-time-limit).
    pub busy_reply_threshold: u64,
    /// Snapshots (`dir`, `dbfilename`, `save`, ...); `persist.dir` holds the write-behind
    /// logs too (`dir/wb/`).
    pub persist: PersistConfig,
    pub wb_fsync: writeback::Fsync,
    pub wb_max_bytes: u64,
    pub wb_on_full: writeback::OnFull,
    /// The file's `[[writeback]]` mappings (not settings of the table: an array of tables).
    pub writeback: Vec<writeback::MappingConfig>,
    /// Replication settings.
    pub repl: ReplConfig,
}

/// The replication settings (docs/replication.md).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplConfig {
    pub replicaof: Option<(String, u16)>,
    pub masterauth: Option<String>,
    pub masteruser: Option<String>,
    pub replica_read_only: bool,
    pub replica_serve_stale_data: bool,
    pub min_replicas_to_write: u64,
    /// Seconds.
    pub min_replicas_max_lag: u64,
    pub repl_backlog_size: u64,
    /// Microseconds a primary may hold stream bytes for its caught-up replicas.
    pub repl_send_delay_us: u64,
    /// Seconds.
    pub repl_ping_replica_period: u64,
    /// Seconds.
    pub repl_timeout: u64,
    /// INFO's `slave_priority`: Redis Sentinel promotes the lowest non-zero one, never 0.
    pub replica_priority: u64,
    /// The address a replica tells its primary (REPLCONF ip-address): what the primary's INFO
    /// and Sentinel show instead of the connection's source address (NAT, containers).
    pub replica_announce_ip: Option<String>,
    /// The port a replica tells its primary (REPLCONF listening-port); 0: its own port.
    pub replica_announce_port: u16,
}

/// The snapshot settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PersistConfig {
    /// Where snapshots are written and read.
    pub dir: PathBuf,
    /// Whether `dir` was given (on the command line or in the file): it turns the save at
    /// shutdown on by default.
    pub dir_explicit: bool,
    pub dbfilename: String,
    /// `save` rules: (seconds, changes) pairs; empty = no automatic saves.
    pub save: Vec<(u64, u64)>,
    /// `save-on-shutdown`: None = auto (yes when `dir` was given or `save` rules are set).
    pub save_on_shutdown: Option<bool>,
    pub stop_writes_on_bgsave_error: bool,
    /// `load-damaged skip`: load around damaged blocks rather than refuse the file.
    pub load_damaged_skip: bool,
    /// Test aids, as Redis's: microseconds of pause per record saved / loaded.
    pub rdb_key_save_delay: u64,
    pub key_load_delay: u64,
}

impl PersistConfig {
    /// Whether a shutdown (SIGTERM, SIGINT, SHUTDOWN without SAVE/NOSAVE) saves.
    pub fn saves_on_shutdown(&self) -> bool {
        self.save_on_shutdown
            .unwrap_or(self.dir_explicit || !self.save.is_empty())
    }
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
        Config::defaults()
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
        load::from_args(args.into_iter().map(Into::into).collect())
    }

    /// Every setting at its default (the table's).
    pub fn defaults() -> Config {
        load::defaults()
    }

    /// The `--help` text (every setting's flag).
    pub fn help() -> String {
        load::command().render_long_help().to_string()
    }

    /// A config to parse values into: zero values, not the defaults.
    fn blank() -> Config {
        Config {
            config_file: None,
            bind: String::new(),
            port: 0,
            unixsocket: None,
            unixsocketperm: None,
            memcache_port: 0,
            memcache_port_explicit: false,
            memcache_unixsocket: None,
            threads: 1,
            io_model: IoModel::Reactor,
            workers: 1,
            maxmemory: 0,
            maxmemory_policy: MaxmemoryPolicy::AllKeysLru,
            cas: true,
            maxclients: 1,
            requirepass: None,
            loglevel: String::new(),
            log_format: LogFormat::Text,
            logfile: None,
            metrics_port: 0,
            metrics_bind: String::new(),
            max_value_size: 1,
            client_query_buffer_limit: MIN_QUERY_BUFFER_LIMIT,
            client_output_limits: OutputLimits::default(),
            encoding_limits: EncodingLimits::default(),
            max_tags_per_record: 1,
            tracking_table_max_keys: 1,
            changes_backlog_size: 0,
            sql_timeout: Duration::from_secs(1),
            sql_max_result: 0,
            sql_maxmemory: 0,
            sql_inline_steps: 0,
            slowlog_log_slower_than: 0,
            slowlog_max_len: 0,
            latency_monitor_threshold: 0,
            persist: PersistConfig {
                dir: PathBuf::from("."),
                dir_explicit: false,
                dbfilename: String::new(),
                save: Vec::new(),
                save_on_shutdown: None,
                stop_writes_on_bgsave_error: true,
                load_damaged_skip: false,
                rdb_key_save_delay: 0,
                key_load_delay: 0,
            },
            busy_reply_threshold: 0,
            wb_fsync: writeback::Fsync::Everysec,
            wb_max_bytes: 0,
            wb_on_full: writeback::OnFull::Error,
            writeback: Vec::new(),
            repl: ReplConfig::default(),
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
