//! The PostgreSQL driver: the synchronous `postgres` client, no TLS. A batch is one
//! simple-query script (one round trip): per row a data-modifying CTE does the version guard
//! and the row write only when the guard let the change through; then the checkpoint.
//! Values travel as quoted literals of unknown type, which PostgreSQL converts to each
//! column's type, so the mapped table's columns may be of any type that accepts text input.

use postgres::{Client, NoTls};

use crate::config::MappingConfig;
use crate::db::{
    columns, key_list, load_sql, quoted, refused, Columns, DbError, Driver, Row, RowChange,
};
use crate::{DeadLetter, DEAD_MAX};

pub struct Postgres {
    client: Client,
}

fn error(e: postgres::Error) -> DbError {
    // A refusal of the data carries an SQLSTATE outside class 08 (connection), 57 (operator
    // intervention: shutdown) and 53 (insufficient resources); anything else is the link.
    let connection = match e.code() {
        Some(code) => {
            let c = code.code();
            c.starts_with("08") || c.starts_with("57") || c.starts_with("53")
        }
        None => true,
    };
    let message = match e.as_db_error() {
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        None => e.to_string(),
    };
    DbError {
        message,
        connection,
    }
}

/// A text literal: standard_conforming_strings is on (set at connect), so only `'` doubles.
fn literal(out: &mut String, v: &str) {
    out.push('\'');
    out.push_str(&v.replace('\'', "''"));
    out.push('\'');
}

/// A bytea literal in hex form (`'\x4142'::bytea`).
fn bytes_literal(out: &mut String, v: &[u8]) {
    out.push_str("'\\x");
    for b in v {
        out.push_str(&format!("{b:02x}"));
    }
    out.push_str("'::bytea");
}

impl Postgres {
    pub fn open(url: &str) -> Result<Postgres, DbError> {
        let mut config: postgres::Config = url.parse().map_err(error)?;
        if config.get_connect_timeout().is_none() {
            // Bounded: a promotion asks the database for its numbers and must not hang.
            config.connect_timeout(std::time::Duration::from_secs(5));
        }
        let mut client = config.connect(NoTls).map_err(error)?;
        client
            .batch_execute("SET standard_conforming_strings = on")
            .map_err(error)?;
        Ok(Postgres { client })
    }

