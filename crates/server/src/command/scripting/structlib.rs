//! placeholder
use mlua::{Lua, Table};

pub fn library(lua: &Lua) -> mlua::Result<Table> {
    lua.create_table()
}
