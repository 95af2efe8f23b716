//! State shared by every thread of the server: configuration, the store, clients and counters.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::clients::ClientRegistry;
use crate::config::Config;
/// The run-time settings live with the settings table (`config`); re-exported where the rest
/// of the server has always found them.
pub use crate::config::Settings;
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
    /// Clients blocked in BLPOP / BRPOP / BLMOVE.
    pub blocking: Arc<crate::blocking::Blocking>,
    /// Snapshots: saving, loading, INFO persistence.
    pub persistence: Arc<crate::snapshot::Persistence>,
    /// Lua scripting's cache, running script and gates.
    pub scripts: crate::scripts::Scripts,
    /// Write-behind to databases (docs/writebehind.md).
    pub writeback: Arc<writeback::Engine>,
    /// Replication: the role, the stream, the replicas (docs/replication.md).
    pub replication: Arc<crate::replication::Replication>,
    /// Whether to send traffic here (`/readyz`, systemd's READY=1): loading registers its
    /// check below; replication registers one for a replica that has not synced.
    pub readiness: crate::health::Readiness,
}

impl Shared {
    /// Builds the store and the shared state for `config`.
    pub fn new(config: Config) -> Arc<Shared> {
        let store = store::Store::new(store::StoreConfig {
            shards: (config.threads * 64).clamp(64, 4096),
            maxmemory: config.maxmemory,
            policy: config.maxmemory_policy,
            background: true,
            change_backlog: config.changes_backlog_size,
            cas: config.cas,
        });
        let tracking = Arc::new(crate::tracking::Tracking::new(
            store.clone(),
            config.tracking_table_max_keys,
        ));
        let writeback = writeback::Engine::new(writeback::EngineSettings {
            dir: config.persist.dir.clone(),
            fsync: config.wb_fsync,
            max_bytes: config.wb_max_bytes,
            on_full: config.wb_on_full,
        });
        writeback.set_sink(Arc::new(crate::wb_sink::StoreSink(store.clone())));
        for mapping in &config.writeback {
            // A log that cannot be opened is fatal: writes to its keys could not be kept.
            if let Err(e) = writeback.add(mapping.clone()) {
                tracing::error!("write-behind mapping {}: {e}", mapping.name);
                eprintln!("write-behind mapping {}: {e}", mapping.name);
                std::process::exit(1);
            }
        }
        store.set_listening(store::Listener::WriteBack, writeback.active());
        let taps = Arc::new(crate::wb_tap::Taps {
            store: store.clone(),
            tracking: crate::tracking::Listener(tracking.clone()),
            writeback: writeback.clone(),
            replication: std::sync::OnceLock::new(),
        });
        store.set_tap(taps.clone());
        let sql_config = sql::SqlConfig {
            timeout: config.sql_timeout,
            max_result_bytes: config.sql_max_result,
            max_memory: config.sql_maxmemory,
            inline_steps: config.sql_inline_steps,
            ..sql::SqlConfig::default()
        };
        let sql = match sql::SqlEngine::new(sql_config) {
            Ok(engine) => {
                // SQL tables change in the change stream too (their own log).
                engine.set_change_sink(Arc::new(crate::sql_changes::SqlChanges(
                    store.clone(),
                    writeback.clone(),
                )));
                Some(engine)
            }
            Err(e) => {
                tracing::error!("SQL engine did not start: {e}");
                None
            }
        };
        let persistence = crate::snapshot::Persistence::new(store.clone(), sql.clone());
        // About one gate per thread that runs commands: event loops, dispatch workers.
        let scripts = crate::scripts::Scripts::new(config.threads.max(config.workers) + 1);
        let settings = Settings::new(&config, store.clone(), writeback.clone());
        let replication = crate::replication::Replication::new(
            store.clone(),
            sql.clone(),
            persistence.clone(),
            settings.repl.clone(),
        );
        let _ = taps.replication.set(replication.clone());
        let shared = Arc::new(Shared {
            replication,
            persistence,
            pubsub: crate::pubsub::PubSub::default(),
            sql,
            tracking,
            settings,
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
            blocking: Arc::default(),
            scripts,
            readiness: crate::health::Readiness::default(),
        });
        let persistence = Arc::downgrade(&shared.persistence);
        shared.readiness.register(
            "loading",
            Box::new(move || {
                let loading = persistence.upgrade().is_some_and(|p| p.loading());
                loading.then(|| "loading the snapshot".into())
            }),
        );
        let replication = Arc::downgrade(&shared.replication);
        shared.readiness.register(
            "replication",
            Box::new(move || {
                let r = replication.upgrade()?;
                let syncing =
                    r.is_replica() && !r.link_up.load(std::sync::atomic::Ordering::Relaxed);
                syncing.then(|| "not in sync with its primary".into())
            }),
        );
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
            let repl_in = shared.replication.received_bytes.load(Ordering::Relaxed);
            let repl_out = shared.replication.sent_bytes.load(Ordering::Relaxed);
            let counters = crate::stats::metrics::Counters {
                commands: s.total_commands_processed.load(Ordering::Relaxed),
                input_bytes: s.net_input_bytes.load(Ordering::Relaxed) + repl_in,
                output_bytes: s.net_output_bytes.load(Ordering::Relaxed) + repl_out,
                repl_input_bytes: repl_in,
                repl_output_bytes: repl_out,
            };
            shared.metrics.sample(counters, used_memory(&shared));
            true
        });
        start_save_rules(Arc::downgrade(&shared));
        shared
    }

    /// Where snapshots go now, and the save delay test aid (the settings may change).
    pub fn snapshot_target(&self) -> (crate::snapshot::Target, u64) {
        let p = self.settings.persist.read();
        let target = crate::snapshot::Target {
            dir: p.dir.clone(),
            file: p.dbfilename.clone(),
        };
        (target, p.rdb_key_save_delay)
    }

    /// Starts a background save (BGSAVE, the `save` rules).
    pub fn bgsave(&self) -> Result<(), &'static str> {
        let (target, delay) = self.snapshot_target();
        self.persistence.bgsave(target, delay)
    }

    /// Whether writes are refused with -MISCONF: a background save failed while save rules
    /// are set and `stop-writes-on-bgsave-error` is yes (Redis's condition).
    pub fn writes_refused(&self) -> bool {
        self.persistence.last_bgsave_failed() && {
            let p = self.settings.persist.read();
            p.stop_writes_on_bgsave_error && !p.save.is_empty()
        }
    }
}

