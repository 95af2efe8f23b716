"""When a primary sends the change stream to its replicas (issue 14): `repl-send-delay-us`
holds the stream only while the primary's event loop has more input ready; an idle loop sends
a write's change at once, however long the delay, so a lone write is not held back."""

import time

import pytest

from conftest import HOST, MODES
from kit import wait_until

pytestmark = pytest.mark.cairn_only


def wait_for(pred, timeout=10.0, what="condition"):
    wait_until(pred, timeout, interval=0.002, msg=what)


@pytest.mark.parametrize("mode", list(MODES))
def test_an_idle_primary_sends_a_write_at_once_whatever_the_send_delay(server_factory, mode):
    # Every I/O model: one event loop, two (a write on either), dispatch's network thread.
    p = server_factory(*MODES[mode])
    pc = p.client()
    rep = server_factory()
    rc = rep.client()
    rc.replicaof(HOST, p.port)
    wait_for(lambda: rc.info("replication").get("master_link_status") == "up", what="the link")
    # The longest delay: a hold for it would keep each write below from the replica ~1 s.
    pc.config_set("repl-send-delay-us", 1_000_000)
    pc.set("warm", "1")
    wait_for(lambda: rc.get("warm") == b"1", what="the first write")
    for i in range(5):
        t0 = time.monotonic()
        pc.set("k", str(i))
        wait_for(lambda: rc.get("k") == str(i).encode(), timeout=5, what=f"write {i}")
        took = time.monotonic() - t0
        assert took < 0.3, f"write {i} reached the replica after {took:.3f} s"
    # Many writes from many clients still all arrive (held only while input keeps coming).
    clients = [p.client() for _ in range(4)]
    for n in range(200):
        clients[n % 4].set(f"many:{n}", n)
    wait_for(lambda: rc.get("many:199") == b"199", timeout=5, what="the last of many writes")
    assert rc.execute_command("DBSIZE") == pc.execute_command("DBSIZE")
