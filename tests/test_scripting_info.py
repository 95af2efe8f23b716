"""What INFO says about scripting (used_memory_lua, used_memory_scripts, number_of_cached_scripts
...) and `lua-time-limit`, the old name of busy-reply-threshold. Validated against redis-server
with CAIRN_TARGET=redis."""

import pytest

pytestmark = pytest.mark.redis_only


def test_info_memory_counts_the_interpreter_and_the_cached_scripts(r):
    r.script_flush()
    before = r.info("memory")
    assert before["number_of_cached_scripts"] == 0
    assert r.eval("return 1", 0) == 1
    sha = r.script_load("return 'a much longer script body than the first one, to be seen'")
    after = r.info("memory")
    assert after["number_of_cached_scripts"] == 2
    assert after["used_memory_lua"] > 0
    assert after["used_memory_vm_eval"] == after["used_memory_lua"]
    assert after["used_memory_scripts_eval"] > before["used_memory_scripts_eval"] + 60
    assert after["used_memory_lua_human"].endswith(("B", "K", "M"))
    assert r.evalsha(sha, 0).startswith(b"a much longer")
    r.script_flush()
    assert r.info("memory")["number_of_cached_scripts"] == 0
    assert r.info("memory")["used_memory_scripts_eval"] < after["used_memory_scripts_eval"]


def test_lua_time_limit_is_busy_reply_threshold(r):
    old = r.config_get("busy-reply-threshold")["busy-reply-threshold"]
    try:
        assert r.config_set("lua-time-limit", 1234)
        assert r.config_get("busy-reply-threshold") == {"busy-reply-threshold": "1234"}
        assert r.config_get("lua-time-limit") == {"lua-time-limit": "1234"}
        r.config_set("busy-reply-threshold", 2345)
        assert r.config_get("lua-time-limit") == {"lua-time-limit": "2345"}
        # A pattern finds both names.
        got = r.config_get("*time-limit*")
        assert got.get("lua-time-limit") == "2345"
        got = r.config_get("busy-reply*")
        assert got == {"busy-reply-threshold": "2345"}
    finally:
        r.config_set("busy-reply-threshold", old)


@pytest.mark.cairn_only  # cairn's command line
def test_lua_time_limit_on_the_command_line(server_factory):
    srv = server_factory("--lua-time-limit", "777")
    c = srv.client()
    assert c.config_get("busy-reply-threshold") == {"busy-reply-threshold": "777"}
    c.close()