/// The `save` rules' clock: ten times a second, starts a background save when a rule is due
/// (or one was scheduled by BGSAVE SCHEDULE). Holds the server weakly.
fn start_save_rules(weak: std::sync::Weak<Shared>) {
    let spawned = std::thread::Builder::new()
        .name("cairn-save-rules".into())
        .spawn(move || loop {
            std::thread::sleep(std::time::Duration::from_millis(100));
            let Some(shared) = weak.upgrade() else {
                return;
            };
            let p = &shared.persistence;
            let rules = shared.settings.persist.read().save.clone();
            let scheduled = p.bgsave_scheduled.load(Ordering::Relaxed);
            let due = (scheduled && !p.bgsave_in_progress() && !p.loading()) || p.rules_due(&rules);
            if due && shared.bgsave().is_ok() {
                p.bgsave_scheduled.store(false, Ordering::Relaxed);
                tracing::info!("background saving started");
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("the save-rules thread did not start (no automatic saves): {e}");
    }
}

/// The memory INFO reports as `used_memory`, whose peak is tracked.
pub fn used_memory(shared: &Shared) -> u64 {
    // Client buffers count as Redis counts them: in used_memory and against maxmemory; the
    // change backlog and the replication backlog in used_memory only (each has its own bound).
    shared.store.used_memory()
        + shared.store.external_memory()
        + shared.store.change_backlog_memory()
        + shared.replication.backlog_memory()
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
