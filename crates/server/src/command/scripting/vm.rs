//! The Lua 5.1 interpreter scripts run in: one per thread that runs scripts (a script holds
//! every gate, so only one runs at a time; an interpreter is never shared between threads),
//! with Redis's sandbox and its `redis` library.
//!
//! The sandbox: no `os`, `io`, `package`/`require`, `loadfile`, `dofile`, `load`,
//! `getfenv`/`setfenv`; `loadstring` refuses bytecode (and so do scripts: they are compiled as
//! text). Scripts run in an environment whose writes fail ("Attempt to modify a readonly
//! table") and whose reads of unknown names fail ("Script attempted to access nonexistent
//! global variable"), as in Redis 7; the library tables are read-only views, so no script can
//! change what the next one finds.
//!
//! `redis.call` and `redis.pcall` reach the server through [`Frame`]: the script's run sets
//! it for its duration on its own thread (see `with_frame`), and each call goes through
//! `command::call` with `Caller::Script`.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;

use mlua::{ChunkMode, Function, HookTriggers, Lua, LuaOptions, StdLib, Table, Value, Variadic};
use resp::reply::Version;
use store::Locked;

use super::convert;
use crate::command::{call, flags, lookup, Args, Caller, Conn, Resp};
use crate::scripts::Running;
use crate::shared::Shared;

/// Compiled scripts an interpreter keeps before it starts afresh (scripts sent with EVAL whose
/// text varies would otherwise pile up).
const MAX_FUNCTIONS: usize = 4096;

/// Lua instructions between two looks at SCRIPT KILL.
const HOOK_EVERY: u32 = 100_000;

pub const KILLED: &str = "ERR Script killed by user with SCRIPT KILL...";

/// What a running script's `redis.call` needs: the server, the calling client, the keyspace
/// view, and the script's own settings.
pub struct Frame<'a, 's> {
    pub shared: &'s Shared,
    pub conn: &'a mut Conn,
    /// The keyspace EXEC holds, when the script runs inside a transaction.
    pub locked: Option<&'a mut Locked<'s>>,
    /// The script's entry in `Scripts` (None inside EXEC: it cannot be killed there).
    pub running: Option<&'a Running>,
    pub read_only: bool,
    /// `redis.setresp(3)`.
    pub resp3: bool,
    pub sha: [u8; 40],
}

thread_local! {
    /// The frame of the script running on this thread; null when none.
    static FRAME: Cell<*mut Frame<'static, 'static>> = const { Cell::new(std::ptr::null_mut()) };
}

/// Runs `f` with the frame of the script running on this thread. The pointer is set by
/// `run_in_frame` for exactly the duration of the script's run, on this thread, and the frame
/// outlives that; nothing else borrows the frame meanwhile (the script's run has handed it
/// over, and `redis.call` cannot start another script: EVAL is refused inside scripts).
fn with_frame<R>(f: impl FnOnce(&mut Frame<'_, '_>) -> R) -> Option<R> {
    let ptr = FRAME.with(Cell::get);
    if ptr.is_null() {
        return None;
    }
    // SAFETY: see above; the frame is alive and not otherwise borrowed while the pointer is set.
    Some(f(unsafe { &mut *ptr }))
}

/// Sets the frame for the duration of `f` (cleared however `f` ends).
fn run_in_frame<R>(frame: &mut Frame<'_, '_>, f: impl FnOnce() -> R) -> R {
    struct Clear;
    impl Drop for Clear {
        fn drop(&mut self) {
            FRAME.with(|c| c.set(std::ptr::null_mut()));
        }
    }
    let ptr: *mut Frame<'_, '_> = frame;
    FRAME.with(|c| c.set(ptr.cast()));
    let _clear = Clear;
    f()
}

thread_local! {
    /// When this thread last served its loop's other clients during a busy script.
    static LAST_BUSY_POLL: Cell<Option<std::time::Instant>> = const { Cell::new(None) };
}

