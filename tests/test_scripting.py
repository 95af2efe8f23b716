"""Lua scripting (issue 17): EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, SCRIPT, with Redis's Lua 5.1
semantics: conversions both ways, error texts, the sandbox, the bit/cjson/cmsgpack/struct
libraries, atomicity across shards, busy scripts (-BUSY, SCRIPT KILL), and that the commands
a script runs are seen by client tracking and MONITOR. Every test also passes against
redis-server 7 (CAIRN_TARGET=redis).
"""

import threading
import time

import pytest
import redis

from conftest import TARGET


def ev(c, script, *keys_and_args, numkeys=0):
    return c.eval(script, numkeys, *keys_and_args)


def error_of(c, script, numkeys=0, *args):
    with pytest.raises(redis.ResponseError) as e:
        c.eval(script, numkeys, *args)
    return str(e.value)


def sha_of(c, script):
    return c.script_load(script)


# ---------------------------------------------------------------------------------------
# conversions


def test_lua_to_resp2_conversions(r):
    assert ev(r, "return 1") == 1
    assert ev(r, "return 3.99") == 3  # truncated
    assert ev(r, "return -3.7") == -3
    assert ev(r, "return 'x'") == b"x"
    assert ev(r, "return true") == 1
    assert ev(r, "return false") is None
    assert ev(r, "return nil") is None
    assert ev(r, "return {1, 2, 'a', {3, {4}}}") == [1, 2, b"a", [3, [4]]]
    assert ev(r, "return {1, nil, 3}") == [1]  # an array stops at its first nil
    assert ev(r, "return {a=1}") == []
    assert ev(r, "return {ok='fine'}") == b"fine"
    assert ev(r, "return redis.status_reply('FINE')") == b"FINE"
    assert ev(r, "return {double=1.5}") == b"1.5"
    assert ev(r, "return {map={a=1}}") == [b"a", 1]
    assert ev(r, "return {set={a=true}}") == [b"a"]
    assert ev(r, "return {1, {err='inner bad'}, 3}")[1].args[0] == "inner bad"
    assert ev(r, "return KEYS[1] .. ARGV[1] .. #KEYS .. #ARGV", "k", "v", "w", numkeys=1) == b"kv12"


def test_resp2_replies_to_lua(r):
    r.set("s", "v")
    r.hset("h", "f", "1")
    assert ev(r, "return type(redis.call('get', 'nokey'))") == b"boolean"
    assert ev(r, "return redis.call('get', 'nokey') == false") == 1
    assert ev(r, "return redis.call('incr', 'n')") == 1
    assert ev(r, "return type(redis.call('incr', 'n'))") == b"number"
    assert ev(r, "return redis.call('set', 'a', 'b').ok") == b"OK"
    assert ev(r, "return redis.call('hgetall', 'h')") == [b"f", b"1"]
    assert ev(r, "return redis.pcall('incr', 's').err") == b"ERR value is not an integer or out of range"
    # numbers passed to redis.call: integers as integers
    assert ev(r, "redis.call('set', 'n2', 10); return redis.call('get', 'n2')") == b"10"


def test_resp3_conversions(r3):
    r3.hset("h", "f", "v")
    # without setresp(3) the script's booleans stay RESP2's even for a RESP3 client
    assert r3.eval("return true", 0) == 1
    assert r3.eval("return false", 0) is None
    assert r3.eval("redis.setresp(3); return true", 0) is True
    assert r3.eval("redis.setresp(3); return false", 0) is False
    assert r3.eval("return {double=1.5}", 0) == 1.5
    assert r3.eval("return {map={a=1}}", 0) == {b"a": 1}
    assert r3.eval("return {set={a=true}}", 0) in ([b"a"], {b"a"})
    assert r3.eval("redis.setresp(3); return redis.call('hgetall', 'h')", 0) == {b"f": b"v"}
    assert r3.eval("redis.setresp(3); return type(redis.call('hgetall', 'h').map)", 0) == b"table"
    assert r3.eval("redis.setresp(3); return type(redis.call('get', 'nokey'))", 0) == b"nil"
    assert r3.eval("return redis.call('hgetall', 'h')", 0) == [b"f", b"v"]
    with pytest.raises(redis.ResponseError, match="RESP version must be 2 or 3"):
        r3.eval("redis.setresp(4)", 0)


