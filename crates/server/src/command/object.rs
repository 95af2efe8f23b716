//! Introspection of one key's record: OBJECT (ENCODING FREQ IDLETIME REFCOUNT HELP) and
//! MEMORY (USAGE HELP). They read without counting an access (Redis's LOOKUP_NOTOUCH), so that
//! looking at a key does not change what eviction thinks of it.

use store::Kind;

use super::encoding::encoding;
use super::{parse_i64, Ctx, SYNTAX};

/// Redis's `OBJ_SHARED_REFCOUNT`: what OBJECT REFCOUNT says of a shared small integer.
const SHARED_REFCOUNT: i64 = i32::MAX as i64;
/// Integers below this are shared objects in Redis (`OBJ_SHARED_INTEGERS`).
const SHARED_INTEGERS: i64 = 10_000;

const OBJECT_HELP: &[&str] = &[
    "ENCODING <key>",
    "    Return the kind of internal representation used in order to store the value",
    "    associated with a <key>.",
    "FREQ <key>",
    "    Return the access frequency index of the <key>. The returned integer is",
    "    proportional to the logarithm of the recent access frequency of the key.",
    "IDLETIME <key>",
    "    Return the idle time of the <key>, that is the approximated number of",
    "    seconds elapsed since the last access to the key.",
    "REFCOUNT <key>",
    "    Return the number of references of the value associated with the specified",
    "    <key>.",
];

const MEMORY_HELP: &[&str] = &[
    "DOCTOR",
    "    Return memory problems reports.",
    "STATS",
    "    Return information about the memory usage of the server.",
    "USAGE <key> [SAMPLES <count>]",
    "    Return memory in bytes used by <key> and its value. Nested values are",
    "    sampled up to <count> times (default: 5, 0 means sample all).",
];

const NO_LFU: &[u8] = b"ERR An LFU maxmemory policy is not selected, access frequency not tracked. \
Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.";
const NO_LRU: &[u8] = b"ERR An LFU maxmemory policy is selected, idle time not tracked. \
Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.";

pub fn object(ctx: &mut Ctx<'_, '_>) {
    let sub = ctx.arg(1).to_ascii_lowercase();
    if sub == b"help" && ctx.argc() == 2 {
        return ctx.help("OBJECT", OBJECT_HELP);
    }
    let known = matches!(
        sub.as_slice(),
        b"encoding" | b"freq" | b"idletime" | b"refcount"
    );
    if !known {
        return ctx.unknown_subcommand("OBJECT");
    }
    if ctx.argc() != 3 {
        return ctx.wrong_subcommand_arity("object");
    }
    let store = ctx.db.store();
    let policy = store.policy();
    // Redis shares small integers unless the policy needs per-key LRU/LFU data.
    let shares_integers = store.maxmemory() == 0
        || !matches!(
            policy,
            store::EvictionPolicy::AllKeysLru
                | store::EvictionPolicy::VolatileLru
                | store::EvictionPolicy::AllKeysLfu
                | store::EvictionPolicy::VolatileLfu
        );
    let limits = *ctx.shared.settings.encoding_limits.read();
    let seen = ctx.db.peek(ctx.args.get(2), |item| {
        item.map(|item| {
            let shared = shares_integers
                && item.kind() == Kind::String
                && item.value().len() <= 20
                && parse_i64(item.value()).is_some_and(|n| (0..SHARED_INTEGERS).contains(&n));
            (encoding(&item, &limits), item.frequency(), shared)
        })
    });
    let Some((encoding, frequency, shared)) = seen else {
        return ctx.nil();
    };
    match sub.as_slice() {
        b"encoding" => ctx.bulk(encoding.as_bytes()),
        b"freq" if policy.is_lfu() => ctx.int(i64::from(frequency)),
        b"freq" => ctx.err(NO_LFU),
        b"idletime" if policy.is_lfu() => ctx.err(NO_LRU),
        // cairn keeps a reference bit, not an access clock, per record: idle time is unknown
        // and reported as 0.
        b"idletime" => ctx.int(0),
        _ => ctx.int(if shared { SHARED_REFCOUNT } else { 1 }),
    }
}

pub fn memory(ctx: &mut Ctx<'_, '_>) {
    let sub = ctx.arg(1).to_ascii_lowercase();
    match sub.as_slice() {
        b"help" if ctx.argc() == 2 => ctx.help("MEMORY", MEMORY_HELP),
        b"usage" if ctx.argc() >= 3 => usage(ctx),
        b"stats" if ctx.argc() == 2 => super::memory_cmd::stats(ctx),
        b"doctor" if ctx.argc() == 2 => super::memory_cmd::doctor(ctx),
        b"usage" | b"help" | b"stats" | b"doctor" => ctx.wrong_subcommand_arity("memory"),
        _ => ctx.unknown_subcommand("MEMORY"),
    }
}

/// MEMORY USAGE key [SAMPLES count]: the bytes the record is charged against `maxmemory`
/// (allocation, typed-tag index entries) plus its table slot. A record is one allocation, so
/// SAMPLES is checked and needs no sampling.
fn usage(ctx: &mut Ctx<'_, '_>) {
    let mut i = 3;
    while i < ctx.argc() {
        if ctx.arg(i).eq_ignore_ascii_case(b"samples") && i + 1 < ctx.argc() {
            let Some(samples) = ctx.int_arg(i + 1) else {
                return;
            };
            if samples < 0 {
                return ctx.err(SYNTAX);
            }
            i += 2;
        } else {
            return ctx.err(SYNTAX);
        }
    }
    let size = ctx
        .db
        .peek(ctx.args.get(2), |item| item.map(|i| i.charged_size() + 8));
    match size {
        Some(bytes) => ctx.int(bytes as i64),
        None => ctx.nil(),
    }
}