/// Past `busy-reply-threshold`, lets the other clients of this thread's event loop in for
/// SCRIPT KILL (and -BUSY) every few milliseconds (`crate::busy`; reactor model only).
fn serve_while_busy(f: &Frame<'_, '_>, running: &crate::scripts::Running) {
    use std::time::Duration;
    if f.shared.config.io_model != crate::config::IoModel::Reactor {
        return;
    }
    let threshold = Duration::from_millis(f.shared.settings.busy_reply_threshold.load(Relaxed));
    if running.started.elapsed() < threshold {
        return;
    }
    let due = LAST_BUSY_POLL.with(|last| {
        let due = last
            .get()
            .is_none_or(|at| at.elapsed() >= Duration::from_millis(5));
        if due {
            last.set(Some(std::time::Instant::now()));
        }
        due
    });
    if due {
        crate::busy::serve_own_loop(&f.shared.clients, &f.shared.scripts, &f.conn.client);
    }
}

pub struct Vm {
    lua: Lua,
    /// The environment scripts run in (read-only view of the globals).
    env: Table,
    globals: Table,
    /// `function(f) return xpcall(f, handler) end`.
    runner: Function,
    /// Compiled scripts by SHA, with whether their shebang says `no-writes`.
    functions: HashMap<[u8; 40], (Function, bool), ahash::RandomState>,
    epoch: u64,
    /// The interpreter's memory last added to `Scripts::vm_memory` (INFO used_memory_lua).
    reported: usize,
}

/// What a script's run came to.
pub enum Outcome {
    /// The result, and whether the script had chosen RESP3 (`redis.setresp(3)`): its
    /// booleans then reach a RESP3 client as booleans.
    Done(Value, bool),
    /// The error's full message, Redis's form (`ERR user_script:1: ... script: sha, on ...`).
    Failed(String),
}

impl Vm {
    pub fn new() -> mlua::Result<Vm> {
        let libs = StdLib::TABLE | StdLib::STRING | StdLib::MATH;
        let lua = Lua::new_with(libs, LuaOptions::default())?;
        let globals = lua.globals();
        let redis = redis_library(&lua)?;
        globals.raw_set("redis", redis)?;
        globals.raw_set("bit", super::bit::library(&lua)?)?;
        globals.raw_set("cjson", super::cjson::library(&lua)?)?;
        globals.raw_set("cmsgpack", super::cmsgpack::library(&lua)?)?;
        globals.raw_set("struct", super::structlib::library(&lua)?)?;
        globals.raw_set(
            "__errmsg",
            lua.create_function(|_, e: Value| {
                Ok(match e {
                    Value::Error(e) => error_text(&e),
                    _ => String::new(),
                })
            })?,
        )?;
        globals.raw_set("__handler", lua.create_function(error_handler)?)?;
        let (env, runner): (Table, Function) = lua
            .load(SANDBOX)
            .set_name("=sandbox")
            .set_mode(ChunkMode::Text)
            .call(())?;
        lua.set_hook(
            HookTriggers::new().every_nth_instruction(HOOK_EVERY),
            |_, _| {
                let killed = with_frame(|f| {
                    let Some(running) = f.running else {
                        return false;
                    };
                    serve_while_busy(f, running);
                    running.kill.load(Relaxed)
                });
                match killed {
                    Some(true) => Err(mlua::Error::RuntimeError(KILLED.into())),
                    _ => Ok(mlua::VmState::Continue),
                }
            },
        );
        Ok(Vm {
            lua,
            env,
            globals,
            runner,
            functions: HashMap::default(),
            epoch: 0,
            reported: 0,
        })
    }

    /// Brings `total` (the memory of every thread's interpreter) up to date with this one's.
    pub fn report_memory(&mut self, total: &std::sync::atomic::AtomicUsize) {
        let now = self.lua.used_memory();
        if now >= self.reported {
            total.fetch_add(now - self.reported, Relaxed);
        } else {
            total.fetch_sub(self.reported - now, Relaxed);
        }
        self.reported = now;
    }