# ---------------------------------------------------------------------------------------
# errors


def test_error_texts(r):
    r.set("s", "v")
    sha = "script: {}, on @user_script:1."
    cases = {
        "return x": "ERR user_script:1: Script attempted to access nonexistent global variable 'x'",
        "error('boom')": "ERR user_script:1: boom",
        "error({err='MY err'})": "MY err",
        "local function f() error('in f') end f()": "ERR user_script:1: in f",
        "return redis.call('nope')": "ERR Unknown Redis command called from script",
        "return redis.call('incr', 'a', 'b')": "ERR Wrong number of args calling Redis command from script",
        "return redis.call('hset', 's', 'f', 'v')": "WRONGTYPE Operation against a key holding the wrong kind of value",
        "return redis.call('eval', 'return 1', '0')": "ERR This Redis command is not allowed from script",
        "return redis.call()": "ERR Please specify at least one argument for this redis lib call",
        "return redis.call('get', {})": "ERR Lua redis lib command arguments must be strings or integers",
    }
    for script, msg in cases.items():
        sha1 = r.script_load(script)
        # redis-py drops the "ERR " code from a message
        assert error_of(r, script) == f"{msg.removeprefix('ERR ')} {sha.format(sha1)}", script
    assert error_of(r, "return 1 +").startswith(
        "Error compiling script (new function): user_script:1: unexpected symbol near '<eof>'")
    assert error_of(r, "return redis.error_reply('X bad')") == "X bad"
    assert error_of(r, "return redis.error_reply('bad')") == "bad"  # redis-py drops "ERR "
    assert error_of(r, "return {err='lower x'}") == "lower x"
    # pcall turns an error of redis.call into its message
    assert ev(r, "local ok, e = pcall(redis.call, 'incr', 's'); return {tostring(ok), e}") == [
        b"false", b"ERR value is not an integer or out of range"]
    assert ev(r, "local ok, e = pcall(error, {err='x y'}); return e") == b"x y"
    assert ev(r, "return redis.pcall('nope').err") == b"ERR Unknown Redis command called from script"


def test_numkeys_errors(r):
    with pytest.raises(redis.ResponseError, match="Number of keys can't be greater than number of args"):
        r.eval("return 1", 2, "k")
    with pytest.raises(redis.ResponseError, match="Number of keys can't be negative"):
        r.eval("return 1", -1)
    with pytest.raises(redis.ResponseError, match="value is not an integer"):
        r.execute_command("EVAL", "return 1", "x")


# ---------------------------------------------------------------------------------------
# sandbox


def test_sandbox(r):
    for name in ("os", "io", "require", "loadfile", "dofile"):
        msg = error_of(r, f"return {name}")
        assert f"Script attempted to access nonexistent global variable '{name}'" in msg, name
    assert "Attempt to modify a readonly table" in error_of(r, "x = 1")
    assert "Attempt to modify a readonly table" in error_of(r, "function f() end")
    assert "Attempt to modify a readonly table" in error_of(r, "redis.call = nil")
    assert "Attempt to modify a readonly table" in error_of(r, "_G.y = 1")
    assert "Attempt to modify a readonly table" in error_of(r, "string.x = 1")
    # bytecode is refused; text still loads, and what it loads is sandboxed too
    assert ev(r, "return loadstring(string.dump(function() return 1 end)) == nil") == 1
    assert ev(r, "return loadstring('return 1 + 1')()") == 2
    assert "Attempt to modify a readonly table" in error_of(r, "loadstring('z = 1')()")
    # nothing a script did is seen by the next one
    assert ev(r, "local t = 1; return type(t)") == b"number"
    assert "nonexistent global variable 't'" in error_of(r, "return t")
    assert ev(r, "return redis.REDIS_VERSION") == r.info("server")["redis_version"].encode()
    assert ev(r, "return redis.LOG_WARNING") == 3
    assert ev(r, "redis.log(redis.LOG_NOTICE, 'from a test', 1); return 1") == 1
    assert ev(r, "return redis.sha1hex('abc')") == b"a9993e364706816aba3e25717850c26c9cd0d89d"
    assert ev(r, "return string.format('%d-%s', 3, ('x'):upper())") == b"3-X"


