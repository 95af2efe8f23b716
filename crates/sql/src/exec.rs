//! Running user SQL: compile under the sandbox, count operations and expire rows first, bind,
//! step under the deadline, cap the result.

use crate::conn::{Analysis, Conn, Deadline, CACHE};
use crate::error::{sqlite_message, ErrorKind};
use crate::expiry;
use crate::shared::{Job, Shared};
use crate::{Reply, SqlError, Value};
use rusqlite::fallible_iterator::FallibleIterator;
use rusqlite::types::{ToSql, ToSqlOutput, ValueRef};
use rusqlite::{Batch, ErrorCode, Statement};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{mpsc, Arc};

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    Reader,
    Writer,
    /// A caller's thread running a read-only statement itself (`crate::inline`).
    Inline,
}

/// What a request changed, for the writer's bookkeeping afterwards.
#[derive(Default)]
pub(crate) struct Effects {
    pub ddl: bool,
    pub wrote: bool,
}

pub(crate) enum Outcome {
    Done(Result<Reply, SqlError>, Effects),
    /// A reader compiled a statement that writes: the writer must run it.
    ToWriter,
}

impl ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match self {
            Value::Null => ValueRef::Null,
            Value::Integer(i) => ValueRef::Integer(*i),
            Value::Real(f) => ValueRef::Real(*f),
            Value::Text(b) => ValueRef::Text(b),
            Value::Blob(b) => ValueRef::Blob(b),
        }))
    }
}

/// A column value as the engine's own [`Value`] (copied out of SQLite's row).
pub(crate) fn value_of(v: ValueRef<'_>) -> Value {
    match v {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::Integer(i),
        ValueRef::Real(f) => Value::Real(f),
        ValueRef::Text(b) => Value::Text(b.to_vec()),
        ValueRef::Blob(b) => Value::Blob(b.to_vec()),
    }
}

fn weight(v: &ValueRef<'_>) -> usize {
    16 + match v {
        ValueRef::Text(b) | ValueRef::Blob(b) => b.len(),
        _ => 8,
    }
}

fn utf8(sql: &[u8]) -> Result<&str, SqlError> {
    std::str::from_utf8(sql).map_err(|_| SqlError::bad("SQL text must be valid UTF-8"))
}

/// An out-of-memory class error: the database image is full (`SQLITE_FULL`), the statement
/// needed more heap than the limit allows (`SQLITE_NOMEM`), or the stack guard stopped it.
fn oom(shared: &Shared, code: Option<ErrorCode>) -> SqlError {
    if crate::guard::take_tripped() {
        return refused(shared, crate::guard::too_deep_message());
    }
    if crate::guard::take_timed_out() {
        shared.counters.interrupted.fetch_add(1, Relaxed);
        let ms = shared.config.timeout.as_millis();
        return SqlError::new(
            ErrorKind::Timeout,
            format!("interrupted: statement took longer than --sql-timeout ({ms} ms) to compile"),
        );
    }
    shared.counters.oom.fetch_add(1, Relaxed);
    let msg = match (shared.config.max_memory, code) {
        (0, _) => "SQL out of memory".to_string(),
        (max, Some(ErrorCode::OutOfMemory)) => format!(
            "SQL memory limit reached: the statement needed more than the SQL heap limit ({} bytes, from --sql-maxmemory {max})",
            crate::guard::heap_limit(max)
        ),
        (max, _) => format!(
            "SQL memory limit reached (--sql-maxmemory {max} bytes): writes are refused until rows are deleted or expire"
        ),
    };
    SqlError::new(ErrorKind::OutOfMemory, msg)
}

fn refused(shared: &Shared, why: String) -> SqlError {
    shared.counters.refused.fetch_add(1, Relaxed);
    SqlError::refused(why)
}

/// A statement failed to compile: the sandbox's reason if it refused, else SQLite's message.
fn compile_error(shared: &Shared, conn: &Conn, e: rusqlite::Error) -> SqlError {
    crate::inline::check_error(&e, true);
    if crate::inline::abandoned() {
        // Not an error: the engine runs the statement (and counts what it must).
        conn.auth.lock().refusal = None;
        return SqlError::cancelled();
    }
    if let Some(why) = conn.auth.lock().refusal.take() {
        return refused(shared, why);
    }
    match e.sqlite_error_code() {
        c @ Some(ErrorCode::OutOfMemory | ErrorCode::DiskFull) => oom(shared, c),
        _ => SqlError::new(ErrorKind::Syntax, sqlite_message(&e)),
    }
}