    /// The compiled function of a script and its `no-writes` flag, if this interpreter has
    /// it for the script cache's `epoch` (read before the cache was looked at: a flush or an
    /// eviction since bumps it). EVALSHA then needs neither the cache nor the body.
    pub fn compiled(&mut self, epoch: u64, sha: &[u8; 40]) -> Option<(Function, bool)> {
        self.forget_if_stale(epoch);
        self.functions.get(sha).cloned()
    }

    fn forget_if_stale(&mut self, epoch: u64) {
        if self.epoch != epoch || self.functions.len() >= MAX_FUNCTIONS {
            self.epoch = epoch;
            self.functions.clear();
            let _ = self.lua.gc_collect();
        }
    }

    /// The compiled function of a script, compiling it the first time (the error is Lua's
    /// message, `user_script:1: ...`); `no_writes`: its shebang's flag, kept with it.
    pub fn function(
        &mut self,
        epoch: u64,
        sha: &[u8; 40],
        body: &[u8],
        no_writes: bool,
    ) -> Result<Function, String> {
        self.forget_if_stale(epoch);
        if let Some((f, _)) = self.functions.get(sha) {
            return Ok(f.clone());
        }
        let f = self
            .lua
            .load(body)
            .set_name("@user_script")
            .set_mode(ChunkMode::Text)
            .set_environment(self.env.clone())
            .into_function()
            .map_err(|e| match e {
                mlua::Error::SyntaxError { message, .. } => message,
                other => error_text(&other),
            })?;
        self.functions.insert(*sha, (f.clone(), no_writes));
        Ok(f)
    }

    /// Runs `f` with `keys` and `argv` as KEYS and ARGV, `frame` serving its calls.
    pub fn run(
        &self,
        f: &Function,
        keys: Args<'_>,
        argv: Args<'_>,
        frame: &mut Frame<'_, '_>,
    ) -> Outcome {
        let set = |name: &str, args: Args<'_>| -> mlua::Result<()> {
            let t = self.lua.create_table_with_capacity(args.len(), 0)?;
            for i in 0..args.len() {
                t.raw_set(i + 1, self.lua.create_string(args.get(i))?)?;
            }
            self.globals.raw_set(name, t)
        };
        if let Err(e) = set("KEYS", keys).and_then(|_| set("ARGV", argv)) {
            return Outcome::Failed(format!("ERR {}", error_text(&e)));
        }
        let result = run_in_frame(frame, || {
            self.runner
                .call::<(bool, Value)>(f.clone())
                .map_err(|e| error_text(&e))
        });
        match result {
            Ok((true, v)) => Outcome::Done(v, frame.resp3),
            Ok((false, Value::String(msg))) => Outcome::Failed(msg.to_string_lossy()),
            Ok((false, _)) => Outcome::Failed("ERR unknown error".into()),
            Err(msg) => Outcome::Failed(msg),
        }
    }
}

/// Sets up the sandbox from the globals the interpreter was built with (the Rust side has
/// added `redis`, the libraries, `__raw_call` and `__handler`); returns the scripts'
/// environment and the runner.
const SANDBOX: &str = r#"
local G = _G
local rawget, rawset, setmetatable, error, type, tostring, select =
      rawget, rawset, setmetatable, error, type, tostring, select
local rawloadstring, setfenv, rawpcall, xpcall = loadstring, setfenv, pcall, xpcall
local errmsg, handler = __errmsg, __handler
G.__errmsg, G.__handler = nil, nil

local function readonly(t)
  return setmetatable({}, {
    __index = t,
    __newindex = function() error("Attempt to modify a readonly table", 2) end,
    __metatable = false,
  })
end

local redis = G.redis
-- Redis 7: a caught error table ({err=...}) or error of redis.call reads as its message.
local function caught(ok, ...)
  if not ok then
    local e = ...
    if type(e) == "table" and type(rawget(e, "err")) == "string" then
      return false, rawget(e, "err")
    elseif type(e) == "userdata" then
      return false, errmsg(e)
    end
  end
  return ok, ...