# ---------------------------------------------------------------------------------------
# libraries


def test_cjson(r):
    cases = {
        "return cjson.encode({})": b"{}",
        "return cjson.encode({1,2,{a=false}})": b'[1,2,{"a":false}]',
        "return cjson.encode({[1]=1,[3]=3})": b"[1,null,3]",
        "return cjson.encode({a={}})": b'{"a":{}}',
        "return cjson.encode(1/3)": b"0.33333333333333",
        "return cjson.encode(2^53)": b"9.007199254741e+15",
        "return cjson.encode('a/b\\n\\1')": b'"a\\/b\\n\\u0001"',
        "return cjson.encode(cjson.null)": b"null",
        "return cjson.encode(cjson.decode('[1,null,2.5,\"x\"]'))": b'[1,null,2.5,"x"]',
        "return cjson.decode('{\"a\":null}').a == cjson.null": 1,
        "return cjson.decode('{\"a\":[1,2,{\"b\":true}]}').a[3].b": 1,
        "return cjson.decode('\"\\\\u00e9\\\\ud83d\\\\ude00\"')": "é😀".encode(),
    }
    for script, want in cases.items():
        assert ev(r, script) == want, script
    assert "excessively sparse array" in error_of(r, "return cjson.encode({[1]=1,[20]=3})")
    assert "Expected value but found invalid token at character 1" in error_of(r, "return cjson.decode('nope')")


def test_cmsgpack(r):
    assert ev(r, "return cmsgpack.pack({1,2,'a'})") == b"\x93\x01\x02\xa1a"
    assert ev(r, "return cmsgpack.pack({a=1})") == b"\x81\xa1a\x01"
    assert ev(r, "return cmsgpack.pack({})") == b"\x90"
    assert ev(r, "return cmsgpack.pack(1.5, -1, -200, 300, 70000, 5000000000, 0.1, true, false, nil)") == (
        b"\xca?\xc0\x00\x00\xff\xd1\xff8\xcd\x01,\xce\x00\x01\x11p\xcf\x00\x00\x00\x01*\x05\xf2\x00"
        b"\xcb?\xb9\x99\x99\x99\x99\x99\x9a\xc3\xc2\xc0")
    assert ev(r, "return {cmsgpack.unpack(cmsgpack.pack(1,{2,3},'x', -5.25))}") == [1, [2, 3], b"x", -5]
    assert ev(r, "return cjson.encode({cmsgpack.unpack(cmsgpack.pack({a={1,2}}))})") == b'[{"a":[1,2]}]'


def test_bit(r):
    cases = {
        "return bit.tohex(65535)": b"0000ffff",
        "return bit.tohex(-1, -4)": b"FFFF",
        "return bit.tohex(0x1234, 2)": b"34",
        "return bit.band(0xff, 0x0f)": 15,
        "return bit.bor(1, 2, 4)": 7,
        "return bit.bxor(5, 3)": 6,
        "return bit.bnot(0)": -1,
        "return bit.lshift(1, 31)": -2147483648,
        "return bit.rshift(-1, 28)": 15,
        "return bit.arshift(-256, 4)": -16,
        "return bit.rol(0x12345678, 8)": 0x34567812,
        "return bit.ror(0x12345678, 8)": 0x78123456,
        "return bit.tobit(2^32 + 5)": 5,
        "return bit.bswap(0x12345678)": 0x78563412,
    }
    for script, want in cases.items():
        assert ev(r, script) == want, script


