//! The `cjson` library as Redis ships it (Lua CJSON's defaults): `encode` and `decode`, with
//! `cjson.null` for JSON null. Numbers are written as `%.14g`; a table whose keys are all
//! positive integers is an array (holes become null) unless it is excessively sparse (more
//! than 10 slots and fewer than half used: an error); an empty table is `{}`; strings escape
//! `"`, `\`, `/` and control characters.

use std::ffi::c_void;

use mlua::{LightUserData, Lua, Table, Value};

use super::vm::lua_number;

const MAX_DEPTH: usize = 1000;

fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut::<c_void>()))
}

fn error(msg: impl Into<String>) -> mlua::Error {
    mlua::Error::RuntimeError(msg.into())
}

pub fn library(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("null", null())?;
    t.raw_set(
        "encode",
        lua.create_function(|lua, v: Value| {
            let mut out = Vec::new();
            encode(&mut out, &v, 0)?;
            lua.create_string(&out)
        })?,
    )?;
    t.raw_set(
        "decode",
        lua.create_function(|lua, s: mlua::String| {
            let data = s.as_bytes();
            let mut p = Parser {
                data: &data,
                pos: 0,
            };
            let v = p.value(lua, 0)?;
            p.ws();
            if p.pos < data.len() {
                return Err(p.unexpected("the end"));
            }
            Ok(v)
        })?,
    )?;
    Ok(t)
}

fn encode(out: &mut Vec<u8>, v: &Value, depth: usize) -> mlua::Result<()> {
    match v {
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Integer(i) => out.extend_from_slice(lua_number(*i as f64).as_bytes()),
        Value::Number(n) => {
            if !n.is_finite() {
                return Err(error("Cannot serialise number: must not be NaN or Inf"));
            }
            out.extend_from_slice(lua_number(*n).as_bytes())
        }
        Value::String(s) => string(out, &s.as_bytes()),
        Value::Table(t) => {
            if depth >= MAX_DEPTH {
                return Err(error(format!(
                    "Cannot serialise, excessive nesting ({})",
                    depth + 1
                )));
            }
            table(out, t, depth + 1)?
        }
        other => {
            return Err(error(format!(
                "Cannot serialise {}: type not supported",
                other.type_name()
            )))
        }
    }
    Ok(())
}

fn table(out: &mut Vec<u8>, t: &Table, depth: usize) -> mlua::Result<()> {
    let pairs: Vec<(Value, Value)> = t
        .clone()
        .pairs::<Value, Value>()
        .collect::<Result<_, _>>()?;
    // An array when every key is a positive integer.
    let mut max = 0usize;
    let mut array = !pairs.is_empty();
    for (k, _) in &pairs {
        let n = match k {
            Value::Integer(i) => *i as f64,
            Value::Number(n) => *n,
            _ => {
                array = false;
                break;
            }
        };
        if n < 1.0 || n.fract() != 0.0 || n > 1e15 {
            array = false;
            break;
        }
        max = max.max(n as usize);
    }
    if array {
        if max > 10 && max > pairs.len() * 2 {
            return Err(error("Cannot serialise table: excessively sparse array"));
        }
        out.push(b'[');
        for i in 1..=max {
            if i > 1 {
                out.push(b',');
            }
            encode(out, &t.raw_get::<Value>(i)?, depth)?;
        }
        out.push(b']');
        return Ok(());
    }
    out.push(b'{');
    for (i, (k, v)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        match k {
            Value::String(s) => string(out, &s.as_bytes()),
            Value::Number(n) => string(out, lua_number(*n).as_bytes()),
            Value::Integer(n) => string(out, n.to_string().as_bytes()),
            _ => {
                return Err(error(
                    "Cannot serialise table: table key must be a number or string",
                ))
            }
        }
        out.push(b':');
        encode(out, v, depth)?;
    }
    out.push(b'}');
    Ok(())
}

fn string(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    for &b in s {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            0..=0x1f | 0x7f => out.extend_from_slice(format!("\\u{:04x}", b).as_bytes()),
            _ => out.push(b),
        }
    }
    out.push(b'"');
}

