//! Helpers shared by the engine's integration tests.
#![allow(dead_code)]

use sql::{Reply, Request, SqlConfig, SqlEngine, SqlError, Value};
use std::sync::Arc;

pub fn engine() -> Arc<SqlEngine> {
    engine_with(SqlConfig::default())
}

pub fn engine_with(config: SqlConfig) -> Arc<SqlEngine> {
    SqlEngine::new(config).expect("engine starts")
}

pub fn try_exec(e: &SqlEngine, sql: &str, params: Vec<Value>) -> Result<u64, SqlError> {
    match e.run(Request::Exec {
        sql: sql.as_bytes().to_vec(),
        params,
    })? {
        Reply::Changed(n) => Ok(n),
        other => panic!("unexpected reply {other:?}"),
    }
}

pub fn exec(e: &SqlEngine, sql: &str, params: Vec<Value>) -> u64 {
    try_exec(e, sql, params).unwrap_or_else(|err| panic!("{sql}: {err}"))
}

pub fn try_query(
    e: &SqlEngine,
    sql: &str,
    params: Vec<Value>,
) -> Result<(Vec<String>, Vec<Vec<Value>>), SqlError> {
    match e.run(Request::Query {
        sql: sql.as_bytes().to_vec(),
        params,
    })? {
        Reply::Rows { columns, rows } => Ok((columns.to_vec(), rows)),
        other => panic!("unexpected reply {other:?}"),
    }
}

pub fn rows(e: &SqlEngine, sql: &str, params: Vec<Value>) -> Vec<Vec<Value>> {
    try_query(e, sql, params)
        .unwrap_or_else(|err| panic!("{sql}: {err}"))
        .1
}

/// The single integer a query returns.
pub fn int(e: &SqlEngine, sql: &str) -> i64 {
    match rows(e, sql, vec![]).as_slice() {
        [row] => match row.as_slice() {
            [Value::Integer(i)] => *i,
            other => panic!("{sql}: not one integer: {other:?}"),
        },
        other => panic!("{sql}: not one row: {other:?}"),
    }
}

pub fn text(s: &str) -> Value {
    Value::Text(s.as_bytes().to_vec())
}
