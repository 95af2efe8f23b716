"""Replication (issue 14): a primary pushes every change to its replicas (REPLICAOF, PSYNC,
full sync from a streamed snapshot, the change stream, +CONTINUE from the backlog), WAIT,
ROLE, INFO replication, CLIENT KILL TYPE master, read-only replicas, chained replicas,
promotion. Tests that use only Redis's commands also run with CAIRN_TARGET=redis; those that
use cairn's own (SQL, tags, memcached, internal stream commands) are cairn_only.
"""

import time

import pytest

from conftest import HOST, TARGET
from kit import wait_until

CAIRN = TARGET == "cairn"
pytestmark = pytest.mark.redis_only


def info(c, section="replication"):
    return {k: v for k, v in c.info(section).items()}


def wait_for(pred, timeout=10.0, what="condition"):
    wait_until(pred, timeout, interval=0.02, msg=what)


def fill(c, prefix, n):
    """Writes keys prefix0 .. prefix{n-1}, each holding its number, 1,000 a command."""
    pipe = c.pipeline(transaction=False)
    for start in range(0, n, 1000):
        pipe.mset({f"{prefix}{i}": i for i in range(start, start + 1000)})
    pipe.execute()


def link_up(c):
    return info(c).get("master_link_status") == "up"


def start_replica(server_factory, primary, *args):
    rep = server_factory(*args)
    c = rep.client()
    c.replicaof(HOST, primary.port)
    wait_for(lambda: link_up(c), what="the replica's link")
    return rep, c


def pair(server_factory, *primary_args):
    p = server_factory(*primary_args)
    pc = p.client()
    rep, rc = start_replica(server_factory, p)
    return p, pc, rep, rc


def test_wait_role_info_and_read_only_replica(server_factory):
    p, pc, rep, rc = pair(server_factory)
    pc.set("k", "v")
    assert pc.execute_command("WAIT", 1, 5000) == 1
    assert rc.get("k") == b"v"
    role = pc.execute_command("ROLE")
    assert role[0] == b"master" and len(role[2]) == 1
    assert int(role[2][0][1]) == rep.port
    rrole = rc.execute_command("ROLE")
    assert rrole[0] in (b"slave", b"replica") and rrole[2] == p.port and rrole[3] == b"connected"
    pi, ri = info(pc), info(rc)
    assert pi["role"] == "master" and pi["connected_slaves"] == 1
    assert pi["slave0"]["state"] == "online" and pi["slave0"]["port"] == rep.port
    assert ri["role"] == "slave" and ri["master_port"] == p.port
    assert ri["master_sync_in_progress"] == 0 and ri["slave_read_only"] == 1
    assert ri["master_replid"] == pi["master_replid"] and len(pi["master_replid"]) == 40
    wait_for(lambda: info(rc)["slave_repl_offset"] == info(pc)["master_repl_offset"], what="offsets")
    # Writes on a read-only replica are refused; reads are served.
    with pytest.raises(Exception, match="read only replica"):
        rc.set("x", "1")
    assert any("S" in c["flags"] for c in pc.client_list())
    assert any("M" in c["flags"] for c in rc.client_list())
    # WAIT on a replica is an error; WAIT 0 answers at once.
    with pytest.raises(Exception, match="WAIT cannot be used with replica instances"):
        rc.execute_command("WAIT", 1, 10)
    assert pc.execute_command("WAIT", 0, 0) in (0, 1)
    # WAIT for more replicas than there are times out with how many acknowledged.
    t0 = time.monotonic()
    pc.set("k2", "v2")
    assert pc.execute_command("WAIT", 2, 300) == 1
    assert time.monotonic() - t0 >= 0.25