struct Parser<'d> {
    data: &'d [u8],
    pos: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.pos < self.data.len()
            && matches!(self.data[self.pos], b' ' | b'\t' | b'\n' | b'\r')
        {
            self.pos += 1;
        }
    }

    fn unexpected(&self, what: &str) -> mlua::Error {
        error(format!(
            "Expected {what} but found invalid token at character {}",
            self.pos + 1
        ))
    }

    fn value(&mut self, lua: &Lua, depth: usize) -> mlua::Result<Value> {
        self.ws();
        if depth >= MAX_DEPTH {
            return Err(error(format!(
                "Found too many nested data structures ({}) at character {}",
                depth + 1,
                self.pos + 1
            )));
        }
        let Some(&c) = self.data.get(self.pos) else {
            return Err(self.unexpected("value"));
        };
        match c {
            b'{' => {
                self.pos += 1;
                let t = lua.create_table()?;
                self.ws();
                if self.data.get(self.pos) == Some(&b'}') {
                    self.pos += 1;
                    return Ok(Value::Table(t));
                }
                loop {
                    self.ws();
                    if self.data.get(self.pos) != Some(&b'"') {
                        return Err(self.unexpected("object key string"));
                    }
                    let k = self.string(lua)?;
                    self.ws();
                    if self.data.get(self.pos) != Some(&b':') {
                        return Err(self.unexpected("colon"));
                    }
                    self.pos += 1;
                    let v = self.value(lua, depth + 1)?;
                    t.raw_set(k, v)?;
                    self.ws();
                    match self.data.get(self.pos) {
                        Some(b',') => self.pos += 1,
                        Some(b'}') => {
                            self.pos += 1;
                            return Ok(Value::Table(t));
                        }
                        _ => return Err(self.unexpected("comma or object end")),
                    }
                }
            }
            b'[' => {
                self.pos += 1;
                let t = lua.create_table()?;
                self.ws();
                if self.data.get(self.pos) == Some(&b']') {
                    self.pos += 1;
                    return Ok(Value::Table(t));
                }
                let mut i = 1;
                loop {
                    let v = self.value(lua, depth + 1)?;
                    t.raw_set(i, v)?;
                    i += 1;
                    self.ws();
                    match self.data.get(self.pos) {
                        Some(b',') => self.pos += 1,
                        Some(b']') => {
                            self.pos += 1;
                            return Ok(Value::Table(t));
                        }
                        _ => return Err(self.unexpected("comma or array end")),
                    }
                }
            }
            b'"' => self.string(lua),
            b't' if self.data[self.pos..].starts_with(b"true") => {
                self.pos += 4;
                Ok(Value::Boolean(true))
            }
            b'f' if self.data[self.pos..].starts_with(b"false") => {
                self.pos += 5;
                Ok(Value::Boolean(false))
            }
            b'n' if self.data[self.pos..].starts_with(b"null") => {
                self.pos += 4;
                Ok(null())
            }
            b'-' | b'0'..=b'9' => {
                let start = self.pos;
                while self.pos < self.data.len()
                    && matches!(
                        self.data[self.pos],
                        b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9'
                    )
                {
                    self.pos += 1;
                }
                let text = std::str::from_utf8(&self.data[start..self.pos]).unwrap_or("");
                match text.parse::<f64>() {
                    Ok(n) => Ok(Value::Number(n)),
                    Err(_) => {
                        self.pos = start;
                        Err(self.unexpected("value"))
                    }
                }
            }
            _ => Err(self.unexpected("value")),
        }
    }

    fn string(&mut self, lua: &Lua) -> mlua::Result<Value> {
        self.pos += 1;
        let mut out = Vec::new();
        loop {
            let Some(&b) = self.data.get(self.pos) else {
                return Err(self.unexpected("string end"));
            };
            self.pos += 1;
            match b {
                b'"' => return Ok(Value::String(lua.create_string(&out)?)),
                b'\\' => {
                    let Some(&e) = self.data.get(self.pos) else {
                        return Err(self.unexpected("escape"));
                    };
                    self.pos += 1;
                    match e {
                        b'"' | b'\\' | b'/' => out.push(e),
                        b'b' => out.push(0x08),
                        b'f' => out.push(0x0c),
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'u' => {
                            let mut cp = self.hex4()?;
                            if (0xd800..0xdc00).contains(&cp)
                                && self.data[self.pos..].starts_with(b"\\u")
                            {
                                self.pos += 2;
                                let low = self.hex4()?;
                                if (0xdc00..0xe000).contains(&low) {
                                    cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
                                }
                            }
                            let ch = char::from_u32(cp).unwrap_or('\u{fffd}');
                            let mut buf = [0u8; 4];
                            out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                        }
                        _ => return Err(self.unexpected("escape")),
                    }
                }
                _ => out.push(b),
            }
        }
    }

    fn hex4(&mut self) -> mlua::Result<u32> {
        let digits = self
            .data
            .get(self.pos..self.pos + 4)
            .and_then(|d| std::str::from_utf8(d).ok())
            .and_then(|d| u32::from_str_radix(d, 16).ok())
            .ok_or_else(|| self.unexpected("unicode escape"))?;
        self.pos += 4;
        Ok(digits)
    }
}
