"""Offline cache simulators: LRU, SIEVE, S3-FIFO, W-TinyLFU and cairn's own policy.

They replay a key stream (integer key ids) against a cache holding `capacity`
objects with cache-aside semantics (a miss inserts the key) and report the hit
ratio, so the eviction suite can draw reference lines next to what the real
servers achieve on the same stream.

    hits, requests = simulate("sieve", keys, capacity, warm=len(keys) // 2)

`warm` requests are replayed first without being counted.

`cairn-model` is cairn's `allkeys-lru` (crates/store/src/evict.rs and probation.rs) as the server
runs it, so that an idea is measured here first and the server's figure can be checked against it.

References: SIEVE (Zhang et al., NSDI '24), S3-FIFO (Yang et al., SOSP '23),
W-TinyLFU (Einziger, Friedman and Manes, ACM ToS 2017).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right, insort
from collections import OrderedDict, deque


class LRU:
    def __init__(self, capacity: int):
        self.cap = capacity
        self.d: OrderedDict[int, None] = OrderedDict()

    def size(self) -> int:
        return len(self.d)

    def access(self, k: int) -> bool:
        d = self.d
        if k in d:
            d.move_to_end(k)
            return True
        d[k] = None
        if len(d) > self.cap:
            d.popitem(last=False)
        return False


class Sieve:
    """FIFO list with a visited bit per object and a hand that sweeps from the
    oldest object towards the newest, sparing (and clearing) visited ones."""

    def __init__(self, capacity: int):
        self.cap = capacity
        self.visited: dict[int, bool] = {}
        # Doubly linked list: head = newest, tail = oldest.
        self.prev: dict[int, int | None] = {}
        self.next: dict[int, int | None] = {}
        self.head = None
        self.tail = None
        self.hand = None

    def size(self) -> int:
        return len(self.visited)

    def _unlink(self, k):
        p, n = self.prev.pop(k), self.next.pop(k)
        if p is None:
            self.head = n
        else:
            self.next[p] = n
        if n is None:
            self.tail = p
        else:
            self.prev[n] = p

    def _evict(self):
        h = self.hand if self.hand is not None else self.tail
        while self.visited[h]:
            self.visited[h] = False
            h = self.prev[h]
            if h is None:
                h = self.tail
        self.hand = self.prev[h]
        self._unlink(h)
        del self.visited[h]

    def access(self, k: int) -> bool:
        if k in self.visited:
            self.visited[k] = True
            return True
        if len(self.visited) >= self.cap:
            self._evict()
        # Insert at the head.
        self.visited[k] = False
        self.prev[k] = None
        self.next[k] = self.head
        if self.head is not None:
            self.prev[self.head] = k
        self.head = k
        if self.tail is None:
            self.tail = k
        return False


class S3FIFO:
    """Small FIFO (10%), main FIFO (90%) and a ghost FIFO of evicted keys;
    2-bit frequencies. Algorithm 1 of the SOSP '23 paper."""

    def __init__(self, capacity: int, small_ratio: float = 0.1):
        self.cap = capacity
        self.small_cap = max(1, int(capacity * small_ratio))
        self.main_cap = capacity - self.small_cap
        self.small: deque[int] = deque()
        self.main: deque[int] = deque()
        self.freq: dict[int, int] = {}
        self.where: dict[int, int] = {}  # 0 small, 1 main
        self.ghost: deque[tuple[int, int]] = deque()
        self.ghost_seq: dict[int, int] = {}
        self.seq = 0

    def size(self) -> int:
        assert len(self.where) == len(self.small) + len(self.main)
        return len(self.where)

    def _ghost_add(self, k):
        self.seq += 1
        self.ghost.append((k, self.seq))
        self.ghost_seq[k] = self.seq
        while len(self.ghost) > self.main_cap:
            g, s = self.ghost.popleft()
            if self.ghost_seq.get(g) == s:
                del self.ghost_seq[g]

    def _evict_main(self):
        while self.main:
            t = self.main.popleft()
            f = self.freq[t]
            if f > 0:
                self.freq[t] = f - 1
                self.main.append(t)
            else:
                del self.freq[t]
                del self.where[t]
                return

    def _evict_small(self):
        while self.small:
            t = self.small.popleft()
            if self.freq[t] > 1:
                self.main.append(t)
                self.where[t] = 1
                if len(self.main) > self.main_cap:
                    self._evict_main()
            else:
                del self.freq[t]
                del self.where[t]
                self._ghost_add(t)
                return

    def access(self, k: int) -> bool:
        f = self.freq.get(k)
        if f is not None:
            if f < 3:
                self.freq[k] = f + 1
            return True
        while len(self.where) >= self.cap:
            if len(self.small) >= self.small_cap:
                self._evict_small()
            else:
                self._evict_main()
        self.freq[k] = 0
        if k in self.ghost_seq:
            del self.ghost_seq[k]
            self.main.append(k)
            self.where[k] = 1
        else:
            self.small.append(k)
            self.where[k] = 0
        return False


