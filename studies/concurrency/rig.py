"""The real parts of the concurrency study (seed 003), started and stopped for real: the origin
database (PostgreSQL with the seed's employees table), and one cluster per scheme and degree of
replication: a cairn primary (the seed's origin server holding the primary copy) mapped to the
table by a ``[[writeback]]`` mapping, and N cairn replicas (the seed's cache servers).

The seed's objects are integers, one per database row, and all requests of a batch touch "the
same data object": the cached value ``emp:<id>`` is the employee's ``age`` (``value = "string"``,
``value_column = "age"``), so a cache write becomes the row's update.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

sys.path.insert(0, str(ROOT / "tests"))
from kit import binary_commit, free_port, resp_call, stop_process as stop, wait_for  # noqa: E402,F401  (tests/kit.py: the shared test kit)
from wb_pg import Postgres  # noqa: E402  (tests/wb_pg.py: a throwaway PostgreSQL cluster on 127.0.0.1)

# The schemes: (server flags of the primary, write mode, near caches in the clients). The seed's
# single-thread model and thread pools run write-through, as the seed's origin server updated the
# cache and the database before answering; its write-behind scheme is cairn's write-behind.
SCHEMES: Dict[str, Dict[str, object]] = {
    "single": {"flags": ["--threads", "1"], "mode": "through", "near": False,
               "label": "single thread (--threads 1), write-through"},
    "pool10": {"flags": ["--io-model", "dispatch", "--workers", "10"], "mode": "through", "near": False,
               "label": "thread pool of 10 (dispatch), write-through"},
    "pool100": {"flags": ["--io-model", "dispatch", "--workers", "100"], "mode": "through", "near": False,
                "label": "thread pool of 100 (dispatch), write-through"},
    "pool250": {"flags": ["--io-model", "dispatch", "--workers", "250"], "mode": "through", "near": False,
                "label": "thread pool of 250 (dispatch), write-through"},
    "reactor": {"flags": [], "mode": "through", "near": False,
                "label": "reactor (default), write-through"},
    "behind": {"flags": [], "mode": "behind", "near": False,
               "label": "reactor (default), write-behind"},
    "near": {"flags": [], "mode": "behind", "near": True,
             "label": "reactor, write-behind, near caches on the replicas (tracking)"},
}

# The seed's kind of statements (its section 6.1.1). The read query fills the caches (the
# seed's "filling the cache"); the update is what a cache write does to the database.
SEED_READ = "SELECT age FROM employee_table WHERE salary > 1000000"
SEED_UPDATE = "UPDATE employee_table SET dept='Accounting' WHERE dept='Auditing'"
FILL_QUERY = "SELECT id, age FROM employees WHERE salary > 1000000 AND id <= %s ORDER BY id"


class Origin:
    """PostgreSQL as the seed's origin database: ``employees`` and an optional added latency per
    writing transaction (a trigger that sleeps once per transaction, as a network round trip to a
    remote database would cost once per transaction, whatever its rows)."""

    def __init__(self, rows: int, db_latency_ms: float) -> None:
        self.pg = Postgres().start()
        self.url = self.pg.url
        try:
            self._load(rows, db_latency_ms)
        except BaseException:
            self.pg.close()  # a failed load must not leave the cluster running
            raise

    def _load(self, rows: int, db_latency_ms: float) -> None:
        self.pg.sql("""
            CREATE TABLE employees (id integer PRIMARY KEY, name text, age integer, salary integer, dept text);
            CREATE TABLE study_knobs (delay_ms double precision NOT NULL);
            INSERT INTO study_knobs VALUES (0);
            CREATE FUNCTION study_delay() RETURNS trigger LANGUAGE plpgsql AS $$
            DECLARE ms double precision;
            BEGIN
                IF coalesce(current_setting('study.slept', true), '') <> 'y' THEN
                    PERFORM set_config('study.slept', 'y', true);
                    SELECT delay_ms INTO ms FROM study_knobs;
                    IF ms > 0 THEN PERFORM pg_sleep(ms / 1000.0); END IF;
                END IF;
                RETURN NEW;
            END $$;
            CREATE TRIGGER employees_delay BEFORE INSERT OR UPDATE ON employees
                FOR EACH ROW EXECUTE FUNCTION study_delay();
        """)
        self.pg.sql("INSERT INTO employees SELECT g, 'employee ' || g, 20 + g %% 45, 1000001 + g,"
                    " (ARRAY['Auditing', 'Accounting', 'Sales'])[1 + g %% 3] FROM generate_series(1, %s) g",
                    (rows,))
        self.latency_ms = db_latency_ms
        self.set_latency(db_latency_ms)

    def set_latency(self, ms: float) -> None:
        self.pg.sql("UPDATE study_knobs SET delay_ms = %s", (ms,))

    def forget_mappings(self) -> None:
        """Empties cairn's bookkeeping (cairn_wb_checkpoint, cairn_wb_version). Each cluster
        starts a fresh log at LSN 1 under the same mapping name; a checkpoint left by the last
        cluster would say its records are applied already, and they would be skipped (or, in
        write-through, never acknowledged)."""
        self.pg.sql("""
            DO $$ BEGIN
                IF to_regclass('cairn_wb_checkpoint') IS NOT NULL THEN DELETE FROM cairn_wb_checkpoint; END IF;
                IF to_regclass('cairn_wb_version') IS NOT NULL THEN DELETE FROM cairn_wb_version; END IF;
            END $$;
        """)

    def fill_rows(self, keys: int) -> List[tuple]:
        """The seed's read query, restricted to the objects the study touches."""
        return self.pg.sql(FILL_QUERY, (keys,))

    def age_of(self, key: int) -> Optional[int]:
        rows = self.pg.sql("SELECT age FROM employees WHERE id = %s", (key,))
        return rows[0][0] if rows else None

    def close(self) -> None:
        self.pg.close()


