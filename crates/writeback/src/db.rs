//! The database side: what a flusher asks of a database, and the two drivers (SQLite through
//! rusqlite, PostgreSQL through the synchronous `postgres` client).
//!
//! Every row write is version-guarded: cairn's own table `cairn_wb_version (mapping, key,
//! version)` keeps the log number (LSN) of the last change applied to each key, and a change
//! is applied only if its number is greater. The mapped table holds only the application's
//! columns. `cairn_wb_checkpoint (mapping, lsn)` says how far the log was applied, and is
//! written in the same transaction as the rows it covers, and as the dead letters
//! (`cairn_wb_dead (mapping, lsn, key, value, reason, time_ms)`) of the changes it skips.

use crate::config::{MappingConfig, ValueShape};
use crate::DeadLetter;

/// One row change, ready for SQL: `key` names the row (a key mapping's key column and the key
/// less the mapping's prefix, or an SQL row's primary key columns and values); `id` is the
/// key as one text, the row's name in `cairn_wb_version`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    pub key: Vec<(String, String)>,
    pub id: String,
    pub lsn: u64,
    pub change: RowChange,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RowChange {
    Delete,
    /// Column name and value as text, the database converting it to the column's type
    /// (`None`: NULL).
    Upsert(Vec<(String, Option<String>)>),
}

/// One column value of a cairn SQL row, as the log keeps it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Cell<'a> {
    Null,
    Integer(i64),
    Real(f64),
    Text(&'a [u8]),
    Blob(&'a [u8]),
}

/// A row of an SQL table as a log record's value: its primary key columns, then its other
/// columns (none for a delete), each part as [`encode_row`] writes it.
pub fn encode_sql_row(key: &[(&str, Cell<'_>)], rest: &[(&str, Cell<'_>)]) -> Vec<u8> {
    let mut out = encode_row(key);
    out.extend_from_slice(&encode_row(rest));
    out
}

/// Reads [`encode_sql_row`]'s key columns and other columns back as text. A record of an
/// older log holds one part whose first column is the key.
pub fn decode_sql_row(mut buf: &[u8]) -> Result<(Text, Text), String> {
    let mut key = decode_part(&mut buf)?;
    if buf.is_empty() {
        let rest = key.split_off(1.min(key.len()));
        return Ok((key, rest));
    }
    let rest = decode_part(&mut buf)?;
    Ok((key, rest))
}

/// Columns as text: (name, value; None: NULL).
pub type Text = Vec<(String, Option<String>)>;

/// A row's columns as bytes: `[count u16]` then per column `[name_len u16][name][tag u8]
/// [len u32][bytes]`.
pub fn encode_row(columns: &[(&str, Cell<'_>)]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(columns.len() as u16).to_le_bytes());
    for (name, cell) in columns {
        out.extend_from_slice(&(name.len() as u16).to_le_bytes());
        out.extend_from_slice(name.as_bytes());
        let (tag, bytes): (u8, std::borrow::Cow<'_, [u8]>) = match cell {
            Cell::Null => (0, (&[][..]).into()),
            Cell::Integer(i) => (1, i.to_string().into_bytes().into()),
            // `{:?}` keeps a `.0` or an exponent, so the text reads back as the same number.
            Cell::Real(f) => (2, format!("{f:?}").into_bytes().into()),
            Cell::Text(b) => (3, (*b).into()),
            Cell::Blob(b) => (4, (*b).into()),
        };
        out.push(tag);
        out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        out.extend_from_slice(&bytes);
    }
    out
}

/// Reads [`encode_row`]'s columns back as text (None: NULL); an error for a value that is not
/// text (a BLOB that is not UTF-8) or a damaged encoding.
pub fn decode_row(mut buf: &[u8]) -> Result<Text, String> {
    decode_part(&mut buf)
}

/// [`decode_row`] of the encoding at the start of `buf`, which is left after it.
fn decode_part(buf: &mut &[u8]) -> Result<Text, String> {
    fn take<'b>(buf: &mut &'b [u8], n: usize) -> Result<&'b [u8], String> {
        if buf.len() < n {
            return Err("damaged row encoding".into());
        }
        let (head, rest) = buf.split_at(n);
        *buf = rest;
        Ok(head)
    }
    let count = u16::from_le_bytes(take(buf, 2)?.try_into().expect("2 bytes"));
    let mut out = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let n = u16::from_le_bytes(take(buf, 2)?.try_into().expect("2 bytes")) as usize;
        let name = String::from_utf8(take(buf, n)?.to_vec())
            .map_err(|_| "column name is not UTF-8".to_string())?;
        let tag = take(buf, 1)?[0];
        let n = u32::from_le_bytes(take(buf, 4)?.try_into().expect("4 bytes")) as usize;
        let bytes = take(buf, n)?;
        let value = match tag {
            0 => None,
            1..=4 => Some(
                std::str::from_utf8(bytes)
                    .map_err(|_| format!("column '{name}' holds a BLOB that is not UTF-8 text"))?
                    .to_string(),
            ),
            _ => return Err("damaged row encoding".into()),
        };
        out.push((name, value));
    }
    Ok(out)
}

