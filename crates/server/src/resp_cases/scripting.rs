//! Lua scripting: how a script's result reaches the client (Lua -> RESP2 / RESP3), how replies
//! reach the script (RESP -> Lua, also with `redis.setresp(3)`), and the EVAL / SCRIPT errors.
//! The rows are what redis-server 7 answers to the same requests.

use crate::testkit::*;

#[test]
fn lua_values_become_replies() {
    check_versions(&[
        (r#"EVAL "return 1" 0"#, ":1", "="),
        (r#"EVAL "return 3.99" 0"#, ":3", "="),
        (r#"EVAL "return -3.7" 0"#, ":-3", "="),
        (r#"EVAL "return 'x'" 0"#, r#""x""#, "="),
        (r#"EVAL "return nil" 0"#, "$-1", "_"),
        // A script's booleans follow the script's protocol, not the client's.
        (r#"EVAL "return true" 0"#, ":1", "="),
        (r#"EVAL "return false" 0"#, "$-1", "_"),
        (r#"EVAL "redis.setresp(3) return true" 0"#, ":1", "#t"),
        (r#"EVAL "redis.setresp(3) return false" 0"#, ":0", "#f"),
        (r#"EVAL "return {1, 'a', {2}}" 0"#, r#"[:1, "a", [:2]]"#, "="),
        (r#"EVAL "return {1, nil, 3}" 0"#, "[:1]", "="),
        (r#"EVAL "return {a=1}" 0"#, "[]", "="),
        (r#"EVAL "return {ok='fine'}" 0"#, "+fine", "="),
        (r#"EVAL "return {err='MY bad'}" 0"#, "-MY bad", "="),
        (r#"EVAL "return {1, {err='ERR inner'}}" 0"#, "[:1, -ERR inner]", "="),
        (r#"EVAL "return redis.error_reply('bad')" 0"#, "-ERR bad", "="),
        (r#"EVAL "return redis.status_reply('FINE')" 0"#, "+FINE", "="),
        (r#"EVAL "return {double=1.5}" 0"#, r#""1.5""#, ",1.5"),
        (r#"EVAL "return {map={a=1}}" 0"#, r#"["a", :1]"#, r#"{"a": :1}"#),
        (r#"EVAL "return {set={a=true}}" 0"#, r#"["a"]"#, r#"~["a"]"#),
    ]);
}

#[test]
fn replies_become_lua_values() {
    check_versions(&[
        ("HSET h f v", ":1", "="),
        (r#"EVAL "return type(redis.call('get', 'nokey'))" 0"#, r#""boolean""#, "="),
        (r#"EVAL "redis.setresp(3) return type(redis.call('get', 'nokey'))" 0"#, r#""nil""#, "="),
        (r#"EVAL "return redis.call('set', 'k', 'v').ok" 0"#, r#""OK""#, "="),
        (r#"EVAL "return redis.pcall('hget', 'k', 'f').err" 0"#, r#""WRONGTYPE Operation against a key holding the wrong kind of value""#, "="),
        (r#"EVAL "return redis.call('hgetall', 'h')" 0"#, r#"["f", "v"]"#, "="),
        (r#"EVAL "redis.setresp(3) return redis.call('hgetall', 'h')" 0"#, r#"["f", "v"]"#, r#"{"f": "v"}"#),
        (r#"EVAL "redis.setresp(3) return redis.call('hgetall', 'h').map.f" 0"#, r#""v""#, "="),
        (r#"EVAL "return redis.call('incr', 'n') + 1" 0"#, ":2", "="),
        (r#"EVAL "return KEYS[1] .. ARGV[1] .. #KEYS .. #ARGV" 1 k a b"#, r#""ka12""#, "="),
    ]);
}

#[test]
fn eval_and_script_errors() {
    check_both(&[
        (r#"EVAL "return 1" 2 k"#, "-ERR Number of keys can't be greater than number of args"),
        (r#"EVAL "return 1" -1"#, "-ERR Number of keys can't be negative"),
        (r#"EVAL "return 1" x"#, "-ERR value is not an integer or out of range"),
        ("EVAL", "-ERR wrong number of arguments for 'eval' command"),
        ("EVALSHA 0000000000000000000000000000000000000000 0", "-NOSCRIPT No matching script. Please use EVAL."),
        (r#"EVAL "return +" 0"#, "-ERR Error compiling script (new function): user_script:1: unexpected symbol near '+'"),
        (r#"EVAL "return x" 0"#, "-ERR user_script:1: Script attempted to access nonexistent global variable 'x' script: 03c387736bb5cc009ff35151572cee04677aa374, on @user_script:1."),
        (r#"EVAL "return redis.call('nope')" 0"#, "-ERR Unknown Redis command called from script script: ..."),
        (r#"EVAL_RO "return redis.call('set', 'k', 'v')" 0"#, "-ERR Write commands are not allowed from read-only scripts. script: ..."),
        (r#"SCRIPT LOAD "return 'hi'""#, r#""2f31ba2bb6d6a0f42cc159d2e2dad55440778de3""#),
        ("EVALSHA 2F31BA2BB6D6A0F42CC159D2E2DAD55440778DE3 0", r#""hi""#),
        ("SCRIPT EXISTS 2f31ba2bb6d6a0f42cc159d2e2dad55440778de3 nope", "[:1, :0]"),
        ("SCRIPT FLUSH SOON", "-ERR SCRIPT FLUSH only support SYNC|ASYNC option"),
        ("SCRIPT FLUSH", "+OK"),
        ("SCRIPT EXISTS 2f31ba2bb6d6a0f42cc159d2e2dad55440778de3", "[:0]"),
        ("SCRIPT KILL", "-NOTBUSY No scripts in execution right now."),
        ("SCRIPT NOPE", "-ERR unknown subcommand 'NOPE'. Try SCRIPT HELP."),
        ("SCRIPT LOAD", "-ERR wrong number of arguments for 'script|load' command"),
    ]);
}
