//! Per-table expiry rules (AGE, ROWS, OPS) and the hidden row metadata they rely on.
//!
//! A table with rules gets a companion `_cairn_meta_<table>(rid INTEGER PRIMARY KEY, seq,
//! written_ms, op_stamp)` kept by three AFTER triggers: each write to a row stamps it with a new,
//! larger `seq` (write order), the engine clock and the table's operation count. `written_ms` and
//! `op_stamp` grow with `seq`, so for every rule the next row to expire is the first in the
//! `(seq, written_ms, op_stamp)` index, and finding expired rows is a walk from its start. The
//! user's table is untouched (`SELECT *` shows only its columns); `_cairn_expiry` holds the rules
//! and, while a ROWS rule is set, a trigger-maintained row count, transactional like the rows.
//!
//! Operation and sequence counters live in memory (`registry`); the triggers read them through
//! the `_cairn_ops(id)` and `_cairn_seq(id)` functions.

use crate::conn::{Conn, Deadline};
use crate::error::ErrorKind;
use crate::registry::{Head, TableRules};
use crate::shared::Shared;
use crate::{ExpiryRules, Reply, SqlError};
use rusqlite::{params, Connection, OptionalExtension};
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

/// Rows removed per transaction, so removal never holds the write lock for long.
pub(crate) const BATCH: usize = 1000;

pub(crate) const INIT: &str = "CREATE TABLE IF NOT EXISTS _cairn_expiry(\
    id INTEGER PRIMARY KEY, tbl TEXT NOT NULL UNIQUE COLLATE NOCASE, \
    age_ms INTEGER, max_rows INTEGER, max_ops INTEGER, row_count INTEGER NOT NULL DEFAULT 0)";

pub(crate) fn quote(ident: &str) -> String {
    format!("\"{}\"", ident.replace('"', "\"\""))
}

fn meta_name(table: &str) -> String {
    quote(&format!("_cairn_meta_{table}"))
}

fn meta(t: &TableRules) -> String {
    meta_name(&t.name)
}

fn trigger(id: i64, what: &str) -> String {
    format!("_cairn_{id}_{what}")
}

