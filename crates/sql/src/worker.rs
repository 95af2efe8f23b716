//! The engine's threads: a pool of readers (queries and catalog requests) and one writer
//! (everything that writes, and expiry), each owning one connection for its whole life.

use crate::conn::Conn;
use crate::exec::{self, Effects, Outcome, Side};
use crate::expiry;
use crate::queue::Pop;
use crate::shared::{Done, Job, Shared};
use crate::snapshot;
use crate::{catalog, Reply, Request, SqlChange, SqlError};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

/// A reader; the express one takes only statements not known to be heavy.
pub(crate) fn reader(shared: Arc<Shared>, mut conn: Conn, express: bool) {
    loop {
        let next = match express {
            true => shared.readers.pop_light(),
            false => shared.readers.pop(None),
        };
        match next {
            Pop::Job(job) => reader_job(&shared, &mut conn, job),
            Pop::Idle => {}
            Pop::Closed => return,
        }
    }
}

pub(crate) fn writer(shared: Arc<Shared>, mut conn: Conn) {
    crate::rows::install(&shared, &conn);
    let every = shared.config.sweep_interval;
    let mut next_sweep = Instant::now() + every;
    loop {
        match shared.writer.pop(Some(next_sweep)) {
            Pop::Job(job) => writer_job(&shared, &mut conn, job),
            Pop::Idle => {}
            Pop::Closed => return,
        }
        if Instant::now() >= next_sweep {
            let _ = guarded(&mut conn, |conn| sweep(&shared, conn));
            next_sweep = Instant::now() + every;
        }
    }
}

/// Drops the request of a client that has gone; true if it did.
fn dropped(shared: &Shared, gone: &Option<crate::Gone>) -> bool {
    if gone.as_ref().is_some_and(|g| g()) {
        shared.counters.cancelled.fetch_add(1, Relaxed);
        return true;
    }
    false
}

fn reader_job(shared: &Shared, conn: &mut Conn, job: Job) {
    let Job::Request(req, done, gone, origin) = job else {
        // Expiry is the writer's; a misrouted job goes where it belongs.
        return forward(shared, job);
    };
    if dropped(shared, &gone) {
        return reply(done, Err(SqlError::cancelled()));
    }
    let out = match req {
        Request::Query { sql, params } => {
            let started = Instant::now();
            let run = guarded(conn, |conn| {
                Ok(exec::query(shared, conn, Side::Reader, &sql, &params))
            });
            shared.heavy.note(shared.heavy.key(&sql), started.elapsed());
            match run {
                Ok(Outcome::ToWriter) => {
                    let req = Request::Query { sql, params };
                    return forward(shared, Job::Request(req, done, gone, origin));
                }
                Ok(Outcome::Done(r, _)) => r,
                Err(e) => Err(e),
            }
        }
        req @ (Request::Exec { .. } | Request::Expire { rules: Some(_), .. }) => {
            return forward(shared, Job::Request(req, done, gone, origin));
        }
        other => guarded(conn, |conn| catalog_request(shared, conn, other)),
    };
    reply(done, out);
}

fn writer_job(shared: &Shared, conn: &mut Conn, job: Job) {
    match job {
        Job::Expire {
            table,
            basis,
            waiter,
        } => {
            let full = waiter.is_some();
            let r = guarded(conn, |conn| {
                expiry::expire(shared, conn, &table, basis, full)
            });
            match waiter {
                Some(w) => {
                    let _ = w.send(r.map(|_| ()));
                }
                None if matches!(r, Ok(true)) => {
                    // More to remove: go to the back of the line so other writes interleave.
                    let again = Job::Expire {
                        table,
                        basis: None,
                        waiter: None,
                    };
                    let _ = shared.writer.push(again);
                }
                None => {}
            }
            after_write(
                shared,
                conn,
                &Effects {
                    ddl: false,
                    wrote: true,
                },
            );
        }
        Job::Snapshot(waiter) => {
            let _ = waiter.send(guarded(conn, |conn| snapshot::take(shared, conn)));
        }
        Job::Restore(checked, waiter) => {
            let r = guarded(conn, |conn| snapshot::restore(shared, conn, &checked));
            drop(checked);
            // Whatever happened, follow the schema as it is now (registry, caches, size).
            after_write(
                shared,
                conn,
                &Effects {
                    ddl: true,
                    wrote: true,
                },
            );
            let _ = waiter.send(r);
        }
        Job::Request(req, done, gone, origin) => {
            if dropped(shared, &gone) {
                return reply(done, Err(SqlError::cancelled()));
            }
            let (out, fx) = match req {
                Request::Exec { sql, params } => {
                    let mut fx = Effects::default();
                    crate::rows::begin();
                    let r = guarded(conn, |conn| {
                        let (r, f) = exec::exec(shared, conn, &sql, &params);
                        fx = f;
                        r
                    });
                    crate::rows::finish(shared, conn, r.is_ok());
                    if r.is_ok() && (fx.wrote || fx.ddl) {
                        shared.tell(|| SqlChange::Statement {
                            query: false,
                            sql: &sql,
                            params: &params,
                            origin,
                        });
                    }
                    (r, fx)
                }
                Request::Query { sql, params } => {
                    let mut fx = Effects::default();
                    crate::rows::begin();
                    let r = guarded(conn, |conn| {
                        match exec::query(shared, conn, Side::Writer, &sql, &params) {
                            Outcome::Done(r, f) => {
                                fx = f;
                                r
                            }
                            Outcome::ToWriter => unreachable!("the writer runs every statement"),
                        }
                    });
                    crate::rows::finish(shared, conn, r.is_ok());
                    if r.is_ok() && (fx.wrote || fx.ddl) {
                        shared.tell(|| SqlChange::Statement {
                            query: true,
                            sql: &sql,
                            params: &params,
                            origin,
                        });
                    }
                    (r, fx)
                }
                Request::Expire {
                    table,
                    rules: Some(rules),
                } => {
                    let told = rules.clone();
                    let r = guarded(conn, |conn| expiry::set(shared, conn, &table, rules));
                    if r.is_ok() {
                        shared.tell(|| SqlChange::Rules {
                            table: &table,
                            rules: &told,
                            origin,
                        });
                    }
                    (
                        r,
                        Effects {
                            ddl: true,
                            wrote: true,
                        },
                    )
                }
                other => (
                    guarded(conn, |conn| catalog_request(shared, conn, other)),
                    Effects::default(),
                ),
            };
            after_write(shared, conn, &fx);
            reply(done, out);
        }
    }
}