    /// A connection for read-through loads: its connect, every statement
    /// (`statement_timeout`) and unacknowledged sends bounded by `timeout`, so that a hung
    /// database answers the read in time.
    pub fn open_for_loads(url: &str, timeout: std::time::Duration) -> Result<Postgres, DbError> {
        let mut config: postgres::Config = url.parse().map_err(error)?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(timeout);
        }
        // A server host gone silent mid-query: the unacknowledged query fails the connection.
        config.tcp_user_timeout(timeout);
        let mut client = config.connect(NoTls).map_err(error)?;
        client
            .batch_execute(&format!(
                "SET standard_conforming_strings = on; SET statement_timeout = {}",
                timeout.as_millis()
            ))
            .map_err(error)?;
        Ok(Postgres { client })
    }

    /// The statement that applies `row` if its guard lets it.
    fn statement(out: &mut String, cfg: &MappingConfig, row: &Row) {
        let table = quoted(&cfg.table);
        let n = row.key.len();
        out.push_str("WITH g AS (INSERT INTO cairn_wb_version (mapping, key, version) VALUES (");
        literal(out, &cfg.name);
        out.push_str(", ");
        literal(out, &row.id);
        out.push_str(&format!(
            ", {}) ON CONFLICT (mapping, key) DO UPDATE SET version = EXCLUDED.version \
             WHERE cairn_wb_version.version < EXCLUDED.version RETURNING 1) ",
            row.lsn
        ));
        match &row.change {
            RowChange::Delete => {
                out.push_str(&format!("DELETE FROM {table} WHERE "));
                for (c, v) in &row.key {
                    out.push_str(&format!("{} = ", quoted(c)));
                    literal(out, v);
                    out.push_str(" AND ");
                }
                out.push_str("EXISTS (SELECT 1 FROM g);\n");
            }
            RowChange::Upsert(cols) => {
                let names: Vec<String> = columns(row, cols).iter().map(|c| quoted(c)).collect();
                out.push_str(&format!(
                    "INSERT INTO {table} ({}) SELECT ",
                    names.join(", ")
                ));
                let values = (row.key.iter().map(|(_, v)| Some(v)))
                    .chain(cols.iter().map(|(_, v)| v.as_ref()));
                for (i, v) in values.enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    match v {
                        Some(v) => literal(out, v),
                        None => out.push_str("NULL"),
                    }
                }
                let set: Vec<String> = names[n..]
                    .iter()
                    .map(|c| format!("{c} = EXCLUDED.{c}"))
                    .collect();
                let key = key_list(row);
                if set.is_empty() {
                    out.push_str(&format!(" FROM g ON CONFLICT ({key}) DO NOTHING;\n"));
                } else {
                    out.push_str(&format!(
                        " FROM g ON CONFLICT ({key}) DO UPDATE SET {};\n",
                        set.join(", ")
                    ));
                }
            }
        }
    }

    /// Stores `dead` and keeps the mapping's newest [`DEAD_MAX`] letters. A letter stored
    /// already (the same change, its batch applied again after a failed commit) stays once.
    fn dead_statements(out: &mut String, mapping: &str, dead: &[DeadLetter]) {
        if dead.is_empty() {
            return;
        }
        for l in dead {
            out.push_str(
                "INSERT INTO cairn_wb_dead (mapping, lsn, key, value, reason, time_ms) VALUES (",
            );
            literal(out, mapping);
            out.push_str(&format!(", {}, ", l.lsn));
            bytes_literal(out, &l.key);
            out.push_str(", ");
            bytes_literal(out, &l.value);
            out.push_str(", ");
            literal(out, &l.reason.replace('\0', ""));
            out.push_str(&format!(
                ", {}) ON CONFLICT (mapping, lsn) DO NOTHING;\n",
                l.time_ms
            ));
        }
        out.push_str("DELETE FROM cairn_wb_dead WHERE mapping = ");
        literal(out, mapping);
        out.push_str(" AND lsn < (SELECT lsn FROM cairn_wb_dead WHERE mapping = ");
        literal(out, mapping);
        out.push_str(&format!(
            " ORDER BY lsn DESC OFFSET {} LIMIT 1);\n",
            DEAD_MAX - 1
        ));
    }

    fn checkpoint_statement(out: &mut String, mapping: &str, lsn: u64) {
        out.push_str("INSERT INTO cairn_wb_checkpoint (mapping, lsn) VALUES (");
        literal(out, mapping);
        out.push_str(&format!(
            ", {lsn}) ON CONFLICT (mapping) DO UPDATE SET lsn = EXCLUDED.lsn;\n"
        ));
    }
}

impl Driver for Postgres {
    fn checkpoint(&mut self, mapping: &str) -> Result<u64, DbError> {
        self.client
            // Mappings' flushers connect at once at start: CREATE TABLE IF NOT EXISTS is not
            // safe against a concurrent one (a unique violation in pg_type), so they take
            // turns on an advisory lock.
            .batch_execute(
                "BEGIN; SELECT pg_advisory_xact_lock(7215585614112370000); \
                 CREATE TABLE IF NOT EXISTS cairn_wb_checkpoint \
                   (mapping TEXT PRIMARY KEY, lsn BIGINT NOT NULL); \
                 CREATE TABLE IF NOT EXISTS cairn_wb_version \
                   (mapping TEXT NOT NULL, key TEXT NOT NULL, version BIGINT NOT NULL, \
                    PRIMARY KEY (mapping, key)); \
                 CREATE TABLE IF NOT EXISTS cairn_wb_dead \
                   (mapping TEXT NOT NULL, lsn BIGINT NOT NULL, key BYTEA NOT NULL, \
                    value BYTEA NOT NULL, reason TEXT NOT NULL, time_ms BIGINT NOT NULL, \
                    PRIMARY KEY (mapping, lsn)); COMMIT;",
            )
            .map_err(error)?;
        let rows = self
            .client
            .query(
                "SELECT lsn FROM cairn_wb_checkpoint WHERE mapping = $1",
                &[&mapping],
            )
            .map_err(error)?;
        Ok(rows.first().map_or(0, |r| r.get::<_, i64>(0)) as u64)
    }

    fn floor(&mut self, mapping: &str) -> Result<u64, DbError> {
        let checkpoint = self.checkpoint(mapping)?;
        let rows = self
            .client
            .query(
                "SELECT coalesce(max(version), 0) FROM cairn_wb_version WHERE mapping = $1",
                &[&mapping],
            )
            .map_err(error)?;
        let version = rows.first().map_or(0, |r| r.get::<_, i64>(0)) as u64;
        Ok(checkpoint.max(version))
    }

