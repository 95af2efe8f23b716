"""What the hit rates should be: the study's workload replayed against ideal caches, no timing.

Requests are drawn the way the Locust users draw them (users dealt over the nodes, each request
from a random user), with the same mix but a random sequence of its own. A shared cache hits a
read when the element was read or prefetched since its last write; a per-node cache when *that
node* did. The hybrid's hit rate is the shared cache's; its share of hits answered from process
memory is the per-node hit rate over the shared. Used to check the rig (measured hit rates should
land on these) and to read the thesis's numbers.

    python studies/thesis/model.py    # the six configurations at 40,000 requests
"""

from __future__ import annotations

import random
from typing import Any, Dict


def simulate(cfg: Dict[str, Any], requests: int, users: int = 12, seed: int = 1) -> Dict[str, float]:
    rng = random.Random(seed)
    nodes, shared, nonshared = cfg["nodes"], cfg["shared"], cfg["nonshared"]
    node_of_user = [u % nodes for u in range(users)]
    everywhere = frozenset(range(nodes))
    # element -> the set of nodes whose per-node cache holds it; a shared cache holds it if any read
    held: Dict[int, Any] = {}
    in_shared: Dict[int, bool] = {}
    if cfg["prefetch"]:
        held = {k: set(everywhere) for k in range(1, shared + nonshared + 1)}
        in_shared = {k: True for k in held}
    reads = shared_hits = node_hits = 0
    for _ in range(requests):
        node = node_of_user[rng.randrange(users)]
        if rng.random() * 100 < cfg["shared_pct"]:
            k = rng.randint(1, shared)
        else:
            k = rng.randint(shared + 1, shared + nonshared)
        if rng.random() * 100 < cfg["read_pct"]:
            reads += 1
            shared_hits += in_shared.get(k, False)
            h = held.setdefault(k, set())
            node_hits += node in h
            h.add(node)
            in_shared[k] = True
        else:
            held[k] = set()
            in_shared[k] = False
    return {"shared": shared_hits / reads, "pernode": node_hits / reads, "hybrid": shared_hits / reads,
            "hybrid_local_share": node_hits / shared_hits if shared_hits else 0.0}


if __name__ == "__main__":
    import run

    for name, (changes, thesis) in run.FIGURES.items():
        m = simulate({**run.BASE, **changes}, 40000)
        print(f"Figure {name}: model shared {m['shared']:.1%} per-node {m['pernode']:.1%}"
              f" (thesis: {', '.join(f'{k} {v:.0%}' for k, v in thesis.items()) or '-'})")
