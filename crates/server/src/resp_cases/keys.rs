//! Keys and expiry: the EXPIRE family and its NX/XX/GT/LT options, TTL replies, TYPE, EXISTS,
//! DEL, KEYS, FLUSHALL and SCAN options.

use crate::testkit::*;

#[test]
fn expire_conditions() {
    check_both(&[
        ("SET k v", "+OK"),
        ("EXPIRE k 100 XX", ":0"),
        ("TTL k", ":-1"),
        ("EXPIRE k 100 NX", ":1"),
        ("EXPIRE k 200 NX", ":0"),
        ("TTL k", ":100"),
        ("EXPIRE k 200 XX", ":1"),
        ("TTL k", ":200"),
        ("EXPIRE k 100 GT", ":0"),
        ("EXPIRE k 300 GT", ":1"),
        ("TTL k", ":300"),
        ("EXPIRE k 400 LT", ":0"),
        ("EXPIRE k 150 LT", ":1"),
        ("TTL k", ":150"),
        ("PERSIST k", ":1"),
        ("EXPIRE k 100 GT", ":0"),
        ("EXPIRE k 100 LT", ":1"),
        ("TTL k", ":100"),
        ("PERSIST k", ":1"),
        ("PERSIST k", ":0"),
        ("EXPIRE nope 100", ":0"),
        ("EXPIRE nope 100 NX", ":0"),
    ]);
}

#[test]
fn expire_option_errors() {
    check_both(&[
        ("SET k v", "+OK"),
        ("EXPIRE k 100 NX XX", "-ERR NX and XX, GT or LT options at the same time are not compatible"),
        ("EXPIRE k 100 GT LT", "-ERR GT and LT options at the same time are not compatible"),
        ("EXPIRE k 100 NX GT", "-ERR NX and XX, GT or LT options at the same time are not compatible"),
        ("EXPIRE k 100 XX GT", ":0"),
        ("EXPIRE k 100 BOGUS", "-ERR Unsupported option BOGUS"),
        ("EXPIRE k abc", "-ERR value is not an integer or out of range"),
        ("EXPIRE k 1.5", "-ERR value is not an integer or out of range"),
        ("EXPIRE k 9223372036854775807", "-ERR invalid expire time in 'expire' command"),
        ("PEXPIRE k 9223372036854775807", "-ERR invalid expire time in 'pexpire' command"),
        ("EXPIREAT k 9223372036854775807", "-ERR invalid expire time in 'expireat' command"),
        ("PEXPIRE k abc", "-ERR value is not an integer or out of range"),
        ("EXPIREAT k abc", "-ERR value is not an integer or out of range"),
        ("PEXPIREAT k abc NX", "-ERR value is not an integer or out of range"),
        ("EXPIRE k", "-ERR wrong number of arguments for 'expire' command"),
        ("EXPIRE", "-ERR wrong number of arguments for 'expire' command"),
    ]);
}

#[test]
fn expire_in_the_past_deletes() {
    check_both(&[
        ("SET k v", "+OK"),
        ("EXPIRE k 0", ":1"),
        ("EXISTS k", ":0"),
        ("SET k v", "+OK"),
        ("EXPIRE k -10", ":1"),
        ("EXISTS k", ":0"),
        ("SET k v", "+OK"),
        ("PEXPIRE k -1", ":1"),
        ("EXISTS k", ":0"),
        ("SET k v", "+OK"),
        ("EXPIREAT k 1", ":1"),
        ("EXISTS k", ":0"),
        ("SET k v", "+OK"),
        ("PEXPIREAT k 1000", ":1"),
        ("EXISTS k", ":0"),
        ("SET k v EX 100", "+OK"),
        ("EXPIRE k 0 GT", ":0"),
        ("EXISTS k", ":1"),
        ("EXPIRE k 0 LT", ":1"),
        ("EXISTS k", ":0"),
    ]);
}

