//! The SQLite driver: a file database opened with rusqlite; guarded upserts as two statements
//! per row (the version guard, then the row) in one transaction with the checkpoint.

use rusqlite::{params, Connection, ErrorCode};

use crate::config::MappingConfig;
use crate::db::{columns, load_sql, quoted, Columns, DbError, Driver, Row, RowChange};

pub struct Sqlite {
    conn: Connection,
}

fn error(e: rusqlite::Error) -> DbError {
    // Busy, locked, I/O, full disk, cannot open: the database, not the data.
    let connection = matches!(
        e.sqlite_error_code(),
        Some(
            ErrorCode::DatabaseBusy
                | ErrorCode::DatabaseLocked
                | ErrorCode::SystemIoFailure
                | ErrorCode::DiskFull
                | ErrorCode::CannotOpen
                | ErrorCode::ReadOnly
        )
    );
    DbError {
        message: e.to_string(),
        connection,
    }
}

impl Sqlite {
    pub fn open(path: &str) -> Result<Sqlite, DbError> {
        let conn = Connection::open(path).map_err(|e| DbError {
            message: format!("cannot open {path}: {e}"),
            connection: true,
        })?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(error)?;
        Ok(Sqlite { conn })
    }

    fn one(&self, cfg: &MappingConfig, row: &Row) -> Result<u64, rusqlite::Error> {
        let guard = self.conn.execute(
            "INSERT INTO cairn_wb_version (mapping, key, version) VALUES (?1, ?2, ?3) \
             ON CONFLICT (mapping, key) DO UPDATE SET version = excluded.version \
             WHERE cairn_wb_version.version < excluded.version",
            params![cfg.name, row.id, row.lsn as i64],
        )?;
        if guard == 0 {
            return Ok(0); // a newer change of this key is already applied
        }
        let table = quoted(&cfg.table);
        let key = quoted(&row.key_column);
        match &row.change {
            RowChange::Delete => self.conn.execute(
                &format!("DELETE FROM {table} WHERE {key} = ?1"),
                params![row.id],
            )?,
            RowChange::Upsert(cols) => {
                let names = columns(row, cols);
                let list: Vec<String> = names.iter().map(|c| quoted(c)).collect();
                let marks: Vec<String> = (1..=names.len()).map(|i| format!("?{i}")).collect();
                let set: Vec<String> = list[1..]
                    .iter()
                    .map(|c| format!("{c} = excluded.{c}"))
                    .collect();
                let action = if set.is_empty() {
                    "NOTHING".to_string()
                } else {
                    format!("UPDATE SET {}", set.join(", "))
                };
                let sql = format!(
                    "INSERT INTO {table} ({}) VALUES ({}) ON CONFLICT ({key}) DO {action}",
                    list.join(", "),
                    marks.join(", ")
                );
                let values = std::iter::once(Some(row.id.as_str()))
                    .chain(cols.iter().map(|(_, v)| v.as_deref()));
                self.conn
                    .prepare_cached(&sql)?
                    .execute(rusqlite::params_from_iter(values))?
            }
        };
        Ok(1)
    }

    fn set_checkpoint(&self, mapping: &str, lsn: u64) -> Result<(), rusqlite::Error> {
        self.conn.execute(
            "INSERT INTO cairn_wb_checkpoint (mapping, lsn) VALUES (?1, ?2) \
             ON CONFLICT (mapping) DO UPDATE SET lsn = excluded.lsn",
            params![mapping, lsn as i64],
        )?;
        Ok(())
    }
}

impl Driver for Sqlite {
    fn checkpoint(&mut self, mapping: &str) -> Result<u64, DbError> {
        self.conn
            .execute_batch(
                "CREATE TABLE IF NOT EXISTS cairn_wb_checkpoint \
                   (mapping TEXT PRIMARY KEY, lsn INTEGER NOT NULL); \
                 CREATE TABLE IF NOT EXISTS cairn_wb_version \
                   (mapping TEXT NOT NULL, key TEXT NOT NULL, version INTEGER NOT NULL, \
                    PRIMARY KEY (mapping, key));",
            )
            .map_err(error)?;
        let lsn: Option<i64> = self
            .conn
            .query_row(
                "SELECT lsn FROM cairn_wb_checkpoint WHERE mapping = ?1",
                params![mapping],
                |r| r.get(0),
            )
            .or_else(|e| match e {
                rusqlite::Error::QueryReturnedNoRows => Ok(None),
                e => Err(e),
            })
            .map_err(error)?;
        Ok(lsn.unwrap_or(0) as u64)
    }

