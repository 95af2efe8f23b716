//! Lua scripting: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT, with Redis's Lua 5.1
//! semantics (`vm`: the interpreter, its sandbox and `redis.*`; `convert`: RESP <-> Lua;
//! `bit`, `cjson`, `cmsgpack`, `structlib`: the libraries Redis ships).
//!
//! A script is atomic: outside a transaction it holds every gate of `crate::scripts` for its
//! run, so no other client command is inside the keyspace meanwhile; inside EXEC it runs on the
//! keyspace EXEC holds locked. Every `redis.call` goes through `command::call`
//! (`Caller::Script`), so tracking, commandstats, MONITOR (`[0 lua]`) and the change stream see
//! the script's commands as they see a client's.

mod bit;
mod cjson;
mod cmsgpack;
mod convert;
pub mod sha1;
mod structlib;
mod vm;

use std::cell::RefCell;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use store::Db;

use super::{flags, observe_hook, parse_i64, spec, Args, Command, Ctx, NOT_INTEGER};
use crate::scripts::BUSY;
use vm::{Frame, Outcome, Vm};

thread_local! {
    /// This thread's interpreter, made when it first runs a script.
    static VM: RefCell<Option<Vm>> = const { RefCell::new(None) };
}

const NOSCRIPT: &[u8] = b"NOSCRIPT No matching script. Please use EVAL.";

pub fn eval(ctx: &mut Ctx<'_, '_>) {
    run(ctx, false, false)
}

pub fn evalsha(ctx: &mut Ctx<'_, '_>) {
    run(ctx, true, false)
}

pub fn eval_ro(ctx: &mut Ctx<'_, '_>) {
    run(ctx, false, true)
}

pub fn evalsha_ro(ctx: &mut Ctx<'_, '_>) {
    run(ctx, true, true)
}

/// Whether a script may not run `command` (Redis's `noscript` flag, per subcommand for a
/// container; commands answered from another thread cannot run inside a script either).
pub fn refused_in_scripts(command: &Command, args: &Args<'_>) -> bool {
    // What each entry of the table is: allowed, refused, or up to its subcommand; worked out
    // once, so a script's call costs an index.
    const ALLOWED: u8 = 0;
    const REFUSED: u8 = 1;
    static KINDS: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    let kinds = KINDS.get_or_init(|| {
        super::COMMANDS
            .iter()
            .map(|c| match spec::spec(c.name) {
                _ if c.has(flags::DEFERRED | flags::SCRIPTING) => REFUSED,
                None => ALLOWED,
                Some(s) if !s.subcommands.is_empty() => 2,
                Some(s) if s.flags.contains(&"noscript") => REFUSED,
                Some(_) => ALLOWED,
            })
            .collect()
    });
    let index = (command as *const Command as usize)
        .wrapping_sub(super::COMMANDS.as_ptr() as usize)
        / std::mem::size_of::<Command>().max(1);
    match kinds.get(index) {
        Some(&ALLOWED) => return false,
        Some(&REFUSED) => return true,
        _ => {}
    }
    let Some(spec) = spec::spec(command.name) else {
        return false;
    };
    if args.len() < 2 {
        return spec.flags.contains(&"noscript");
    }
    let sub = String::from_utf8_lossy(args.get(1)).to_ascii_lowercase();
    spec.subcommand(sub.as_bytes())
        .is_some_and(|s| s.flags.contains(&"noscript"))
}

/// The flags a script declares in its shebang line (`#!lua flags=no-writes,allow-oom`).
#[derive(Default)]
struct Shebang {
    no_writes: bool,
    /// Bytes of the body the shebang line takes (skipped when compiling, as Redis does).
    len: usize,
}

