//! The `struct` library as Redis ships it: `pack(fmt, ...)`, `unpack(fmt, s [, pos])` (the
//! values, then the position after them) and `size(fmt)`. Formats: `<` little, `>` big, `=`
//! native endian; `!n` alignment; `b/B` 1, `h/H` 2, `i/I[n]` n (default 4), `l/L` 8, `T` size_t
//! (8) byte integers; `f` float, `d` double; `s` zero-terminated string; `c[n]` n chars
//! (`c0` in unpack: the length is the previous value); `x` a zero byte; spaces ignored.

use mlua::{Lua, Table, Value, Variadic};

fn error(msg: impl Into<String>) -> mlua::Error {
    mlua::Error::RuntimeError(msg.into())
}

/// One item of a format.
enum Item {
    Int { size: usize, signed: bool },
    Float,
    Double,
    Zstring,
    Chars(usize),
    Pad,
}

struct Format<'f> {
    fmt: &'f [u8],
    pos: usize,
    little: bool,
    align: usize,
}

impl<'f> Format<'f> {
    fn new(fmt: &'f [u8]) -> Self {
        Format {
            fmt,
            pos: 0,
            little: cfg!(target_endian = "little"),
            align: 1,
        }
    }

    fn number(&mut self) -> Option<usize> {
        let start = self.pos;
        while self.pos < self.fmt.len() && self.fmt[self.pos].is_ascii_digit() {
            self.pos += 1;
        }
        std::str::from_utf8(&self.fmt[start..self.pos])
            .ok()?
            .parse()
            .ok()
    }

    /// The next item, after the options before it (endianness, alignment).
    fn next(&mut self) -> mlua::Result<Option<Item>> {
        while let Some(&c) = self.fmt.get(self.pos) {
            self.pos += 1;
            let int = |size, signed| Ok(Some(Item::Int { size, signed }));
            match c {
                b' ' => {}
                b'<' => self.little = true,
                b'>' => self.little = false,
                b'=' => self.little = cfg!(target_endian = "little"),
                b'!' => self.align = self.number().unwrap_or(8),
                b'b' => return int(1, true),
                b'B' => return int(1, false),
                b'h' => return int(2, true),
                b'H' => return int(2, false),
                b'l' | b'j' => return int(8, true),
                b'L' | b'J' | b'T' => return int(8, false),
                b'i' | b'I' => {
                    let size = self.number().unwrap_or(4);
                    if !(1..=8).contains(&size) {
                        return Err(error(format!(
                            "integral size {size} is larger than limit of 8"
                        )));
                    }
                    return int(size, c == b'i');
                }
                b'f' => return Ok(Some(Item::Float)),
                b'd' => return Ok(Some(Item::Double)),
                b's' => return Ok(Some(Item::Zstring)),
                b'c' => return Ok(Some(Item::Chars(self.number().unwrap_or(1)))),
                b'x' => return Ok(Some(Item::Pad)),
                other => return Err(error(format!("invalid format option '{}'", other as char))),
            }
        }
        Ok(None)
    }

    /// Padding before an item of `size` bytes at `offset`.
    fn padding(&self, size: usize, offset: usize) -> usize {
        let align = size.min(self.align);
        if align <= 1 || !align.is_power_of_two() {
            return 0;
        }
        (align - offset % align) % align
    }
}

fn number(v: Option<&Value>) -> mlua::Result<f64> {
    match v {
        Some(Value::Number(n)) => Ok(*n),
        Some(Value::Integer(i)) => Ok(*i as f64),
        Some(Value::String(s)) => s
            .to_str()
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .ok_or_else(|| error("bad argument to 'pack' (number expected)")),
        _ => Err(error("bad argument to 'pack' (number expected)")),
    }
}

fn put(out: &mut Vec<u8>, bytes: &[u8], little: bool) {
    if little {
        out.extend(bytes.iter().rev());
    } else {
        out.extend_from_slice(bytes);
    }
}

