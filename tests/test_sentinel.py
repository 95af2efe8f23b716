"""Redis Sentinel, unmodified (Debian's redis-sentinel), fails a cairn primary over (issue 14).

Three sentinels (quorum 2) monitor a primary with two replicas. The primary is killed with
SIGKILL; a replica must be promoted within 30 s; a redis-py ``Sentinel(...).master_for()`` client
keeps writing through the failover (retrying while there is no primary) and reads its writes
back from the new primary; the old primary, restarted, is turned into a replica by the
sentinels (SLAVEOF inside MULTI/EXEC, CONFIG REWRITE, CLIENT KILL) and receives the new
primary's data. phpredis's RedisSentinel finds the primary too.

The same test runs against redis-server (CAIRN_TARGET=redis). Skipped when no sentinel binary
is installed (scripts/setup.sh installs the redis-sentinel package).
"""

import shutil
import subprocess
import time
from pathlib import Path

import pytest
import redis
from redis.sentinel import MasterNotFoundError, Sentinel

from conftest import HOST, _LOG_ROOT, _die_with_parent, free_port

pytestmark = pytest.mark.redis_only

MASTER = "mymaster"
PHP_DIR = Path(__file__).resolve().parent / "php"


def sentinel_command():
    exe = shutil.which("redis-sentinel")
    if exe:
        return [exe]
    pytest.skip("redis-sentinel not installed (Debian package redis-sentinel; scripts/setup.sh installs it)")


