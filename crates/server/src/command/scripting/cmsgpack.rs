//! The `cmsgpack` library as Redis ships it: `pack(...)` encodes each argument in MessagePack
//! and concatenates them; `unpack(s)` returns every value `s` holds. Lua numbers that are
//! integers are packed as the smallest integer form, others as float (when exact) or double;
//! a table whose keys are 1..n is an array, any other a map; nesting past 16 levels packs nil.

use mlua::{Lua, Table, Value, Variadic};

const MAX_NESTING: usize = 16;

pub fn library(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(
        "pack",
        lua.create_function(|lua, args: Variadic<Value>| {
            if args.is_empty() {
                return Err(mlua::Error::RuntimeError(
                    "MessagePack pack needs input.".into(),
                ));
            }
            let mut out = Vec::new();
            for v in args.iter() {
                pack(&mut out, v, 0)?;
            }
            lua.create_string(&out)
        })?,
    )?;
    t.raw_set(
        "unpack",
        lua.create_function(|lua, s: mlua::String| {
            let data = s.as_bytes();
            let mut pos = 0;
            let mut values = Vec::new();
            while pos < data.len() {
                values.push(unpack(lua, &data, &mut pos, 0)?);
            }
            Ok(Variadic::from_iter(values))
        })?,
    )?;
    Ok(t)
}

fn pack(out: &mut Vec<u8>, v: &Value, depth: usize) -> mlua::Result<()> {
    match v {
        Value::Nil => out.push(0xc0),
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(i) => pack_int(out, *i),
        Value::Number(n) => {
            if n.fract() == 0.0 && n.abs() < 9.2e18 {
                pack_int(out, *n as i64)
            } else if (*n as f32) as f64 == *n {
                out.push(0xca);
                out.extend_from_slice(&(*n as f32).to_be_bytes());
            } else {
                out.push(0xcb);
                out.extend_from_slice(&n.to_be_bytes());
            }
        }
        Value::String(s) => {
            let b = s.as_bytes();
            let n = b.len();
            if n < 32 {
                out.push(0xa0 | n as u8);
            } else if n < 256 {
                out.extend_from_slice(&[0xd9, n as u8]);
            } else if n < 65536 {
                out.push(0xda);
                out.extend_from_slice(&(n as u16).to_be_bytes());
            } else {
                out.push(0xdb);
                out.extend_from_slice(&(n as u32).to_be_bytes());
            }
            out.extend_from_slice(&b);
        }
        Value::Table(t) if depth < MAX_NESTING => {
            let pairs: Vec<(Value, Value)> = t.clone().pairs::<Value, Value>().flatten().collect();
            let len = pairs.len();
            let is_array = (1..=len).all(|i| t.raw_get::<Value>(i).is_ok_and(|v| !v.is_nil()));
            if is_array {
                header(out, len, 0x90, 0xdc);
                for i in 1..=len {
                    pack(out, &t.raw_get::<Value>(i)?, depth + 1)?;
                }
            } else {
                header(out, len, 0x80, 0xde);
                for (k, v) in &pairs {
                    pack(out, k, depth + 1)?;
                    pack(out, v, depth + 1)?;
                }
            }
        }
        _ => out.push(0xc0),
    }
    Ok(())
}

fn header(out: &mut Vec<u8>, n: usize, fix: u8, sixteen: u8) {
    if n < 16 {
        out.push(fix | n as u8);
    } else if n < 65536 {
        out.push(sixteen);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(sixteen + 1);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

fn pack_int(out: &mut Vec<u8>, i: i64) {
    if i >= 0 {
        if i < 128 {
            out.push(i as u8);
        } else if i < 256 {
            out.extend_from_slice(&[0xcc, i as u8]);
        } else if i < 65536 {
            out.push(0xcd);
            out.extend_from_slice(&(i as u16).to_be_bytes());
        } else if i <= u32::MAX as i64 {
            out.push(0xce);
            out.extend_from_slice(&(i as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&(i as u64).to_be_bytes());
        }
    } else if i >= -32 {
        out.push(i as i8 as u8);
    } else if i >= -128 {
        out.extend_from_slice(&[0xd0, i as i8 as u8]);
    } else if i >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(i as i16).to_be_bytes());
    } else if i >= i32::MIN as i64 {
        out.push(0xd2);
        out.extend_from_slice(&(i as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&i.to_be_bytes());
    }
}

fn truncated() -> mlua::Error {
    mlua::Error::RuntimeError("Missing bytes in input.".into())
}

fn take<'d>(data: &'d [u8], pos: &mut usize, n: usize) -> mlua::Result<&'d [u8]> {
    let end = pos
        .checked_add(n)
        .filter(|&e| e <= data.len())
        .ok_or_else(truncated)?;
    let s = &data[*pos..end];
    *pos = end;
    Ok(s)
}

