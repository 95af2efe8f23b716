//! The parsed form of one request, and every outcome `parse` can report.

use std::fmt;

use crate::meta_flags::MetaFlags;
use crate::response;

/// Longest key memcached accepts, in bytes (as sent on the wire, so before base64 decoding).
pub const MAX_KEY_LEN: usize = 250;

/// Which storage command a [`Request::Store`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StoreKind {
    Set,
    Add,
    Replace,
    Append,
    Prepend,
    Cas,
}

/// Direction of a meta arithmetic (`ma`) request, from its `M` flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArithMode {
    Incr,
    Decr,
}

/// Space-separated tokens of a request line, yielded without allocating.
///
/// Used for the keys of `get`/`gets`/`gat`/`gats` (every key already checked
/// against [`MAX_KEY_LEN`] and for control bytes) and for `stats` arguments.
#[derive(Clone, Default)]
pub struct Keys<'a> {
    rest: &'a [u8],
}

impl<'a> Keys<'a> {
    pub(crate) fn new(rest: &'a [u8]) -> Self {
        Keys { rest }
    }

    /// The not yet yielded part of the line, leading spaces stripped.
    pub fn remainder(&self) -> &'a [u8] {
        let start = self
            .rest
            .iter()
            .position(|&b| b != b' ')
            .unwrap_or(self.rest.len());
        &self.rest[start..]
    }

    /// True when no token is left.
    pub fn is_empty(&self) -> bool {
        self.remainder().is_empty()
    }
}

impl<'a> Iterator for Keys<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let rest = self.remainder();
        if rest.is_empty() {
            self.rest = rest;
            return None;
        }
        let end = memchr::memchr(b' ', rest).unwrap_or(rest.len());
        let (tok, tail) = rest.split_at(end);
        self.rest = tail;
        Some(tok)
    }
}

// Equal when they yield the same tokens: spacing on the wire is not meaning.
impl PartialEq for Keys<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.clone().eq(other.clone())
    }
}

impl Eq for Keys<'_> {}

impl fmt::Debug for Keys<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.clone().map(Escaped)).finish()
    }
}

/// Shows bytes as an escaped string literal, keys and tokens being mostly text.
pub(crate) struct Escaped<'a>(pub &'a [u8]);

impl fmt::Debug for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{}\"", self.0.escape_ascii())
    }
}

/// One complete client request, borrowing keys and data from the read buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request<'a> {
    /// `get <key>*` / `gets <key>*` (and memcached's undocumented alias `bget`).
    Get {
        keys: Keys<'a>,
        with_cas: bool,
    },
    /// `gat <exptime> <key>*` / `gats ...`. memcached accepts zero keys here and answers `END`.
    GetAndTouch {
        exptime: i64,
        keys: Keys<'a>,
        with_cas: bool,
    },
    /// `set|add|replace|append|prepend <key> <flags> <exptime> <bytes> [noreply]`
    /// and `cas ... <cas unique> [noreply]`, data block included. `cas_unique` is 0 unless `kind` is `Cas`.
    Store {
        kind: StoreKind,
        key: &'a [u8],
        flags: u32,
        exptime: i64,
        data: &'a [u8],
        cas_unique: u64,
        noreply: bool,
    },
    /// `delete <key> [0] [noreply]` (the legacy hold time is accepted only as `0`).
    Delete {
        key: &'a [u8],
        noreply: bool,
    },
    Incr {
        key: &'a [u8],
        delta: u64,
        noreply: bool,
    },
    Decr {
        key: &'a [u8],
        delta: u64,
        noreply: bool,
    },
    Touch {
        key: &'a [u8],
        exptime: i64,
        noreply: bool,
    },
    /// `flush_all [delay] [noreply]`; `delay` is 0 when absent, and may be negative (memcached treats <= 0 as now).
    FlushAll {
        delay: i64,
        noreply: bool,
    },
    Version,
    Verbosity {
        level: u32,
        noreply: bool,
    },
    /// `cache_memlimit <megabytes> [noreply]`: changes the memory limit.
    CacheMemlimit {
        megabytes: u32,
        noreply: bool,
    },
    /// `stats [group [args...]]`; `args` holds the tokens after `group`.
    Stats {
        group: Option<&'a [u8]>,
        args: Keys<'a>,
    },
    Quit,
    /// `mg <key> <flags>*`. `key` is as sent: base64 text when `flags.has(b'b')`.
    MetaGet {
        key: &'a [u8],
        flags: MetaFlags<'a>,
    },
    /// `ms <key> <datalen> <flags>*` plus its data block.
    MetaSet {
        key: &'a [u8],
        data: &'a [u8],
        flags: MetaFlags<'a>,
    },
    MetaDelete {
        key: &'a [u8],
        flags: MetaFlags<'a>,
    },
    MetaArithmetic {
        key: &'a [u8],
        flags: MetaFlags<'a>,
    },
    /// `mn`: answer `MN\r\n`.
    MetaNoop,
    /// `me <key> [b]`: `flags` holds only the `b` flag, if sent; other tokens are ignored as memcached does.
    MetaDebug {
        key: &'a [u8],
        flags: MetaFlags<'a>,
    },
}