#[test]
fn ttl_family_replies() {
    check_both(&[
        ("SET k v", "+OK"),
        ("TTL k", ":-1"),
        ("PTTL k", ":-1"),
        ("EXPIRETIME k", ":-1"),
        ("PEXPIRETIME k", ":-1"),
        ("TTL nope", ":-2"),
        ("PTTL nope", ":-2"),
        ("EXPIRETIME nope", ":-2"),
        ("PEXPIRETIME nope", ":-2"),
        ("EXPIREAT k 4102444800", ":1"),
        ("EXPIRETIME k", ":4102444800"),
        ("PEXPIRETIME k", ":4102444800000"),
        ("PEXPIREAT k 4102444800500", ":1"),
        ("EXPIRETIME k", ":4102444801"),
        ("PEXPIRETIME k", ":4102444800500"),
        ("PEXPIRE k 100000", ":1"),
        ("TTL k", ":100"),
        ("TTL", "-ERR wrong number of arguments for 'ttl' command"),
        ("TTL a b", "-ERR wrong number of arguments for 'ttl' command"),
    ]);
}

#[test]
fn type_exists_del_touch() {
    check_both(&[
        ("SET s v", "+OK"),
        ("HSET h f v", ":1"),
        ("TYPE s", "+string"),
        ("TYPE h", "+hash"),
        ("TYPE nope", "+none"),
        ("EXISTS s h nope s", ":3"),
        ("TOUCH s h nope", ":2"),
        ("DEL s nope s", ":1"),
        ("EXISTS s", ":0"),
        ("UNLINK h", ":1"),
        ("EXISTS h", ":0"),
        ("DEL", "-ERR wrong number of arguments for 'del' command"),
        ("EXISTS", "-ERR wrong number of arguments for 'exists' command"),
        ("TYPE a b", "-ERR wrong number of arguments for 'type' command"),
    ]);
}

#[test]
fn keys_and_dbsize() {
    check_both(&[
        ("MSET a 1 b 2 c 3", "+OK"),
        ("DBSIZE", ":3"),
        ("KEYS nomatch*", "[]"),
        ("KEYS a", r#"["a"]"#),
        ("KEYS [ab]x", "[]"),
        ("FLUSHALL", "+OK"),
        ("DBSIZE", ":0"),
        ("FLUSHALL ASYNC", "+OK"),
        ("FLUSHALL SYNC", "+OK"),
        ("FLUSHALL BOGUS", "-ERR syntax error"),
        ("FLUSHDB", "+OK"),
        ("FLUSHDB ASYNC", "+OK"),
        ("FLUSHDB a b", "-ERR syntax error"),
        ("DBSIZE x", "-ERR wrong number of arguments for 'dbsize' command"),
    ]);
}

#[test]
fn scan_options() {
    check_both(&[
        ("SET a 1", "+OK"),
        ("SCAN 0 MATCH a COUNT 100", r#"["0", ["a"]]"#),
        ("SCAN 0 MATCH nomatch COUNT 100", r#"["0", []]"#),
        ("SCAN 0 COUNT 100 TYPE string", r#"["0", ["a"]]"#),
        ("SCAN 0 COUNT 100 TYPE hash", r#"["0", []]"#),
        ("SCAN 0 COUNT 0", "-ERR syntax error"),
        ("SCAN 0 COUNT -1", "-ERR syntax error"),
        ("SCAN 0 COUNT abc", "-ERR value is not an integer or out of range"),
        ("SCAN 0 MATCH", "-ERR syntax error"),
        ("SCAN 0 COUNT", "-ERR syntax error"),
        ("SCAN 0 TYPE", "-ERR syntax error"),
        ("SCAN 0 BOGUS x", "-ERR syntax error"),
        ("SCAN abc", "-ERR invalid cursor"),
        ("SCAN -1", r#"["0", []]"#),
        ("SCAN 18446744073709551616", "-ERR invalid cursor"),
        ("SCAN", "-ERR wrong number of arguments for 'scan' command"),
    ]);
}