    fn floor(&mut self, mapping: &str) -> Result<u64, DbError> {
        let checkpoint = self.checkpoint(mapping)?;
        let version: i64 = self
            .conn
            .query_row(
                "SELECT coalesce(max(version), 0) FROM cairn_wb_version WHERE mapping = ?1",
                params![mapping],
                |r| r.get(0),
            )
            .map_err(error)?;
        Ok(checkpoint.max(version as u64))
    }

    fn apply(
        &mut self,
        cfg: &MappingConfig,
        rows: &[Row],
        checkpoint: u64,
    ) -> Result<u64, DbError> {
        self.conn.execute_batch("BEGIN IMMEDIATE").map_err(error)?;
        let result = (|| {
            let mut written = 0;
            for row in rows {
                written += self.one(cfg, row)?;
            }
            self.set_checkpoint(&cfg.name, checkpoint)?;
            self.conn.execute_batch("COMMIT")?;
            Ok(written)
        })();
        if result.is_err() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
        result.map_err(error)
    }

    fn apply_each(
        &mut self,
        cfg: &MappingConfig,
        rows: &[Row],
        checkpoint: u64,
    ) -> Result<(u64, Vec<(usize, String)>), DbError> {
        self.conn.execute_batch("BEGIN IMMEDIATE").map_err(error)?;
        let result = (|| {
            let mut written = 0;
            let mut refused = Vec::new();
            for (i, row) in rows.iter().enumerate() {
                self.conn.execute_batch("SAVEPOINT cairn_row")?;
                match self.one(cfg, row) {
                    Ok(n) => {
                        written += n;
                        self.conn.execute_batch("RELEASE cairn_row")?;
                    }
                    Err(e) if !error_clone(&e).connection => {
                        self.conn
                            .execute_batch("ROLLBACK TO cairn_row; RELEASE cairn_row")?;
                        refused.push((i, e.to_string()));
                    }
                    Err(e) => return Err(e),
                }
            }
            self.set_checkpoint(&cfg.name, checkpoint)?;
            self.conn.execute_batch("COMMIT")?;
            Ok((written, refused))
        })();
        if result.is_err() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
        result.map_err(error)
    }

    fn load(&mut self, cfg: &MappingConfig, id: &str) -> Result<Option<Columns>, DbError> {
        self.load_row(cfg, id).map_err(error)
    }
}

impl Sqlite {
    fn load_row(&self, cfg: &MappingConfig, id: &str) -> Result<Option<Columns>, rusqlite::Error> {
        let mut stmt = self.conn.prepare_cached(&load_sql(cfg, "?1"))?;
        let names: Vec<String> = stmt.column_names().iter().map(|n| n.to_string()).collect();
        let mut rows = stmt.query(params![id])?;
        let Some(row) = rows.next()? else {
            return Ok(None);
        };
        let mut out = Vec::new();
        for (i, name) in names.iter().enumerate() {
            if *name == cfg.key_column {
                continue;
            }
            use rusqlite::types::ValueRef;
            let text = match row.get_ref(i)? {
                ValueRef::Null => continue,
                ValueRef::Integer(n) => n.to_string(),
                ValueRef::Real(f) => f.to_string(),
                ValueRef::Text(t) | ValueRef::Blob(t) => String::from_utf8_lossy(t).into_owned(),
            };
            out.push((name.clone(), text));
        }
        Ok(Some(out))
    }
}

fn error_clone(e: &rusqlite::Error) -> DbError {
    let connection = matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked | ErrorCode::SystemIoFailure)
    );
    DbError {
        message: e.to_string(),
        connection,
    }
}
