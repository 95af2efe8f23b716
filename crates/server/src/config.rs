//! Configuration (stub, being written).
pub struct Config;
