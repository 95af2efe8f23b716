"""The real parts of one study run, started and stopped for real: PostgreSQL (a throwaway
cluster in a temporary directory), the cairn server, N service nodes and Locust.

PostgreSQL refuses to run as root; when the study runs as root (CI), the cluster is created and
started as the ``postgres`` user that the Debian package creates.
"""

from __future__ import annotations

import glob
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any, Dict, List, Optional

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
PYTHON = sys.executable


sys.path.insert(0, str(ROOT / "tests"))
from kit import ServerProcess, binary_commit, free_port, stop_process as stop, wait_for  # noqa: E402,F401  (the repository's shared test kit, tests/kit.py)


def pg_bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    path = found[-1] if found else shutil.which(name)
    if not path:
        raise RuntimeError(f"PostgreSQL's {name} not found: install the postgresql package (scripts/setup.sh does)")
    return path


class Postgres:
    """A private PostgreSQL cluster on a Unix socket, tuned for a cache study (no durability)."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="cairn-thesis-pg-"))
        self.data = self.dir / "data"
        self.port = free_port()
        self.as_user: List[str] = []
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
            self.as_user = ["runuser", "-u", "postgres", "--"]
        self.dsn = f"host={self.dir} port={self.port} dbname=thesis user=postgres"

    def _run(self, *cmd: str) -> None:
        subprocess.run([*self.as_user, *cmd], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def start(self) -> "Postgres":
        self._run(pg_bin("initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync",
                  "-E", "UTF8", "--locale", "C")
        opts = (f"-k {self.dir} -p {self.port} -c listen_addresses='' -c fsync=off -c synchronous_commit=off"
                " -c full_page_writes=off -c max_connections=300 -c shared_buffers=128MB")
        self._run(pg_bin("pg_ctl"), "-D", str(self.data), "-o", opts, "-l", str(self.dir / "log"), "-w", "start")
        self._run(pg_bin("createdb"), "-h", str(self.dir), "-p", str(self.port), "-U", "postgres", "thesis")
        return self

    def load(self, people: int) -> None:
        """People 1..people in families of four, every second one with a pet or two."""
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute("""
                DROP TABLE IF EXISTS pets, people, families;
                CREATE TABLE families (id integer PRIMARY KEY, name text NOT NULL);
                CREATE TABLE people (id serial PRIMARY KEY, name text NOT NULL, age integer NOT NULL,
                                     family_id integer NOT NULL REFERENCES families, version integer NOT NULL);
                CREATE TABLE pets (id serial PRIMARY KEY, owner_id integer NOT NULL, name text NOT NULL,
                                   species text NOT NULL);
            """)
            conn.execute("INSERT INTO families SELECT g, 'family ' || g FROM generate_series(1, %s) g",
                         ((people + 3) // 4,))
            conn.execute("INSERT INTO people SELECT g, 'person ' || g, 18 + g %% 60, 1 + (g - 1) / 4, 1"
                         " FROM generate_series(1, %s) g", (people,))
            conn.execute("SELECT setval('people_id_seq', %s)", (people,))
            conn.execute("INSERT INTO pets (owner_id, name, species) SELECT g, 'pet ' || g,"
                         " (ARRAY['cat', 'dog', 'fish'])[1 + g %% 3] FROM generate_series(1, %s) g"
                         " WHERE g %% 2 = 0 UNION ALL SELECT g, 'pet ' || g || 'b', 'rabbit'"
                         " FROM generate_series(1, %s) g WHERE g %% 6 = 0", (people, people))
            conn.execute("CREATE INDEX pets_owner ON pets (owner_id); ANALYZE")

    def close(self) -> None:
        if self.data.exists():
            subprocess.run([*self.as_user, pg_bin("pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(self.dir, ignore_errors=True)


def http_json(url: str, timeout: float = 30.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


class Run:
    """cairn + nodes + Locust for one configuration; returns every node's raw measurements."""

    def __init__(self, cfg: Dict[str, Any], pg: Postgres, cairn_bin: str, users: int, requests: int,
                 db_latency_ms: float, log_dir: Path, rate: float = 0.0) -> None:
        self.cfg, self.pg, self.cairn_bin, self.rate = cfg, pg, cairn_bin, rate
        self.users, self.requests, self.db_latency_ms = users, requests, db_latency_ms
        self.log_dir = log_dir
        self.procs: List[subprocess.Popen] = []
        self.servers: List[ServerProcess] = []
        self.names: List[str] = []

    def _spawn(self, cmd: List[str], name: str, env: Optional[Dict[str, str]] = None) -> subprocess.Popen:
        log = open(self.log_dir / f"{name}.log", "w")
        p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
        log.close()
        self.procs.append(p)
        self.names.append(name)
        return p

    def cpu_seconds(self) -> Dict[str, float]:
        """CPU time (user + system) so far of each part: cairn, the nodes together, Locust."""
        tick = os.sysconf("SC_CLK_TCK")
        out: Dict[str, float] = {}
        for p, name in zip(self.procs, self.names):
            try:
                fields = Path(f"/proc/{p.pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            part = "nodes" if name.startswith("node") else name
            out[part] = out.get(part, 0.0) + (int(fields[11]) + int(fields[12])) / tick
        return out

    def _node(self, i: int, port: int, cairn_port: int, prefetch: str) -> str:
        domain = self.cfg["shared"] + self.cfg["nonshared"]
        self._spawn([PYTHON, str(HERE / "service.py"), "--port", str(port), "--mode", self.cfg["mode"],
                     "--cairn", f"127.0.0.1:{cairn_port}", "--pg", self.pg.dsn,
                     "--db-latency-ms", str(self.db_latency_ms), "--prefetch", prefetch,
                     "--domain", str(domain)], f"node{i}")
        return f"http://127.0.0.1:{port}"

    def _wait_ready(self, url: str) -> None:
        def ready() -> bool:
            if any(p.poll() is not None for p in self.procs):
                raise RuntimeError(f"a process of the run exited early: see {self.log_dir}")
            return bool(http_json(url + "/_health", timeout=2)["ready"])
        wait_for(ready, 120, url)

    def execute(self) -> Dict[str, Any]:
        cfg = self.cfg
        # cairn: the kit's launcher (tests/kit.py), logging beside the nodes and Locust.
        cairn = ServerProcess(["--memcache-port", "0"], binary=self.cairn_bin, memcache_port=None, name="cairn",
                              log_path=self.log_dir / "cairn.log", keep_dir=False)
        self.servers.append(cairn)
        cairn.start(timeout=20)
        self.procs.append(cairn.proc)
        self.names.append("cairn")
        cairn_port = cairn.port
        ports = [free_port() for _ in range(cfg["nodes"])]
        t0 = time.monotonic()
        # With prefetch, node 0 loads the domain into the shared cache before the others warm up.
        first = self._node(0, ports[0], cairn_port, "load" if cfg["prefetch"] else "none")
        self._wait_ready(first)
        urls = [first] + [self._node(i, ports[i], cairn_port, "warm" if cfg["prefetch"] else "none")
                          for i in range(1, cfg["nodes"])]
        for u in urls[1:]:
            self._wait_ready(u)
        startup_s = time.monotonic() - t0
        for u in urls:
            http_json(u + "/_stats")  # drop anything measured during start-up
        env = dict(os.environ, THESIS_NODES=",".join(urls), THESIS_SHARED=str(cfg["shared"]),
                   THESIS_NONSHARED=str(cfg["nonshared"]), THESIS_SHARED_PCT=str(cfg["shared_pct"]),
                   THESIS_READ_PCT=str(cfg["read_pct"]), THESIS_REQUESTS=str(self.requests),
                   THESIS_SEED=str(cfg.get("seed", 1)), THESIS_RATE=str(self.rate), THESIS_USERS=str(self.users))
        locust = str(Path(PYTHON).parent / "locust")
        t1 = time.monotonic()
        cpu0 = self.cpu_seconds()
        proc = self._spawn([locust, "-f", str(HERE / "locustfile.py"), "--headless", "--only-summary",
                            "-u", str(self.users), "-r", str(self.users), "--run-time", "900s",
                            "--stop-timeout", "10", "--loglevel", "WARNING", "--exit-code-on-error", "0"],
                           "locust", env)
        if proc.wait(960) != 0:
            raise RuntimeError(f"locust failed: see {self.log_dir / 'locust.log'}")
        wall_s = time.monotonic() - t1
        cpu = {k: v - cpu0.get(k, 0.0) for k, v in self.cpu_seconds().items()}
        stats = [http_json(u + "/_stats") for u in urls]
        return {"config": cfg, "startup_s": startup_s, "wall_s": wall_s, "cpu_s": cpu,
                "reads": [r for s in stats for r in s["reads"]],
                "writes": [w for s in stats for w in s["writes"]]}

    def close(self) -> None:
        for p in reversed(self.procs):
            stop(p)
        for srv in self.servers:
            srv.stop()