/// Why a database call failed.
#[derive(Clone, Debug)]
pub struct DbError {
    pub message: String,
    /// The connection (or the database) is unusable: retry the same work later, forever.
    /// Otherwise the database refused the data: a bounded number of retries, then rows are
    /// isolated and the refused ones dead-lettered.
    pub connection: bool,
}

impl std::fmt::Display for DbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// A database a flusher writes to.
pub trait Driver: Send {
    /// Creates cairn's tables if missing; the mapping's checkpoint (0: none yet).
    fn checkpoint(&mut self, mapping: &str) -> Result<u64, DbError>;
    /// The highest number the database holds for the mapping: its checkpoint or the greatest
    /// key version, whichever is higher (a log must number its next change above it).
    fn floor(&mut self, mapping: &str) -> Result<u64, DbError>;
    /// Applies `rows` (one per key, in log order), stores the dead letters `dead` and sets
    /// the checkpoint to `checkpoint`, in one transaction. Returns how many rows changed the
    /// table (guards may skip some).
    fn apply(
        &mut self,
        cfg: &MappingConfig,
        rows: &[Row],
        dead: &[DeadLetter],
        checkpoint: u64,
    ) -> Result<u64, DbError>;
    /// As `apply`, but each row on its own savepoint: a row the database refuses is left out
    /// and its letter (`letters[i]` for `rows[i]`, with the database's reason) is stored with
    /// `dead`; the others and the checkpoint commit. Returns the rows written and every
    /// letter stored.
    fn apply_each(
        &mut self,
        cfg: &MappingConfig,
        rows: &[Row],
        dead: &[DeadLetter],
        letters: &[DeadLetter],
        checkpoint: u64,
    ) -> Result<(u64, Vec<DeadLetter>), DbError>;
    /// Read-through: the row whose key column is `id`, as its non-null columns other than the
    /// key column (all of them for a hash mapping, the value column for a string one), each
    /// as text; None when there is no such row.
    fn load(&mut self, cfg: &MappingConfig, id: &str) -> Result<Option<Columns>, DbError>;
    /// The mapping's newest `count` dead letters.
    fn dead_letters(&mut self, mapping: &str, count: usize) -> Result<Vec<DeadLetter>, DbError>;
    /// Deletes the mapping's dead letters numbered `lsns`.
    fn drop_dead_letters(&mut self, mapping: &str, lsns: &[u64]) -> Result<(), DbError>;
}

/// A refused row's letter: `letter` with the database's reason.
pub(crate) fn refused(letter: &DeadLetter, why: String) -> DeadLetter {
    DeadLetter {
        reason: why,
        ..letter.clone()
    }
}

/// A loaded row's columns: (name, value as text).
pub type Columns = Vec<(String, String)>;

/// The statement a load runs: every column for a hash mapping, the value column for a string
/// one, with the key as a parameter or literal the caller places at `key`.
pub(crate) fn load_sql(cfg: &MappingConfig, key: &str) -> String {
    let cols = match &cfg.value {
        ValueShape::Hash => "*".to_string(),
        ValueShape::String { column } => quoted(column),
    };
    format!(
        "SELECT {cols} FROM {} WHERE {} = {key}",
        quoted(&cfg.table),
        quoted(&cfg.key_column)
    )
}

/// Opens a connection for read-through loads: as `connect`, with a bound on each query
/// (`LOAD_TIMEOUT`), so that a database that hangs answers the read with an error in time.
pub fn connect_for_loads(cfg: &MappingConfig) -> Result<Box<dyn Driver>, DbError> {
    match &cfg.database {
        crate::config::Database::Sqlite(path) => Ok(Box::new(crate::sqlite::Sqlite::open(path)?)),
        crate::config::Database::Postgres(url) => Ok(Box::new(
            crate::pg::Postgres::open_for_loads(url, LOAD_TIMEOUT)?,
        )),
    }
}

/// How long one read-through query (and its connect) may take.
pub const LOAD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Opens the driver for `cfg`'s database.
pub fn connect(cfg: &MappingConfig) -> Result<Box<dyn Driver>, DbError> {
    match &cfg.database {
        crate::config::Database::Sqlite(path) => Ok(Box::new(crate::sqlite::Sqlite::open(path)?)),
        crate::config::Database::Postgres(url) => Ok(Box::new(crate::pg::Postgres::open(url)?)),
    }
}

