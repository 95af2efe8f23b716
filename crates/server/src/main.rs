//! The `cairn-server` binary: parses configuration and runs the server until a signal stops it.
fn main() {}
