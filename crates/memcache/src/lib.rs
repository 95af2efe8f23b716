//! memcached text and meta protocol: request parsing (server side) and response encoding.
//!
//! The crate knows bytes, not storage: [`parse`] turns the front of a read
//! buffer into a [`Request`] that borrows from that buffer, and the functions
//! in [`response`] and [`MetaReply`] append replies to a caller-owned
//! `Vec<u8>`. Nothing here allocates on the hot path, and no input, however
//! malformed, can make it panic.
//!
//! Behaviour follows memcached's `doc/protocol.txt` and, where the document is
//! silent, memcached's `proto_text.c` (error strings, token-count rules, what
//! gets swallowed after an error). Deliberate differences are listed on the
//! items they concern.

mod base64;
mod meta_flags;
mod meta_reply;
mod number;
mod parse;
mod parse_meta;
mod request;
pub mod response;

pub use base64::{decode_base64_key, encode_base64, is_base64_key};
pub use meta_flags::{MetaFlag, MetaFlags, MAX_OPAQUE_LEN};
pub use meta_reply::{MetaCode, MetaDebugReply, MetaReply};
pub use parse::{parse, MAX_LINE_LEN};
pub use request::{ArithMode, Error, Keys, Parsed, Request, StoreKind, MAX_KEY_LEN};
