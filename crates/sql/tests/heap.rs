//! `max_memory` bounds SQLite's whole heap, not only the database image (issue 11, item 7).
//! Its own test binary: the heap limit is process-wide.

mod common;
use common::*;
use sql::{ErrorKind, SqlConfig};
use std::time::Duration;

#[test]
fn temporary_btree_past_the_heap_limit_fails_and_the_engine_goes_on() {
    let e = engine_with(SqlConfig {
        max_memory: 16 << 20,
        timeout: Duration::from_secs(30),
        ..SqlConfig::default()
    });
    let stats = e.stats();
    assert_eq!(stats.heap_limit, (16 << 20) + (32 << 20));
    // DISTINCT over 4M distinct 96-byte strings: a ~500 MB temporary b-tree.
    let sql = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 4000000) \
               SELECT count(DISTINCT hex(randomblob(48))) FROM c";
    let err = try_query(&e, sql, vec![]).unwrap_err();
    assert_eq!(err.kind, ErrorKind::OutOfMemory, "{err}");
    assert_eq!(
        err.message,
        "SQL memory limit reached: the statement needed more than the SQL heap limit (50331648 bytes, from --sql-maxmemory 16777216)"
    );
    assert!(e.stats().memory_used < stats.heap_limit);
    // Same through a write: a trigger-free INSERT … SELECT DISTINCT on the writer.
    exec(&e, "CREATE TABLE t(x)", vec![]);
    let err = try_exec(
        &e,
        &format!(
            "INSERT INTO t {}",
            sql.replace(
                "count(DISTINCT hex(randomblob(48)))",
                "DISTINCT hex(randomblob(48))"
            )
        ),
        vec![],
    )
    .unwrap_err();
    assert_eq!(err.kind, ErrorKind::OutOfMemory, "{err}");
    assert_eq!(int(&e, "SELECT count(*) FROM t"), 0);
    exec(&e, "INSERT INTO t VALUES (1)", vec![]);
    assert_eq!(int(&e, "SELECT count(*) FROM t"), 1);
}