/// The table's name as the schema spells it, after checking it can carry expiry rules.
pub(crate) fn resolve(db: &Connection, table: &str) -> Result<String, SqlError> {
    let found: Option<(String, String, bool)> = db
        .query_row(
            "SELECT name, type, wr FROM pragma_table_list \
             WHERE schema = 'main' AND name = ?1 COLLATE NOCASE",
            [table],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .optional()?;
    let Some((name, kind, without_rowid)) = found else {
        return Err(SqlError::new(
            ErrorKind::NoSuchTable,
            format!("no such table: {table}"),
        ));
    };
    if name.starts_with("sqlite_") || name.to_ascii_lowercase().starts_with("_cairn_") {
        return Err(SqlError::bad(format!("{name} is an internal table")));
    }
    if kind != "table" {
        return Err(SqlError::bad(format!(
            "expiry rules need an ordinary table; {name} is a {kind}"
        )));
    }
    if without_rowid {
        return Err(SqlError::bad(format!(
            "expiry rules need a table with rowids; {name} is WITHOUT ROWID"
        )));
    }
    Ok(name)
}

/// `SQL.EXPIRE table`: the table's rules (all `None` when it has none).
pub(crate) fn show(shared: &Shared, conn: &Conn, table: &str) -> Result<Reply, SqlError> {
    let name = conn.internal(|db| Ok(resolve(db, table)))??;
    let rules = shared
        .registry
        .get(&name.to_ascii_lowercase())
        .map(|t| t.rules.clone());
    Ok(Reply::Rules(rules.unwrap_or_default()))
}

fn validate(rules: &ExpiryRules) -> Result<(), SqlError> {
    if rules.age.is_some_and(|a| a < Duration::from_millis(1)) {
        return Err(SqlError::bad("AGE must be positive"));
    }
    if rules.rows == Some(0) || rules.ops == Some(0) {
        return Err(SqlError::bad("ROWS and OPS must be positive"));
    }
    let too_big = |v: Option<u64>| v.is_some_and(|v| v > i64::MAX as u64);
    if too_big(rules.rows)
        || too_big(rules.ops)
        || rules.age.is_some_and(|a| a.as_millis() > i64::MAX as u128)
    {
        return Err(SqlError::bad("expiry rule value out of range"));
    }
    Ok(())
}

fn as_sql(rules: &ExpiryRules) -> (Option<i64>, Option<i64>, Option<i64>) {
    (
        rules.age.map(|a| a.as_millis() as i64),
        rules.rows.map(|n| n as i64),
        rules.ops.map(|n| n as i64),
    )
}

/// `SQL.EXPIRE table rules…` (writer only): installs, replaces or (with empty rules) clears the
/// table's rules, then applies them at once.
pub(crate) fn set(
    shared: &Shared,
    conn: &Conn,
    table: &str,
    rules: ExpiryRules,
) -> Result<Reply, SqlError> {
    validate(&rules)?;
    let name = conn.internal(|db| Ok(resolve(db, table)))??;
    let existing = shared.registry.get(&name.to_ascii_lowercase());
    let t = {
        let _deadline = Deadline::arm(shared.config.timeout);
        match (existing, rules.is_empty()) {
            (None, true) => return Ok(Reply::Ok),
            (Some(t), true) => {
                conn.internal(|db| uninstall(db, &t))?;
                shared.registry.remove(t.id);
                shared.schema_changed();
                return Ok(Reply::Ok);
            }
            (Some(t), false) => {
                let t = t.with(t.name.clone(), rules);
                conn.internal(|db| savepoint(db, |db| write_rules(db, &t).and(triggers(db, &t))))?;
                shared.registry.put(t)
            }
            (None, false) => {
                let now = shared.clock.now_ms();
                let t = conn.internal(|db| {
                    savepoint(db, |db| {
                        db.execute("INSERT INTO _cairn_expiry(tbl) VALUES (?1)", [&name])?;
                        let t = TableRules::new(db.last_insert_rowid(), name, rules);
                        write_rules(db, &t)?;
                        create_meta(db, &t, now)?;
                        triggers(db, &t)?;
                        Ok(t)
                    })
                })?;
                shared.registry.put(t)
            }
        }
    };
    shared.schema_changed();
    expire(shared, conn, &t, None, true)?;
    Ok(Reply::Ok)
}

fn write_rules(db: &Connection, t: &TableRules) -> rusqlite::Result<()> {
    let (age, rows, ops) = as_sql(&t.rules);
    db.execute(
        "UPDATE _cairn_expiry SET age_ms = ?1, max_rows = ?2, max_ops = ?3 WHERE id = ?4",
        params![age, rows, ops, t.id],
    )?;
    Ok(())
}

/// The metadata table, keyed by the user row's rowid, with a covering index in write order.
/// Rows already in the table count as written now, oldest rowid first (negative `seq`s, below
/// every future one).
fn create_meta(db: &Connection, t: &TableRules, now: i64) -> rusqlite::Result<()> {
    let (tbl, meta) = (quote(&t.name), meta(t));
    let order = quote(&format!("_cairn_{}_order", t.id));
    db.execute_batch(&format!(
        "CREATE TABLE {meta}(rid INTEGER PRIMARY KEY, seq INTEGER NOT NULL, \
             written_ms INTEGER NOT NULL, op_stamp INTEGER NOT NULL);
         CREATE INDEX {order} ON {meta}(seq, written_ms, op_stamp);
         INSERT INTO {meta} SELECT rowid, row_number() OVER (ORDER BY rowid) \
             - (SELECT count(*) FROM {tbl}) - 1, {now}, 0 FROM {tbl};"
    ))
}

/// (Re)creates the triggers that keep the metadata. Each write to a row gives it a new `seq`,
/// the time and the operation count. The row count (one more UPDATE per insert and delete) is
/// only kept while a ROWS rule needs it.
fn triggers(db: &Connection, t: &TableRules) -> rusqlite::Result<()> {
    let (id, tbl, meta) = (t.id, quote(&t.name), meta(t));
    let [ins, upd, del] = ["ins", "upd", "del"].map(|w| quote(&trigger(id, w)));
    let (count_ins, count_del) = match t.rules.rows {
        Some(_) => (
            format!("UPDATE _cairn_expiry SET row_count = row_count + 1 WHERE id = {id};"),
            format!("UPDATE _cairn_expiry SET row_count = row_count - 1 WHERE id = {id};"),
        ),
        None => (String::new(), String::new()),
    };
    let stamp = format!("_cairn_seq({id}), cairn_now(), _cairn_ops({id})");
    db.execute_batch(&format!(
        "DROP TRIGGER IF EXISTS {ins}; DROP TRIGGER IF EXISTS {upd}; DROP TRIGGER IF EXISTS {del};
         CREATE TRIGGER {ins} AFTER INSERT ON {tbl} BEGIN
             INSERT OR REPLACE INTO {meta} VALUES (NEW.rowid, {stamp}); {count_ins}
         END;
         CREATE TRIGGER {upd} AFTER UPDATE ON {tbl} BEGIN
             UPDATE OR REPLACE {meta} SET (rid, seq, written_ms, op_stamp) = (NEW.rowid, {stamp})
             WHERE rid = OLD.rowid;
         END;
         CREATE TRIGGER {del} AFTER DELETE ON {tbl} BEGIN
             DELETE FROM {meta} WHERE rid = OLD.rowid; {count_del}
         END;"
    ))?;
    if t.rules.rows.is_some() {
        db.execute(
            &format!(
                "UPDATE _cairn_expiry SET row_count = (SELECT count(*) FROM {meta}) WHERE id = ?1"
            ),
            [id],
        )?;
    }
    Ok(())
}

fn uninstall(db: &Connection, t: &TableRules) -> rusqlite::Result<()> {
    savepoint(db, |db| {
        for what in ["ins", "upd", "del"] {
            db.execute_batch(&format!(
                "DROP TRIGGER IF EXISTS {}",
                quote(&trigger(t.id, what))
            ))?;
        }
        db.execute_batch(&format!("DROP TABLE IF EXISTS {}", meta(t)))?;
        db.execute("DELETE FROM _cairn_expiry WHERE id = ?1", [t.id])?;
        Ok(())
    })
}

/// Runs `f` inside a savepoint: all or nothing, inside or outside a user transaction.
fn savepoint<R>(
    db: &Connection,
    f: impl FnOnce(&Connection) -> rusqlite::Result<R>,
) -> rusqlite::Result<R> {
    db.execute_batch("SAVEPOINT _cairn")?;
    match f(db) {
        Ok(r) => {
            db.execute_batch("RELEASE _cairn")?;
            Ok(r)
        }
        Err(e) => {
            let _ = db.execute_batch("ROLLBACK TO _cairn; RELEASE _cairn");
            Err(e)
        }
    }
}

fn head(db: &Connection, t: &TableRules) -> rusqlite::Result<Option<Head>> {
    let sql = format!(
        "SELECT e.row_count, m.written_ms, m.op_stamp FROM _cairn_expiry AS e \
         LEFT JOIN (SELECT written_ms, op_stamp FROM {} ORDER BY seq LIMIT 1) AS m WHERE e.id = ?1",
        meta(t)
    );
    db.prepare_cached(&sql)?
        .query_row([t.id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .optional()
}

/// Which rule, if any, removes the row at position `i` (in write order) now.
fn verdict(
    t: &TableRules,
    i: usize,
    count: i64,
    written: i64,
    stamp: i64,
    now: i64,
    basis: u64,
) -> Option<Rule> {
    let r = &t.rules;
    if r.rows.is_some_and(|n| (i as i64) < count - n as i64) {
        return Some(Rule::Rows);
    }
    if r.age.is_some_and(|a| now - written >= a.as_millis() as i64) {
        return Some(Rule::Age);
    }
    if r.ops.is_some_and(|n| basis as i64 - stamp >= n as i64) {
        return Some(Rule::Ops);
    }
    None
}

#[derive(Clone, Copy)]
enum Rule {
    Age,
    Rows,
    Ops,
}

/// Whether `t` has rows to remove now (a cheap read, fine on any connection).
/// Readers may answer from the head cached at the current data epoch; the writer, which
/// changes data between its own statements, always reads.
pub(crate) fn due(shared: &Shared, conn: &Conn, t: &TableRules, basis: u64, cached: bool) -> bool {
    if shared
        .expiry_paused
        .load(std::sync::atomic::Ordering::Relaxed)
    {
        return false;
    }
    // The epoch is read before the data, so a cached head is never older than its epoch.
    let epoch = shared.data_epoch();
    let h = match cached.then(|| t.cached_head(epoch)).flatten() {
        Some(h) => h,
        None => match conn.internal(|db| head(db, t)) {
            Ok(h) => {
                let h = h.unwrap_or((0, None, None));
                if cached {
                    t.cache_head(epoch, h);
                }
                h
            }
            Err(_) => return false,
        },
    };
    let now = shared.clock.now_ms();
    match h {
        (count, Some(written), Some(stamp)) => {
            verdict(t, 0, count, written, stamp, now, basis).is_some()
        }
        _ => false,
    }
}

/// Removes `t`'s expired rows (writer only), `BATCH` rows per transaction. Without `full` it
/// stops after one batch and says whether more may remain, so the caller can requeue.
pub(crate) fn expire(
    shared: &Shared,
    conn: &Conn,
    t: &TableRules,
    basis: Option<u64>,
    full: bool,
) -> Result<bool, SqlError> {
    // Expiry changes the cache, not the database: its deletes are no row changes to tell.
    let _quiet = crate::rows::Paused::start();
    if shared
        .expiry_paused
        .load(std::sync::atomic::Ordering::Relaxed)
    {
        return Ok(false);
    }
    let _deadline = Deadline::arm(shared.config.timeout);
    loop {
        let basis = basis.unwrap_or_else(|| t.ops());
        let removed = conn
            .internal(|db| expire_batch(shared, db, t, basis))
            .map_err(|e| {
                if Deadline::fired() {
                    SqlError::new(ErrorKind::Timeout, shared.timeout_message())
                } else {
                    SqlError::from(e)
                }
            })?;
        if removed < BATCH {
            return Ok(false);
        }
        if !full {
            return Ok(true);
        }
    }
}

fn expire_batch(
    shared: &Shared,
    db: &Connection,
    t: &TableRules,
    basis: u64,
) -> rusqlite::Result<usize> {
    let Some((count, _, _)) = head(db, t)? else {
        return Ok(0);
    };
    let now = shared.clock.now_ms();
    let mut victims = Vec::new();
    {
        let mut st = db.prepare_cached(&format!(
            "SELECT rid, written_ms, op_stamp FROM {} ORDER BY seq LIMIT {BATCH}",
            meta(t)
        ))?;
        let mut rows = st.query([])?;
        while let Some(r) = rows.next()? {
            let (rid, written, stamp): (i64, i64, i64) = (r.get(0)?, r.get(1)?, r.get(2)?);
            match verdict(t, victims.len(), count, written, stamp, now, basis) {
                Some(rule) => victims.push((rid, rule)),
                None => break,
            }
        }
    }
    if victims.is_empty() {
        return Ok(0);
    }
    savepoint(db, |db| {
        let mut del =
            db.prepare_cached(&format!("DELETE FROM {} WHERE rowid = ?1", quote(&t.name)))?;
        for (rid, _) in &victims {
            del.execute([rid])?;
        }
        Ok(())
    })?;
    for (rid, _) in &victims {
        shared.tell(|| crate::SqlChange::Expired {
            table: &t.name,
            rowid: *rid,
        });
    }
    let c = &shared.counters;
    for (_, rule) in &victims {
        match rule {
            Rule::Age => &c.expired_age,
            Rule::Rows => &c.expired_rows,
            Rule::Ops => &c.expired_ops,
        }
        .fetch_add(1, Relaxed);
    }
    Ok(victims.len())
}

/// After a schema change (writer only): follows renamed tables and forgets dropped ones, using
/// the `_cairn_<id>_ins` trigger, which SQLite moves along with its table.
pub(crate) fn reconcile(shared: &Shared, conn: &Conn) -> Result<(), SqlError> {
    for t in shared.registry.all() {
        let owner: Option<String> = conn.internal(|db| {
            db.query_row(
                "SELECT tbl_name FROM sqlite_schema WHERE type = 'trigger' AND name = ?1",
                [trigger(t.id, "ins")],
                |r| r.get(0),
            )
            .optional()
        })?;
        match owner {
            None => {
                conn.internal(|db| uninstall(db, &t))?;
                shared.registry.remove(t.id);
            }
            Some(name) if name != t.name => {
                conn.internal(|db| {
                    savepoint(db, |db| {
                        db.execute_batch(&format!(
                            "ALTER TABLE {} RENAME TO {}",
                            meta(&t),
                            meta_name(&name)
                        ))?;
                        db.execute(
                            "UPDATE _cairn_expiry SET tbl = ?1 WHERE id = ?2",
                            params![name, t.id],
                        )?;
                        Ok(())
                    })
                })?;
                shared.registry.put(t.with(name, t.rules.clone()));
            }
            Some(_) => {}
        }
    }
    Ok(())
}