def test_tracking_on_a_replica_is_invalidated_by_the_primarys_write(server_factory):
    p, pc, rep, rc = pair(server_factory)
    pc.set("k", "1")
    pc.execute_command("WAIT", 1, 5000)
    t = rep.raw()
    t.send(b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n")
    t.read_until(b"proto")
    t.read_available(0.2)
    t.send(b"*3\r\n$6\r\nCLIENT\r\n$8\r\nTRACKING\r\n$2\r\nON\r\n")
    assert t.read_until(b"\r\n").startswith(b"+OK")
    t.send(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n")
    assert t.read_until(b"$1\r\n1\r\n").endswith(b"$1\r\n1\r\n")
    pc.set("k", "2")
    got = t.read_until(b"invalidate", timeout=5)
    assert b"invalidate" in got
    got += t.read_available(0.2)
    assert b"$1\r\nk\r\n" in got
    t.close()


def test_link_drop_resumes_with_continue(server_factory):
    p, pc, rep, rc = pair(server_factory)
    pc.set("a", "1")
    pc.execute_command("WAIT", 1, 5000)
    before = info(pc, "stats")
    full = before["sync_full"]
    assert rc.client_kill_filter(_type="master") == 1
    pc.set("b", "2")
    wait_for(lambda: info(pc, "stats")["sync_partial_ok"] > before["sync_partial_ok"], what="+CONTINUE")
    assert pc.execute_command("WAIT", 1, 5000) == 1
    assert rc.get("b") == b"2"
    # The primary's side drops it too (CLIENT KILL TYPE replica): it comes back the same way.
    ok = info(pc, "stats")["sync_partial_ok"]
    assert pc.execute_command("CLIENT", "KILL", "TYPE", "replica") == 1
    pc.set("c", "3")
    wait_for(lambda: info(pc, "stats")["sync_partial_ok"] > ok, what="+CONTINUE after CLIENT KILL TYPE replica")
    assert pc.execute_command("WAIT", 1, 5000) == 1
    assert rc.get("c") == b"3"
    assert info(pc, "stats")["sync_full"] == full


def test_backlog_overflow_falls_back_to_a_full_sync(server_factory):
    p, pc, rep, rc = pair(server_factory, "--repl-backlog-size", "16kb")
    pc.set("a", "1")
    pc.execute_command("WAIT", 1, 5000)
    # The replica stops; meanwhile the primary writes far more than its backlog holds.
    rep.kill()
    stats = info(pc, "stats")
    pipe = pc.pipeline(transaction=False)
    for i in range(2000):
        pipe.set(f"k{i}", "x" * 100)
    pipe.execute()
    rep2, rc2 = start_replica(server_factory, p)
    assert pc.execute_command("WAIT", 1, 5000) == 1
    assert rc2.dbsize() == pc.dbsize() == 2001
    assert info(pc, "stats")["sync_full"] == stats["sync_full"] + 1


def restart_and_continue(pc, rep, why):
    """Restarts the killed replica `rep`, waits until the primary `pc` has it in step, and checks
    that it resumed with +CONTINUE (a partial sync, no full one); returns its client."""
    stats = info(pc, "stats")
    rep.stopped = False
    rep.start()
    rc = rep.client()
    wait_for(lambda: link_up(rc), what="the restarted replica's link")
    assert pc.execute_command("WAIT", 1, 5000) == 1
    after = info(pc, "stats")
    assert after["sync_partial_ok"] == stats["sync_partial_ok"] + 1, why
    assert after["sync_full"] == stats["sync_full"]
    return rc


def test_kill9_of_a_replica_then_restart_continues_from_its_snapshot(server_factory):
    p = server_factory()
    pc = p.client()
    rep = server_factory("--replicaof", f"{HOST} {p.port}")
    rc = rep.client()
    wait_for(lambda: link_up(rc), what="the replica's link")
    pipe = pc.pipeline(transaction=False)
    for i in range(5000):
        pipe.set(f"k{i}", i)
    pipe.execute()
    assert pc.execute_command("WAIT", 1, 5000) == 1
    rc.save()
    pc.set("after-save", "1")
    pc.execute_command("WAIT", 1, 5000)
    rep.kill()  # kill -9, mid-stream for the writes that follow
    for i in range(1000):
        pc.set(f"late{i}", i)
    rc = restart_and_continue(pc, rep, "continued from its snapshot")
    assert rc.dbsize() == pc.dbsize() == 6001
    assert rc.get("late999") == b"999" and rc.get("after-save") == b"1"


def test_config_set_repl_backlog_size_resizes_the_backlog_live(server_factory):
    """CONFIG SET repl-backlog-size takes effect at once, keeping the newest bytes: grown from
    16 kB to 1 MB, it holds the ~200 kB written while a replica was down, which then continues
    (+CONTINUE) instead of a full sync; shrunk back, it keeps its newest 16 kB."""
    p = server_factory("--repl-backlog-size", "16kb")
    pc = p.client()
    rep = server_factory("--replicaof", f"{HOST} {p.port}")
    rc = rep.client()
    wait_for(lambda: link_up(rc), what="the replica's link")
    pc.set("before", "1")
    assert pc.execute_command("WAIT", 1, 5000) == 1
    rc.save()
    rep.kill()
    pc.config_set("repl-backlog-size", "1mb")
    assert info(pc)["repl_backlog_size"] == 1 << 20
    pipe = pc.pipeline(transaction=False)
    for i in range(2000):
        pipe.set(f"k{i}", "x" * 100)
    pipe.execute()
    held = info(pc)
    assert held["repl_backlog_histlen"] > 200_000
    assert held["repl_backlog_first_byte_offset"] < held["master_repl_offset"] - 200_000
    rc = restart_and_continue(pc, rep, "continued from the backlog")
    assert rc.dbsize() == pc.dbsize() == 2001
    pc.config_set("repl-backlog-size", "16kb")
    shrunk = info(pc)
    assert shrunk["repl_backlog_size"] == shrunk["repl_backlog_histlen"] == 16384
    assert shrunk["repl_backlog_first_byte_offset"] == shrunk["master_repl_offset"] - 16384 + 1
    pc.set("after", "2")
    assert pc.execute_command("WAIT", 1, 5000) == 1
    assert rc.get("after") == b"2"


def test_replicaof_no_one_promotes_and_a_chained_replica_follows(server_factory):
    p, pc, r1, r1c = pair(server_factory)
    # r2 replicates r1 (a chain): it gets the primary's stream through r1.
    r2, r2c = start_replica(server_factory, r1)
    pc.set("x", "1")
    pc.execute_command("WAIT", 1, 5000)
    wait_for(lambda: r2c.get("x") == b"1", what="the chained replica")
    assert info(r2c)["master_replid"] == info(pc)["master_replid"]
    old_id = info(r1c)["master_replid"]
    assert r1c.replicaof("NO", "ONE")
    r1i = info(r1c)
    assert r1i["role"] == "master" and r1i["master_replid2"] == old_id
    r1c.set("y", "2")
    wait_for(lambda: r2c.get("y") == b"2", what="the promoted primary's write at its replica")
    assert r2c.get("x") == b"1"
    with pytest.raises(Exception, match="read only replica"):
        r2c.set("z", "1")


def test_min_replicas_to_write(server_factory):
    p, pc, rep, rc = pair(server_factory, "--min-replicas-to-write", "1", "--min-replicas-max-lag", "10")
    wait_for(lambda: pc.set("k", "v") is True, what="a write with a good replica")
    pc.config_set("min-replicas-to-write", "2")
    with pytest.raises(Exception, match="Not enough good replicas to write"):
        pc.set("k", "v")
    assert pc.get("k") == b"v"


@pytest.mark.cairn_only
def test_two_replicas_equal_the_primary_after_100k_writes(server_factory):
    """Both protocols, typed tags, TTLs, memcached flags, collections, SQL, evictions: after
    WAIT 2 the replicas hold what the primary holds."""
    p = server_factory()
    pc = p.client()
    reps = [start_replica(server_factory, p) for _ in range(2)]
    pc.execute_command("SQL.EXEC", "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)")
    pc.execute_command("SQL.EXEC", "CREATE TABLE capped (id INTEGER PRIMARY KEY)")
    pc.execute_command("SQL.EXPIRE", "capped", "ROWS", 50)
    t0 = time.monotonic()
    pipe = pc.pipeline(transaction=False)
    n = 0
    for i in range(50000):
        if i % 4 == 0:
            pipe.set(f"s{i}", f"v{i}", ex=1000)
        else:
            pipe.set(f"s{i}", f"v{i}")
        n += 1
    for i in range(10000):
        pipe.hset(f"h{i % 2000}", f"f{i}", i)
        pipe.execute_command("TAG.SET", f"t{i}", f"tv{i}", "TAG", 1, i % 50, "TAG", 2, i % 7)
        n += 2
    for i in range(5000):
        pipe.sadd(f"set{i % 100}", i)
        pipe.zadd(f"z{i % 100}", {f"m{i}": i})
        pipe.rpush(f"l{i % 100}", i)
        n += 3
    for i in range(5000):
        pipe.delete(f"s{i * 3}")
        pipe.incr(f"n{i % 10}")
        pipe.expire(f"s{i * 3 + 1}", 500)
        n += 3
    pipe.execute()
    mc = p.mc()
    batch = {}
    for i in range(10000):
        batch[f"mc{i}"] = f"m{i}"
        if len(batch) == 1000:
            mc.set_many(batch, expire=2000 if i % 2 else 0)
            batch = {}
        n += 1
    mc.set("flagged", b"x", noreply=False)
    mc.close()
    for i in range(200):
        pc.execute_command("SQL.EXEC", "INSERT INTO t VALUES (?, ?)", i, f"name{i}")
        n += 1
    pc.execute_command("SQL.EXEC", "DELETE FROM t WHERE id < 10")
    for i in range(120):
        pc.execute_command("SQL.EXEC", "INSERT INTO capped VALUES (?)", i)
        n += 1
    writes_s = time.monotonic() - t0
    assert n >= 100000
    t1 = time.monotonic()
    assert pc.execute_command("WAIT", 2, 20000) == 2
    wait_s = time.monotonic() - t1
    print(f"{n} writes in {writes_s:.2f}s; WAIT 2 after {wait_s:.2f}s")
    keys = sorted(pc.keys("*"))
    strings = [k for k in keys if k[:1] in (b"s", b"m", b"t", b"n", b"f") and not k.startswith(b"set")]
    string_set = set(strings)
    others = [k for k in keys if k not in string_set]

    def values(c, ks):
        pipe = c.pipeline(transaction=False)
        for k in ks:
            if k.startswith(b"h"):
                pipe.hgetall(k)
            elif k.startswith(b"set"):
                pipe.smembers(k)
            elif k.startswith(b"z"):
                pipe.zrange(k, 0, -1, withscores=True)
            else:
                pipe.lrange(k, 0, -1)
        return pipe.execute()

    def ttls(c):
        pipe = c.pipeline(transaction=False)
        for k in keys:
            pipe.pttl(k)
        return pipe.execute()

    for rep, rc in reps:
        assert rc.dbsize() == pc.dbsize() == len(keys)
        for start in range(0, len(strings), 5000):
            chunk = strings[start:start + 5000]
            assert rc.mget(chunk) == pc.mget(chunk)
        assert values(rc, others) == values(pc, others)
        # Deadlines are absolute: the same on both, give or take a second plus the time the
        # two reads of every key's TTL took (seconds on a loaded machine).
        t0 = time.monotonic()
        on_primary, on_replica = ttls(pc), ttls(rc)
        slack = 1000 + (time.monotonic() - t0) * 1000
        for k, a, b in zip(keys, on_primary, on_replica):
            assert (a < 0) == (b < 0) and abs(a - b) <= slack, (k, a, b)
        for typ, value in [(1, 3), (2, 5), (1, 49)]:
            q = ["WHERE", typ, "=", value]
            assert rc.execute_command("TAG.COUNT", *q) == pc.execute_command("TAG.COUNT", *q) > 0
        q = ["SELECT id, name FROM t ORDER BY id"]
        assert rc.execute_command("SQL.QUERY", *q) == pc.execute_command("SQL.QUERY", *q)
        # The expiry rule replicates, and the rows it removed on the primary go here too.
        q = ["SELECT id FROM capped ORDER BY id"]
        rows = pc.execute_command("SQL.QUERY", *q)
        assert rc.execute_command("SQL.QUERY", *q) == rows and 0 < len(rows) <= 60
        # memcached flags and CAS are the primary's.
        for key in (b"mc5", b"flagged"):
            assert rc.execute_command("GET", key) == pc.execute_command("GET", key)
    # FLUSHALL reaches the replicas too.
    pc.flushall()
    assert pc.execute_command("WAIT", 2, 5000) == 2
    assert [rc.dbsize() for _, rc in reps] == [0, 0]


@pytest.mark.cairn_only
def test_memcached_reads_and_writes_on_a_replica(server_factory):
    p, pc, rep, rc = pair(server_factory)
    mc = p.mc()
    mc.set("m", b"v", expire=100, noreply=False)
    mc.close()
    pc.execute_command("WAIT", 1, 5000)
    raw = rep.mc_raw()
    raw.send(b"gets m\r\n")
    got = raw.read_until(b"END\r\n")
    pcas = p.mc_raw()
    pcas.send(b"gets m\r\n")
    assert got == pcas.read_until(b"END\r\n"), "same value, flags and CAS"
    raw.send(b"set m 0 0 1\r\nx\r\n")
    line = raw.read_until(b"\r\n")
    assert line.startswith(b"SERVER_ERROR") and b"READONLY" in line, line
    raw.close()
    pcas.close()


@pytest.mark.cairn_only
def test_stream_commands_are_refused_to_clients(server_factory):
    p = server_factory()
    pc = p.client()
    for cmd in (["REPL.DEL", "0", "1", "k"], ["REPL.FLUSH", "1"]):
        with pytest.raises(Exception, match="unknown command"):
            pc.execute_command(*cmd)


def test_a_replica_without_its_primary_serves_stale_data_or_masterdown(server_factory):
    from conftest import free_port

    rep = server_factory()
    rc = rep.client()
    rc.set("k", "v")
    rc.replicaof(HOST, free_port())  # nobody listens there: the link stays down
    wait_for(lambda: info(rc)["role"] == "slave", what="the replica role")
    assert info(rc)["master_link_status"] == "down"
    assert rc.get("k") == b"v", "replica-serve-stale-data yes: reads are served"
    rc.config_set("replica-serve-stale-data", "no")
    with pytest.raises(Exception, match="MASTERDOWN"):
        rc.get("k")
    assert info(rc)["role"] == "slave", "stale commands (INFO) still run"
    assert rc.replicaof("NO", "ONE")
    assert rc.get("k") == b"v"


def test_expirations_and_evictions_reach_replicas_as_deletions(server_factory):
    p, pc, rep, rc = pair(server_factory, "--maxmemory", "4mb", "--maxmemory-policy", "allkeys-lru")
    pc.set("short", "v", px=150)
    pc.set("long", "v", ex=100)
    assert pc.execute_command("WAIT", 1, 5000) == 1
    assert rc.get("short") == b"v" and 0 < rc.pttl("short") <= 150
    # The primary expires it (actively, or on this access): the replica's copy goes with it.
    wait_for(lambda: pc.get("short") is None, what="the expiry on the primary")
    assert pc.execute_command("WAIT", 1, 5000) == 1
    wait_for(lambda: rc.dbsize() == 1, what="the deletion at the replica")
    assert rc.get("short") is None and rc.get("long") == b"v"
    # Evictions: the primary stays under its limit, the replica holds exactly what it holds.
    pipe = pc.pipeline(transaction=False)
    for i in range(20000):
        pipe.set(f"k{i}", "x" * 400)
    pipe.execute()
    assert info(pc, "stats")["evicted_keys"] > 0
    assert pc.execute_command("WAIT", 1, 5000) == 1
    wait_for(lambda: rc.dbsize() == pc.dbsize(), what="the evictions at the replica")
    keys = pc.keys("*")
    assert sorted(rc.keys("*")) == sorted(keys)


def test_a_replica_authenticates_with_masterauth(server_factory):
    p = server_factory("--requirepass", "s3cret")
    pc = p.client(password="s3cret")
    pc.set("k", "v")
    rep = server_factory("--masterauth", "s3cret")
    rc = rep.client()
    rc.replicaof(HOST, p.port)
    wait_for(lambda: link_up(rc), what="the authenticated link")
    wait_for(lambda: rc.get("k") == b"v", what="the data")


def test_a_full_sync_under_concurrent_writes_converges(server_factory):
    """Writes racing the snapshot's dump are in both the snapshot and the stream: each is
    applied once, and the replica ends equal to the primary."""
    import random
    import threading

    p = server_factory()
    pc = p.client()
    pipe = pc.pipeline(transaction=False)
    for i in range(50000):
        pipe.set(f"k{i}", i)
    pipe.execute()
    stop = threading.Event()

    def writer():
        w = p.client()
        rnd = random.Random(7)
        while not stop.is_set():
            pipe = w.pipeline(transaction=False)
            for _ in range(200):
                k = f"k{rnd.randrange(60000)}"
                op = rnd.randrange(4)
                if op == 0:
                    pipe.delete(k)
                elif op == 1:
                    pipe.incr(f"n{rnd.randrange(100)}")
                elif op == 2:
                    pipe.set(k, rnd.randrange(10**9), ex=1000)
                else:
                    pipe.append(k, "x")
            pipe.execute()
        w.close()

    t = threading.Thread(target=writer)
    t.start()
    try:
        rep, rc = start_replica(server_factory, p)
        time.sleep(0.3)
    finally:
        stop.set()
        t.join()
    assert pc.execute_command("WAIT", 1, 10000) == 1
    keys = sorted(pc.keys("*"))
    assert rc.dbsize() == len(keys)
    for start in range(0, len(keys), 5000):
        chunk = keys[start:start + 5000]
        assert rc.mget(chunk) == pc.mget(chunk)


@pytest.mark.cairn_only
def test_a_full_sync_copying_shards_in_parts_under_writes_converges(server_factory):
    """With --threads 1 (64 shards) and 400k keys a shard holds ~6k records: a primary's full
    sync copies it in parts (SYNC_PART records under the lock at a time), and writes land
    between two parts of a shard (new keys that grow its table, deletions, appends, deadlines).
    The replica replays those made after the cut of their key's part (META's part cuts) and
    skips the others: it ends equal to the primary, deadlines included."""
    import random
    import threading

    p = server_factory("--threads", "1")
    pc = p.client()
    n = 400_000
    fill(pc, "p", n)
    stop = threading.Event()
    wrote = []

    def writer():
        w = p.client()
        rnd = random.Random(11)
        fresh = 0
        while not stop.is_set():
            pipe = w.pipeline(transaction=False)
            for _ in range(500):
                op = rnd.randrange(5)
                k = f"p{rnd.randrange(n)}"
                if op == 0:
                    pipe.delete(k)
                elif op == 1:
                    pipe.set(f"new{fresh}", fresh)
                    fresh += 1
                elif op == 2:
                    pipe.append(k, "x")
                elif op == 3:
                    pipe.expire(k, 1000 + rnd.randrange(1000))
                else:
                    pipe.incr(f"c{rnd.randrange(50)}")
            pipe.execute()
            wrote.append(1)
        w.close()

    t = threading.Thread(target=writer)
    t.start()
    try:
        wait_for(lambda: len(wrote) > 5, what="the writer")
        rep, rc = start_replica(server_factory, p)
        wait_for(lambda: info(rc).get("master_sync_in_progress") == 0, timeout=60,
                 what="the sync's end")
        time.sleep(0.3)
    finally:
        stop.set()
        t.join()
    assert info(pc, "stats")["sync_full"] == 1
    assert pc.execute_command("WAIT", 1, 10000) == 1
    keys = sorted(pc.keys("*"))
    assert len(keys) > n // 2
    assert rc.dbsize() == len(keys)
    for start in range(0, len(keys), 5000):
        chunk = keys[start:start + 5000]
        assert rc.mget(chunk) == pc.mget(chunk)
        pipe_p, pipe_r = pc.pipeline(transaction=False), rc.pipeline(transaction=False)
        for k in chunk[::50]:
            pipe_p.pexpiretime(k)
            pipe_r.pexpiretime(k)
        assert pipe_r.execute() == pipe_p.execute()


def _poll_never_lower(port, keys, results, seconds_after_sync=1.0):
    """Polls `keys` on the server at `port` until its sync ended `seconds_after_sync` ago;
    puts (polls, the reads that went back: (key, before, after))."""
    import redis

    r = redis.Redis(host=HOST, port=port)
    last, decreases, polls, ended = {}, [], 0, None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            values = r.mget(keys)
            polls += 1
            if polls % 200 == 0 and ended is None:
                rinfo = r.info("replication")
                if rinfo.get("master_link_status") == "up" and not rinfo.get(
                        "master_sync_in_progress"):
                    ended = time.monotonic()
        except redis.exceptions.RedisError:  # -LOADING while the snapshot loads
            continue
        for k, v in zip(keys, values):
            if v is not None:
                v = int(v)
                if v < last.get(k, 0):
                    decreases.append((k, last[k], v))
                last[k] = v
        if ended is not None and time.monotonic() - ended > seconds_after_sync:
            break
    results.put((polls, decreases))


@pytest.mark.cairn_only
def test_a_replica_never_reads_a_counter_going_back_after_a_full_sync_in_parts(server_factory):
    """2M keys on 64 shards: each shard is copied in 8 parts. Counters incremented all
    along land in the copy with the value they had when their own part was copied; the
    stream records of the same shard between its first part and that part are already in
    it, and the replica skips them (each part has its own cut). Replaying them instead
    would take a counter back by the increments made while its shard was being copied. A
    reader polls the replica from before the sync to the end and sees no counter decrease;
    the replica ends equal to the primary."""
    import multiprocessing
    import threading

    # The stream of the writes made during the sync waits in the backlog: room for all.
    p = server_factory("--threads", "1", "--repl-backlog-size", "256mb")
    pc = p.client()
    n = 2_000_000
    fill(pc, "f", n)
    counters = [f"c{i}" for i in range(16)]
    pc.mset({c: 0 for c in counters})
    stop = threading.Event()
    wrote = []

    def writer():
        w = p.client()
        while not stop.is_set():
            pipe = w.pipeline(transaction=False)
            for i in range(400):
                pipe.incr(counters[i % len(counters)])
            pipe.execute()
            wrote.append(1)
        w.close()

    rep = server_factory()
    rc = rep.client()

    # The reader is a process of its own: polls as fast as a client can, not sharing the
    # writer's interpreter lock (a replayed record stays for well under a millisecond).
    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()
    reading = ctx.Process(target=_poll_never_lower, args=(rep.port, counters, results))
    reading.start()
    threads = [threading.Thread(target=writer)]
    for t in threads:
        t.start()
    try:
        wait_for(lambda: len(wrote) > 5, what="the writer")
        rc.replicaof(HOST, p.port)
        wait_for(lambda: link_up(rc), timeout=60, what="the replica's link")
        wait_for(lambda: info(rc).get("master_sync_in_progress") == 0, timeout=60,
                 what="the sync's end")
        time.sleep(1.0)
    finally:
        stop.set()
        for t in threads:
            t.join()
    polls, decreases = results.get(timeout=30)
    reading.join()
    assert info(pc, "stats")["sync_full"] == 1
    assert polls > 100
    assert decreases == [], f"{len(decreases)} reads went back, e.g. {decreases[:5]}"
    assert pc.execute_command("WAIT", 1, 10000) == 1
    assert rc.mget(counters) == pc.mget(counters)
    assert rc.dbsize() == pc.dbsize()


def test_repl_timeout_drops_a_silent_replica_on_both_sides(server_factory):
    """repl-timeout (Redis's meaning): a primary drops a replica that acknowledged nothing for
    that long, and the replica, once it runs again, reconnects and syncs."""
    import os
    import signal
    p, pc, rep, rc = pair(server_factory)
    assert pc.config_set("repl-timeout", "2")
    assert pc.config_get("repl-timeout") == {"repl-timeout": "2"}
    pc.set("a", "1")
    assert pc.execute_command("WAIT", 1, 5000) == 1
    os.kill(rep.proc.pid, signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        wait_for(lambda: info(pc)["connected_slaves"] == 0, timeout=10, what="the replica dropped")
        assert time.monotonic() - t0 >= 1.0, "dropped before it was silent for repl-timeout"
        pc.set("b", "2")
    finally:
        os.kill(rep.proc.pid, signal.SIGCONT)
    wait_for(lambda: info(pc)["connected_slaves"] == 1 and link_up(rc), timeout=20,
             what="the replica back")
    assert pc.execute_command("WAIT", 1, 5000) == 1
    assert rc.mget("a", "b") == [b"1", b"2"]


def test_replica_announce_ip_and_port_are_what_the_primary_shows(server_factory):
    """replica-announce-ip / -port (REPLCONF ip-address / listening-port): what the primary's
    INFO and ROLE show, and so what Sentinel discovers, instead of the connection's source."""
    p = server_factory()
    pc = p.client()
    rep = server_factory()
    rc = rep.client()
    assert rc.config_set("replica-announce-ip", "10.1.2.3")
    assert rc.config_set("replica-announce-port", "4242")
    assert rc.config_get("replica-announce-*") == {"replica-announce-ip": "10.1.2.3",
                                                    "replica-announce-port": "4242"}
    rc.replicaof(HOST, p.port)
    wait_for(lambda: link_up(rc), what="the replica's link")
    wait_for(lambda: info(pc).get("slave0", {}).get("state") == "online", what="online")
    s = info(pc)["slave0"]
    assert (s["ip"], s["port"]) == ("10.1.2.3", 4242)
    assert pc.execute_command("ROLE")[2][0][:2] == [b"10.1.2.3", b"4242"]


@pytest.mark.cairn_only
def test_the_replication_backlog_is_in_info_memory_and_memory_stats(server_factory):
    p, pc, rep, rc = pair(server_factory)
    pc.set("a", "1")
    assert pc.execute_command("WAIT", 1, 5000) == 1
    size = info(pc)["repl_backlog_size"]
    mem = info(pc, "memory")
    assert mem["mem_replication_backlog"] >= size
    assert mem["mem_repl_backlog"] >= size
    assert mem["used_memory"] >= size
    stats = pc.memory_stats()
    assert stats["replication.backlog"] >= size
    # A server that never had a replica (nor a primary) holds no ring.
    assert info(server_factory().client(), "memory")["mem_repl_backlog"] == 0


def test_a_replica_the_stream_outran_catches_up_from_the_backlog(server_factory):
    """A stopped replica's connection fills up (more than the 16 MiB a caught-up replica may
    have unsent): the primary stops posting to it and, once it runs again, feeds it from the
    backlog at its offset and then live again; nothing is missed or sent twice."""
    import os
    import signal
    p, pc, rep, rc = pair(server_factory, "--repl-backlog-size", "128mb")
    pc.set("first", "1")
    assert pc.execute_command("WAIT", 1, 5000) == 1
    partial = info(pc, "stats")["sync_partial_ok"]
    full = info(pc, "stats")["sync_full"]
    value = b"v" * 100_000
    os.kill(rep.proc.pid, signal.SIGSTOP)
    try:
        pipe = pc.pipeline(transaction=False)
        for i in range(400):  # 40 MB
            pipe.set(f"big:{i}", value + str(i).encode())
        pipe.execute()
        pc.incr("counter")
    finally:
        os.kill(rep.proc.pid, signal.SIGCONT)
    assert pc.execute_command("WAIT", 1, 20000) == 1
    assert info(pc, "stats")["sync_full"] == full and info(pc, "stats")["sync_partial_ok"] == partial
    assert rc.get("counter") == b"1"
    got = rc.mget([f"big:{i}" for i in range(400)])
    assert all(v == value + str(i).encode() for i, v in enumerate(got))
    pc.set("last", "2")
    assert pc.execute_command("WAIT", 1, 5000) == 1
    assert rc.get("last") == b"2"


def test_info_counts_the_bytes_sent_to_replicas_apart(server_factory):
    """INFO stats' total_net_repl_output_bytes counts what the primary wrote to replicas (the
    stream is mostly written straight from the writing thread), total_net_repl_input_bytes
    what a replica read from its primary; both are in the totals, as in Redis 7."""
    p, pc, rep, rc = pair(server_factory)
    assert info(server_factory().client(), "stats")["total_net_repl_output_bytes"] == 0
    value = b"x" * 1000
    pipe = pc.pipeline(transaction=False)
    for i in range(200):
        pipe.set(f"net:{i}", value)
    pipe.execute()
    assert pc.execute_command("WAIT", 1, 5000) == 1
    offset = info(pc)["master_repl_offset"]
    assert offset >= 200 * 1000
    ps, rs = info(pc, "stats"), info(rc, "stats")
    sent, received = ps["total_net_repl_output_bytes"], rs["total_net_repl_input_bytes"]
    assert sent >= offset and received >= offset, (sent, received, offset)
    assert ps["total_net_output_bytes"] >= sent
    # What the client was sent (a +OK per SET, INFO replies) is not counted as replication.
    assert ps["total_net_output_bytes"] - sent < 200 * 1000
    assert rs["total_net_input_bytes"] >= received
    assert ps["total_net_repl_input_bytes"] == 0


def test_info_instantaneous_repl_kbps_follow_the_stream(server_factory):
    """INFO stats' instantaneous_output_repl_kbps (primary) and instantaneous_input_repl_kbps
    (replica) are the replication link's recent rate, as in Redis 7, and are part of
    instantaneous_output_kbps / instantaneous_input_kbps; with nothing flowing they read 0."""
    p, pc, rep, rc = pair(server_factory)
    value = b"x" * 4000
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:
        pipe = pc.pipeline(transaction=False)
        for i in range(100):
            pipe.set(f"kbps:{i}", value)
        pipe.execute()
    ps, rs = info(pc, "stats"), info(rc, "stats")
    # 400 KB per pipeline for 1.5 s: well above 100 KB/s on any machine.
    assert ps["instantaneous_output_repl_kbps"] > 100, ps
    assert rs["instantaneous_input_repl_kbps"] > 100, rs
    assert ps["instantaneous_output_kbps"] >= ps["instantaneous_output_repl_kbps"]
    assert rs["instantaneous_input_kbps"] >= rs["instantaneous_input_repl_kbps"]
    assert ps["instantaneous_input_repl_kbps"] == 0
    assert rs["instantaneous_output_repl_kbps"] == 0
    # The rate is the mean of the last 1.6 s of samples: idle long enough, it falls to 0.
    wait_for(lambda: info(pc, "stats")["instantaneous_output_repl_kbps"] < 1, timeout=6,
             what="the rate to fall back")
