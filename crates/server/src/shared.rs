//! State shared by every thread of the server: configuration, the store, clients and counters.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::clients::ClientRegistry;
/// The run-time settings live with the settings table (`config`); re-exported where the rest
/// of the server has always found them.
pub use crate::config::Settings;
use crate::config::{Config, MaxmemoryPolicy};
use crate::stats::metrics::Metrics;
use crate::stats::ServerStats;

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
    pub metrics: Metrics,
    /// The pending delayed memcached `flush_all`, if any.
    pub flush_timer: Arc<crate::keyspace::FlushTimer>,
    pub started: Instant,
    pub shutdown: AtomicBool,
    /// MONITOR, SLOWLOG, LATENCY.
    pub observe: Arc<crate::observe::Observe>,
    /// Write-behind to databases (docs/writebehind.md).
    pub writeback: Arc<writeback::Engine>,
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
        let writeback = writeback::Engine::new(writeback::EngineSettings {
            dir: config.dir.clone(),
            fsync: config.wb_fsync,
            max_bytes: config.wb_max_bytes,
            on_full: config.wb_on_full,
        });
        for mapping in &config.writeback {
            // A log that cannot be opened is fatal: writes to its keys could not be kept.
            if let Err(e) = writeback.add(mapping.clone()) {
                tracing::error!("write-behind mapping {}: {e}", mapping.name);
                eprintln!("write-behind mapping {}: {e}", mapping.name);
                std::process::exit(1);
            }
        }
        store.set_listening(store::Listener::WriteBack, writeback.active());
        store.set_tap(Arc::new(crate::wb_tap::Taps {
            store: store.clone(),
            tracking: crate::tracking::Listener(tracking.clone()),
            writeback: writeback.clone(),
        }));
        let sql_config = sql::SqlConfig {
            timeout: config.sql_timeout,
            max_result_bytes: config.sql_max_result,
            max_memory: config.sql_maxmemory,
            ..sql::SqlConfig::default()
        };
        let sql = match sql::SqlEngine::new(sql_config) {
            Ok(engine) => {
                // SQL tables change in the change stream too (their own log).
                engine.set_change_sink(Arc::new(crate::sql_changes::SqlChanges(store.clone())));
                Some(engine)
            }
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
            metrics: Metrics::default(),
            flush_timer: Arc::default(),
            started: Instant::now(),
            shutdown: AtomicBool::new(false),
            writeback,
            observe: Arc::default(),
        });
        // The store's expiry rounds and evictions, timed for LATENCY.
        shared
            .store
            .set_cycle_observer(Arc::new(StoreCycles(Arc::downgrade(&shared))));
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

/// Reports the store's own work (expiry rounds, eviction) to the latency monitor. Holds the
/// server weakly: the store must not keep the server alive.
pub struct StoreCycles(pub std::sync::Weak<Shared>);

impl store::CycleObserver for StoreCycles {
    fn cycle_took(&self, cycle: store::Cycle, took: std::time::Duration) {
        let Some(shared) = self.0.upgrade() else {
            return;
        };
        let threshold = shared
            .settings
            .latency_monitor_threshold
            .load(Ordering::Relaxed);
        let event = match cycle {
            store::Cycle::Expire => crate::observe::latency::EXPIRE_CYCLE,
            store::Cycle::Evict => crate::observe::latency::EVICTION_CYCLE,
        };
        shared
            .observe
            .latency
            .sample_if_needed(threshold, event, took.as_millis() as u64);
    }
}
