//! State shared by every thread of the server: configuration, the store, clients and counters.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::RwLock;

use crate::clients::ClientRegistry;
use crate::config::{Config, MaxmemoryPolicy};

/// Counters reported by INFO and memcached `stats`. Relaxed atomics: they are statistics.
#[derive(Default)]
pub struct ServerStats {
    pub total_connections_received: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub total_commands_processed: AtomicU64,
    pub net_input_bytes: AtomicU64,
    pub net_output_bytes: AtomicU64,
    pub client_output_limit_disconnections: AtomicU64,
    pub client_query_buffer_limit_disconnections: AtomicU64,
    pub total_reads_processed: AtomicU64,
    pub total_writes_processed: AtomicU64,
    /// memcached `stats` counters (cmd_get, get_hits, cas_badval, ...).
    pub memcache: crate::memcached::McStats,
}

/// Settings that CONFIG SET may change while the server runs (the store holds maxmemory and
/// the policy itself).
pub struct Settings {
    requirepass: RwLock<Option<Vec<u8>>>,
    auth_required: AtomicBool,
    pub maxclients: AtomicUsize,
    /// Unsent-output limits per client class; event loops copy them once per turn.
    pub output_limits: RwLock<crate::config::OutputLimits>,
    pub max_value_size: AtomicUsize,
    pub client_query_buffer_limit: AtomicUsize,
    /// SLOWLOG: microseconds from which a command is logged (0: all, negative: none)...
    pub slowlog_log_slower_than: AtomicI64,
    /// ...and how many entries are kept.
    pub slowlog_max_len: AtomicU64,
    /// LATENCY: milliseconds from which an event is sampled (0: off).
    pub latency_monitor_threshold: AtomicU64,
}

impl Settings {
    fn new(config: &Config) -> Settings {
        let settings = Settings {
            requirepass: RwLock::new(None),
            auth_required: AtomicBool::new(false),
            maxclients: AtomicUsize::new(config.maxclients),
            output_limits: RwLock::new(config.client_output_limits),
            max_value_size: AtomicUsize::new(config.max_value_size),
            client_query_buffer_limit: AtomicUsize::new(config.client_query_buffer_limit),
            slowlog_log_slower_than: AtomicI64::new(config.slowlog_log_slower_than),
            slowlog_max_len: AtomicU64::new(config.slowlog_max_len),
            latency_monitor_threshold: AtomicU64::new(config.latency_monitor_threshold),
        };
        settings.set_requirepass(config.requirepass.as_deref().map(str::as_bytes));
        settings
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
}

pub struct Shared {
    pub config: Config,
    pub pubsub: crate::pubsub::PubSub,
    /// The SQL engine; None if it could not start (SQL commands then say so).
    pub sql: Option<Arc<sql::SqlEngine>>,
    pub tracking: Arc<crate::tracking::Tracking>,
    pub settings: Settings,
    pub store: Arc<store::Store>,
    pub clients: ClientRegistry,
    pub stats: ServerStats,
    /// INFO's instantaneous rates and memory peak.
    pub metrics: crate::metrics::Metrics,
    pub started: Instant,
    pub shutdown: AtomicBool,
    /// MONITOR, SLOWLOG, LATENCY.
    pub observe: Arc<crate::observe::Observe>,
}

impl Shared {
    /// Builds the store and the shared state for `config`.
    pub fn new(config: Config) -> Arc<Shared> {
        let store = store::Store::new(store::StoreConfig {
            shards: (config.threads * 64).clamp(64, 4096),
            maxmemory: config.maxmemory,
            evict: config.maxmemory_policy == MaxmemoryPolicy::Evict,
            background: true,
        });
        let tracking = Arc::new(crate::tracking::Tracking::new(
            store.clone(),
            config.tracking_table_max_keys,
        ));
        store.set_listener(Arc::new(crate::tracking::Listener(tracking.clone())));
        let sql_config = sql::SqlConfig {
            timeout: config.sql_timeout,
            max_result_bytes: config.sql_max_result,
            max_memory: config.sql_maxmemory,
            ..sql::SqlConfig::default()
        };
        let sql = match sql::SqlEngine::new(sql_config) {
            Ok(engine) => Some(engine),
            Err(e) => {
                tracing::error!("SQL engine did not start: {e}");
                None
            }
        };
        let shared = Arc::new(Shared {
            pubsub: crate::pubsub::PubSub::default(),
            sql,
            tracking,
            settings: Settings::new(&config),
            config,
            store,
            clients: ClientRegistry::default(),
            stats: ServerStats::default(),
            metrics: crate::metrics::Metrics::default(),
            started: Instant::now(),
            shutdown: AtomicBool::new(false),
            observe: Arc::default(),
        });
        // The store's expiry rounds and evictions, timed for LATENCY.
        shared
            .store
            .set_cycle_observer(Arc::new(crate::observe::StoreCycles(Arc::downgrade(
                &shared,
            ))));
        crate::metrics::Metrics::start(&shared);
        shared
    }
}
