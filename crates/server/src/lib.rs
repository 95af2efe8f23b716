//! cairn-server: listeners, connections, threads and the command table over the store.

pub mod allocator;
pub mod blocking;
pub mod busy;
pub mod clients;
pub mod command;
pub mod config;
pub mod daemon;
pub mod exporter;
pub mod health;
pub mod keyspace;
pub mod memcached;
pub mod memory;
pub mod net;
pub mod observe;
pub mod protocol;
pub mod pubsub;
pub mod replica_link;
pub mod replication;
#[cfg(test)]
mod resp_cases;
pub mod scripts;
pub mod session;
pub mod shared;
pub mod snapshot;
pub mod sql_changes;
pub mod stats;
#[cfg(test)]
mod testkit;
pub mod tracking;
pub mod wb_sink;
pub mod wb_tap;
