//! State shared by every thread of the server: configuration, the store, clients and counters.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::RwLock;

use crate::clients::ClientRegistry;
use crate::config::{Config, MaxmemoryPolicy};
use crate::stats::metrics::Metrics;
use crate::stats::ServerStats;

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
    pub metrics: Metrics,
    /// The pending delayed memcached `flush_all`, if any.
    pub flush_timer: Arc<crate::keyspace::FlushTimer>,
    pub started: Instant,
    pub shutdown: AtomicBool,
}

impl Shared {
    /// Builds the store and the shared state for `config`.
    pub fn new(config: Config) -> Arc<Shared> {
        let store = store::Store::new(store::StoreConfig {
            shards: (config.threads * 64).clamp(64, 4096),
            maxmemory: config.maxmemory,
            evict: config.maxmemory_policy == MaxmemoryPolicy::Evict,
            background: true,
            change_backlog: config.changes_backlog_size,
        });
        let tracking = Arc::new(crate::tracking::Tracking::new(
            store.clone(),
            config.tracking_table_max_keys,
        ));
        store.set_tap(Arc::new(crate::tracking::Listener(tracking.clone())));
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
            metrics: Metrics::default(),
            flush_timer: Arc::default(),
            started: Instant::now(),
            shutdown: AtomicBool::new(false),
        });
        let weak = Arc::downgrade(&shared);
        crate::stats::metrics::start(move || {
            let Some(shared) = weak.upgrade() else {
                return false;
            };
            let s = &shared.stats;
            shared.metrics.sample(
                s.total_commands_processed.load(Ordering::Relaxed),
                s.net_input_bytes.load(Ordering::Relaxed),
                s.net_output_bytes.load(Ordering::Relaxed),
                used_memory(&shared),
            );
            true
        });
        shared
    }
}

/// The memory INFO reports as `used_memory`, whose peak is tracked.
pub fn used_memory(shared: &Shared) -> u64 {
    // Client buffers count as Redis counts them: in used_memory and against maxmemory; the
    // change backlog in used_memory only (it has its own bound).
    shared.store.used_memory()
        + shared.store.external_memory()
        + shared.store.change_backlog_memory()
}
