//! `SQL.TABLES` and `SQL.DESCRIBE`: the user's view of the schema, without cairn's tables.

use crate::conn::Conn;
use crate::error::ErrorKind;
use crate::{ColumnInfo, Reply, SqlError};
use rusqlite::OptionalExtension;

/// User tables (ordinary and virtual), sorted; SQLite's, cairn's and FTS shadow tables are left out.
pub(crate) fn tables(conn: &Conn) -> Result<Reply, SqlError> {
    let names = conn.internal(|db| {
        let mut st = db.prepare_cached(
            "SELECT name FROM pragma_table_list WHERE schema = 'main' \
             AND type IN ('table', 'virtual') \
             AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name NOT LIKE '\\_cairn\\_%' ESCAPE '\\' \
             ORDER BY name",
        )?;
        let rows = st.query_map([], |r| r.get::<_, String>(0))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
    })?;
    Ok(Reply::Tables(names))
}

/// Columns of a table or view, as `PRAGMA table_info` reports them.
pub(crate) fn describe(conn: &Conn, table: &str) -> Result<Reply, SqlError> {
    let cols = conn.internal(|db| {
        let name: Option<String> = db
            .query_row(
                "SELECT name FROM sqlite_schema WHERE type IN ('table', 'view') \
                 AND name = ?1 COLLATE NOCASE",
                [table],
                |r| r.get(0),
            )
            .optional()?;
        let Some(name) = name else { return Ok(None) };
        let mut st = db.prepare_cached(
            "SELECT name, type, \"notnull\", dflt_value, pk FROM pragma_table_info(?1)",
        )?;
        let rows = st.query_map([name], |r| {
            Ok(ColumnInfo {
                name: r.get(0)?,
                decl_type: r.get(1)?,
                not_null: r.get(2)?,
                default: r.get(3)?,
                primary_key: r.get(4)?,
            })
        })?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map(Some)
    })?;
    match cols {
        Some(cols) => Ok(Reply::Describe(cols)),
        None => Err(SqlError::new(
            ErrorKind::NoSuchTable,
            format!("no such table: {table}"),
        )),
    }
}
