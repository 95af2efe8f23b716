//! Framing one request off the front of the read buffer, and the classic text commands.

use crate::number::{parse_i32, parse_u32, parse_u64};
use crate::parse_meta::parse_meta;
use crate::request::{Error, Keys, Parsed, Request, StoreKind, MAX_KEY_LEN};

/// Longest unterminated line memcached buffers before closing the connection;
/// `get`/`gets` lines are exempt (multigets are unbounded there too).
pub const MAX_LINE_LEN: usize = 2048;

const BAD_FORMAT: &str = "bad command line format";

/// Parses the request at the front of `buf`.
///
/// `max_value_size` caps data blocks: a longer one is answered with
/// [`Error::TooLarge`] as soon as its command line is read, so the server never
/// buffers more than one line plus `max_value_size + 2` bytes for a request.
/// Lines end at `\n`, with an optional `\r` before it; data blocks must be
/// followed by exactly `\r\n`.
pub fn parse(buf: &[u8], max_value_size: usize) -> Result<Parsed<'_>, Error> {
    if buf.first() == Some(&BINARY_REQUEST_MAGIC) {
        return binary(buf);
    }
    let Some(nl) = memchr::memchr(b'\n', buf) else {
        return unterminated(buf);
    };
    let line = &buf[..nl];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let cx = Ctx {
        buf,
        end: nl + 1,
        max_value_size,
    };
    let mut args = Keys::new(line);
    let Some(cmd) = args.next() else {
        return Err(cx.unknown());
    };
    match cmd {
        b"get" | b"bget" => retrieval(cx, args, false, false),
        b"gets" => retrieval(cx, args, true, false),
        b"gat" => retrieval(cx, args, false, true),
        b"gats" => retrieval(cx, args, true, true),
        b"set" => storage(cx, args, StoreKind::Set),
        b"add" => storage(cx, args, StoreKind::Add),
        b"replace" => storage(cx, args, StoreKind::Replace),
        b"append" => storage(cx, args, StoreKind::Append),
        b"prepend" => storage(cx, args, StoreKind::Prepend),
        b"cas" => storage(cx, args, StoreKind::Cas),
        b"delete" => delete(cx, args),
        b"incr" => arithmetic(cx, args, true),
        b"decr" => arithmetic(cx, args, false),
        b"touch" => touch(cx, args),
        b"flush_all" => flush_all(cx, args),
        b"verbosity" => verbosity(cx, args),
        b"cache_memlimit" => cache_memlimit(cx, args),
        b"version" => Ok(cx.done(Request::Version)),
        b"quit" => Ok(cx.done(Request::Quit)),
        b"stats" => {
            let group = args.next();
            Ok(cx.done(Request::Stats { group, args }))
        }
        [b'm', sub] => parse_meta(cx, *sub, args),
        _ if is_http(line) => Err(Error::Client {
            msg: "HTTP request",
            consumed: buf.len(),
            noreply: true,
            close: true,
        }),
        _ => Err(cx.unknown()),
    }
}

/// First byte of a binary-protocol request.
const BINARY_REQUEST_MAGIC: u8 = 0x80;
/// Size of a binary-protocol header.
const BINARY_HEADER_LEN: usize = 24;

/// A binary-protocol packet: memcached's text-only mode stays silent until a newline comes by
/// chance; a clear "not supported" answer in the client's own framing, then a close, is more
/// useful. Waits for the whole header so that the answer can echo its opcode and opaque.
fn binary(buf: &[u8]) -> Result<Parsed<'_>, Error> {
    let Some(header) = buf.get(..BINARY_HEADER_LEN) else {
        return Ok(Parsed::Incomplete {
            need: Some(BINARY_HEADER_LEN),
        });
    };
    Err(Error::Binary {
        opcode: header[1],
        opaque: u32::from_be_bytes([header[12], header[13], header[14], header[15]]),
        consumed: buf.len(),
    })
}

/// An HTTP request line (`POST / HTTP/1.1`), most likely a browser talked into attacking the
/// cache (cross-protocol scripting): memcached closes the connection without a reply.
fn is_http(line: &[u8]) -> bool {
    line.split(|&b| b == b' ')
        .rfind(|t| !t.is_empty())
        .is_some_and(|last| last.starts_with(b"HTTP/"))
}

/// No newline yet: wait, unless the line has outgrown what memcached tolerates.
fn unterminated(buf: &[u8]) -> Result<Parsed<'_>, Error> {
    if buf.len() <= MAX_LINE_LEN {
        return Ok(Parsed::Incomplete { need: None });
    }
    let spaces = buf.iter().take_while(|&&b| b == b' ').count();
    let rest = &buf[spaces..];
    if spaces <= 100 && (rest.starts_with(b"get ") || rest.starts_with(b"gets ")) {
        return Ok(Parsed::Incomplete { need: None });
    }
    Err(Error::Client {
        msg: "line too long",
        consumed: buf.len(),
        noreply: false,
        close: true,
    })
}