/// `"name"`: an identifier (checked at parse to be plain) quoted for SQL.
pub(crate) fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The upsert's column list for `row`: the key columns, then the value columns.
pub(crate) fn columns<'r>(row: &'r Row, cols: &'r [(String, Option<String>)]) -> Vec<&'r str> {
    row.key
        .iter()
        .map(|(c, _)| c.as_str())
        .chain(cols.iter().map(|(c, _)| c.as_str()))
        .collect()
}

/// The key's columns quoted and joined with `, ` (an `ON CONFLICT` target).
pub(crate) fn key_list(row: &Row) -> String {
    let names: Vec<String> = row.key.iter().map(|(c, _)| quoted(c)).collect();
    names.join(", ")
}

/// Turns a record's value into columns (a hash's fields, or the string's one column).
pub fn row_columns(
    cfg: &MappingConfig,
    op: crate::log::OpKind,
    value: &[u8],
) -> Result<Vec<(String, Option<String>)>, String> {
    let text = |b: &[u8]| {
        std::str::from_utf8(b)
            .map(|s| Some(s.to_string()))
            .map_err(|_| "value is not UTF-8 text".to_string())
    };
    if cfg.sql_table.is_some() || op == crate::log::OpKind::Row {
        if cfg.sql_table.is_none() || op != crate::log::OpKind::Row {
            return Err("a row of an SQL table and a key mapping do not match".into());
        }
        // The key columns (the row's primary key) name the row: the rest are set.
        return decode_sql_row(value).map(|(_, rest)| rest);
    }
    match (&cfg.value, op) {
        (ValueShape::String { column }, crate::log::OpKind::String) => {
            Ok(vec![(column.clone(), text(value)?)])
        }
        (ValueShape::Hash, crate::log::OpKind::Hash) => {
            let mut out = Vec::new();
            for (field, v) in store::hash::fields(value) {
                let name = text(field)?.unwrap_or_default();
                let plain = !name.is_empty()
                    && name.len() <= 63
                    && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
                if !plain || name.eq_ignore_ascii_case(&cfg.key_column) {
                    return Err(format!("field '{name}' cannot be a column"));
                }
                out.push((name, text(v)?));
            }
            Ok(out)
        }
        (_, crate::log::OpKind::Row | crate::log::OpKind::Mark) => {
            Err("not a change of a key".into())
        }
        (_, crate::log::OpKind::Collection) => {
            Err("the key holds a set, sorted set or list, which no mapping stores".into())
        }
        (ValueShape::Hash, _) => Err("the mapping wants hashes; the key holds a string".into()),
        (ValueShape::String { .. }, _) => {
            Err("the mapping wants strings; the key holds a hash".into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sql_rows_carry_their_key_columns_apart() {
        let text = |cols: &[(&str, Option<&str>)]| -> Text {
            cols.iter()
                .map(|(c, v)| (c.to_string(), v.map(str::to_string)))
                .collect()
        };
        let key = [("a", Cell::Text(b"x")), ("b", Cell::Integer(2))];
        let row = encode_sql_row(&key, &[("v", Cell::Null)]);
        let (k, rest) = decode_sql_row(&row).unwrap();
        assert_eq!(k, text(&[("a", Some("x")), ("b", Some("2"))]));
        assert_eq!(rest, text(&[("v", None)]));
        // A delete (or a row with no other column): the key alone.
        let (k, rest) = decode_sql_row(&encode_sql_row(&key, &[])).unwrap();
        assert_eq!((k.len(), rest.len()), (2, 0));
        // An older log's record: one part, the key first (a delete's: the key alone).
        let old = encode_row(&[("id", Cell::Integer(7)), ("v", Cell::Text(b"t"))]);
        let (k, rest) = decode_sql_row(&old).unwrap();
        assert_eq!(k, text(&[("id", Some("7"))]));
        assert_eq!(rest, text(&[("v", Some("t"))]));
        assert!(
            decode_sql_row(&row[..row.len() - 1]).is_err(),
            "a cut encoding"
        );
    }

    #[test]
    fn rows_encode_and_decode_as_text_with_nulls() {
        let bytes = encode_row(&[
            ("id", Cell::Integer(7)),
            ("name", Cell::Text(b"it's")),
            ("score", Cell::Real(0.5)),
            ("note", Cell::Null),
            ("raw", Cell::Blob(b"ok")),
        ]);
        let cols = decode_row(&bytes).unwrap();
        let want: Vec<(String, Option<String>)> = [
            ("id", Some("7")),
            ("name", Some("it's")),
            ("score", Some("0.5")),
            ("note", None),
            ("raw", Some("ok")),
        ]
        .iter()
        .map(|(c, v)| (c.to_string(), v.map(str::to_string)))
        .collect();
        assert_eq!(cols, want);
        assert!(decode_row(&encode_row(&[("b", Cell::Blob(&[0xff, 0xfe]))])).is_err());
        assert!(
            decode_row(&bytes[..bytes.len() - 1]).is_err(),
            "a cut encoding"
        );
    }
}
