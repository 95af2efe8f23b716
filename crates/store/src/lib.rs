//! store (stub)
pub struct Store;