pub fn library(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(
        "pack",
        lua.create_function(|lua, (fmt, args): (mlua::String, Variadic<Value>)| {
            let fmt = fmt.as_bytes();
            let mut f = Format::new(&fmt);
            let mut out = Vec::new();
            let mut args = args.iter();
            while let Some(item) = f.next()? {
                match item {
                    Item::Int { size, .. } => {
                        out.resize(out.len() + f.padding(size, out.len()), 0);
                        let n = number(args.next())?;
                        let v = if n < 0.0 { n as i64 as u64 } else { n as u64 };
                        put(&mut out, &v.to_be_bytes()[8 - size..], f.little);
                    }
                    Item::Float => {
                        out.resize(out.len() + f.padding(4, out.len()), 0);
                        put(
                            &mut out,
                            &(number(args.next())? as f32).to_be_bytes(),
                            f.little,
                        )
                    }
                    Item::Double => {
                        out.resize(out.len() + f.padding(8, out.len()), 0);
                        put(&mut out, &number(args.next())?.to_be_bytes(), f.little)
                    }
                    Item::Zstring | Item::Chars(_) => {
                        let s = match args.next() {
                            Some(Value::String(s)) => s.as_bytes().to_vec(),
                            Some(v @ (Value::Number(_) | Value::Integer(_))) => {
                                super::vm::lua_number(number(Some(v))?).into_bytes()
                            }
                            _ => return Err(error("bad argument to 'pack' (string expected)")),
                        };
                        match item {
                            Item::Zstring => {
                                out.extend_from_slice(&s);
                                out.push(0);
                            }
                            Item::Chars(n) => {
                                let n = if n == 0 { s.len() } else { n };
                                if s.len() < n {
                                    return Err(error("bad argument to 'pack' (string too short)"));
                                }
                                out.extend_from_slice(&s[..n]);
                            }
                            _ => {}
                        }
                    }
                    Item::Pad => out.push(0),
                }
            }
            lua.create_string(&out)
        })?,
    )?;
    t.raw_set(
        "unpack",
        lua.create_function(
            |lua, (fmt, data, init): (mlua::String, mlua::String, Option<i64>)| {
                let fmt = fmt.as_bytes();
                let data = data.as_bytes();
                let mut f = Format::new(&fmt);
                let mut pos = (init.unwrap_or(1).max(1) - 1) as usize;
                let mut values: Vec<Value> = Vec::new();
                let short = || error("bad argument to 'unpack' (data string too short)");
                while let Some(item) = f.next()? {
                    match item {
                        Item::Int { size, signed } => {
                            pos += f.padding(size, pos);
                            let bytes = data.get(pos..pos + size).ok_or_else(short)?;
                            let mut v: u64 = 0;
                            let ordered: Vec<u8> = if f.little {
                                bytes.iter().rev().copied().collect()
                            } else {
                                bytes.to_vec()
                            };
                            for b in ordered {
                                v = v << 8 | b as u64;
                            }
                            let n = if signed && size < 8 && v >> (size * 8 - 1) & 1 == 1 {
                                (v as i64 - (1i64 << (size * 8))) as f64
                            } else if signed {
                                v as i64 as f64
                            } else {
                                v as f64
                            };
                            values.push(Value::Number(n));
                            pos += size;
                        }
                        Item::Float | Item::Double => {
                            let size = if matches!(item, Item::Float) { 4 } else { 8 };
                            pos += f.padding(size, pos);
                            let bytes = data.get(pos..pos + size).ok_or_else(short)?;
                            let mut b: Vec<u8> = bytes.to_vec();
                            if f.little {
                                b.reverse();
                            }
                            let n = if size == 4 {
                                f32::from_be_bytes([b[0], b[1], b[2], b[3]]) as f64
                            } else {
                                f64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
                            };
                            values.push(Value::Number(n));
                            pos += size;
                        }
                        Item::Zstring => {
                            let rest = data.get(pos..).ok_or_else(short)?;
                            let end = rest.iter().position(|&b| b == 0).ok_or_else(|| {
                                error("bad argument to 'unpack' (unfinished string in data)")
                            })?;
                            values.push(Value::String(lua.create_string(&rest[..end])?));
                            pos += end + 1;
                        }
                        Item::Chars(n) => {
                            let n = if n == 0 {
                                match values.pop() {
                                    Some(Value::Number(len)) if len >= 0.0 => len as usize,
                                    _ => return Err(error("format 'c0' needs a previous size")),
                                }
                            } else {
                                n
                            };
                            let bytes = data.get(pos..pos.saturating_add(n)).ok_or_else(short)?;
                            values.push(Value::String(lua.create_string(bytes)?));
                            pos += n;
                        }
                        Item::Pad => pos += 1,
                    }
                }
                values.push(Value::Number((pos + 1) as f64));
                Ok(Variadic::from_iter(values))
            },
        )?,
    )?;
    t.raw_set(
        "size",
        lua.create_function(|_, fmt: mlua::String| {
            let fmt = fmt.as_bytes();
            let mut f = Format::new(&fmt);
            let mut size = 0usize;
            while let Some(item) = f.next()? {
                let n = match item {
                    Item::Int { size, .. } => size,
                    Item::Float => 4,
                    Item::Double => 8,
                    Item::Chars(n) => n,
                    Item::Pad => 1,
                    Item::Zstring => return Err(error("options 's' has no fixed size")),
                };
                size += f.padding(n, size) + n;
            }
            Ok(size as f64)
        })?,
    )?;
    Ok(t)
}
