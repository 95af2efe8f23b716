//! cairn-server: listeners, connections, threads and the command table over the store.

pub mod clients;
pub mod config;
pub mod net;
pub mod session;
pub mod shared;
