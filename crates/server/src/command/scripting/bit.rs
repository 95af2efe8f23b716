//! Lua BitOp's `bit` library as Redis ships it: 32-bit operations on Lua numbers (`tobit`,
//! `tohex`, `bnot`, `band`, `bor`, `bxor`, `lshift`, `rshift`, `arshift`, `rol`, `ror`,
//! `bswap`). Results are signed 32-bit numbers, as in LuaBitOp.

use mlua::{Lua, Table, Value, Variadic};

/// A Lua number as LuaBitOp sees it: rounded to an integer, then taken modulo 2^32.
fn tobit(v: &Value) -> mlua::Result<i32> {
    let n = match v {
        Value::Number(n) => *n,
        Value::Integer(i) => *i as f64,
        Value::String(s) => s
            .to_str()
            .ok()
            .and_then(|s| s.trim().parse::<f64>().ok())
            .ok_or_else(bad_argument)?,
        _ => return Err(bad_argument()),
    };
    Ok(n.round_ties_even() as i64 as i32)
}

fn bad_argument() -> mlua::Error {
    mlua::Error::RuntimeError("bad argument (number expected)".into())
}

fn arg(args: &Variadic<Value>, i: usize) -> mlua::Result<i32> {
    tobit(args.get(i).unwrap_or(&Value::Nil))
}

fn fold(args: Variadic<Value>, f: fn(i32, i32) -> i32) -> mlua::Result<f64> {
    let mut acc = arg(&args, 0)?;
    for i in 1..args.len() {
        acc = f(acc, arg(&args, i)?);
    }
    Ok(acc as f64)
}

pub fn library(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let unary = |f: fn(i32) -> i32| {
        lua.create_function(move |_, args: Variadic<Value>| Ok(f(arg(&args, 0)?) as f64))
    };
    t.raw_set("tobit", unary(|x| x)?)?;
    t.raw_set("bnot", unary(|x| !x)?)?;
    t.raw_set("bswap", unary(i32::swap_bytes)?)?;
    let variadic =
        |f: fn(i32, i32) -> i32| lua.create_function(move |_, args: Variadic<Value>| fold(args, f));
    t.raw_set("band", variadic(|a, b| a & b)?)?;
    t.raw_set("bor", variadic(|a, b| a | b)?)?;
    t.raw_set("bxor", variadic(|a, b| a ^ b)?)?;
    let shift = |f: fn(i32, u32) -> i32| {
        lua.create_function(move |_, args: Variadic<Value>| {
            let (x, n) = (arg(&args, 0)?, arg(&args, 1)? as u32 & 31);
            Ok(f(x, n) as f64)
        })
    };
    t.raw_set("lshift", shift(|x, n| ((x as u32) << n) as i32)?)?;
    t.raw_set("rshift", shift(|x, n| ((x as u32) >> n) as i32)?)?;
    t.raw_set("arshift", shift(|x, n| x >> n)?)?;
    t.raw_set("rol", shift(|x, n| (x as u32).rotate_left(n) as i32)?)?;
    t.raw_set("ror", shift(|x, n| (x as u32).rotate_right(n) as i32)?)?;
    t.raw_set(
        "tohex",
        lua.create_function(|lua, args: Variadic<Value>| {
            let x = arg(&args, 0)? as u32;
            let n = match args.get(1) {
                None | Some(Value::Nil) => 8,
                Some(_) => arg(&args, 1)?,
            };
            let (upper, digits) = (n < 0, n.unsigned_abs().min(8) as usize);
            let hex = if upper {
                format!("{x:08X}")
            } else {
                format!("{x:08x}")
            };
            lua.create_string(&hex[8 - digits..])
        })?,
    )?;
    Ok(t)
}