def config_toml(mode: str, url: str, wb_dir: Path) -> str:
    return (f'dir = "{wb_dir}"\n\n[[writeback]]\nname = "employees"\nprefix = "emp:"\n'
            f'database = "{url}"\ntable = "employees"\nkey_column = "id"\nvalue = "string"\n'
            f'value_column = "age"\nmode = "{mode}"\n')


def unavailable_reason(cairn_bin: str, mode: str, url: str) -> Optional[str]:
    """Why the server refuses this write mode (None when it starts with it): write-through is
    refused at parse ("not implemented yet") by servers that predate it."""
    with tempfile.TemporaryDirectory(prefix="cairn-cc-probe-") as d:
        cfg = Path(d) / "probe.toml"
        cfg.write_text(config_toml(mode, url, Path(d)))
        port = free_port()
        proc = subprocess.Popen([cairn_bin, "--config", str(cfg), "--port", str(port), "--memcache-port", "0",
                                 "--save-on-shutdown", "no"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and proc.poll() is None:
                try:
                    socket.create_connection(("127.0.0.1", port), 0.2).close()
                    return None
                except OSError:
                    time.sleep(0.05)
            out = (proc.communicate(timeout=5)[0] if proc.poll() is not None else "") or ""
        finally:
            stop(proc)
    if "not implemented" in out:
        line = next((ln for ln in out.splitlines() if "not implemented" in ln), out.strip())
        # From "mode 'through' ..." on: the probe's temporary path means nothing to a reader.
        return line[line.find("mode"):].strip()[:200] if "mode" in line else line.strip()[-200:]
    raise RuntimeError(f"cairn did not start with mode {mode!r}: {out.strip()[-500:]}")


class Cluster:
    """A cairn primary with the scheme's flags and write mode, and ``replicas`` replicas."""

    def __init__(self, scheme: str, replicas: int, origin: Origin, cairn_bin: str, keys: int,
                 log_dir: Path) -> None:
        self.scheme, self.replicas, self.origin, self.cairn_bin = scheme, replicas, origin, cairn_bin
        self.keys, self.log_dir = keys, log_dir
        self.dir = Path(tempfile.mkdtemp(prefix="cairn-cc-"))
        self.procs: List[subprocess.Popen] = []
        self.primary_port = 0
        self.replica_ports: List[int] = []

    def _spawn(self, args: List[str], name: str) -> int:
        port = free_port()
        log = open(self.log_dir / f"{self.scheme}-r{self.replicas}-{name}.log", "w")
        proc = subprocess.Popen([self.cairn_bin, "--port", str(port), "--memcache-port", "0",
                                 "--save-on-shutdown", "no", "--loglevel", "warning", *args],
                                stdout=log, stderr=subprocess.STDOUT, cwd=self.dir)
        log.close()
        self.procs.append(proc)

        def up() -> bool:
            if proc.poll() is not None:
                raise RuntimeError(f"cairn {name} exited: see {self.log_dir}")
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return True
        wait_for(up, 20, f"cairn {name}")
        return port

    def start(self) -> "Cluster":
        try:
            return self._start()
        except BaseException:
            self.close()  # a failed start must not leave servers running
            raise

    def _start(self) -> "Cluster":
        spec = SCHEMES[self.scheme]
        cfg = self.dir / "cairn.toml"
        cfg.write_text(config_toml(str(spec["mode"]), self.origin.url, self.dir))
        self.origin.forget_mappings()
        self.primary_port = self._spawn(["--config", str(cfg), *spec["flags"]], "primary")  # type: ignore[misc]
        # Fill the primary copy with the seed's read query, with no added latency.
        self.origin.set_latency(0)
        for key, age in self.origin.fill_rows(self.keys):
            resp_call(self.primary_port, "SET", f"emp:{key}", str(age))
        self.origin.set_latency(self.origin.latency_ms)
        for i in range(self.replicas):
            self.replica_ports.append(self._spawn(["--replicaof", f"127.0.0.1 {self.primary_port}"], f"replica{i}"))
        want = self.replicas
        wait_for(lambda: resp_call(self.primary_port, "WAIT", str(want), "100") >= want, 60,
                 f"{want} replicas in sync")
        for port in self.replica_ports:
            wait_for(lambda p=port: self._holds_all(p), 30, "the replicas' copies")
        return self

    def _holds_all(self, port: int) -> bool:
        """Whether a replica serves every object (it answers -LOADING while it loads the copy)."""
        try:
            return resp_call(port, "DBSIZE") >= self.keys
        except RuntimeError as e:
            if "LOADING" in str(e):
                return False
            raise

    def check_database(self, timeout: float = 30.0) -> None:
        """The database holds what the primary copy holds, once write-behind caught up: the
        study's writes really reached the rows (raises otherwise)."""
        def same() -> bool:
            return all(self.origin.age_of(k) == int(resp_call(self.primary_port, "GET", f"emp:{k}"))
                       for k in range(1, min(self.keys, 50) + 1))
        wait_for(same, timeout, "the database to hold the primary copy's values")

    def cpu_seconds(self) -> Dict[str, float]:
        """CPU time (user + system) of the primary and of the replicas together, so far."""
        import os

        tick = os.sysconf("SC_CLK_TCK")
        out = {"primary": 0.0, "replicas": 0.0}
        for i, p in enumerate(self.procs):
            try:
                fields = Path(f"/proc/{p.pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            out["primary" if i == 0 else "replicas"] += (int(fields[11]) + int(fields[12])) / tick
        return out

    def alive(self) -> bool:
        return all(p.poll() is None for p in self.procs)

    def close(self) -> None:
        for p in reversed(self.procs):
            stop(p)
        import shutil

        shutil.rmtree(self.dir, ignore_errors=True)