/// A statement failed while running.
fn run_error(shared: &Shared, conn: &Conn, e: rusqlite::Error) -> SqlError {
    crate::inline::check_error(&e, false);
    if crate::inline::abandoned() {
        // The engine runs the statement again and counts it then.
        shared.counters.statements.fetch_sub(1, Relaxed);
        conn.auth.lock().refusal = None;
        return SqlError::cancelled();
    }
    if let Some(why) = conn.auth.lock().refusal.take() {
        return refused(shared, why);
    }
    let timeout = || {
        shared.counters.interrupted.fetch_add(1, Relaxed);
        SqlError::new(ErrorKind::Timeout, shared.timeout_message())
    };
    match e.sqlite_error_code() {
        Some(ErrorCode::OperationInterrupted) if Deadline::fired() => timeout(),
        Some(ErrorCode::OperationInterrupted) => SqlError::shutdown(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) if Deadline::fired() => {
            shared.counters.interrupted.fetch_add(1, Relaxed);
            let ms = shared.config.timeout.as_millis();
            SqlError::new(
                ErrorKind::Timeout,
                format!("interrupted: waited longer than --sql-timeout ({ms} ms) for another statement to release the database"),
            )
        }
        c @ Some(ErrorCode::OutOfMemory | ErrorCode::DiskFull) => oom(shared, c),
        _ => SqlError::new(ErrorKind::Sqlite, sqlite_message(&e)),
    }
}

/// What the authorizer saw while `stmt` compiled.
fn analysis(conn: &Conn, stmt: &Statement<'_>) -> Analysis {
    let mut a = std::mem::take(&mut conn.auth.lock().seen);
    a.readonly = stmt.readonly();
    a
}

/// Counts the operation on every table with rules the statement touches, and makes sure their
/// expired rows are gone before it runs. Readers ask the writer and wait; failures to expire
/// leave the rows in place rather than failing the statement.
fn before(shared: &Shared, conn: &Conn, side: Side, a: &Analysis) -> Result<(), SqlError> {
    for name in &a.tables {
        let Some(t) = shared.registry.get(name) else {
            continue;
        };
        if side == Side::Inline {
            // Counted once it ran (`count_inline`): an abandoned attempt counts nothing. With
            // rows to expire first it is the engine's (readers wait for the writer there).
            if expiry::due(shared, conn, &t, t.ops(), true) {
                crate::inline::abandon(crate::inline::Why::Busy);
                return Err(SqlError::cancelled());
            }
            continue;
        }
        let basis = t.count_op();
        if !expiry::due(shared, conn, &t, basis, side == Side::Reader) {
            continue;
        }
        if side == Side::Writer {
            let _ = expiry::expire(shared, conn, &t, Some(basis), true);
            continue;
        }
        let (tx, rx) = mpsc::sync_channel(1);
        let job = Job::Expire {
            table: t.clone(),
            basis: Some(basis),
            waiter: Some(tx),
        };
        if shared.writer.push_front(job).is_err() {
            return Err(SqlError::shutdown());
        }
        match rx.recv_timeout(shared.config.timeout) {
            Ok(Err(e)) if e.kind == ErrorKind::Shutdown => return Err(e),
            Err(mpsc::RecvTimeoutError::Disconnected) => return Err(SqlError::shutdown()),
            _ => {}
        }
    }
    Ok(())
}

/// Runs an ALTER TABLE under a savepoint and undoes it if it created a name in cairn's
/// reserved `_cairn_` space (`ALTER TABLE t RENAME TO _cairn_meta_x`): SQLite does not show
/// a RENAME's new name to the authorizer, so the schema is compared before and after.
fn renames<R>(
    shared: &Shared,
    conn: &Conn,
    alter: bool,
    run: impl FnOnce() -> Result<R, SqlError>,
) -> Result<R, SqlError> {
    if !alter {
        return run();
    }
    let reserved = || {
        conn.internal(|db| {
            db.query_row(
                "SELECT count(*) FROM sqlite_schema WHERE name LIKE '\\_cairn\\_%' ESCAPE '\\'",
                [],
                |r| r.get::<_, i64>(0),
            )
        })
    };
    conn.internal(|db| db.execute_batch("SAVEPOINT _cairn_alter"))?;
    let before = reserved();
    let out = run();
    if out.is_ok() && reserved().ok() != before.ok() {
        let _ =
            conn.internal(|db| db.execute_batch("ROLLBACK TO _cairn_alter; RELEASE _cairn_alter"));
        return Err(refused(
            shared,
            format!(
                "names starting with {} are reserved",
                crate::sandbox::RESERVED
            ),
        ));
    }
    let _ = conn.internal(|db| db.execute_batch("RELEASE _cairn_alter"));
    out
}

