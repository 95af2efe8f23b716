"""Test doubles for the unit tests: a hand-driven clock and an in-memory key space that runs the
sans-I/O flows' effects (the integration tests in tests/ run them against the real server)."""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from cairn._core import Cmd, Fetch, Pipe, Sleep, WriteIf, run_flow


class FakeClock:
    """Monotonic seconds and wall milliseconds that move only when told."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def wall_ms(self) -> int:
        return int(self.now * 1000)

    def advance(self, seconds: float) -> None:
        self.now += seconds


class FakeServer:
    """GET/SET(NX, PX)/DEL/PTTL/INCRBY/PEXPIRE/PERSIST/EXISTS over a dict, expiring by the clock."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.data: Dict[bytes, Tuple[bytes, Optional[float]]] = {}
        self.calls: list = []
        self.down = False

    def _live(self, k: bytes) -> Optional[Tuple[bytes, Optional[float]]]:
        e = self.data.get(k)
        if e is not None and e[1] is not None and e[1] <= self.clock():
            del self.data[k]
            return None
        return e

    def run(self, *args: Any) -> Any:
        if self.down:
            raise ConnectionError("server down")
        self.calls.append(args)
        name = args[0].upper() if isinstance(args[0], str) else args[0]
        key = args[1] if len(args) > 1 else None
        if name == "GET":
            e = self._live(key)
            return e[0] if e else None
        if name == "PTTL":
            e = self._live(key)
            if e is None:
                return -2
            return -1 if e[1] is None else int((e[1] - self.clock()) * 1000)
        if name == "SET":
            opts = [a.upper() if isinstance(a, str) else a for a in args[3:]]
            if "NX" in opts and self._live(key) is not None:
                return None
            deadline = None
            if "PX" in opts:
                deadline = self.clock() + opts[opts.index("PX") + 1] / 1000
            self.data[key] = (bytes(args[2]), deadline)
            return True
        if name == "DEL":
            return sum(1 for k in args[1:] if self._live(k) is not None and self.data.pop(k))
        if name == "EXISTS":
            return int(self._live(key) is not None)
        if name == "INCRBY":
            e = self._live(key)
            n = int(e[0] if e else b"0") + int(args[2])
            self.data[key] = (str(n).encode(), e[1] if e else None)
            return n
        if name == "PEXPIRE":
            e = self._live(key)
            if e is None:
                return 0
            self.data[key] = (e[0], self.clock() + args[2] / 1000)
            return 1
        if name == "PERSIST":
            e = self._live(key)
            if e is None or e[1] is None:
                return 0
            self.data[key] = (e[0], None)
            return 1
        raise NotImplementedError(name)

    def drive(self, flow: Any, fetch: Any = None) -> Any:
        """Runs a CacheCore flow to completion, as the sync client does."""
        return run_flow(flow, lambda effect: self._perform(effect, fetch))

    def _perform(self, effect: Any, fetch: Any) -> Any:
        if isinstance(effect, Cmd):
            return self.run(*effect.args)
        if isinstance(effect, Pipe):
            return [self.run(*c) for c in effect.cmds]
        if isinstance(effect, WriteIf):
            if self.run("GET", effect.key) != effect.expect:
                return False
            self.run(*effect.cmd)
            return True
        if isinstance(effect, Fetch):
            return fetch()
        if isinstance(effect, Sleep):
            self.clock.advance(effect.seconds)
            return None
        raise TypeError(effect)
