//! State shared by every thread of the server: configuration, the store, clients and counters.

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::time::Instant;

use crate::clients::ClientRegistry;
/// The run-time settings live with the settings table (`config`); re-exported where the rest
/// of the server has always found them.
pub use crate::config::Settings;
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

pub struct Shared {
    /// The configuration at start; the running values of mutable settings are in `settings`.
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
            settings: Settings::new(&config, store.clone()),
            config,
            store,
            clients: ClientRegistry::default(),
            stats: ServerStats::default(),
            metrics: crate::metrics::Metrics::default(),
            started: Instant::now(),
            shutdown: AtomicBool::new(false),
        });
        crate::metrics::Metrics::start(&shared);
        shared
    }
}