/// Compiles under the statement timeout (see [`crate::guard::Compiling`]), or the much
/// shorter inline one while an inline statement runs (past it the engine compiles it).
fn compiling<R>(shared: &Shared, f: impl FnOnce() -> R) -> R {
    let limit = match crate::inline::active() {
        true => crate::inline::INLINE_COMPILE.min(shared.config.timeout),
        false => shared.config.timeout,
    };
    let _bounded = crate::guard::Compiling::start(limit);
    f()
}

/// An inline statement ran (was not abandoned): it counts as an operation on every table
/// with rules it touched, as a statement on an engine thread counts in [`before`].
fn count_inline(shared: &Shared, a: &Analysis) {
    if crate::inline::abandoned() {
        return;
    }
    for name in &a.tables {
        if let Some(t) = shared.registry.get(name) {
            t.count_op();
        }
    }
}

fn bind(stmt: &mut Statement<'_>, params: &[Value]) -> Result<(), SqlError> {
    let want = stmt.parameter_count();
    if want != params.len() {
        return Err(SqlError::bad(format!(
            "the statement has {want} parameter(s) but {} argument(s) were given",
            params.len()
        )));
    }
    for (i, p) in params.iter().enumerate() {
        stmt.raw_bind_parameter(i + 1, p)
            .map_err(|e| SqlError::bad(sqlite_message(&e)))?;
    }
    Ok(())
}

/// Marks the connection as stepping (so an ATTACH seen now is VACUUM's) until dropped, and
/// times the statement (the statement latency histogram). An inline statement is timed by
/// `crate::inline` around the whole attempt instead: one pair of clock reads serves both the
/// histogram and the server's slow log.
struct Running<'a>(&'a Conn, &'a Shared, Option<std::time::Instant>);

impl<'a> Running<'a> {
    fn new(conn: &'a Conn, shared: &'a Shared) -> Running<'a> {
        conn.auth.lock().running = true;
        let started = (!crate::inline::active()).then(std::time::Instant::now);
        Running(conn, shared, started)
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.auth.lock().running = false;
        if let Some(started) = self.2 {
            self.1
                .counters
                .statement_took(started.elapsed().as_nanos() as u64);
        }
    }
}

/// The result column names of `stmt` (SQLite's, copied).
fn column_names(stmt: &Statement<'_>) -> Arc<[String]> {
    stmt.column_names().into_iter().map(String::from).collect()
}

/// Steps `stmt` to the end, collecting rows until they pass `max_result_bytes`.
/// `columns` are the names the statement had when its analysis was made (under the current
/// schema epoch); should SQLite have recompiled it since to a different shape (a schema change
/// committed in between), the names are read again from the running statement.
fn rows(
    shared: &Shared,
    conn: &Conn,
    stmt: &mut Statement<'_>,
    params: &[Value],
    mut columns: Arc<[String]>,
) -> Result<Reply, SqlError> {
    bind(stmt, params)?;
    shared.counters.statements.fetch_add(1, Relaxed);
    let max = shared.config.max_result_bytes;
    let mut size: usize = columns.iter().map(|c| c.len() + 16).sum();
    let mut out = Vec::new();
    let _deadline = Deadline::arm(shared.config.timeout);
    let _running = Running::new(conn, shared);
    let mut it = stmt.raw_query();
    loop {
        let row = match it.next() {
            Ok(Some(row)) => row,
            Ok(None) => break,
            Err(e) => return Err(run_error(shared, conn, e)),
        };
        let n = row.as_ref().column_count();
        if n != columns.len() {
            let names = |c: &[String]| c.iter().map(|c| c.len() + 16).sum::<usize>();
            size -= names(&columns);
            columns = column_names(row.as_ref());
            size += names(&columns);
        }
        let mut vals = Vec::with_capacity(n);
        for i in 0..n {
            let v = row.get_ref_unwrap(i);
            size += weight(&v);
            if size > max {
                shared.counters.too_large.fetch_add(1, Relaxed);
                return Err(SqlError::new(
                    ErrorKind::ResultTooLarge,
                    format!(
                        "result larger than --sql-max-result ({max} bytes); select fewer rows or columns (LIMIT)"
                    ),
                ));
            }
            vals.push(value_of(v));
        }
        out.push(vals);
    }
    Ok(Reply::Rows { columns, rows: out })
}

