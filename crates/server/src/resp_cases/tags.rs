//! Typed tags (cairn-only): TAG.SET options, TAG.ADD/REM pairs, the group query grammar
//! (WHERE type op value [AND ...] [LIMIT n] [CURSOR c]) and its errors, which name the argument.

use crate::testkit::*;

#[test]
fn tag_set_options() {
    check2(&[
        ("TAG.SET k v TAG 1 10 TAG 2 -5", "+OK"),
        ("TAG.OF k", "[[:1, :10], [:2, :-5]]"),
        ("GET k", r#""v""#),
        ("TAG.SET k v EX 100 TAG 1 1", "+OK"),
        ("TTL k", ":100"),
        ("TAG.SET k v PX 100000", "+OK"),
        ("TTL k", ":100"),
        ("TAG.OF k", "[]"),
        ("TAG.SET k v EX 0", "-ERR invalid expire time in 'tag.set' command"),
        ("TAG.SET k v EX -1", "-ERR invalid expire time in 'tag.set' command"),
        ("TAG.SET k v EX abc", "-ERR invalid expire time in 'tag.set' command"),
        ("TAG.SET k v EX", "-ERR syntax error"),
        ("TAG.SET k v EX 10 PX 10", "-ERR syntax error"),
        ("TAG.SET k v TAG 1", "-ERR syntax error"),
        ("TAG.SET k v TAG x 1", "-ERR tag type must be an unsigned 32-bit integer and value a signed 64-bit integer"),
        ("TAG.SET k v TAG -1 1", "-ERR tag type must be an unsigned 32-bit integer and value a signed 64-bit integer"),
        ("TAG.SET k v TAG 4294967296 1", "-ERR tag type must be an unsigned 32-bit integer and value a signed 64-bit integer"),
        ("TAG.SET k v TAG 1 1.5", "-ERR tag type must be an unsigned 32-bit integer and value a signed 64-bit integer"),
        ("TAG.SET k v BOGUS", "-ERR syntax error"),
        ("TAG.SET k", "-ERR wrong number of arguments for 'tag.set' command"),
        ("TAG.OF nope", "[]"),
    ]);
}

#[test]
fn tag_add_rem_arguments() {
    check2(&[
        ("TAG.SET k v", "+OK"),
        ("TAG.ADD k 1 10 2 20", ":2"),
        ("TAG.ADD k 1 10", ":0"),
        ("TAG.OF k", "[[:1, :10], [:2, :20]]"),
        ("TAG.ADD k 1", "-ERR wrong number of arguments for 'tag.add' command"),
        ("TAG.ADD k 1 10 2", "-ERR syntax error"),
        ("TAG.ADD k x 10", "-ERR tag type must be an unsigned 32-bit integer and value a signed 64-bit integer"),
        ("TAG.ADD k 1 y", "-ERR tag type must be an unsigned 32-bit integer and value a signed 64-bit integer"),
        ("TAG.ADD nope 1 1", ":0"),
        ("TAG.REM k 1 10", ":1"),
        ("TAG.REM k 1 10", ":0"),
        ("TAG.OF k", "[[:2, :20]]"),
        ("TAG.REM k 2", "-ERR wrong number of arguments for 'tag.rem' command"),
        ("TAG.REM k 2 z", "-ERR tag type must be an unsigned 32-bit integer and value a signed 64-bit integer"),
        ("TAG.REM nope 1 1", ":0"),
        ("TAG.ADD k", "-ERR wrong number of arguments for 'tag.add' command"),
        ("TAG.REM k", "-ERR wrong number of arguments for 'tag.rem' command"),
    ]);
}

#[test]
fn tag_query_parsing() {
    check2(&[
        ("TAG.SET a 1 TAG 1 5", "+OK"),
        ("TAG.SET b 2 TAG 1 7 TAG 2 1", "+OK"),
        ("TAG.COUNT WHERE 1 ANY", ":2"),
        ("TAG.COUNT WHERE 1 = 5", ":1"),
        ("TAG.COUNT WHERE 1 == 5", ":1"),
        ("TAG.COUNT WHERE 1 > 5", ":1"),
        ("TAG.COUNT WHERE 1 >= 5", ":2"),
        ("TAG.COUNT WHERE 1 < 7", ":1"),
        ("TAG.COUNT WHERE 1 <= 7", ":2"),
        ("TAG.COUNT WHERE 1 BETWEEN 5 6", ":1"),
        ("TAG.COUNT WHERE 1 ANY AND 2 = 1", ":1"),
        ("TAG.COUNT where 1 any and 2 any", ":1"),
        ("TAG.KEYS WHERE 1 ANY", r#"["0", ["a", "b"]]"#),
        ("TAG.KEYS WHERE 1 ANY LIMIT 1", r#"["k61", ["a"]]"#),
        ("TAG.KEYS WHERE 1 ANY LIMIT 1 CURSOR k61", r#"["0", ["b"]]"#),
        ("TAG.GET WHERE 2 = 1", r#"["0", ["b", "2"]]"#),
        ("TAG.COUNT WHEN 1 ANY", "-ERR tag query: argument 1 ('WHEN'): expected WHERE"),
        ("TAG.COUNT WHERE x ANY", "-ERR tag query: argument 2 ('x'): expected a tag type (unsigned integer)"),
        ("TAG.COUNT WHERE 1 LIKE 5", "-ERR tag query: argument 3 ('LIKE'): expected an operator (= < <= > >= BETWEEN ANY)"),
        ("TAG.COUNT WHERE 1 =", "-ERR tag query: missing an integer value after argument 3"),
        ("TAG.COUNT WHERE 1 = x", "-ERR tag query: argument 4 ('x'): expected an integer value"),
        ("TAG.COUNT WHERE 1 BETWEEN 5", "-ERR tag query: missing an integer value after argument 4"),
        ("TAG.COUNT WHERE 1 ANY AND", "-ERR tag query: missing a tag type (unsigned integer) after argument 4"),
        ("TAG.COUNT WHERE 1 ANY OR 2 ANY", "-ERR tag query: argument 4 ('OR'): expected AND"),
        ("TAG.COUNT WHERE 1 ANY LIMIT 1", "-ERR tag query: argument 4 ('LIMIT'): expected AND"),
        ("TAG.KEYS WHERE 1 ANY LIMIT 0", "-ERR tag query: argument 5 ('0'): expected a positive LIMIT"),
        ("TAG.KEYS WHERE 1 ANY LIMIT x", "-ERR tag query: argument 5 ('x'): expected an integer value"),
        ("TAG.KEYS WHERE 1 ANY LIMIT", "-ERR tag query: missing an integer value after argument 4"),
        ("TAG.KEYS WHERE 1 ANY CURSOR bogus", "-ERR tag query: argument 5 ('bogus'): expected a cursor from an earlier reply"),
        ("TAG.KEYS WHERE 1 ANY CURSOR", "-ERR tag query: argument 4 ('CURSOR'): expected AND, LIMIT or CURSOR"),
        ("TAG.DEL WHERE 1 ANY CURSOR 0", "-ERR tag query: argument 4 ('CURSOR'): expected AND"),
        ("TAG.DEL WHERE 1 = 5", ":1"),
        ("TAG.COUNT WHERE 1 ANY", ":1"),
        ("TAG.COUNT WHERE", "-ERR wrong number of arguments for 'tag.count' command"),
        ("TAG.GET WHERE 1", "-ERR wrong number of arguments for 'tag.get' command"),
    ]);
}

#[test]
fn tag_group_shapes_resp3() {
    check3(&[
        ("TAG.SET a 1 TAG 1 5", "+OK"),
        ("HSET h f v", ":1"),
        ("TAG.ADD h 1 6", ":1"),
        ("TAG.GET WHERE 1 ANY", r#"["0", {"a": "1", "h": _}]"#),
        ("TAG.KEYS WHERE 1 ANY", r#"["0", ["a", "h"]]"#),
        ("TAG.OF a", "[[:1, :5]]"),
    ]);
}
