//! The running values of the settings CONFIG SET may change, and CONFIG GET / SET / REWRITE
//! over the settings table.
//!
//! Hot paths read the atomics here directly (`settings.maxclients`, `settings.max_value_size`,
//! ...); CONFIG works on a [`Config`] snapshot made from them, so that parsing and rendering
//! stay in the table and a CONFIG SET of several parameters is validated whole before any of
//! them changes.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use super::table::{lookup, Setting, SETTINGS};
use super::{Config, OutputLimits};

/// Settings that CONFIG SET may change while the server runs (the store holds maxmemory and
/// the policy itself).
pub struct Settings {
    /// The configuration the server started with: the source of the fixed settings.
    startup: Config,
    store: Arc<store::Store>,
    requirepass: RwLock<Option<Vec<u8>>>,
    auth_required: AtomicBool,
    pub maxclients: AtomicUsize,
    /// Unsent-output limits per client class; event loops copy them once per turn.
    pub output_limits: RwLock<OutputLimits>,
    /// Redis's small-collection thresholds, read by OBJECT ENCODING.
    pub encoding_limits: RwLock<super::EncodingLimits>,
    pub max_value_size: AtomicUsize,
    pub client_query_buffer_limit: AtomicUsize,
    /// Most typed tags one record may carry (TAG.SET / TAG.ADD).
    pub max_tags_per_record: AtomicUsize,
    /// Microseconds; a command running longer goes to the SLOWLOG (0: all, negative: none).
    pub slowlog_log_slower_than: AtomicI64,
    /// Entries the SLOWLOG keeps.
    pub slowlog_max_len: AtomicU64,
    /// Milliseconds; 0 = the latency monitor is off.
    pub latency_monitor_threshold: AtomicU64,
    /// The snapshot settings (dir, dbfilename, save rules...), read when a save starts.
    pub persist: RwLock<super::PersistConfig>,
    /// Milliseconds a script runs before others get -BUSY (`crate::scripts`).
    pub busy_reply_threshold: AtomicU64,
    /// The replication settings, read when a link starts or a replica is checked.
    pub repl: Arc<RwLock<super::ReplConfig>>,
    /// Read by every write on a primary (0: off).
    pub min_replicas_to_write: AtomicU64,
    /// Write-behind: holds wb-fsync, wb-max-bytes and wb-on-full itself.
    pub writeback: Arc<writeback::Engine>,
    /// Serialises CONFIG SET and CONFIG REWRITE, so a snapshot they take stays true while
    /// they work on it.
    changing: Mutex<()>,
}

/// Why CONFIG SET refused a parameter, in Redis's wording.
#[derive(Debug, PartialEq, Eq)]
pub enum SetError {
    /// `ERR Unknown option or number of arguments for CONFIG SET - 'name'`.
    Unknown(String),
    /// `ERR CONFIG SET failed (possibly related to argument 'name') - why`.
    Failed { name: String, why: String },
}

impl std::fmt::Display for SetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SetError::Unknown(name) => write!(
                f,
                "ERR Unknown option or number of arguments for CONFIG SET - '{name}'"
            ),
            SetError::Failed { name, why } => write!(
                f,
                "ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"
            ),
        }
    }
}

impl Settings {
    pub fn new(
        config: &Config,
        store: Arc<store::Store>,
        writeback: Arc<writeback::Engine>,
    ) -> Settings {
        let settings = Settings {
            startup: config.clone(),
            store,
            requirepass: RwLock::new(None),
            auth_required: AtomicBool::new(false),
            maxclients: AtomicUsize::new(config.maxclients),
            output_limits: RwLock::new(config.client_output_limits),
            encoding_limits: RwLock::new(config.encoding_limits),
            max_value_size: AtomicUsize::new(config.max_value_size),
            client_query_buffer_limit: AtomicUsize::new(config.client_query_buffer_limit),
            max_tags_per_record: AtomicUsize::new(config.max_tags_per_record),
            slowlog_log_slower_than: AtomicI64::new(config.slowlog_log_slower_than),
            slowlog_max_len: AtomicU64::new(config.slowlog_max_len),
            latency_monitor_threshold: AtomicU64::new(config.latency_monitor_threshold),
            persist: RwLock::new(config.persist.clone()),
            busy_reply_threshold: AtomicU64::new(config.busy_reply_threshold),
            repl: Arc::new(RwLock::new(config.repl.clone())),
            min_replicas_to_write: AtomicU64::new(config.repl.min_replicas_to_write),
            writeback,
            changing: Mutex::new(()),
        };
        settings.set_requirepass(config.requirepass.as_deref().map(str::as_bytes));
        settings
    }