/// What [`crate::parse`] found at the front of the buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed<'a> {
    /// A request and how many bytes of the buffer it took.
    Complete(Request<'a>, usize),
    /// Not a whole request yet. `need`, when known, is the total buffer length
    /// (from the same start) at which the request will be whole; `None` means
    /// "at least one more byte, until a newline shows up".
    Incomplete { need: Option<usize> },
}

/// A request the server must refuse. Every variant consumes at least one byte,
/// so a caller that drops `consumed()` bytes always makes progress.
///
/// `consumed` may exceed the buffer's length when memcached would swallow a
/// data block that has not arrived yet (oversized values, `ms` with bad
/// flags): drop what is buffered and discard the rest as it arrives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// `ERROR\r\n`: unknown command, or a known one with the wrong number of tokens.
    UnknownCommand { consumed: usize },
    /// `CLIENT_ERROR <msg>\r\n`. `noreply`: the text command asked for no reply,
    /// and memcached stays silent even on errors then (meta commands always
    /// report errors). `close`: memcached drops the connection; it writes
    /// nothing first, so `msg` is for logs.
    Client {
        msg: &'static str,
        consumed: usize,
        noreply: bool,
        close: bool,
    },
    /// `SERVER_ERROR object too large for cache\r\n`: the data block is longer
    /// than `max_value_size`; `consumed` covers the line and the whole block.
    TooLarge { consumed: usize, noreply: bool },
    /// A binary-protocol request (magic byte 0x80): answered with a binary "not supported"
    /// response echoing `opcode` and `opaque`, then the connection is closed.
    Binary {
        opcode: u8,
        opaque: u32,
        consumed: usize,
    },
}

impl Error {
    /// Bytes to drop from the input stream, starting at the request's first byte.
    pub fn consumed(&self) -> usize {
        match *self {
            Error::UnknownCommand { consumed }
            | Error::Client { consumed, .. }
            | Error::TooLarge { consumed, .. }
            | Error::Binary { consumed, .. } => consumed,
        }
    }

    /// Whether the connection must be closed after this error.
    pub fn close(&self) -> bool {
        matches!(
            self,
            Error::Client { close: true, .. } | Error::Binary { .. }
        )
    }

    /// Appends the reply memcached sends for this error: nothing under noreply or when closing.
    pub fn write_reply(&self, out: &mut Vec<u8>) {
        match *self {
            Error::UnknownCommand { .. } => response::error(out),
            Error::Client {
                msg,
                noreply: false,
                close: false,
                ..
            } => response::client_error(out, msg),
            Error::TooLarge { noreply: false, .. } => {
                response::server_error(out, "object too large for cache")
            }
            Error::Binary { opcode, opaque, .. } => {
                response::binary_not_supported(out, opcode, opaque)
            }
            Error::Client { .. } | Error::TooLarge { .. } => {}
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::UnknownCommand { .. } => f.write_str("ERROR"),
            Error::Client { msg, .. } => write!(f, "CLIENT_ERROR {msg}"),
            Error::TooLarge { .. } => f.write_str("SERVER_ERROR object too large for cache"),
            Error::Binary { .. } => f.write_str("binary protocol request (not supported)"),
        }
    }
}

impl std::error::Error for Error {}