def wait_for(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if pred():
                return time.monotonic()
        except (redis.RedisError, OSError):
            pass
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


class Sentinels:
    """Three redis-sentinel processes monitoring one primary, each with its own config file."""

    def __init__(self, primary_port, count=3, quorum=2):
        self.cmd = sentinel_command()
        self.procs, self.ports, self.dirs = [], [], []
        for i in range(count):
            port = free_port()
            d = Path(tempfile_dir(f"sentinel{i}-"))
            conf = d / "sentinel.conf"
            conf.write_text(
                f"port {port}\nbind {HOST}\ndaemonize no\ndir {d}\nlogfile {d / 'sentinel.log'}\n"
                f"sentinel monitor {MASTER} {HOST} {primary_port} {quorum}\n"
                # Above Sentinel's 1 s PING period: at 1000 a sentinel that has just switched
                # to the promoted replica can mark it down before its first PING is answered and
                # fail over a second time (seen once in CI on the 2-core machine).
                f"sentinel down-after-milliseconds {MASTER} 2000\n"
                f"sentinel failover-timeout {MASTER} 6000\n"
                f"sentinel parallel-syncs {MASTER} 2\n"
            )
            proc = subprocess.Popen(self.cmd + [str(conf)], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=str(d),
                                    preexec_fn=_die_with_parent)
            self.procs.append(proc)
            self.ports.append(port)
            self.dirs.append(d)

    def client(self, i=0):
        return redis.Redis(host=HOST, port=self.ports[i], socket_timeout=5, decode_responses=True)

    def logs(self):
        out = []
        for d in self.dirs:
            try:
                out.append(f"--- {d}\n" + (d / "sentinel.log").read_text(errors="replace")[-3000:])
            except OSError:
                pass
        return "\n".join(out)

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def tempfile_dir(prefix):
    import tempfile

    return tempfile.mkdtemp(prefix=prefix, dir=_LOG_ROOT)


def master_port(sentinels, i=0):
    addr = sentinels.client(i).execute_command("SENTINEL", "get-master-addr-by-name", MASTER)
    return int(addr[1]) if addr else None


@pytest.fixture
def topology(server_factory):
    """A primary, two replicas, three sentinels that know all of them."""
    primary = server_factory(name="sentinel-primary")
    replicas = [server_factory(name=f"sentinel-replica{i}") for i in range(2)]
    for rep in replicas:
        rep.client().replicaof(HOST, primary.port)
    pc = primary.client()
    for rep in replicas:
        rc = rep.client()
        wait_for(lambda: rc.info("replication")["master_link_status"] == "up", 15, "the replicas' links")
    sentinels = Sentinels(primary.port)
    try:
        s0 = sentinels.client()
        wait_for(lambda: s0.ping(), 10, "sentinel up")
        # Every sentinel has found both replicas (INFO of the primary) and the two other
        # sentinels (__sentinel__:hello): only then can they agree on a failover.
        def ready():
            for i in range(3):
                s = sentinels.client(i)
                m = s.execute_command("SENTINEL", "master", MASTER)
                m = dict(zip(m[::2], m[1::2]))
                if int(m["num-slaves"]) < 2 or int(m["num-other-sentinels"]) < 2 or "s_down" in m["flags"]:
                    return False
            return True
        try:
            wait_for(ready, 20, "the sentinels to see both replicas and each other")
        except AssertionError as e:
            raise AssertionError(f"{e}\n{sentinels.logs()}")
        yield primary, replicas, sentinels
    finally:
        sentinels.stop()


def test_sentinel_fails_over_and_old_primary_rejoins(topology):
    primary, replicas, sentinels = topology
    assert master_port(sentinels) == primary.port

    sent = Sentinel([(HOST, p) for p in sentinels.ports], socket_timeout=1)
    client = sent.master_for(MASTER, socket_timeout=1, socket_connect_timeout=1, decode_responses=True)
    written = {}

    def write(i):
        """One write through the Sentinel client; retried while there is no writable primary."""
        deadline = time.monotonic() + 40
        while True:
            try:
                client.set(f"k{i}", i)
                written[f"k{i}"] = str(i)
                return
            except (redis.ConnectionError, redis.TimeoutError, redis.ReadOnlyError,
                    MasterNotFoundError, redis.ResponseError) as e:
                if time.monotonic() > deadline:
                    raise AssertionError(f"write k{i} kept failing: {e!r}\n{sentinels.logs()}")
                time.sleep(0.1)

    for i in range(100):
        write(i)
    old_port = primary.port
    primary.kill()  # SIGKILL
    killed_at = time.monotonic()

    # Keep writing through the failover: the client asks the sentinels for the primary.
    i = 100
    new_port = None
    while time.monotonic() - killed_at < 30:
        write(i)
        i += 1
        port = master_port(sentinels)
        if port != old_port:
            new_port = port
            break
    if new_port is None:
        raise AssertionError(f"no replica was promoted within 30 s\n{sentinels.logs()}")
    promoted = next(r for r in replicas if r.port == new_port)
    pc = promoted.client(decode_responses=True)
    wait_for(lambda: pc.info("replication")["role"] == "master", 10, "the promoted replica's role")
    for _ in range(50):
        write(i)
        i += 1
    # The client's writes after the failover are on the new primary; so are those before the
    # kill that had reached the replica (asynchronous replication may lose the last few).
    after = {k: v for k, v in written.items() if int(k[1:]) >= 100}
    got = pc.mget(list(after))
    assert got == list(after.values())
    assert all(client.get(k) == v for k, v in list(after.items())[-10:])
    before = pc.mget([f"k{j}" for j in range(100)])
    assert sum(v is not None for v in before) >= 90, before

    # The other replica follows the new primary.
    other = next(r for r in replicas if r.port != new_port).client()
    wait_for(lambda: other.info("replication").get("master_port") == new_port
             and other.info("replication").get("master_link_status") == "up", 20,
             "the other replica to follow the new primary")

    # The old primary comes back (same port, no data) and the sentinels make it a replica.
    primary.stopped = False
    primary.start()
    oc = primary.client(decode_responses=True)
    try:
        # Whichever replica the sentinels name as primary by then (a second failover is theirs
        # to make).
        wait_for(lambda: oc.info("replication").get("master_port") == master_port(sentinels)
                 and oc.info("replication").get("master_link_status") == "up", 30,
                 "the old primary to rejoin as a replica")
    except AssertionError as e:
        raise AssertionError(f"{e}\n{sentinels.logs()}")
    last = f"k{i - 1}"
    wait_for(lambda: oc.get(last) == written[last], 10, "the old primary to receive the new data")
    with pytest.raises(redis.ReadOnlyError):
        oc.set("x", 1)


def test_phpredis_sentinel_finds_primary(topology):
    primary, _replicas, sentinels = topology
    php = shutil.which("php")
    if not php:
        pytest.skip("php not installed (scripts/setup.sh installs php-cli php-redis)")
    code = (
        "$s = new RedisSentinel($argv[1], (int)$argv[2]);"
        f"$a = $s->getMasterAddrByName('{MASTER}');"
        "$r = new Redis(); $r->connect($a[0], (int)$a[1]); $r->set('php', 'yes');"
        "echo json_encode([$a[0], (int)$a[1], $r->get('php'), count($s->slaves('" + MASTER + "'))]);"
    )
    mods = subprocess.run([php, "-m"], capture_output=True, text=True, timeout=30).stdout.split()
    if "redis" not in mods:
        pytest.skip("the phpredis extension is not loaded (scripts/setup.sh installs php-redis)")
    done = subprocess.run([php, "-r", code, HOST, str(sentinels.ports[1])], capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == f'["{HOST}",{primary.port},"yes",2]'


def test_replicaof_inside_multi_exec_as_sentinel_sends_it(server_factory):
    """Sentinel promotes with MULTI, SLAVEOF NO ONE, CONFIG REWRITE, CLIENT KILL TYPE normal, EXEC
    (and reconfigures replicas the same way with SLAVEOF host port). A promotion takes every
    shard's lock, so cairn applies it once EXEC released the keyspace (it hung before)."""
    primary = server_factory(name="multi-primary")
    replica = server_factory(name="multi-replica")
    rc = replica.client()
    rc.replicaof(HOST, primary.port)
    wait_for(lambda: rc.info("replication")["master_link_status"] == "up", 15, "the link")
    primary.client().set("k", "v")
    wait_for(lambda: rc.get("k") == b"v", 10, "the replica to have k")
    raw = replica.client(socket_timeout=5)
    pipe = raw.pipeline(transaction=True)
    pipe.execute_command("SLAVEOF", "NO", "ONE")
    pipe.execute_command("CONFIG", "REWRITE")
    pipe.execute_command("CLIENT", "KILL", "TYPE", "normal")
    replies = pipe.execute(raise_on_error=False)
    assert replies[0] is True or replies[0] == b"OK"
    info = replica.client().info("replication")
    assert info["role"] == "master"
    c = replica.client()
    c.set("after", "1")
    assert c.get("k") == b"v" and c.get("after") == b"1"
    # And back: SLAVEOF host port inside MULTI/EXEC.
    pipe = c.pipeline(transaction=True)
    pipe.execute_command("SLAVEOF", HOST, primary.port)
    pipe.execute_command("CONFIG", "REWRITE")
    pipe.execute(raise_on_error=False)
    c2 = replica.client()
    wait_for(lambda: c2.info("replication").get("master_link_status") == "up", 15, "the link again")


def test_replica_priority_is_in_info(server_factory):
    """Sentinel never promotes a replica whose INFO says slave_priority:0 (CONFIG SET replica-priority)."""
    primary = server_factory(name="prio-primary")
    replica = server_factory(name="prio-replica")
    rc = replica.client()
    rc.replicaof(HOST, primary.port)
    assert rc.info("replication")["slave_priority"] == 100
    assert rc.config_set("replica-priority", 0)
    assert rc.config_get("replica-priority") == {"replica-priority": "0"}
    assert rc.info("replication")["slave_priority"] == 0
