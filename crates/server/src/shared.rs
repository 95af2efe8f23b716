//! State shared by every thread of the server: configuration, the store, clients and counters.

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::time::Instant;

use crate::clients::ClientRegistry;
use crate::config::Config;

/// Counters reported by INFO and memcached `stats`. Relaxed atomics: they are statistics.
#[derive(Default)]
pub struct ServerStats {
    pub total_connections_received: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub total_commands_processed: AtomicU64,
    pub net_input_bytes: AtomicU64,
    pub net_output_bytes: AtomicU64,
    pub client_output_limit_disconnections: AtomicU64,
}

pub struct Shared {
    pub config: Config,
    pub store: Arc<store::Store>,
    pub clients: ClientRegistry,
    pub stats: ServerStats,
    pub started: Instant,
    pub shutdown: AtomicBool,
}