def test_struct(r):
    cases = {
        "return struct.pack('>I2', 258)": b"\x01\x02",
        "return struct.pack('<i4', -2)": b"\xfe\xff\xff\xff",
        "return {struct.unpack('>I2', '\\1\\2')}": [258, 3],
        "return {struct.unpack('<i4', struct.pack('<i4', -2))}": [-2, 5],
        "return struct.size('>I2i4d')": 14,
        "return struct.pack('s', 'ab')": b"ab\x00",
        "return {struct.unpack('Bc0', '\\3abcd')}": [b"abc", 5],
        "return struct.pack('>d', 1.5)": b"?\xf8\x00\x00\x00\x00\x00\x00",
        "return struct.pack('bxh', 1, 2)": b"\x01\x00\x02\x00",
    }
    for script, want in cases.items():
        assert ev(r, script) == want, script


# ---------------------------------------------------------------------------------------
# the script cache, read-only scripts, shebang flags


def test_script_cache(r):
    sha = r.script_load("return ARGV[1]")
    assert sha == "2f31ba2bb6d6a0f42cc159d2e2dad55440778de3" or len(sha) == 40
    assert r.evalsha(sha, 0, "hi") == b"hi"
    assert r.evalsha(sha.upper(), 0, "up") == b"up"
    assert r.script_exists(sha, "0" * 40) == [True, False]
    # EVAL caches its script too
    r.eval("return 7", 0)
    assert r.script_exists(r.execute_command("SCRIPT", "LOAD", "return 7").decode()) == [True]
    with pytest.raises(redis.exceptions.NoScriptError):
        r.evalsha("0" * 40, 0)
    with pytest.raises(redis.exceptions.NoScriptError):
        r.evalsha("short", 0)
    with pytest.raises(redis.ResponseError, match="Error compiling script"):
        r.script_load("return +")
    r.evalsha(sha, 0)  # compiled by the interpreter: the flush must drop that copy too
    assert r.script_flush() is True
    assert r.script_exists(sha) == [False]
    with pytest.raises(redis.exceptions.NoScriptError):
        r.evalsha(sha, 0)
    assert r.execute_command("SCRIPT", "FLUSH", "ASYNC") in (b"OK", True)
    with pytest.raises(redis.ResponseError, match="SYNC|ASYNC"):
        r.execute_command("SCRIPT", "FLUSH", "LATER")
    with pytest.raises(redis.ResponseError, match="NOTBUSY"):
        r.script_kill()
    assert any(b"LOAD" in line for line in r.execute_command("SCRIPT", "HELP"))


def test_read_only_scripts_refuse_writes(r):
    r.set("k", "v")
    assert r.eval_ro("return redis.call('get', KEYS[1])", 1, "k") == b"v"
    with pytest.raises(redis.ResponseError, match="Write commands are not allowed from read-only scripts"):
        r.eval_ro("return redis.call('set', KEYS[1], 'w')", 1, "k")
    sha = r.script_load("return redis.call('del', KEYS[1])")
    with pytest.raises(redis.ResponseError, match="Write commands are not allowed from read-only scripts"):
        r.evalsha_ro(sha, 1, "k")
    assert r.get("k") == b"v"
    with pytest.raises(redis.ResponseError, match="Write commands are not allowed from read-only scripts"):
        r.eval("#!lua flags=no-writes\nreturn redis.call('set', 'k', 'w')", 0)
    assert r.eval("#!lua flags=no-writes,allow-oom\nreturn 1", 0) == 1
    assert r.eval("#!lua\nreturn 2", 0) == 2
    with pytest.raises(redis.ResponseError, match="Unexpected flag in script shebang: bogus"):
        r.eval("#!lua flags=bogus\nreturn 1", 0)
    with pytest.raises(redis.ResponseError, match="Unexpected engine in script shebang"):
        r.eval("#!python\nreturn 1", 0)


