//! SET, GETEX, the INCR family, MSET/MSETNX, ranges and the legacy setters.

use crate::testkit::*;

#[test]
fn set_conditions_and_get() {
    check_versions(&[
        ("SET k v", "+OK", "="),
        ("SET k v2 NX", "$-1", "_"),
        ("GET k", r#""v""#, "="),
        ("SET k v3 XX", "+OK", "="),
        ("GET k", r#""v3""#, "="),
        ("SET nope v XX", "$-1", "_"),
        ("EXISTS nope", ":0", "="),
        ("SET k v4 GET", r#""v3""#, "="),
        ("SET fresh v GET", "$-1", "_"),
        ("SET k v5 NX GET", r#""v4""#, "="),
        ("SET absent v XX GET", "$-1", "_"),
        ("EXISTS absent", ":0", "="),
        ("SET k v6 xx get", r#""v4""#, "="),
        ("GET k", r#""v6""#, "="),
    ]);
}

#[test]
fn set_option_errors() {
    check_both(&[
        ("SET k v NX XX", "-ERR syntax error"),
        ("SET k v XX NX", "-ERR syntax error"),
        ("SET k v EX 10 PX 100", "-ERR syntax error"),
        ("SET k v EX 10 EXAT 100", "-ERR syntax error"),
        ("SET k v PX 10 PXAT 100", "-ERR syntax error"),
        ("SET k v EX 10 KEEPTTL", "-ERR syntax error"),
        ("SET k v KEEPTTL PX 10", "-ERR syntax error"),
        ("SET k v EX", "-ERR syntax error"),
        ("SET k v PX", "-ERR syntax error"),
        ("SET k v EX 0", "-ERR invalid expire time in 'set' command"),
        ("SET k v EX -1", "-ERR invalid expire time in 'set' command"),
        ("SET k v PX 0", "-ERR invalid expire time in 'set' command"),
        ("SET k v EXAT 0", "-ERR invalid expire time in 'set' command"),
        ("SET k v PXAT -5", "-ERR invalid expire time in 'set' command"),
        ("SET k v EX abc", "-ERR value is not an integer or out of range"),
        ("SET k v EX 1.5", "-ERR value is not an integer or out of range"),
        ("SET k v EX 9223372036854775807", "-ERR invalid expire time in 'set' command"),
        ("SET k v PX 9223372036854775807", "-ERR invalid expire time in 'set' command"),
        ("SET k v BOGUS", "-ERR syntax error"),
        ("SET k v NX NX", "+OK"),
        ("SET k v EX 10 EX 20", "+OK"),
        ("SET k v GET GET", r#""v""#),
        ("SET k", "-ERR wrong number of arguments for 'set' command"),
        ("EXISTS k", ":1"),
    ]);
}

#[test]
fn set_expiry_options() {
    check_both(&[
        ("SET k v EX 100", "+OK"),
        ("TTL k", ":100"),
        ("SET k v2 KEEPTTL", "+OK"),
        ("TTL k", ":100"),
        ("GET k", r#""v2""#),
        ("SET k v3", "+OK"),
        ("TTL k", ":-1"),
        ("SET k v PX 100000", "+OK"),
        ("TTL k", ":100"),
        ("SET k v EXAT 4102444800", "+OK"),
        ("EXPIRETIME k", ":4102444800"),
        ("SET k v PXAT 4102444800123", "+OK"),
        ("PEXPIRETIME k", ":4102444800123"),
        ("SET k v EXAT 1", "+OK"),
        ("EXISTS k", ":0"),
        ("SET k v ex 100 nx", "+OK"),
        ("SET k v ex 100 xx get", r#""v""#),
        ("TTL k", ":100"),
    ]);
}

#[test]
fn set_get_on_wrong_type() {
    check_both(&[
        ("HSET h f v", ":1"),
        ("SET h v GET", "-WRONGTYPE Operation against a key holding the wrong kind of value"),
        ("TYPE h", "+hash"),
        ("SET h v NX GET", "-WRONGTYPE Operation against a key holding the wrong kind of value"),
        ("SET h v", "+OK"),
        ("TYPE h", "+string"),
    ]);
}

#[test]
fn getex_options() {
    check_versions(&[
        ("SET k v", "+OK", "="),
        ("GETEX k", r#""v""#, "="),
        ("TTL k", ":-1", "="),
        ("GETEX k EX 100", r#""v""#, "="),
        ("TTL k", ":100", "="),
        ("GETEX k PX 200000", r#""v""#, "="),
        ("TTL k", ":200", "="),
        ("GETEX k EXAT 4102444800", r#""v""#, "="),
        ("EXPIRETIME k", ":4102444800", "="),
        ("GETEX k PXAT 4102444800123", r#""v""#, "="),
        ("PEXPIRETIME k", ":4102444800123", "="),
        ("GETEX k PERSIST", r#""v""#, "="),
        ("TTL k", ":-1", "="),
        ("GETEX nope EX 100", "$-1", "_"),
        ("GETEX k EX 0", "-ERR invalid expire time in 'getex' command", "="),
        ("GETEX k EX -1", "-ERR invalid expire time in 'getex' command", "="),
        ("GETEX k PX 0", "-ERR invalid expire time in 'getex' command", "="),
        ("GETEX k EX abc", "-ERR value is not an integer or out of range", "="),
        ("GETEX k EX", "-ERR syntax error", "="),
        ("GETEX k EX 10 PX 10", "-ERR syntax error", "="),
        ("GETEX k PERSIST EX 10", "-ERR syntax error", "="),
        ("GETEX k BOGUS", "-ERR syntax error", "="),
        ("GETEX k KEEPTTL", "-ERR syntax error", "="),
        ("GETEX k EXAT 1", r#""v""#, "="),
        ("EXISTS k", ":0", "="),
        ("HSET h f v", ":1", "="),
        ("GETEX h", "-WRONGTYPE Operation against a key holding the wrong kind of value", "="),
        ("GETEX", "-ERR wrong number of arguments for 'getex' command", "="),
    ]);
}

#[test]
fn incr_family() {
    check_both(&[
        ("SET n 10", "+OK"),
        ("INCR n", ":11"),
        ("DECR n", ":10"),
        ("INCRBY n 5", ":15"),
        ("DECRBY n 3", ":12"),
        ("INCRBY n -4", ":8"),
        ("INCRBY n abc", "-ERR value is not an integer or out of range"),
        ("INCRBY n 1.5", "-ERR value is not an integer or out of range"),
        (r#"INCRBY n """#, "-ERR value is not an integer or out of range"),
        ("DECRBY n 9223372036854775808", "-ERR value is not an integer or out of range"),
        ("SET s hello", "+OK"),
        ("INCR s", "-ERR value is not an integer or out of range"),
        ("DECR s", "-ERR value is not an integer or out of range"),
        (r#"SET sp " 1""#, "+OK"),
        ("INCR sp", "-ERR value is not an integer or out of range"),
        ("SET big 9223372036854775807", "+OK"),
        ("INCR big", "-ERR increment or decrement would overflow"),
        ("SET small -9223372036854775808", "+OK"),
        ("DECR small", "-ERR increment or decrement would overflow"),
        ("DECRBY small 1", "-ERR increment or decrement would overflow"),
        ("SET z 0", "+OK"),
        ("DECRBY z -9223372036854775808", "-ERR decrement would overflow"),
        ("INCR fresh", ":1"),
        ("DECR fresh2", ":-1"),
        ("HSET h f v", ":1"),
        ("INCR h", "-WRONGTYPE Operation against a key holding the wrong kind of value"),
        ("INCRBY h 1", "-WRONGTYPE Operation against a key holding the wrong kind of value"),
        ("INCR", "-ERR wrong number of arguments for 'incr' command"),
        ("INCRBY n", "-ERR wrong number of arguments for 'incrby' command"),
        ("INCRBY n 1 2", "-ERR wrong number of arguments for 'incrby' command"),
        ("SET f 1.5", "+OK"),
        ("INCR f", "-ERR value is not an integer or out of range"),
        ("INCRBYFLOAT f 1", r#""2.5""#),
        ("INCRBYFLOAT f abc", "-ERR value is not a valid float"),
        ("INCRBYFLOAT f inf", "-ERR increment would produce NaN or Infinity"),
        // (INCRBYFLOAT f 1e400: Redis reads long doubles, whose range is wider than f64's.)
        ("INCRBYFLOAT fresh3 2.5", r#""2.5""#),
        ("INCRBYFLOAT s 1", "-ERR value is not a valid float"),
        ("INCRBYFLOAT h 1", "-WRONGTYPE Operation against a key holding the wrong kind of value"),
    ]);
}

#[test]
fn mset_msetnx_arity() {
    check_versions(&[
        ("MSET a 1 b 2", "+OK", "="),
        ("MGET a b c", r#"["1", "2", $-1]"#, r#"["1", "2", _]"#),
        ("MSET a", "-ERR wrong number of arguments for 'mset' command", "="),
        ("MSET a 1 b", "-ERR wrong number of arguments for 'mset' command", "="),
        ("MSET", "-ERR wrong number of arguments for 'mset' command", "="),
        ("MSETNX a 1 b", "-ERR wrong number of arguments for 'msetnx' command", "="),
        ("MSETNX c 3 d 4", ":1", "="),
        ("MSETNX c 3 e 5", ":0", "="),
        ("MGET c d e", r#"["3", "4", $-1]"#, r#"["3", "4", _]"#),
        ("MSETNX", "-ERR wrong number of arguments for 'msetnx' command", "="),
        ("MGET", "-ERR wrong number of arguments for 'mget' command", "="),
        ("MSET a 1 a 2", "+OK", "="),
        ("GET a", r#""2""#, "="),
    ]);
}

#[test]
fn string_ranges_and_lengths() {
    check_both(&[
        (r#"SET k "Hello World""#, "+OK"),
        ("STRLEN k", ":11"),
        ("STRLEN nope", ":0"),
        ("GETRANGE k 0 4", r#""Hello""#),
        ("GETRANGE k -5 -1", r#""World""#),
        ("GETRANGE k 5 2", r#""""#),
        ("GETRANGE k 0 -100", r#""H""#),
        ("GETRANGE k 100 200", r#""""#),
        ("GETRANGE k a 1", "-ERR value is not an integer or out of range"),
        ("GETRANGE nope 0 10", r#""""#),
        ("SETRANGE k 6 Redis", ":11"),
        ("GET k", r#""Hello Redis""#),
        ("SETRANGE k -1 x", "-ERR offset is out of range"),
        // Redis names its proto-max-bulk-len; cairn names the setting that bounds it here.
        ("SETRANGE k 536870912 x", "-ERR string exceeds maximum allowed size (max-value-size)"),
        ("SETRANGE k a x", "-ERR value is not an integer or out of range"),
        ("SETRANGE fresh 3 ab", ":5"),
        ("GET fresh", r#""\x00\x00\x00ab""#),
        (r#"SETRANGE fresh2 5 """#, ":0"),
        ("EXISTS fresh2", ":0"),
        ("APPEND k !", ":12"),
        ("APPEND new abc", ":3"),
        ("GET new", r#""abc""#),
        ("HSET h f v", ":1"),
        ("APPEND h x", "-WRONGTYPE Operation against a key holding the wrong kind of value"),
        ("STRLEN h", "-WRONGTYPE Operation against a key holding the wrong kind of value"),
        ("GETRANGE h 0 1", "-WRONGTYPE Operation against a key holding the wrong kind of value"),
        ("SETRANGE h 0 x", "-WRONGTYPE Operation against a key holding the wrong kind of value"),
    ]);
}

#[test]
fn string_legacy_setters() {
    check_versions(&[
        ("SETNX k v", ":1", "="),
        ("SETNX k w", ":0", "="),
        ("GET k", r#""v""#, "="),
        ("SETEX k 100 v2", "+OK", "="),
        ("TTL k", ":100", "="),
        ("SETEX k 0 v", "-ERR invalid expire time in 'setex' command", "="),
        ("SETEX k -1 v", "-ERR invalid expire time in 'setex' command", "="),
        ("SETEX k abc v", "-ERR value is not an integer or out of range", "="),
        ("PSETEX k 100000 v3", "+OK", "="),
        ("TTL k", ":100", "="),
        ("PSETEX k 0 v", "-ERR invalid expire time in 'psetex' command", "="),
        ("GETSET k v4", r#""v3""#, "="),
        ("GETSET nope v", "$-1", "_"),
        ("GETDEL k", r#""v4""#, "="),
        ("GETDEL k", "$-1", "_"),
        ("EXISTS k", ":0", "="),
        ("HSET h f v", ":1", "="),
        ("GETSET h v", "-WRONGTYPE Operation against a key holding the wrong kind of value", "="),
        ("GETDEL h", "-WRONGTYPE Operation against a key holding the wrong kind of value", "="),
        ("GET h", "-WRONGTYPE Operation against a key holding the wrong kind of value", "="),
        ("SETNX", "-ERR wrong number of arguments for 'setnx' command", "="),
        ("SETEX k 10", "-ERR wrong number of arguments for 'setex' command", "="),
    ]);
}