/// The buffer and the extent of the current command line.
#[derive(Clone, Copy)]
pub(crate) struct Ctx<'a> {
    pub buf: &'a [u8],
    /// Offset just past the line's `\n`.
    pub end: usize,
    pub max_value_size: usize,
}

/// Where a data block stands.
pub(crate) enum Block<'a> {
    Ready(&'a [u8], usize),
    Pending(usize),
}

impl<'a> Ctx<'a> {
    pub fn done(&self, req: Request<'a>) -> Parsed<'a> {
        Parsed::Complete(req, self.end)
    }

    pub fn unknown(&self) -> Error {
        Error::UnknownCommand { consumed: self.end }
    }

    pub fn client(&self, msg: &'static str, noreply: bool) -> Error {
        Error::Client {
            msg,
            consumed: self.end,
            noreply,
            close: false,
        }
    }

    /// Offset just past `<data>\r\n` of a `vlen`-byte block.
    pub fn block_end(&self, vlen: usize) -> usize {
        self.end.saturating_add(vlen).saturating_add(2)
    }

    /// The data block after the line. Like memcached, an oversized block is
    /// refused before it arrives and swallowed, and a block not followed by
    /// `\r\n` is consumed whole before being refused.
    pub fn block(&self, vlen: usize, noreply: bool) -> Result<Block<'a>, Error> {
        let total = self.block_end(vlen);
        if vlen > self.max_value_size {
            return Err(Error::TooLarge {
                consumed: total,
                noreply,
            });
        }
        let Some(block) = self.buf.get(self.end..total) else {
            return Ok(Block::Pending(total));
        };
        match block.split_last_chunk::<2>() {
            Some((data, b"\r\n")) => Ok(Block::Ready(data, total)),
            _ => Err(Error::Client {
                msg: "bad data chunk",
                consumed: total,
                noreply,
                close: false,
            }),
        }
    }
}

/// The first `N` tokens and the count of all of them, without allocating.
pub(crate) fn take<const N: usize>(args: Keys<'_>) -> ([&[u8]; N], usize) {
    let mut toks: [&[u8]; N] = [&[]; N];
    let mut n = 0;
    for t in args {
        if let Some(slot) = toks.get_mut(n) {
            *slot = t;
        }
        n += 1;
    }
    (toks, n)
}

/// protocol.txt: at most 250 bytes, no control characters (the tokenizer already split on spaces).
pub(crate) fn text_key_ok(key: &[u8]) -> bool {
    key.len() <= MAX_KEY_LEN && key.iter().all(|&b| b > b' ' && b != 0x7f)
}

/// memcached honours `noreply` wherever it ends the line, even when the line is otherwise bad.
fn noreply_last(toks: &[&[u8]], n: usize) -> bool {
    n.checked_sub(1)
        .and_then(|i| toks.get(i))
        .is_some_and(|t| *t == b"noreply")
}

fn retrieval<'a>(
    cx: Ctx<'a>,
    mut args: Keys<'a>,
    with_cas: bool,
    touch: bool,
) -> Result<Parsed<'a>, Error> {
    let Some(first) = args.clone().next() else {
        return Err(cx.unknown());
    };
    if !touch {
        if !args.clone().all(text_key_ok) {
            return Err(cx.client(BAD_FORMAT, false));
        }
        return Ok(cx.done(Request::Get {
            keys: args,
            with_cas,
        }));
    }
    args.next();
    let Some(exptime) = parse_i32(first) else {
        return Err(cx.client("invalid exptime argument", false));
    };
    if !args.clone().all(text_key_ok) {
        return Err(cx.client(BAD_FORMAT, false));
    }
    Ok(cx.done(Request::GetAndTouch {
        exptime: i64::from(exptime),
        keys: args,
        with_cas,
    }))
}

fn storage<'a>(cx: Ctx<'a>, args: Keys<'a>, kind: StoreKind) -> Result<Parsed<'a>, Error> {
    let (t, n) = take::<6>(args);
    let want = if kind == StoreKind::Cas { 5 } else { 4 };
    if n != want && n != want + 1 {
        return Err(cx.unknown());
    }
    let noreply = noreply_last(&t, n);
    let bad = || cx.client(BAD_FORMAT, noreply);
    if !text_key_ok(t[0]) {
        return Err(bad());
    }
    let (Some(flags), Some(exptime), Some(vlen)) =
        (parse_u32(t[1]), parse_i32(t[2]), parse_i32(t[3]))
    else {
        return Err(bad());
    };
    let cas_unique = if kind == StoreKind::Cas {
        parse_u64(t[4]).ok_or_else(bad)?
    } else {
        0
    };
    // memcached adds 2 for the trailing \r\n in an int, hence the upper bound.
    let Some(vlen) = usize::try_from(vlen)
        .ok()
        .filter(|&v| v <= i32::MAX as usize - 2)
    else {
        return Err(bad());
    };
    match cx.block(vlen, noreply)? {
        Block::Pending(need) => Ok(Parsed::Incomplete { need: Some(need) }),
        Block::Ready(data, total) => Ok(Parsed::Complete(
            Request::Store {
                kind,
                key: t[0],
                flags,
                exptime: i64::from(exptime),
                data,
                cas_unique,
                noreply,
            },
            total,
        )),
    }
}

