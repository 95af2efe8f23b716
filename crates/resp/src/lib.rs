//! RESP wire protocol: request parsing (server side), reply encoding, and reply parsing (client side).
//!
//! Everything here works on byte slices and caller-owned buffers so that the
//! server's hot path neither allocates nor copies payloads, and no input,
//! however malformed, can make these functions panic.

mod error;
mod num;
pub mod reply;
pub mod request;
pub mod value;

pub use error::ProtocolError;
