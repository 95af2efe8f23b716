"""One node of the study's web service: a small CRUD API over people, their families and pets.

Reads go through the node's cache (``get_or_fetch``) to PostgreSQL; writes update PostgreSQL and
then invalidate the cached element, as in the thesis. Every database call first waits the added
latency (``--db-latency-ms``, default 10 ms, the thesis's slow memory).

    GET    /people/<id>   the person with family and pets (cached)
    PUT    /people/<id>   a new version of the person (database, then invalidation)
    POST   /people        a new person (database only)
    DELETE /people/<id>   removes the person (database, then invalidation)
    GET    /_stats        the per-request measurements since the last call (JSON), and resets them
    GET    /_health       200 once the node serves (after its prefetch)

Run by ``studies/thesis/run.py``; by hand:
``python studies/thesis/service.py --port 8001 --mode hybrid --cairn 127.0.0.1:6380 --pg "host=/tmp/pg dbname=thesis"``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional

import psycopg

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from caches import MODES, TimedCache, open_cache  # noqa: E402

PERSON_SQL = """
SELECT p.id, p.name, p.age, p.version, f.id, f.name,
       COALESCE((SELECT json_agg(json_build_object('id', t.id, 'name', t.name, 'species', t.species)
                                 ORDER BY t.id)
                 FROM pets t WHERE t.owner_id = p.id), '[]'::json)
FROM people p JOIN families f ON f.id = p.family_id
WHERE p.id = %s
"""
ALL_PEOPLE_SQL = PERSON_SQL.replace("WHERE p.id = %s", "WHERE p.id <= %s")


def person_of(row: Any) -> Dict[str, Any]:
    pid, name, age, version, fid, fname, pets = row
    return {"id": pid, "name": name, "age": age, "version": version,
            "family": {"id": fid, "name": fname}, "pets": pets}


class Database:
    """PostgreSQL with the study's added latency; one connection per server thread."""

    def __init__(self, dsn: str, latency_s: float) -> None:
        self.dsn = dsn
        self.latency_s = latency_s
        self._local = threading.local()

    def _conn(self) -> psycopg.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = psycopg.connect(self.dsn, autocommit=True)
        return conn

    def _slow(self) -> None:
        if self.latency_s > 0:
            time.sleep(self.latency_s)

    def person(self, pid: int) -> Optional[Dict[str, Any]]:
        self._slow()
        row = self._conn().execute(PERSON_SQL, (pid,)).fetchone()
        return person_of(row) if row else None

    def people_up_to(self, last_id: int) -> List[Dict[str, Any]]:
        self._slow()
        return [person_of(r) for r in self._conn().execute(ALL_PEOPLE_SQL, (last_id,))]

    def update(self, pid: int, fields: Dict[str, Any]) -> bool:
        self._slow()
        cur = self._conn().execute(
            "UPDATE people SET version = version + 1, name = COALESCE(%s, name), age = COALESCE(%s, age)"
            " WHERE id = %s", (fields.get("name"), fields.get("age"), pid))
        return cur.rowcount > 0

    def insert(self, fields: Dict[str, Any]) -> int:
        self._slow()
        row = self._conn().execute(
            "INSERT INTO people (name, age, family_id, version) VALUES (%s, %s, %s, 1) RETURNING id",
            (fields.get("name", "new"), fields.get("age", 30), fields.get("family_id", 1))).fetchone()
        return int(row[0])

    def delete(self, pid: int) -> bool:
        self._slow()
        conn = self._conn()
        conn.execute("DELETE FROM pets WHERE owner_id = %s", (pid,))
        return conn.execute("DELETE FROM people WHERE id = %s", (pid,)).rowcount > 0


class Node:
    def __init__(self, args: argparse.Namespace) -> None:
        host, port = args.cairn.rsplit(":", 1)
        self.mode = args.mode
        self.db = Database(args.pg, args.db_latency_ms / 1000.0)
        self.cache = TimedCache(open_cache(args.mode, host, int(port)))
        self.ready = False

    def prefetch(self, role: str, domain: int) -> int:
        """``load``: this node fills the shared cache (and its own); ``warm``: its own only."""
        if role == "none" or (self.mode == "shared" and role == "warm"):
            return 0
        if self.mode == "hybrid" and role == "warm":
            return self.cache.inner.cache.prefetch([str(i) for i in range(1, domain + 1)])
        people = self.db.people_up_to(domain)
        for p in people:
            self.cache.put(str(p["id"]), p)
        if self.mode == "hybrid":  # a write drops the writer's own near entry: warm it again
            self.cache.inner.cache.prefetch([str(p["id"]) for p in people])
        return len(people)


PERSON_PATH = re.compile(r"^/people/(\d+)$")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: each simulated user holds one connection
    disable_nagle_algorithm = True  # headers and body leave in two writes
    node: Node

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _reply(self, status: int, body: Any = None) -> None:
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> Dict[str, Any]:
        n = int(self.headers.get("Content-Length") or 0)
        if n == 0:
            return {}
        body = json.loads(self.rfile.read(n))
        return body if isinstance(body, dict) else {}

    def do_GET(self) -> None:
        m = PERSON_PATH.match(self.path)
        if m:
            pid = int(m.group(1))
            person = self.node.cache.get_or_fetch(m.group(1), lambda: self.node.db.person(pid))
            return self._reply(200 if person else 404, person)
        if self.path == "/_stats":
            reads, writes = self.node.cache.take()
            return self._reply(200, {"mode": self.node.mode, "reads": reads, "writes": writes})
        if self.path == "/_health":
            return self._reply(200 if self.node.ready else 503, {"ready": self.node.ready})
        self._reply(404, {"error": "no such resource"})

    def do_PUT(self) -> None:
        m = PERSON_PATH.match(self.path)
        if not m:
            return self._reply(404, {"error": "no such resource"})
        found = self.node.db.update(int(m.group(1)), self._body())
        self.node.cache.delete(m.group(1))
        self._reply(200 if found else 404, {"updated": found})

    def do_POST(self) -> None:
        if self.path != "/people":
            return self._reply(404, {"error": "no such resource"})
        self._reply(201, {"id": self.node.db.insert(self._body())})

    def do_DELETE(self) -> None:
        m = PERSON_PATH.match(self.path)
        if not m:
            return self._reply(404, {"error": "no such resource"})
        found = self.node.db.delete(int(m.group(1)))
        self.node.cache.delete(m.group(1))
        self._reply(204 if found else 404)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--mode", choices=MODES, required=True)
    ap.add_argument("--cairn", default="127.0.0.1:6380", help="host:port of the cairn server")
    ap.add_argument("--pg", required=True, help="PostgreSQL connection string")
    ap.add_argument("--db-latency-ms", type=float, default=10.0)
    ap.add_argument("--prefetch", choices=("none", "load", "warm"), default="none")
    ap.add_argument("--domain", type=int, default=0, help="ids 1..domain exist (for prefetch)")
    args = ap.parse_args()

    node = Node(args)
    Handler.node = node
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    t0 = time.perf_counter()
    loaded = node.prefetch(args.prefetch, args.domain)
    node.ready = True
    print(f"node :{args.port} {args.mode} ready (prefetch {args.prefetch}: {loaded} in "
          f"{time.perf_counter() - t0:.1f} s)", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        node.cache.close()


if __name__ == "__main__":
    main()
