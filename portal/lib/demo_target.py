"""The demo target: a tiny WSGI site with pages of 1, 2 and 4 KB, served by Gunicorn.

Like the seeds' test pages: fixed sizes, so arms are comparable and content length never varies.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

SIZES = {"/1k": 1024, "/2k": 2048, "/4k": 4096}
_LINE = b"<p>Tollgate demo page: measure what TLS costs.</p>\n"


def _page(size: int) -> bytes:
    head = b"<!doctype html><title>demo</title>\n"
    body = head + _LINE * (size // len(_LINE) + 1)
    return body[:size]


PAGES = {path: _page(size) for path, size in SIZES.items()}
INDEX = (
    b"<!doctype html><title>Tollgate demo target</title><h1>Tollgate demo target</h1><ul>"
    + b"".join(f'<li><a href="{p}">{p}</a> ({n} bytes)</li>'.encode() for p, n in SIZES.items())
    + b"</ul>"
)


def app(environ: dict, start_response: Callable) -> Iterable[bytes]:
    path = environ.get("PATH_INFO", "/")
    if path in PAGES:
        status, ctype, body = "200 OK", "text/html; charset=utf-8", PAGES[path]
    elif path == "/":
        status, ctype, body = "200 OK", "text/html; charset=utf-8", INDEX
    elif path == "/healthz":
        status, ctype, body = "200 OK", "text/plain", b"ok"
    elif path == "/.well-known/tollgate-verification.txt":
        token = os.environ.get("TOLLGATE_DEMO_VERIFICATION", "tollgate-demo")
        status, ctype, body = "200 OK", "text/plain", token.encode()
    else:
        status, ctype, body = "404 Not Found", "text/plain", b"not found"
    start_response(status, [("Content-Type", ctype), ("Content-Length", str(len(body)))])
    return [body]