fn shebang(body: &[u8]) -> Result<Shebang, String> {
    if !body.starts_with(b"#!") {
        return Ok(Shebang::default());
    }
    let end = body.iter().position(|&b| b == b'\n').unwrap_or(body.len());
    let line = String::from_utf8_lossy(&body[2..end]);
    let mut parts = line.split(' ').filter(|p| !p.is_empty());
    let engine = parts.next().unwrap_or("");
    if engine != "lua" {
        return Err(format!(
            "ERR Unexpected engine in script shebang: #!{engine}"
        ));
    }
    let mut sb = Shebang {
        no_writes: false,
        len: end,
    };
    for part in parts {
        let Some(list) = part.strip_prefix("flags=") else {
            return Err(format!("ERR Unknown lua shebang option: {part}"));
        };
        for flag in list.split(',').filter(|f| !f.is_empty()) {
            match flag {
                "no-writes" => sb.no_writes = true,
                "allow-oom" | "allow-stale" | "no-cluster" | "allow-cross-slot-keys" => {}
                other => return Err(format!("ERR Unexpected flag in script shebang: {other}")),
            }
        }
    }
    Ok(sb)
}

/// The 40 lowercase hex digits of a SHA argument, if it has the form of one.
fn sha_arg(arg: &[u8]) -> Option<[u8; 40]> {
    let sha: [u8; 40] = arg.try_into().ok()?;
    Some(sha.map(|b| b.to_ascii_lowercase()))
}

fn run(ctx: &mut Ctx<'_, '_>, by_sha: bool, read_only: bool) {
    let shared = ctx.shared;
    let scripts = &shared.scripts;
    let first = ctx.arg(1);
    // Read before the cache is looked at: a flush or an eviction after this bumps it, and the
    // next call then drops what this one compiles.
    let epoch = scripts.epoch.load(Relaxed);
    let sha = if by_sha {
        match sha_arg(first) {
            Some(sha) => sha,
            None => return ctx.err(NOSCRIPT),
        }
    } else {
        sha1::hex(first)
    };
    VM.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            match Vm::new() {
                Ok(vm) => *slot = Some(vm),
                Err(e) => {
                    let msg = format!("ERR the Lua interpreter did not start: {e}");
                    return ctx.err(msg.as_bytes());
                }
            }
        }
        let vm = slot.as_mut().expect("made above");
        // EVALSHA of a script this interpreter compiled: no cache lookup, no body.
        let hit = if by_sha {
            vm.compiled(epoch, &sha)
        } else {
            None
        };
        let cached = match (&hit, by_sha) {
            (None, true) => match scripts.get(&sha) {
                Some(body) => Some(body),
                None => return ctx.err(NOSCRIPT),
            },
            _ => None,
        };
        let Some(numkeys) = parse_i64(ctx.arg(2)) else {
            return ctx.err(NOT_INTEGER);
        };
        if numkeys < 0 {
            return ctx.err(b"ERR Number of keys can't be negative");
        }
        if numkeys as usize > ctx.argc() - 3 {
            return ctx.err(b"ERR Number of keys can't be greater than number of args");
        }
        let (f, no_writes) = match hit {
            Some(hit) => hit,
            None => {
                let body: &[u8] = cached.as_deref().unwrap_or(first);
                let sb = match shebang(body) {
                    Ok(sb) => sb,
                    Err(msg) => return ctx.err(msg.as_bytes()),
                };
                let f = match vm.function(epoch, &sha, &body[sb.len..], sb.no_writes) {
                    Ok(f) => f,
                    Err(msg) => {
                        let msg = format!("ERR Error compiling script (new function): {msg}");
                        return ctx.err(msg.as_bytes());
                    }
                };
                if !by_sha {
                    cache(ctx, sha, body, false);
                }
                (f, sb.no_writes)
            }
        };
        let keys = ctx.args.slice(3..3 + numkeys as usize);
        let argv = ctx.args.slice(3 + numkeys as usize..ctx.argc());
        // Monitors see the script before the commands it runs, as in Redis.
        observe_hook::feed_monitors(shared, &ctx.conn.client, &mut ctx.args.iter());
        let threshold = Duration::from_millis(shared.settings.busy_reply_threshold.load(Relaxed));
        let (locked, hold) = match &mut ctx.db {
            Db::Locked(locked) => (Some(&mut **locked), None),
            Db::Shared(..) => match scripts.exclusive_within(threshold) {
                Some(hold) => (None, Some(hold)),
                None => return ctx.err(BUSY),
            },
        };
        let mut frame = Frame {
            shared,
            conn: ctx.conn,
            locked,
            running: hold.as_ref().map(|h| &*h.running),
            read_only: read_only || no_writes,
            resp3: false,
            sha,
        };
        let outcome = vm.run(&f, keys, argv, &mut frame);
        drop(hold);
        vm.report_memory(&scripts.vm_memory);
        match outcome {
            Outcome::Done(v, resp3) => {
                convert::result_to_reply(ctx.out, &v, ctx.conn.version, resp3)
            }
            Outcome::Failed(msg) => ctx.err(msg.as_bytes()),
        }
    })
}

