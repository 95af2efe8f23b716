//! SQL.EXEC, SQL.QUERY, SQL.EXPIRE, SQL.TABLES and SQL.DESCRIBE: requests for the SQL engine.
//!
//! A short read-only SQL.QUERY runs on the I/O thread itself, under the engine's step budget
//! (`SqlEngine::query_inline`): the hand-off to an engine thread cost ten times a GET. Every
//! other request, and a query that runs past the budget (abandoned, changing nothing), goes to
//! the engine: the handler hands it over and marks the connection waiting; the engine's thread
//! encodes the reply and posts it to the client's mailbox, which resumes the connection.
//! Key-value traffic on the same thread goes on meanwhile.

use std::sync::Arc;
use std::time::Duration;

use resp::reply::{self, Version};
use sql::{ExpiryRules, Reply, Request, SqlError, Value};

use super::{parse_i64, Ctx};
use crate::clients::peer_gone;

/// The statement and its parameters: `sql [arg ...]`, or the typed form
/// `TYPES spec sql [arg ...]` where `spec` has one letter per argument: `i` INTEGER, `r` REAL,
/// `t` TEXT, `b` BLOB, `n` NULL (its argument must be empty). Untyped arguments bind by
/// [`Value::from_bulk`]; the typed form is for clients that know their values' types
/// (`SELECT ? = 5` with an INTEGER 5 is true, with the text '5' false). `TYPES` alone is not
/// SQL, so the form cannot be mistaken for a statement.
/// The text is borrowed from the request: a query run inline copies it nowhere.
fn statement<'a>(ctx: &Ctx<'a, '_>) -> Result<(&'a [u8], Vec<Value>), Vec<u8>> {
    if ctx.argc() < 4 || !ctx.arg(1).eq_ignore_ascii_case(b"types") {
        let params = ctx
            .args
            .tail(2)
            .map(|a| Value::from_bulk(a.to_vec()))
            .collect();
        return Ok((ctx.arg(1), params));
    }
    let spec = ctx.arg(2);
    let args: Vec<&[u8]> = ctx.args.tail(4).collect();
    if spec.len() != args.len() {
        return Err(format!(
            "ERR TYPES names {} type(s) but {} argument(s) were given",
            spec.len(),
            args.len()
        )
        .into_bytes());
    }
    let mut params = Vec::with_capacity(args.len());
    for (i, (&t, a)) in spec.iter().zip(args).enumerate() {
        let bad = |what: &str| format!("ERR TYPES argument {} is not {what}", i + 1).into_bytes();
        let text = std::str::from_utf8(a).ok();
        params.push(match t.to_ascii_lowercase() {
            b'i' => Value::Integer(parse_i64(a).ok_or_else(|| bad("an integer"))?),
            b'r' => Value::Real(
                text.and_then(|s| s.parse::<f64>().ok())
                    .filter(|f| !f.is_nan())
                    .ok_or_else(|| bad("a real number"))?,
            ),
            b't' => Value::Text(a.to_vec()),
            b'b' => Value::Blob(a.to_vec()),
            b'n' if a.is_empty() => Value::Null,
            b'n' => return Err(bad("empty (NULL takes an empty argument)")),
            _ => {
                return Err(
                    b"ERR TYPES letters are i (INTEGER), r (REAL), t (TEXT), b (BLOB), n (NULL)"
                        .to_vec(),
                )
            }
        });
    }
    Ok((ctx.arg(3), params))
}

/// Sends `request` to the engine; the reply arrives through the mailbox.
fn submit(ctx: &mut Ctx<'_, '_>, request: Request) {
    let Some(engine) = ctx.shared.sql.as_ref() else {
        return ctx.err(b"ERR SQL is disabled on this server");
    };
    if peer_gone(ctx.conn.client.fd) {
        // The client hung up with this command still in its pipeline: like Redis, which
        // frees a client at EOF, run nothing more for it (issue 11, item 4).
        ctx.conn.close = true;
        return;
    }
    // The engine holds the client weakly: a queued request must not keep a closed
    // connection's state alive, and it is dropped if the client is gone by its turn.
    let client = Arc::downgrade(&ctx.conn.client);
    let watched = client.clone();
    // SLOWLOG and LATENCY (`sql`) time the statement from when the engine picks it up.
    let observed = super::lookup(ctx.arg(0)).and_then(|command| {
        super::observe_hook::DeferredCall::new(ctx.shared, command, ctx.args, &ctx.conn.client)
    });
    let timer = observed.clone();
    let gone: sql::Gone = Box::new(move || {
        if let Some(t) = &timer {
            t.started();
        }
        match watched.upgrade() {
            None => true,
            Some(c) => peer_gone(c.fd),
        }
    });
    let version = ctx.conn.version;
    ctx.conn.waiting = true;
    engine.submit_for(
        request,
        ctx.conn.client.id,
        Some(gone),
        Box::new(move |result| {
            if let Some(o) = &observed {
                o.done();
            }
            let Some(client) = client.upgrade() else {
                return;
            };
            let mut out = Vec::new();
            encode(&mut out, version, result);
            client.post(&out, true);
        }),
    );
}

pub fn exec(ctx: &mut Ctx<'_, '_>) {
    match statement(ctx) {
        Ok((sql, params)) => submit(
            ctx,
            Request::Exec {
                sql: sql.to_vec(),
                params,
            },
        ),
        Err(msg) => ctx.err(&msg),
    }
}

pub fn query(ctx: &mut Ctx<'_, '_>) {
    match statement(ctx) {
        Ok((sql, params)) if inline(ctx, sql, &params) => {}
        Ok((sql, params)) => submit(
            ctx,
            Request::Query {
                sql: sql.to_vec(),
                params,
            },
        ),
        Err(msg) => ctx.err(&msg),
    }
}