/// Requests either side can answer.
fn catalog_request(shared: &Shared, conn: &mut Conn, req: Request) -> Result<Reply, SqlError> {
    match req {
        Request::Tables => catalog::tables(conn),
        Request::Describe { table } => catalog::describe(conn, &table),
        Request::Expire { table, rules: None } => expiry::show(shared, conn, &table),
        _ => Err(SqlError::bad("request routed to the wrong engine thread")),
    }
}

/// Writer bookkeeping after a job (its changes are committed by now): invalidate cached
/// expiry heads, follow schema changes, refresh the data size.
fn after_write(shared: &Shared, conn: &mut Conn, fx: &Effects) {
    if fx.ddl || fx.wrote {
        shared.data_changed();
    }
    if fx.ddl {
        shared.schema_changed();
        let _ = guarded(conn, |conn| expiry::reconcile(shared, conn));
    }
    if fx.ddl || fx.wrote {
        let bytes = conn.internal(|db| {
            db.query_row(
                "SELECT p.page_count * s.page_size FROM pragma_page_count() AS p, pragma_page_size() AS s",
                [],
                |r| r.get::<_, i64>(0),
            )
        });
        if let Ok(b) = bytes {
            shared.counters.data_bytes.store(b.max(0) as u64, Relaxed);
        }
    }
}

/// The periodic pass: one batch per table with expired rows; more batches are queued.
fn sweep(shared: &Shared, conn: &mut Conn) -> Result<(), SqlError> {
    let mut removed = false;
    for t in shared.registry.all() {
        if !expiry::due(shared, conn, &t, t.ops(), false) {
            continue;
        }
        removed = true;
        if let Ok(true) = expiry::expire(shared, conn, &t, None, false) {
            let again = Job::Expire {
                table: t,
                basis: None,
                waiter: None,
            };
            let _ = shared.writer.push(again);
        }
    }
    if removed {
        after_write(
            shared,
            conn,
            &Effects {
                ddl: false,
                wrote: true,
            },
        );
    }
    Ok(())
}

fn forward(shared: &Shared, job: Job) {
    if let Err(job) = shared.writer.push(job) {
        job.abandon();
    }
}

/// Runs `f`, turning a panic into an error and leaving the connection usable: no transaction
/// left open, no half-collected authorizer state, no analyses that may be wrong.
pub(crate) fn guarded<R>(
    conn: &mut Conn,
    f: impl FnOnce(&mut Conn) -> Result<R, SqlError>,
) -> Result<R, SqlError> {
    match catch_unwind(AssertUnwindSafe(|| f(conn))) {
        Ok(r) => r,
        Err(_) => {
            if !conn.db.is_autocommit() {
                let _ = conn.internal(|db| db.execute_batch("ROLLBACK"));
            }
            conn.auth.lock().reset();
            conn.auth.lock().internal = false;
            conn.analyses.clear();
            Err(SqlError::new(
                crate::ErrorKind::Sqlite,
                "internal error in the SQL engine",
            ))
        }
    }
}

/// Hands the result to the server's callback; a panicking callback must not kill the thread.
fn reply(done: Done, out: Result<Reply, SqlError>) {
    let _ = catch_unwind(AssertUnwindSafe(move || done(out)));
}