class CountMin4:
    """Count-min sketch with 4 rows of 4-bit counters, halved every `sample` increments."""

    def __init__(self, capacity: int):
        width = 1
        while width < max(16, capacity):
            width <<= 1
        self.mask = width - 1
        self.rows = [array("B", bytes(width)) for _ in range(4)]
        self.seeds = (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0xD6E8FEB86659FD93)
        self.sample = 10 * capacity
        self.count = 0

    def _idx(self, k, seed):
        h = ((k + 1) * seed) & 0xFFFFFFFFFFFFFFFF
        return (h ^ (h >> 29)) & self.mask

    def add(self, k):
        for row, seed in zip(self.rows, self.seeds):
            i = self._idx(k, seed)
            if row[i] < 15:
                row[i] += 1
        self.count += 1
        if self.count >= self.sample:
            self.count //= 2
            for row in self.rows:
                for i in range(len(row)):
                    row[i] >>= 1

    def estimate(self, k):
        return min(row[self._idx(k, seed)] for row, seed in zip(self.rows, self.seeds))


class WTinyLFU:
    """1% window LRU, then TinyLFU admission into a segmented LRU
    (20% probation, 80% protected)."""

    def __init__(self, capacity: int, window_ratio: float = 0.01):
        self.cap = capacity
        self.win_cap = max(1, int(capacity * window_ratio))
        self.main_cap = max(1, capacity - self.win_cap)
        self.prot_cap = max(1, int(self.main_cap * 0.8))
        self.window: OrderedDict[int, None] = OrderedDict()
        self.prob: OrderedDict[int, None] = OrderedDict()
        self.prot: OrderedDict[int, None] = OrderedDict()
        self.sketch = CountMin4(capacity)

    def size(self) -> int:
        return len(self.window) + len(self.prob) + len(self.prot)

    def access(self, k: int) -> bool:
        self.sketch.add(k)
        if k in self.window:
            self.window.move_to_end(k)
            return True
        if k in self.prot:
            self.prot.move_to_end(k)
            return True
        if k in self.prob:
            del self.prob[k]
            self.prot[k] = None
            if len(self.prot) > self.prot_cap:
                d, _ = self.prot.popitem(last=False)
                self.prob[d] = None
            return True
        self.window[k] = None
        if len(self.window) > self.win_cap:
            cand, _ = self.window.popitem(last=False)
            if len(self.prob) + len(self.prot) < self.main_cap:
                self.prob[cand] = None
            else:
                victim = next(iter(self.prob)) if self.prob else next(iter(self.prot))
                if self.sketch.estimate(cand) > self.sketch.estimate(victim):
                    if victim in self.prob:
                        del self.prob[victim]
                    else:
                        del self.prot[victim]
                    self.prob[cand] = None
        return False


M64 = (1 << 64) - 1
FREQUENCY = 0b11
PROBATION = 0x80


def _mix64(x: int) -> int:
    """splitmix64's finalizer: the model's stand-in for the server's key hash."""
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


class _Shard:
    __slots__ = ("recs", "order", "hand", "ring", "ghost", "ghost_len")

    def __init__(self):
        self.recs: dict[int, list[int]] = {}  # key -> [table position, reference byte]
        self.order: list[tuple[int, int]] = []  # (position, key), sorted: the hand's order
        self.hand = 0
        self.ring: deque[int] = deque()  # keys in probation, oldest first
        self.ghost: dict[int, int] = {}  # direct-mapped slot -> 16-bit fingerprint
        self.ghost_len = 0


