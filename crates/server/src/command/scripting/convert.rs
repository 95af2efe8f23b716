//! Conversions between RESP replies and Lua values, as Redis documents them.
//!
//! A command's reply (parsed with `resp::value`) becomes a Lua value for `redis.call`: in
//! RESP2 an integer is a number, a bulk string a string, a null `false`, a status `{ok=...}`,
//! an error `{err=...}`, an array a table; with `redis.setresp(3)` also a map `{map={...}}`,
//! a set `{set={m=true}}`, a double `{double=n}`, a boolean, and null `nil`. A script's
//! result goes the other way, into the client's protocol: a number is truncated to an integer,
//! `true` is 1 (RESP3: `#t`), `false` null (RESP3: `#f`), an array stops at its first nil,
//! and `{ok=}`, `{err=}`, `{double=}`, `{map=}`, `{set=}` tables become their types.

use mlua::{Lua, Table, Value};
use resp::reply::{self, Version};
use resp::value::Value as Reply;

/// How deep a reply or a result may nest (deeper: an error, never a stack overflow).
const MAX_DEPTH: usize = 128;

/// A reply as `redis.call` returns it.
pub fn reply_to_lua(lua: &Lua, r: Reply, depth: usize) -> mlua::Result<Value> {
    if depth > MAX_DEPTH {
        return Err(mlua::Error::RuntimeError("reached lua stack limit".into()));
    }
    let single = |name: &str, v: Value| -> mlua::Result<Value> {
        let t = lua.create_table()?;
        t.raw_set(name, v)?;
        Ok(Value::Table(t))
    };
    Ok(match r {
        Reply::Integer(i) => Value::Number(i as f64),
        Reply::Bulk(b) => Value::String(lua.create_string(&b)?),
        Reply::Verbatim(b) => {
            let inner = lua.create_table()?;
            inner.raw_set("format", "txt")?;
            inner.raw_set("string", lua.create_string(&b)?)?;
            single("verbatim_string", Value::Table(inner))?
        }
        Reply::Simple(s) => single("ok", Value::String(lua.create_string(&s)?))?,
        Reply::Error(e) => single("err", Value::String(lua.create_string(&e)?))?,
        // Only a RESP3 reply has a null of its own; a RESP2 one (null bulk or array) is false.
        Reply::Null => Value::Boolean(false),
        Reply::Array(items) | Reply::Push(items) => {
            let t = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, item) in items.into_iter().enumerate() {
                t.raw_set(i + 1, reply_to_lua(lua, item, depth + 1)?)?;
            }
            Value::Table(t)
        }
        Reply::Map(pairs) => {
            let t = lua.create_table_with_capacity(0, pairs.len())?;
            for (k, v) in pairs {
                t.raw_set(
                    reply_to_lua(lua, k, depth + 1)?,
                    reply_to_lua(lua, v, depth + 1)?,
                )?;
            }
            single("map", Value::Table(t))?
        }
        Reply::Set(items) => {
            let t = lua.create_table_with_capacity(0, items.len())?;
            for item in items {
                t.raw_set(reply_to_lua(lua, item, depth + 1)?, true)?;
            }
            single("set", Value::Table(t))?
        }
        Reply::Double(d) => single("double", Value::Number(d))?,
        Reply::Boolean(b) => Value::Boolean(b),
        Reply::BigNumber(b) => single("big_number", Value::String(lua.create_string(&b)?))?,
    })
}

/// A RESP3 reply's null is `nil` (RESP2's stays `false`, see `reply_to_lua`).
pub fn reply_to_lua_resp3(lua: &Lua, r: Reply) -> mlua::Result<Value> {
    match r {
        Reply::Null => Ok(Value::Nil),
        other => reply_to_lua(lua, other, 0),
    }
}

/// Writes a script's result in the client's protocol (`version`); `script_resp3`: the script
/// chose RESP3, which decides how its booleans are written (as in Redis).
pub fn result_to_reply(out: &mut Vec<u8>, v: &Value, version: Version, script_resp3: bool) {
    lua_to_reply(out, v, version, script_resp3, 0)
}

fn lua_to_reply(out: &mut Vec<u8>, v: &Value, version: Version, resp3: bool, depth: usize) {
    if depth > MAX_DEPTH {
        return reply::error(out, b"ERR reached lua stack limit");
    }
    match v {
        Value::Nil => reply::null(out, version),
        Value::Boolean(b) if resp3 => reply::boolean(out, *b, version),
        Value::Boolean(true) => reply::integer(out, 1),
        Value::Boolean(false) => reply::null(out, version),
        Value::Integer(i) => reply::integer(out, *i),
        Value::Number(n) => reply::integer(out, number_to_integer(*n)),
        Value::String(s) => reply::bulk(out, &s.as_bytes()),
        Value::Table(t) => table_to_reply(out, t, version, resp3, depth),
        Value::Error(e) => reply::error(out, one_line(e.to_string().as_bytes()).as_slice()),
        _ => reply::null(out, version),
    }
}

/// Lua numbers are doubles; Redis casts them to `long long` (truncation toward zero).
fn number_to_integer(n: f64) -> i64 {
    if n.is_nan() {
        0
    } else {
        n as i64
    }
}

fn table_to_reply(out: &mut Vec<u8>, t: &Table, version: Version, resp3: bool, depth: usize) {
    let field = |name: &str| t.raw_get::<Value>(name).unwrap_or(Value::Nil);
    if let Value::String(e) = field("err") {
        return reply::error(out, &one_line(&e.as_bytes()));
    }
    if let Value::String(s) = field("ok") {
        return reply::simple(out, &one_line(&s.as_bytes()));
    }
    if let Value::Number(d) = field("double") {
        return reply::double(out, d, version);
    }
    if let Value::Integer(d) = field("double") {
        return reply::double(out, d as f64, version);
    }
    if let Value::Table(m) = field("map") {
        let pairs: Vec<(Value, Value)> = m.pairs::<Value, Value>().flatten().collect();
        reply::map_len(out, pairs.len(), version);
        for (k, v) in &pairs {
            lua_to_reply(out, k, version, resp3, depth + 1);
            lua_to_reply(out, v, version, resp3, depth + 1);
        }
        return;
    }
    if let Value::Table(s) = field("set") {
        let members: Vec<Value> = s
            .pairs::<Value, Value>()
            .flatten()
            .filter(|(_, v)| !matches!(v, Value::Nil | Value::Boolean(false)))
            .map(|(k, _)| k)
            .collect();
        reply::set_len(out, members.len(), version);
        for m in &members {
            lua_to_reply(out, m, version, resp3, depth + 1);
        }
        return;
    }
    // An array: its items from 1 up to the first nil.
    let mut items = Vec::new();
    for i in 1.. {
        match t.raw_get::<Value>(i) {
            Ok(Value::Nil) | Err(_) => break,
            Ok(v) => items.push(v),
        }
    }
    reply::array_len(out, items.len());
    for item in &items {
        lua_to_reply(out, item, version, resp3, depth + 1);
    }
}

/// A status or an error travels on one line: Redis replaces CR and LF by spaces.
fn one_line(s: &[u8]) -> Vec<u8> {
    s.iter()
        .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b })
        .collect()
}
