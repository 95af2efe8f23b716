"""Hash field expiry (Redis 7.4): HEXPIRE HPEXPIRE HEXPIREAT HPEXPIREAT HTTL HPTTL HEXPIRETIME
HPEXPIRETIME HPERSIST.

The installed redis-server is 7.0, which has none of these commands, so every test here is
cairn_only; the replies, codes and error texts were checked against Redis's source
(src/t_hash.c: hexpireGenericCommand, httlGenericCommand, hpersistCommand).
"""

import time

import pytest

pytestmark = [
    pytest.mark.redis_only,
    pytest.mark.cairn_only,  # Redis 7.4 commands; the reference redis-server here is 7.0
]

WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"


def hexpire(r, *args):
    return r.execute_command("HEXPIRE", *args)


def test_codes_per_field(r):
    r.hset("h", mapping={"a": "1", "b": "2", "c": "3"})
    assert hexpire(r, "h", 100, "FIELDS", 3, "a", "b", "nope") == [1, 1, -2]
    assert r.execute_command("HTTL", "h", "FIELDS", 3, "a", "c", "nope") == [100, -1, -2]
    pttl = r.execute_command("HPTTL", "h", "FIELDS", 1, "a")[0]
    assert 99_000 < pttl <= 100_000
    at = r.execute_command("HEXPIRETIME", "h", "FIELDS", 1, "b")[0]
    assert abs(at - (time.time() + 100)) < 3
    pat = r.execute_command("HPEXPIRETIME", "h", "FIELDS", 2, "b", "c")
    assert abs(pat[0] - (time.time() + 100) * 1000) < 3000 and pat[1] == -1
    assert r.execute_command("HPERSIST", "h", "FIELDS", 3, "a", "c", "nope") == [1, -1, -2]
    assert r.execute_command("HTTL", "h", "FIELDS", 2, "a", "b") == [-1, 100]
    # A key that does not exist: -2 for every field.
    assert hexpire(r, "missing", 10, "FIELDS", 2, "a", "b") == [-2, -2]
    assert r.execute_command("HTTL", "missing", "FIELDS", 1, "a") == [-2]
    assert r.execute_command("HPERSIST", "missing", "FIELDS", 1, "a") == [-2]
    assert r.hgetall("h") == {b"a": b"1", b"b": b"2", b"c": b"3"}


def test_conditions_nx_xx_gt_lt(r):
    r.hset("h", mapping={"a": "1", "b": "2"})
    assert hexpire(r, "h", 100, "NX", "FIELDS", 2, "a", "b") == [1, 1]
    assert hexpire(r, "h", 200, "NX", "FIELDS", 1, "a") == [0]
    r.hset("h", "c", "3")
    assert hexpire(r, "h", 200, "XX", "FIELDS", 2, "a", "c") == [1, 0]
    assert hexpire(r, "h", 50, "GT", "FIELDS", 2, "a", "c") == [0, 0]
    assert hexpire(r, "h", 300, "GT", "FIELDS", 1, "a") == [1]
    # No deadline counts as an infinite one: LT sets it, GT does not.
    assert hexpire(r, "h", 50, "LT", "FIELDS", 3, "a", "b", "c") == [1, 1, 1]
    assert hexpire(r, "h", 60, "LT", "FIELDS", 1, "a") == [0]
    assert r.execute_command("HTTL", "h", "FIELDS", 3, "a", "b", "c") == [50, 50, 50]


def test_a_deadline_not_in_the_future_deletes_the_field(r):
    r.hset("h", mapping={"a": "1", "b": "2"})
    assert hexpire(r, "h", 0, "FIELDS", 1, "a") == [2]
    assert r.hgetall("h") == {b"b": b"2"}
    assert r.execute_command("HPEXPIREAT", "h", 1000, "FIELDS", 1, "b") == [2]
    assert r.exists("h") == 0


def test_fields_expire_lazily_and_actively(r):
    r.hset("h", mapping={"a": "1", "b": "2", "c": "3"})
    assert r.execute_command("HPEXPIRE", "h", 100, "FIELDS", 2, "a", "b") == [1, 1]
    time.sleep(0.15)
    # Readers never see an expired field, whether or not it was removed yet.
    assert r.hget("h", "a") is None
    assert r.hgetall("h") == {b"c": b"3"}
    assert r.hlen("h") == 1
    assert r.execute_command("HTTL", "h", "FIELDS", 1, "a") == [-2]
    # A hash whose last field expires disappears without anyone touching it.
    r.hset("gone", mapping={"x": "1", "y": "2"})
    assert r.execute_command("HPEXPIRE", "gone", 100, "FIELDS", 2, "x", "y") == [1, 1]
    deadline = time.time() + 3
    while r.exists("gone") and time.time() < deadline:
        time.sleep(0.05)
    assert r.exists("gone") == 0
    assert r.info("stats")["expired_subkeys"] >= 2