/// Adds a script to the cache, counting its memory; false when the cache is full.
fn cache(ctx: &mut Ctx<'_, '_>, sha: [u8; 40], body: &[u8], loaded: bool) -> bool {
    match ctx.shared.scripts.insert(sha, body, loaded) {
        Some(delta) => {
            ctx.shared.store.account_external(delta as i64);
            true
        }
        None => false,
    }
}

/// SCRIPT LOAD / EXISTS / FLUSH / KILL / HELP.
pub fn script(ctx: &mut Ctx<'_, '_>) {
    let sub = ctx.arg(1).to_ascii_lowercase();
    let argc = ctx.argc();
    let scripts = &ctx.shared.scripts;
    match sub.as_slice() {
        b"load" if argc == 3 => {
            let body = ctx.arg(2);
            let sha = sha1::hex(body);
            if let Err(msg) = compile_check(ctx, &sha, body) {
                return ctx.err(msg.as_bytes());
            }
            if !cache(ctx, sha, body, true) {
                return ctx.err(b"ERR the script cache is full");
            }
            ctx.bulk(&sha)
        }
        b"exists" if argc >= 3 => {
            ctx.array(argc - 2);
            for i in 2..argc {
                let known = sha_arg(ctx.arg(i)).is_some_and(|sha| scripts.contains(&sha));
                ctx.int(known as i64);
            }
        }
        b"flush" if argc <= 3 => {
            if argc == 3 && !matches!(ctx.arg(2).to_ascii_lowercase().as_slice(), b"sync" | b"async")
            {
                return ctx.err(b"ERR SCRIPT FLUSH only support SYNC|ASYNC option");
            }
            let freed = scripts.flush();
            ctx.shared.store.account_external(-(freed as i64));
            ctx.ok()
        }
        b"kill" if argc == 2 => match scripts.kill() {
            Ok(()) => ctx.ok(),
            Err(msg) => ctx.err(msg),
        },
        b"help" if argc == 2 => ctx.help(
            "SCRIPT",
            &[
                "EXISTS <sha1> [<sha1> ...]",
                "    Return information about the existence of the scripts in the script cache.",
                "FLUSH [ASYNC|SYNC]",
                "    Flush the Lua scripts cache. Very dangerous on replicas.",
                "    When called without the optional mode argument, the behavior is determined by the",
                "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
                "    * ASYNC: Asynchronously flush the scripts cache.",
                "    * SYNC: Synchronously flush the scripts cache.",
                "KILL",
                "    Kill the currently executing Lua script.",
                "LOAD <script>",
                "    Load a script into the scripts cache without executing it.",
            ],
        ),
        b"load" | b"exists" | b"flush" | b"kill" | b"help" => ctx.wrong_subcommand_arity("script"),
        _ => ctx.unknown_subcommand("SCRIPT"),
    }
}

/// Compiles a script (SCRIPT LOAD reports a syntax error at once, as Redis does).
fn compile_check(ctx: &Ctx<'_, '_>, sha: &[u8; 40], body: &[u8]) -> Result<(), String> {
    let sb = shebang(body)?;
    let epoch = ctx.shared.scripts.epoch.load(Relaxed);
    VM.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(Vm::new().map_err(|e| format!("ERR {e}"))?);
        }
        let vm = slot.as_mut().expect("made above");
        let compiled = vm
            .function(epoch, sha, &body[sb.len..], sb.no_writes)
            .map(drop)
            .map_err(|msg| format!("ERR Error compiling script (new function): {msg}"));
        vm.report_memory(&ctx.shared.scripts.vm_memory);
        compiled
    })
}
