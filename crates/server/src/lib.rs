//! cairn-server: listeners, connections, threads and the command table over the store.

pub mod clients;
pub mod command;
pub mod config;
pub mod memcached;
pub mod metrics;
pub mod net;
pub mod observe;
pub mod pubsub;
pub mod session;
pub mod shared;
pub mod tracking;
