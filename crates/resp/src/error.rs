//! The one error type shared by request parsing and reply parsing.

use std::fmt;

/// A malformed frame. The connection cannot be resynchronised after one, so
/// the server replies with it and closes (as Redis does).
///
/// The message is complete but carries neither the `-ERR ` prefix nor the
/// trailing CRLF, e.g. `Protocol error: invalid multibulk length`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError(pub String);

impl ProtocolError {
    pub(crate) fn new(msg: &str) -> Self {
        ProtocolError(msg.to_owned())
    }

    /// Appends the reply Redis sends for this error: `-ERR <message>\r\n`.
    pub fn write_reply(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"-ERR ");
        crate::reply::line_body(out, self.0.as_bytes());
    }
}

/// Shows a byte from the input inside a message. Redis prints it with `%c`
/// and then turns CR/LF into spaces; a `String` cannot hold a raw non-ASCII
/// byte, so those are shown as `\xHH` instead.
pub(crate) fn push_byte(msg: &mut String, b: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    match b {
        b'\r' | b'\n' => msg.push(' '),
        b if b.is_ascii() => msg.push(char::from(b)),
        b => {
            msg.push_str("\\x");
            msg.push(char::from(HEX[usize::from(b >> 4)]));
            msg.push(char::from(HEX[usize::from(b & 0xf)]));
        }
    }
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ProtocolError {}