def test_scripts_in_a_transaction(r):
    p = r.pipeline(transaction=True)
    p.set("t", "1")
    p.eval("return redis.call('incr', KEYS[1])", 1, "t")
    p.get("t")
    assert p.execute() == [True, 2, b"2"]


# ---------------------------------------------------------------------------------------
# the frameworks' scripts


def test_redis_py_lock(r):
    lock = r.lock("resource", timeout=5)
    assert lock.acquire(blocking=False)
    assert not r.lock("resource", timeout=5).acquire(blocking=False)
    assert lock.extend(5)
    assert lock.reacquire()
    lock.release()  # EVALSHA of redis-py's release script
    assert r.get("resource") is None
    with pytest.raises(redis.exceptions.LockError):
        lock.release()


def test_laravel_and_php_session_lock_release(r):
    release = 'if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end'
    r.set("lock:sess", "owner-1")
    assert r.eval(release, 1, "lock:sess", "someone-else") == 0
    assert r.get("lock:sess") == b"owner-1"
    assert r.eval(release, 1, "lock:sess", "owner-1") == 1
    assert r.get("lock:sess") is None


# ---------------------------------------------------------------------------------------
# atomicity, busy scripts


def test_scripts_are_atomic_across_shards(server, r):
    """Scripts move amounts between keys spread over the shards while readers MGET them all:
    no reader ever sees the total change (a script half done)."""
    keys = [f"acct:{i}" for i in range(16)]
    r.mset({k: 100 for k in keys})
    total = 100 * len(keys)
    move = """
    local n = #KEYS
    for i = 1, n do
      local from, to = KEYS[i], KEYS[(i % n) + 1]
      local amount = tonumber(ARGV[1])
      redis.call('decrby', from, amount)
      redis.call('incrby', to, amount)
    end
    redis.call('decrby', KEYS[1], 5)
    redis.call('incrby', KEYS[n], 5)
    return 1
    """
    sha = r.script_load(move)
    bad, stop = [], threading.Event()

    def writer(seed):
        c = server.client()
        for i in range(150):
            order = keys[seed:] + keys[:seed]
            c.evalsha(sha, len(order), *order, str(i % 7 + 1))
        c.close()

    def reader():
        c = server.client()
        while not stop.is_set():
            s = sum(int(v) for v in c.mget(keys))
            if s != total:
                bad.append(s)
        c.close()

    readers = [threading.Thread(target=reader) for _ in range(2)]
    writers = [threading.Thread(target=writer, args=(i * 5,)) for i in range(3)]
    for t in readers + writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    for t in readers:
        t.join()
    assert not bad, f"a reader saw a script half done: {bad[:5]}"
    assert sum(int(v) for v in r.mget(keys)) == total


def run_in_thread(server, script, numkeys=0, *args):
    result = {}

    def go():
        c = server.client(socket_timeout=10)
        try:
            result["value"] = c.eval(script, numkeys, *args)
        except redis.RedisError as e:
            result["error"] = str(e)
        finally:
            c.close()

    t = threading.Thread(target=go)
    t.start()
    return t, result


@pytest.fixture
def short_busy(server, r):
    # With one I/O thread too: the busy thread lets its other clients in (server busy.rs).
    r.config_set("busy-reply-threshold", 100)
    yield
    r.config_set("busy-reply-threshold", 5000)


