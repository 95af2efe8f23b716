//! The meta commands: `mg`, `ms`, `md`, `ma`, `mn`, `me`.

use crate::base64::is_base64_key;
use crate::meta_flags::{opaque_too_long, preparse, MetaFlags};
use crate::parse::{text_key_ok, Block, Ctx};
use crate::request::{Error, Keys, Parsed, Request, MAX_KEY_LEN};

const BAD_FORMAT: &str = "bad command line format";

/// memcached refuses meta lines of more than this many tokens, counting the
/// command, the key and its own end-of-line sentinel.
const MAX_META_TOKENS: usize = 20;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Keyed {
    Get,
    Delete,
    Arith,
}

/// `sub` is the second letter of a two-letter command starting with `m`.
pub(crate) fn parse_meta<'a>(cx: Ctx<'a>, sub: u8, args: Keys<'a>) -> Result<Parsed<'a>, Error> {
    match sub {
        // mn takes nothing; memcached ignores anything after it.
        b'n' => Ok(cx.done(Request::MetaNoop)),
        b'e' => debug(cx, args),
        b'g' => keyed(cx, args, Keyed::Get),
        b'd' => keyed(cx, args, Keyed::Delete),
        b'a' => keyed(cx, args, Keyed::Arith),
        b's' => set(cx, args),
        _ => Err(cx.unknown()),
    }
}

/// Length limit on the key as sent; base64 keys are checked by the `b` flag instead of for control bytes.
fn key_ok(key: &[u8], flags: MetaFlags<'_>) -> bool {
    if flags.base64_key() {
        key.len() <= MAX_KEY_LEN
    } else {
        text_key_ok(key)
    }
}

/// Tokens on the line as memcached counts them: those seen so far, the rest, and its end sentinel.
fn token_count(seen: usize, rest: Keys<'_>) -> usize {
    seen + rest.count() + 1
}

fn keyed<'a>(cx: Ctx<'a>, mut args: Keys<'a>, cmd: Keyed) -> Result<Parsed<'a>, Error> {
    let Some(key) = args.next() else {
        return Err(cx.unknown());
    };
    let flags = MetaFlags::new(args.remainder());
    if !key_ok(key, flags) {
        return Err(cx.client(BAD_FORMAT, false));
    }
    if token_count(2, args) > MAX_META_TOKENS {
        // The wording differs between commands in memcached; keep it.
        let msg = match cmd {
            Keyed::Get => "options flags are too long",
            Keyed::Delete | Keyed::Arith => "options flags too long",
        };
        return Err(cx.client(msg, false));
    }
    if let Err(msg) = preparse(flags, key) {
        // md and ma replace the specific reason with a generic one.
        let msg = match cmd {
            Keyed::Get => msg,
            Keyed::Delete | Keyed::Arith => "invalid or duplicate flag",
        };
        return Err(cx.client(msg, false));
    }
    if cmd == Keyed::Arith && !matches!(flags.token(b'M'), None | Some(b"I" | b"+" | b"D" | b"-")) {
        return Err(cx.client("invalid mode for ma M token", false));
    }
    if opaque_too_long(flags) {
        return Err(cx.client("opaque token too long", false));
    }
    Ok(cx.done(match cmd {
        Keyed::Get => Request::MetaGet { key, flags },
        Keyed::Delete => Request::MetaDelete { key, flags },
        Keyed::Arith => Request::MetaArithmetic { key, flags },
    }))
}

fn set<'a>(cx: Ctx<'a>, mut args: Keys<'a>) -> Result<Parsed<'a>, Error> {
    let Some(key) = args.next() else {
        return Err(cx.unknown());
    };
    let datalen = args.next();
    let flags = MetaFlags::new(args.remainder());
    if !key_ok(key, flags) {
        return Err(cx.client(BAD_FORMAT, false));
    }
    let Some(datalen) = datalen else {
        return Err(cx.client(BAD_FORMAT, false));
    };
    if token_count(3, args) > MAX_META_TOKENS {
        return Err(cx.client("options flags too long", false));
    }
    let vlen = crate::number::parse_i32(datalen)
        .and_then(|v| usize::try_from(v).ok())
        .filter(|&v| v <= i32::MAX as usize - 2);
    let Some(vlen) = vlen else {
        return Err(cx.client(BAD_FORMAT, false));
    };
    // From here on memcached knows the block's length, and swallows it along with the error.
    let swallow = |msg| Error::Client {
        msg,
        consumed: cx.block_end(vlen),
        noreply: false,
        close: false,
    };
    preparse(flags, key).map_err(swallow)?;
    if !matches!(
        flags.token(b'M'),
        None | Some(b"E" | b"A" | b"P" | b"R" | b"S")
    ) {
        return Err(swallow("invalid mode for ms M token"));
    }
    if opaque_too_long(flags) {
        return Err(swallow("opaque token too long"));
    }
    // Meta commands report errors even under `q`.
    match cx.block(vlen, false)? {
        Block::Pending(need) => Ok(Parsed::Incomplete { need: Some(need) }),
        Block::Ready(data, total) => Ok(Parsed::Complete(
            Request::MetaSet { key, data, flags },
            total,
        )),
    }
}

fn debug<'a>(cx: Ctx<'a>, mut args: Keys<'a>) -> Result<Parsed<'a>, Error> {
    let Some(key) = args.next() else {
        return Err(cx.client(BAD_FORMAT, false));
    };
    // memcached looks only at the token right after the key, and only for a bare "b".
    let flag = args.next().filter(|t| *t == b"b");
    let ok = key.len() <= MAX_KEY_LEN
        && match flag {
            Some(_) => is_base64_key(key),
            None => text_key_ok(key),
        };
    if !ok {
        return Err(cx.client(BAD_FORMAT, false));
    }
    Ok(cx.done(Request::MetaDebug {
        key,
        flags: MetaFlags::new(flag.unwrap_or_default()),
    }))
}