/// Steps `stmt` to the end, discarding rows (RETURNING); returns the rows it changed.
fn changes(
    shared: &Shared,
    conn: &Conn,
    stmt: &mut Statement<'_>,
    params: &[Value],
    dml: bool,
) -> Result<u64, SqlError> {
    bind(stmt, params)?;
    shared.counters.statements.fetch_add(1, Relaxed);
    let _deadline = Deadline::arm(shared.config.timeout);
    let _running = Running::new(conn, shared);
    let mut it = stmt.raw_query();
    loop {
        match it.next() {
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(e) => return Err(run_error(shared, conn, e)),
        }
    }
    Ok(if dml { conn.db.changes() } else { 0 })
}

/// `SQL.QUERY`: exactly one statement. A reader hands statements that write to the writer.
pub(crate) fn query(
    shared: &Shared,
    conn: &mut Conn,
    side: Side,
    sql: &[u8],
    params: &[Value],
) -> Outcome {
    let sql = match utf8(sql) {
        Ok(s) => s,
        Err(e) => return Outcome::Done(Err(e), Effects::default()),
    };
    conn.check_epoch(shared);
    crate::guard::clear();
    let cached = conn.analyses.get(sql).cloned();
    let (a, mut stmt) = match cached {
        Some(a) if !a.readonly && side != Side::Writer => return Outcome::ToWriter,
        Some(a) => match compiling(shared, || conn.db.prepare_cached(sql)) {
            Ok(stmt) => (a, Prepared::Cached(stmt)),
            Err(e) => {
                return Outcome::Done(Err(compile_error(shared, conn, e)), Effects::default())
            }
        },
        None => {
            conn.auth.lock().reset();
            let stmt = match compiling(shared, || conn.db.prepare(sql)) {
                Ok(stmt) => stmt,
                Err(rusqlite::Error::MultipleStatement) => {
                    let e = SqlError::bad(
                        "SQL.QUERY runs exactly one statement (use SQL.EXEC for scripts)",
                    );
                    return Outcome::Done(Err(e), Effects::default());
                }
                Err(e) => {
                    return Outcome::Done(Err(compile_error(shared, conn, e)), Effects::default())
                }
            };
            let mut a = analysis(conn, &stmt);
            if !a.readonly && side != Side::Writer {
                return Outcome::ToWriter;
            }
            a.columns = column_names(&stmt);
            let a = remember(&mut conn.analyses, sql, a);
            (a, Prepared::Fresh(stmt))
        }
    };
    let effects = Effects {
        ddl: a.ddl,
        wrote: !a.readonly,
    };
    // An analysis made by SQL.EXEC (same text, on the writer) has no column names yet.
    let columns = match a.columns.is_empty() && stmt.get().column_count() > 0 {
        true => column_names(stmt.get()),
        false => a.columns.clone(),
    };
    let conn = &*conn;
    let result = before(shared, conn, side, &a).and_then(|()| {
        renames(shared, conn, a.alter, || {
            rows(shared, conn, stmt.get(), params, columns)
        })
    });
    drop(stmt);
    if side == Side::Inline {
        count_inline(shared, &a);
    }
    Outcome::Done(finish_txn(conn, result), effects)
}

/// A statement from the cache or freshly compiled; both are run the same way.
enum Prepared<'c> {
    Cached(rusqlite::CachedStatement<'c>),
    Fresh(Statement<'c>),
}

impl<'c> Prepared<'c> {
    fn get(&mut self) -> &mut Statement<'c> {
        match self {
            Prepared::Cached(s) => s,
            Prepared::Fresh(s) => s,
        }
    }
}

