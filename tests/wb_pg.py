"""A private PostgreSQL cluster for the write-behind tests, started as studies/thesis's rig
does: initdb + pg_ctl in a temporary directory, a Unix socket and a TCP port on 127.0.0.1,
run as the ``postgres`` user when the tests run as root (PostgreSQL refuses root)."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

from kit import free_port


def _bin(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


class Postgres:
    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="cairn-wb-pg-"))
        self.data = self.dir / "data"
        self.port = free_port()
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
            self.as_user = ["runuser", "-u", "postgres", "--"]
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self.dsn = f"host=127.0.0.1 port={self.port} dbname=postgres user=postgres"

    def _run(self, *cmd: str) -> None:
        subprocess.run([*self.as_user, *cmd], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, timeout=60)

    def start(self) -> "Postgres":
        for name in ("initdb", "pg_ctl"):
            if not _bin(name):
                raise RuntimeError(f"PostgreSQL's {name} not found")
        if not self.data.exists():
            self._run(_bin("initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust",
                      "--no-sync", "-E", "UTF8", "--locale", "C")
        opts = (f"-k {self.dir} -p {self.port} -c listen_addresses=127.0.0.1 -c fsync=off"
                " -c synchronous_commit=off -c full_page_writes=off")
        self._run(_bin("pg_ctl"), "-D", str(self.data), "-o", opts, "-l",
                  str(self.dir / "log"), "-w", "start")
        return self

    def stop(self) -> None:
        subprocess.run([*self.as_user, _bin("pg_ctl"), "-D", str(self.data), "-m", "immediate",
                        "-w", "stop"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def sql(self, statement: str, params=()) -> list:
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            cur = conn.execute(statement, params)
            return cur.fetchall() if cur.description else []

    def close(self) -> None:
        if self.data.exists():
            self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