end
G.pcall = function(...) return caught(rawpcall(...)) end

local env
G.loadstring = function(s, name)
  if type(s) == "string" and s:byte(1) == 27 then
    return nil, "loadstring of bytecode is not allowed"
  end
  local f, e = rawloadstring(s, name)
  if f then setfenv(f, env) end
  return f, e
end

local safe_loadstring = G.loadstring
local concat = table.concat
G.load = function(f, name)
  if type(f) == "string" then return safe_loadstring(f, name) end
  local parts = {}
  while true do
    local piece = f()
    if piece == nil or piece == "" then break end
    parts[#parts + 1] = piece
  end
  return safe_loadstring(concat(parts), name)
end

for _, name in ipairs({"loadfile", "dofile", "getfenv", "setfenv", "module",
                       "require", "print", "gcinfo", "newproxy"}) do
  rawset(G, name, nil)
end
for _, name in ipairs({"redis", "bit", "cjson", "cmsgpack", "struct", "string", "math",
                       "table", "coroutine"}) do
  local t = rawget(G, name)
  if t then rawset(G, name, readonly(t)) end
end

setmetatable(G, {
  __index = function(_, k)
    error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
  end,
})
env = setmetatable({}, {
  __index = G,
  __newindex = function() error("Attempt to modify a readonly table", 2) end,
  __metatable = false,
})
rawset(G, "_G", env)

local function runner(f) return xpcall(f, handler) end
return env, runner
"#;

/// `redis.*` other than `call`/`pcall` (set up in `SANDBOX` over `__raw_call`).
fn redis_library(lua: &Lua) -> mlua::Result<Table> {
    let redis = lua.create_table()?;
    redis.raw_set(
        "call",
        lua.create_function(|lua, args: Variadic<Value>| redis_call(lua, true, args))?,
    )?;
    redis.raw_set(
        "pcall",
        lua.create_function(|lua, args: Variadic<Value>| redis_call(lua, false, args))?,
    )?;
    redis.raw_set(
        "error_reply",
        lua.create_function(|lua, msg: Value| match msg {
            Value::String(s) => error_table(lua, &s.as_bytes()),
            _ => Err(lib_error("wrong number or type of arguments")),
        })?,
    )?;
    redis.raw_set(
        "status_reply",
        lua.create_function(|lua, msg: Value| match msg {
            Value::String(s) => {
                let t = lua.create_table()?;
                t.raw_set("ok", s)?;
                Ok(t)
            }
            _ => Err(lib_error("wrong number or type of arguments")),
        })?,
    )?;
    redis.raw_set(
        "sha1hex",
        lua.create_function(|lua, args: Variadic<Value>| {
            let text = match args.first() {
                Some(Value::String(s)) if args.len() == 1 => s.as_bytes().to_vec(),
                Some(Value::Number(n)) if args.len() == 1 => lua_number(*n).into_bytes(),
                Some(Value::Integer(n)) if args.len() == 1 => n.to_string().into_bytes(),
                _ => return Err(lib_error("wrong number of arguments")),
            };
            lua.create_string(super::sha1::hex(&text))
        })?,
    )?;
    redis.raw_set(
        "log",
        lua.create_function(|_, args: Variadic<Value>| {
            if args.len() < 2 {
                return Err(lib_error("redis.log() requires two arguments or more."));
            }
            let level = match args[0] {
                Value::Number(n) => n as i64,
                Value::Integer(n) => n,
                _ => return Err(lib_error("First argument must be a number (log level).")),
            };
            if !(0..=3).contains(&level) {
                return Err(lib_error("Invalid debug level."));
            }
            let text: Vec<String> = args[1..]
                .iter()
                .map(|v| match v {
                    Value::String(s) => s.to_string_lossy(),
                    Value::Number(n) => lua_number(*n),
                    Value::Integer(n) => n.to_string(),
                    _ => String::new(),
                })
                .collect();
            let text = text.join(" ");
            match level {
                0 => tracing::debug!(target: "lua", "{text}"),
                1 | 2 => tracing::info!(target: "lua", "{text}"),
                _ => tracing::warn!(target: "lua", "{text}"),
            }
            Ok(())
        })?,
    )?;
    redis.raw_set(
        "setresp",
        lua.create_function(|_, v: Value| {
            let n = match v {
                Value::Number(n) => n as i64,
                Value::Integer(n) => n,
                _ => 0,
            };
            if n != 2 && n != 3 {
                return Err(lib_error("RESP version must be 2 or 3."));
            }
            with_frame(|f| f.resp3 = n == 3);
            Ok(())
        })?,
    )?;
    // Effects replication is the only mode since Redis 7: these remain for old scripts.
    redis.raw_set(
        "set_repl",
        lua.create_function(|_, _: Variadic<Value>| Ok(()))?,
    )?;
    redis.raw_set(
        "replicate_commands",
        lua.create_function(|_, _: Variadic<Value>| Ok(true))?,
    )?;
    redis.raw_set(
        "breakpoint",
        lua.create_function(|_, _: Variadic<Value>| Ok(false))?,
    )?;
    redis.raw_set(
        "debug",
        lua.create_function(|_, _: Variadic<Value>| Ok(()))?,
    )?;
    for (name, value) in [
        ("LOG_DEBUG", 0),
        ("LOG_VERBOSE", 1),
        ("LOG_NOTICE", 2),
        ("LOG_WARNING", 3),
        ("REPL_NONE", 0),
        ("REPL_AOF", 1),
        ("REPL_SLAVE", 2),
        ("REPL_REPLICA", 2),
        ("REPL_ALL", 3),
    ] {
        redis.raw_set(name, value)?;
    }
    let version = crate::command::server::REDIS_COMPAT_VERSION;
    redis.raw_set("REDIS_VERSION", version)?;
    let num = version
        .split('.')
        .map(|p| p.parse::<i64>().unwrap_or(0))
        .chain(std::iter::repeat(0))
        .take(3)
        .fold(0, |acc, p| acc * 256 + p);
    redis.raw_set("REDIS_VERSION_NUM", num)?;
    Ok(redis)
}

/// An error of the `redis` library itself: no script position, as Redis raises them.
fn lib_error(msg: &str) -> mlua::Error {
    mlua::Error::external(ScriptError(format!("ERR {msg}")))
}

/// The error table `redis.error_reply` and failed calls give: `-CODE msg` keeps its code,
/// other text gets `ERR` (Redis's `luaPushErrorBuff`).
fn error_table(lua: &Lua, msg: &[u8]) -> mlua::Result<Table> {
    let text = String::from_utf8_lossy(msg);
    let full = match text.strip_prefix('-') {
        Some(rest) => match rest.split_once(' ') {
            Some((code, m)) => format!("{code} {}", m.trim_matches(['\r', '\n'])),
            None => format!("ERR {}", rest.trim_matches(['\r', '\n'])),
        },
        None => match text.split_once(' ') {
            // Already `CODE msg` (as replies' errors are).
            Some(_) => text.trim_matches(['\r', '\n']).to_string(),
            None => format!("ERR {}", text.trim_matches(['\r', '\n'])),
        },
    };
    let t = lua.create_table()?;
    t.raw_set("err", full)?;
    Ok(t)
}

/// The error `redis.call` raises: Redis's message with its code (`ERR ...`, `WRONGTYPE ...`).
#[derive(Debug)]
pub struct ScriptError(pub String);

impl std::fmt::Display for ScriptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ScriptError {}

/// The text of an error raised from Rust (or the interpreter) without mlua's decoration.
pub fn error_text(e: &mlua::Error) -> String {
    match e {
        mlua::Error::RuntimeError(s) => s.clone(),
        mlua::Error::CallbackError { cause, .. } => error_text(cause),
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        mlua::Error::MemoryError(s) => s.clone(),
        mlua::Error::ExternalError(e) => match e.downcast_ref::<ScriptError>() {
            Some(ScriptError(msg)) => msg.clone(),
            None => e.to_string(),
        },
        other => other.to_string(),
    }
}

/// How Lua 5.1 prints a number (`%.14g`).
pub fn lua_number(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e14 {
        return format!("{}", n as i64);
    }
    if n.is_infinite() {
        return if n > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if n.is_nan() {
        return "nan".into();
    }
    let s = format!("{:.13e}", n);
    let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-5..14).contains(&exp) {
        let decimals = (13 - exp).max(0) as usize;
        let fixed = format!("{:.*}", decimals, n);
        let fixed = if fixed.contains('.') {
            fixed
                .trim_end_matches('0')
                .trim_end_matches('.')
                .to_string()
        } else {
            fixed
        };
        return fixed;
    }
    let mantissa = if mantissa.contains('.') {
        mantissa.trim_end_matches('0').trim_end_matches('.')
    } else {
        mantissa
    };
    format!(
        "{mantissa}e{}{:02}",
        if exp < 0 { '-' } else { '+' },
        exp.abs()
    )
}

/// A number passed to `redis.call`: an integer as one, else its shortest exact form.
fn argument_number(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e17 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}

/// The message handler of a script's run: Redis's form of the error, with the script's sha
/// and the line it stopped at.
fn error_handler(lua: &Lua, err: Value) -> mlua::Result<String> {
    let line = (0..64)
        .map_while(|level| lua.inspect_stack(level))
        .find(|d| d.source().source.as_deref() == Some("@user_script"))
        .map(|d| d.curr_line())
        .unwrap_or(0);
    let msg = match &err {
        Value::Table(t) => match t.raw_get::<Value>("err")? {
            Value::String(s) => s.to_string_lossy(),
            _ => "ERR unknown error".into(),
        },
        Value::String(s) => format!("ERR {}", s.to_string_lossy()),
        Value::Number(n) => format!("ERR {}", lua_number(*n)),
        Value::Integer(n) => format!("ERR {n}"),
        Value::Error(e) => {
            let text = error_text(e);
            if is_script_error(e) || text == KILLED {
                text
            } else {
                // A library function's error names the script's line, as luaL_error does.
                format!("ERR user_script:{line}: {text}")
            }
        }
        _ => "ERR nil".into(),
    };
    let sha = with_frame(|f| f.sha).unwrap_or([b'0'; 40]);
    let sha = std::str::from_utf8(&sha).unwrap_or("");
    Ok(format!("{msg} script: {sha}, on @user_script:{line}."))
}

fn is_script_error(e: &mlua::Error) -> bool {
    match e {
        mlua::Error::CallbackError { cause, .. } => is_script_error(cause),
        mlua::Error::ExternalError(e) => e.downcast_ref::<ScriptError>().is_some(),
        _ => false,
    }
}

/// `redis.call(...)` (raise) and `redis.pcall(...)`: runs the command through the command path
/// and returns its reply as a Lua value; an error reply is raised (`ScriptError`) by
/// `redis.call`, returned as `{err=...}` by `redis.pcall`.
fn redis_call(lua: &Lua, raise: bool, args: Variadic<Value>) -> mlua::Result<Value> {
    let fail = |msg: &[u8]| -> mlua::Result<Value> {
        let t = error_table(lua, msg)?;
        if raise {
            let msg: String = t.raw_get("err")?;
            return Err(mlua::Error::external(ScriptError(msg)));
        }
        Ok(Value::Table(t))
    };
    if args.is_empty() {
        return fail(b"ERR Please specify at least one argument for this redis lib call");
    }
    let mut buffers = CALL_BUFFERS.take();
    let result = redis_call_with(lua, raise, &args, &mut buffers);
    CALL_BUFFERS.set(buffers);
    result
}

thread_local! {
    /// The request and reply buffers of `redis.call`, kept between calls (taken out while in
    /// use) so that a script's command costs no allocations for them.
    static CALL_BUFFERS: Cell<CallBuffers> = Cell::default();
}

#[derive(Default)]
struct CallBuffers {
    request: Vec<u8>,
    ranges: Vec<std::ops::Range<usize>>,
    reply: Vec<u8>,
}

/// Buffers grown past this are not kept (a script that once read a big value does not pin it).
const KEEP_BUFFER: usize = 64 << 10;

fn redis_call_with(
    lua: &Lua,
    raise: bool,
    args: &Variadic<Value>,
    buffers: &mut CallBuffers,
) -> mlua::Result<Value> {
    let fail = |msg: &[u8]| -> mlua::Result<Value> {
        let t = error_table(lua, msg)?;
        if raise {
            let msg: String = t.raw_get("err")?;
            return Err(mlua::Error::external(ScriptError(msg)));
        }
        Ok(Value::Table(t))
    };
    for buf in [&mut buffers.request, &mut buffers.reply] {
        if buf.capacity() > KEEP_BUFFER {
            *buf = Vec::new();
        }
        buf.clear();
    }
    buffers.ranges.clear();
    let (buf, ranges) = (&mut buffers.request, &mut buffers.ranges);
    for arg in args.iter() {
        let start = buf.len();
        match arg {
            Value::String(s) => buf.extend_from_slice(&s.as_bytes()),
            Value::Number(n) => buf.extend_from_slice(argument_number(*n).as_bytes()),
            Value::Integer(n) => buf.extend_from_slice(n.to_string().as_bytes()),
            _ => return fail(b"ERR Lua redis lib command arguments must be strings or integers"),
        }
        ranges.push(start..buf.len());
    }
    let args = Args::new(buf, ranges);
    let Some(command) = lookup(args.get(0)) else {
        return fail(b"ERR Unknown Redis command called from script");
    };
    if !command.arity_ok(args.len()) {
        return fail(b"ERR Wrong number of args calling Redis command from script");
    }
    if super::refused_in_scripts(command, &args) {
        return fail(b"ERR This Redis command is not allowed from script");
    }
    let reply = with_frame(|frame| {
        let write = command.has(flags::WRITE);
        if write && frame.read_only {
            return Err(&b"ERR Write commands are not allowed from read-only scripts."[..]);
        }
        if write {
            if let Some(r) = frame.running {
                r.wrote.store(true, Relaxed);
            }
        }
        let saved = frame.conn.version;
        frame.conn.version = if frame.resp3 {
            Version::Resp3
        } else {
            Version::Resp2
        };
        let out = &mut buffers.reply;
        let caller = Caller::Script(frame.locked.as_deref_mut());
        call(
            frame.shared,
            frame.conn,
            out,
            command,
            &mut Resp(args),
            caller,
        );
        frame.conn.version = saved;
        Ok(frame.resp3)
    });
    let out = &buffers.reply;
    let resp3 = match reply {
        None => return fail(b"ERR redis.call used outside a script"),
        Some(Err(msg)) => return fail(msg),
        Some(Ok(r)) => r,
    };
    let parsed = match resp::value::parse_value(out) {
        Ok(Some((v, _))) => v,
        _ => return fail(b"ERR the command's reply could not be read"),
    };
    if let resp::value::Value::Error(e) = &parsed {
        return fail(e);
    }
    if resp3 {
        convert::reply_to_lua_resp3(lua, parsed)
    } else {
        convert::reply_to_lua(lua, parsed, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::lua_number;

    #[test]
    fn numbers_print_as_lua_prints_them() {
        for (n, s) in [
            (1.0, "1"),
            (-3.0, "-3"),
            (0.5, "0.5"),
            (1.0 / 3.0, "0.33333333333333"),
            (1e20, "1e+20"),
            (123456.789, "123456.789"),
            (2f64.powi(53), "9.007199254741e+15"),
            (99999999999999.0, "99999999999999"),
            (1e-7, "1e-07"),
        ] {
            assert_eq!(lua_number(n), s, "{n}");
        }
    }
}
