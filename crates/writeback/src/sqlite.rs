//! The SQLite driver: a file database opened with rusqlite; guarded upserts as two statements
//! per row (the version guard, then the row) in one transaction with the checkpoint.

use rusqlite::{params, Connection, ErrorCode};

use crate::config::MappingConfig;
use crate::db::{
    columns, key_list, load_sql, quoted, refused, Columns, DbError, Driver, Row, RowChange,
};
use crate::{DeadLetter, DEAD_MAX};

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
        let n = row.key.len();
        match &row.change {
            RowChange::Delete => {
                let filter: Vec<String> = (row.key.iter().enumerate())
                    .map(|(i, (c, _))| format!("{} = ?{}", quoted(c), i + 1))
                    .collect();
                self.conn.execute(
                    &format!("DELETE FROM {table} WHERE {}", filter.join(" AND ")),
                    rusqlite::params_from_iter(row.key.iter().map(|(_, v)| v)),
                )?
            }
            RowChange::Upsert(cols) => {
                let names = columns(row, cols);
                let list: Vec<String> = names.iter().map(|c| quoted(c)).collect();
                let marks: Vec<String> = (1..=names.len()).map(|i| format!("?{i}")).collect();
                let set: Vec<String> = list[n..]
                    .iter()
                    .map(|c| format!("{c} = excluded.{c}"))
                    .collect();
                let action = if set.is_empty() {
                    "NOTHING".to_string()
                } else {
                    format!("UPDATE SET {}", set.join(", "))
                };
                let sql = format!(
                    "INSERT INTO {table} ({}) VALUES ({}) ON CONFLICT ({}) DO {action}",
                    list.join(", "),
                    marks.join(", "),
                    key_list(row)
                );
                let values = (row.key.iter().map(|(_, v)| Some(v.as_str())))
                    .chain(cols.iter().map(|(_, v)| v.as_deref()));
                self.conn
                    .prepare_cached(&sql)?
                    .execute(rusqlite::params_from_iter(values))?
            }
        };
        Ok(1)
    }

    /// Stores `dead` and keeps the mapping's newest [`DEAD_MAX`] letters (a letter stored
    /// already stays once).
    fn store_dead(&self, mapping: &str, dead: &[DeadLetter]) -> Result<(), rusqlite::Error> {
        if dead.is_empty() {
            return Ok(());
        }
        let mut insert = self.conn.prepare_cached(
            "INSERT INTO cairn_wb_dead (mapping, lsn, key, value, reason, time_ms) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (mapping, lsn) DO NOTHING",
        )?;
        for l in dead {
            insert.execute(params![
                mapping,
                l.lsn as i64,
                l.key,
                l.value,
                l.reason,
                l.time_ms as i64
            ])?;
        }
        self.conn.execute(
            "DELETE FROM cairn_wb_dead WHERE mapping = ?1 AND lsn < (SELECT lsn FROM \
             cairn_wb_dead WHERE mapping = ?1 ORDER BY lsn DESC LIMIT 1 OFFSET ?2)",
            params![mapping, (DEAD_MAX - 1) as i64],
        )?;
        Ok(())
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
                    PRIMARY KEY (mapping, key)); \
                 CREATE TABLE IF NOT EXISTS cairn_wb_dead \
                   (mapping TEXT NOT NULL, lsn INTEGER NOT NULL, key BLOB NOT NULL, \
                    value BLOB NOT NULL, reason TEXT NOT NULL, time_ms INTEGER NOT NULL, \
                    PRIMARY KEY (mapping, lsn));",
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
        dead: &[DeadLetter],
        checkpoint: u64,
    ) -> Result<u64, DbError> {
        self.conn.execute_batch("BEGIN IMMEDIATE").map_err(error)?;
        let result = (|| {
            let mut written = 0;
            for row in rows {
                written += self.one(cfg, row)?;
            }
            self.store_dead(&cfg.name, dead)?;
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
        dead: &[DeadLetter],
        letters: &[DeadLetter],
        checkpoint: u64,
    ) -> Result<(u64, Vec<DeadLetter>), DbError> {
        self.conn.execute_batch("BEGIN IMMEDIATE").map_err(error)?;
        let result = (|| {
            let mut written = 0;
            let mut stored = dead.to_vec();
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
                        stored.push(refused(&letters[i], e.to_string()));
                    }
                    Err(e) => return Err(e),
                }
            }
            self.store_dead(&cfg.name, &stored)?;
            self.set_checkpoint(&cfg.name, checkpoint)?;
            self.conn.execute_batch("COMMIT")?;
            Ok((written, stored))
        })();
        if result.is_err() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
        result.map_err(error)
    }

    fn load(&mut self, cfg: &MappingConfig, id: &str) -> Result<Option<Columns>, DbError> {
        self.load_row(cfg, id).map_err(error)
    }

    fn dead_letters(&mut self, mapping: &str, count: usize) -> Result<Vec<DeadLetter>, DbError> {
        self.read_dead(mapping, count).map_err(error)
    }

    fn drop_dead_letters(&mut self, mapping: &str, lsns: &[u64]) -> Result<(), DbError> {
        let mut delete = self
            .conn
            .prepare_cached("DELETE FROM cairn_wb_dead WHERE mapping = ?1 AND lsn = ?2")
            .map_err(error)?;
        for &n in lsns {
            delete.execute(params![mapping, n as i64]).map_err(error)?;
        }
        Ok(())
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

    fn read_dead(&self, mapping: &str, count: usize) -> Result<Vec<DeadLetter>, rusqlite::Error> {
        let mut q = self.conn.prepare_cached(
            "SELECT lsn, key, value, reason, time_ms FROM cairn_wb_dead \
             WHERE mapping = ?1 ORDER BY lsn DESC LIMIT ?2",
        )?;
        let rows = q.query_map(params![mapping, count.min(i64::MAX as usize) as i64], |r| {
            Ok(DeadLetter {
                lsn: r.get::<_, i64>(0)? as u64,
                key: r.get(1)?,
                value: r.get(2)?,
                reason: r.get(3)?,
                time_ms: r.get::<_, i64>(4)? as u64,
            })
        })?;
        rows.collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn setup(name: &str) -> (Sqlite, MappingConfig) {
        let path =
            std::env::temp_dir().join(format!("cairn-wbdead-{name}-{}.db", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let path = path.to_str().unwrap().to_string();
        let pairs: Vec<(String, String)> = [
            ("prefix", "note:"),
            ("database", &format!("sqlite://{path}")),
            ("table", "notes"),
            ("value", "string"),
            ("value_column", "body"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let cfg = MappingConfig::from_pairs("notes", &pairs).unwrap();
        let mut db = Sqlite::open(&path).unwrap();
        db.conn
            .execute_batch(
                "CREATE TABLE notes (id TEXT PRIMARY KEY, body TEXT CHECK (body <> 'poison'))",
            )
            .unwrap();
        assert_eq!(db.checkpoint("notes").unwrap(), 0);
        (db, cfg)
    }

    fn letter(lsn: u64, reason: &str) -> DeadLetter {
        DeadLetter {
            lsn,
            key: format!("note:{lsn}").into_bytes(),
            value: b"poison".to_vec(),
            reason: reason.into(),
            time_ms: 7,
        }
    }

    fn row(lsn: u64, body: &str) -> Row {
        Row {
            key: vec![("id".into(), lsn.to_string())],
            id: lsn.to_string(),
            lsn,
            change: RowChange::Upsert(vec![("body".into(), Some(body.into()))]),
        }
    }

    #[test]
    fn letters_commit_with_the_checkpoint_once_and_bounded() {
        let (mut db, cfg) = setup("commit");
        // A batch with a refused row: it fails whole, stores nothing.
        let rows = [row(1, "fine"), row(2, "poison")];
        assert!(db.apply(&cfg, &rows, &[letter(3, "early")], 3).is_err());
        assert!(db.dead_letters("notes", 10).unwrap().is_empty());
        assert_eq!(db.checkpoint("notes").unwrap(), 0);
        // Row by row: the refused row's letter and the early one commit with the checkpoint.
        let letters = [letter(1, ""), letter(2, "")];
        let (written, stored) = db
            .apply_each(&cfg, &rows, &[letter(3, "early")], &letters, 3)
            .unwrap();
        assert_eq!(written, 1);
        assert_eq!(stored.len(), 2);
        assert_eq!(db.checkpoint("notes").unwrap(), 3);
        let read = db.dead_letters("notes", 10).unwrap();
        assert_eq!(read.iter().map(|l| l.lsn).collect::<Vec<_>>(), vec![3, 2]);
        assert!(read[1].reason.contains("CHECK"), "{}", read[1].reason);
        assert_eq!(read[0], letter(3, "early"));
        // The same letters again (a batch applied twice) stay once.
        db.apply(&cfg, &[], &[letter(3, "again")], 3).unwrap();
        assert_eq!(db.dead_letters("notes", 10).unwrap().len(), 2);
        db.drop_dead_letters("notes", &[2, 99]).unwrap();
        assert_eq!(db.dead_letters("notes", 10).unwrap().len(), 1);
        // Bounded: the newest DEAD_MAX stay.
        let many: Vec<DeadLetter> = (10..10 + DEAD_MAX as u64 + 5)
            .map(|n| letter(n, "x"))
            .collect();
        db.apply(&cfg, &[], &many, 4).unwrap();
        let kept = db.dead_letters("notes", usize::MAX).unwrap();
        assert_eq!(kept.len(), DEAD_MAX);
        assert_eq!(kept.last().unwrap().lsn, 15);
    }
}