class CairnModel:
    """cairn's allkeys-lru. The store has 256 shards (by the key hash's low bits); a write evicts
    from its own shard, so each holds what it held when the limit was first reached. Per shard:
    a record has a reference byte with a 2-bit read count (readers only raise it) and a
    probation bit. A new record enters probation (a FIFO ring) unless the ghost set remembers
    its hash (the ring holds at most twice its target plus 16: past that, the oldest record leaves
    probation unread). Eviction first drains the ring while it holds at least a twentieth of the shard's
    records: a record read since it was written leaves probation (bit cleared, count kept), an
    unread one is evicted and its hash remembered in the ghost set (direct-mapped 16-bit
    fingerprints, a power of two about half the shard's records). Otherwise counter CLOCK in
    table order (hash position), passing over records in probation: a read record loses one
    from its count, the first at 0 is evicted."""

    SHARDS = 256
    PROBATION_SHARE = 20
    RING_SLACK = 16

    def __init__(self, capacity: int, seed: int = 1):
        self.cap = capacity
        self.n = 0
        self.shards = [_Shard() for _ in range(self.SHARDS)]
        self.seed = seed
        self.rng = seed

    def size(self) -> int:
        return self.n

    def _remove(self, sh: _Shard, k: int) -> None:
        p, _ = sh.recs.pop(k)
        del sh.order[bisect_left(sh.order, (p, k))]
        self.n -= 1

    def _ghost_slot(self, sh: _Shard, h: int) -> tuple[int, int]:
        return (h >> 16) & (sh.ghost_len - 1), (h >> 48) | 1

    def _evict_one(self, sh: _Shard) -> bool:
        if not sh.recs:
            return False
        target = max(1, len(sh.recs) // self.PROBATION_SHARE)
        while sh.ring and len(sh.ring) >= target:
            k = sh.ring.popleft()
            r = sh.recs.get(k)
            if r is None or not r[1] & PROBATION:
                continue
            if r[1] & FREQUENCY:
                r[1] &= ~PROBATION
                continue
            self._remove(sh, k)
            want = 1 << max(0, (max(1, len(sh.recs) // 2) - 1).bit_length())
            if want != sh.ghost_len:
                sh.ghost, sh.ghost_len = {}, want
            i, fp = self._ghost_slot(sh, _mix64(k ^ self.seed))
            sh.ghost[i] = fp
            return True
        order = sh.order
        i = bisect_right(order, (sh.hand, M64))
        spared = None
        for _ in range(5 * len(order)):
            if i >= len(order):
                i = 0
            p, k = order[i]
            r = sh.recs[k]
            if r[1] & PROBATION:
                spared = spared if spared is not None else k
            elif r[1] & FREQUENCY:
                r[1] -= 1
            else:
                sh.hand = p
                self._remove(sh, k)
                return True
            i += 1
        self._remove(sh, spared)
        return True

    def access(self, k: int) -> bool:
        h = _mix64(k ^ self.seed)
        sh = self.shards[h & (self.SHARDS - 1)]
        r = sh.recs.get(k)
        if r is not None:
            if r[1] & FREQUENCY != FREQUENCY:
                r[1] += 1
            return True
        while self.n >= self.cap:
            if not self._evict_one(sh):  # an empty shard: evict from another one
                self.rng = (self.rng * 6364136223846793005 + 1442695040888963407) & M64
                self._evict_one(self.shards[(self.rng >> 33) & (self.SHARDS - 1)])
        byte = PROBATION
        if sh.ghost_len:
            i, fp = self._ghost_slot(sh, h)
            if sh.ghost.get(i) == fp:
                del sh.ghost[i]
                byte = 0
        if byte:
            # The ring's bound: past it (stale entries, or the fill before the first eviction)
            # the oldest record leaves probation unread.
            if len(sh.ring) >= 2 * max(1, (len(sh.recs) + 1) // self.PROBATION_SHARE) + self.RING_SLACK:
                old = sh.recs.get(sh.ring.popleft())
                if old is not None:
                    old[1] &= ~PROBATION
            sh.ring.append(k)
        sh.recs[k] = [h >> 32, byte]
        insort(sh.order, (h >> 32, k))
        self.n += 1
        return False


POLICIES = {"lru": LRU, "sieve": Sieve, "s3fifo": S3FIFO, "wtinylfu": WTinyLFU, "cairn-model": CairnModel}
LABELS = {"lru": "LRU", "sieve": "SIEVE", "s3fifo": "S3-FIFO", "wtinylfu": "W-TinyLFU", "cairn-model": "cairn-model"}
# The policies cairn's hit ratio is held against (issue 19: within half a point of the best).
BEST_OF = ("s3fifo", "wtinylfu")


def simulate(policy: str, keys, capacity: int, warm: int = 0) -> tuple[int, int]:
    """Replays `keys`; returns (hits, requests) over the keys after the first `warm`."""
    cache = POLICIES[policy](capacity)
    access = cache.access
    for i in range(min(warm, len(keys))):
        access(keys[i])
    hits = 0
    n = 0
    for i in range(warm, len(keys)):
        n += 1
        if access(keys[i]):
            hits += 1
    return hits, n


def load_keys(path) -> array:
    """Reads a `cairn-bench --dump-keys` file (u32 little-endian key ids)."""
    a = array("I")
    with open(path, "rb") as f:
        a.frombytes(f.read())
    return a
