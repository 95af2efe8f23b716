//! Table-style tests of RESP commands through the in-process harness (`crate::testkit`):
//! option parsing, error messages and reply shapes, in RESP2 and RESP3. For Redis commands the
//! expected replies are what redis-server 7 answers to the same rows (checked against it); the
//! cairn-only commands (TAG.*, SQL.*) state cairn's own contract.
//!
//! The files are tables, one row a line: rustfmt leaves them as written.

#[rustfmt::skip]
mod hashes;
#[rustfmt::skip]
mod introspect;
#[rustfmt::skip]
mod keys;
#[rustfmt::skip]
mod scripting;
#[rustfmt::skip]
mod server;
#[rustfmt::skip]
mod sql;
#[rustfmt::skip]
mod strings;
#[rustfmt::skip]
mod tags;
// Not a table: the SQL change log replayed on a second server.
mod sql_log;
