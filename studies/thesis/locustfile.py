"""Simulated users (the thesis's Listing 3), for Locust in headless mode.

Each user is sticky: it talks to one node for its whole life (users are dealt round-robin over
the nodes, as the thesis's reverse proxy with sticky sessions did). A request reads an element
with probability ``read%`` and otherwise writes it (PUT: a new version in the database, then
invalidation). The element comes from the shared domain (ids 1..shared) with probability
``shared%``, else from the non-shared domain (ids shared+1..shared+nonshared), uniformly.
(Listing 3 as printed has the two ranges swapped; the text and the figures, where more shared
traffic raises the hit rate, show the intent, which is what this file does.)

The run stops by itself after ``THESIS_REQUESTS`` requests. Parameters come from the environment
(set by ``run.py``): THESIS_NODES (comma-separated base URLs), THESIS_SHARED, THESIS_NONSHARED,
THESIS_SHARED_PCT, THESIS_READ_PCT, THESIS_REQUESTS, THESIS_SEED, THESIS_RATE (requests per second
over all users; each user is paced to its share, so that the machine is not saturated and the
times measure the caches rather than a queue for the CPU; 0: no pacing).
"""

import itertools
import os
import random

import gevent
from locust import FastHttpUser, constant, constant_throughput, task

NODES = os.environ.get("THESIS_NODES", "http://127.0.0.1:8001").split(",")
SHARED = int(os.environ.get("THESIS_SHARED", "1500"))
NONSHARED = int(os.environ.get("THESIS_NONSHARED", "10000"))
SHARED_PCT = float(os.environ.get("THESIS_SHARED_PCT", "30"))
READ_PCT = float(os.environ.get("THESIS_READ_PCT", "80"))
REQUESTS = int(os.environ.get("THESIS_REQUESTS", "40000"))
SEED = int(os.environ.get("THESIS_SEED", "1"))
RATE = float(os.environ.get("THESIS_RATE", "0"))
USERS = int(os.environ.get("THESIS_USERS", "1"))

_user_numbers = itertools.count()
_sent = 0


class Visitor(FastHttpUser):
    wait_time = constant_throughput(RATE / USERS) if RATE > 0 else constant(0)

    def __init__(self, environment):
        n = next(_user_numbers)
        self.host = NODES[n % len(NODES)]  # sticky session
        self.rng = random.Random(SEED * 1_000_003 + n)
        super().__init__(environment)

    def element(self) -> int:
        if self.rng.random() * 100 < SHARED_PCT:
            return self.rng.randint(1, SHARED)
        return self.rng.randint(SHARED + 1, SHARED + NONSHARED)

    @task
    def request(self):
        global _sent
        if _sent >= REQUESTS:
            gevent.sleep(1)  # the runner is quitting
            return
        _sent += 1
        last = _sent == REQUESTS
        n = self.element()
        if self.rng.random() * 100 < READ_PCT:
            self.client.get(f"/people/{n}", name="/people/[id] GET")
        else:
            self.client.put(f"/people/{n}", json={"age": self.rng.randint(1, 99)}, name="/people/[id] PUT")
        if last:
            gevent.spawn(self.environment.runner.quit)
