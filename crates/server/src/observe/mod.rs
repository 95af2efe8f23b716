//! The operator's views of the command path: MONITOR (every command as it runs), SLOWLOG (the
//! slowest commands) and LATENCY (the worst latency of each event, per second).
//!
//! This module holds what they remember and how they format it; it sits below the command
//! layer and knows no command. The command path feeds it (`command::observe_hook`, run by
//! `command::call` for every command of every protocol and caller), the commands MONITOR,
//! SLOWLOG and LATENCY read it (`command::observe_cmd`), and the store's own work (expiry,
//! eviction) reaches the latency monitor through `store::CycleObserver` (`shared::StoreCycles`).

pub mod latency;
pub mod monitor;
pub mod slowlog;

/// What the server remembers for its operator: monitoring clients, the slow log, latency.
#[derive(Default)]
pub struct Observe {
    pub monitors: monitor::Monitors,
    pub slowlog: slowlog::SlowLog,
    pub latency: latency::LatencyMonitor,
}

/// What Redis shows in place of a secret argument (AUTH's password...).
pub const REDACTED: &[u8] = b"(redacted)";