/// Records a one-statement SQL text's analysis. Takes the map alone, so it can be called
/// while a statement borrows the connection.
fn remember(analyses: &mut crate::conn::Analyses, sql: &str, a: Analysis) -> Arc<Analysis> {
    if analyses.len() >= CACHE {
        analyses.clear();
    }
    let a = Arc::new(a);
    analyses.insert(sql.to_string(), a.clone());
    a
}

/// `SQL.EXEC` (writer only): one statement, or a script run statement by statement, each
/// compiled only after the previous one ran (so `CREATE TABLE t…; INSERT INTO t…` works).
/// `params` are consumed in order by the statements' placeholders.
pub(crate) fn exec(
    shared: &Shared,
    conn: &mut Conn,
    sql: &[u8],
    params: &[Value],
) -> (Result<Reply, SqlError>, Effects) {
    let mut fx = Effects::default();
    let sql = match utf8(sql) {
        Ok(s) => s,
        Err(e) => return (Err(e), fx),
    };
    conn.check_epoch(shared);
    crate::guard::clear();
    if let Some(a) = conn.analyses.get(sql).cloned() {
        fx.ddl = a.ddl;
        fx.wrote = !a.readonly;
        let conn = &*conn;
        let result = before(shared, conn, Side::Writer, &a).and_then(|()| {
            let mut stmt = compiling(shared, || conn.db.prepare_cached(sql))
                .map_err(|e| compile_error(shared, conn, e))?;
            renames(shared, conn, a.alter, || {
                changes(shared, conn, &mut stmt, params, a.dml && !a.ddl)
            })
        });
        return (finish_txn(conn, result.map(Reply::Changed)), fx);
    }
    conn.auth.lock().reset();
    // An error means a script, or a statement that cannot compile: the script path reports
    // the latter exactly as it would for a one-statement script.
    let single = compiling(shared, || conn.db.prepare(sql)).ok();
    if let Some(mut stmt) = single {
        let a = analysis(conn, &stmt);
        fx.ddl = a.ddl;
        fx.wrote = !a.readonly;
        let a = remember(&mut conn.analyses, sql, a);
        let conn = &*conn;
        let result = before(shared, conn, Side::Writer, &a).and_then(|()| {
            renames(shared, conn, a.alter, || {
                changes(shared, conn, &mut stmt, params, a.dml && !a.ddl)
            })
        });
        drop(stmt);
        return (finish_txn(conn, result.map(Reply::Changed)), fx);
    }
    let conn = &*conn;
    let result = script(shared, conn, sql, params, &mut fx);
    (finish_txn(conn, result.map(Reply::Changed)), fx)
}

fn script(
    shared: &Shared,
    conn: &Conn,
    sql: &str,
    params: &[Value],
    fx: &mut Effects,
) -> Result<u64, SqlError> {
    let mut batch = Batch::new(&conn.db, sql);
    let (mut used, mut total) = (0usize, 0u64);
    loop {
        conn.auth.lock().reset();
        let mut stmt = match compiling(shared, || batch.next()) {
            Ok(Some(stmt)) => stmt,
            Ok(None) => break,
            Err(e) => return Err(compile_error(shared, conn, e)),
        };
        let a = analysis(conn, &stmt);
        fx.ddl |= a.ddl;
        fx.wrote |= !a.readonly;
        let k = stmt.parameter_count();
        let Some(mine) = params.get(used..used + k) else {
            return Err(SqlError::bad(format!(
                "the script has more parameters than the {} argument(s) given",
                params.len()
            )));
        };
        used += k;
        before(shared, conn, Side::Writer, &a)?;
        total += renames(shared, conn, a.alter, || {
            changes(shared, conn, &mut stmt, mine, a.dml && !a.ddl)
        })?;
    }
    if used != params.len() {
        return Err(SqlError::bad(format!(
            "{} argument(s) given but the SQL has {used} parameter(s)",
            params.len()
        )));
    }
    Ok(total)
}

/// Connections are pooled, so a transaction cannot outlive its command: one left open (a
/// script without COMMIT, or one that failed halfway) is rolled back.
fn finish_txn(conn: &Conn, result: Result<Reply, SqlError>) -> Result<Reply, SqlError> {
    if conn.db.is_autocommit() {
        return result;
    }
    let _ = conn.internal(|db| db.execute_batch("ROLLBACK"));
    result.and(Err(SqlError::bad(
        "transaction left open and rolled back: BEGIN and COMMIT must be in the same SQL.EXEC",
    )))
}