fn delete<'a>(cx: Ctx<'a>, args: Keys<'a>) -> Result<Parsed<'a>, Error> {
    let (t, n) = take::<3>(args);
    if n == 0 || n > 3 {
        return Err(cx.unknown());
    }
    let noreply = n > 1 && noreply_last(&t, n);
    if n > 1 {
        // A hold time is a relic; memcached still tolerates a literal 0.
        let hold_zero = t[1] == b"0";
        let valid = (n == 2 && (hold_zero || noreply)) || (n == 3 && hold_zero && noreply);
        if !valid {
            return Err(cx.client(
                "bad command line format.  Usage: delete <key> [noreply]",
                noreply,
            ));
        }
    }
    if !text_key_ok(t[0]) {
        return Err(cx.client(BAD_FORMAT, noreply));
    }
    Ok(cx.done(Request::Delete { key: t[0], noreply }))
}

fn arithmetic<'a>(cx: Ctx<'a>, args: Keys<'a>, incr: bool) -> Result<Parsed<'a>, Error> {
    let (t, n) = take::<3>(args);
    if n != 2 && n != 3 {
        return Err(cx.unknown());
    }
    let noreply = noreply_last(&t, n);
    if !text_key_ok(t[0]) {
        return Err(cx.client(BAD_FORMAT, noreply));
    }
    let Some(delta) = parse_u64(t[1]) else {
        return Err(cx.client("invalid numeric delta argument", noreply));
    };
    let key = t[0];
    Ok(cx.done(if incr {
        Request::Incr {
            key,
            delta,
            noreply,
        }
    } else {
        Request::Decr {
            key,
            delta,
            noreply,
        }
    }))
}

fn touch<'a>(cx: Ctx<'a>, args: Keys<'a>) -> Result<Parsed<'a>, Error> {
    let (t, n) = take::<3>(args);
    if n != 2 && n != 3 {
        return Err(cx.unknown());
    }
    let noreply = noreply_last(&t, n);
    if !text_key_ok(t[0]) {
        return Err(cx.client(BAD_FORMAT, noreply));
    }
    let Some(exptime) = parse_i32(t[1]) else {
        return Err(cx.client("invalid exptime argument", noreply));
    };
    Ok(cx.done(Request::Touch {
        key: t[0],
        exptime: i64::from(exptime),
        noreply,
    }))
}

fn flush_all<'a>(cx: Ctx<'a>, args: Keys<'a>) -> Result<Parsed<'a>, Error> {
    let (t, n) = take::<2>(args);
    if n > 2 {
        return Err(cx.unknown());
    }
    let noreply = noreply_last(&t, n);
    // Like memcached: a lone "noreply" means no delay; otherwise the first token is the delay.
    let delay = if n != usize::from(noreply) {
        match parse_i32(t[0]) {
            Some(d) => i64::from(d),
            None => return Err(cx.client("invalid exptime argument", noreply)),
        }
    } else {
        0
    };
    Ok(cx.done(Request::FlushAll { delay, noreply }))
}

/// As memcached: a missing or non-numeric size is an unknown command (`ERROR`); tokens after
/// the size are ignored unless the last is `noreply`.
fn cache_memlimit<'a>(cx: Ctx<'a>, args: Keys<'a>) -> Result<Parsed<'a>, Error> {
    let mut args = args;
    let Some(megabytes) = args.next().and_then(parse_u32) else {
        return Err(cx.unknown());
    };
    let noreply = args.last() == Some(b"noreply");
    Ok(cx.done(Request::CacheMemlimit { megabytes, noreply }))
}

fn verbosity<'a>(cx: Ctx<'a>, args: Keys<'a>) -> Result<Parsed<'a>, Error> {
    let (t, n) = take::<2>(args);
    if n != 1 && n != 2 {
        return Err(cx.unknown());
    }
    let noreply = noreply_last(&t, n);
    let Some(level) = parse_u32(t[0]) else {
        return Err(cx.client(BAD_FORMAT, noreply));
    };
    Ok(cx.done(Request::Verbosity { level, noreply }))
}
