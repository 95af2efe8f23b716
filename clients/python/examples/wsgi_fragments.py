"""A plain WSGI app that caches rendered HTML fragments in cairn, tagged by page and user,
and expires them by tag when a page is edited.

    python examples/wsgi_fragments.py            # serves on http://127.0.0.1:8000
    curl 'http://127.0.0.1:8000/page/5?user=42'  # renders, then serves from the near cache
    curl -X POST http://127.0.0.1:8000/edit/5    # page 5 edited: its fragments go, for everyone
"""

import html
import time
from urllib.parse import parse_qs

import cairn
from cairn import where

PAGE, USER = 1, 2  # tag types: the application picks them


def render_sidebar(page: int, user: int) -> str:
    time.sleep(0.05)  # stands for the database queries and templating worth caching
    return f"<aside>page {page}, for user {user}, rendered at {time.time():.3f}</aside>"


def make_app(client: cairn.Client):
    fragments = client.cache("frag", serializer="str", ttl=600)  # near cache on by default

    def app(environ, start_response):
        method, path = environ["REQUEST_METHOD"], environ.get("PATH_INFO", "/")
        parts = path.strip("/").split("/")
        if method == "POST" and len(parts) == 2 and parts[0] == "edit":
            gone = fragments.delete_by_tag(where(PAGE) == int(parts[1]))  # every process's copy too
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [f"expired {gone} fragments\n".encode()]
        if len(parts) == 2 and parts[0] == "page":
            page = int(parts[1])
            user = int(parse_qs(environ.get("QUERY_STRING", "")).get("user", ["0"])[0])
            sidebar = fragments.get_or_fetch(
                f"sidebar:p{page}:u{user}",
                lambda: render_sidebar(page, user),  # runs once per key, even under a stampede
                tags=[(PAGE, page), (USER, user)],
            )
            body = f"<html><body><h1>Page {page}</h1>{sidebar}</body></html>"
            start_response("200 OK", [("Content-Type", "text/html; charset=utf-8")])
            return [body.encode()]
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found: " + html.escape(path).encode() + b"\n"]

    return app


if __name__ == "__main__":
    from wsgiref.simple_server import make_server

    with cairn.Client("127.0.0.1", 6380) as client:
        make_server("127.0.0.1", 8000, make_app(client)).serve_forever()