    fn apply(
        &mut self,
        cfg: &MappingConfig,
        rows: &[Row],
        dead: &[DeadLetter],
        checkpoint: u64,
    ) -> Result<u64, DbError> {
        let mut script = String::from("BEGIN;\n");
        for row in rows {
            Self::statement(&mut script, cfg, row);
        }
        Self::dead_statements(&mut script, &cfg.name, dead);
        Self::checkpoint_statement(&mut script, &cfg.name, checkpoint);
        script.push_str("COMMIT;");
        // The simple query protocol runs the script as one implicit unit: an error aborts the
        // transaction, and the session is left outside one (ROLLBACK is harmless then).
        match self.client.batch_execute(&script) {
            Ok(()) => Ok(rows.len() as u64),
            Err(e) => {
                let _ = self.client.batch_execute("ROLLBACK");
                Err(error(e))
            }
        }
    }

    fn apply_each(
        &mut self,
        cfg: &MappingConfig,
        rows: &[Row],
        dead: &[DeadLetter],
        letters: &[DeadLetter],
        checkpoint: u64,
    ) -> Result<(u64, Vec<DeadLetter>), DbError> {
        self.client.batch_execute("BEGIN").map_err(error)?;
        let mut stored = dead.to_vec();
        let mut written = 0;
        for (i, row) in rows.iter().enumerate() {
            let mut s = String::from("SAVEPOINT cairn_row;\n");
            Self::statement(&mut s, cfg, row);
            s.push_str("RELEASE cairn_row;");
            match self.client.batch_execute(&s) {
                Ok(()) => written += 1,
                Err(e) => {
                    let e = error(e);
                    if e.connection {
                        let _ = self.client.batch_execute("ROLLBACK");
                        return Err(e);
                    }
                    self.client
                        .batch_execute("ROLLBACK TO SAVEPOINT cairn_row; RELEASE cairn_row")
                        .map_err(error)?;
                    stored.push(refused(&letters[i], e.message));
                }
            }
        }
        let mut s = String::new();
        Self::dead_statements(&mut s, &cfg.name, &stored);
        Self::checkpoint_statement(&mut s, &cfg.name, checkpoint);
        s.push_str("COMMIT;");
        if let Err(e) = self.client.batch_execute(&s) {
            let _ = self.client.batch_execute("ROLLBACK");
            return Err(error(e));
        }
        Ok((written, stored))
    }

    fn dead_letters(&mut self, mapping: &str, count: usize) -> Result<Vec<DeadLetter>, DbError> {
        let rows = self
            .client
            .query(
                "SELECT lsn, key, value, reason, time_ms FROM cairn_wb_dead \
                 WHERE mapping = $1 ORDER BY lsn DESC LIMIT $2",
                &[&mapping, &(count.min(i64::MAX as usize) as i64)],
            )
            .map_err(error)?;
        Ok(rows
            .iter()
            .map(|r| DeadLetter {
                lsn: r.get::<_, i64>(0) as u64,
                key: r.get(1),
                value: r.get(2),
                reason: r.get(3),
                time_ms: r.get::<_, i64>(4) as u64,
            })
            .collect())
    }

    fn drop_dead_letters(&mut self, mapping: &str, lsns: &[u64]) -> Result<(), DbError> {
        let lsns: Vec<i64> = lsns.iter().map(|&n| n as i64).collect();
        self.client
            .execute(
                "DELETE FROM cairn_wb_dead WHERE mapping = $1 AND lsn = ANY($2)",
                &[&mapping, &lsns],
            )
            .map_err(error)?;
        Ok(())
    }

    fn load(&mut self, cfg: &MappingConfig, id: &str) -> Result<Option<Columns>, DbError> {
        // The simple query protocol: the key goes as a literal of unknown type (converted to
        // the key column's type) and every value comes back as text, whatever its type.
        let mut key = String::new();
        literal(&mut key, id);
        let messages = self
            .client
            .simple_query(&load_sql(cfg, &key))
            .map_err(error)?;
        for m in messages {
            if let postgres::SimpleQueryMessage::Row(row) = m {
                let mut out = Vec::new();
                for (i, c) in row.columns().iter().enumerate() {
                    if c.name() == cfg.key_column {
                        continue;
                    }
                    if let Some(v) = row.get(i) {
                        out.push((c.name().to_string(), v.to_string()));
                    }
                }
                return Ok(Some(out));
            }
        }
        Ok(None)
    }
}