def test_writes_and_deadlines(r):
    r.hset("h", mapping={"a": "1", "n": "5"})
    hexpire(r, "h", 100, "FIELDS", 2, "a", "n")
    # HINCRBY keeps the field's deadline, HSET drops it (as Redis).
    assert r.hincrby("h", "n", 1) == 6
    assert r.execute_command("HTTL", "h", "FIELDS", 1, "n") == [100]
    r.hset("h", "a", "2")
    assert r.execute_command("HTTL", "h", "FIELDS", 1, "a") == [-1]
    # HDEL keeps the other fields' deadlines; a key-level deadline is separate.
    r.hset("h", "b", "3")
    hexpire(r, "h", 100, "FIELDS", 1, "b")
    assert r.hdel("h", "a") == 1
    assert r.execute_command("HTTL", "h", "FIELDS", 2, "b", "n") == [100, 100]
    assert r.ttl("h") == -1
    # RENAME and COPY carry the field deadlines with the value.
    r.rename("h", "h2")
    assert r.execute_command("HTTL", "h2", "FIELDS", 1, "b") == [100]
    r.copy("h2", "h3")
    assert r.execute_command("HTTL", "h3", "FIELDS", 1, "n") == [100]


def test_errors(r):
    r.set("s", "x")
    r.hset("h", "a", "1")
    assert r.execute_command("HPEXPIRE", "h", 10, "FIELDS", 1, "a") == [1]
    with pytest.raises(Exception, match="WRONGTYPE"):
        hexpire(r, "s", 10, "FIELDS", 1, "a")
    with pytest.raises(Exception, match="WRONGTYPE"):
        r.execute_command("HTTL", "s", "FIELDS", 1, "a")
    with pytest.raises(Exception, match="WRONGTYPE"):
        r.execute_command("HPERSIST", "s", "FIELDS", 1, "a")
    cases = [
        (("HEXPIRE", "h", "x", "FIELDS", 1, "a"), "value is not an integer or out of range"),
        (("HEXPIRE", "h", -1, "FIELDS", 1, "a"), "invalid expire time, must be >= 0"),
        (("HEXPIRE", "h", 2**60, "FIELDS", 1, "a"), "invalid expire time in 'hexpire' command"),
        (("HPEXPIREAT", "h", 2**48, "FIELDS", 1, "a"), "invalid expire time in 'hpexpireat' command"),
        (("HEXPIRE", "h", 10, "NOPE", 1, "a"), "Mandatory argument FIELDS is missing or not at the right position"),
        (("HEXPIRE", "h", 10, "FIELDS", 0, "a"), "Parameter `numFields` should be greater than 0"),
        (("HEXPIRE", "h", 10, "FIELDS", 2, "a"), "The `numfields` parameter must match the number of arguments"),
        (("HEXPIRE", "h", 10, "NX", "FIELDS", 1, "a", "b"), "The `numfields` parameter must match the number of arguments"),
        (("HTTL", "h", "FIELDS", "x", "a"), "Number of fields must be a positive integer"),
        (("HTTL", "h", "FELDS", 1, "a"), "Mandatory argument FIELDS is missing or not at the right position"),
        (("HPERSIST", "h", "FIELDS", 3, "a"), "The `numfields` parameter must match the number of arguments"),
        (("HEXPIRE", "h", 10, "FIELDS", 1), "wrong number of arguments for 'hexpire' command"),
        (("HTTL", "h", "FIELDS", 1), "wrong number of arguments for 'httl' command"),
    ]
    for args, text in cases:
        with pytest.raises(Exception) as e:
            r.execute_command(*args)
        assert text in str(e.value), (args, str(e.value))
    # A refused command changed nothing.
    assert 0 < r.execute_command("HPTTL", "h", "FIELDS", 1, "a")[0] <= 10


def test_deadlines_survive_a_snapshot_reload(r):
    r.hset("h", mapping={"a": "1", "b": "2"})
    hexpire(r, "h", 100, "FIELDS", 1, "a")
    r.hset("soon", mapping={"x": "1", "y": "2"})
    r.execute_command("HPEXPIRE", "soon", 200, "FIELDS", 1, "x")
    assert r.execute_command("DEBUG", "RELOAD") == b"OK"
    assert r.execute_command("HTTL", "h", "FIELDS", 2, "a", "b") == [100, -1]
    assert r.hgetall("h") == {b"a": b"1", b"b": b"2"}
    time.sleep(0.25)
    assert r.hgetall("soon") == {b"y": b"2"}


def test_info_reports_redis_7_4(r):
    assert r.info("server")["redis_version"].startswith("7.4")
