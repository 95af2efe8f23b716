"""The seed's cache servers' clients: one process per replica, each issuing batches of requests
and timing each batch end to end (the seed's latency: "end-to-end delay required to complete a
batch of requests by a cache server").

A batch of B requests at read:write R:1 holds B/(R+1) writes (rounded, at least one) and the rest
reads, in a seeded random order, all issued at once ("grouped in batches and run together") over
at most ``conns`` connections per server. A read is ``GET emp:<id>`` on this process's replica
(or, with near caches, a read of the process's near cache that goes to the replica only on a
miss); a write is ``SET emp:<id> <age>`` on the primary followed by ``WAIT <replicas>`` on the
same connection, so a write completes when the primary copy, the database (write-through) and
every replica have it: the seed's "update cache and database, send cache update message to all
other cache servers" before the write is acknowledged.
"""

from __future__ import annotations

import asyncio
import random
import time
from multiprocessing.connection import Connection
from typing import Any, Dict, List, Tuple

HOST = "127.0.0.1"
TIMEOUT_S = 60.0


def batch_plan(size: int, reads_per_write: int, rng: random.Random) -> List[bool]:
    """True for a write: size/(reads_per_write+1) writes (at least one), shuffled."""
    writes = max(1, round(size / (reads_per_write + 1)))
    plan = [True] * writes + [False] * (size - writes)
    rng.shuffle(plan)
    return plan


class Driver:
    def __init__(self, primary: int, replica: int, replicas: int, near: bool, keys: int, conns: int,
                 seed: int) -> None:
        import redis.asyncio as aredis

        def pool(port: int) -> "aredis.Redis":
            return aredis.Redis(connection_pool=aredis.BlockingConnectionPool(
                host=HOST, port=port, max_connections=conns, timeout=TIMEOUT_S, socket_timeout=TIMEOUT_S))

        self.primary, self.replica = pool(primary), pool(replica)
        self.replicas, self.near, self.keys = replicas, near, keys
        self.rng = random.Random(seed)
        self.cache: Any = None
        self.client: Any = None
        self.errors: List[str] = []

    async def open(self) -> None:
        if self.near:
            import cairn

            self.client = cairn.AsyncClient(redis_client=self.replica)
            self.cache = await self.client.cache("emp", serializer="str", max_local_ttl=3600.0)
        # Read every object once: the near cache starts warm (the seed's caches were filled before
        # its batches), and each pool has a connection open.
        for key in range(1, self.keys + 1):
            await self._read(key)

    async def _read(self, key: int) -> None:
        if self.cache is not None:
            value = await self.cache.get(str(key))
        else:
            value = await self.replica.get(f"emp:{key}")
        if value is None:
            self.errors.append(f"read of emp:{key} missed")

    async def _write(self, key: int) -> None:
        async with self.primary.pipeline(transaction=False) as pipe:
            pipe.set(f"emp:{key}", str(self.rng.randrange(18, 70)))
            pipe.execute_command("WAIT", self.replicas, int(TIMEOUT_S * 1000))
            _, acked = await pipe.execute()
        if acked < self.replicas:
            self.errors.append(f"WAIT: {acked} of {self.replicas} replicas")

    async def batch(self, size: int, reads_per_write: int) -> float:
        plan = batch_plan(size, reads_per_write, self.rng)
        ops = [self._write(self.rng.randint(1, self.keys)) if w else self._read(self.rng.randint(1, self.keys))
               for w in plan]
        t0 = time.perf_counter()
        await asyncio.gather(*ops)
        return time.perf_counter() - t0

    def stats(self) -> Dict[str, int]:
        return dict(self.cache.stats()) if self.cache is not None else {}

    async def close(self) -> None:
        if self.client is not None:
            await self.client.aclose()
        await self.primary.aclose()
        await self.replica.aclose()


def serve(conn: Connection, primary: int, replica: int, replicas: int, near: bool, keys: int, conns: int,
          seed: int) -> None:
    """A client process: waits for ("batch", size, reads_per_write, count) and answers with
    (batch seconds, errors, near-cache stats, this process's CPU seconds), until ("stop",)."""
    loop = asyncio.new_event_loop()
    driver = Driver(primary, replica, replicas, near, keys, conns, seed)
    try:
        loop.run_until_complete(driver.open())
        conn.send(("ready",))
        while True:
            msg: Tuple[Any, ...] = conn.recv()
            if msg[0] == "stop":
                break
            _, size, rpw, count = msg
            driver.errors.clear()
            before = driver.stats()
            cpu0 = time.process_time()
            times = [loop.run_until_complete(driver.batch(size, rpw)) for _ in range(count)]
            cpu = time.process_time() - cpu0
            near = {k: v - before.get(k, 0) for k, v in driver.stats().items()}
            conn.send(("done", times, driver.errors[:5], near, cpu))
    except Exception as e:  # reported to the run, which fails the cell with it
        conn.send(("error", f"{type(e).__name__}: {e}"))
    finally:
        try:
            loop.run_until_complete(driver.close())
        except Exception:
            pass
        loop.close()
