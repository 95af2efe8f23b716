"""The kit's one server launcher (tests/kit.py's ServerProcess), as bench/, studies/ and the
client's benchmark use it: each kind starts on free ports and answers, a restart keeps its ports
and (with append_log) its log, stop() removes its directory unless kept, and a server that cannot
start fails with its log's tail instead of hanging."""

import shutil

import pytest

from conftest import CAIRN_BIN
from kit import ServerProcess, mc_stats, resp_call

pytestmark = pytest.mark.cairn_only  # about the kit, not the server under test


def test_each_kind_starts_answers_and_stops():
    kinds = [("cairn", CAIRN_BIN)] + [(k, None) for k, exe in (("redis", "redis-server"), ("memcached", "memcached"))
                                      if shutil.which(exe)]
    for kind, binary in kinds:
        srv = ServerProcess(["--loglevel", "warning"] if kind != "memcached" else [], kind=kind, binary=binary,
                            keep_dir=False, memcached_mb=16 if kind == "memcached" else None).start()
        try:
            if srv.has_resp:
                assert resp_call(srv.port, "PING") == b"PONG"
            if srv.has_memcache:
                assert "pid" in mc_stats(srv.memcache_port)
            assert srv.cpu_seconds() >= 0 and srv.rss_bytes() > 0
        finally:
            assert srv.stop() == 0
        assert not srv.dir.exists()


def test_restart_keeps_ports_and_appends_the_log():
    srv = ServerProcess(["--memcache-port", "0"], binary=CAIRN_BIN, memcache_port=None).start()
    port = srv.port
    resp_call(port, "SET", "k", "v")
    srv.kill()
    srv.start(append_log=True)
    try:
        assert srv.port == port and resp_call(port, "PING") == b"PONG"
        assert srv.log().count("$ ") == 2  # both command lines are in the one log
    finally:
        srv.stop()
    shutil.rmtree(srv.dir, ignore_errors=True)


def test_a_server_that_cannot_start_fails_with_its_log():
    srv = ServerProcess(["--no-such-flag"], binary=CAIRN_BIN)
    with pytest.raises(RuntimeError, match="exited during startup") as e:
        srv.start(timeout=10)
    assert "no-such-flag" in str(e.value)
    shutil.rmtree(srv.dir, ignore_errors=True)


def test_a_picked_port_found_taken_is_picked_again_and_a_given_one_is_not():
    import socket

    from kit import free_port

    srv = ServerProcess(["--threads", "1"], binary=CAIRN_BIN, keep_dir=False)
    srv.memcache_port = srv.port  # as when the kernel offered one port twice (seen in CI)
    srv.start()
    try:
        assert srv.port != srv.memcache_port and resp_call(srv.port, "PING") == b"PONG"
        assert "pid" in mc_stats(srv.memcache_port)
    finally:
        assert srv.stop() == 0
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        given = ServerProcess([], binary=CAIRN_BIN, port=held.getsockname()[1], keep_dir=False)
        with pytest.raises(RuntimeError, match="Address already in use"):
            given.start()
    shutil.rmtree(given.dir, ignore_errors=True)
    assert len({free_port() for _ in range(300)}) == 300, "free_port repeats none it handed out lately"