def from_each(conns, fn, wait=1.0):
    """Runs fn(conn) on every connection at once; the replies (or errors, as text) that came
    within `wait` seconds (a connection served by the busy script's thread waits for it)."""
    out = [None] * len(conns)

    def go(i, c):
        try:
            out[i] = fn(c)
        except redis.RedisError as e:
            out[i] = str(e)

    threads = [threading.Thread(target=go, args=(i, c)) for i, c in enumerate(conns)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + wait
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    return list(out)


# Connections made one after another go round-robin to cairn's I/O threads: of four, some are
# served by another thread than the busy script's (whose thread runs the script; Redis serves
# everyone from its one thread while a script is busy, cairn from the other threads).
CANDIDATES = 4


def test_busy_script_and_script_kill(server, r, short_busy):
    others = [server.client(socket_timeout=10) for _ in range(CANDIDATES)]
    assert all(c.ping() for c in others)
    t, result = run_in_thread(server, "local i = 0 while true do i = i + 1 end")
    time.sleep(0.35)
    busy = "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
    replies = from_each(others[:2], lambda c: c.get("x"))
    assert busy in replies, replies
    kills = from_each(others[2:], lambda c: c.script_kill())
    assert True in kills, kills
    t.join(5)
    assert not t.is_alive()
    assert result["error"].startswith("Script killed by user with SCRIPT KILL... script: "), result
    assert all(c.set("x", "1") is True for c in others)
    for c in others:
        c.close()


def test_a_script_that_wrote_cannot_be_killed(server, r, short_busy):
    script = """
    redis.call('set', 'w', '1')
    local t0 = redis.call('time')
    local start = t0[1] * 1000000 + t0[2]
    while true do
      local t = redis.call('time')
      if t[1] * 1000000 + t[2] - start > 700000 then break end
    end
    return 'done'
    """
    killers = [server.client(socket_timeout=10) for _ in range(CANDIDATES)]
    assert all(c.ping() for c in killers)
    t, result = run_in_thread(server, script)
    time.sleep(0.3)
    kills = from_each(killers, lambda c: c.script_kill())
    assert any(str(k).startswith("UNKILLABLE") for k in kills), kills
    t.join(5)
    assert result == {"value": b"done"}
    assert r.get("w") == b"1"
    for c in killers:
        c.close()


# ---------------------------------------------------------------------------------------
# the command path: tracking, MONITOR, commandstats


def test_tracking_invalidates_keys_a_script_writes(server, r):
    t = server.raw()
    t.command("HELLO", "3")
    assert t.command("CLIENT", "TRACKING", "ON") == b"+OK\r\n"
    r.set("tk", "1")
    assert t.command("GET", "tk") == b"$1\r\n1\r\n"
    r.eval("return redis.call('set', KEYS[1], '2')", 1, "tk")
    got = t.read_available(0.5)
    assert b"invalidate" in got and b"tk" in got, got
    # keys a script reads are tracked for the client that runs it
    r.set("tr", "1")
    t.command("EVAL", "return redis.call('get', KEYS[1])", "1", "tr")
    r.set("tr", "2")
    got = t.read_available(0.5)
    assert b"invalidate" in got and b"tr" in got, got
    t.close()


def test_monitor_shows_script_commands(server, r):
    mon = server.raw()
    assert mon.command("MONITOR") == b"+OK\r\n"
    r.eval("redis.call('set', KEYS[1], 'v'); return redis.call('get', KEYS[1])", 1, "mk")
    lines = [mon.read_line(5) for _ in range(3)]
    assert b'"eval"' in lines[0].lower() and b'"mk"' in lines[0], lines
    assert b'[0 lua] "set" "mk" "v"' in lines[1], lines
    assert b'[0 lua] "get" "mk"' in lines[2], lines
    mon.close()


def test_commandstats_count_script_commands(r):
    r.config_resetstat()
    r.eval("redis.call('set', 'cs', '1'); redis.call('get', 'cs'); return 1", 0)
    stats = r.info("commandstats")
    assert stats["cmdstat_eval"]["calls"] == 1
    assert stats["cmdstat_set"]["calls"] == 1
    assert stats["cmdstat_get"]["calls"] == 1
