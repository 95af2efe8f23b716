//! Hashes: reply shapes in RESP2 and RESP3, arity, wrong types and the HINCRBY family.

use crate::testkit::*;

#[test]
fn hset_and_hgetall_shapes() {
    check_versions(&[
        ("HSET h f1 v1", ":1", "="),
        ("HSET h f1 v1b f2 v2", ":1", "="),
        ("HGET h f1", r#""v1b""#, "="),
        ("HGET h nope", "$-1", "_"),
        ("HGET nope f", "$-1", "_"),
        ("HMGET h f1 nope f2", r#"["v1b", $-1, "v2"]"#, r#"["v1b", _, "v2"]"#),
        ("HMGET nope a b", "[$-1, $-1]", "[_, _]"),
        ("HGETALL nope", "[]", "{}"),
        ("HDEL h f2", ":1", "="),
        ("HGETALL h", r#"["f1", "v1b"]"#, r#"{"f1": "v1b"}"#),
        ("HKEYS h", r#"["f1"]"#, "="),
        ("HVALS h", r#"["v1b"]"#, "="),
        ("HLEN h", ":1", "="),
        ("HLEN nope", ":0", "="),
        ("HEXISTS h f1", ":1", "="),
        ("HEXISTS h nope", ":0", "="),
        ("HSTRLEN h f1", ":3", "="),
        ("HSTRLEN h nope", ":0", "="),
        ("HMSET h f3 v3", "+OK", "="),
        ("HSETNX h f3 x", ":0", "="),
        ("HSETNX h f4 v4", ":1", "="),
        ("HDEL h f1 f3 f4 nope", ":3", "="),
        ("HGETALL h", "[]", "{}"),
        ("EXISTS h", ":0", "="),
    ]);
}

#[test]
fn hash_arity_and_types() {
    check_both(&[
        ("HSET h f", "-ERR wrong number of arguments for 'hset' command"),
        ("HSET h f v g", "-ERR wrong number of arguments for 'hset' command"),
        ("HSET h", "-ERR wrong number of arguments for 'hset' command"),
        ("HMSET h f v g", "-ERR wrong number of arguments for 'hmset' command"),
        ("HSETNX h f", "-ERR wrong number of arguments for 'hsetnx' command"),
        ("HGET h", "-ERR wrong number of arguments for 'hget' command"),
        ("HMGET h", "-ERR wrong number of arguments for 'hmget' command"),
        ("HDEL h", "-ERR wrong number of arguments for 'hdel' command"),
        ("HGETALL", "-ERR wrong number of arguments for 'hgetall' command"),
        ("HINCRBY h f", "-ERR wrong number of arguments for 'hincrby' command"),
        ("SET s v", "+OK"),
        ("HSET s f v", "-WRONGTYPE Operation against a key holding the wrong kind of value"),
        ("HGET s f", "-WRONGTYPE Operation against a key holding the wrong kind of value"),
        ("HGETALL s", "-WRONGTYPE Operation against a key holding the wrong kind of value"),
        ("HLEN s", "-WRONGTYPE Operation against a key holding the wrong kind of value"),
        ("HDEL s f", "-WRONGTYPE Operation against a key holding the wrong kind of value"),
        ("HINCRBY s f 1", "-WRONGTYPE Operation against a key holding the wrong kind of value"),
    ]);
}

#[test]
fn hincr_family() {
    check_both(&[
        ("HINCRBY h n 5", ":5"),
        ("HINCRBY h n -2", ":3"),
        ("HINCRBY h n abc", "-ERR value is not an integer or out of range"),
        ("HINCRBY h n 1.5", "-ERR value is not an integer or out of range"),
        ("HSET h s hello", ":1"),
        ("HINCRBY h s 1", "-ERR hash value is not an integer"),
        ("HINCRBYFLOAT h s 1", "-ERR hash value is not a float"),
        ("HSET h big 9223372036854775807", ":1"),
        ("HINCRBY h big 1", "-ERR increment or decrement would overflow"),
        ("HINCRBYFLOAT h f 1.5", r#""1.5""#),
        ("HINCRBYFLOAT h f abc", "-ERR value is not a valid float"),
        ("HINCRBYFLOAT h f inf", "-ERR value is NaN or Infinity"),
        ("HINCRBYFLOAT h n 0.5", r#""3.5""#),
        ("HGET h n", r#""3.5""#),
    ]);
}