/// Runs the query here if the engine lets it (short and read-only): the reply goes out with
/// this batch, and the slow log and `sql` latency event see it as they see a deferred one.
fn inline(ctx: &mut Ctx<'_, '_>, sql: &[u8], params: &[Value]) -> bool {
    let Some(engine) = ctx.shared.sql.as_ref() else {
        return false;
    };
    let Some((result, took)) = engine.query_inline(sql, params) else {
        return false;
    };
    // Only SQL.QUERY runs inline: its table entry, looked up once rather than per query.
    static QUERY: std::sync::OnceLock<Option<&'static super::Command>> = std::sync::OnceLock::new();
    if let Some(command) = *QUERY.get_or_init(|| super::lookup(b"sql.query")) {
        super::observe_hook::inline_sql(ctx.shared, command, ctx.args, &ctx.conn.client, took);
    }
    encode(ctx.out, ctx.conn.version, result);
    true
}

pub fn tables(ctx: &mut Ctx<'_, '_>) {
    submit(ctx, Request::Tables)
}

pub fn describe(ctx: &mut Ctx<'_, '_>) {
    let table = String::from_utf8_lossy(ctx.arg(1)).into_owned();
    submit(ctx, Request::Describe { table })
}

/// SQL.EXPIRE table [AGE seconds] [ROWS n] [OPS n]; with no rule, shows the table's rules.
pub fn expire(ctx: &mut Ctx<'_, '_>) {
    let table = String::from_utf8_lossy(ctx.arg(1)).into_owned();
    if ctx.argc() == 2 {
        return submit(ctx, Request::Expire { table, rules: None });
    }
    if !ctx.argc().is_multiple_of(2) {
        return ctx.err(super::SYNTAX);
    }
    let mut rules = ExpiryRules::default();
    for i in (2..ctx.argc()).step_by(2) {
        let Some(n) = parse_i64(ctx.arg(i + 1)).filter(|&n| n >= 0) else {
            return ctx.err(
                b"ERR SQL.EXPIRE rule values must be non-negative integers (0 turns a rule off)",
            );
        };
        let set = (n > 0).then_some(n as u64);
        match super::lower(ctx.arg(i)).as_str() {
            "age" => rules.age = set.map(Duration::from_secs),
            "rows" => rules.rows = set,
            "ops" => rules.ops = set,
            _ => return ctx.err(b"ERR SQL.EXPIRE rules are AGE seconds, ROWS n and OPS n"),
        }
    }
    submit(
        ctx,
        Request::Expire {
            table,
            rules: Some(rules),
        },
    )
}

fn value(out: &mut Vec<u8>, version: Version, v: &Value) {
    match v {
        Value::Null => reply::null(out, version),
        Value::Integer(i) => reply::integer(out, *i),
        Value::Real(f) => reply::double(out, *f, version),
        Value::Text(t) | Value::Blob(t) => reply::bulk(out, t),
    }
}

fn rules(out: &mut Vec<u8>, version: Version, r: &ExpiryRules) {
    reply::map_len(out, 3, version);
    for (name, v) in [
        ("age", r.age.map(|d| d.as_secs())),
        ("rows", r.rows),
        ("ops", r.ops),
    ] {
        reply::bulk(out, name.as_bytes());
        match v {
            Some(n) => reply::integer(out, n as i64),
            None => reply::null(out, version),
        }
    }
}

/// Encodes an engine result. SQL.QUERY replies `[columns, rows]`: RESP2 rows are arrays, RESP3
/// rows are maps column → value with typed values (integer, double, null).
fn encode(out: &mut Vec<u8>, version: Version, result: Result<Reply, SqlError>) {
    match result {
        Err(e) => reply::error(out, format!("ERR {}", e.message).as_bytes()),
        Ok(Reply::Changed(n)) => reply::integer(out, n as i64),
        Ok(Reply::Ok) => reply::ok(out),
        Ok(Reply::Rules(r)) => rules(out, version, &r),
        Ok(Reply::Tables(names)) => {
            reply::array_len(out, names.len());
            names.iter().for_each(|n| reply::bulk(out, n.as_bytes()));
        }
        Ok(Reply::Describe(columns)) => {
            reply::array_len(out, columns.len());
            for c in columns {
                reply::map_len(out, 5, version);
                reply::bulk(out, b"name");
                reply::bulk(out, c.name.as_bytes());
                reply::bulk(out, b"type");
                reply::bulk(out, c.decl_type.as_bytes());
                reply::bulk(out, b"notnull");
                reply::integer(out, i64::from(c.not_null));
                reply::bulk(out, b"default");
                match &c.default {
                    Some(d) => reply::bulk(out, d.as_bytes()),
                    None => reply::null(out, version),
                }
                reply::bulk(out, b"pk");
                reply::integer(out, i64::from(c.primary_key));
            }
        }
        Ok(Reply::Rows { columns, rows }) => {
            reply::array_len(out, 2);
            reply::array_len(out, columns.len());
            columns.iter().for_each(|c| reply::bulk(out, c.as_bytes()));
            reply::array_len(out, rows.len());
            for row in &rows {
                if version == Version::Resp3 {
                    reply::map_len(out, row.len(), version);
                    for (c, v) in columns.iter().zip(row) {
                        reply::bulk(out, c.as_bytes());
                        value(out, version, v);
                    }
                } else {
                    reply::array_len(out, row.len());
                    row.iter().for_each(|v| value(out, version, v));
                }
            }
        }
    }
}