    /// The store whose memory limit and policy are settings.
    pub fn store(&self) -> &store::Store {
        &self.store
    }

    /// Whether new connections must AUTH before running commands.
    pub fn auth_required(&self) -> bool {
        self.auth_required.load(Ordering::Relaxed)
    }

    pub fn requirepass(&self) -> Option<Vec<u8>> {
        self.requirepass.read().clone()
    }

    pub fn set_requirepass(&self, pass: Option<&[u8]>) {
        let pass = pass.filter(|p| !p.is_empty()).map(<[u8]>::to_vec);
        self.auth_required.store(pass.is_some(), Ordering::Relaxed);
        *self.requirepass.write() = pass;
    }

    /// Constant-time comparison, so the reply time does not leak the password's prefix.
    pub fn password_matches(&self, given: &[u8]) -> bool {
        match &*self.requirepass.read() {
            None => false,
            Some(p) => {
                p.len() == given.len()
                    && p.iter().zip(given).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
            }
        }
    }

    /// The configuration now: the startup values with the running ones of mutable settings.
    pub fn current(&self) -> Config {
        let mut config = self.startup.clone();
        for live in SETTINGS.iter().filter_map(|s| s.live) {
            (live.read)(self, &mut config);
        }
        // REPLICAOF changes the role at run time (not CONFIG SET): CONFIG GET and REWRITE
        // show where the server replicates from now, as Redis's do.
        config.repl.replicaof = self.repl.read().replicaof.clone();
        config
    }

    /// CONFIG GET: `(name, value)` of every setting whose name matches one of the glob
    /// `patterns` (lowercase), in table order, each once; then the aliases that match.
    pub fn get(&self, patterns: &[Vec<u8>]) -> Vec<(&'static str, String)> {
        let config = self.current();
        let matches = |name: &str| {
            patterns
                .iter()
                .any(|p| store::glob::matches(p, name.as_bytes()))
        };
        let aliases = super::table::ALIASES
            .iter()
            .filter(|(alias, _)| matches(alias))
            .filter_map(|(alias, name)| Some((*alias, lookup(name)?)));
        SETTINGS
            .iter()
            .filter(|s| matches(s.name))
            .map(|s| (s.name, s))
            .chain(aliases)
            .map(|(name, s)| (name, (s.render)(&config)))
            .collect()
    }

    /// CONFIG SET of `(name, value)` pairs, as Redis 7: every name must be a mutable
    /// setting named once and every value must parse, or nothing changes.
    pub fn set(&self, pairs: &[(&[u8], &[u8])]) -> Result<(), SetError> {
        let _changing = self.changing.lock();
        let mut next = self.current();
        let mut chosen: Vec<&'static Setting> = Vec::with_capacity(pairs.len());
        for (name, value) in pairs {
            let name = String::from_utf8_lossy(name).to_ascii_lowercase();
            let setting = lookup(&name).ok_or_else(|| SetError::Unknown(name.clone()))?;
            let failed = |why: &str| SetError::Failed {
                name: name.clone(),
                why: why.to_string(),
            };
            if !setting.mutable() {
                return Err(failed("can't set immutable config"));
            }
            if chosen.iter().any(|s| std::ptr::eq(*s, setting)) {
                return Err(failed("duplicate parameter"));
            }
            let text =
                std::str::from_utf8(value).map_err(|_| failed("value is not valid UTF-8"))?;
            (setting.parse)(&mut next, text).map_err(|why| failed(&why))?;
            chosen.push(setting);
        }
        for setting in chosen {
            if let Some(live) = setting.live {
                (live.write)(self, &next);
            }
        }
        Ok(())
    }

    /// CONFIG REWRITE: writes the current values into the file the server started with.
    pub fn rewrite(&self) -> Result<(), String> {
        let _changing = self.changing.lock();
        let Some(path) = &self.startup.config_file else {
            return Err("The server is running without a config file".to_string());
        };
        super::rewrite::rewrite_file(path, &self.current(), &Config::defaults())
            .map_err(|e| format!("Rewriting config file: {e}"))
    }
}