fn be(data: &[u8], pos: &mut usize, n: usize) -> mlua::Result<u64> {
    Ok(take(data, pos, n)?
        .iter()
        .fold(0u64, |acc, &b| acc << 8 | b as u64))
}

fn unpack(lua: &Lua, data: &[u8], pos: &mut usize, depth: usize) -> mlua::Result<Value> {
    if depth > 1000 {
        return Err(mlua::Error::RuntimeError(
            "Bad data format in input.".into(),
        ));
    }
    let tag = take(data, pos, 1)?[0];
    let string = |lua: &Lua, pos: &mut usize, n: usize| -> mlua::Result<Value> {
        Ok(Value::String(lua.create_string(take(data, pos, n)?)?))
    };
    let array = |lua: &Lua, pos: &mut usize, n: usize| -> mlua::Result<Value> {
        let t = lua.create_table_with_capacity(n.min(1024), 0)?;
        for i in 1..=n {
            t.raw_set(i, unpack(lua, data, pos, depth + 1)?)?;
        }
        Ok(Value::Table(t))
    };
    let map = |lua: &Lua, pos: &mut usize, n: usize| -> mlua::Result<Value> {
        let t = lua.create_table()?;
        for _ in 0..n {
            let k = unpack(lua, data, pos, depth + 1)?;
            let v = unpack(lua, data, pos, depth + 1)?;
            if !k.is_nil() {
                t.raw_set(k, v)?;
            }
        }
        Ok(Value::Table(t))
    };
    Ok(match tag {
        0x00..=0x7f => Value::Number(tag as f64),
        0x80..=0x8f => map(lua, pos, (tag & 0x0f) as usize)?,
        0x90..=0x9f => array(lua, pos, (tag & 0x0f) as usize)?,
        0xa0..=0xbf => string(lua, pos, (tag & 0x1f) as usize)?,
        0xc0 => Value::Nil,
        0xc2 => Value::Boolean(false),
        0xc3 => Value::Boolean(true),
        0xc4 | 0xd9 => {
            let n = be(data, pos, 1)? as usize;
            string(lua, pos, n)?
        }
        0xc5 | 0xda => {
            let n = be(data, pos, 2)? as usize;
            string(lua, pos, n)?
        }
        0xc6 | 0xdb => {
            let n = be(data, pos, 4)? as usize;
            string(lua, pos, n)?
        }
        0xca => Value::Number(f32::from_bits(be(data, pos, 4)? as u32) as f64),
        0xcb => Value::Number(f64::from_bits(be(data, pos, 8)?)),
        0xcc => Value::Number(be(data, pos, 1)? as f64),
        0xcd => Value::Number(be(data, pos, 2)? as f64),
        0xce => Value::Number(be(data, pos, 4)? as f64),
        0xcf => Value::Number(be(data, pos, 8)? as f64),
        0xd0 => Value::Number(be(data, pos, 1)? as u8 as i8 as f64),
        0xd1 => Value::Number(be(data, pos, 2)? as u16 as i16 as f64),
        0xd2 => Value::Number(be(data, pos, 4)? as u32 as i32 as f64),
        0xd3 => Value::Number(be(data, pos, 8)? as i64 as f64),
        0xdc => {
            let n = be(data, pos, 2)? as usize;
            array(lua, pos, n)?
        }
        0xdd => {
            let n = be(data, pos, 4)? as usize;
            array(lua, pos, n)?
        }
        0xde => {
            let n = be(data, pos, 2)? as usize;
            map(lua, pos, n)?
        }
        0xdf => {
            let n = be(data, pos, 4)? as usize;
            map(lua, pos, n)?
        }
        0xe0..=0xff => Value::Number(tag as i8 as f64),
        _ => {
            return Err(mlua::Error::RuntimeError(
                "Bad data format in input.".into(),
            ))
        }
    })
}
